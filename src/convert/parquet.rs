//! Parquet files as rows of JSON objects, so that a source reads them as it
//! reads the same export in JSONL: Langfuse's blob-storage export writes
//! either, from one ClickHouse query (`FORMAT Parquet` or JSONEachRow).
//!
//! The file is read whole into memory (Parquet keeps its index at the end,
//! and the input may be a pipe or compressed), then decoded one row group
//! at a time: memory is the file's compressed size plus one row group,
//! never the decoded table. Rows are numbered from 1, as lines are.
//!
//! Values become what the JSONL export holds: strings, numbers, maps as
//! objects, lists as arrays, and timestamps as ISO 8601 UTC text
//! (ClickHouse writes `DateTime64(3)` as milliseconds since the epoch,
//! adjusted to UTC).

use std::io::{BufRead, Read};
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use serde_json::{Map, Number, Value};

use super::Ctx;
use super::fields::Object;
use crate::error::{Error, Location, Result};

/// The first (and last) four bytes of every Parquet file.
pub const MAGIC: &[u8; 4] = b"PAR1";

/// Whether the input starts as a Parquet file.
pub fn starts(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// Call `f` with every row of the Parquet input, as an object of its
/// columns, in the file's order.
pub fn for_each_row(
    mut reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    mut f: impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    let mut all = Vec::new();
    reader
        .read_to_end(&mut all)
        .map_err(|e| Error::io(&*source, e))?;
    let bad = |e: String| {
        Error::msg(format!(
            "{source}: not a Parquet file this reader can read: {e}"
        ))
    };
    let file = guarded(|| SerializedFileReader::new(Bytes::from(all))).map_err(bad)?;
    let mut row_number = 0u64;
    for group in 0..file.num_row_groups() {
        let reader = guarded(|| file.get_row_group(group)).map_err(bad)?;
        let mut rows = guarded(|| reader.get_row_iter(None)).map_err(bad)?;
        while let Some(row) = guarded(|| rows.next().transpose()).transpose() {
            row_number += 1;
            let row = row.map_err(|e| {
                Error::msg(format!(
                    "{source}:{row_number}: row group {group}: cannot decode the row: {e}"
                ))
            })?;
            let loc = Location::new(source.clone(), row_number);
            f(ctx, &loc, object(&row))?;
        }
    }
    Ok(())
}

/// `f`'s result, or its error or panic as a message. The parquet crate
/// asserts on some damaged files (a negative column length in the footer)
/// instead of returning an error; a damaged input must not end the tool
/// with a panic.
fn guarded<T>(f: impl FnOnce() -> parquet::errors::Result<T>) -> std::result::Result<T, String> {
    match crate::panics::catch(f) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(panic),
    }
}

fn object(row: &Row) -> Object {
    row.get_column_iter()
        .map(|(name, field)| (name.clone(), value(field)))
        .collect()
}

fn value(field: &Field) -> Value {
    match field {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::from(*n),
        Field::Short(n) => Value::from(*n),
        Field::Int(n) => Value::from(*n),
        Field::Long(n) => Value::from(*n),
        Field::UByte(n) => Value::from(*n),
        Field::UShort(n) => Value::from(*n),
        Field::UInt(n) => Value::from(*n),
        Field::ULong(n) => Value::from(*n),
        Field::Float16(x) => float(f64::from(*x)),
        Field::Float(x) => float(f64::from(*x)),
        Field::Double(x) => float(*x),
        Field::Decimal(d) => float(decimal(d.data(), d.scale())),
        Field::Str(s) => Value::String(s.clone()),
        // ClickHouse writes String columns as plain binary unless told
        // otherwise: text whenever the bytes are UTF-8.
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => Value::Array(b.data().iter().map(|&x| Value::from(x)).collect()),
        },
        Field::Date(days) => Value::from(*days),
        Field::TimeMillis(ms) => Value::from(*ms),
        Field::TimeMicros(us) => Value::from(*us),
        Field::TimestampMillis(ms) => timestamp(i128::from(*ms) * 1_000_000),
        Field::TimestampMicros(us) => timestamp(i128::from(*us) * 1_000),
        Field::Group(row) => Value::Object(object(row)),
        Field::ListInternal(list) => Value::Array(list.elements().iter().map(value).collect()),
        Field::MapInternal(map) => {
            let mut out = Map::new();
            for (k, v) in map.entries() {
                let key = match value(k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, value(v));
            }
            Value::Object(out)
        }
    }
}

fn float(x: f64) -> Value {
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// A decimal's unscaled big-endian two's-complement bytes, scaled.
fn decimal(bytes: &[u8], scale: i32) -> f64 {
    if bytes.is_empty() || bytes.len() > 16 {
        return f64::NAN;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut wide = [fill; 16];
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    i128::from_be_bytes(wide) as f64 / 10f64.powi(scale)
}

/// Nanoseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ`; before
/// 1970 or past year 2554, the milliseconds themselves.
fn timestamp(ns: i128) -> Value {
    match u64::try_from(ns) {
        Ok(ns) => Value::String(crate::time::rfc3339(
            std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns),
        )),
        Err(_) => float(ns as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_scaled_and_signed() {
        // 12345 with scale 4 is 1.2345; 0xff85 is -123, scale 2 is -1.23.
        assert_eq!(decimal(&12345i32.to_be_bytes(), 4), 1.2345);
        assert_eq!(decimal(&[0xff, 0x85], 2), -1.23);
    }

    #[test]
    fn timestamps_keep_their_precision_in_utc() {
        // 1758121074131 ms is 2025-09-17 14:57:54.131 UTC.
        assert_eq!(
            timestamp(1_758_121_074_131 * 1_000_000),
            Value::String("2025-09-17T14:57:54.131000Z".into())
        );
        assert_eq!(timestamp(-1_000_000), Value::from(-1.0));
    }
}
