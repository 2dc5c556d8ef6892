//! The canonical trace record: typed access to the fields man/tracekit.7 defines,
//! every other field kept as it was.
//!
//! A [`Record`] is the line's fields in their original order, each value the
//! raw JSON text borrowed from the line. Nothing is re-formatted unless a
//! tool changes it: `1.50` stays `1.50`, an integer timestamp stays an
//! integer, unknown fields pass through untouched. Typed views parse only
//! the fields a tool asks for, so a filter that needs the timestamp does not
//! pay for the rest.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::{Error, FieldError, Location, quote_value};

/// The default block size of `hash_ids`, in tokens.
pub const DEFAULT_BLOCK_SIZE: u64 = 512;

// The range of every numeric field, stated once. Each limit is far beyond
// any real trace, and small enough that every tool can take a value at it:
// a prompt of MAX_TOKENS synthesizes in memory, a time converts to a
// `Duration`, a doubled timestamp stays finite.

/// The most tokens `input_length`, `output_length` and the observed token
/// counts may give: 16 Mi.
pub const MAX_TOKENS: u64 = 1 << 24;

/// The most entries `hash_ids` may have: one per token of the longest
/// prompt, at block size 1.
pub const MAX_HASH_IDS: usize = MAX_TOKENS as usize;

/// The largest `hash_ids` value, 2^53 − 1: every JSON reader keeps it exact.
pub const MAX_HASH_ID: u64 = (1 << 53) - 1;

/// The largest `timestamp`, ms: 10^13, which holds absolute epoch
/// milliseconds up to the year 2286.
pub const MAX_TIMESTAMP_MS: f64 = 1.0e13;

/// The longest span of time a field may give, ms: ten years of 365 days.
/// Bounds `delay` and the observed times.
pub const MAX_SPAN_MS: f64 = crate::duration::MAX_MS;

/// The fields the table of man/tracekit.7 defines, in its order.
pub const KNOWN_FIELDS: &[&str] = &[
    "timestamp",
    "input_length",
    "output_length",
    "hash_ids",
    "session_id",
    "delay",
    "model",
    "text_input",
    "payload",
    "messages",
    "tools",
    "extra",
    "id",
    "observed",
    "prompt_token_ids",
    "after",
    "message_mode",
];

/// One record: its fields in input order, values as raw JSON text.
#[derive(Clone, Debug)]
pub struct Record<'a> {
    fields: Vec<(Cow<'a, str>, Cow<'a, RawValue>)>,
}

/// A line that is not a JSON object, with the column where parsing failed.
#[derive(Debug)]
pub struct ParseError {
    /// 1-based column of the fault.
    pub column: u64,
    /// serde_json's description, without its position suffix.
    pub msg: String,
}

impl ParseError {
    /// Attach the line's location.
    pub fn at(self, loc: &Location) -> Error {
        Error::Record {
            loc: Location {
                source: loc.source.clone(),
                line: loc.line,
                column: Some(self.column),
            },
            field: String::new(),
            msg: self.msg,
        }
    }
}

/// The error for a result record (it has `scheduled_ms` and `status`)
/// given to a tool that reads traces.
pub fn results_not_trace() -> FieldError {
    FieldError::record(
        "this looks like trace-replay results (has `scheduled_ms`, `status`), not a trace; \
         give it to trace-summarize",
    )
}

