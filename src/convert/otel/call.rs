//! The rules on one span: is it a model call, its times, status and
//! time to first token, the call it makes, and its prompt.

use std::sync::Arc;

use serde_json::{Value, json};

use super::super::chat::{openai_messages, output_text, parts_text};
use super::super::fields::{Fields, instant, number, present, string};
use super::super::{Ctx, Fate, Prompt, Request};
use super::attrs::*;
use super::{BLOCK, Call, Ids, State, Tally, Text, Texts, id_key};
use crate::error::{FieldError, Location, quote_value};

/// Whether a span is a model call (see the module's description).
pub(super) fn is_call<O: Fields>(obj: &O, attrs: &Attrs) -> bool {
    if let Some(Value::String(op)) = present(attrs, "gen_ai.operation.name") {
        return GENERATIONS.contains(&op.as_str());
    }
    // AgentOps names its kinds (`llm`, `agent`, `workflow`…); its
    // `span_kind` is OpenTelemetry's (Client, Internal), not Phoenix's.
    if let Some(Value::String(k)) = present(attrs, "agentops.span.kind") {
        return k == "llm";
    }
    // promptflow types every span it traces (`Function`, `Flow`,
    // `Embedding`…); `LLM` is a call of a model's chat or completions API.
    if present(attrs, "framework").and_then(Value::as_str) == Some("promptflow") {
        if let Some(Value::String(t)) = present(attrs, "span_type") {
            return t == "LLM";
        }
    }
    let kind = present(attrs, "openinference.span.kind").or_else(|| present(obj, "span_kind"));
    if let Some(Value::String(k)) = kind {
        return k.eq_ignore_ascii_case("LLM");
    }
    if let Some(Value::String(op)) = present(attrs, "ai.operationId") {
        return op.ends_with(".doGenerate") || op.ends_with(".doStream");
    }
    INPUT
        .iter()
        .chain(OUTPUT)
        .any(|k| present(attrs, k).is_some())
}

/// Epoch nanoseconds: an integer (or integer text: 19 digits do not fit a
/// double), a `[seconds, nanoseconds]` pair, or a date-time.
pub(super) fn time_ns<O: Fields>(
    obj: &O,
    field: &str,
) -> std::result::Result<Option<i64>, FieldError> {
    let Some(v) = present(obj, field) else {
        return Ok(None);
    };
    let bad = || {
        FieldError::new(
            field,
            format!("expected a time, found {}", quote_value(&v.to_string())),
        )
    };
    match v {
        Value::Number(n) => n.as_i64().map(Some).ok_or_else(bad),
        Value::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse::<i64>().map(Some).map_err(|_| bad())
        }
        Value::Array(pair) if pair.len() == 2 => match (pair[0].as_i64(), pair[1].as_i64()) {
            (Some(s), Some(ns)) => s
                .checked_mul(1_000_000_000)
                .and_then(|x| x.checked_add(ns))
                .map(Some)
                .ok_or_else(bad),
            _ => Err(bad()),
        },
        Value::String(_) if !field.ends_with("UnixNano") => {
            instant(obj, field).map(|t| t.map(|(ns, _)| ns))
        }
        _ => Err(bad()),
    }
}

/// A time in microseconds (Jaeger's), as nanoseconds; not a token count,
/// so not under the token limit.
pub(super) fn micros_as_ns<O: Fields>(
    obj: &O,
    field: &str,
) -> std::result::Result<Option<i64>, FieldError> {
    let Some(us) = time_ns(obj, field)? else {
        return Ok(None);
    };
    us.checked_mul(1000)
        .filter(|ns| *ns >= 0)
        .map(Some)
        .ok_or_else(|| {
            FieldError::new(
                field,
                format!("{us} µs is not a time this side of the year 2262"),
            )
        })
}

/// A time under OTLP's name, where 0 is unset, else under the first of
/// the other shapes' names that is present.
pub(super) fn time_named<O: Fields>(
    obj: &O,
    otlp: &str,
    others: [&str; 2],
) -> std::result::Result<Option<i64>, FieldError> {
    Ok(match time_ns(obj, otlp)? {
        Some(0) => None,
        Some(t) => Some(t),
        None => match time_ns(obj, others[0])? {
            Some(t) => Some(t),
            None => time_ns(obj, others[1])?,
        },
    })
}

