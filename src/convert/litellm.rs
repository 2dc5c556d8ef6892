//! LiteLLM logs: StandardLoggingPayload objects (what callbacks and the
//! S3/GCS loggers write) and LiteLLM_SpendLogs rows (the proxy database:
//! `psql \copy … CSV HEADER` exports, `pg_dump`'s plain dumps of the table
//! (see [`super::sql_dump`]), the `/spend/logs` API's JSON, and
//! SpendLogsPayload objects). The two are told apart per object: a row has
//! `request_id`.
//!
//! Times: payload floats are epoch seconds; strings are date-times, naive
//! ones taken as UTC (said once). TTFT is written only when the call
//! streamed (`completionStartTime` before `endTime`: LiteLLM sets it to the
//! end time otherwise; and no `stream` false in the request parameters).
//! Embeddings generate no tokens by design: not failures. Failures (`status` failure) and response-cache hits
//! are marked so the caller can drop and count them.

use std::borrow::Cow;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::container::{self, Fields};
use super::fields::{self, Object, count, flag, instant, nested, present, string};
use super::sql_dump;
use super::{Ctx, Fate, Head, Prompt, Request};
use crate::error::{Error, FieldError, Location, Result};

/// What LiteLLM writes in place of a prompt when message logging is off.
const REDACTED: &str = "redacted-by-litellm";

/// The fields of StandardLoggingPayload, SpendLogs and SpendLogsPayload
/// records that conversion reads; the rest (model maps, hidden parameters,
/// cost breakdowns, responses, most of the metadata) is skipped unparsed.
const KEYS: Fields = Fields {
    top: &[
        "cache_hit",
        "call_type",
        "completionStartTime",
        "completion_tokens",
        "endTime",
        "id",
        "litellm_call_id",
        "messages",
        "model",
        "model_group",
        "model_parameters",
        "prompt_tokens",
        "request_duration_ms",
        "request_id",
        "response",
        "session_id",
        "startTime",
        "status",
        "trace_id",
    ],
    inner: &[
        (
            "metadata",
            &["litellm_call_id", "requester_metadata", "status"],
        ),
        (
            "proxy_server_request",
            &[
                "max_completion_tokens",
                "max_tokens",
                "messages",
                "prompt",
                "stream",
                "tools",
            ],
        ),
    ],
};

/// LiteLLM logs have `startTime` and one of its ids (JSON), or the
/// `request_id` and `startTime` columns of LiteLLM_SpendLogs (CSV).
pub fn sniff(head: &Head) -> bool {
    use super::{azure, bailian, burstgpt, langfuse, mooncake, openai_batch};
    if head.is_json() {
        head.contains("\"startTime\"")
            && head.contains_any(&[
                "\"request_id\"",
                "\"trace_id\"",
                "\"litellm_call_id\"",
                "\"call_type\"",
            ])
            && ![
                openai_batch::sniff,
                bailian::sniff,
                langfuse::sniff,
                mooncake::sniff,
            ]
            .iter()
            .any(|other| other(head))
    } else if sql_dump::starts(head.text) {
        head.contains(SPEND_LOGS)
    } else {
        head.has_columns(&["request_id", "startTime"])
            && !azure::sniff(head)
            && !burstgpt::sniff(head)
    }
}

/// The proxy's table of requests.
const SPEND_LOGS: &str = "LiteLLM_SpendLogs";

/// Read LiteLLM logs: JSON in any container shape, or SpendLogs as CSV or
/// as a PostgreSQL dump.
pub fn read(mut reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
    if sql_dump::starts(&String::from_utf8_lossy(&head[..head.len().min(64 * 1024)])) {
        return sql_dump::for_each_row(reader, source, ctx, SPEND_LOGS, convert_object);
    }
    container::for_each_object_or_row(reader, source, ctx, Some(&KEYS), convert_object)
}