impl<'a> Record<'a> {
    /// Parse one line. Duplicate keys are an error: which one a consumer
    /// would take differs between JSON libraries.
    pub fn parse(line: &'a str) -> Result<Record<'a>, ParseError> {
        let trimmed = line.trim_start();
        if !trimmed.starts_with('{') && serde_json::from_str::<&RawValue>(line).is_ok() {
            return Err(ParseError {
                column: (line.len() - trimmed.len()) as u64 + 1,
                msg: format!(
                    "expected a JSON object (one record per line), found {}",
                    quote_value(trimmed)
                ),
            });
        }
        let fields: Fields<'a> = serde_json::from_str(line).map_err(|e| ParseError {
            column: e.column().max(1) as u64,
            msg: describe_json_error(&e, line),
        })?;
        let fields = fields.0;
        if let Some(dup) = first_duplicate(&fields) {
            return Err(ParseError {
                column: 1,
                msg: format!("key `{dup}` appears more than once"),
            });
        }
        Ok(Record { fields })
    }

    /// Parse one line, naming `loc` in the error.
    /// Parse one trace record, naming `loc` in the error; a result record
    /// (trace-replay's output) is refused: every tool that reads traces
    /// reads them through here.
    pub fn parse_at(line: &'a str, loc: &Location) -> Result<Record<'a>, Error> {
        let rec = Record::parse(line).map_err(|e| e.at(loc))?;
        match rec.results_not_trace() {
            Some(e) => Err(e.at(loc)),
            None => Ok(rec),
        }
    }

    /// An error when this is a result record rather than a trace record.
    pub fn results_not_trace(&self) -> Option<FieldError> {
        let is_result = self.get("scheduled_ms").is_some() && self.get("status").is_some();
        is_result.then(results_not_trace)
    }

    /// An empty record, to be filled with [`Record::set`].
    pub fn new() -> Record<'static> {
        Record { fields: Vec::new() }
    }

    /// The raw JSON of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| &**v)
    }

    /// True when `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Field names in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(k, _)| &**k)
    }

    /// Fields in order, with raw values.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.fields.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when the record has no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Replace the value of `key` in place, or append it at the end.
    pub fn set_raw(&mut self, key: &str, value: Box<RawValue>) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = Cow::Owned(value),
            None => self
                .fields
                .push((Cow::Owned(key.to_string()), Cow::Owned(value))),
        }
    }

    /// Set `key` to any serializable value.
    pub fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        let text = serde_json::to_string(value).expect("serializing a value to a string");
        self.set_raw(key, raw(text));
    }

    /// Set a time field in milliseconds, rounded to the microsecond and
    /// written as an integer when it is one.
    pub fn set_ms(&mut self, key: &str, ms: f64) {
        self.set_raw(key, raw(crate::text::format_ms(ms)));
    }

    /// Remove `key`; true if it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.fields.len();
        self.fields.retain(|(k, _)| k != key);
        self.fields.len() != before
    }

    /// Append the record as one compact JSON object (no newline) to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            crate::json::write_str(out, key);
            out.push(b':');
            out.extend_from_slice(value.get().as_bytes());
        }
        out.push(b'}');
    }

    /// The record as a compact JSON string.
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write_json(&mut out);
        String::from_utf8(out).expect("JSON output is UTF-8")
    }

    /// A copy that borrows nothing from the input line.
    pub fn into_owned(self) -> Record<'static> {
        Record {
            fields: self
                .fields
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
        }
    }

    // Typed access to the known fields. Each returns `Ok(None)` when the
    // field is absent and an error naming the field when its value is
    // of the wrong type or out of range.

    /// `timestamp`: milliseconds, a number from 0 to [`MAX_TIMESTAMP_MS`].
    pub fn timestamp(&self) -> Result<Option<f64>, FieldError> {
        self.opt("timestamp", timestamp)
    }

    /// `input_length`: prompt tokens, an integer from 0 to [`MAX_TOKENS`].
    pub fn input_length(&self) -> Result<Option<u64>, FieldError> {
        self.opt("input_length", token_count)
    }

    /// `output_length`: tokens to generate, an integer from 1 to
    /// [`MAX_TOKENS`].
    pub fn output_length(&self) -> Result<Option<u64>, FieldError> {
        self.opt("output_length", |f, raw| {
            positive_integer(f, raw).and_then(|n| at_most(f, n, MAX_TOKENS, "tokens"))
        })
    }

    /// `hash_ids`: at most [`MAX_HASH_IDS`] integers from 0 to
    /// [`MAX_HASH_ID`].
    pub fn hash_ids(&self) -> Result<Option<Vec<u64>>, FieldError> {
        self.opt("hash_ids", hash_ids)
    }

    /// `session_id`: a string.
    pub fn session_id(&self) -> Result<Option<Cow<'_, str>>, FieldError> {
        self.opt("session_id", string)
    }

    /// `delay`: milliseconds after the previous turn of the session, from 0
    /// to [`MAX_SPAN_MS`].
    pub fn delay(&self) -> Result<Option<f64>, FieldError> {
        self.opt("delay", span_ms)
    }

    /// `model`: a string.
    pub fn model(&self) -> Result<Option<Cow<'_, str>>, FieldError> {
        self.opt("model", string)
    }

    /// The input modes whose fields the record has: the one place the
    /// rule is stated (validate checks there is exactly one; synth and
    /// replay synthesize a prompt only for [`InputMode::Length`]).
    pub fn input_modes(&self) -> impl Iterator<Item = InputMode> + '_ {
        InputMode::ALL
            .into_iter()
            .filter(|m| self.contains(m.field()))
    }

    /// The record's input mode, when it has exactly one.
    pub fn input_mode(&self) -> Option<InputMode> {
        let mut modes = self.input_modes();
        match (modes.next(), modes.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    /// `id`: a string.
    pub fn id(&self) -> Result<Option<Cow<'_, str>>, FieldError> {
        self.opt("id", string)
    }

    /// `text_input`: a string.
    pub fn text_input(&self) -> Result<Option<Cow<'_, str>>, FieldError> {
        self.opt("text_input", string)
    }

    fn opt<'s, T>(
        &'s self,
        field: &str,
        parse: impl FnOnce(&str, &'s RawValue) -> Result<T, FieldError>,
    ) -> Result<Option<T>, FieldError> {
        match self.fields.iter().find(|(k, _)| k == field) {
            Some((_, v)) => parse(field, v).map(Some),
            None => Ok(None),
        }
    }
}

impl Default for Record<'static> {
    fn default() -> Self {
        Record::new()
    }
}

/// Build a raw value from JSON text produced by this crate.
pub fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).expect("valid JSON produced internally")
}

/// serde_json's message without its position (the location says it),
/// reworded where it is cryptic, with the text near the fault quoted.
fn describe_json_error(err: &serde_json::Error, line: &str) -> String {
    let text = err.to_string();
    let msg = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    let msg = match msg {
        "expected ident" | "expected value" => "expected a JSON value",
        other => other,
    };
    let msg = format!("invalid JSON: {msg}");
    if err.is_eof() {
        return format!("{msg} (the line ends early)");
    }
    let mut start = line
        .char_indices()
        .map(|(i, _)| i)
        .nth(err.column().saturating_sub(1))
        .unwrap_or(line.len());
    // Quote a misspelled word (`nul`, `True`) from its beginning.
    while start > 0 && line.as_bytes()[start - 1].is_ascii_alphanumeric() {
        start -= 1;
    }
    let near: String = line[start..].chars().take(20).collect();
    if near.is_empty() {
        msg
    } else {
        format!("{msg}, near `{near}`")
    }
}

fn first_duplicate<'k>(fields: &'k [(Cow<'_, str>, Cow<'_, RawValue>)]) -> Option<&'k str> {
    for (i, (k, _)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(prev, _)| prev == k) {
            return Some(k);
        }
    }
    None
}

struct Fields<'a>(Vec<(Cow<'a, str>, Cow<'a, RawValue>)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object (one record per line)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(key)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    fields.push((key, Cow::Borrowed(value)));
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(FieldsVisitor)
    }
}

/// An object key, borrowed from the line unless it has escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

// ---------------------------------------------------------------------------
// Parsing raw values, with messages that name the field and quote the value.

/// The JSON kind of a raw value, from its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// a number
    Number,
    /// a string
    String,
    /// an array
    Array,
    /// an object
    Object,
}

/// Raw JSON text: a parsed record's value, or a slice of a line that
/// [`crate::json::peek`] has already checked.
pub trait JsonText {
    /// The JSON text.
    fn json(&self) -> &str;
}

impl JsonText for RawValue {
    fn json(&self) -> &str {
        self.get()
    }
}

impl JsonText for str {
    fn json(&self) -> &str {
        self
    }
}

impl<T: JsonText + ?Sized> JsonText for &T {
    fn json(&self) -> &str {
        (**self).json()
    }
}

