//! OpenTelemetry spans of model calls (GenAI semantic conventions,
//! OpenInference, Vercel AI SDK), in the shapes tools hand them out: OTLP
//! JSON (`{"resourceSpans": …}`, one document per line as the Collector's
//! file exporter writes it, or one per file), single protojson spans,
//! Jaeger's JSON download, flat span lists (`{"spans": [...]}` with
//! `start_time`), Phoenix span JSON and JavaScript `ReadableSpan` dumps.
//!
//! A span is a model call when `gen_ai.operation.name` is a generation
//! (chat, text_completion, generate_content), else when OpenInference's
//! span kind is LLM, else when the Vercel `ai.operationId` is a provider
//! call (`….doGenerate`, `….doStream`), else when it reports token usage.
//! A call with another call under it (a client span over a gateway's) is a
//! wrapper and is left out; so is the same call exported twice (same
//! trace, start, end, response id, model and token counts).
//!
//! Spans are gathered per input: wrappers and duplicates are found within
//! one input, and the calls of one trace (or session) are given `after`
//! and `delay` by [`super::graph`] when every input was read.
//!
//! What an input holds until its end is kept small: per span its id and
//! its parent's as 128-bit hashes, per model call its request (no
//! attribute map), in blocks that are freed as the calls are handed on.
//! OTLP JSON lines are read by [`otlp`] without a tree of the document.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::chat::{openai_messages, output_text, parts_text};
use super::fields::{Fields, Object, count, instant, number, present, string};
use super::{Ctx, Fate, Head, Prompt, Request};
use crate::error::{Error, FieldError, Location, Result, quote_value};
use crate::text::plural;

mod otlp;
mod pb;

/// OTLP JSON, Jaeger downloads, flat span lists, Vercel and Phoenix spans.
pub fn sniff(head: &Head) -> bool {
    if !head.is_json() {
        return head_is_protobuf(head);
    }
    let otlp = head.contains_any(&[
        "\"resourceSpans\"",
        "\"scopeSpans\"",
        "\"startTimeUnixNano\"",
    ]);
    let jaeger = head.contains("\"spanID\"") && head.contains("\"operationName\"");
    let vercel = head.contains("\"spanContext\"") && head.contains("\"ai.operationId\"");
    let flat = head.contains("\"span_id\"")
        && head.contains("\"start_time\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference.", "\"span_kind\""]);
    let protojson = head.contains("\"kind\"")
        && head.contains("\"attributes\"")
        && head.contains("\"key\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference."]);
    otlp || jaeger || vercel || flat || protojson
}

/// OTLP protobuf, as far as the head's text shows it (the head's leading
/// whitespace, which may be the first tag byte, is trimmed): binary bytes
/// JSON never holds, and attribute names of spans; or a Collector file
/// export compressed message by message (see [`pb::decode`]): a 4-byte
/// size, then a zstd frame's magic bytes (28 b5 2f fd, which the head's
/// text shows as `(`, a replacement character, `/` and another).
fn head_is_protobuf(head: &Head) -> bool {
    let spans = head.contains_any(&["gen_ai.", "llm.", "openinference.", "service.name"])
        && head
            .text
            .bytes()
            .any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
    // Four size bytes, each at most 3 bytes of text when replaced.
    let zstd_framed = head
        .text
        .find("(\u{fffd}/\u{fffd}")
        .is_some_and(|at| at <= 12);
    spans || zstd_framed
}

/// What one input held, for the note at its end.
#[derive(Default)]
struct Tally {
    spans: u64,
    calls: u64,
    wrappers: u64,
    duplicates: u64,
    no_output: u64,
    /// Media parts (images, audio…) of prompts, which have no text to
    /// hash or send: how many, in how many calls, of which kinds.
    media_parts: u64,
    media_calls: u64,
    media_kinds: BTreeMap<String, u64>,
}

/// A model call read, before wrappers and duplicates are left out: the
/// few fields its request is made of (an input may hold hundreds of
/// thousands; a whole `Request` each was most of the memory).
struct Call {
    /// The span's line in the input.
    line: u64,
    start: Option<i64>,
    end: Option<i64>,
    input: Option<u64>,
    /// The output count the span reports.
    output: Option<u64>,
    /// What `output_length` starts as (the count, else max_tokens, else 0).
    output_length: u64,
    max_tokens: Option<u64>,
    cached: Option<u64>,
    ttft_ms: Option<f64>,
    failed: bool,
    model: Text,
    session: Text,
    id: Text,
    /// The trace, only where the request needs it (see [`call`]).
    trace: Text,
    prompt: Option<Box<Prompt>>,
    output_text: Text,
    /// Its span id and its parent's, as [`id_key`]s (0: none).
    span: u128,
    parent: u128,
    /// What makes two exports one call, hashed (128 bits: a collision is
    /// as likely as between random numbers; 0: no start, never one).
    dup_key: u128,
}

/// A text of a call, in its input's [`Texts`] (`len` NONE: none).
#[derive(Clone, Copy)]
struct Text {
    at: usize,
    len: u32,
}

impl Text {
    const NONE: Text = Text {
        at: 0,
        len: u32::MAX,
    };
}

/// The texts of an input's calls, one after another: a string each (and
/// its allocation's overhead) was a third of what a call held.
#[derive(Default)]
struct Texts(String);

impl Texts {
    fn add(&mut self, text: Option<&str>) -> Text {
        match text {
            Some(t) if t.len() < u32::MAX as usize => {
                let at = self.0.len();
                self.0.push_str(t);
                Text {
                    at,
                    len: t.len() as u32,
                }
            }
            // Over 4 GiB (never a real attribute): as good as none.
            _ => Text::NONE,
        }
    }

    fn get(&self, t: Text) -> Option<&str> {
        (t.len != u32::MAX).then(|| &self.0[t.at..t.at + t.len as usize])
    }
}

/// A span id as a 128-bit hash: the ids of a large export take 16 bytes
/// each (a collision is as likely as between random numbers).
fn id_key(id: &str) -> u128 {
    // 0 stands for no id.
    xxhash_rust::xxh3::xxh3_128(id.as_bytes()).max(1)
}

/// A span's attributes that the rules read, in the span's order (a later
/// one of the same name replaces the value, as in a map). Found by a
/// linear scan: a span has a handful, and the rules look up some 60 names
/// a span, most of them absent, where a map hashed each name.
#[derive(Default)]
struct Attrs<'a>(Vec<(Cow<'a, str>, Value)>);

impl<'a> Attrs<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }
}

