//! Langfuse observations, from every surface that exports them: the public
//! API (v1 page-based and v2 cursor-based responses, `{"data": [...]}`), the
//! UI "download trace" JSON (`{"trace": {...}, "observations": [...]}`), the
//! UI batch export (CSV, JSON, JSONL; camelCase) and the blob-storage export
//! (JSONL or Parquet, snake_case, naive UTC times in JSONL), and ingestion batches
//! (`{"batch": [{"type": "generation-create", "body": …}]}`, as LiteLLM's
//! Langfuse logger sends them; times with the host's offset).
//!
//! Only GENERATION observations are requests; the others are counted and
//! left out, and so are wrappers of another generation and an observation
//! read twice (see [`State::finish`]). Sessions come from the observation (`sessionId`), the
//! downloaded trace, or trace records given as further inputs (the traces
//! API response, the blob export's traces table), joined on the trace id.
//! `latency` and `timeToFirstToken` are seconds in most exports and
//! milliseconds in some (pydantic-ai's UI download): each is checked against
//! the observation's own start, first-token and end times, and the unit that
//! agrees is taken; a warning says when neither does (seconds are taken).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, count, instant, nested, number, present, string};
use super::{Ctx, Fate, Head, Prompt, Request, container};
use crate::error::{FieldError, Location, Result};
use crate::text::plural;

/// Langfuse's own keys (JSON), or its `traceId` and `startTime` columns
/// (the UI's CSV export).
pub fn sniff(head: &Head) -> bool {
    // Parquet: only Langfuse's blob-storage export comes so.
    if head.starts_with("PAR1") {
        return true;
    }
    if head.is_json() {
        head.contains_any(&[
            "\"generation-create\"",
            "\"observations\"",
            "\"traceId\"",
            "\"projectId\"",
            "\"project_id\"",
            "\"usageDetails\"",
            "\"usage_details\"",
        ]) && !super::openai_batch::sniff(head)
            && !super::bailian::sniff(head)
    } else {
        (head.has_column("\"traceId\"") || head.has_column("traceId"))
            && (head.has_column("\"startTime\"") || head.has_column("startTime"))
            && !super::azure::sniff(head)
            && !super::burstgpt::sniff(head)
    }
}

/// Read Langfuse exports: JSON in any container shape, or the UI's CSV.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut st = State::default();
    container::for_each_object_or_row(reader, source.clone(), ctx, None, |ctx, loc, obj| {
        object(ctx, &mut st, loc, obj, None)
    })?;
    st.finish(ctx, &source)
}

/// Per input: the generations, held until its end to find the wrappers
/// among them, and every observation's parent.
#[derive(Default)]
struct State {
    generations: Vec<Held>,
    /// Observation id to its parent's (as 128-bit hashes).
    parents: HashMap<u128, u128>,
    /// Observation ids read: the same observation given twice (two
    /// downloads of one trace, overlapping API pages) is read once.
    seen: HashSet<u128>,
    duplicates: u64,
}

/// A generation, with its id and whether it reports token usage.
struct Held {
    req: Request,
    id: u128,
    usage: bool,
}

/// An observation id as a 128-bit hash (0: none).
fn id_key(id: Option<&str>) -> u128 {
    id.map_or(0, |id| xxhash_rust::xxh3::xxh3_128(id.as_bytes()).max(1))
}

impl State {
    /// Hand on the generations that are no wrapper: a generation with a
    /// generation that reports usage among its descendants (Vercel's
    /// `ai.generateText` over `ai.generateText.doGenerate`, an agent
    /// observation with usage of its own) counts that call again, so the
    /// innermost calls are kept.
    fn finish(self, ctx: &mut Ctx, source: &str) -> Result<()> {
        let State {
            generations,
            parents,
            duplicates,
            ..
        } = self;
        let ids: HashSet<u128> = generations.iter().map(|g| g.id).collect();
        let mut wrappers: HashSet<u128> = HashSet::new();
        for g in generations.iter().filter(|g| g.usage && g.id != 0) {
            let mut at = parents.get(&g.id).copied();
            // A bound on the walk: parents may form a cycle.
            for _ in 0..10_000 {
                let Some(p) = at else { break };
                if ids.contains(&p) && !wrappers.insert(p) {
                    break;
                }
                at = parents.get(&p).copied();
            }
        }
        let mut left_out = Vec::new();
        if !wrappers.is_empty() {
            let n = wrappers.len() as u64;
            left_out.push(format!("{n} wrapper{} of another generation", plural(n)));
        }
        if duplicates > 0 {
            left_out.push(format!(
                "{duplicates} duplicate{} (an observation id read before)",
                plural(duplicates)
            ));
        }
        if !left_out.is_empty() {
            crate::cli::note(format!("{source}: left out {}", left_out.join(", ")));
        }
        for g in generations {
            if !wrappers.contains(&g.id) {
                ctx.push(g.req)?;
            }
        }
        Ok(())
    }
}

