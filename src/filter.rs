//! The record loop of a filter: each line of the input parsed as a record,
//! a bad one stopping the tool or, with --skip-invalid, skipped.

use crate::cli::Skipper;
use crate::error::{FieldError, Location, Result};
use crate::io::{Lines, Output};
use crate::record::{Edit, Record};

/// Each record of `lines` parsed and given to `f` with its line, place
/// and 0-based position; a line that is not a record stops the tool or,
/// with --skip-invalid, is skipped with a warning (its position counts).
/// Returns how many lines were read.
pub fn for_each(
    lines: &mut Lines,
    skipper: &mut Skipper,
    mut f: impl FnMut(&mut Skipper, Record, &str, &Location, u64) -> Result<()>,
) -> Result<u64> {
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
    lines: &mut Lines,
    out: &mut Output,
    skipper: &mut Skipper,
    mut edit: impl FnMut(&mut Record, u64) -> std::result::Result<Edit, FieldError>,
) -> Result<u64> {
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