impl Fields for Attrs<'_> {
    fn field(&self, field: &str) -> Option<&Value> {
        self.get(field)
    }
}

impl From<Object> for Attrs<'static> {
    fn from(map: Object) -> Self {
        Attrs(map.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect())
    }
}

/// Calls in blocks of this many, so that each block is freed once its
/// calls are handed on (the whole input's calls and the converter's list of
/// them never take memory at once).
const BLOCK: usize = 4096;

/// Per input: the calls, and every span's parent (to find wrappers).
#[derive(Default)]
struct State {
    calls: Vec<Vec<Call>>,
    texts: Texts,
    parents: HashMap<u128, u128>,
    tally: Tally,
    /// The whole text, for single-document inputs (to find a span's line).
    text: Option<String>,
    first_no_output: Option<(Location, String, u64)>,
}

pub fn read(mut reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut st = State::default();
    let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
    if source.ends_with(".pb") || pb::looks_like(&head[..head.len().min(64 * 1024)]) {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&*source, e))?;
        let loc = Location::new(source.clone(), 1);
        match pb::decode(&bytes) {
            Ok(messages) => {
                drop(bytes);
                for m in messages {
                    match m {
                        pb::Frame::Proto(m) => document(ctx, &mut st, &loc, pb::to_json(&m))?,
                        pb::Frame::Json(text) => {
                            if !fast_document(ctx, &mut st, &loc, &text)? {
                                match serde_json::from_str::<Value>(&text) {
                                    Ok(doc) => document(ctx, &mut st, &loc, doc)?,
                                    Err(e) => ctx.bad(malformed(&loc, &e))?,
                                }
                            }
                        }
                    }
                }
            }
            Err(msg) => ctx.bad(FieldError::record(msg).at(&loc))?,
        }
        return finish_input(ctx, st, &source);
    }
    let mut first = String::new();
    let mut line_no = 0u64;
    // Skip blank lines; the first line that is a JSON value on its own
    // makes the input one document per line.
    loop {
        first.clear();
        let n = reader
            .read_line(&mut first)
            .map_err(|e| Error::io(&*source, e))?;
        line_no += 1;
        if n == 0 || !first.trim().is_empty() {
            break;
        }
    }
    let first_line = line_no;
    let first_loc = Location::new(source.clone(), first_line);
    let per_line = fast_document(ctx, &mut st, &first_loc, &first)?
        || match serde_json::from_str::<Value>(&first) {
            Ok(doc) => {
                document(ctx, &mut st, &first_loc, doc)?;
                true
            }
            Err(_) => false,
        };
    match per_line {
        true => {
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader
                    .read_line(&mut line)
                    .map_err(|e| Error::io(&*source, e))?;
                if n == 0 {
                    break;
                }
                line_no += 1;
                if line.trim().is_empty() {
                    continue;
                }
                let loc = Location::new(source.clone(), line_no);
                if fast_document(ctx, &mut st, &loc, &line)? {
                    continue;
                }
                match serde_json::from_str::<Value>(&line) {
                    Ok(doc) => document(ctx, &mut st, &loc, doc)?,
                    Err(e) => ctx.bad(malformed(&loc, &e))?,
                }
            }
        }
        false => {
            let mut text = first;
            reader
                .read_to_string(&mut text)
                .map_err(|e| Error::io(&*source, e))?;
            let base = first_line - 1;
            match serde_json::from_str::<Value>(&text) {
                Ok(doc) => {
                    st.text = Some(text);
                    let loc = Location::new(source.clone(), first_line);
                    document(ctx, &mut st, &loc, doc)?;
                }
                Err(e) => {
                    let loc = Location {
                        source: source.clone(),
                        line: base + e.line() as u64,
                        column: Some(e.column() as u64),
                    };
                    ctx.bad(malformed(&loc, &e))?;
                }
            }
        }
    }
    finish_input(ctx, st, &source)
}

fn malformed(loc: &Location, e: &serde_json::Error) -> Error {
    let mut loc = loc.clone();
    if loc.column.is_none() && e.line() == 1 {
        loc.column = Some(e.column() as u64);
    }
    FieldError::record(format!("malformed JSON: {e}")).at(&loc)
}

/// One JSON document: any of the shapes in the module's description.
fn document(ctx: &mut Ctx, st: &mut State, loc: &Location, doc: Value) -> Result<()> {
    match doc {
        Value::Array(items) => {
            for item in items {
                document(ctx, st, loc, item)?;
            }
            Ok(())
        }
        Value::Object(mut obj) => {
            if let Some(Value::Array(rs)) = obj.remove("resourceSpans") {
                for r in rs {
                    let scopes = r
                        .get("scopeSpans")
                        .or_else(|| r.get("instrumentationLibrarySpans"))
                        .and_then(Value::as_array);
                    for s in scopes.into_iter().flatten() {
                        let spans = s.get("spans").and_then(Value::as_array);
                        for span in spans.into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                }
                return Ok(());
            }
            if let Some(Value::Array(data)) = obj.get("data") {
                // Jaeger: {"data": [{"traceID", "spans", "processes"}]}.
                if data.iter().all(|t| t.get("spans").is_some()) {
                    for t in data {
                        for span in t["spans"].as_array().into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                    return Ok(());
                }
            }
            if let Some(Value::Array(spans)) = obj.get("spans") {
                for span in spans {
                    one_span(ctx, st, loc, span)?;
                }
                return Ok(());
            }
            let is_span = [
                "spanId",
                "span_id",
                "spanID",
                "spanContext",
                "context",
                "name",
            ]
            .iter()
            .any(|k| obj.contains_key(*k));
            if is_span {
                return one_span(ctx, st, loc, &Value::Object(obj));
            }
            let keys: Vec<&str> = obj.keys().map(String::as_str).take(5).collect();
            ctx.bad(
                FieldError::record(format!(
                    "not an OpenTelemetry document or span (keys: {})",
                    keys.join(", ")
                ))
                .at(loc),
            )
        }
        other => ctx.bad(
            FieldError::record(format!(
                "expected a JSON object of spans, found {}",
                quote_value(&other.to_string())
            ))
            .at(loc),
        ),
    }
}

/// One OTLP JSON document read by [`otlp`]; false when it is not in the
/// shape that reader takes (then nothing was read, and [`document`] reads
/// it). Every span goes through the rules as [`one_span`]'s would.
fn fast_document(ctx: &mut Ctx, st: &mut State, loc: &Location, text: &str) -> Result<bool> {
    let Some(spans) = otlp::spans(text) else {
        return Ok(false);
    };
    for span in spans {
        st.tally.spans += 1;
        let ids = Ids {
            span: span.span.map(|s| s.0),
            parent: span.parent.map(|s| s.0),
            trace: span.trace.map(|s| s.0),
        };
        let loc = span_loc(st, loc, ids.span.as_deref());
        if let (Some(id), Some(parent)) = (&ids.span, &ids.parent) {
            st.parents.insert(id_key(id), id_key(parent));
        }
        // Its four fields at most, each once.
        let obj = Attrs(
            span.fields
                .into_iter()
                .map(|(name, v)| (Cow::Borrowed(name), v))
                .collect(),
        );
        let result = fast_attributes(span.attributes)
            .and_then(|attrs| call(&obj, &attrs, &ids, &loc, st, ctx));
        if let Err(e) = result {
            let who = ids.span.as_deref().unwrap_or("without id");
            ctx.bad(FieldError::new(e.field, format!("span {who}: {}", e.msg)).at(&loc))?;
        }
    }
    Ok(true)
}

/// The attributes the rules read, as [`attributes`] has them (every value
/// is still checked, so that a bad one is the same error).
fn fast_attributes<'a>(
    list: Vec<(otlp::Str<'a>, otlp::Attr<'a>)>,
) -> std::result::Result<Attrs<'a>, FieldError> {
    let mut out = Attrs::default();
    for (key, attr) in list {
        let key = key.0;
        let wanted = read_by_rules(&key);
        let value = match attr {
            otlp::Attr::Unset => None,
            otlp::Attr::Text(s) => wanted.then(|| Value::String(s.0.into_owned())),
            otlp::Attr::Value(v) => wanted.then_some(v),
            otlp::Attr::Any(v) => any_value(&key, &v)?.filter(|_| wanted),
        };
        if let Some(v) = value {
            out.insert(key, v);
        }
    }
    Ok(out)
}