/// The kind of a raw JSON value.
pub fn kind<R: JsonText + ?Sized>(raw: &R) -> Kind {
    match raw.json().as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

fn expected<R: JsonText + ?Sized>(field: &str, what: &str, raw: &R) -> FieldError {
    FieldError::new(
        field,
        format!("expected {what}, found {}", quote_value(raw.json())),
    )
}

/// An integer ≥ 0 (a JSON integer literal, no fraction or exponent).
pub fn integer<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<u64, FieldError> {
    raw.json()
        .parse::<u64>()
        .map_err(|_| expected(field, "an integer ≥ 0", raw))
}

/// An integer ≥ 1.
pub fn positive_integer<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<u64, FieldError> {
    match raw.json().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(expected(field, "an integer ≥ 1", raw)),
    }
}

/// Any finite number.
pub fn number<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<f64, FieldError> {
    if kind(raw) != Kind::Number {
        return Err(expected(field, "a number", raw));
    }
    match raw.json().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(expected(field, "a finite number", raw)),
    }
}

/// A finite number ≥ 0.
pub fn non_negative_number<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<f64, FieldError> {
    match number(field, raw) {
        Ok(v) if v >= 0.0 => Ok(v),
        _ => Err(expected(field, "a number ≥ 0", raw)),
    }
}

/// `n` if it is at most `max`, else an error naming the limit.
pub fn at_most(field: &str, n: u64, max: u64, unit: &str) -> Result<u64, FieldError> {
    if n <= max {
        Ok(n)
    } else {
        Err(over_limit(field, &n.to_string(), &max.to_string(), unit))
    }
}

fn over_limit(field: &str, value: &str, max: &str, unit: &str) -> FieldError {
    FieldError::new(
        field,
        format!(
            "{} is over the limit of {max} {unit}: no real trace reaches it",
            quote_value(value)
        ),
    )
}

/// An integer from 0 to [`MAX_TOKENS`]: a prompt or answer size.
pub fn token_count<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<u64, FieldError> {
    let text = raw.json();
    match text.parse::<u64>() {
        Ok(n) => at_most(field, n, MAX_TOKENS, "tokens"),
        // Digits beyond u64 are a number too large, not a wrong type.
        Err(_) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
            Err(over_limit(field, text, &MAX_TOKENS.to_string(), "tokens"))
        }
        Err(_) => Err(expected(field, "an integer ≥ 0", raw)),
    }
}

/// A finite number from 0 to `max`, in milliseconds.
pub fn ms_at_most<R: JsonText + ?Sized>(field: &str, raw: &R, max: f64) -> Result<f64, FieldError> {
    let v = match raw.json().parse::<f64>() {
        // Overflowing literals (1e400) parse as infinity: too large, too.
        Ok(v) if kind(raw) == Kind::Number && v >= 0.0 => v,
        _ => return non_negative_number(field, raw),
    };
    if v <= max {
        Ok(v)
    } else {
        Err(over_limit(
            field,
            raw.json(),
            &crate::text::format_ms(max),
            "ms",
        ))
    }
}

/// `timestamp`: ms from 0 to [`MAX_TIMESTAMP_MS`].
pub fn timestamp<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<f64, FieldError> {
    ms_at_most(field, raw, MAX_TIMESTAMP_MS)
}

/// A span of time (`delay`, observed times): ms from 0 to [`MAX_SPAN_MS`].
pub fn span_ms<R: JsonText + ?Sized>(field: &str, raw: &R) -> Result<f64, FieldError> {
    ms_at_most(field, raw, MAX_SPAN_MS)
}

/// `hash_ids`: at most [`MAX_HASH_IDS`] integers from 0 to [`MAX_HASH_ID`].
pub fn hash_ids(field: &str, raw: &RawValue) -> Result<Vec<u64>, FieldError> {
    let ids = integer_array(field, raw)?;
    if ids.len() > MAX_HASH_IDS {
        return Err(FieldError::new(
            field,
            format!(
                "has {} blocks, over the limit of {MAX_HASH_IDS}: no real trace reaches it",
                ids.len()
            ),
        ));
    }
    if let Some((i, &id)) = ids.iter().enumerate().find(|(_, id)| **id > MAX_HASH_ID) {
        return Err(FieldError::new(
            field,
            format!(
                "element {i}: {id} is over the limit of {MAX_HASH_ID} (2^53 − 1): no real trace reaches it"
            ),
        ));
    }
    Ok(ids)
}

/// A string, unescaped; borrowed when it has no escapes.
pub fn string<'r, R: JsonText + ?Sized>(
    field: &str,
    raw: &'r R,
) -> Result<Cow<'r, str>, FieldError> {
    let text = raw.json();
    if kind(raw) != Kind::String {
        return Err(expected(field, "a string", raw));
    }
    let inner = &text[1..text.len() - 1];
    if !inner.contains('\\') {
        return Ok(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text)
        .map(Cow::Owned)
        .map_err(|_| expected(field, "a string", raw))
}

