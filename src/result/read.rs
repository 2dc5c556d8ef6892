//! Reading result lines: serde's way and the one pass over the line's bytes
//! (they read the same, a differential test holds it), the limits every
//! figure is checked against, and a field's value as a cell.

use serde::Deserialize;

use super::*;
use crate::cell::Cell;
use crate::error::FieldError;
use crate::json::Cursor;

pub fn round_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// A label's JSON text as the line has it (a string with its quotes,
/// `null`, a number, a list), borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Raw<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Raw<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Raw<'a>, D::Error> {
        <&'de serde_json::value::RawValue>::deserialize(d).map(|r| Raw(r.get()))
    }
}

/// The `itl_ms` list's JSON text; its gaps are read where the line is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gaps<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Gaps<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Gaps<'a>, D::Error> {
        Raw::deserialize(d).map(|r| Gaps(r.0))
    }
}

/// The labels of a result line, as JSON text: decoded only where shown.
/// Their fields are [`FIELDS`]' labels (`Labels::slot` finds one by key).
#[derive(Clone, Copy, Debug, Default)]
pub struct Labels<'a> {
    /// False when the reader did not take them (a line read by serde, a
    /// label given twice): read them with [`Labels::parse`].
    pub read: bool,
    pub index: Option<Raw<'a>>,
    pub id: Option<Raw<'a>>,
    pub session_id: Option<Raw<'a>>,
    pub turn: Option<Raw<'a>>,
    pub after: Option<Raw<'a>>,
    pub model: Option<Raw<'a>>,
    pub start_time: Option<Raw<'a>>,
    pub finish_reason: Option<Raw<'a>>,
    pub error: Option<Raw<'a>>,
    pub shard: Option<Raw<'a>>,
}