/// The line a span is on: its id's first occurrence in a single-document
/// input, else the document's line.
fn span_loc(st: &State, loc: &Location, id: Option<&str>) -> Location {
    if let (Some(text), Some(id)) = (&st.text, id) {
        if let Some(at) = text.find(&format!("\"{id}\"")) {
            let line = loc.line + text[..at].bytes().filter(|&b| b == b'\n').count() as u64;
            return Location::new(loc.source.clone(), line);
        }
    }
    loc.clone()
}

fn one_span(ctx: &mut Ctx, st: &mut State, loc: &Location, span: &Value) -> Result<()> {
    st.tally.spans += 1;
    let Some(obj) = span.as_object() else {
        return ctx.bad(
            FieldError::record(format!(
                "expected a span object, found {}",
                quote_value(&span.to_string())
            ))
            .at(loc),
        );
    };
    let ids = Ids::of(obj);
    let loc = span_loc(st, loc, ids.span.as_deref());
    if let (Some(id), Some(parent)) = (&ids.span, &ids.parent) {
        st.parents.insert(id_key(id), id_key(parent));
    }
    let who = ids.span.as_deref().unwrap_or("without id");
    let result =
        attributes(obj).and_then(|attrs| call(obj, &Attrs::from(attrs), &ids, &loc, st, ctx));
    match result {
        Ok(()) => Ok(()),
        Err(e) => ctx.bad(FieldError::new(e.field, format!("span {who}: {}", e.msg)).at(&loc)),
    }
}

/// A span's identity, under each shape's names.
struct Ids<'a> {
    span: Option<Cow<'a, str>>,
    parent: Option<Cow<'a, str>>,
    trace: Option<Cow<'a, str>>,
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Ids<'static> {
    fn of(obj: &Object) -> Ids<'static> {
        let ctx = obj.get("spanContext").or_else(|| obj.get("context"));
        let in_ctx = |k: &str| ctx.and_then(|c| c.get(k));
        let span = text_of(obj.get("spanId"))
            .or_else(|| text_of(obj.get("span_id")))
            .or_else(|| text_of(obj.get("spanID")))
            .or_else(|| text_of(in_ctx("spanId")))
            .or_else(|| text_of(in_ctx("span_id")));
        let trace = text_of(obj.get("traceId"))
            .or_else(|| text_of(obj.get("trace_id")))
            .or_else(|| text_of(obj.get("traceID")))
            .or_else(|| text_of(in_ctx("traceId")))
            .or_else(|| text_of(in_ctx("trace_id")));
        let jaeger_parent = obj
            .get("references")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("refType").and_then(Value::as_str) == Some("CHILD_OF"))
            })
            .and_then(|r| text_of(r.get("spanID")));
        let parent = text_of(obj.get("parentSpanId"))
            .or_else(|| text_of(obj.get("parent_span_id")))
            .or_else(|| text_of(obj.get("parent_id")))
            .or_else(|| text_of(obj.get("parentSpanContext").and_then(|c| c.get("spanId"))))
            .or(jaeger_parent);
        Ids {
            span: span.map(Cow::Owned),
            parent: parent.map(Cow::Owned),
            trace: trace.map(Cow::Owned),
        }
    }
}

/// A span's attributes as one flat object: OTLP key/value lists (typed
/// values decoded, 64-bit integers exactly), Jaeger tags, or plain objects
/// (nested objects flattened to dotted names, as Phoenix nests them).
fn attributes(obj: &Object) -> std::result::Result<Object, FieldError> {
    let mut out = Map::new();
    if let Some(Value::Array(tags)) = obj.get("tags") {
        for t in tags {
            let Some(key) = t.get("key").and_then(Value::as_str) else {
                continue;
            };
            let v = t.get("value").cloned().unwrap_or(Value::Null);
            let v = match (t.get("type").and_then(Value::as_str), &v) {
                (Some("int64"), Value::String(s)) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .map_err(|_| bad_value(key, &v))?,
                (Some("float64"), Value::String(s)) => s
                    .parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                    .ok_or_else(|| bad_value(key, &v))?,
                _ => v,
            };
            out.insert(key.to_string(), v);
        }
        return Ok(out);
    }
    match obj.get("attributes") {
        Some(Value::Array(kvs)) => {
            for kv in kvs {
                let Some(key) = kv.get("key").and_then(Value::as_str) else {
                    return Err(FieldError::new(
                        "attributes",
                        format!(
                            "expected {{\"key\", \"value\"}} objects, found {}",
                            quote_value(&kv.to_string())
                        ),
                    ));
                };
                if let Some(v) = any_value(key, kv.get("value").unwrap_or(&Value::Null))? {
                    out.insert(key.to_string(), v);
                }
            }
        }
        Some(Value::Object(map)) => flatten("", map, &mut out),
        None | Some(Value::Null) => {}
        Some(other) => {
            return Err(FieldError::new(
                "attributes",
                format!(
                    "expected an object or a list, found {}",
                    quote_value(&other.to_string())
                ),
            ));
        }
    }
    Ok(out)
}