/// An array of integers ≥ 0.
pub fn integer_array(field: &str, raw: &RawValue) -> Result<Vec<u64>, FieldError> {
    let mut out = Vec::new();
    if parse_integer_array(raw.get(), &mut out) {
        return Ok(out);
    }
    // Slow path, only to say which element is wrong.
    if kind(raw) != Kind::Array {
        return Err(expected(field, "an array of integers ≥ 0", raw));
    }
    let items: Vec<&RawValue> = serde_json::from_str(raw.get())
        .map_err(|_| expected(field, "an array of integers ≥ 0", raw))?;
    out.clear();
    for (i, item) in items.iter().enumerate() {
        match item.get().parse::<u64>() {
            Ok(n) => out.push(n),
            Err(_) => {
                return Err(FieldError::new(
                    field,
                    format!(
                        "element {i}: expected an integer ≥ 0, found {}",
                        quote_value(item.get())
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Fast path for `[1, 2, 3]`: plain non-negative integer literals with
/// optional white space. Returns false for anything else (the caller then
/// finds out what is wrong); this runs for every record of every trace.
fn parse_integer_array(text: &str, out: &mut Vec<u64>) -> bool {
    let mut c = crate::json::Cursor::<crate::json::Lines>::new(text.as_bytes());
    c.ws();
    if c.peek() != Some(b'[') {
        return false;
    }
    // Ids are short: about one per three bytes at most.
    out.reserve(text.len() / 3 + 1);
    c.array(|c| {
        out.push(c.integer()?);
        Some(())
    })
    .is_some()
        && c.end()
}

// ---------------------------------------------------------------------------
// The whole-record check of the table of man/tracekit.7.

/// How a record gives its prompt. A record has exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputMode {
    /// `input_length` (with optional `hash_ids`): the prompt is synthesized.
    Length,
    /// `text_input`: the exact prompt text.
    Text,
    /// `messages`: the exact conversation.
    Messages,
    /// `payload`: a verbatim request body.
    Payload,
    /// `prompt_token_ids`: token ids, for servers that take them.
    TokenIds,
}

impl InputMode {
    /// The field that selects this mode.
    pub fn field(self) -> &'static str {
        match self {
            InputMode::Length => "input_length",
            InputMode::Text => "text_input",
            InputMode::Messages => "messages",
            InputMode::Payload => "payload",
            InputMode::TokenIds => "prompt_token_ids",
        }
    }

    const ALL: [InputMode; 5] = [
        InputMode::Length,
        InputMode::Text,
        InputMode::Messages,
        InputMode::Payload,
        InputMode::TokenIds,
    ];
}

/// The known fields of a record, typed. Fields that failed their check are
/// `None` here and reported in the error list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// `timestamp`, ms.
    pub timestamp: Option<f64>,
    /// `input_length`, tokens.
    pub input_length: Option<u64>,
    /// `output_length`, tokens.
    pub output_length: Option<u64>,
    /// `hash_ids`.
    pub hash_ids: Option<Vec<u64>>,
    /// `session_id`.
    pub session_id: Option<String>,
    /// `delay`, ms.
    pub delay: Option<f64>,
    /// `model`.
    pub model: Option<String>,
    /// `id`.
    pub id: Option<String>,
    /// The input mode, when exactly one is given.
    pub mode: Option<InputMode>,
    /// `after`: ids of earlier records this one waits for.
    pub after: Option<Vec<String>>,
}

/// Number of blocks a prompt of `input_length` tokens takes.
pub fn blocks_for(input_length: u64, block_size: u64) -> u64 {
    input_length.div_ceil(block_size)
}

/// `hash_ids` must have ceil(input_length / block_size) entries.
pub fn check_block_count(ids: usize, input_length: u64, block_size: u64) -> Result<(), FieldError> {
    let want = blocks_for(input_length, block_size);
    if ids as u64 == want {
        return Ok(());
    }
    Err(FieldError::new(
        "hash_ids",
        format!(
            "has {ids} block{}, but input_length {input_length} needs ceil({input_length} / {block_size}) = {want}; \
             if the trace uses another block size, give --block-size",
            crate::text::plural(ids as u64),
        ),
    ))
}

/// Check a record against the table of man/tracekit.7; every problem found is pushed
/// to `errors` (several per record when several fields are wrong).
pub fn check(rec: &Record, block_size: u64, errors: &mut Vec<FieldError>) -> Checked {
    fn keep<T>(r: Result<Option<T>, FieldError>, errors: &mut Vec<FieldError>) -> Option<T> {
        r.unwrap_or_else(|e| {
            errors.push(e);
            None
        })
    }
    let mut c = Checked {
        timestamp: keep(rec.timestamp(), errors),
        input_length: keep(rec.input_length(), errors),
        output_length: keep(rec.output_length(), errors),
        hash_ids: keep(rec.hash_ids(), errors),
        session_id: keep(rec.session_id(), errors).map(Cow::into_owned),
        delay: keep(rec.delay(), errors),
        model: keep(rec.model(), errors).map(Cow::into_owned),
        id: keep(rec.id(), errors).map(Cow::into_owned),
        mode: None,
        after: None,
    };
    if let Some(v) = rec.get("after") {
        match serde_json::from_str::<Vec<String>>(v.get()) {
            Ok(ids) => c.after = Some(ids),
            Err(_) => errors.push(expected(
                "after",
                "an array of strings (the `id`s of earlier records)",
                v,
            )),
        }
    }
    if let Some(v) = rec.get("message_mode") {
        match serde_json::from_str::<String>(v.get()).as_deref() {
            Ok("history" | "delta") => {}
            _ => errors.push(expected("message_mode", "\"history\" or \"delta\"", v)),
        }
    }
    keep(rec.text_input(), errors);
    for (field, want) in [("payload", Kind::Object), ("extra", Kind::Object)] {
        if let Some(v) = rec.get(field) {
            if kind(v) != want {
                errors.push(expected(field, "an object", v));
            }
        }
    }
    if let Some(v) = rec.get("prompt_token_ids") {
        match integer_array("prompt_token_ids", v) {
            Err(e) => errors.push(e),
            Ok(ids) => {
                if let Err(e) = at_most("prompt_token_ids", ids.len() as u64, MAX_TOKENS, "tokens")
                {
                    errors.push(e);
                }
            }
        }
    }
    if let Some(v) = rec.get("messages") {
        check_messages(v, errors);
    }
    if let Some(v) = rec.get("tools") {
        if kind(v) != Kind::Array {
            errors.push(expected("tools", "an array of tool definitions", v));
        } else if !rec.contains("messages") {
            errors.push(FieldError::new(
                "tools",
                format!(
                    "given without `messages`: tools go with a conversation (`tools` belongs to the `messages` input mode{})",
                    mode_of_record(rec)
                ),
            ));
        }
    }
    if let Some(v) = rec.get("observed") {
        check_observed(v, errors);
    }

    let mut modes = rec.input_modes();
    match (modes.next(), modes.next()) {
        (None, _) => errors.push(FieldError::record(
            "no prompt: a record needs one of `input_length`, `text_input`, `messages`, `payload` or `prompt_token_ids`",
        )),
        (Some(one), None) => c.mode = Some(one),
        (Some(a), Some(b)) => {
            let names: Vec<String> = [a, b]
                .into_iter()
                .chain(modes)
                .map(|m| format!("`{}`", m.field()))
                .collect();
            errors.push(FieldError::record(format!(
                "{} given together: a record has exactly one input mode{}",
                names.join(" and "),
                if rec.contains("input_length") {
                    " (move the prompt size to `observed.prompt_tokens`)"
                } else {
                    ""
                }
            )));
        }
    }

    if rec.contains("hash_ids") && !rec.contains("input_length") {
        errors.push(FieldError::new(
            "hash_ids",
            format!(
                "given without `input_length`: blocks describe a prompt of known length (`hash_ids` belongs to the `input_length` input mode{})",
                mode_of_record(rec)
            ),
        ));
    }
    if let (Some(ids), Some(len)) = (&c.hash_ids, c.input_length) {
        if let Err(e) = check_block_count(ids.len(), len, block_size) {
            errors.push(e);
            c.hash_ids = None;
        }
    }
    // A `delay` without `session_id` is a one-turn conversation's, as AIPerf
    // reads it (each such record is its own session): nothing to check.
    c
}

/// ", this record's is `F`" when the record has exactly one input mode, for
/// messages about a field of another mode.
fn mode_of_record(rec: &Record) -> String {
    match rec.input_mode() {
        Some(one) => format!("; this record's is `{}`", one.field()),
        _ => String::new(),
    }
}

/// Which records may go without a `timestamp` in a timed trace: the later
/// turns of a session (AIPerf's multi-turn layout: the first turn has
/// `timestamp`, later ones `delay`) and records that wait for others
/// (`after`). Remembers the sessions seen: memory grows with their number.
#[derive(Debug, Default)]
pub struct Turns {
    seen: std::collections::HashSet<String>,
}

impl Turns {
    /// Note a record; true when it follows an earlier one (a session seen
    /// before, or `after`), so that its own time comes from that one.
    pub fn follows(&mut self, session_id: Option<&str>, has_after: bool) -> bool {
        let later = match session_id {
            Some(s) if self.seen.contains(s) => true,
            Some(s) => {
                self.seen.insert(s.to_string());
                false
            }
            None => false,
        };
        later || has_after
    }
}

/// Timestamps on every record or on none (records that follow another
/// may go without in a timed trace: see [`Turns`]); the first record
/// checked decides.
#[derive(Debug, Default)]
pub struct Presence {
    first: Option<(bool, u64)>,
}

impl Presence {
    /// A record at `line` that starts something, with a timestamp or not
    /// (`present`); the error when the first record decided otherwise.
    pub fn check(&mut self, line: u64, present: bool) -> Option<FieldError> {
        match self.first {
            None => {
                self.first = Some((present, line));
                None
            }
            Some((first, _)) if first == present => None,
            Some((first, line)) => Some(FieldError::new(
                "timestamp",
                if first {
                    format!(
                        "missing, but the first record (line {line}) has one: give every record a timestamp, or none"
                    )
                } else {
                    format!(
                        "present, but the first record (line {line}) has none: give every record a timestamp, or none"
                    )
                },
            )),
        }
    }
}

/// What a record's place in the trace must keep (the rules of
/// trace-validate that span records): `"delta"` continues a conversation
/// (`follows`: it has `after` or an earlier turn of its session), and each
/// `after` id names an earlier record (`earlier`: whether one has it).
pub fn check_place(
    rec: &Record,
    after: Option<&[String]>,
    follows: bool,
    earlier: impl Fn(&str) -> bool,
    errors: &mut Vec<FieldError>,
) {
    let delta = rec
        .get("message_mode")
        .is_some_and(|m| m.get().trim() == "\"delta\"");
    if delta && !follows {
        errors.push(FieldError::new(
            "message_mode",
            "\"delta\" continues a conversation, but this record has no `after` and no \
             earlier turn of its `session_id`",
        ));
    }
    for id in after.unwrap_or_default() {
        if !earlier(id) {
            errors.push(FieldError::new(
                "after",
                format!(
                    "{}: no earlier record has this `id` (a record waits only for records before it)",
                    crate::error::quote_value(&serde_json::Value::from(id.as_str()).to_string())
                ),
            ));
        }
    }
}

fn check_messages(v: &RawValue, errors: &mut Vec<FieldError>) {
    let items: Vec<serde_json::Value> = match serde_json::from_str(v.get()) {
        Ok(items) if kind(v) == Kind::Array => items,
        _ => {
            errors.push(expected("messages", "an array of chat messages", v));
            return;
        }
    };
    if items.is_empty() {
        errors.push(FieldError::new(
            "messages",
            "is empty: a conversation needs a message",
        ));
    }
    check_chat_messages(&items, errors);
}

/// The roles of OpenAI's chat messages.
pub const CHAT_ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// Check that every entry of `messages` is a chat message an
/// OpenAI-compatible server accepts (role, content shape, tool calls, the
/// id a tool message answers), so that a trace that would be refused with
/// 400 at replay is refused here first. Errors name the field's path
/// (`messages[2].content[0].type`). Fields OpenAI does not define are left
/// alone: servers differ on them.
pub fn check_chat_messages(items: &[serde_json::Value], errors: &mut Vec<FieldError>) {
    for (i, item) in items.iter().enumerate() {
        check_chat_message(&format!("messages[{i}]"), item, errors);
    }
}

fn show(v: &serde_json::Value) -> String {
    quote_value(&v.to_string())
}

fn wrong(field: String, what: &str, v: &serde_json::Value) -> FieldError {
    FieldError::new(field, format!("expected {what}, found {}", show(v)))
}

/// The string `key` of the object at `field`, which must have one (else
/// None, and the error said).
fn string_in<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match obj.get(key) {
        None => errors.push(FieldError::new(field, format!("has no `{key}`"))),
        Some(serde_json::Value::String(s)) => return Some(s),
        Some(other) => errors.push(wrong(format!("{field}.{key}"), "a string", other)),
    }
    None
}

fn check_chat_message(field: &str, item: &serde_json::Value, errors: &mut Vec<FieldError>) {
    use serde_json::Value;
    let Value::Object(m) = item else {
        errors.push(wrong(
            field.to_string(),
            "an object with a string `role`",
            item,
        ));
        return;
    };
    let Some(role) = string_in(m, field, "role", errors) else {
        return;
    };
    if !CHAT_ROLES.contains(&role) {
        errors.push(FieldError::new(
            format!("{field}.role"),
            format!(
                "{} is not a chat role (one of {})",
                show(&m["role"]),
                CHAT_ROLES.join(", ")
            ),
        ));
        return;
    }
    let calls = m.get("tool_calls").filter(|c| !c.is_null());
    let has_calls = calls.is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        || m.get("function_call").is_some_and(|c| !c.is_null());
    match m.get("content") {
        Some(Value::String(_)) => {}
        None | Some(Value::Null) if role == "assistant" && has_calls => {}
        None => errors.push(FieldError::new(
            field,
            format!(
                "has no `content` (only an assistant message with `tool_calls` goes without; this one is {role}){}",
                if m.contains_key("parts") {
                    "; its `parts` are OpenTelemetry's form, which trace-convert --keep-messages maps to OpenAI's"
                } else {
                    ""
                }
            ),
        )),
        Some(Value::Null) => errors.push(FieldError::new(
            format!("{field}.content"),
            format!("is null: only an assistant message with `tool_calls` has no content; this one is {role}"),
        )),
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                check_content_part(&format!("{field}.content[{j}]"), role, part, errors);
            }
        }
        Some(other) => errors.push(wrong(
            format!("{field}.content"),
            "a string or an array of content parts",
            other,
        )),
    }
    if let Some(calls) = calls {
        let name = format!("{field}.tool_calls");
        if role != "assistant" {
            errors.push(FieldError::new(
                name,
                format!("only an assistant message calls tools; this one is {role}"),
            ));
        } else if let Value::Array(calls) = calls {
            for (k, call) in calls.iter().enumerate() {
                check_tool_call(&format!("{name}[{k}]"), call, errors);
            }
        } else {
            errors.push(wrong(name, "an array of tool calls", calls));
        }
    }
    match (role, m.get("tool_call_id")) {
        ("tool", None | Some(Value::Null)) => errors.push(FieldError::new(
            field,
            "is a tool message without `tool_call_id`: it needs the id of the tool call it answers",
        )),
        (
            _,
            Some(
                v @ Value::Number(_)
                | v @ Value::Bool(_)
                | v @ Value::Array(_)
                | v @ Value::Object(_),
            ),
        ) => errors.push(wrong(format!("{field}.tool_call_id"), "a string", v)),
        _ => {}
    }
    match (role, m.get("name")) {
        ("function", None | Some(Value::Null)) => errors.push(FieldError::new(
            field,
            "is a function message without `name`: it needs the name of the function that answered",
        )),
        (_, Some(v)) if !v.is_string() && !v.is_null() => {
            errors.push(wrong(format!("{field}.name"), "a string", v))
        }
        _ => {}
    }
}

/// The content part types OpenAI's chat API takes for a role (vLLM's
/// `audio_url` and `video_url` besides, for a user).
fn part_types(role: &str) -> &'static [&'static str] {
    match role {
        "user" => &[
            "text",
            "image_url",
            "input_audio",
            "file",
            "audio_url",
            "video_url",
        ],
        "assistant" => &["text", "refusal"],
        _ => &["text"],
    }
}