impl<'a> Labels<'a> {
    /// The labels of a line the one-pass reader left to serde; `None` for
    /// a line serde refuses them in (a label given twice).
    pub fn parse(line: &'a str) -> Option<Labels<'a>> {
        let mut labels: Labels = serde_json::from_str(line).ok()?;
        labels.read = true;
        Some(labels)
    }
}

/// As a derived `Deserialize` would read them (a `null` is `None`, a label
/// given twice an error, other members ignored), with the field list
/// taken from [`FIELDS`] instead of spelled out again.
impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Labels<'a>, D::Error> {
        use serde::de::{Error, IgnoredAny, MapAccess, Visitor};
        struct Members<'a>(std::marker::PhantomData<Labels<'a>>);
        impl<'de: 'a, 'a> Visitor<'de> for Members<'a> {
            type Value = Labels<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a result record")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Labels<'a>, M::Error> {
                let mut labels = Labels::default();
                let mut seen: u32 = 0;
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    match Key::of(&key).and_then(|k| Some((k, labels.slot(k)?))) {
                        Some((k, slot)) => {
                            if seen & (1 << k as u32) != 0 {
                                return Err(M::Error::duplicate_field(k.field().name));
                            }
                            seen |= 1 << k as u32;
                            *slot = m.next_value()?;
                        }
                        None => drop(m.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(labels)
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// A result line read for summarizing: the figures borrowed from the line,
/// nothing allocated; the labels as their text. Unknown fields are
/// ignored here; `--by` reads its field from the raw line.
#[derive(Debug, Deserialize)]
pub struct ResultView<'a> {
    /// When the request was due, ms.
    #[serde(default)]
    pub scheduled_ms: Option<f64>,
    /// When it was sent, ms.
    pub sent_ms: f64,
    /// First content − sent.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// First chunk − sent.
    #[serde(default)]
    pub first_chunk_ms: Option<f64>,
    /// Last byte − sent.
    #[serde(default)]
    pub e2e_ms: Option<f64>,
    /// Gaps between content chunks, raw: parsed only when needed.
    #[serde(default, borrow)]
    pub itl_ms: Option<Gaps<'a>>,
    /// Asked-for prompt tokens.
    #[serde(default)]
    pub input_length: Option<u64>,
    /// Asked-for output tokens.
    #[serde(default)]
    pub output_length: Option<u64>,
    /// Server-reported prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Server-reported output tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Server-reported cached prompt tokens.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// The trace's `observed.cached_tokens`.
    #[serde(default)]
    pub observed_cached_tokens: Option<u64>,
    /// What happened.
    pub status: Status,
    /// HTTP status, if any.
    #[serde(default)]
    pub http_status: Option<u16>,
    /// Warmup results are left out of summaries.
    #[serde(default)]
    pub warmup: bool,
    /// The labels, taken by the one-pass reader (summaries ignore them).
    #[serde(skip)]
    pub labels: Labels<'a>,
}

impl<'a> ResultView<'a> {
    pub(crate) fn empty() -> ResultView<'a> {
        ResultView {
            scheduled_ms: None,
            sent_ms: 0.0,
            ttft_ms: None,
            first_chunk_ms: None,
            e2e_ms: None,
            itl_ms: None,
            input_length: None,
            output_length: None,
            prompt_tokens: None,
            completion_tokens: None,
            cached_tokens: None,
            observed_cached_tokens: None,
            status: Status::Ok,
            http_status: None,
            warmup: false,
            labels: Labels::default(),
        }
    }

    /// Read one result line, its `itl_ms` gaps into `itl` (cleared first).
    /// The common shape of a line is read in one pass; anything unusual
    /// (escaped keys, exponents, a bad value) goes through serde_json, which
    /// also words the error.
    pub fn read(line: &'a str, itl: &mut Vec<f64>) -> Result<ResultView<'a>, FieldError> {
        itl.clear();
        if let Some(view) = read_fast(line, itl) {
            view.check_limits(itl)?;
            return Ok(view);
        }
        itl.clear();
        let view = ResultView::parse(line)?;
        view.itl(itl)?;
        view.check_limits(itl)?;
        Ok(view)
    }

    /// Parse one result line. serde's message for a wrong type does not
    /// name the field, so on failure [`diagnose`] finds it.
    pub fn parse(line: &'a str) -> Result<ResultView<'a>, FieldError> {
        serde_json::from_str(line).map_err(|e| diagnose(line, &e))
    }

    /// The `itl_ms` gaps, appended to `out`.
    pub fn itl(&self, out: &mut Vec<f64>) -> Result<(), FieldError> {
        let Some(Gaps(text)) = self.itl_ms else {
            return Ok(());
        };
        let text = text.trim();
        let bad = || {
            FieldError::new(
                "itl_ms",
                format!(
                    "expected an array of numbers ≥ 0, found {}",
                    crate::error::quote_value(text)
                ),
            )
        };
        if text == "null" {
            return Ok(());
        }
        let inner = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .ok_or_else(bad)?;
        if inner.trim().is_empty() {
            return Ok(());
        }
        for item in inner.split(',') {
            match item.trim().parse::<f64>() {
                Ok(v) if v >= 0.0 && v.is_finite() => out.push(v),
                _ => return Err(bad()),
            }
        }
        Ok(())
    }
}

/// The figures a line must have (bits by [`Key`]): those of a kind with no
/// absent value. Labels are required only where shown.
pub(super) const REQUIRED: u32 = {
    let mut mask = 0;
    let mut k = 0;
    while k < FIELDS.len() {
        let f = &FIELDS[k];
        if matches!(f.role, Role::Figure)
            && matches!(
                f.kind,
                Kind::Integer | Kind::Number | Kind::Text | Kind::Status
            )
        {
            mask |= 1 << k;
        }
        k += 1;
    }
    mask
};

/// How the one-pass reader reads a value of the view (its type).
pub(super) trait Slot<'a>: Sized {
    /// The value under the cursor, which is left past it; `None` for
    /// anything unusual. `line` is the cursor's text, to borrow from.
    fn fast(c: &mut Cursor<'a>, line: &'a str, itl: &mut Vec<f64>) -> Option<Self>;
}

/// `null`, or what `read` reads.
#[inline]
fn optional<'a, T>(
    c: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if c.peek()? == b'n' {
        c.literal(b"null").map(|()| None)
    } else {
        read(c).map(Some)
    }
}

impl<'a> Slot<'a> for f64 {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<f64> {
        c.decimal()
    }
}