/// Start and end, epoch ns, under each shape's names.
pub(super) fn times<O: Fields>(
    obj: &O,
) -> std::result::Result<(Option<i64>, Option<i64>), FieldError> {
    if obj.field("spanID").is_some() {
        // Jaeger: microseconds, and a duration instead of an end.
        let start = micros_as_ns(obj, "startTime")?;
        let dur = micros_as_ns(obj, "duration")?;
        return Ok((start, start.zip(dur).map(|(s, d)| s + d)));
    }
    let start = time_named(obj, "startTimeUnixNano", ["startTime", "start_time"])?;
    let mut end = time_named(obj, "endTimeUnixNano", ["endTime", "end_time"])?;
    if end.is_none() && obj.field("span_attributes").is_some() {
        // AgentOps: `duration` in nanoseconds.
        let dur = time_ns(obj, "duration")?;
        end = start.zip(dur).and_then(|(s, d)| s.checked_add(d));
    }
    Ok((start, end))
}

/// A naive date-time among the span's times, for the one warning.
pub(super) fn naive_time<O: Fields>(obj: &O) -> Option<(&'static str, String)> {
    for field in ["start_time", "startTime"] {
        if let Some(Value::String(s)) = present(obj, field) {
            if s.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            if let Ok(Some((_, Some(text)))) = instant(obj, field) {
                return Some((field, text));
            }
        }
    }
    None
}

pub(super) fn is_error<O: Fields>(obj: &O, attrs: &Attrs) -> bool {
    let status = obj.field("status");
    let code = status
        .and_then(|s| s.get("code").or_else(|| s.get("status_code")))
        .or_else(|| obj.field("status_code"));
    let code_error = match code {
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        Some(Value::String(s)) => {
            matches!(
                s.as_str(),
                "STATUS_CODE_ERROR" | "ERROR" | "Error" | "error" | "2"
            )
        }
        _ => false,
    };
    let tag_error = matches!(present(attrs, "otel.status_code"), Some(Value::String(s)) if s.eq_ignore_ascii_case("error"))
        || matches!(present(attrs, "error"), Some(Value::Bool(true)));
    code_error || tag_error || present(attrs, "error.type").is_some()
}

/// Time to first token, ms: an attribute (each in its own unit), else a
/// first-token event with a time.
pub(super) fn ttft_ms<O: Fields>(
    obj: &O,
    attrs: &Attrs,
    start: Option<i64>,
) -> std::result::Result<Option<f64>, FieldError> {
    if let Some(s) = number(attrs, "gen_ai.response.time_to_first_chunk")? {
        return Ok(Some(s * 1000.0));
    }
    if let Some(s) = number(attrs, "gen_ai.server.time_to_first_token")? {
        return Ok(Some(s * 1000.0));
    }
    if let Some(v) = present(attrs, "gen_ai.response.time_to_first_token") {
        // Gateways (Bifrost) write integer nanoseconds; a fraction is seconds.
        return match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.as_f64().map(|ns| ns / 1e6)),
            _ => {
                number(attrs, "gen_ai.response.time_to_first_token").map(|s| s.map(|s| s * 1000.0))
            }
        };
    }
    if let Some(ms) = number(attrs, "ai.response.msToFirstChunk")? {
        return Ok(Some(ms));
    }
    let Some(start) = start else {
        return Ok(None);
    };
    for e in obj
        .field("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(e) = e.as_object() else { continue };
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        if !(name.contains("first") && (name.contains("token") || name.contains("chunk"))) {
            continue;
        }
        let at = match time_ns(e, "timeUnixNano")? {
            Some(t) => Some(t),
            None => match time_ns(e, "time")? {
                Some(t) => Some(t),
                None => time_ns(e, "timestamp")?,
            },
        };
        if let Some(at) = at.filter(|&t| t > 0) {
            return Ok(Some((at - start) as f64 / 1e6));
        }
    }
    Ok(None)
}

