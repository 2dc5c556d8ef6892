//! Typed reads of one field of a source object, as logs write them: a
//! number may come as a JSON number or as text (CSV cells, SpendLogs
//! payloads), a missing value as absent, `null`, `""` or `"None"`.
//! Errors name the field and quote the value.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::{FieldError, quote_value};
use crate::time::{self, DateTime};

/// A source object: a JSON object, or a CSV row with its header's names.
pub type Object = Map<String, Value>;

/// What the typed reads read from: an [`Object`], or a reader's own list
/// of fields.
pub trait Fields {
    /// The value of `field`, if the object has it.
    fn field(&self, field: &str) -> Option<&Value>;
}

impl Fields for Object {
    fn field(&self, field: &str) -> Option<&Value> {
        self.get(field)
    }
}

/// The value of `field`, treating `null`, `""` and Python's `"None"` as
/// absent.
pub fn present<'a, O: Fields + ?Sized>(obj: &'a O, field: &str) -> Option<&'a Value> {
    match obj.field(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() || s == "None" => None,
        Some(v) => Some(v),
    }
}

fn show(v: &Value) -> String {
    quote_value(&v.to_string())
}

/// `field` holds `v` where it should hold `what`.
fn expected(field: &str, what: &str, v: &Value) -> FieldError {
    FieldError::new(field, format!("expected {what}, found {}", show(v)))
}

/// A number, or text that parses as one.
fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// A field's value, or the error that it is missing.
pub fn required<T>(value: Option<T>, field: &str) -> Result<T, FieldError> {
    value.ok_or_else(|| FieldError::new(field, "is missing"))
}

/// A string field (numbers are taken as their text).
pub fn string<O: Fields + ?Sized>(obj: &O, field: &str) -> Result<Option<String>, FieldError> {
    match present(obj, field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(v) => Err(expected(field, "a string", v)),
    }
}

/// A token count: an integer from 0 to [`crate::record::MAX_TOKENS`], as
/// a number or as text.
pub fn count<O: Fields + ?Sized>(obj: &O, field: &str) -> Result<Option<u64>, FieldError> {
    let Some(v) = present(obj, field) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse::<u64>().ok().or_else(|| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e18)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    match parsed {
        // A float beyond u64 saturates: still a number, just far too large.
        Some(n) => crate::record::at_most(field, n, crate::record::MAX_TOKENS, "tokens")
            .map(Some)
            .map_err(|_| {
                FieldError::new(
                    field,
                    format!(
                        "{} is over the limit of {} tokens: no real trace reaches it",
                        show(v),
                        crate::record::MAX_TOKENS
                    ),
                )
            }),
        None => Err(expected(field, "an integer ≥ 0", v)),
    }
}

/// An array of block ids (integers ≥ 0), as public traces give
/// `hash_ids`.
pub fn block_ids<O: Fields + ?Sized>(obj: &O, field: &str) -> Result<Option<Vec<u64>>, FieldError> {
    match present(obj, field) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    FieldError::new(
                        field,
                        format!("element {i}: expected an integer ≥ 0, found {v}"),
                    )
                })
            })
            .collect::<Result<Vec<u64>, FieldError>>()
            .map(Some),
        Some(v) => Err(expected(field, "an array of integers", v)),
    }
}

/// A finite number, as a number or as text.
pub fn number<O: Fields + ?Sized>(obj: &O, field: &str) -> Result<Option<f64>, FieldError> {
    let Some(v) = present(obj, field) else {
        return Ok(None);
    };
    match as_number(v) {
        Some(f) if f.is_finite() => Ok(Some(f)),
        _ => Err(expected(field, "a number", v)),
    }
}

/// A boolean, as JSON or as Python's text (`"True"`, `"False"`).
pub fn flag<O: Fields + ?Sized>(obj: &O, field: &str) -> Result<Option<bool>, FieldError> {
    match present(obj, field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(v) => Err(expected(field, "true or false", v)),
    }
}

/// A point in time: epoch seconds (a number, or numeric text) or a
/// date-time string. Returns the time and the text of a naive date-time,
/// for the caller's one warning.
pub fn instant<O: Fields + ?Sized>(
    obj: &O,
    field: &str,
) -> Result<Option<(i64, Option<String>)>, FieldError> {
    let Some(v) = present(obj, field) else {
        return Ok(None);
    };
    if let Some(secs) = as_number(v) {
        // Epoch seconds are about 1.7e9; milliseconds would be 1.7e12.
        if secs.abs() >= 1e11 {
            return Err(FieldError::new(
                field,
                format!(
                    "{} looks like milliseconds, not the epoch seconds this field holds",
                    show(v)
                ),
            ));
        }
        return time::seconds_to_ns(secs)
            .map(|ns| Some((ns, None)))
            .ok_or_else(|| expected(field, "epoch seconds", v));
    }
    if let Value::String(s) = v {
        // The Langfuse UI's CSV writes dates JSON-encoded: `"2025-…Z"`.
        let s = s.trim().trim_matches('"');
        if let Some(DateTime { epoch_ns, has_zone }) = time::parse_datetime(s) {
            return Ok(Some((epoch_ns, (!has_zone).then(|| s.to_string()))));
        }
    }
    Err(expected(
        field,
        "epoch seconds or a date-time (YYYY-MM-DD HH:MM:SS[.fff][zone])",
        v,
    ))
}

/// A JSON value that may have been written as JSON text inside a string
/// (SpendLogs `metadata`, `proxy_server_request`): decoded once if so.
pub fn nested<'a>(obj: &'a Object, field: &str) -> Option<Cow<'a, Value>> {
    match present(obj, field)? {
        Value::String(s) => {
            let t = s.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                serde_json::from_str(s).ok().map(Cow::Owned)
            } else {
                None
            }
        }
        v => Some(Cow::Borrowed(v)),
    }
}

/// A CSV cell holding an integer ≥ 0.
pub fn cell_count(field: &str, text: &str) -> Result<u64, FieldError> {
    count(&one(field, text), field)?
        .ok_or_else(|| FieldError::new(field, "is empty: expected an integer ≥ 0"))
}

/// A CSV cell holding a number.
pub fn cell_number(field: &str, text: &str) -> Result<f64, FieldError> {
    number(&one(field, text), field)?
        .ok_or_else(|| FieldError::new(field, "is empty: expected a number"))
}

/// A CSV cell holding a date-time.
pub fn cell_datetime(field: &str, text: &str) -> Result<DateTime, FieldError> {
    time::parse_datetime(text).ok_or_else(|| {
        FieldError::new(
            field,
            format!(
                "expected a date-time (YYYY-MM-DD HH:MM:SS[.fff][zone]), found {}",
                quote_value(&format!("{text:?}"))
            ),
        )
    })
}

fn one(field: &str, text: &str) -> Object {
    let mut obj = Object::new();
    if text.trim().is_empty() {
        return obj;
    }
    obj.insert(field.to_string(), Value::String(text.to_string()));
    obj
}
