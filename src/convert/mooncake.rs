//! Mooncake FAST'25 traces: already canonical records. Converting checks
//! every record against the contract, sorts by timestamp and rebases it;
//! every field passes through unchanged otherwise.

use std::io::BufRead;
use std::sync::Arc;

use super::{Ctx, Head, Request};
use crate::error::{Error, Result};
use crate::io::LineReader;
use crate::record::{self, DEFAULT_BLOCK_SIZE, Record};

/// Mooncake records have `hash_ids`, or both lengths.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && (head.contains("\"hash_ids\"")
            || (head.contains("\"input_length\"") && head.contains("\"output_length\"")))
        && !super::openai_batch::sniff(head)
        && !super::bailian::sniff(head)
}

/// Read a Mooncake JSONL trace.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut lines = LineReader::new(reader, source);
    loop {
        let source = lines.source().clone();
        let (loc, line) = match lines.next_line() {
            Ok(Some((n, line))) => (crate::error::Location::new(source, n), line),
            Ok(None) => return Ok(()),
            Err(e @ Error::Record { .. }) => {
                ctx.bad(e)?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let rec = match Record::parse_at(line, &loc) {
            Ok(rec) => rec,
            Err(e) => {
                ctx.bad(e)?;
                continue;
            }
        };
        let mut errors = Vec::new();
        let checked = record::check(&rec, DEFAULT_BLOCK_SIZE, &mut errors);
        if let Some(mut first) = errors.into_iter().next() {
            // The validator's hint names its own flag; Mooncake blocks are 512 tokens.
            if let Some(cut) = first.msg.find("; if the trace uses another block size") {
                first.msg.truncate(cut);
                first.msg.push_str(" (Mooncake blocks are 512 tokens)");
            }
            ctx.bad(first.at(&loc))?;
            continue;
        }
        let Some(ms) = checked.timestamp else {
            ctx.bad(
                crate::error::FieldError::new(
                    "timestamp",
                    "is missing: a trace record needs its arrival time",
                )
                .at(&loc),
            )?;
            continue;
        };
        if checked.output_length.is_none() {
            ctx.bad(crate::error::FieldError::new("output_length", "is missing").at(&loc))?;
            continue;
        }
        let mut req = Request::new(loc, (ms * 1e6).round() as i64);
        req.input_length = checked.input_length;
        req.output_length = checked.output_length.unwrap_or(1);
        req.passthrough = Some(rec.into_owned());
        ctx.push(req)?;
    }
}