/// Turn a model-call span into a request (held until the input ends).
pub(super) fn call<O: Fields>(
    obj: &O,
    attrs: &Attrs,
    ids: &Ids,
    loc: &Location,
    st: &mut State,
    ctx: &mut Ctx,
) -> std::result::Result<(), FieldError> {
    if !is_call(obj, attrs) {
        return Ok(());
    }
    let (start, end) = times(obj)?;
    if let Some((field, text)) = naive_time(obj) {
        ctx.naive_time(loc, field, &text);
    }
    let input = first_count(attrs, INPUT)?;
    let output = first_count(attrs, OUTPUT)?;
    let max_tokens = first_count(attrs, MAX_TOKENS)?;
    let cached = first_count(attrs, CACHED)?;
    let ttft_ms = ttft_ms(obj, attrs, start)?;
    let failed = is_error(obj, attrs);
    // Without an output count, the text the call generated, where the
    // span has it, is counted with --tokenizer when the call is handed on
    // (as for LiteLLM and Langfuse, and marked in `observed.counted`);
    // else its max_tokens stands for it.
    let text = match output {
        None if !failed => generated_text(attrs),
        _ => None,
    };
    let output_length = match (output, max_tokens) {
        (Some(n), _) => n,
        (None, _) if text.is_some() => 0,
        (None, Some(max)) if !failed => {
            st.tally.no_output += 1;
            if st.first_no_output.is_none() {
                st.first_no_output = Some((
                    loc.clone(),
                    ids.span
                        .as_deref()
                        .map_or_else(|| "without id".into(), str::to_string),
                    max,
                ));
            }
            max
        }
        (None, _) => 0,
    };
    let mut model = None;
    for k in MODEL {
        if let Some(m) = string(attrs, k)? {
            if m != "unknown" {
                model = Some(m);
                break;
            }
        }
    }
    let session = first_string(attrs, SESSION)?;
    let prompt = prompt(attrs, &mut st.tally).map(Box::new);
    let response_id = first_string(attrs, RESPONSE_ID)?;
    let dup_key = start.map(|s| {
        dup_key(
            ids.trace.as_deref(),
            s,
            end,
            response_id.as_deref(),
            model.as_deref(),
            input,
            output,
        )
    });
    // The trace stands for the group of a call without a session, and
    // for a call without a group (--graph groups it by it); the others are
    // spared the copy.
    let grouped = ids.span.is_some() && start.is_some() && end.is_some();
    let trace = match (grouped, &session) {
        (true, Some(_)) => None,
        _ => ids.trace.as_deref(),
    };
    let texts = &mut st.texts;
    st.tally.calls += 1;
    let call = Call {
        line: loc.line,
        start,
        end,
        input,
        output,
        output_length,
        max_tokens,
        cached,
        ttft_ms,
        failed,
        model: texts.add(model.as_deref()),
        session: texts.add(session.as_deref()),
        id: texts.add(ids.span.as_deref()),
        trace: texts.add(trace),
        prompt,
        output_text: texts.add(text.as_deref()),
        span: ids.span.as_deref().map_or(0, id_key),
        parent: ids.parent.as_deref().map_or(0, id_key),
        dup_key: dup_key.unwrap_or(0),
    };
    match st.calls.last_mut() {
        Some(block) if block.len() < BLOCK => block.push(call),
        _ => {
            let mut block = Vec::with_capacity(BLOCK);
            block.push(call);
            st.calls.push(block);
        }
    }
    Ok(())
}

impl Call {
    /// The request handed on, read from `source`.
    pub(super) fn request(self, source: &Arc<str>, texts: &Texts) -> Request {
        let text = |t: Text| texts.get(t).map(str::to_string);
        let mut req = Request::new(
            Location::new(source.clone(), self.line),
            self.start.unwrap_or(0),
        );
        req.end_ns = self.end;
        req.input_length = self.input;
        req.max_tokens = self.max_tokens;
        req.observed.prompt_tokens = self.input;
        req.observed.completion_tokens = self.output;
        req.observed.cached_tokens = self.cached;
        req.observed.ttft_ms = self.ttft_ms;
        req.observed.e2e_ms = self.start.zip(self.end).map(|(s, e)| (e - s) as f64 / 1e6);
        req.fate = if self.failed { Fate::Failed } else { Fate::Ok };
        req.mark_counts = true;
        req.output_length = self.output_length;
        req.output_text = text(self.output_text);
        req.model = text(self.model);
        req.session = text(self.session);
        req.id = text(self.id);
        let trace = text(self.trace);
        if req.id.is_some() && self.start.is_some() && self.end.is_some() {
            req.group = req.session.clone().or(trace);
        } else {
            req.trace_id = trace;
        }
        req.prompt = self.prompt;
        req
    }
}

/// What makes two exports one call (trace, start, end, response id,
/// model, token counts), hashed field by field, each with its presence and
/// length so that no two keys run together.
pub(super) fn dup_key(
    trace: Option<&str>,
    start: i64,
    end: Option<i64>,
    response: Option<&str>,
    model: Option<&str>,
    input: Option<u64>,
    output: Option<u64>,
) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for text in [trace, response, model] {
        match text {
            Some(t) => {
                h.update(&[1]);
                h.update(&(t.len() as u64).to_le_bytes());
                h.update(t.as_bytes());
            }
            None => h.update(&[0]),
        }
    }
    let counts = [input, output].map(|n| n.map(|n| n as i64));
    for n in [Some(start), end].into_iter().chain(counts) {
        match n {
            Some(n) => {
                h.update(&[1]);
                h.update(&n.to_le_bytes());
            }
            None => h.update(&[0]),
        }
    }
    // 0 stands for no key.
    h.digest128().max(1)
}