fn check_content_part(
    field: &str,
    role: &str,
    part: &serde_json::Value,
    errors: &mut Vec<FieldError>,
) {
    use serde_json::Value;
    let Value::Object(p) = part else {
        return errors.push(wrong(
            field.to_string(),
            "a content part (an object with a `type`)",
            part,
        ));
    };
    let Some(ty) = string_in(p, field, "type", errors) else {
        return;
    };
    let allowed = part_types(role);
    if !allowed.contains(&ty) {
        errors.push(FieldError::new(
            format!("{field}.type"),
            format!(
                "{} is not a content part of a {role} message ({} {})",
                show(&p["type"]),
                if allowed.len() == 1 { "only" } else { "one of" },
                allowed.join(", ")
            ),
        ));
        return;
    }
    // The field each type needs, and what it holds.
    let (key, url) = match ty {
        "text" => ("text", false),
        "refusal" => ("refusal", false),
        "image_url" | "audio_url" | "video_url" => (ty, true),
        "input_audio" => ("input_audio", false),
        _ => ("file", false),
    };
    let name = format!("{field}.{key}");
    match (p.get(key), ty) {
        (Some(Value::String(_)), "text" | "refusal") => {}
        (Some(Value::Object(o)), _) if url => match o.get("url") {
            Some(Value::String(_)) => {}
            Some(other) => errors.push(wrong(format!("{name}.url"), "a string", other)),
            None => errors.push(FieldError::new(name, "has no `url`")),
        },
        (Some(Value::Object(o)), "input_audio") => {
            for k in ["data", "format"] {
                match o.get(k) {
                    Some(Value::String(_)) => {}
                    Some(other) => errors.push(wrong(format!("{name}.{k}"), "a string", other)),
                    None => errors.push(FieldError::new(name.clone(), format!("has no `{k}`"))),
                }
            }
        }
        (Some(Value::Object(_)), "file") => {}
        (None, _) => errors.push(FieldError::new(
            field,
            format!("is a {ty} part without `{key}`"),
        )),
        (Some(other), "text" | "refusal") => errors.push(wrong(name, "a string", other)),
        (Some(other), _) => errors.push(wrong(name, "an object", other)),
    }
}