fn flatten(prefix: &str, map: &Object, out: &mut Object) {
    for (k, v) in map {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) => flatten(&key, inner, out),
            other => {
                out.insert(key, other.clone());
            }
        }
    }
}

fn bad_value(key: &str, v: &Value) -> FieldError {
    FieldError::new(
        key,
        format!("unreadable value {}", quote_value(&v.to_string())),
    )
}

/// An OTLP `AnyValue`; None for an empty one (protojson leaves unset
/// values as `{}`).
fn any_value(key: &str, v: &Value) -> std::result::Result<Option<Value>, FieldError> {
    let Some(obj) = v.as_object() else {
        return match v {
            Value::Null => Ok(None),
            other => Err(bad_value(key, other)),
        };
    };
    let Some((kind, inner)) = obj.iter().next() else {
        return Ok(None);
    };
    let value = match kind.as_str() {
        "stringValue" | "bytesValue" => inner.clone(),
        "boolValue" => inner.clone(),
        // 64-bit integers come as strings in protojson: read them exactly.
        "intValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "doubleValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "arrayValue" => {
            let mut items = Vec::new();
            for item in values(inner) {
                if let Some(v) = any_value(key, item)? {
                    items.push(v);
                }
            }
            Value::Array(items)
        }
        "kvlistValue" => {
            let mut map = Map::new();
            for kv in values(inner) {
                if let (Some(k), Some(v)) = (kv.get("key").and_then(Value::as_str), kv.get("value"))
                {
                    if let Some(v) = any_value(key, v)? {
                        map.insert(k.to_string(), v);
                    }
                }
            }
            Value::Object(map)
        }
        other => {
            return Err(FieldError::new(
                key,
                format!("unknown attribute type `{other}`"),
            ));
        }
    };
    Ok(Some(value))
}

/// The `values` of an `arrayValue` or `kvlistValue` (none when absent).
fn values(inner: &Value) -> impl Iterator<Item = &Value> {
    inner
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn first_string(attrs: &Attrs, keys: &[&str]) -> std::result::Result<Option<String>, FieldError> {
    for k in keys {
        if let Some(s) = string(attrs, k)? {
            return Ok(Some(s));
        }
    }
    Ok(None)
}

fn first_count(attrs: &Attrs, keys: &[&str]) -> std::result::Result<Option<u64>, FieldError> {
    for k in keys {
        if let Some(n) = count(attrs, k)? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

const INPUT: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
];
const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
];
const CACHED: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.input_token_details.cached_read_tokens",
    "gen_ai.usage.input_token_details.cache_read",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.cachedInputTokens",
];
const MODEL: &[&str] = &[
    "gen_ai.response.model",
    "llm.model_name",
    "gen_ai.request.model",
    "ai.response.model",
    "ai.model.id",
    // Traceloop and its forks write "unknown" above and the name here.
    "traceloop.association.properties.ls_model_name",
    "ioa_observe.association.properties.ls_model_name",
];
const SESSION: &[&str] = &[
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "exgentic.session.id",
];
const GENERATIONS: &[&str] = &[
    "chat",
    "text_completion",
    "generate_content",
    "completion",
    "responses",
];
const MAX_TOKENS: &[&str] = &[
    "gen_ai.request.max_tokens",
    "llm.invocation_parameters.max_tokens",
];
const RESPONSE_ID: &[&str] = &["gen_ai.response.id", "ai.response.id"];
/// The generated text, for a call without an output count (where a
/// JSON value, read by [`output_text`]).
const OUTPUT_TEXT: &[&str] = &[
    "gen_ai.output.messages",
    "output.value",
    "ai.response.text",
    "gen_ai.output.text",
];
/// `PREFIX.N.SUFFIX` lists of messages: the prompt's, then the output's.
const INDEXED_PROMPT: &[(&str, &str, &str)] = &[
    ("gen_ai.prompt.", ".role", ".content"),
    ("llm.input_messages.", ".message.role", ".message.content"),
];
const INDEXED_OUTPUT: &[(&str, &str, &str)] = &[
    ("gen_ai.completion.", ".role", ".content"),
    ("llm.output_messages.", ".message.role", ".message.content"),
];

/// Whether a rule reads the attribute `key` (the lists above and the
/// names in the rules below): what the OTLP reader keeps of a span.
fn read_by_rules(key: &str) -> bool {
    const OTHERS: &[&str] = &[
        "gen_ai.operation.name",
        "openinference.span.kind",
        "ai.operationId",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.server.time_to_first_token",
        "gen_ai.response.time_to_first_token",
        "ai.response.msToFirstChunk",
        "otel.status_code",
        "error",
        "error.type",
        "gen_ai.system_instructions",
        "gen_ai.input.messages",
        "ai.prompt.messages",
        "input.value",
        "gen_ai.tool.definitions",
    ];
    [
        INPUT,
        OUTPUT,
        CACHED,
        MODEL,
        SESSION,
        MAX_TOKENS,
        RESPONSE_ID,
        OUTPUT_TEXT,
        OTHERS,
    ]
    .iter()
    .any(|list| list.contains(&key))
        || INDEXED_PROMPT
            .iter()
            .chain(INDEXED_OUTPUT)
            .any(|(prefix, _, _)| key.starts_with(prefix))
}

/// Whether a span is a model call (see the module's description).
fn is_call<O: Fields>(obj: &O, attrs: &Attrs) -> bool {
    if let Some(Value::String(op)) = present(attrs, "gen_ai.operation.name") {
        return GENERATIONS.contains(&op.as_str());
    }
    let kind = present(attrs, "openinference.span.kind").or_else(|| present(obj, "span_kind"));
    if let Some(Value::String(k)) = kind {
        return k.eq_ignore_ascii_case("LLM");
    }
    if let Some(Value::String(op)) = present(attrs, "ai.operationId") {
        return op.ends_with(".doGenerate") || op.ends_with(".doStream");
    }
    INPUT
        .iter()
        .chain(OUTPUT)
        .any(|k| present(attrs, k).is_some())
}