/// The text a call generated: output messages (OTel "parts", OpenAI
/// messages or choices), OpenInference's output value, the Vercel SDK's
/// text, inference-perf's `gen_ai.output.text`, or indexed completions.
pub(super) fn generated_text(attrs: &Attrs) -> Option<String> {
    for k in OUTPUT_TEXT {
        if let Some(text) = present(attrs, k).and_then(output_text) {
            return Some(text);
        }
    }
    let mut messages = Vec::new();
    for (prefix, role, content) in INDEXED_OUTPUT {
        indexed(attrs, prefix, role, content, &mut messages);
    }
    output_text(&Value::Array(messages))
}

/// The prompt, where the span carries it, as OpenAI chat messages.
pub(super) fn prompt(attrs: &Attrs, tally: &mut Tally) -> Option<Prompt> {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(sys) = json_attr(attrs, "gen_ai.system_instructions") {
        let text = match &sys {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts_text(parts),
            _ => String::new(),
        };
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let listed = json_attr(attrs, "gen_ai.input.messages")
        .or_else(|| json_attr(attrs, "ai.prompt.messages"))
        .or_else(|| json_attr(attrs, "input.value").and_then(|v| v.get("messages").cloned()));
    if let Some(Value::Array(list)) = listed {
        let media = tally.media_parts;
        for m in &list {
            count_media(m, tally);
            openai_messages(m, &mut messages);
        }
        if tally.media_parts > media {
            tally.media_calls += 1;
        }
    } else {
        for (prefix, role, content) in INDEXED_PROMPT {
            indexed(attrs, prefix, role, content, &mut messages);
        }
    }
    if messages.is_empty() {
        return None;
    }
    let tools = json_attr(attrs, "gen_ai.tool.definitions")
        .and_then(|t| t.as_array().cloned())
        .map(|list| {
            Value::Array(
                list.into_iter()
                    .map(|t| {
                        if t.get("type").is_some() && t.get("function").is_some() {
                            t
                        } else {
                            json!({"type": "function", "function": t})
                        }
                    })
                    .collect(),
            )
        });
    Some(Prompt {
        messages: Some(Value::Array(messages)),
        text: None,
        tools,
    })
}

/// Part types that carry media (OTel GenAI `blob`, `uri`, `file`; the
/// Vercel SDK's and OpenAI's image and audio parts): [`openai_messages`]
/// leaves them out, as the prompt's text is what is hashed or sent.
pub(super) const MEDIA_PARTS: &[&str] = &[
    "blob",
    "uri",
    "file",
    "image",
    "image_url",
    "input_audio",
    "audio",
];

/// Count the media parts of a message, by kind (its modality, else its
/// MIME type's, else its type).
pub(super) fn count_media(m: &Value, tally: &mut Tally) {
    let Some(Value::Array(parts)) = m.get("parts").or_else(|| m.get("content")) else {
        return;
    };
    for p in parts {
        let Some(kind) = p.get("type").and_then(Value::as_str) else {
            continue;
        };
        if !MEDIA_PARTS.contains(&kind) {
            continue;
        }
        let modality = p.get("modality").and_then(Value::as_str).or_else(|| {
            p.get("mime_type")
                .or_else(|| p.get("mimeType"))
                .and_then(Value::as_str)
                .and_then(|t| t.split('/').next())
        });
        let kind = match (kind, modality) {
            (_, Some(m)) if !m.is_empty() => m,
            ("image_url", _) => "image",
            ("input_audio", _) => "audio",
            (kind, _) => kind,
        };
        tally.media_parts += 1;
        *tally.media_kinds.entry(kind.to_string()).or_insert(0) += 1;
    }
}

/// An attribute that holds JSON, as JSON text or as a value.
pub(super) fn json_attr(attrs: &Attrs, key: &str) -> Option<Value> {
    match present(attrs, key)? {
        Value::String(s) => {
            let t = s.trim_start();
            if t.starts_with('[') || t.starts_with('{') {
                serde_json::from_str(s).ok()
            } else {
                Some(Value::String(s.clone()))
            }
        }
        v => Some(v.clone()),
    }
}

/// `PREFIX.N.role` / `PREFIX.N.content`, N from 0.
pub(super) fn indexed(
    attrs: &Attrs,
    prefix: &str,
    role: &str,
    content: &str,
    out: &mut Vec<Value>,
) {
    // Most spans have none: spare them the names made for each N.
    if !attrs.keys().any(|k| k.starts_with(prefix)) {
        return;
    }
    for n in 0.. {
        let r = attrs
            .get(&format!("{prefix}{n}{role}"))
            .and_then(Value::as_str);
        let c = attrs.get(&format!("{prefix}{n}{content}"));
        match (r, c) {
            (None, None) => break,
            (r, c) => out.push(json!({
                "role": r.unwrap_or("user"),
                "content": c.and_then(Value::as_str).unwrap_or(""),
            })),
        }
    }
}
