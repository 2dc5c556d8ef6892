//! The shapes JSON logs come in: JSONL (one object per line), one object
//! (pretty-printed or not), several objects one after another, a JSON
//! array of objects, and an API response `{"data": [...]}`. Each object is
//! handed on with the line it starts on.
//!
//! JSONL streams line by line; the other shapes are read whole (they are
//! one JSON document, and converting sorts in memory anyway).

use std::borrow::Cow;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Ctx;
use super::fields::Object;
use crate::error::{Error, Location, Result};
use crate::record::Record;

/// JSON objects in any container shape, the rows of a Parquet file, or,
/// when the content does not start with `{` or `[`, CSV rows with a
/// header, each row an object of string cells named by the header: for
/// logs exported any of these ways.
pub fn for_each_object_or_row(
    mut reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    keep: Keys,
    mut f: impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
    if super::parquet::starts(head) {
        return super::parquet::for_each_row(reader, source, ctx, f);
    }
    // A byte-order mark may open an exported file.
    let first = head
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace() && !matches!(b, 0xef | 0xbb | 0xbf));
    if matches!(first, Some(b'{' | b'[')) || first.is_none() {
        return for_each_object(reader, source, ctx, keep, f);
    }
    for_each_row(
        reader,
        source,
        ctx,
        |h| Ok(h.names().to_vec()),
        |ctx, loc, names, row| f(ctx, loc, row_object(names, row)),
    )
}

/// Append the input's next line to `buf`: its length, 0 at the end.
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, source: &str) -> Result<usize> {
    reader
        .read_until(b'\n', buf)
        .map_err(|e| Error::io(source, e))
}

/// Call `f` with every object of the input, in order.
pub fn for_each_object(
    mut reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    keep: Keys,
    mut f: impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    let mut consumed: Vec<u8> = Vec::new();
    let mut line = 0u64;
    // The first non-blank line decides: a whole object on it means JSONL.
    let first = loop {
        let start = consumed.len();
        if read_line(&mut reader, &mut consumed, &source)? == 0 {
            return Ok(());
        }
        line += 1;
        let text = String::from_utf8_lossy(&consumed[start..])
            .trim()
            .to_string();
        if !text.is_empty() {
            break text;
        }
    };
    let first = first.trim_start_matches('\u{feff}');
    if first.starts_with('{') && serde_json::from_str::<&RawValue>(first).is_ok() {
        let loc = Location::new(source.clone(), line);
        object_line(ctx, &loc, first, keep, &mut f)?;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if read_line(&mut reader, &mut buf, &source)? == 0 {
                return Ok(());
            }
            line += 1;
            let loc = Location::new(source.clone(), line);
            match std::str::from_utf8(&buf) {
                Ok(text) if text.trim().is_empty() => {}
                Ok(text) => object_line(ctx, &loc, text.trim(), keep, &mut f)?,
                Err(_) => ctx.bad(Error::Record {
                    loc,
                    field: String::new(),
                    msg: "line is not valid UTF-8".into(),
                })?,
            }
        }
    }
    reader
        .read_to_end(&mut consumed)
        .map_err(|e| Error::io(&*source, e))?;
    let text = String::from_utf8(consumed).map_err(|e| Error::Record {
        loc: line_of(&source, &[], 0),
        field: String::new(),
        msg: format!(
            "not valid UTF-8 at byte {}",
            e.utf8_error().valid_up_to() + 1
        ),
    })?;
    let text = text.trim_start_matches('\u{feff}');
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let items: Vec<&RawValue> =
            serde_json::from_str(text).map_err(|e| json_error(&source, &e))?;
        for item in items {
            value(ctx, &source, text, item, keep, &mut f)?;
        }
        return Ok(());
    }
    let stream = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    for item in stream {
        let item = item.map_err(|e| json_error(&source, &e))?;
        value(ctx, &source, text, item, keep, &mut f)?;
    }
    Ok(())
}

/// One JSONL line: an object, else a bad record.
fn object_line(
    ctx: &mut Ctx,
    loc: &Location,
    text: &str,
    keep: Keys,
    f: &mut impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    match parse_object(text, keep) {
        Ok(obj) => f(ctx, loc, obj),
        // Record::parse words the JSON error with a column and the text near it.
        Err(e) => ctx.bad(match Record::parse(text) {
            Err(pe) => pe.at(loc),
            Ok(_) => Error::Record {
                loc: loc.clone(),
                field: String::new(),
                msg: format!("invalid JSON: {e}"),
            },
        }),
    }
}