/// Epoch nanoseconds: an integer (or integer text: 19 digits do not fit a
/// double), a `[seconds, nanoseconds]` pair, or a date-time.
fn time_ns<O: Fields>(obj: &O, field: &str) -> std::result::Result<Option<i64>, FieldError> {
    let Some(v) = present(obj, field) else {
        return Ok(None);
    };
    let bad = || {
        FieldError::new(
            field,
            format!("expected a time, found {}", quote_value(&v.to_string())),
        )
    };
    match v {
        Value::Number(n) => n.as_i64().map(Some).ok_or_else(bad),
        Value::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse::<i64>().map(Some).map_err(|_| bad())
        }
        Value::Array(pair) if pair.len() == 2 => match (pair[0].as_i64(), pair[1].as_i64()) {
            (Some(s), Some(ns)) => s
                .checked_mul(1_000_000_000)
                .and_then(|x| x.checked_add(ns))
                .map(Some)
                .ok_or_else(bad),
            _ => Err(bad()),
        },
        Value::String(_) if !field.ends_with("UnixNano") => {
            instant(obj, field).map(|t| t.map(|(ns, _)| ns))
        }
        _ => Err(bad()),
    }
}

/// A time in microseconds (Jaeger's), as nanoseconds; not a token count,
/// so not under the token limit.
fn micros_as_ns<O: Fields>(obj: &O, field: &str) -> std::result::Result<Option<i64>, FieldError> {
    let Some(us) = time_ns(obj, field)? else {
        return Ok(None);
    };
    us.checked_mul(1000)
        .filter(|ns| *ns >= 0)
        .map(Some)
        .ok_or_else(|| {
            FieldError::new(
                field,
                format!("{us} µs is not a time this side of the year 2262"),
            )
        })
}

/// A time under OTLP's name, where 0 is unset, else under the first of
/// the other shapes' names that is present.
fn time_named<O: Fields>(
    obj: &O,
    otlp: &str,
    others: [&str; 2],
) -> std::result::Result<Option<i64>, FieldError> {
    Ok(match time_ns(obj, otlp)? {
        Some(0) => None,
        Some(t) => Some(t),
        None => match time_ns(obj, others[0])? {
            Some(t) => Some(t),
            None => time_ns(obj, others[1])?,
        },
    })
}

/// Start and end, epoch ns, under each shape's names.
fn times<O: Fields>(obj: &O) -> std::result::Result<(Option<i64>, Option<i64>), FieldError> {
    if obj.field("spanID").is_some() {
        // Jaeger: microseconds, and a duration instead of an end.
        let start = micros_as_ns(obj, "startTime")?;
        let dur = micros_as_ns(obj, "duration")?;
        return Ok((start, start.zip(dur).map(|(s, d)| s + d)));
    }
    let start = time_named(obj, "startTimeUnixNano", ["startTime", "start_time"])?;
    let end = time_named(obj, "endTimeUnixNano", ["endTime", "end_time"])?;
    Ok((start, end))
}

/// A naive date-time among the span's times, for the one warning.
fn naive_time<O: Fields>(obj: &O) -> Option<(&'static str, String)> {
    for field in ["start_time", "startTime"] {
        if let Some(Value::String(s)) = present(obj, field) {
            if s.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            if let Ok(Some((_, Some(text)))) = instant(obj, field) {
                return Some((field, text));
            }
        }
    }
    None
}

fn is_error<O: Fields>(obj: &O, attrs: &Attrs) -> bool {
    let status = obj.field("status");
    let code = status
        .and_then(|s| s.get("code").or_else(|| s.get("status_code")))
        .or_else(|| obj.field("status_code"));
    let code_error = match code {
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        Some(Value::String(s)) => {
            matches!(
                s.as_str(),
                "STATUS_CODE_ERROR" | "ERROR" | "Error" | "error" | "2"
            )
        }
        _ => false,
    };
    let tag_error = matches!(present(attrs, "otel.status_code"), Some(Value::String(s)) if s.eq_ignore_ascii_case("error"))
        || matches!(present(attrs, "error"), Some(Value::Bool(true)));
    code_error || tag_error || present(attrs, "error.type").is_some()
}

/// Time to first token, ms: an attribute (each in its own unit), else a
/// first-token event with a time.
fn ttft_ms<O: Fields>(
    obj: &O,
    attrs: &Attrs,
    start: Option<i64>,
) -> std::result::Result<Option<f64>, FieldError> {
    if let Some(s) = number(attrs, "gen_ai.response.time_to_first_chunk")? {
        return Ok(Some(s * 1000.0));
    }
    if let Some(s) = number(attrs, "gen_ai.server.time_to_first_token")? {
        return Ok(Some(s * 1000.0));
    }
    if let Some(v) = present(attrs, "gen_ai.response.time_to_first_token") {
        // Gateways (Bifrost) write integer nanoseconds; a fraction is seconds.
        return match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.as_f64().map(|ns| ns / 1e6)),
            _ => {
                number(attrs, "gen_ai.response.time_to_first_token").map(|s| s.map(|s| s * 1000.0))
            }
        };
    }
    if let Some(ms) = number(attrs, "ai.response.msToFirstChunk")? {
        return Ok(Some(ms));
    }
    let Some(start) = start else {
        return Ok(None);
    };
    for e in obj
        .field("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(e) = e.as_object() else { continue };
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        if !(name.contains("first") && (name.contains("token") || name.contains("chunk"))) {
            continue;
        }
        let at = match time_ns(e, "timeUnixNano")? {
            Some(t) => Some(t),
            None => match time_ns(e, "time")? {
                Some(t) => Some(t),
                None => time_ns(e, "timestamp")?,
            },
        };
        if let Some(at) = at.filter(|&t| t > 0) {
            return Ok(Some((at - start) as f64 / 1e6));
        }
    }
    Ok(None)
}

