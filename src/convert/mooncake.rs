//! Mooncake FAST'25 traces: already canonical records. Converting checks
//! every record against the contract, sorts by timestamp and rebases it;
//! every field passes through unchanged otherwise. Later turns of a session
//! (and records with `after`) may have no timestamp, as in AIPerf's
//! multi-turn layout: they stay right after the turn they follow.

use std::collections::HashMap;
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
    // Whether the trace has timestamps, from its first record.
    let mut timed: Option<bool> = None;
    let mut turns = record::Turns::default();
    let mut session_start: HashMap<String, i64> = HashMap::new();
    let mut id_start: HashMap<String, i64> = HashMap::new();
    let mut last_start = 0;
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
        let follows = turns.follows(checked.session_id.as_deref(), checked.after.is_some());
        let timed = *timed.get_or_insert(checked.timestamp.is_some());
        let start_ns = match checked.timestamp {
            Some(ms) => (ms * 1e6).round() as i64,
            // A later turn keeps its place in the file, and never goes
            // before the turn it follows (the sort is stable); it keeps
            // having no timestamp.
            None if follows => checked
                .session_id
                .as_ref()
                .and_then(|s| session_start.get(s).copied())
                .into_iter()
                .chain(
                    checked
                        .after
                        .iter()
                        .flatten()
                        .filter_map(|id| id_start.get(id).copied()),
                )
                .fold(last_start, i64::max),
            // An untimed trace keeps its order.
            None if !timed => 0,
            None => {
                ctx.bad(
                    crate::error::FieldError::new(
                        "timestamp",
                        "is missing: a trace record needs its arrival time",
                    )
                    .at(&loc),
                )?;
                continue;
            }
        };
        last_start = start_ns;
        if let Some(s) = &checked.session_id {
            session_start.insert(s.clone(), start_ns);
        }
        if let Some(id) = &checked.id {
            id_start.insert(id.clone(), start_ns);
        }
        // Without `output_length` the server decides, as in AIPerf.
        let mut req = Request::new(loc, start_ns);
        req.input_length = checked.input_length;
        req.output_length = checked.output_length.unwrap_or(1);
        req.passthrough = Some(rec.into_owned());
        ctx.push(req)?;
    }
}