/// One element of a document: an object, an API response wrapping a
/// `data` array, or a bad record.
fn value(
    ctx: &mut Ctx,
    source: &Arc<str>,
    doc: &str,
    item: &RawValue,
    keep: Keys,
    f: &mut impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    let offset = item.get().as_ptr() as usize - doc.as_ptr() as usize;
    let loc = line_of(source, doc.as_bytes(), offset);
    let text = item.get();
    let parsed = if text.trim_start().starts_with('{') {
        parse_object(text, keep).map(Value::Object)
    } else {
        serde_json::from_str::<Value>(text)
    };
    match parsed {
        Ok(Value::Object(obj)) => {
            if let (Some(Value::Array(_)), false) = (obj.get("data"), obj.contains_key("startTime"))
            {
                let inner: WrappedData = serde_json::from_str(item.get()).expect("checked above");
                for element in inner.data {
                    value(ctx, source, doc, element, keep, f)?;
                }
                return Ok(());
            }
            f(ctx, &loc, obj)
        }
        Ok(other) => ctx.bad(Error::Record {
            loc,
            field: String::new(),
            msg: format!(
                "expected a JSON object (one log record), found {}",
                crate::error::quote_value(&other.to_string())
            ),
        }),
        Err(e) => Err(json_error(source, &e)),
    }
}

/// The fields a format reads, or `None` for all. Values of other keys are
/// skipped without being built: log records carry large objects (model
/// maps, hidden parameters, logging metadata) that a converter never reads.
pub type Keys = Option<&'static Fields>;

/// Fields of an object that a format reads.
pub struct Fields {
    /// Top-level fields read whole.
    pub top: &'static [&'static str],
    /// Top-level objects of which only some fields are read (a value that
    /// is not an object, such as JSON text in a string, is kept whole).
    pub inner: &'static [(&'static str, &'static [&'static str])],
}

/// Parse one JSON object, keeping only `keep`'s fields (and `data`, which
/// marks an API response wrapping records).
fn parse_object(text: &str, keep: Keys) -> serde_json::Result<Object> {
    match keep {
        None => serde_json::from_str(text),
        Some(fields) => select(text, fields.top, fields.inner),
    }
}

fn select(
    text: &str,
    top: &'static [&'static str],
    inner: &'static [(&'static str, &'static [&'static str])],
) -> serde_json::Result<Object> {
    struct Selective {
        top: &'static [&'static str],
        inner: &'static [(&'static str, &'static [&'static str])],
    }
    impl<'de> serde::de::Visitor<'de> for Selective {
        type Value = Object;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Object, A::Error> {
            let mut obj = Object::new();
            while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                if key == "data" || self.top.contains(&&*key) {
                    let v: Value = map.next_value()?;
                    obj.insert(key.into_owned(), v);
                } else if let Some((_, fields)) = self.inner.iter().find(|(k, _)| *k == key) {
                    let raw: &'de RawValue = map.next_value()?;
                    let text = raw.get();
                    let v = if text.starts_with('{') {
                        select(text, fields, &[]).map(Value::Object)
                    } else {
                        serde_json::from_str(text)
                    };
                    obj.insert(key.into_owned(), v.map_err(serde::de::Error::custom)?);
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(obj)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let obj = serde::Deserializer::deserialize_map(&mut de, Selective { top, inner })?;
    de.end()?;
    Ok(obj)
}

/// An object key, borrowed from the text unless it has escapes: most keys
/// are skipped, and need no allocation.
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(serde::Deserialize)]
struct WrappedData<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
}

fn line_of(source: &Arc<str>, doc: &[u8], offset: usize) -> Location {
    let line = doc[..offset.min(doc.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64
        + 1;
    Location::new(source.clone(), line)
}

fn json_error(source: &Arc<str>, e: &serde_json::Error) -> Error {
    let text = e.to_string();
    let msg = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    Error::Record {
        loc: Location {
            source: source.clone(),
            line: e.line().max(1) as u64,
            column: Some(e.column().max(1) as u64),
        },
        field: String::new(),
        msg: format!("invalid JSON: {msg}"),
    }
}

/// A CSV header: column positions by name.
pub struct Header {
    names: Vec<String>,
    /// The input it heads, for the error of a missing column.
    source: Arc<str>,
}

impl Header {
    /// Position of column `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Position of a column the format needs, or an error listing the header.
    pub fn need(&self, name: &str) -> Result<usize> {
        self.find(name).ok_or_else(|| Error::Record {
            loc: Location::new(self.source.clone(), 1),
            field: String::new(),
            msg: format!(
                "the header has no `{name}` column (columns: {})",
                self.names.join(", ")
            ),
        })
    }

    /// Column names in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// Call `f` with every row of a CSV input (header on the first line; LF or
/// CRLF), with the row's physical line.
pub fn for_each_row<T>(
    reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    columns: impl FnOnce(&Header) -> Result<T>,
    mut f: impl FnMut(&mut Ctx, &Location, &T, &csv::StringRecord) -> Result<()>,
) -> Result<()> {
    // The csv crate counts a CRLF row's line one short; rows as LF count right.
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(StripCr {
            inner: reader,
            pending_cr: false,
        });
    let names = rdr
        .headers()
        .map_err(|e| csv_error(&source, &e))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').trim().to_string())
        .collect();
    let header = Header {
        names,
        source: source.clone(),
    };
    let cols = columns(&header)?;
    let mut row = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut row) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                let line = row.position().map_or(0, |p| p.line());
                let loc = Location::new(source.clone(), line);
                if row.iter().all(|c| c.trim().is_empty()) {
                    continue;
                }
                if row.len() != header.names.len() {
                    ctx.bad(Error::Record {
                        loc,
                        field: String::new(),
                        msg: format!(
                            "has {} columns, the header has {}",
                            row.len(),
                            header.names.len()
                        ),
                    })?;
                    continue;
                }
                f(ctx, &loc, &cols, &row)?;
            }
            Err(e) => match e.kind() {
                csv::ErrorKind::Io(_) => return Err(csv_error(&source, &e)),
                _ => ctx.bad(csv_error(&source, &e))?,
            },
        }
    }
}