/// Turn a model-call span into a request (held until the input ends).
fn call<O: Fields>(
    obj: &O,
    attrs: &Attrs,
    ids: &Ids,
    loc: &Location,
    st: &mut State,
    ctx: &mut Ctx,
) -> std::result::Result<(), FieldError> {
    if !is_call(obj, attrs) {
        return Ok(());
    }
    let (start, end) = times(obj)?;
    if let Some((field, text)) = naive_time(obj) {
        ctx.naive_time(loc, field, &text);
    }
    let input = first_count(attrs, INPUT)?;
    let output = first_count(attrs, OUTPUT)?;
    let max_tokens = first_count(attrs, MAX_TOKENS)?;
    let cached = first_count(attrs, CACHED)?;
    let ttft_ms = ttft_ms(obj, attrs, start)?;
    let failed = is_error(obj, attrs);
    // Without an output count, the text the call generated, where the
    // span has it, is counted with --tokenizer when the call is handed on
    // (as for LiteLLM and Langfuse, and marked in `observed.counted`);
    // else its max_tokens stands for it.
    let text = match output {
        None if !failed => generated_text(attrs),
        _ => None,
    };
    let output_length = match (output, max_tokens) {
        (Some(n), _) => n,
        (None, _) if text.is_some() => 0,
        (None, Some(max)) if !failed => {
            st.tally.no_output += 1;
            if st.first_no_output.is_none() {
                st.first_no_output = Some((
                    loc.clone(),
                    ids.span
                        .as_deref()
                        .map_or_else(|| "without id".into(), str::to_string),
                    max,
                ));
            }
            max
        }
        (None, _) => 0,
    };
    let mut model = None;
    for k in MODEL {
        if let Some(m) = string(attrs, k)? {
            if m != "unknown" {
                model = Some(m);
                break;
            }
        }
    }
    let session = first_string(attrs, SESSION)?;
    let prompt = prompt(attrs, &mut st.tally).map(Box::new);
    let response_id = first_string(attrs, RESPONSE_ID)?;
    let dup_key = start.map(|s| {
        dup_key(
            ids.trace.as_deref(),
            s,
            end,
            response_id.as_deref(),
            model.as_deref(),
            input,
            output,
        )
    });
    // The trace stands for the group of a call without a session, and
    // for a call without a group (--graph groups it by it); the others are
    // spared the copy.
    let grouped = ids.span.is_some() && start.is_some() && end.is_some();
    let trace = match (grouped, &session) {
        (true, Some(_)) => None,
        _ => ids.trace.as_deref(),
    };
    let texts = &mut st.texts;
    st.tally.calls += 1;
    let call = Call {
        line: loc.line,
        start,
        end,
        input,
        output,
        output_length,
        max_tokens,
        cached,
        ttft_ms,
        failed,
        model: texts.add(model.as_deref()),
        session: texts.add(session.as_deref()),
        id: texts.add(ids.span.as_deref()),
        trace: texts.add(trace),
        prompt,
        output_text: texts.add(text.as_deref()),
        span: ids.span.as_deref().map_or(0, id_key),
        parent: ids.parent.as_deref().map_or(0, id_key),
        dup_key: dup_key.unwrap_or(0),
    };
    match st.calls.last_mut() {
        Some(block) if block.len() < BLOCK => block.push(call),
        _ => {
            let mut block = Vec::with_capacity(BLOCK);
            block.push(call);
            st.calls.push(block);
        }
    }
    Ok(())
}

impl Call {
    /// The request handed on, read from `source`.
    fn request(self, source: &Arc<str>, texts: &Texts) -> Request {
        let text = |t: Text| texts.get(t).map(str::to_string);
        let mut req = Request::new(
            Location::new(source.clone(), self.line),
            self.start.unwrap_or(0),
        );
        req.end_ns = self.end;
        req.input_length = self.input;
        req.max_tokens = self.max_tokens;
        req.observed.prompt_tokens = self.input;
        req.observed.completion_tokens = self.output;
        req.observed.cached_tokens = self.cached;
        req.observed.ttft_ms = self.ttft_ms;
        req.observed.e2e_ms = self.start.zip(self.end).map(|(s, e)| (e - s) as f64 / 1e6);
        req.fate = if self.failed { Fate::Failed } else { Fate::Ok };
        req.mark_counts = true;
        req.output_length = self.output_length;
        req.output_text = text(self.output_text);
        req.model = text(self.model);
        req.session = text(self.session);
        req.id = text(self.id);
        let trace = text(self.trace);
        if req.id.is_some() && self.start.is_some() && self.end.is_some() {
            req.group = req.session.clone().or(trace);
        } else {
            req.trace_id = trace;
        }
        req.prompt = self.prompt;
        req
    }
}

/// What makes two exports one call (trace, start, end, response id,
/// model, token counts), hashed field by field, each with its presence and
/// length so that no two keys run together.
fn dup_key(
    trace: Option<&str>,
    start: i64,
    end: Option<i64>,
    response: Option<&str>,
    model: Option<&str>,
    input: Option<u64>,
    output: Option<u64>,
) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for text in [trace, response, model] {
        match text {
            Some(t) => {
                h.update(&[1]);
                h.update(&(t.len() as u64).to_le_bytes());
                h.update(t.as_bytes());
            }
            None => h.update(&[0]),
        }
    }
    let counts = [input, output].map(|n| n.map(|n| n as i64));
    for n in [Some(start), end].into_iter().chain(counts) {
        match n {
            Some(n) => {
                h.update(&[1]);
                h.update(&n.to_le_bytes());
            }
            None => h.update(&[0]),
        }
    }
    // 0 stands for no key.
    h.digest128().max(1)
}

/// The text a call generated: output messages (OTel "parts", OpenAI
/// messages or choices), OpenInference's output value, the Vercel SDK's
/// text, inference-perf's `gen_ai.output.text`, or indexed completions.
fn generated_text(attrs: &Attrs) -> Option<String> {
    for k in OUTPUT_TEXT {
        if let Some(text) = present(attrs, k).and_then(output_text) {
            return Some(text);
        }
    }
    let mut messages = Vec::new();
    for (prefix, role, content) in INDEXED_OUTPUT {
        indexed(attrs, prefix, role, content, &mut messages);
    }
    output_text(&Value::Array(messages))
}