fn first_of(obj: &Object, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| string(obj, k).ok().flatten())
}

/// An observation, a trace, or a downloaded trace holding observations.
fn object(
    ctx: &mut Ctx,
    st: &mut State,
    loc: &Location,
    obj: Object,
    session: Option<&str>,
) -> Result<()> {
    if let (Some(Value::Array(observations)), Some(trace)) =
        (obj.get("observations"), obj.get("trace"))
    {
        // UI download: the trace carries the session.
        let session = trace
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        for o in observations {
            match o {
                Value::Object(o) => object(ctx, st, loc, o.clone(), session.as_deref())?,
                other => ctx.bad(
                    FieldError::new(
                        "observations",
                        format!(
                            "expected objects, found {}",
                            crate::error::quote_value(&other.to_string())
                        ),
                    )
                    .at(loc),
                )?,
            }
        }
        return Ok(());
    }
    if let Some(Value::Array(events)) = obj.get("batch") {
        // An ingestion batch (what LiteLLM's Langfuse logger sends).
        for event in events {
            let body = event.get("body").and_then(Value::as_object);
            match (event.get("type").and_then(Value::as_str), body) {
                (Some("trace-create"), Some(body)) => {
                    if let (Some(id), Some(s)) = (
                        body.get("id").and_then(Value::as_str),
                        body.get("sessionId").and_then(Value::as_str),
                    ) {
                        ctx.trace_sessions.insert(id.to_string(), s.to_string());
                    }
                }
                (Some("generation-create"), Some(body)) => {
                    let mut body = body.clone();
                    body.insert("type".into(), Value::String("GENERATION".into()));
                    object(ctx, st, loc, body, session)?;
                }
                _ => {}
            }
        }
        return Ok(());
    }
    if present(&obj, "type").is_none() {
        // A trace: remember its session for the observations that name it.
        // (A line with no id is no trace at all: a wrong --from.)
        if present(&obj, "id").is_some() {
            ctx.traces_read += 1;
        }
        if let (Some(id), Some(s)) = (
            first_of(&obj, &["id"]),
            first_of(&obj, &["sessionId", "session_id"]),
        ) {
            ctx.trace_sessions.insert(id, s);
        }
        return Ok(());
    }
    let id = id_key(first_of(&obj, &["id"]).as_deref());
    if id != 0 {
        if !st.seen.insert(id) {
            st.duplicates += 1;
            return Ok(());
        }
        let parent =
            id_key(first_of(&obj, &["parentObservationId", "parent_observation_id"]).as_deref());
        if parent != 0 {
            st.parents.insert(id, parent);
        }
    }
    let mut warnings = Vec::new();
    match observation(&obj, loc, &mut warnings) {
        Ok((mut req, naive)) => {
            if let Some((field, text)) = naive {
                ctx.naive_time(loc, field, &text);
            }
            for w in warnings {
                crate::cli::warn_at(loc, w);
            }
            if req.session.is_none() {
                req.session = session.map(str::to_string);
            }
            if req.fate == Fate::NotGeneration {
                return ctx.push(req);
            }
            let usage = req.observed.prompt_tokens.is_some_and(|n| n > 0)
                || req.observed.completion_tokens.is_some_and(|n| n > 0);
            st.generations.push(Held { req, id, usage });
            Ok(())
        }
        Err(e) => ctx.bad(e.at(loc)),
    }
}

