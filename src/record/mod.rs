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

mod check;
mod edit;
mod fields;

pub use check::*;
pub use edit::*;
pub use fields::*;

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