fn csv_error(source: &Arc<str>, e: &csv::Error) -> Error {
    let line = e.position().map_or(1, |p| p.line());
    match e.kind() {
        csv::ErrorKind::Io(io) => {
            Error::io(&**source, std::io::Error::new(io.kind(), io.to_string()))
        }
        csv::ErrorKind::Utf8 { .. } => Error::Record {
            loc: Location::new(source.clone(), line),
            field: String::new(),
            msg: "row is not valid UTF-8".into(),
        },
        _ => Error::Record {
            loc: Location::new(source.clone(), line),
            field: String::new(),
            msg: format!("malformed CSV: {e}"),
        },
    }
}

/// Turn a CSV row into an object keyed by the header's names.
fn row_object(names: &[String], row: &csv::StringRecord) -> Object {
    names
        .iter()
        .zip(row.iter())
        .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
        .collect()
}

/// Reads `inner` with every CR that ends a line (CRLF) left out.
struct StripCr {
    inner: Box<dyn BufRead + Send>,
    pending_cr: bool,
}

impl std::io::Read for StripCr {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                if std::mem::take(&mut self.pending_cr) {
                    out[0] = b'\r';
                    return Ok(1);
                }
                return Ok(0);
            }
            let mut n = 0;
            let mut i = 0;
            if std::mem::take(&mut self.pending_cr) && buf[0] != b'\n' {
                out[0] = b'\r';
                n = 1;
            }
            while i < buf.len() && n < out.len() {
                let b = buf[i];
                i += 1;
                if b == b'\r' {
                    match buf.get(i) {
                        Some(b'\n') => continue,
                        Some(_) => {}
                        None => {
                            self.pending_cr = true;
                            break;
                        }
                    }
                }
                out[n] = b;
                n += 1;
            }
            self.inner.consume(i);
            if n > 0 {
                return Ok(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::{Fields, StripCr, parse_object};

    #[test]
    fn selective_parsing_keeps_only_the_fields_read() {
        let text = r#"{"id":"a","big":{"x":[1,2,{"y":"z"}]},"model":"m","data":[],"k\u0065y":1,"meta":{"a":1,"b":{"c":2},"s":"t"},"text":"{\"a\":1}"}"#;
        let all = parse_object(text, None).unwrap();
        assert_eq!(all.len(), 7);
        const FIELDS: Fields = Fields {
            top: &["id", "model", "key"],
            inner: &[("meta", &["b", "s"]), ("text", &["b"])],
        };
        let some = parse_object(text, Some(&FIELDS)).unwrap();
        let keys: Vec<&str> = some.keys().map(String::as_str).collect();
        assert_eq!(keys, ["id", "model", "data", "key", "meta", "text"]);
        assert_eq!(some["id"], all["id"]);
        // Of an inner object only the fields named; any other value whole.
        assert_eq!(some["meta"], serde_json::json!({"b": {"c": 2}, "s": "t"}));
        assert_eq!(some["text"], all["text"]);
        // Skipped values are still checked as JSON.
        const ID: Fields = Fields {
            top: &["id"],
            inner: &[("big", &["y"])],
        };
        assert!(parse_object(r#"{"id":"a","other":{"x":[1,}}"#, Some(&ID)).is_err());
        assert!(parse_object(r#"{"id":"a","big":{"x":[1,}}"#, Some(&ID)).is_err());
        assert!(parse_object(r#"{"id":"a"} trailing"#, Some(&ID)).is_err());
    }

    #[test]
    fn strip_cr_drops_only_line_ending_crs() {
        let input: &'static [u8] = b"a,b\r\nc\rd\r\n\r";
        // A one-byte buffer puts every CR at a chunk's end.
        let reader = std::io::BufReader::with_capacity(1, input);
        let mut s = StripCr {
            inner: Box::new(reader),
            pending_cr: false,
        };
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"a,b\nc\rd\n\r");
    }
}