fn convert_object(ctx: &mut Ctx, loc: &Location, obj: Object) -> Result<()> {
    let mut naive: Option<(&'static str, String)> = None;
    // The fields both forms share, then each form's own.
    let parsed = request(&obj, loc, &mut naive).and_then(|req| {
        if obj.contains_key("request_id") {
            spend_log(&obj, req)
        } else {
            payload(&obj, req)
        }
    });
    match parsed {
        Ok(req) => {
            if let Some((field, text)) = naive {
                ctx.naive_time(loc, field, &text);
            }
            ctx.push(req)
        }
        Err(e) => ctx.bad(e.at(loc)),
    }
}

/// Start, end and first-token times, and whether any was naive.
struct Times {
    start: i64,
    end: Option<i64>,
    first: Option<i64>,
}

fn times(
    obj: &Object,
    naive: &mut Option<(&'static str, String)>,
) -> std::result::Result<Times, FieldError> {
    let mut get = |field: &'static str| -> std::result::Result<Option<i64>, FieldError> {
        Ok(instant(obj, field)?.map(|(ns, text)| {
            if let (Some(text), None) = (text, &*naive) {
                *naive = Some((field, text));
            }
            ns
        }))
    };
    let start = get("startTime")?.ok_or_else(|| {
        FieldError::new("startTime", "is missing: the arrival time of the request")
    })?;
    let end = get("endTime")?;
    let first = get("completionStartTime")?;
    if let Some(e) = end {
        if e < start {
            return Err(FieldError::new(
                "endTime",
                format!(
                    "{} is before startTime {}",
                    show(obj, "endTime"),
                    show(obj, "startTime")
                ),
            ));
        }
    }
    Ok(Times { start, end, first })
}

fn show(obj: &Object, field: &str) -> String {
    obj.get(field).map(|v| v.to_string()).unwrap_or_default()
}

/// What payloads and SpendLogs rows share: times, token counts, model.
fn request(
    obj: &Object,
    loc: &Location,
    naive: &mut Option<(&'static str, String)>,
) -> std::result::Result<Request, FieldError> {
    let t = times(obj, naive)?;
    let mut req = Request::new(loc.clone(), t.start);
    req.end_ns = t.end;
    if let Some(end) = t.end {
        req.observed.e2e_ms = Some((end - t.start) as f64 / 1e6);
        // Not streamed: LiteLLM sets completionStartTime to endTime.
        if let Some(first) = t.first.filter(|&f| f >= t.start && f < end) {
            req.observed.ttft_ms = Some((first - t.start) as f64 / 1e6);
        }
    }
    tokens(&mut req, obj)?;
    req.mark_counts = true;
    if req.observed.completion_tokens.is_none_or(|n| n == 0) {
        // The response's text, counted in place of the missing count.
        req.output_text = present(obj, "response").and_then(super::chat::output_text);
        if req.output_text.is_none() {
            req.no_output = Some(super::chat::NO_OUTPUT);
        }
    }
    req.model = model(obj)?;
    Ok(req)
}

fn model(obj: &Object) -> std::result::Result<Option<String>, FieldError> {
    match string(obj, "model_group")? {
        Some(g) if !g.is_empty() => Ok(Some(g)),
        _ => Ok(string(obj, "model")?.filter(|m| !m.is_empty())),
    }
}

fn tokens(req: &mut Request, obj: &Object) -> std::result::Result<(), FieldError> {
    let prompt = count(obj, "prompt_tokens")?;
    let completion = count(obj, "completion_tokens")?;
    req.input_length = prompt;
    req.output_length = completion.unwrap_or(0);
    req.observed.prompt_tokens = prompt;
    req.observed.completion_tokens = completion;
    Ok(())
}

/// An embedding call (`call_type` embedding or aembedding): it generates
/// no tokens by design.
fn is_embedding(obj: &Object) -> std::result::Result<bool, FieldError> {
    Ok(string(obj, "call_type")?.is_some_and(|c| c.contains("embedding")))
}

fn failed(obj: &Object) -> std::result::Result<bool, FieldError> {
    Ok(string(obj, "status")?.is_some_and(|s| s.eq_ignore_ascii_case("failure")))
}

/// max_tokens of a request body or of `model_parameters`.
fn max_tokens(params: &Value) -> Option<u64> {
    ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| params.get(k).and_then(Value::as_u64))
}

/// The prompt of a request: chat messages, or a text prompt, unless redacted.
fn prompt_of(messages: Option<&Value>, tools: Option<&Value>) -> Option<Prompt> {
    let tools = tools.filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
    let prompt = match messages? {
        Value::String(s) if s.contains(REDACTED) || s.is_empty() => return None,
        Value::String(s) => Prompt {
            text: Some(s.clone()),
            ..Prompt::default()
        },
        Value::Array(items) if items.is_empty() => return None,
        Value::Array(items) if items.iter().all(Value::is_object) => {
            if items.iter().any(|m| {
                m.get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c == REDACTED)
            }) {
                return None;
            }
            Prompt {
                messages: Some(Value::Array(items.clone())),
                ..Prompt::default()
            }
        }
        Value::Array(items) if items.iter().all(Value::is_string) => Prompt {
            text: Some(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            ..Prompt::default()
        },
        _ => return None,
    };
    Some(Prompt {
        tools: tools.cloned(),
        ..prompt
    })
}

/// A StandardLoggingPayload's own fields.
fn payload(obj: &Object, mut req: Request) -> std::result::Result<Request, FieldError> {
    req.id = match string(obj, "litellm_call_id")? {
        Some(id) if !id.is_empty() => Some(id),
        _ => string(obj, "id")?,
    };
    let metadata = nested(obj, "metadata");
    req.session = string(obj, "trace_id")?;
    // LiteLLM makes up a trace id for every call not given one.
    req.session_if_repeated = req.session.is_some();
    if req.session.is_none() {
        req.session = metadata
            .as_ref()
            .and_then(|m| m.pointer("/requester_metadata/session_id"))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if failed(obj)? {
        req.fate = Fate::Failed;
    } else if flag(obj, "cache_hit")? == Some(true) {
        req.fate = Fate::CacheHit;
    }
    let params = nested(obj, "model_parameters").unwrap_or(Cow::Owned(Value::Null));
    if params.get("stream").and_then(Value::as_bool) == Some(false) {
        // Not streamed, whatever completionStartTime says (the top-level
        // `stream` is unreliable: true on a non-streamed Bedrock call).
        req.observed.ttft_ms = None;
    }
    req.embedding = is_embedding(obj)?;
    req.max_tokens = max_tokens(&params);
    let messages = present(obj, "messages");
    req.prompt = prompt_of(messages, params.get("tools")).map(Box::new);
    Ok(req)
}

/// A LiteLLM_SpendLogs row's own fields (CSV export, API JSON,
/// SpendLogsPayload).
fn spend_log(obj: &Object, mut req: Request) -> std::result::Result<Request, FieldError> {
    if let Some(ms) = fields::number(obj, "request_duration_ms")? {
        if ms.abs() > crate::record::MAX_SPAN_MS {
            let text = match &obj["request_duration_ms"] {
                Value::String(t) => t.trim().to_string(),
                v => v.to_string(),
            };
            return Err(FieldError::new(
                "request_duration_ms",
                format!(
                    "{} is over the limit of {} ms: no real log reaches it",
                    crate::error::quote_value(&text),
                    crate::text::format_ms(crate::record::MAX_SPAN_MS)
                ),
            ));
        }
        req.observed.e2e_ms = Some(ms);
    }
    let metadata = nested(obj, "metadata");
    let call_id = metadata
        .as_ref()
        .and_then(|m| m.get("litellm_call_id"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    req.id = match call_id {
        Some(id) => Some(id),
        None => string(obj, "request_id")?,
    };
    // SpendLogs' session_id is the call's trace id (made up when not given).
    req.session = string(obj, "session_id")?;
    req.session_if_repeated = true;
    let status_failed = failed(obj)?
        || metadata
            .as_ref()
            .and_then(|m| m.get("status"))
            .and_then(Value::as_str)
            .is_some_and(|s| s == "failure");
    if status_failed {
        req.fate = Fate::Failed;
    } else if flag(obj, "cache_hit")? == Some(true) {
        req.fate = Fate::CacheHit;
    }
    req.embedding = is_embedding(obj)?;
    if let Some(body) = nested(obj, "proxy_server_request") {
        if body.get("stream").and_then(Value::as_bool) == Some(false) {
            req.observed.ttft_ms = None;
        }
        req.max_tokens = max_tokens(&body);
        let messages = body.get("messages").or_else(|| body.get("prompt"));
        req.prompt = prompt_of(messages, body.get("tools")).map(Box::new);
    }
    Ok(req)
}
