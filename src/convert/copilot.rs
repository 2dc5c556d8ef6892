//! GitHub Copilot coding agent traces (Azure/AzurePublicDataset,
//! `GitHubCopilotCodingAgentDataset2026.md` and its `schema.json`): JSONL,
//! one agentic session per line, `session_id`, `date` and `turns[]`, each
//! turn with `turn_id`, `llm_calls[]` and `tool_batches[]`. A call has
//! `message_id`, `timestamp` (a date-time, UTC), `duration_ms` (end to
//! end), `initiator_type` (`user` opens a turn, `agent` follows up),
//! `model` (an anonymized label: `Model A`, …, `tool-model`), `result`
//! (`Success`, `UserCancel`, …) and `tokens` {`prompt`, `completion`,
//! `cached`}. The release has no text, only counts.
//!
//! Every call becomes a record of its session, `id` its `message_id`; its
//! start and `duration_ms` place it in the session's dependency graph (as
//! the calls of a LiteLLM session are, see [`super::graph`]): a call waits
//! for the calls that had ended when it started, `delay` the time between
//! (the tool batches run there, and the user's pause before a turn).
//! A `result` other than `Success` is a failed call. `tokens.cached` is
//! `observed.cached_tokens`, and the prompt's `hash_ids` are prefix chains
//! (see [`super::prefix`]) sharing that many tokens with the session's
//! previous call of the same model (the KV cache a call can read is its
//! model's). The trace has no time to first token.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, count, instant, number, required, string};
use super::{Ctx, Fate, Head, Request, container, prefix};
use crate::error::{FieldError, Location, Result};

/// A Copilot session: `turns` of `llm_calls`.
pub fn sniff(head: &Head) -> bool {
    head.is_json() && head.contains("\"llm_calls\"") && head.contains("\"turns\"")
}

/// Read Copilot sessions.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut chains = prefix::Chains::default();
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        match session(&obj, loc, &mut chains) {
            Ok(calls) => {
                ctx.reserve(calls.len());
                calls.into_iter().try_for_each(|r| ctx.push(r))
            }
            Err(e) => ctx.bad(e.at(loc)),
        }
    })
}

/// The calls of one session, in start order.
fn session(
    obj: &Object,
    loc: &Location,
    chains: &mut prefix::Chains,
) -> std::result::Result<Vec<Request>, FieldError> {
    let id = required(string(obj, "session_id")?, "session_id")?;
    let Some(Value::Array(turns)) = obj.get("turns") else {
        return Err(FieldError::new(
            "turns",
            "is missing: expected an array of turns",
        ));
    };
    let mut calls = Vec::new();
    for (t, turn) in turns.iter().enumerate() {
        let Value::Object(turn) = turn else {
            return Err(FieldError::new(format!("turns[{t}]"), "expected an object"));
        };
        let Some(list) = turn.get("llm_calls") else {
            continue;
        };
        let Value::Array(list) = list else {
            return Err(FieldError::new(
                format!("turns[{t}].llm_calls"),
                "expected an array of calls",
            ));
        };
        for (c, call) in list.iter().enumerate() {
            let at = format!("turns[{t}].llm_calls[{c}]");
            let Value::Object(call) = call else {
                return Err(FieldError::new(at, "expected an object"));
            };
            let within = |e: FieldError| FieldError::new(format!("{at}.{}", e.field), e.msg);
            calls.push(llm_call(call, &id, loc).map_err(within)?);
        }
    }
    // Listed by turn; a prefix chain follows the order the calls came in.
    calls.sort_by_key(|r| r.start_ns);
    for req in &mut calls {
        let model = req.model.as_deref().unwrap_or("");
        let input = req.input_length.unwrap_or(0);
        let shared = req.observed.cached_tokens.unwrap_or(0);
        req.hashes = Some(chains.blocks(&format!("{id}\n{model}"), model, input, shared));
    }
    Ok(calls)
}

/// One entry of `llm_calls`.
fn llm_call(
    call: &Object,
    session: &str,
    loc: &Location,
) -> std::result::Result<Request, FieldError> {
    let (start, _) = required(instant(call, "timestamp")?, "timestamp")?;
    let Some(Value::Object(tokens)) = call.get("tokens") else {
        return Err(FieldError::new(
            "tokens",
            "is missing: expected {prompt, completion, cached}",
        ));
    };
    let within = |e: FieldError| FieldError::new(format!("tokens.{}", e.field), e.msg);
    let input = count(tokens, "prompt")
        .map_err(within)?
        .ok_or_else(|| FieldError::new("tokens.prompt", "is missing"))?;
    let output = count(tokens, "completion")
        .map_err(within)?
        .ok_or_else(|| FieldError::new("tokens.completion", "is missing"))?;
    let cached = count(tokens, "cached").map_err(within)?.unwrap_or(0);
    if cached > input {
        return Err(FieldError::new(
            "tokens.cached",
            format!("{cached} is more than the prompt's {input} tokens"),
        ));
    }
    let mut req = Request::new(loc.clone(), start);
    req.session = Some(session.to_string());
    req.id = string(call, "message_id")?;
    req.model = string(call, "model")?;
    req.input_length = Some(input);
    req.output_length = output;
    req.observed.cached_tokens = Some(cached);
    if let Some(ms) = number(call, "duration_ms")? {
        if !(0.0..=crate::record::MAX_SPAN_MS).contains(&ms) {
            return Err(FieldError::new(
                "duration_ms",
                format!(
                    "expected milliseconds from 0 to {}, found {}",
                    crate::record::MAX_SPAN_MS,
                    call.get("duration_ms").map_or(Value::Null, Value::clone)
                ),
            ));
        }
        req.end_ns = crate::time::seconds_to_ns(ms / 1000.0).map(|d| start.saturating_add(d));
        req.observed.e2e_ms = Some(ms);
    }
    if string(call, "result")?.is_some_and(|r| r != "Success") {
        req.fate = Fate::Failed;
    }
    Ok(req)
}
