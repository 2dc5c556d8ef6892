//! OTLP JSON documents (`{"resourceSpans": …}`, one per line as the
//! Collector's file exporter writes them) read without a `serde_json::Value`
//! tree: a tree of a whole export allocates a map for every attribute and
//! every typed value, and was most of the converter's time.
//!
//! The spans are read borrowed from the line, keeping of each only what the
//! rules read: ids, times, status, events, and each attribute's key with its
//! value as JSON text (decoded later, for the attributes the rules use).
//! Anything outside the usual shape (a key the generic reader would look
//! at, a value of an unexpected type, a repeated key) makes the whole
//! document unreadable here, and `super` reads it the generic way: the two
//! readers never disagree, since this one only takes what it reads exactly
//! as the other does.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Text borrowed from the document where it has no escapes.
#[derive(Clone, Debug, Deserialize)]
#[serde(transparent)]
pub struct Str<'a>(#[serde(borrow)] pub Cow<'a, str>);

/// A value read and dropped. Unlike serde's `IgnoredAny` it parses what it
/// skips as a `Value` would (a number out of range, a lone surrogate are
/// errors), so that this reader takes no line the generic one refuses.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Skip)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
                while map.next_key::<Str>()?.is_some() {
                    map.next_value::<Skip>()?;
                }
                Ok(Skip)
            }
        }
        d.deserialize_any(V)
    }
}

/// Why a document is left to the generic reader (never shown: the generic
/// reader gives its own account of the document).
fn odd<E: de::Error>() -> E {
    E::custom("not the usual OTLP shape")
}

/// A span as the rules read it.
#[derive(Debug)]
pub struct Span<'a> {
    pub trace: Option<Str<'a>>,
    pub span: Option<Str<'a>>,
    pub parent: Option<Str<'a>>,
    /// `startTimeUnixNano`, `endTimeUnixNano`, `status` and `events`,
    /// where present, as the generic reader has them.
    pub fields: Vec<(&'static str, Value)>,
    /// Keys and values, in the document's order.
    pub attributes: Vec<(Str<'a>, Attr<'a>)>,
}

/// An attribute's value.
#[derive(Debug)]
pub enum Attr<'a> {
    /// Missing, null or `{}` (an unset value): no attribute.
    Unset,
    /// A `stringValue` (or `bytesValue`) text.
    Text(Str<'a>),
    /// An `intValue` or `boolValue`, decoded.
    Value(Value),
    /// Any other `AnyValue`, as JSON, for `super::any_value`.
    Any(Value),
}

/// The spans of one `{"resourceSpans": …}` document, or None when it is
/// not in the usual shape (then nothing was read of it).
pub fn spans(text: &str) -> Option<Vec<Span<'_>>> {
    let t = text.trim_start();
    // An array would be taken for a struct's fields in order; documents
    // that are lists are the generic reader's.
    if !t.starts_with('{') {
        return None;
    }
    let doc = serde_json::from_str::<Doc>(text).ok()?;
    // Every value is decoded here, so that a value the generic reader
    // refuses leaves the document to it before anything was read.
    let json = |raw: &RawValue| serde_json::from_str::<Value>(raw.get()).ok();
    let mut out = Vec::with_capacity(doc.0.len());
    for raw in doc.0 {
        let mut fields = Vec::new();
        for (name, v) in [
            ("startTimeUnixNano", raw.start),
            ("endTimeUnixNano", raw.end),
            ("status", raw.status),
            ("events", raw.events),
        ] {
            if let Some(v) = v {
                fields.push((name, json(v)?));
            }
        }
        let mut attributes = Vec::with_capacity(raw.attributes.len());
        for (key, v) in raw.attributes {
            let attr = match v.map(Quick::of) {
                None | Some(Quick::Unset) => Attr::Unset,
                Some(Quick::Text(s)) => Attr::Text(s),
                Some(Quick::Value(v)) => Attr::Value(v),
                Some(Quick::Other) => Attr::Any(json(v?)?),
            };
            attributes.push((key, attr));
        }
        out.push(Span {
            trace: raw.trace,
            span: raw.span,
            parent: raw.parent,
            fields,
            attributes,
        });
    }
    Some(out)
}

