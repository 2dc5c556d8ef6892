//! A validating scanner for one-line JSON objects, for filters that need a
//! field or two of every record and pass the line on unchanged.
//!
//! It checks the whole line against the JSON grammar (RFC 8259) and hands
//! back the raw text of the top-level members asked for, without building
//! anything. Tools call it first and fall back to the full parser
//! ([`crate::record::Record::parse`]) for anything it rejects, so a bad line
//! is always described by serde_json's message, and a line this scanner
//! wrongly refused would still be read correctly.

/// Deepest nesting accepted (serde_json's limit is 128 too).
const MAX_DEPTH: usize = 128;

/// Scan `line`, which must be one JSON object, and return the raw text of
/// each of `keys` (top-level members only; `None` when absent). Returns
/// `None` when the line is not a valid JSON object, has a duplicate among
/// `keys`, or uses escapes in a key (the caller then takes the slow path).
pub fn peek<'a, const N: usize>(line: &'a str, keys: [&str; N]) -> Option<[Option<&'a str>; N]> {
    let b = line.as_bytes();
    let mut found: [Option<&'a str>; N] = [None; N];
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (ws(b, i + 1) == b.len()).then_some(found);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_start = i + 1;
        let key_end = string(b, i)?;
        let key = &line[key_start..key_end - 1];
        if key.contains('\\') {
            return None;
        }
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        let value_start = i;
        i = value(b, i, 1)?;
        if let Some(k) = keys.iter().position(|k| *k == key) {
            if found[k].is_some() {
                return None;
            }
            found[k] = Some(&line[value_start..i]);
        }
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return (ws(b, i + 1) == b.len()).then_some(found),
            _ => return None,
        }
    }
}

/// Index of the first byte at or after `i` that is not JSON white space.
#[inline]
pub(crate) fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// End (exclusive) of the value starting at `i`.
pub(crate) fn value(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string(b, i),
        b'{' => object(b, i, depth),
        b'[' => array(b, i, depth),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        _ => number(b, i),
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    b[i..].starts_with(word).then_some(i + word.len())
}

/// End (exclusive, past the closing quote) of the string starting at `i`.
pub(crate) fn string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        i = string_stop(b, i)?;
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            // A control character: JSON allows it only escaped.
            _ => return None,
        }
    }
}

/// Where the text of a string stops, from `i` on: at a quote, a backslash
/// or a control character (which JSON allows only escaped). Eight bytes at
/// a time, then the last few one by one.
#[inline]
pub(crate) fn string_stop(b: &[u8], i: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` below `n` (1 to 128). A borrow may
    // flag bytes after the first one flagged, never before it.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let mut words = b.get(i..)?.chunks_exact(8);
    let mut at = i;
    for word in words.by_ref() {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let stops = below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            | below(x, 0x20);
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| at + p)
}

/// `s` as a JSON string, escaped as serde_json escapes it; a string that
/// needs no escape (most do not) is copied as it is.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if string_stop(s.as_bytes(), 0).is_none() {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
    }
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`; numbers with an exponent are left to
/// the full parser.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let start = i;
    let digits = |b: &[u8], mut i: usize| {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i > start).then_some(i)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(b, i)?,
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    // serde_json refuses numbers beyond f64's range (`1e400`); rather than
    // mirror its rule, leave exponents and very long numbers to it.
    if matches!(b.get(i), Some(b'e' | b'E')) || i - start > 300 {
        return None;
    }
    Some(i)
}

/// A plain decimal number (`-12.345`, no exponent) starting at `i`, and
/// where it ends. Exact: the digits form an integer below 2^53 and the
/// scale is at most 10^22, so one correctly rounded division gives the same
/// f64 as any correct parser. Anything else is `None` (use a full parser).
pub(crate) fn decimal(b: &[u8], mut i: usize) -> Option<(f64, usize)> {
    let negative = b.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let start = i;
    let mut mantissa: u64 = 0;
    let mut digits = 0u32;
    while i < b.len() && b[i].is_ascii_digit() {
        mantissa = mantissa
            .wrapping_mul(10)
            .wrapping_add(u64::from(b[i] - b'0'));
        digits += 1;
        i += 1;
    }
    if digits == 0 || (digits > 1 && b[start] == b'0') {
        return None;
    }
    let mut scale = 0u32;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            mantissa = mantissa
                .wrapping_mul(10)
                .wrapping_add(u64::from(b[i] - b'0'));
            digits += 1;
            i += 1;
        }
        scale = (i - frac_start) as u32;
        if scale == 0 {
            return None;
        }
    }
    if digits > 15 || scale > 22 || matches!(b.get(i), Some(b'e' | b'E')) {
        return None;
    }
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let v = mantissa as f64 / POW10[scale as usize];
    Some((if negative { -v } else { v }, i))
}