impl<'a> Slot<'a> for Option<f64> {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<Option<f64>> {
        optional(c, Cursor::decimal)
    }
}

impl<'a> Slot<'a> for Option<u64> {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<Option<u64>> {
        optional(c, Cursor::integer)
    }
}

impl<'a> Slot<'a> for Option<u16> {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<Option<u16>> {
        match optional(c, Cursor::integer)? {
            Some(code) => u16::try_from(code).ok().map(Some),
            None => Some(None),
        }
    }
}

impl<'a> Slot<'a> for Status {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<Status> {
        Some(match c.string()? {
            (b"ok", _) => Status::Ok,
            (b"error", _) => Status::Error,
            (b"timeout", _) => Status::Timeout,
            (b"cancelled", _) => Status::Cancelled,
            _ => return None,
        })
    }
}

impl<'a> Slot<'a> for bool {
    #[inline]
    fn fast(c: &mut Cursor<'a>, _: &'a str, _: &mut Vec<f64>) -> Option<bool> {
        match c.peek()? {
            b't' => c.literal(b"true").map(|()| true),
            _ => c.literal(b"false").map(|()| false),
        }
    }
}

impl<'a> Slot<'a> for Option<Gaps<'a>> {
    /// The gaps into `itl`, each ≥ 0; a `null` is kept as its text
    /// (serde refuses it where a list must be).
    #[inline]
    fn fast(c: &mut Cursor<'a>, line: &'a str, itl: &mut Vec<f64>) -> Option<Option<Gaps<'a>>> {
        let start = c.i;
        optional(c, |c| {
            c.array(|c| {
                let v = c.decimal()?;
                (v >= 0.0).then(|| itl.push(v))
            })
        })?;
        // Both ends are at ASCII bytes.
        Some(Some(Gaps(&line[start..c.i])))
    }
}

impl<'a> Slot<'a> for Option<Raw<'a>> {
    /// Any value, kept as its text.
    #[inline]
    fn fast(c: &mut Cursor<'a>, line: &'a str, _: &mut Vec<f64>) -> Option<Option<Raw<'a>>> {
        let start = c.i;
        c.skip()?;
        Some(Some(Raw(&line[start..c.i])))
    }
}

/// `part` of `line`'s bytes, which starts and ends at ASCII bytes (a
/// key between its quotes), as text.
#[inline]
fn borrowed<'a>(line: &'a str, part: &[u8]) -> &'a str {
    let at = part.as_ptr() as usize - line.as_ptr() as usize;
    &line[at..at + part.len()]
}

/// One pass over a well-formed result line; `None` for anything else.
pub(super) fn read_fast<'a>(line: &'a str, itl: &mut Vec<f64>) -> Option<ResultView<'a>> {
    let mut view = ResultView::empty();
    view.labels.read = true;
    let mut seen: u32 = 0;
    let mut c = Cursor::new(line.as_bytes());
    c.ws();
    c.object(|c, key| match Key::of(borrowed(line, key)) {
        Some(k) => {
            let bit = 1 << k as u32;
            if seen & bit != 0 {
                match k.field().role {
                    // serde refuses it: let it say why.
                    Role::Figure => return None,
                    // Summaries ignore labels; what shows them asks
                    // serde.
                    Role::Label => view.labels.read = false,
                }
            }
            seen |= bit;
            view.read_key(k, c, line, itl)
        }
        None => c.skip(),
    })?;
    (c.end() && seen & REQUIRED == REQUIRED).then_some(view)
}

