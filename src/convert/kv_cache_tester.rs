//! Agentic coding traces in the kv-cache-tester format (callanjfox/
//! kv-cache-tester `traces/`, the Weka / SemiAnalysis coding traces): one
//! JSON object per session, `id`, `block_size` (64), `hash_id_scope`, and
//! `requests[]` with `t` (seconds from the session's start), `model`, `in`,
//! `out`, `hash_ids`, `api_time`, `think_time` and, for streamed calls,
//! `ttft` (seconds). A subagent is an entry `type: "subagent"` with its own
//! `requests`, whose `t` count from the subagent's own `t`.
//!
//! Every call becomes a record of the session (`session_id` is the
//! trace's `id`) with its own `model`, an `id` (`ID:N`, a subagent's
//! `ID/AGENT:N`) and `after` the call before it in its agent, `delay`
//! its `think_time`. A subagent's first call waits for the parent call
//! listed before the subagent (the one that spawned it); the parent's first
//! call that starts once the subagent has ended (its last call's `t` plus
//! `api_time`, within the trace's one-second rounding of `t`) waits for it
//! too: the join. A join's `delay` is from the end of the last of what it
//! waits for. An agent's entries are taken in order of their `t` (traces
//! list some subagents' calls out of it), so that what a call waits for
//! starts no later than it. `hash_ids` are re-blocked to 512 tokens, keeping prefix
//! structure; ids of a trace whose scope is not `global` are its own.
//! `api_time` is kept as `observed.e2e_ms` and `ttft` as `observed.ttft_ms`
//! (absent when the trace has none). Sessions all start at 0.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, block_ids, count, number, required, string};
use super::{Ctx, Head, Request, container, hashing};
use crate::error::{FieldError, Location, Result};
use crate::hash::stable_hash;
use crate::time;

/// Seconds by which a parent call's `t` may precede a subagent's end and
/// still be the call that waits for it (`t` is rounded to the second).
const ROUNDING_S: f64 = 1.0;

/// A kv-cache-tester trace: a session object with `block_size` and
/// `requests`.
pub fn sniff(head: &Head) -> bool {
    head.is_json() && head.contains("\"requests\"") && head.contains("\"block_size\"")
}

/// Read kv-cache-tester sessions.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        match session(&obj, loc) {
            Ok(calls) => {
                ctx.reserve(calls.len());
                calls.into_iter().try_for_each(|r| ctx.push(r))
            }
            Err(e) => ctx.bad(e.at(loc)),
        }
    })
}

/// What every call of a session shares.
struct Session<'a> {
    id: String,
    block: u64,
    scope: u64,
    loc: &'a Location,
}

/// A call (or a subagent's last call) that others may wait for.
#[derive(Clone)]
struct Done {
    id: String,
    start_s: f64,
    end_s: f64,
}

/// The calls of one session, in the order listed.
pub fn session(obj: &Object, loc: &Location) -> std::result::Result<Vec<Request>, FieldError> {
    let id = required(string(obj, "id")?, "id")?;
    let block = count(obj, "block_size")?.unwrap_or(64);
    if block == 0 || hashing::BLOCK as u64 % block != 0 {
        return Err(FieldError::new(
            "block_size",
            format!("expected a divisor of 512, found {block}"),
        ));
    }
    let scope = match string(obj, "hash_id_scope")?.as_deref() {
        Some("global") => 0,
        _ => stable_hash(0x5c, id.as_bytes()),
    };
    let s = Session {
        id: id.clone(),
        block,
        scope,
        loc,
    };
    let mut out = Vec::new();
    agent(&s, obj, "requests", &id, 0.0, None, &mut out)?;
    Ok(out)
}