fn array(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        i = value(b, i, depth + 1)?;
        i = ws(b, i);
        match *b.get(i)? {
            b',' => i = ws(b, i + 1),
            b']' => return Some(i + 1),
            _ => return None,
        }
    }
}

fn object(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i = ws(b, string(b, i)?);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = value(b, ws(b, i + 1), depth + 1)?;
        i = ws(b, i);
        match *b.get(i)? {
            b',' => i = ws(b, i + 1),
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn string_stops_are_found_eight_bytes_at_a_time_as_one_by_one() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let alphabet = [
            b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xc3, 0xff,
        ];
        let mut seed = 7u64;
        for len in 0..40 {
            for _ in 0..500 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Mostly plain letters, so stops fall anywhere.
                        let r = (seed >> 33) as usize;
                        if r % 4 == 0 {
                            alphabet[r / 4 % alphabet.len()]
                        } else {
                            b'a' + (r % 26) as u8
                        }
                    })
                    .collect();
                assert_eq!(string_stop(&bytes, 0), naive(&bytes), "{bytes:?}");
            }
        }
    }

    use super::*;

    #[test]
    fn decimals_match_the_standard_parser() {
        let mut state = 7u64;
        for _ in 0..100_000 {
            state = crate::hash::mix(state);
            let int = state % 1_000_000;
            let frac_digits = (state >> 20) % 7;
            let frac = (state >> 32) % 10u64.pow(frac_digits as u32);
            let text = if frac_digits == 0 {
                format!("{int}")
            } else {
                format!("{int}.{frac:0w$}", w = frac_digits as usize)
            };
            let (v, end) = decimal(text.as_bytes(), 0).unwrap();
            assert_eq!(end, text.len());
            assert_eq!(v, text.parse::<f64>().unwrap(), "{text}");
        }
        assert_eq!(decimal(b"-0.5,", 0), Some((-0.5, 4)));
        assert_eq!(decimal(b"1e3", 0), None);
        assert_eq!(decimal(b"01", 0), None);
        assert_eq!(decimal(b"1.", 0), None);
    }

    #[test]
    fn finds_top_level_members_only() {
        let line = r#"{"a": {"timestamp": 1}, "timestamp": 12.5, "s": "x\"y"}"#;
        assert_eq!(
            peek(line, ["timestamp", "s", "zz"]),
            Some([Some("12.5"), Some(r#""x\"y""#), None])
        );
    }

    #[test]
    fn refuses_what_is_not_one_valid_object() {
        for bad in [
            "",
            "[]",
            "{",
            "{}x",
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":[1,]}"#,
            r#"{"a" 1}"#,
            r#"{"a":1}{"#,
            r#"{"a":"\u12"}"#,
            r#"{"timestamp":1,"timestamp":2}"#,
        ] {
            assert_eq!(peek(bad, ["timestamp"]), None, "{bad}");
        }
        assert!(peek(" { } ", ["a"]).is_some());
    }

    /// Random JSON-like lines: the scanner accepts exactly what serde_json
    /// accepts as an object (keys without escapes, no duplicate of `k`).
    #[test]
    fn agrees_with_serde_json() {
        let pieces = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"k\"",
            "\"v\"",
            "1",
            "-0",
            "2.5e-3",
            "01",
            "1.",
            "true",
            "nul",
            "null",
            " ",
            "\"a\\nb\"",
            "\"\\u00e9\"",
            "\"\\q\"",
            "{\"k\":1}",
            "[1,2]",
            "-",
            "e5",
            "\"x\":",
            "\t",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = crate::hash::mix(state);
            state
        };
        let mut accepted = 0;
        for _ in 0..200_000 {
            let n = 1 + (next() % 12) as usize;
            let mut line = String::from("{");
            for _ in 0..n {
                line.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            }
            if next() % 2 == 0 {
                line.push('}');
            }
            let serde_ok =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&line).is_ok()
                    && serde_json::from_str::<serde_json::Value>(&line).is_ok();
            let ours = peek(&line, ["k"]);
            if ours.is_some() {
                accepted += 1;
                assert!(serde_ok, "scanner accepted invalid {line:?}");
            } else if serde_ok {
                // Allowed only for the documented slow-path cases.
                assert!(
                    line.matches("\"k\"").count() > 1
                        || line.contains('\\')
                        || line.contains("e-")
                        || line.contains("e5"),
                    "scanner refused valid {line:?}"
                );
            }
        }
        assert!(accepted > 1000, "{accepted}");
    }
}