/// Name the field that made a result line unreadable.
fn diagnose(line: &str, err: &serde_json::Error) -> FieldError {
    use crate::record::{self, Record};
    let rec = match Record::parse(line) {
        Ok(rec) => rec,
        Err(e) => return FieldError::record(e.msg),
    };
    for (key, value) in rec.iter() {
        let Some(field) = Key::of(key).map(Key::field) else {
            continue;
        };
        if field.role != Role::Figure {
            continue;
        }
        let null = record::kind(value) == record::Kind::Null;
        let result = match field.kind {
            Kind::Number => record::number(key, value).map(drop),
            Kind::OptNumber if !null => record::number(key, value).map(drop),
            Kind::Integer => record::integer(key, value).map(drop),
            Kind::OptInteger if !null => record::integer(key, value).map(drop),
            Kind::Status => match record::string(key, value) {
                Ok(s) if matches!(&*s, "ok" | "error" | "timeout" | "cancelled") => Ok(()),
                Ok(_) | Err(_) => Err(FieldError::new(
                    key,
                    format!(
                        "expected \"ok\", \"error\", \"timeout\" or \"cancelled\", found {}",
                        crate::error::quote_value(value.get())
                    ),
                )),
            },
            Kind::Bool if record::kind(value) != record::Kind::Bool => Err(FieldError::new(
                key,
                format!(
                    "expected true or false, found {}",
                    crate::error::quote_value(value.get())
                ),
            )),
            // `itl_ms` is worded where its gaps are read.
            _ => Ok(()),
        };
        if let Err(e) = result {
            return e;
        }
    }
    // A trace given where results are read: say so, and what makes results.
    if !rec.contains("sent_ms") && !rec.contains("status") {
        // The trace's own fields, which no result has.
        let trace_only = [
            "timestamp",
            "hash_ids",
            "text_input",
            "messages",
            "payload",
            "delay",
        ];
        let trace_fields: Vec<&str> = trace_only
            .into_iter()
            .filter(|f| rec.contains(f))
            .take(2)
            .collect();
        if !trace_fields.is_empty() {
            return FieldError::record(format!(
                "this looks like a trace (has `{}`), not trace-replay results: replay it first, \
                 as in trace-replay --sim TRACE | trace-summarize",
                trace_fields.join("`, `")
            ));
        }
    }
    for (k, field) in FIELDS.iter().enumerate() {
        if REQUIRED & (1 << k) != 0 && !rec.contains(field.name) {
            return FieldError::new(field.name, "missing: every result has one");
        }
    }
    let text = err.to_string();
    FieldError::record(match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    })
}

/// Where a value of the view is checked against its field's [`Limit`].
pub(super) trait Bounded {
    fn check(&self, _name: &str, _limit: Limit, _itl: &[f64]) -> Result<(), FieldError> {
        Ok(())
    }
}

// Inlined, with the error built out of line: it runs for every gap of
// every line summarized.
#[inline(always)]
fn within_ms(name: &str, v: f64, limit: Limit) -> Result<(), FieldError> {
    match limit {
        Limit::Ms(max) if v.is_nan() || v.abs() > max => Err(over_ms(name, v, max)),
        Limit::Span(max) if v.is_nan() || v.abs() > max => Err(over_ms(name, v, max)),
        Limit::Span(_) if v < 0.0 => Err(negative_ms(name, v)),
        _ => Ok(()),
    }
}

#[cold]
fn negative_ms(name: &str, v: f64) -> FieldError {
    FieldError::new(name, format!("expected a duration ≥ 0 ms, found {v}"))
}

#[cold]
fn over_ms(name: &str, v: f64, max: f64) -> FieldError {
    FieldError::new(
        name,
        format!(
            "{v:e} is over the limit of {} ms",
            crate::text::format_ms(max)
        ),
    )
}

impl Bounded for f64 {
    fn check(&self, name: &str, limit: Limit, _: &[f64]) -> Result<(), FieldError> {
        within_ms(name, *self, limit)
    }
}

impl Bounded for Option<f64> {
    fn check(&self, name: &str, limit: Limit, _: &[f64]) -> Result<(), FieldError> {
        self.map_or(Ok(()), |v| within_ms(name, v, limit))
    }
}

impl Bounded for Option<Gaps<'_>> {
    /// Each gap read, wherever it was read from.
    fn check(&self, name: &str, limit: Limit, itl: &[f64]) -> Result<(), FieldError> {
        itl.iter().try_for_each(|&g| within_ms(name, g, limit))
    }
}

impl Bounded for Option<u64> {
    fn check(&self, name: &str, limit: Limit, _: &[f64]) -> Result<(), FieldError> {
        match (*self, limit) {
            (Some(n), Limit::Tokens(max)) => {
                crate::record::at_most(name, n, max, "tokens").map(drop)
            }
            _ => Ok(()),
        }
    }
}

