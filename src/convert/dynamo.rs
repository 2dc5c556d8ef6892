//! Dynamo's agentic Mooncake traces (ai-dynamo/dynamo
//! `agent_trace_to_mooncake --agentic`): JSONL rows with `request_id`,
//! `session_id` (the agent trajectory), `input_length`, `output_length`,
//! `hash_ids`, `timestamp` (ms), `wait_for` (the request ids a row waits
//! for: the trajectory's previous request, a subagent's spawning call, a
//! joined subagent's last call), `delay` (the wait that is not tool time)
//! and `tool_wait_ms`.
//!
//! `wait_for` becomes `after`, and `delay` + `tool_wait_ms` the record's
//! `delay` (Dynamo's replay waits both once the dependencies complete).
//! The rows do not say their block size: it is the power of two from 16 to
//! 512 that holds `input_length` in as few blocks as the row has ids, and
//! the ids are re-blocked from it to 512 (a one-id row is the same at any
//! size). A row without `timestamp` takes the latest of what it waits for.
//! A row that waits for a row not before it in the file (a cycle, an id of
//! no row), or for one that starts after it, is refused: trace-validate
//! would refuse the `after` written.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, block_ids, count, number, present, required, string};
use super::{Ctx, Head, Request, container, hashing};
use crate::error::{FieldError, Location, Result, quote_value};

/// Dynamo's agentic rows carry `request_id` and `prefix_reset` or
/// `wait_for`.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && head.contains("\"request_id\"")
        && head.contains_any(&["\"prefix_reset\"", "\"wait_for\"", "\"tool_wait_ms\""])
}

/// Read a Dynamo agentic Mooncake trace.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut starts: HashMap<String, i64> = HashMap::new();
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        ctx.row(row(&obj, loc, &mut starts), loc)
    })
}

fn row(
    obj: &Object,
    loc: &Location,
    starts: &mut HashMap<String, i64>,
) -> std::result::Result<Request, FieldError> {
    let id = required(string(obj, "request_id")?, "request_id")?;
    let input = count(obj, "input_length")?
        .or(count(obj, "input_tokens")?)
        .ok_or_else(|| FieldError::new("input_length", "is missing"))?;
    let output = count(obj, "output_length")?.or(count(obj, "output_tokens")?);
    let after: Vec<String> = match present(obj, "wait_for") {
        None => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                FieldError::new("wait_for", "expected an array of request ids (strings)")
            })?,
        Some(v) => {
            return Err(FieldError::new(
                "wait_for",
                format!(
                    "expected an array of request ids, found {}",
                    crate::error::quote_value(&v.to_string())
                ),
            ));
        }
    };
    // What a row waits for comes before it, in the file and in time, as
    // trace-validate wants of `after` (a cycle, or an id of no row, is
    // refused here rather than written).
    if let Some(a) = after.iter().find(|a| !starts.contains_key(*a)) {
        return Err(FieldError::new(
            "wait_for",
            format!(
                "{} is the request_id of no row before this one: a row waits only for earlier \
                 rows (a cycle, or a row not in the trace)",
                quote_value(&Value::from(a.as_str()).to_string())
            ),
        ));
    }
    let start = match number(obj, "timestamp")?.or(number(obj, "created_time")?) {
        Some(ms) if ms >= 0.0 => crate::time::seconds_to_ns(ms / 1000.0)
            .ok_or_else(|| FieldError::new("timestamp", format!("{ms} is out of range")))?,
        Some(ms) => {
            return Err(FieldError::new(
                "timestamp",
                format!("expected milliseconds ≥ 0, found {ms}"),
            ));
        }
        None => after
            .iter()
            .filter_map(|a| starts.get(a).copied())
            .max()
            .ok_or_else(|| {
                FieldError::new(
                    "timestamp",
                    "is missing, and no row it waits for came before",
                )
            })?,
    };
    let mut wait_ms = 0.0;
    let mut any_wait = false;
    for field in ["delay", "tool_wait_ms"] {
        if let Some(ms) = number(obj, field)? {
            if ms < 0.0 {
                return Err(FieldError::new(
                    field,
                    format!("expected milliseconds ≥ 0, found {ms}"),
                ));
            }
            wait_ms += ms;
            any_wait = true;
        }
    }
    if let Some((a, at)) = after
        .iter()
        .filter_map(|a| starts.get(a).map(|&at| (a, at)))
        .find(|&(_, at)| at > start)
    {
        return Err(FieldError::new(
            "wait_for",
            format!(
                "{} starts {} ms after this row: written in order of arrival, this row would \
                 come before what it waits for",
                quote_value(&Value::from(a.as_str()).to_string()),
                crate::text::format_ms((at - start) as f64 / 1e6)
            ),
        ));
    }
    starts.insert(id.clone(), start);

    let mut req = Request::new(loc.clone(), start);
    req.input_length = Some(input);
    // Without an output length the server decides, as in AIPerf: 1 asks
    // for the least.
    req.output_length = output.unwrap_or(1);
    req.session = string(obj, "session_id")?;
    req.model = string(obj, "model")?;
    req.id = Some(id);
    if !after.is_empty() {
        req.delay_ms = Some(if any_wait { wait_ms } else { 0.0 });
        req.after = after;
    }
    if let Some(ids) = block_ids(obj, "hash_ids")? {
        let block = block_size(ids.len() as u64, input)?;
        req.hashes = Some(hashing::from_source_blocks(
            &ids,
            block,
            ("input_length", input),
            0,
        )?);
    }
    Ok(req)
}

/// The block size of a row: the least power of two from 16 to 512 whose
/// blocks, as many as the row has ids, hold its prompt.
fn block_size(ids: u64, input: u64) -> std::result::Result<u64, FieldError> {
    [16, 32, 64, 128, 256, 512]
        .into_iter()
        .find(|&b| ids * b >= input)
        .ok_or_else(|| {
            FieldError::new(
                "hash_ids",
                format!(
                    "{ids} blocks cannot hold input_length {input}, even of 512 tokens \
                     (ceil({input} / 512) = {})",
                    input.div_ceil(512)
                ),
            )
        })
}