/// Leave out wrappers and duplicates, hand the calls on, and say what the
/// input held.
fn finish_input(ctx: &mut Ctx, st: State, source: &Arc<str>) -> Result<()> {
    let State {
        calls,
        texts,
        parents,
        mut tally,
        first_no_output,
        ..
    } = st;
    // A call with a call under it, over that call's whole time, wraps it
    // (a client's span over a gateway's). A parent that ended before its
    // child started is an earlier turn, not a wrapper.
    let spans: HashMap<u128, (i64, Option<i64>)> = calls
        .iter()
        .flatten()
        .filter(|c| c.span != 0)
        .map(|c| (c.span, (c.start.unwrap_or(0), c.end)))
        .collect();
    let mut wrappers: HashSet<u128> = HashSet::new();
    for c in calls.iter().flatten() {
        let inner = (c.start.unwrap_or(0), c.end);
        let mut at = Some(c.parent).filter(|&p| p != 0);
        let mut steps = 0;
        while let Some(p) = at {
            if let Some(&outer) = spans.get(&p) {
                if covers(outer, inner) {
                    wrappers.insert(p);
                }
            }
            steps += 1;
            if steps > 10_000 {
                break; // a parent cycle
            }
            at = parents.get(&p).copied();
        }
    }
    drop(spans);
    drop(parents);
    // Room for every call at once: the list of requests would otherwise
    // double its capacity as they come, copying itself each time (with
    // the held blocks not yet freed, the input's peak of memory).
    ctx.reserve(calls.iter().map(Vec::len).sum());
    let mut seen: HashSet<u128> = HashSet::new();
    // Block by block: each is freed as its calls are handed on.
    for block in calls {
        for c in block {
            if c.span != 0 && wrappers.contains(&c.span) {
                tally.wrappers += 1;
                continue;
            }
            if c.dup_key != 0 && !seen.insert(c.dup_key) {
                tally.duplicates += 1;
                continue;
            }
            ctx.push(c.request(source, &texts))?;
        }
    }
    if let Some((loc, id, max)) = first_no_output {
        crate::cli::warn_at(
            &loc,
            format!(
                "span {id}: no output token count; output_length is its gen_ai.request.max_tokens ({max}){}",
                if tally.no_output > 1 {
                    format!(", and so for {} more", tally.no_output - 1)
                } else {
                    String::new()
                }
            ),
        );
    }
    let mut left_out = Vec::new();
    if tally.wrappers > 0 {
        left_out.push(format!(
            "{} wrapper{} of another call",
            tally.wrappers,
            plural(tally.wrappers)
        ));
    }
    if tally.duplicates > 0 {
        left_out.push(format!(
            "{} duplicate{}",
            tally.duplicates,
            plural(tally.duplicates)
        ));
    }
    let media = if tally.media_parts > 0 {
        let kinds: Vec<String> = tally
            .media_kinds
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        format!(
            "; {} media part{} ({}) left out of the prompts of {} call{}: only text is hashed or sent",
            tally.media_parts,
            plural(tally.media_parts),
            kinds.join(", "),
            tally.media_calls,
            plural(tally.media_calls)
        )
    } else {
        String::new()
    };
    crate::cli::note(format!(
        "{source}: {} span{} read, {} model call{}{}{media}",
        tally.spans,
        plural(tally.spans),
        tally.calls,
        plural(tally.calls),
        if left_out.is_empty() {
            String::new()
        } else {
            format!(" ({} left out)", left_out.join(", "))
        }
    ));
    Ok(())
}

/// Whether a span's time holds another's (unknown ends hold anything).
fn covers(outer: (i64, Option<i64>), inner: (i64, Option<i64>)) -> bool {
    outer.0 <= inner.0
        && match (outer.1, inner.1) {
            (Some(o), Some(i)) => i <= o,
            _ => true,
        }
}