fn check_tool_call(field: &str, call: &serde_json::Value, errors: &mut Vec<FieldError>) {
    use serde_json::Value;
    let Value::Object(c) = call else {
        return errors.push(wrong(
            field.to_string(),
            "a tool call ({\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}})",
            call,
        ));
    };
    match c.get("id") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(field, "has no `id`")),
        Some(other) => errors.push(wrong(format!("{field}.id"), "a string", other)),
    }
    match c.get("type") {
        Some(Value::String(t)) if t == "function" => {}
        None => errors.push(FieldError::new(field, "has no `type` (\"function\")")),
        Some(other) => errors.push(wrong(format!("{field}.type"), "\"function\"", other)),
    }
    let Some(f) = c.get("function") else {
        return errors.push(FieldError::new(
            field,
            "has no `function` ({\"name\", \"arguments\"})",
        ));
    };
    let Value::Object(f) = f else {
        return errors.push(wrong(format!("{field}.function"), "an object", f));
    };
    match f.get("name") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(
            format!("{field}.function"),
            "has no `name`",
        )),
        Some(other) => errors.push(wrong(format!("{field}.function.name"), "a string", other)),
    }
    match f.get("arguments") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(
            format!("{field}.function"),
            "has no `arguments`",
        )),
        Some(other) => errors.push(wrong(
            format!("{field}.function.arguments"),
            "a string (the arguments as JSON text)",
            other,
        )),
    }
}