/// A date-time field under either of its names.
fn time_field(
    obj: &Object,
    names: [&'static str; 2],
    naive: &mut Option<(&'static str, String)>,
) -> std::result::Result<Option<i64>, FieldError> {
    for name in names {
        if let Some((ns, text)) = instant(obj, name)? {
            if let (Some(text), None) = (text, &*naive) {
                *naive = Some((name, text));
            }
            return Ok(Some(ns));
        }
    }
    Ok(None)
}

/// Token usage: the reduced figure, else the sum of the detail keys that
/// are `key` or start with `key_`, else the legacy fields.
fn usage(
    obj: &Object,
    reduced: &str,
    key: &str,
    legacy: &str,
) -> std::result::Result<Option<u64>, FieldError> {
    if let Some(n) = count(obj, reduced)?.filter(|&n| n > 0) {
        return Ok(Some(n));
    }
    let details = nested(obj, "usageDetails").or_else(|| nested(obj, "usage_details"));
    if let Some(Value::Object(d)) = details.as_deref() {
        let prefix = format!("{key}_");
        let mut sum = None;
        for (k, v) in d {
            if k == key || k.starts_with(&prefix) {
                let n = v.as_u64().ok_or_else(|| {
                    FieldError::new(
                        format!("usageDetails.{k}"),
                        format!("expected an integer ≥ 0, found {v}"),
                    )
                })?;
                sum = Some(sum.unwrap_or(0) + n);
            }
        }
        if sum.is_some() {
            return Ok(sum);
        }
    }
    if let Some(Value::Object(u)) = nested(obj, "usage").as_deref() {
        if let Some(n) = u.get(key).and_then(Value::as_u64) {
            return Ok(Some(n));
        }
    }
    count(obj, legacy)
}

/// A duration the export gives in seconds or in milliseconds, in ms: the
/// unit that agrees with what the observation's own times measure (within
/// 10 % or 5 ms); seconds when there is nothing to compare with, and with a
/// warning when neither agrees.
fn in_ms(
    value: f64,
    field: &str,
    measured: Option<f64>,
    against: &str,
    warnings: &mut Vec<String>,
) -> f64 {
    let Some(m) = measured else {
        return value * 1000.0;
    };
    let agrees = |ms: f64| (ms - m).abs() <= (0.1 * m).max(5.0);
    if agrees(value * 1000.0) {
        value * 1000.0
    } else if agrees(value) {
        value
    } else {
        warnings.push(format!(
            "field `{field}`: {} agrees with the observation's times ({} ms from startTime to {against}) \
             neither as seconds nor as milliseconds; taken as seconds",
            crate::text::format_ms(value),
            crate::text::format_ms(m),
        ));
        value * 1000.0
    }
}

#[allow(clippy::type_complexity)]
fn observation(
    obj: &Object,
    loc: &Location,
    warnings: &mut Vec<String>,
) -> std::result::Result<(Request, Option<(&'static str, String)>), FieldError> {
    let mut naive = None;
    let start = time_field(obj, ["startTime", "start_time"], &mut naive)?.ok_or_else(|| {
        FieldError::new(
            "startTime",
            "is missing: the arrival time of the generation",
        )
    })?;
    let end = time_field(obj, ["endTime", "end_time"], &mut naive)?;
    let first = time_field(
        obj,
        ["completionStartTime", "completion_start_time"],
        &mut naive,
    )?;
    let mut req = Request::new(loc.clone(), start);
    let kind = string(obj, "type")?.unwrap_or_default();
    if kind != "GENERATION" {
        req.fate = Fate::NotGeneration;
        return Ok((req, None));
    }
    // An end before the start (or a number of seconds far from it) is no
    // end: it would give the next call an impossible delay.
    let end = match end {
        Some(e) if e < start => {
            let raw = present(obj, "endTime").or_else(|| present(obj, "end_time"));
            warnings.push(format!(
                "field `endTime`: {} is before startTime; ignored (no end time for this \
                 generation, and no call waits for it)",
                crate::error::quote_value(&raw.map(Value::to_string).unwrap_or_default())
            ));
            None
        }
        e => e,
    };
    req.end_ns = end;
    let latency = number(obj, "latency")?;
    let measured_e2e = end
        .filter(|&e| e >= start)
        .map(|e| (e - start) as f64 / 1e6);
    req.observed.e2e_ms = match (latency, measured_e2e) {
        (Some(v), measured) => Some(in_ms(v, "latency", measured, "endTime", warnings)),
        (None, measured) => measured,
    };
    let (ttft, ttft_field) = match number(obj, "timeToFirstToken")? {
        Some(v) => (Some(v), "timeToFirstToken"),
        None => (number(obj, "time_to_first_token")?, "time_to_first_token"),
    };
    // Not streamed: LiteLLM's logger sets completionStartTime to endTime
    // (and Langfuse derives timeToFirstToken from it), so neither is a
    // first token; modelParameters.stream false says so outright.
    let stream = nested(obj, "modelParameters")
        .and_then(|p| p.get("stream").cloned())
        .and_then(|v| match v {
            Value::Bool(b) => Some(b),
            Value::String(s) => s.parse::<bool>().ok(),
            _ => None,
        });
    let not_streamed =
        stream == Some(false) || matches!((first, end), (Some(f), Some(e)) if f >= e);
    let ttft = ttft.filter(|_| !not_streamed);
    let first = first.filter(|_| !not_streamed);
    let measured_ttft = first
        .filter(|&f| f >= start)
        .map(|f| (f - start) as f64 / 1e6);
    req.observed.ttft_ms = match (ttft, measured_ttft) {
        (Some(v), measured) => Some(in_ms(
            v,
            ttft_field,
            measured,
            "completionStartTime",
            warnings,
        )),
        (None, measured) => measured,
    };
    let input = usage(obj, "inputUsage", "input", "promptTokens")?;
    let output = usage(obj, "outputUsage", "output", "completionTokens")?;
    req.mark_counts = true;
    if output.is_none_or(|n| n == 0) {
        req.output_text = present(obj, "output").and_then(super::chat::output_text);
        if req.output_text.is_none() {
            req.no_output = Some(super::chat::NO_OUTPUT);
        }
    }
    req.input_length = input;
    req.output_length = output.unwrap_or(0);
    req.observed.prompt_tokens = input;
    req.observed.completion_tokens = output;
    req.model = first_of(obj, &["model", "providedModelName", "provided_model_name"]);
    req.id = string(obj, "id")?;
    req.session = first_of(obj, &["sessionId", "session_id"]);
    req.trace_id = first_of(obj, &["traceId", "trace_id"]);
    if string(obj, "level")?.as_deref() == Some("ERROR") {
        req.fate = Fate::Failed;
    }
    let params = nested(obj, "modelParameters")
        .or_else(|| nested(obj, "model_parameters"))
        .unwrap_or(Cow::Owned(Value::Null));
    req.max_tokens = params.get("max_tokens").and_then(|v| match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    req.prompt = prompt(obj, &params).map(Box::new);
    Ok((req, naive))
}

/// Messages from `input`: a list of messages (OpenAI's, OTel's parts,
/// LangChain's; [`super::chat`] maps them), or `{messages, tools}`;
/// anything else (LangChain args, plain text) is not a conversation this
/// tool can replay.
fn prompt(obj: &Object, params: &Value) -> Option<Prompt> {
    let input = nested(obj, "input")?;
    let (messages, tools) = match &*input {
        Value::Array(items) => (items.clone(), None),
        Value::Object(o) => match o.get("messages") {
            Some(Value::Array(items)) => (items.clone(), o.get("tools").cloned()),
            _ => return None,
        },
        _ => return None,
    };
    // A message has a role, or is LangChain's serialized form (a `type`).
    if messages.is_empty()
        || !messages.iter().all(|m| {
            m.get("role").is_some_and(Value::is_string)
                || m.get("type").is_some_and(Value::is_string)
        })
    {
        return None;
    }
    let tools = tools
        .or_else(|| params.get("tools").cloned())
        .or_else(|| tool_definitions(obj))
        .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
    Some(Prompt {
        messages: Some(Value::Array(messages)),
        text: None,
        tools,
    })
}

/// `toolDefinitions`: a map from name to a JSON string of the definition.
fn tool_definitions(obj: &Object) -> Option<Value> {
    let defs = nested(obj, "toolDefinitions").or_else(|| nested(obj, "tool_definitions"))?;
    let defs = defs.as_object()?;
    let tools: Vec<Value> = defs
        .values()
        .filter_map(|v| match v {
            Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        })
        .collect();
    (!tools.is_empty()).then_some(Value::Array(tools))
}
