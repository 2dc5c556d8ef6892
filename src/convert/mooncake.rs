//! Mooncake FAST'25 traces: already canonical records. Converting checks
//! every record against the contract, sorts by timestamp and rebases it;
//! every field passes through unchanged otherwise. Later turns of a session
//! (and records with `after`) may have no timestamp, as in AIPerf's
//! multi-turn layout: they stay right after the turn they follow.
//! Several inputs make one trace: the rules across records (timestamps on
//! all or none, `after` ids, sessions) hold across them.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use super::{Ctx, Head, Request};
use crate::error::{Error, FieldError, Result};
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

/// What the inputs read so far hold, for the rules across records.
#[derive(Default)]
pub struct Seen {
    presence: record::Presence,
    turns: record::Turns,
    /// Start of each session's latest turn, ns.
    session_start: HashMap<String, i64>,
    /// Start of the record with each id, ns.
    id_start: HashMap<String, i64>,
}

/// Read a Mooncake JSONL trace (one of the inputs).
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut seen = std::mem::take(&mut ctx.mooncake);
    let read = read_with(reader, source, ctx, &mut seen);
    ctx.mooncake = seen;
    read
}

fn read_with(
    reader: Box<dyn BufRead + Send>,
    source: Arc<str>,
    ctx: &mut Ctx,
    seen: &mut Seen,
) -> Result<()> {
    let mut lines = LineReader::new(reader, source);
    let Seen {
        presence,
        turns,
        session_start,
        id_start,
    } = seen;
    // Untimed later turns keep their place in their own input.
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
        if let Some(mut first) = errors.drain(..).next() {
            // The validator's hint names its own flag; Mooncake blocks are 512 tokens.
            if let Some(cut) = first.msg.find("; if the trace uses another block size") {
                first.msg.truncate(cut);
                first.msg.push_str(" (Mooncake blocks are 512 tokens)");
            }
            ctx.bad(first.at(&loc))?;
            continue;
        }
        // A session this record starts, forgotten again if the record is
        // left out: the next one of the session then starts it.
        let starts = checked.session_id.as_deref().filter(|s| !turns.has_seen(s));
        let follows = turns.follows(checked.session_id.as_deref(), checked.after.is_some());
        let left_out = |e: crate::error::Error, turns: &mut record::Turns, ctx: &mut Ctx| {
            if let Some(s) = starts {
                turns.forget(s);
            }
            ctx.bad(e)
        };
        // The rules trace-validate applies across records, on the order
        // written (by arrival): what it refuses is not converted.
        record::check_place(
            &rec,
            checked.after.as_deref(),
            follows,
            |id| id_start.contains_key(id),
            &mut errors,
        );
        if let Some(first) = errors.into_iter().next() {
            left_out(first.at(&loc), turns, ctx)?;
            continue;
        }
        if let Some(e) = arrives_first(&checked, &rec, id_start, session_start) {
            left_out(e.at(&loc), turns, ctx)?;
            continue;
        }
        // Timestamps on all records or none, as trace-validate wants
        // (records that follow another may go without in a timed trace).
        if !follows || checked.timestamp.is_some() {
            if let Some(e) = presence.check(loc.line, checked.timestamp.is_some()) {
                left_out(e.at(&loc), turns, ctx)?;
                continue;
            }
        }
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
            // An untimed trace keeps its order (the check above keeps
            // records without one out of a timed trace).
            None => 0,
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

/// A record that waits for one arriving after it (an `after` id, or for a
/// `"delta"` turn the session's previous turn): sorted by arrival it would
/// come first, before what it continues.
fn arrives_first(
    checked: &record::Checked,
    rec: &Record,
    id_start: &HashMap<String, i64>,
    session_start: &HashMap<String, i64>,
) -> Option<FieldError> {
    let ms = checked.timestamp?;
    let ts = (ms * 1e6).round() as i64;
    let delta = rec
        .get("message_mode")
        .is_some_and(|m| m.get().trim() == "\"delta\"");
    let (field, what, name, at) = match &checked.after {
        Some(after) => after.iter().find_map(|id| {
            let at = *id_start.get(id).filter(|&&at| at > ts)?;
            Some(("after", "the record it waits for", id, at))
        })?,
        None if delta => {
            let s = checked.session_id.as_ref()?;
            let at = *session_start.get(s).filter(|&&at| at > ts)?;
            ("session_id", "the previous turn of its session", s, at)
        }
        None => return None,
    };
    Some(FieldError::new(
        field,
        format!(
            "{}: {what} arrives at {} ms, after this record's timestamp {} ms (written in order of \
             arrival, this record would come before it)",
            crate::error::quote_value(&serde_json::Value::from(name.as_str()).to_string()),
            crate::text::format_ms(at as f64 / 1e6),
            crate::text::format_ms(ms),
        ),
    ))
}