/// The calls of one agent (the session's main agent or a subagent),
/// `base_s` its start; `spawn` the parent call its first call waits for.
/// Returns the call of the agent that ended last.
fn agent(
    s: &Session,
    obj: &Object,
    field: &str,
    name: &str,
    base_s: f64,
    spawn: Option<&Done>,
    out: &mut Vec<Request>,
) -> std::result::Result<Option<Done>, FieldError> {
    let Some(Value::Array(entries)) = obj.get("requests") else {
        return Err(FieldError::new(
            field,
            "is missing: expected an array of calls",
        ));
    };
    // The entries in order of their `t` (the order listed among equal
    // ones): a call's `after` then names calls that start no later, as a
    // trace in arrival order must have it (traces list a subagent's calls
    // out of time order).
    let mut order = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let Value::Object(entry) = entry else {
            return Err(FieldError::new(at, "expected an object"));
        };
        let t = number(entry, "t")
            .map_err(|e| FieldError::new(format!("{at}.{}", e.field), e.msg))?
            .ok_or_else(|| FieldError::new(format!("{at}.t"), "is missing"))?;
        if t < 0.0 {
            return Err(FieldError::new(
                format!("{at}.t"),
                format!("expected seconds ≥ 0, found {t}"),
            ));
        }
        order.push((t, i, entry));
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut prev: Option<Done> = None;
    let mut running: Vec<Done> = Vec::new();
    let mut last: Option<Done> = None;
    let mut n = 0;
    for (t, i, entry) in order {
        let at = format!("{field}[{i}]");
        let within = |e: FieldError| FieldError::new(format!("{at}.{}", e.field), e.msg);
        if entry.get("type").and_then(Value::as_str) == Some("subagent") {
            let agent_id = string(entry, "agent_id")
                .map_err(within)?
                .unwrap_or_else(|| i.to_string());
            let sub = format!("{name}/{agent_id}");
            let spawner = prev.clone();
            if let Some(done) = agent(
                s,
                entry,
                &format!("{at}.requests"),
                &sub,
                base_s + t,
                spawner.as_ref(),
                out,
            )? {
                running.push(done);
            }
            continue;
        }
        let start_s = base_s + t;
        let mut req = call(s, entry, start_s).map_err(within)?;
        let id = format!("{name}:{n}");
        n += 1;
        // The subagents that ended by now join here (whose last call
        // started no later than this one: it comes before it).
        let (joined, still): (Vec<Done>, Vec<Done>) = running
            .into_iter()
            .partition(|d| d.end_s <= start_s + ROUNDING_S && d.start_s <= start_s);
        running = still;
        let mut waits: Vec<&Done> = prev.iter().chain(&joined).collect();
        if waits.is_empty() {
            waits.extend(spawn);
        }
        if !waits.is_empty() {
            req.after = waits.iter().map(|d| d.id.clone()).collect();
            let latest = waits.iter().map(|d| d.end_s).fold(f64::MIN, f64::max);
            let think = number(entry, "think_time").map_err(within)?;
            let gap_s = match think {
                Some(think) if joined.is_empty() && prev.is_some() => think,
                _ => start_s - latest,
            };
            req.delay_ms = Some((gap_s * 1000.0).max(0.0));
        }
        req.id = Some(id.clone());
        let end_s = start_s + req.observed.e2e_ms.unwrap_or(0.0) / 1000.0;
        let done = Done { id, start_s, end_s };
        if last.as_ref().is_none_or(|l| end_s >= l.end_s) {
            last = Some(done.clone());
        }
        prev = Some(done);
        out.push(req);
    }
    Ok(last)
}

/// One call's record: lengths, model, blocks, observed figures.
fn call(s: &Session, entry: &Object, start_s: f64) -> std::result::Result<Request, FieldError> {
    let start = time::seconds_to_ns(start_s)
        .ok_or_else(|| FieldError::new("t", format!("{start_s} is out of range")))?;
    let input = required(count(entry, "in")?, "in")?;
    let output = required(count(entry, "out")?, "out")?;
    let mut req = Request::new(s.loc.clone(), start);
    req.input_length = Some(input);
    req.output_length = output;
    req.model = string(entry, "model")?;
    req.session = Some(s.id.clone());
    if let Some(ids) = block_ids(entry, "hash_ids")? {
        req.hashes = Some(hashing::from_source_blocks(
            &ids,
            s.block,
            ("in", input),
            s.scope,
        )?);
    }
    for (field, slot) in [
        ("api_time", &mut req.observed.e2e_ms),
        ("ttft", &mut req.observed.ttft_ms),
    ] {
        if let Some(secs) = number(entry, field)? {
            if secs < 0.0 {
                return Err(FieldError::new(
                    field,
                    format!("expected seconds ≥ 0, found {secs}"),
                ));
            }
            *slot = Some(secs * 1000.0);
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_subagents_fan_out_and_join_at_each_level() {
        // s:0 runs 0-1 s; subagent a starts at 2 (its first call 2-3),
        // spawns b at 3.5 (3.5-5.5), and calls again at 7 (7-8); the
        // parent calls again at 10.
        let obj: Object = serde_json::from_str(
            r#"{"id":"s","block_size":64,"requests":[
                {"t":0,"in":10,"out":1,"api_time":1},
                {"t":2,"type":"subagent","agent_id":"a","requests":[
                    {"t":0,"in":10,"out":1,"api_time":1},
                    {"t":1.5,"type":"subagent","agent_id":"b","requests":[
                        {"t":0,"in":10,"out":1,"api_time":2}]},
                    {"t":5,"in":10,"out":1,"api_time":1,"think_time":1}]},
                {"t":10,"in":10,"out":1,"api_time":1,"think_time":9}]}"#,
        )
        .unwrap();
        let loc = Location::new("t".into(), 1);
        let calls = session(&obj, &loc).unwrap();
        let got: Vec<(String, Vec<String>, Option<f64>)> = calls
            .into_iter()
            .map(|r| (r.id.unwrap(), r.after, r.delay_ms))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("s:0".into(), s(&[]), None),
                // From s:0's end (1 s) to 2 s.
                ("s/a:0".into(), s(&["s:0"]), Some(1000.0)),
                // From s/a:0's end (3 s) to 3.5 s.
                ("s/a/b:0".into(), s(&["s/a:0"]), Some(500.0)),
                // Joins b (ended 5.5 s) at 7 s: 1.5 s after the later end.
                ("s/a:1".into(), s(&["s/a:0", "s/a/b:0"]), Some(1500.0)),
                // Joins a, whose own calls ended last at 8 s: 2 s.
                ("s:1".into(), s(&["s:0", "s/a:1"]), Some(2000.0)),
            ]
        );
    }
}
