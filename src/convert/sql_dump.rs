//! A table's rows from a PostgreSQL dump (`pg_dump`'s plain format): the
//! block `COPY table (columns) FROM stdin;`, then one row a line, columns
//! separated by tabs in COPY's text format (`\N` a null, backslash
//! escapes), up to a line `\.`. Everything else in the dump (comments,
//! `SET`, `CREATE`, other tables' blocks) is skipped. Each row is handed
//! on as an object of its columns, strings or nulls, as CSV rows are.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::Object;
use super::{Ctx, container};
use crate::error::{Error, Location, Result};

/// Whether the start of an input is a SQL dump with a COPY block: what
/// `pg_dump` writes first (a comment, `SET`), or the block itself.
pub fn starts(head: &str) -> bool {
    let head = head.trim_start();
    (head.starts_with("--") || head.starts_with("SET ") || head.starts_with("COPY "))
        && head.contains(" FROM stdin;")
}

/// Call `f` with each row of `table`'s COPY blocks (the name as written,
/// quotes and schema aside), in order.
pub fn for_each_row(
    mut reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    table: &str,
    mut f: impl FnMut(&mut Ctx, &Location, Object) -> Result<()>,
) -> Result<()> {
    let mut buf = Vec::new();
    let mut line = 0u64;
    // The columns of the block being read, when it is `table`'s.
    let mut columns: Option<Vec<String>> = None;
    let mut in_block = false;
    let mut blocks = 0u64;
    loop {
        buf.clear();
        if container::read_line(&mut reader, &mut buf, &source)? == 0 {
            break;
        }
        line += 1;
        let loc = Location::new(source.clone(), line);
        let Ok(text) = std::str::from_utf8(&buf) else {
            if columns.is_some() {
                ctx.bad(bad(&loc, "row is not valid UTF-8".into()))?;
            }
            continue;
        };
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if in_block {
            if text == "\\." {
                in_block = false;
                columns = None;
                continue;
            }
            let Some(names) = &columns else { continue };
            let cells: Vec<&str> = text.split('\t').collect();
            if cells.len() != names.len() {
                ctx.bad(bad(
                    &loc,
                    format!(
                        "has {} columns, the COPY statement names {}",
                        cells.len(),
                        names.len()
                    ),
                ))?;
                continue;
            }
            let row = names
                .iter()
                .zip(cells)
                .map(|(name, cell)| (name.clone(), cell_value(cell)))
                .collect();
            f(ctx, &loc, row)?;
        } else if let Some((name, cols)) = copy_statement(text) {
            in_block = true;
            if unquoted(name.rsplit('.').next().unwrap_or(name)) == table {
                blocks += 1;
                columns = Some(cols);
            }
        }
    }
    if blocks == 0 {
        return Err(Error::msg(format!(
            "{source}: a SQL dump without the table {table} (no `COPY … {table} … FROM stdin;`)"
        )));
    }
    Ok(())
}

fn bad(loc: &Location, msg: String) -> Error {
    Error::Record {
        loc: loc.clone(),
        field: String::new(),
        msg,
    }
}

/// `COPY name (a, "b") FROM stdin;`: the table's name and the columns.
fn copy_statement(text: &str) -> Option<(&str, Vec<String>)> {
    let rest = text.strip_prefix("COPY ")?.strip_suffix(" FROM stdin;")?;
    let open = rest.find('(')?;
    let name = rest[..open].trim();
    let cols = rest[open + 1..].trim_end().strip_suffix(')')?;
    Some((
        name,
        cols.split(',')
            .map(|c| unquoted(c.trim()).to_string())
            .collect(),
    ))
}

/// An identifier without its double quotes (`""` inside is one quote).
fn unquoted(name: &str) -> std::borrow::Cow<'_, str> {
    match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\"").into(),
        None => name.into(),
    }
}

/// A cell in COPY's text format: `\N` is null; `\b \f \n \r \t \v`,
/// octal `\ooo` and hex `\xhh` are those bytes; a backslash before any
/// other character is that character.
fn cell_value(cell: &str) -> Value {
    if cell == "\\N" {
        return Value::Null;
    }
    if !cell.contains('\\') {
        return Value::String(cell.to_string());
    }
    let b = cell.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut k = 0;
                while k < 2 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    k += 1;
                }
                out.push(v as u8);
            }
            b'x' if i < b.len() && b[i].is_ascii_hexdigit() => {
                let mut v = 0u32;
                let mut k = 0;
                while k < 2 && i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    Value::String(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_as_copy_writes_them() {
        assert_eq!(cell_value("\\N"), Value::Null);
        assert_eq!(cell_value("plain"), Value::from("plain"));
        assert_eq!(cell_value("a\\tb\\nc\\\\d"), Value::from("a\tb\nc\\d"));
        // Octal 101 and hex 42 are A and B; `\.` inside a cell is a dot.
        assert_eq!(cell_value("\\101\\x42\\."), Value::from("AB."));
        assert_eq!(
            cell_value("{\"k\": \"v\\\\\"}"),
            Value::from("{\"k\": \"v\\\"}")
        );
    }

    #[test]
    fn copy_statements_name_their_table_and_columns() {
        let (name, cols) = copy_statement(
            "COPY public.\"LiteLLM_SpendLogs\" (request_id, \"startTime\", \"user\") FROM stdin;",
        )
        .unwrap();
        assert_eq!(name, "public.\"LiteLLM_SpendLogs\"");
        assert_eq!(cols, ["request_id", "startTime", "user"]);
        assert_eq!(copy_statement("SET client_encoding = 'UTF8';"), None);
    }
}