impl Bounded for Option<u16> {}
impl Bounded for Status {}
impl Bounded for bool {}
impl Bounded for Option<Raw<'_>> {}

/// A value of the view as a cell of `--requests`.
pub(super) trait ToCell {
    fn cell(&self, kind: Kind) -> Option<Cell>;
}

impl ToCell for f64 {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::Number(*self))
    }
}

impl ToCell for Option<f64> {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::num(*self))
    }
}

impl ToCell for Option<u64> {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::count(*self))
    }
}

impl ToCell for Option<u16> {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::count(self.map(u64::from)))
    }
}

impl ToCell for Status {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::Text(self.as_str().to_string()))
    }
}

impl ToCell for bool {
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::Text(self.to_string()))
    }
}

impl ToCell for Option<Gaps<'_>> {
    /// Not a cell: `--requests` shows figures of the gaps.
    fn cell(&self, _: Kind) -> Option<Cell> {
        Some(Cell::Empty)
    }
}

impl ToCell for Option<Raw<'_>> {
    fn cell(&self, kind: Kind) -> Option<Cell> {
        Some(match kind {
            Kind::Integer => Cell::Number(u64::decode(*self)? as f64),
            Kind::OptInteger => Cell::count(Option::<u64>::decode(*self)?),
            Kind::Text => Cell::Text(String::decode(*self)?),
            Kind::OptText => Cell::text(Option::<String>::decode(*self)?.as_deref()),
            _ => Cell::Text(self.map_or_else(String::new, |r| r.0.to_string())),
        })
    }
}

/// A label's value from its text, as serde reads it; `None` where serde
/// would refuse it.
pub trait Decode: Sized {
    fn decode(raw: Option<Raw<'_>>) -> Option<Self>;
}

/// A JSON string's text, its escapes read.
fn text_of(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str(raw).ok()
    } else {
        Some(inner.to_string())
    }
}

impl Decode for u64 {
    fn decode(raw: Option<Raw<'_>>) -> Option<u64> {
        serde_json::from_str(raw?.0).ok()
    }
}

impl Decode for Option<u64> {
    fn decode(raw: Option<Raw<'_>>) -> Option<Option<u64>> {
        match raw {
            None => Some(None),
            Some(r) => serde_json::from_str(r.0).ok(),
        }
    }
}

impl Decode for String {
    fn decode(raw: Option<Raw<'_>>) -> Option<String> {
        text_of(raw?.0)
    }
}

impl Decode for Option<String> {
    fn decode(raw: Option<Raw<'_>>) -> Option<Option<String>> {
        match raw {
            None => Some(None),
            Some(Raw("null")) => Some(None),
            Some(r) => text_of(r.0).map(Some),
        }
    }
}

impl Decode for Vec<String> {
    fn decode(raw: Option<Raw<'_>>) -> Option<Vec<String>> {
        match raw {
            None => Some(Vec::new()),
            Some(r) => serde_json::from_str(r.0).ok(),
        }
    }
}

/// A field of the record from the view: its figure, or its label decoded.
pub(super) trait Take<T> {
    fn take(&self, itl: &[f64]) -> Option<T>;
}

impl<T: Copy> Take<T> for T {
    fn take(&self, _: &[f64]) -> Option<T> {
        Some(*self)
    }
}

impl Take<f64> for Option<f64> {
    /// `scheduled_ms`, which a record has.
    fn take(&self, _: &[f64]) -> Option<f64> {
        *self
    }
}

impl Take<Vec<f64>> for Option<Gaps<'_>> {
    /// `null` is no list of gaps.
    fn take(&self, itl: &[f64]) -> Option<Vec<f64>> {
        match self {
            Some(Gaps(text)) if text.trim() == "null" => None,
            _ => Some(itl.to_vec()),
        }
    }
}

impl<T: Decode> Take<T> for Option<Raw<'_>> {
    fn take(&self, _: &[f64]) -> Option<T> {
        T::decode(*self)
    }
}
