//! Parsing raw values, with messages that name the field and quote the value.

use serde_json::value::RawValue;

use super::*;
use crate::error::{FieldError, quote_value};

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

pub(super) fn expected<R: JsonText + ?Sized>(field: &str, what: &str, raw: &R) -> FieldError {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