fn check_observed(v: &RawValue, errors: &mut Vec<FieldError>) {
    if kind(v) != Kind::Object {
        errors.push(expected("observed", "an object", v));
        return;
    }
    let Ok(obs) = Record::parse(v.get()) else {
        errors.push(expected("observed", "an object", v));
        return;
    };
    for (key, value) in obs.iter() {
        if kind(value) == Kind::Null {
            continue;
        }
        let field = format!("observed.{key}");
        let result = match key {
            "prompt_tokens" | "completion_tokens" => token_count(&field, value).map(drop),
            "ttft_ms" | "e2e_ms" => span_ms(&field, value).map(drop),
            "status" => string(&field, value).map(drop),
            _ => Ok(()),
        };
        if let Err(e) = result {
            errors.push(e);
        }
    }
}

/// What a transforming tool made of one record.
pub enum Edit {
    /// Changed: write the record.
    Changed,
    /// Untouched: write the input line as it was, byte for byte.
    Unchanged,
}

/// Time played `speed` times as fast, as trace-rescale --speed and
/// trace-sweep play it: offsets from the first timestamp, and delays,
/// divided by the speed.
#[derive(Debug, Clone, Copy)]
pub struct Speedup {
    /// Offsets and delays are divided by this.
    pub speed: f64,
    /// The first timestamp, once seen (or known beforehand).
    pub origin: Option<f64>,
}

impl Speedup {
    /// `speed` times as fast, from the first timestamp it will see.
    pub fn new(speed: f64) -> Speedup {
        Speedup {
            speed,
            origin: None,
        }
    }

    /// Scale a record's `timestamp` (already read: `timestamp`) and
    /// `delay`. Returns whether it had a timestamp.
    pub fn apply(&mut self, rec: &mut Record, timestamp: Option<f64>) -> Result<bool, FieldError> {
        if let Some(t) = timestamp {
            let origin = *self.origin.get_or_insert(t);
            let new = origin + (t - origin) / self.speed;
            rec.set_ms("timestamp", within("timestamp", t, new, MAX_TIMESTAMP_MS)?);
        }
        if let Some(d) = rec.delay()? {
            rec.set_ms("delay", within("delay", d, d / self.speed, MAX_SPAN_MS)?);
        }
        Ok(timestamp.is_some())
    }
}

/// A rescaled time, if it stays within the limit every tool reads.
pub fn within(field: &str, old: f64, new: f64, max: f64) -> Result<f64, FieldError> {
    if new <= max {
        return Ok(new);
    }
    Err(FieldError::new(
        field,
        format!(
            "{} rescaled is {}, over the limit of {} ms",
            crate::text::format_ms(old),
            if new.is_finite() {
                crate::text::format_ms(new)
            } else {
                "infinite".to_string()
            },
            crate::text::format_ms(max)
        ),
    ))
}

/// Each record of `lines` parsed and given to `f` with its line, place
/// and 0-based position; a line that is not a record stops the tool or,
/// with --skip-invalid, is skipped with a warning (its position counts).
/// Returns how many lines were read.
pub fn for_each(
    lines: &mut crate::io::Lines,
    skipper: &mut crate::cli::Skipper,
    mut f: impl FnMut(
        &mut crate::cli::Skipper,
        Record,
        &str,
        &crate::error::Location,
        u64,
    ) -> crate::error::Result<()>,
) -> crate::error::Result<u64> {
    let mut read = 0u64;
    while let Some((loc, line)) = lines.next_line()? {
        let index = read;
        read += 1;
        match Record::parse_at(line, &loc) {
            Ok(rec) => f(skipper, rec, line, &loc, index)?,
            Err(e) => skipper.skip(e)?,
        }
    }
    Ok(read)
}

