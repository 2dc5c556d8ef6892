//! TraceLab round traces (uw-syfi/TraceLab: Claude Code and Codex
//! sessions, JSONL, one LLM round per line): `session_id`, `round_index`,
//! `round_id`, `model`, `input_tokens_total` = `prefix_tokens` (read from
//! the prompt cache) + `newly_append_tokens`, `output_tokens`, and
//! `timing_events[]` (`user_message`, `tool_result`, `reasoning`, `text`,
//! `tool_call`, `usage_report`, each with an ISO `timestamp`).
//!
//! A round arrives when its input is complete: at its last `user_message`
//! or `tool_result` event (else its first event). It ends at its last
//! other event. A later round of a session waits for the round before it
//! (`after`), `delay` after that one ended: the tool and user time between
//! them. The trace has no time to first token, so none is written; the
//! span from arrival to end is `observed.e2e_ms` and `prefix_tokens` is
//! `observed.cached_tokens`. Its `hash_ids` are prefix chains (see
//! [`super::prefix`]) sharing `prefix_tokens`. A session's rounds are
//! taken in order of arrival, whatever the file's order.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, count, instant, required, string};
use super::{Ctx, Head, Request, container, prefix};
use crate::error::{FieldError, Result};

/// TraceLab rows split each prompt into `prefix_tokens` and
/// `newly_append_tokens`.
pub fn sniff(head: &Head) -> bool {
    head.is_json() && head.contains("\"newly_append_tokens\"") && head.contains("\"round_index\"")
}

/// The end of each session's last round, and its id.
#[derive(Default)]
struct Sessions {
    last: HashMap<String, (String, i64)>,
    chains: prefix::Chains,
}

/// Read TraceLab rounds. A session's rounds are chained in order of
/// arrival (the order in the file among equal ones), whatever order the
/// file lists them in: what a round waits for then comes before it, as
/// trace-validate wants. The rounds of an input are held until its end
/// (their figures, not their events).
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut rounds = Vec::new();
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        match parse(&obj, loc) {
            Ok(r) => {
                rounds.push(r);
                Ok(())
            }
            Err(e) => ctx.bad(e.at(loc)),
        }
    })?;
    // Stable: equal arrivals keep the file's order.
    rounds.sort_by_key(|r| r.start);
    let mut sessions = Sessions::default();
    ctx.reserve(rounds.len());
    for r in rounds {
        ctx.push(round(r, &mut sessions))?;
    }
    Ok(())
}

/// What a round row says, before it is placed in its session.
struct Round {
    loc: crate::error::Location,
    session: String,
    id: String,
    input: u64,
    output: u64,
    shared: u64,
    model: Option<String>,
    start: i64,
    end: Option<i64>,
}

fn parse(obj: &Object, loc: &crate::error::Location) -> std::result::Result<Round, FieldError> {
    let session = required(string(obj, "session_id")?, "session_id")?;
    let id = string(obj, "round_id")?
        .or(string(obj, "trace_key")?)
        .ok_or_else(|| FieldError::new("round_id", "is missing"))?;
    let input = required(count(obj, "input_tokens_total")?, "input_tokens_total")?;
    let output = required(count(obj, "output_tokens")?, "output_tokens")?;
    let shared = count(obj, "prefix_tokens")?.unwrap_or(0);
    let model = string(obj, "model")?;
    let (start, end) = times(obj)?;
    Ok(Round {
        loc: loc.clone(),
        session,
        id,
        input,
        output,
        shared,
        model,
        start,
        end,
    })
}

/// A round's record: after the session's previous round, if any.
fn round(r: Round, sessions: &mut Sessions) -> Request {
    let Round {
        loc,
        session,
        id,
        input,
        output,
        shared,
        model,
        start,
        end,
    } = r;
    let mut req = Request::new(loc, start);
    req.input_length = Some(input);
    req.output_length = output;
    req.session = Some(session.clone());
    req.id = Some(id.clone());
    req.observed.cached_tokens = Some(shared);
    if let Some(end) = end {
        req.observed.e2e_ms = Some((end - start) as f64 / 1e6);
    }
    if let Some((prev, prev_end)) = sessions.last.get(&session) {
        req.after = vec![prev.clone()];
        req.delay_ms = Some(((start - prev_end) as f64 / 1e6).max(0.0));
    }
    req.hashes = Some(sessions.chains.blocks(
        &session,
        model.as_deref().unwrap_or(""),
        input,
        shared,
    ));
    req.model = model;
    sessions.last.insert(session, (id, end.unwrap_or(start)));
    req
}

/// A round's arrival (its last input event, else its first event) and its
/// end (its last output event), epoch nanoseconds.
fn times(obj: &Object) -> std::result::Result<(i64, Option<i64>), FieldError> {
    let Some(Value::Array(events)) = obj.get("timing_events") else {
        return Err(FieldError::new(
            "timing_events",
            "is missing: a round's times are its events'",
        ));
    };
    let mut first = None;
    let mut input = None;
    let mut end = None;
    for (i, e) in events.iter().enumerate() {
        let field = format!("timing_events[{i}].timestamp");
        let Value::Object(e) = e else {
            return Err(FieldError::new(
                format!("timing_events[{i}]"),
                "expected an object",
            ));
        };
        let (at, _) = instant(e, "timestamp")
            .map_err(|err| FieldError::new(field.clone(), err.msg))?
            .ok_or_else(|| FieldError::new(field, "is missing"))?;
        first.get_or_insert(at);
        match e.get("event_type").and_then(Value::as_str) {
            Some("user_message" | "tool_result") => input = Some(at),
            _ => end = Some(end.map_or(at, |x: i64| x.max(at))),
        }
    }
    let start = input
        .or(first)
        .ok_or_else(|| FieldError::new("timing_events", "is empty: a round needs its times"))?;
    Ok((start, end.filter(|&e| e >= start)))
}