/// A span as the document has it.
#[derive(Default)]
struct RawSpan<'a> {
    trace: Option<Str<'a>>,
    span: Option<Str<'a>>,
    parent: Option<Str<'a>>,
    start: Option<&'a RawValue>,
    end: Option<&'a RawValue>,
    status: Option<&'a RawValue>,
    events: Option<&'a RawValue>,
    attributes: Vec<(Str<'a>, Option<&'a RawValue>)>,
}

struct Doc<'a>(Vec<RawSpan<'a>>);

/// `resourceSpans`, `scopeSpans` (or `instrumentationLibrarySpans`) and
/// `spans` as the generic reader takes them: a list, else (null, or absent)
/// nothing; any other type is odd.
struct List<T>(Option<Vec<T>>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_unit<E: de::Error>(self) -> Result<List<T>, E> {
                Ok(List(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(x) = seq.next_element()? {
                    out.push(x);
                }
                Ok(List(Some(out)))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Visit an object's entries with `f` (key, map); a repeated key is odd
/// (the generic reader would keep the last, this one cannot tell which).
fn entries<'de, A, F>(mut map: A, mut f: F) -> Result<(), A::Error>
where
    A: MapAccess<'de>,
    F: FnMut(&str, &mut A) -> Result<(), A::Error>,
{
    let mut seen: Vec<Str<'de>> = Vec::new();
    while let Some(key) = map.next_key::<Str<'de>>()? {
        if seen.iter().any(|k| k.0 == key.0) {
            return Err(odd());
        }
        f(&key.0, &mut map)?;
        seen.push(key);
    }
    Ok(())
}

macro_rules! object {
    ($ty:ident, $expect:literal, |$map:ident| $body:block) => {
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty<'de>;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, $map: A) -> Result<$ty<'de>, A::Error> {
                        $body
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

object!(Doc, "an OTLP document", |map| {
    let mut spans = None;
    entries(map, |key, map| {
        if key == "resourceSpans" {
            // Null is not a list of spans: another shape.
            spans = Some(map.next_value::<List<Resource>>()?.0.ok_or_else(odd)?);
        } else {
            map.next_value::<Skip>()?;
        }
        Ok(())
    })?;
    // Without `resourceSpans` (or with null) the document is another shape.
    match spans {
        Some(resources) => Ok(Doc(resources.into_iter().flat_map(|r| r.0).collect())),
        None => Err(odd()),
    }
});

struct Resource<'a>(Vec<RawSpan<'a>>);

object!(Resource, "resource spans", |map| {
    let mut scopes: Option<List<Scope>> = None;
    let mut legacy: Option<List<Scope>> = None;
    entries(map, |key, map| {
        match key {
            "scopeSpans" => scopes = Some(map.next_value()?),
            "instrumentationLibrarySpans" => legacy = Some(map.next_value()?),
            _ => {
                map.next_value::<Skip>()?;
            }
        }
        Ok(())
    })?;
    // As the generic reader: `scopeSpans` when present, whatever it holds.
    let list = match (scopes, legacy) {
        (Some(s), _) => s.0,
        (None, Some(l)) => l.0,
        (None, None) => None,
    };
    Ok(Resource(
        list.into_iter().flatten().flat_map(|s| s.0).collect(),
    ))
});

struct Scope<'a>(Vec<RawSpan<'a>>);

object!(Scope, "scope spans", |map| {
    let mut spans: Option<List<RawSpan>> = None;
    entries(map, |key, map| {
        if key == "spans" {
            spans = Some(map.next_value()?);
        } else {
            map.next_value::<Skip>()?;
        }
        Ok(())
    })?;
    Ok(Scope(spans.and_then(|s| s.0).unwrap_or_default()))
});

/// A span id: text (empty is none), or null; a number is odd.
fn id<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Str<'de>>, A::Error> {
    let id: Option<Str> = map.next_value()?;
    Ok(id.filter(|s| !s.0.is_empty()))
}

object!(RawSpan, "a span", |map| {
    let mut span = RawSpan::default();
    entries(map, |key, map| {
        match key {
            "traceId" => span.trace = id(map)?,
            "spanId" => span.span = id(map)?,
            "parentSpanId" => span.parent = id(map)?,
            "startTimeUnixNano" => span.start = Some(map.next_value()?),
            "endTimeUnixNano" => span.end = Some(map.next_value()?),
            "status" => span.status = Some(map.next_value()?),
            "events" => span.events = Some(map.next_value()?),
            "attributes" => {
                // A list of key/value objects; null is none. An object
                // (Phoenix's nesting) is the generic reader's.
                let list: Option<Vec<KeyValue>> = map.next_value()?;
                span.attributes = list
                    .unwrap_or_default()
                    .into_iter()
                    .map(|kv| (kv.key, kv.value))
                    .collect();
            }
            // Read by no rule.
            "name"
            | "kind"
            | "traceState"
            | "flags"
            | "links"
            | "droppedAttributesCount"
            | "droppedEventsCount"
            | "droppedLinksCount" => {
                map.next_value::<Skip>()?;
            }
            // Any other key may be one the generic reader looks at.
            _ => return Err(odd()),
        }
        Ok(())
    })?;
    Ok(span)
});

struct KeyValue<'a> {
    key: Str<'a>,
    value: Option<&'a RawValue>,
}

object!(KeyValue, "a key and a value", |map| {
    let mut key = None;
    let mut value = None;
    entries(map, |k, map| {
        match k {
            "key" => key = Some(map.next_value::<Str>()?),
            "value" => value = Some(map.next_value::<&RawValue>()?),
            _ => {
                map.next_value::<Skip>()?;
            }
        }
        Ok(())
    })?;
    match key {
        Some(key) => Ok(KeyValue { key, value }),
        None => Err(odd()),
    }
});

/// An OTLP `AnyValue` of the common kinds, read from its JSON text.
enum Quick<'a> {
    /// null, or `{}` (an unset value): no attribute.
    Unset,
    /// `stringValue` (or `bytesValue`) text.
    Text(Str<'a>),
    /// `intValue` as decimal text or a JSON integer, or `boolValue`.
    Value(serde_json::Value),
    /// Anything else, decoded as JSON.
    Other,
}

impl<'a> Quick<'a> {
    fn of(raw: &'a RawValue) -> Quick<'a> {
        serde_json::from_str::<Quick>(raw.get()).unwrap_or(Quick::Other)
    }
}

/// The inner value of a kind: text, an integer, a boolean, or other.
enum Inner<'a> {
    Text(Str<'a>),
    Int(serde_json::Value),
    Bool(bool),
    Other,
}

impl<'de> Deserialize<'de> for Inner<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Inner<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Inner<'de>, E> {
                Ok(Inner::Text(Str(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Inner<'de>, E> {
                Ok(Inner::Text(Str(Cow::Owned(s.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Inner<'de>, E> {
                Ok(Inner::Int(n.into()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Inner<'de>, E> {
                Ok(Inner::Int(n.into()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Inner<'de>, E> {
                Ok(Inner::Other)
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Inner<'de>, E> {
                Ok(Inner::Bool(b))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Inner<'de>, E> {
                Ok(Inner::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Inner<'de>, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Inner::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Inner<'de>, A::Error> {
                while map.next_entry::<Skip, Skip>()?.is_some() {}
                Ok(Inner::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Quick<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Quick<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an OTLP value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Quick<'de>, E> {
                Ok(Quick::Unset)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Quick<'de>, A::Error> {
                // The generic reader takes the first entry's kind.
                let Some(kind) = map.next_key::<Str>()? else {
                    return Ok(Quick::Unset);
                };
                let inner: Inner = map.next_value()?;
                let quick = match (&*kind.0, inner) {
                    ("stringValue" | "bytesValue", Inner::Text(s)) => Quick::Text(s),
                    ("boolValue", Inner::Bool(b)) => Quick::Value(b.into()),
                    ("intValue", Inner::Int(n)) => Quick::Value(n),
                    ("intValue", Inner::Text(s)) => match s.0.parse::<i64>() {
                        Ok(n) => Quick::Value(n.into()),
                        Err(_) => Quick::Other,
                    },
                    _ => Quick::Other,
                };
                // A repeated first key would change the value it holds.
                while let Some(k) = map.next_key::<Str>()? {
                    map.next_value::<Skip>()?;
                    if k.0 == kind.0 {
                        return Ok(Quick::Other);
                    }
                }
                Ok(quick)
            }
        }
        d.deserialize_any(V)
    }
}