/// The loop of a tool that rewrites records one by one (trace-rescale,
/// trace-synth): each record given to `edit` with its 0-based position,
/// written as `edit` says; a bad record stops the tool or, with
/// --skip-invalid, is skipped with a warning. Returns how many records
/// were read.
pub fn rewrite_each(
    lines: &mut crate::io::Lines,
    out: &mut crate::io::Output,
    skipper: &mut crate::cli::Skipper,
    mut edit: impl FnMut(&mut Record, u64) -> Result<Edit, FieldError>,
) -> crate::error::Result<u64> {
    let mut buf = Vec::with_capacity(1 << 16);
    for_each(
        lines,
        skipper,
        |skipper, mut rec, line, loc, index| match edit(&mut rec, index) {
            Ok(Edit::Changed) => {
                buf.clear();
                rec.write_json(&mut buf);
                out.write_line(&buf)
            }
            Ok(Edit::Unchanged) => out.write_line(line.as_bytes()),
            Err(e) => skipper.skip(e.at(loc)),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_borrowed_from_the_line_unless_escaped() {
        let Key(plain) = serde_json::from_str::<Key>(r#""model""#).unwrap();
        assert!(matches!(plain, Cow::Borrowed("model")));
        let Key(escaped) = serde_json::from_str::<Key>(r#""mod\u0065l""#).unwrap();
        assert!(matches!(escaped, Cow::Owned(ref k) if k == "model"));
    }

    fn checked(line: &str) -> (Checked, Vec<String>) {
        let rec = Record::parse(line).unwrap();
        let mut errors = Vec::new();
        let c = check(&rec, 512, &mut errors);
        (c, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn keeps_order_and_number_text() {
        let line = r#"{"z": 1.50, "timestamp": 3, "hash_ids": [1, 2], "a": {"x": 1e3}}"#;
        let mut rec = Record::parse(line).unwrap();
        assert_eq!(
            rec.to_json_string(),
            r#"{"z":1.50,"timestamp":3,"hash_ids":[1, 2],"a":{"x": 1e3}}"#
        );
        rec.set_ms("timestamp", 1.5);
        rec.set("new", &"v");
        assert_eq!(
            rec.to_json_string(),
            r#"{"z":1.50,"timestamp":1.5,"hash_ids":[1, 2],"a":{"x": 1e3},"new":"v"}"#
        );
    }

    #[test]
    fn escaped_keys_round_trip() {
        let rec = Record::parse(r#"{"a\"b": 1, "\u00e9": 2}"#).unwrap();
        assert_eq!(rec.to_json_string(), r#"{"a\"b":1,"é":2}"#);
    }

    #[test]
    fn rejects_non_objects_and_duplicates() {
        assert_eq!(
            Record::parse("[1]").unwrap_err().msg,
            "expected a JSON object (one record per line), found [1]"
        );
        assert_eq!(
            Record::parse(r#"{"a":1,"a":2}"#).unwrap_err().msg,
            "key `a` appears more than once"
        );
        let e = Record::parse(r#"{"a":1,}"#).unwrap_err();
        assert_eq!(
            (e.column, e.msg.as_str()),
            (8, "invalid JSON: trailing comma, near `}`")
        );
        assert_eq!(
            Record::parse("not json").unwrap_err().msg,
            "invalid JSON: expected a JSON value, near `not json`"
        );
    }

    #[test]
    fn integer_array_fast_and_slow_paths() {
        let r = |s: &str| RawValue::from_string(s.to_string()).unwrap();
        assert_eq!(integer_array("h", &r("[0, 1,2 ]")).unwrap(), vec![0, 1, 2]);
        assert_eq!(integer_array("h", &r("[]")).unwrap(), Vec::<u64>::new());
        assert_eq!(
            integer_array("h", &r("[1, -2]")).unwrap_err().to_string(),
            "field `h`: element 1: expected an integer ≥ 0, found -2"
        );
        assert_eq!(
            integer_array("h", &r("[1, 2.5]")).unwrap_err().to_string(),
            "field `h`: element 1: expected an integer ≥ 0, found 2.5"
        );
        assert!(integer_array("h", &r("\"x\"")).is_err());
    }

    /// Where the fast path reads `hash_ids`, the slow path (serde's
    /// items, each parsed as an integer) reads the same integers.
    #[test]
    fn integer_array_fast_path_reads_what_serde_reads() {
        let samples = [
            "[46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]",
            " [ 0,9007199254740991 ,18446744073709551615 ] ",
            "[]",
            "[12345678901234567890,1]",
        ];
        let fast = |b: &[u8]| {
            let mut out = Vec::new();
            parse_integer_array(std::str::from_utf8(b).ok()?, &mut out).then_some(out)
        };
        let slow = |b: &[u8]| {
            let items: Vec<&RawValue> = serde_json::from_slice(b).ok()?;
            items.iter().map(|v| v.get().parse::<u64>().ok()).collect()
        };
        let tally = crate::json::differential::hold(&samples, fast, slow);
        assert!(tally.both > 300 && tally.declined == 0, "{tally:?}");
    }

    #[test]
    fn a_mooncake_record_is_valid() {
        let (c, errors) = checked(
            r#"{"timestamp": 0, "input_length": 1025, "output_length": 5, "hash_ids": [4, 5, 6]}"#,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.mode, Some(InputMode::Length));
        assert_eq!(c.hash_ids, Some(vec![4, 5, 6]));
    }

    #[test]
    fn block_count_mismatch_hints_block_size() {
        let (_, errors) = checked(r#"{"input_length": 1024, "hash_ids": [1, 2, 3]}"#);
        assert_eq!(
            errors,
            vec![
                "field `hash_ids`: has 3 blocks, but input_length 1024 needs ceil(1024 / 512) = 2; \
                 if the trace uses another block size, give --block-size"
            ]
        );
    }

    #[test]
    fn input_modes_are_exclusive() {
        let (_, errors) = checked(r#"{"text_input": "hi", "input_length": 3}"#);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("`input_length` and `text_input` given together"));
        let (_, errors) = checked(r#"{"output_length": 3}"#);
        assert!(errors[0].starts_with("no prompt"));
    }

    #[test]
    fn messages_need_roles_and_tools_need_messages() {
        let (_, errors) = checked(r#"{"messages": [{"content": "x"}, {"role": 3}]}"#);
        assert_eq!(
            errors,
            vec![
                "field `messages[0]`: has no `role`",
                "field `messages[1].role`: expected a string, found 3"
            ]
        );
        let (_, errors) = checked(r#"{"text_input": "x", "tools": []}"#);
        assert_eq!(
            errors,
            vec![
                "field `tools`: given without `messages`: tools go with a conversation \
                 (`tools` belongs to the `messages` input mode; this record's is `text_input`)"
            ]
        );
        let (_, errors) = checked(r#"{"hash_ids": [1]}"#);
        assert_eq!(
            errors,
            vec![
                "no prompt: a record needs one of `input_length`, `text_input`, `messages`, `payload` or `prompt_token_ids`",
                "field `hash_ids`: given without `input_length`: blocks describe a prompt of known length \
                 (`hash_ids` belongs to the `input_length` input mode)"
            ]
        );
        let (c, errors) =
            checked(r#"{"input_length": 1, "delay": 5, "after": ["a"], "message_mode": "delta"}"#);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.after, Some(vec!["a".to_string()]));
    }

    #[test]
    fn later_turns_are_those_of_a_session_seen_before_or_with_after() {
        let mut turns = Turns::default();
        assert!(!turns.follows(Some("s"), false));
        assert!(!turns.follows(None, false));
        assert!(turns.follows(Some("s"), false));
        assert!(!turns.follows(Some("t"), false));
        assert!(turns.follows(None, true));
    }
}