/// The prompt, where the span carries it, as OpenAI chat messages.
fn prompt(attrs: &Attrs, tally: &mut Tally) -> Option<Prompt> {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(sys) = json_attr(attrs, "gen_ai.system_instructions") {
        let text = match &sys {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts_text(parts),
            _ => String::new(),
        };
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let listed = json_attr(attrs, "gen_ai.input.messages")
        .or_else(|| json_attr(attrs, "ai.prompt.messages"))
        .or_else(|| json_attr(attrs, "input.value").and_then(|v| v.get("messages").cloned()));
    if let Some(Value::Array(list)) = listed {
        let media = tally.media_parts;
        for m in &list {
            count_media(m, tally);
            openai_messages(m, &mut messages);
        }
        if tally.media_parts > media {
            tally.media_calls += 1;
        }
    } else {
        for (prefix, role, content) in INDEXED_PROMPT {
            indexed(attrs, prefix, role, content, &mut messages);
        }
    }
    if messages.is_empty() {
        return None;
    }
    let tools = json_attr(attrs, "gen_ai.tool.definitions")
        .and_then(|t| t.as_array().cloned())
        .map(|list| {
            Value::Array(
                list.into_iter()
                    .map(|t| {
                        if t.get("type").is_some() && t.get("function").is_some() {
                            t
                        } else {
                            json!({"type": "function", "function": t})
                        }
                    })
                    .collect(),
            )
        });
    Some(Prompt {
        messages: Some(Value::Array(messages)),
        text: None,
        tools,
    })
}

/// Part types that carry media (OTel GenAI `blob`, `uri`, `file`; the
/// Vercel SDK's and OpenAI's image and audio parts): [`openai_messages`]
/// leaves them out, as the prompt's text is what is hashed or sent.
const MEDIA_PARTS: &[&str] = &[
    "blob",
    "uri",
    "file",
    "image",
    "image_url",
    "input_audio",
    "audio",
];

/// Count the media parts of a message, by kind (its modality, else its
/// MIME type's, else its type).
fn count_media(m: &Value, tally: &mut Tally) {
    let Some(Value::Array(parts)) = m.get("parts").or_else(|| m.get("content")) else {
        return;
    };
    for p in parts {
        let Some(kind) = p.get("type").and_then(Value::as_str) else {
            continue;
        };
        if !MEDIA_PARTS.contains(&kind) {
            continue;
        }
        let modality = p.get("modality").and_then(Value::as_str).or_else(|| {
            p.get("mime_type")
                .or_else(|| p.get("mimeType"))
                .and_then(Value::as_str)
                .and_then(|t| t.split('/').next())
        });
        let kind = match (kind, modality) {
            (_, Some(m)) if !m.is_empty() => m,
            ("image_url", _) => "image",
            ("input_audio", _) => "audio",
            (kind, _) => kind,
        };
        tally.media_parts += 1;
        *tally.media_kinds.entry(kind.to_string()).or_insert(0) += 1;
    }
}

/// An attribute that holds JSON, as JSON text or as a value.
fn json_attr(attrs: &Attrs, key: &str) -> Option<Value> {
    match present(attrs, key)? {
        Value::String(s) => {
            let t = s.trim_start();
            if t.starts_with('[') || t.starts_with('{') {
                serde_json::from_str(s).ok()
            } else {
                Some(Value::String(s.clone()))
            }
        }
        v => Some(v.clone()),
    }
}

/// `PREFIX.N.role` / `PREFIX.N.content`, N from 0.
fn indexed(attrs: &Attrs, prefix: &str, role: &str, content: &str, out: &mut Vec<Value>) {
    // Most spans have none: spare them the names made for each N.
    if !attrs.keys().any(|k| k.starts_with(prefix)) {
        return;
    }
    for n in 0.. {
        let r = attrs
            .get(&format!("{prefix}{n}{role}"))
            .and_then(Value::as_str);
        let c = attrs.get(&format!("{prefix}{n}{content}"));
        match (r, c) {
            (None, None) => break,
            (r, c) => out.push(json!({
                "role": r.unwrap_or("user"),
                "content": c.and_then(Value::as_str).unwrap_or(""),
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// What reading `text` line by line leaves: each line's outcome, the
    /// calls held and the tally; by [`otlp`] where it takes a line (and
    /// how many it took), else by the generic reader.
    fn read_lines(text: &str, fast: bool) -> (String, usize) {
        let args = super::super::Args::parse_from(["trace-convert"]);
        let mut ctx = Ctx::new(&args);
        let mut st = State::default();
        let mut out = String::new();
        let mut taken = 0;
        for (i, line) in text.lines().enumerate() {
            let loc = Location::new(Arc::from("t.jsonl"), i as u64 + 1);
            let result = match fast {
                true => fast_document(&mut ctx, &mut st, &loc, line),
                false => Ok(false),
            };
            let result = match result {
                Ok(true) => {
                    taken += 1;
                    Ok(())
                }
                Ok(false) => match serde_json::from_str::<Value>(line) {
                    Ok(doc) => document(&mut ctx, &mut st, &loc, doc),
                    Err(e) => Err(malformed(&loc, &e)),
                },
                // A span's error: the line was the OTLP reader's.
                Err(e) => {
                    taken += 1;
                    Err(e)
                }
            };
            out.push_str(&format!(
                "{}: {:?}\n",
                i + 1,
                result.map_err(|e| e.to_string())
            ));
        }
        for c in st.calls.into_iter().flatten() {
            let keys = format!("{} {} {}", c.span, c.parent, c.dup_key);
            out.push_str(&format!(
                "{:?} {keys}\n",
                c.request(&Arc::from("t.jsonl"), &st.texts)
            ));
        }
        let t = &st.tally;
        out.push_str(&format!(
            "{} {} {} {:?} {:?}",
            t.spans,
            t.calls,
            t.no_output,
            st.parents.len(),
            st.first_no_output
                .as_ref()
                .map(|(l, id, n)| (l.line, id, n))
        ));
        (out, taken)
    }

    #[track_caller]
    fn same(text: &str, fast_lines: usize) {
        let (generic, _) = read_lines(text, false);
        let (fast, taken) = read_lines(text, true);
        assert_eq!(fast, generic);
        assert_eq!(taken, fast_lines, "lines the OTLP reader took");
    }

    #[test]
    fn the_otlp_reader_reads_the_fixtures_as_the_generic_reader() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/convert/otel/");
        for (name, lines) in [
            ("bifrost.gaia-0-claude-code.traces.jsonl", 8),
            ("bifrost.bigcodebench-0-zerostack.traces.jsonl", 1),
            (
                "litellm-migrated.naturalquestions-2165-aider.traces.jsonl",
                5,
            ),
        ] {
            let text = std::fs::read_to_string(format!("{dir}{name}")).unwrap();
            same(&text, lines);
        }
    }

    /// A span line in the Collector's form with these attributes and
    /// span-level fields (JSON text after the attributes).
    fn line(attrs: &str, more: &str) -> String {
        format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[]}},"scopeSpans":[{{"scope":{{"name":"s"}},"spans":[{{"traceId":"t1","spanId":"s1","parentSpanId":"p1","name":"chat","kind":3,"startTimeUnixNano":"1781627099248209120","endTimeUnixNano":"1781627100248209120","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"chat"}}}}{attrs}]{more}}}]}}]}}]}}"#
        )
    }

    #[test]
    fn the_otlp_reader_agrees_on_every_value_kind_and_leaves_odd_shapes_alone() {
        let usage = r#",{"key":"gen_ai.usage.input_tokens","value":{"intValue":"12"}},{"key":"gen_ai.usage.output_tokens","value":{"intValue":7}}"#;
        let taken = [
            line(usage, ""),
            // Doubles, arrays, maps, booleans, bytes, unset and missing
            // values; attributes no rule reads.
            line(
                &format!(
                    r#"{usage},{{"key":"gen_ai.request.temperature","value":{{"doubleValue":0.5}}}},{{"key":"gen_ai.response.time_to_first_chunk","value":{{"doubleValue":"0.25"}}}},{{"key":"gen_ai.response.finish_reasons","value":{{"arrayValue":{{"values":[{{"stringValue":"stop"}}]}}}}}},{{"key":"m","value":{{"kvlistValue":{{"values":[{{"key":"a","value":{{"intValue":"1"}}}}]}}}}}},{{"key":"error","value":{{"boolValue":false}}}},{{"key":"b","value":{{"bytesValue":"AQI="}}}},{{"key":"u","value":{{}}}},{{"key":"n"}},{{"key":"session.id","value":{{"stringValue":"s\u00e9"}}}}"#
                ),
                r#","status":{"code":"STATUS_CODE_ERROR"},"events":[{"name":"first_token","timeUnixNano":"1781627099348209120"}],"links":[],"flags":1"#,
            ),
            // A bad value, an unknown type and a bad integer: the same
            // error, from the attribute at fault.
            line(
                &format!(r#"{usage},{{"key":"x","value":{{"intValue":"1.5"}}}}"#),
                "",
            ),
            line(
                &format!(r#"{usage},{{"key":"x","value":{{"fooValue":1}}}}"#),
                "",
            ),
            line(&format!(r#"{usage},{{"key":"x","value":"plain"}}"#), ""),
            line(
                r#",{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"twelve"}}"#,
                "",
            ),
            // A first kind repeated: the generic reader keeps the last.
            line(
                r#",{"key":"gen_ai.usage.output_tokens","value":{"intValue":"3","intValue":"4"}}"#,
                "",
            ),
            // Unset ids and times.
            line(usage, r#","traceId":"","spanId":null"#)
                .replace(r#""traceId":"t1","spanId":"s1","#, ""),
        ];
        let odd = [
            // Keys the generic reader looks at, repeated keys, ids as
            // numbers, attributes as an object, null resourceSpans, a list.
            line(usage, r#","tags":[]"#),
            line(usage, r#","spanId":"again""#),
            line(usage, "").replace(r#""traceId":"t1""#, r#""traceId":7"#),
            line("", "").replace(
                r#""attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}]"#,
                r#""attributes":{"gen_ai.operation.name":"chat"}"#,
            ),
            r#"{"resourceSpans":null}"#.to_string(),
            format!("[{}]", line(usage, "")),
            // A number no f64 holds, in a field no rule reads.
            line(usage, r#","droppedEventsCount":1e400"#),
        ];
        let text = taken.join("\n") + "\n" + &odd.join("\n");
        same(&text, taken.len());
    }
}
