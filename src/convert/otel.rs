//! OpenTelemetry spans of model calls (GenAI semantic conventions,
//! OpenInference, Vercel AI SDK), in the shapes tools hand them out: OTLP
//! JSON (`{"resourceSpans": …}`, one document per line as the Collector's
//! file exporter writes it, or one per file), single protojson spans,
//! Jaeger's JSON download, flat span lists (`{"spans": [...]}` with
//! `start_time`), Phoenix span JSON and JavaScript `ReadableSpan` dumps.
//!
//! A span is a model call when `gen_ai.operation.name` is a generation
//! (chat, text_completion, generate_content), else when OpenInference's
//! span kind is LLM, else when the Vercel `ai.operationId` is a provider
//! call (`….doGenerate`, `….doStream`), else when it reports token usage.
//! A call with another call under it (a client span over a gateway's) is a
//! wrapper and is left out; so is the same call exported twice (same
//! trace, start, end, response id, model and token counts).
//!
//! Spans are gathered per input: wrappers and duplicates are found within
//! one input, and the calls of one trace (or session) are given `after`
//! and `delay` by [`super::graph`] when every input was read.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::chat::{openai_messages, parts_text};
use super::fields::{Object, count, instant, number, present, string};
use super::{Ctx, Fate, Head, Prompt, Request};
use crate::error::{Error, FieldError, Location, Result, quote_value};
use crate::text::plural;

mod pb;

/// OTLP JSON, Jaeger downloads, flat span lists, Vercel and Phoenix spans.
pub fn sniff(head: &Head) -> bool {
    if !head.is_json() {
        return head_is_protobuf(head);
    }
    let otlp = head.contains_any(&[
        "\"resourceSpans\"",
        "\"scopeSpans\"",
        "\"startTimeUnixNano\"",
    ]);
    let jaeger = head.contains("\"spanID\"") && head.contains("\"operationName\"");
    let vercel = head.contains("\"spanContext\"") && head.contains("\"ai.operationId\"");
    let flat = head.contains("\"span_id\"")
        && head.contains("\"start_time\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference.", "\"span_kind\""]);
    let protojson = head.contains("\"kind\"")
        && head.contains("\"attributes\"")
        && head.contains("\"key\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference."]);
    otlp || jaeger || vercel || flat || protojson
}

/// OTLP protobuf, as far as the head's text shows it (the head's leading
/// whitespace, which may be the first tag byte, is trimmed): binary bytes
/// JSON never holds, and attribute names of spans.
fn head_is_protobuf(head: &Head) -> bool {
    head.contains_any(&["gen_ai.", "llm.", "openinference.", "service.name"])
        && head
            .text
            .bytes()
            .any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
}

/// What one input held, for the note at its end.
#[derive(Default)]
struct Tally {
    spans: u64,
    calls: u64,
    wrappers: u64,
    duplicates: u64,
    no_output: u64,
}

/// A model call read, before wrappers and duplicates are left out.
struct Call {
    req: Request,
    span: Option<String>,
    parent: Option<String>,
    /// What makes two exports one call, hashed (128 bits: a collision is
    /// as likely as between random numbers).
    dup_key: Option<u128>,
}

/// Per input: the calls, and every span's parent (to find wrappers).
#[derive(Default)]
struct State {
    calls: Vec<Call>,
    parents: HashMap<String, String>,
    tally: Tally,
    /// The whole text, for single-document inputs (to find a span's line).
    text: Option<String>,
    first_no_output: Option<(Location, String, u64)>,
}

pub fn read(mut reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut st = State::default();
    let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
    if source.ends_with(".pb") || pb::looks_like(&head[..head.len().min(64 * 1024)]) {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&*source, e))?;
        let loc = Location::new(source.clone(), 1);
        match pb::decode(&bytes) {
            Ok(messages) => {
                drop(bytes);
                for m in &messages {
                    document(ctx, &mut st, &loc, pb::to_json(m))?;
                }
            }
            Err(msg) => ctx.bad(FieldError::record(msg).at(&loc))?,
        }
        return finish_input(ctx, st, &source);
    }
    let mut first = String::new();
    let mut line_no = 0u64;
    // Skip blank lines; the first line that is a JSON value on its own
    // makes the input one document per line.
    loop {
        first.clear();
        let n = reader
            .read_line(&mut first)
            .map_err(|e| Error::io(&*source, e))?;
        line_no += 1;
        if n == 0 || !first.trim().is_empty() {
            break;
        }
    }
    let first_line = line_no;
    match serde_json::from_str::<Value>(&first) {
        Ok(doc) => {
            document(
                ctx,
                &mut st,
                &Location::new(source.clone(), first_line),
                doc,
            )?;
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader
                    .read_line(&mut line)
                    .map_err(|e| Error::io(&*source, e))?;
                if n == 0 {
                    break;
                }
                line_no += 1;
                if line.trim().is_empty() {
                    continue;
                }
                let loc = Location::new(source.clone(), line_no);
                match serde_json::from_str::<Value>(&line) {
                    Ok(doc) => document(ctx, &mut st, &loc, doc)?,
                    Err(e) => ctx.bad(malformed(&loc, &e))?,
                }
            }
        }
        Err(_) => {
            let mut text = first;
            reader
                .read_to_string(&mut text)
                .map_err(|e| Error::io(&*source, e))?;
            let base = first_line - 1;
            match serde_json::from_str::<Value>(&text) {
                Ok(doc) => {
                    st.text = Some(text);
                    let loc = Location::new(source.clone(), first_line);
                    document(ctx, &mut st, &loc, doc)?;
                }
                Err(e) => {
                    let loc = Location {
                        source: source.clone(),
                        line: base + e.line() as u64,
                        column: Some(e.column() as u64),
                    };
                    ctx.bad(malformed(&loc, &e))?;
                }
            }
        }
    }
    finish_input(ctx, st, &source)
}

fn malformed(loc: &Location, e: &serde_json::Error) -> Error {
    let mut loc = loc.clone();
    if loc.column.is_none() && e.line() == 1 {
        loc.column = Some(e.column() as u64);
    }
    FieldError::record(format!("malformed JSON: {e}")).at(&loc)
}

/// One JSON document: any of the shapes in the module's description.
fn document(ctx: &mut Ctx, st: &mut State, loc: &Location, doc: Value) -> Result<()> {
    match doc {
        Value::Array(items) => {
            for item in items {
                document(ctx, st, loc, item)?;
            }
            Ok(())
        }
        Value::Object(mut obj) => {
            if let Some(Value::Array(rs)) = obj.remove("resourceSpans") {
                for r in rs {
                    let scopes = r
                        .get("scopeSpans")
                        .or_else(|| r.get("instrumentationLibrarySpans"))
                        .and_then(Value::as_array);
                    for s in scopes.into_iter().flatten() {
                        let spans = s.get("spans").and_then(Value::as_array);
                        for span in spans.into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                }
                return Ok(());
            }
            if let Some(Value::Array(data)) = obj.get("data") {
                // Jaeger: {"data": [{"traceID", "spans", "processes"}]}.
                if data.iter().all(|t| t.get("spans").is_some()) {
                    for t in data {
                        for span in t["spans"].as_array().into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                    return Ok(());
                }
            }
            if let Some(Value::Array(spans)) = obj.get("spans") {
                for span in spans {
                    one_span(ctx, st, loc, span)?;
                }
                return Ok(());
            }
            let is_span = [
                "spanId",
                "span_id",
                "spanID",
                "spanContext",
                "context",
                "name",
            ]
            .iter()
            .any(|k| obj.contains_key(*k));
            if is_span {
                return one_span(ctx, st, loc, &Value::Object(obj));
            }
            let keys: Vec<&str> = obj.keys().map(String::as_str).take(5).collect();
            ctx.bad(
                FieldError::record(format!(
                    "not an OpenTelemetry document or span (keys: {})",
                    keys.join(", ")
                ))
                .at(loc),
            )
        }
        other => ctx.bad(
            FieldError::record(format!(
                "expected a JSON object of spans, found {}",
                quote_value(&other.to_string())
            ))
            .at(loc),
        ),
    }
}

/// The line a span is on: its id's first occurrence in a single-document
/// input, else the document's line.
fn span_loc(st: &State, loc: &Location, id: Option<&str>) -> Location {
    if let (Some(text), Some(id)) = (&st.text, id) {
        if let Some(at) = text.find(&format!("\"{id}\"")) {
            let line = loc.line + text[..at].bytes().filter(|&b| b == b'\n').count() as u64;
            return Location::new(loc.source.clone(), line);
        }
    }
    loc.clone()
}

fn one_span(ctx: &mut Ctx, st: &mut State, loc: &Location, span: &Value) -> Result<()> {
    st.tally.spans += 1;
    let Some(obj) = span.as_object() else {
        return ctx.bad(
            FieldError::record(format!(
                "expected a span object, found {}",
                quote_value(&span.to_string())
            ))
            .at(loc),
        );
    };
    let ids = Ids::of(obj);
    let loc = span_loc(st, loc, ids.span.as_deref());
    if let (Some(id), Some(parent)) = (&ids.span, &ids.parent) {
        st.parents.insert(id.clone(), parent.clone());
    }
    let who = ids.span.as_deref().unwrap_or("without id");
    let result = attributes(obj).and_then(|attrs| call(obj, &attrs, &ids, &loc, st, ctx));
    match result {
        Ok(()) => Ok(()),
        Err(e) => ctx.bad(FieldError::new(e.field, format!("span {who}: {}", e.msg)).at(&loc)),
    }
}

/// A span's identity, under each shape's names.
struct Ids {
    span: Option<String>,
    parent: Option<String>,
    trace: Option<String>,
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Ids {
    fn of(obj: &Object) -> Ids {
        let ctx = obj.get("spanContext").or_else(|| obj.get("context"));
        let in_ctx = |k: &str| ctx.and_then(|c| c.get(k));
        let span = text_of(obj.get("spanId"))
            .or_else(|| text_of(obj.get("span_id")))
            .or_else(|| text_of(obj.get("spanID")))
            .or_else(|| text_of(in_ctx("spanId")))
            .or_else(|| text_of(in_ctx("span_id")));
        let trace = text_of(obj.get("traceId"))
            .or_else(|| text_of(obj.get("trace_id")))
            .or_else(|| text_of(obj.get("traceID")))
            .or_else(|| text_of(in_ctx("traceId")))
            .or_else(|| text_of(in_ctx("trace_id")));
        let jaeger_parent = obj
            .get("references")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("refType").and_then(Value::as_str) == Some("CHILD_OF"))
            })
            .and_then(|r| text_of(r.get("spanID")));
        let parent = text_of(obj.get("parentSpanId"))
            .or_else(|| text_of(obj.get("parent_span_id")))
            .or_else(|| text_of(obj.get("parent_id")))
            .or_else(|| text_of(obj.get("parentSpanContext").and_then(|c| c.get("spanId"))))
            .or(jaeger_parent);
        Ids {
            span,
            parent,
            trace,
        }
    }
}

/// A span's attributes as one flat object: OTLP key/value lists (typed
/// values decoded, 64-bit integers exactly), Jaeger tags, or plain objects
/// (nested objects flattened to dotted names, as Phoenix nests them).
fn attributes(obj: &Object) -> std::result::Result<Object, FieldError> {
    let mut out = Map::new();
    if let Some(Value::Array(tags)) = obj.get("tags") {
        for t in tags {
            let Some(key) = t.get("key").and_then(Value::as_str) else {
                continue;
            };
            let v = t.get("value").cloned().unwrap_or(Value::Null);
            let v = match (t.get("type").and_then(Value::as_str), &v) {
                (Some("int64"), Value::String(s)) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .map_err(|_| bad_value(key, &v))?,
                (Some("float64"), Value::String(s)) => s
                    .parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                    .ok_or_else(|| bad_value(key, &v))?,
                _ => v,
            };
            out.insert(key.to_string(), v);
        }
        return Ok(out);
    }
    match obj.get("attributes") {
        Some(Value::Array(kvs)) => {
            for kv in kvs {
                let Some(key) = kv.get("key").and_then(Value::as_str) else {
                    return Err(FieldError::new(
                        "attributes",
                        format!(
                            "expected {{\"key\", \"value\"}} objects, found {}",
                            quote_value(&kv.to_string())
                        ),
                    ));
                };
                if let Some(v) = any_value(key, kv.get("value").unwrap_or(&Value::Null))? {
                    out.insert(key.to_string(), v);
                }
            }
        }
        Some(Value::Object(map)) => flatten("", map, &mut out),
        None | Some(Value::Null) => {}
        Some(other) => {
            return Err(FieldError::new(
                "attributes",
                format!(
                    "expected an object or a list, found {}",
                    quote_value(&other.to_string())
                ),
            ));
        }
    }
    Ok(out)
}

fn flatten(prefix: &str, map: &Object, out: &mut Object) {
    for (k, v) in map {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) => flatten(&key, inner, out),
            other => {
                out.insert(key, other.clone());
            }
        }
    }
}

fn bad_value(key: &str, v: &Value) -> FieldError {
    FieldError::new(
        key,
        format!("unreadable value {}", quote_value(&v.to_string())),
    )
}

/// An OTLP `AnyValue`; None for an empty one (protojson leaves unset
/// values as `{}`).
fn any_value(key: &str, v: &Value) -> std::result::Result<Option<Value>, FieldError> {
    let Some(obj) = v.as_object() else {
        return match v {
            Value::Null => Ok(None),
            other => Err(bad_value(key, other)),
        };
    };
    let Some((kind, inner)) = obj.iter().next() else {
        return Ok(None);
    };
    let value = match kind.as_str() {
        "stringValue" | "bytesValue" => inner.clone(),
        "boolValue" => inner.clone(),
        // 64-bit integers come as strings in protojson: read them exactly.
        "intValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "doubleValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "arrayValue" => {
            let mut items = Vec::new();
            for item in inner
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(v) = any_value(key, item)? {
                    items.push(v);
                }
            }
            Value::Array(items)
        }
        "kvlistValue" => {
            let mut map = Map::new();
            for kv in inner
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(k), Some(v)) = (kv.get("key").and_then(Value::as_str), kv.get("value"))
                {
                    if let Some(v) = any_value(key, v)? {
                        map.insert(k.to_string(), v);
                    }
                }
            }
            Value::Object(map)
        }
        other => {
            return Err(FieldError::new(
                key,
                format!("unknown attribute type `{other}`"),
            ));
        }
    };
    Ok(Some(value))
}

fn first_string(attrs: &Object, keys: &[&str]) -> std::result::Result<Option<String>, FieldError> {
    for k in keys {
        if let Some(s) = string(attrs, k)? {
            return Ok(Some(s));
        }
    }
    Ok(None)
}

fn first_count(attrs: &Object, keys: &[&str]) -> std::result::Result<Option<u64>, FieldError> {
    for k in keys {
        if let Some(n) = count(attrs, k)? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

const INPUT: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
];
const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
];
const CACHED: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.input_token_details.cached_read_tokens",
    "gen_ai.usage.input_token_details.cache_read",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.cachedInputTokens",
];
const MODEL: &[&str] = &[
    "gen_ai.response.model",
    "llm.model_name",
    "gen_ai.request.model",
    "ai.response.model",
    "ai.model.id",
    // Traceloop and its forks write "unknown" above and the name here.
    "traceloop.association.properties.ls_model_name",
    "ioa_observe.association.properties.ls_model_name",
];
const SESSION: &[&str] = &[
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "exgentic.session.id",
];
const GENERATIONS: &[&str] = &[
    "chat",
    "text_completion",
    "generate_content",
    "completion",
    "responses",
];

/// Whether a span is a model call (see the module's description).
fn is_call(obj: &Object, attrs: &Object) -> bool {
    if let Some(Value::String(op)) = present(attrs, "gen_ai.operation.name") {
        return GENERATIONS.contains(&op.as_str());
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
fn time_ns(obj: &Object, field: &str) -> std::result::Result<Option<i64>, FieldError> {
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
fn micros_as_ns(obj: &Object, field: &str) -> std::result::Result<Option<i64>, FieldError> {
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

/// Start and end, epoch ns, under each shape's names.
fn times(obj: &Object) -> std::result::Result<(Option<i64>, Option<i64>), FieldError> {
    if obj.contains_key("spanID") {
        // Jaeger: microseconds, and a duration instead of an end.
        let start = micros_as_ns(obj, "startTime")?;
        let dur = micros_as_ns(obj, "duration")?;
        return Ok((start, start.zip(dur).map(|(s, d)| s + d)));
    }
    let start = match time_ns(obj, "startTimeUnixNano")? {
        Some(0) => None,
        Some(t) => Some(t),
        None => match time_ns(obj, "startTime")? {
            Some(t) => Some(t),
            None => time_ns(obj, "start_time")?,
        },
    };
    let end = match time_ns(obj, "endTimeUnixNano")? {
        Some(0) => None,
        Some(t) => Some(t),
        None => match time_ns(obj, "endTime")? {
            Some(t) => Some(t),
            None => time_ns(obj, "end_time")?,
        },
    };
    Ok((start, end))
}

/// A naive date-time among the span's times, for the one warning.
fn naive_time(obj: &Object) -> Option<(&'static str, String)> {
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

fn is_error(obj: &Object, attrs: &Object) -> bool {
    let status = obj.get("status");
    let code = status
        .and_then(|s| s.get("code").or_else(|| s.get("status_code")))
        .or_else(|| obj.get("status_code"));
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
fn ttft_ms(
    obj: &Object,
    attrs: &Object,
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
        .get("events")
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
fn call(
    obj: &Object,
    attrs: &Object,
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
    let mut req = Request::new(loc.clone(), start.unwrap_or(0));
    req.end_ns = end;
    req.input_length = first_count(attrs, INPUT)?;
    let output = first_count(attrs, OUTPUT)?;
    req.max_tokens = first_count(
        attrs,
        &[
            "gen_ai.request.max_tokens",
            "llm.invocation_parameters.max_tokens",
        ],
    )?;
    req.observed.prompt_tokens = req.input_length;
    req.observed.completion_tokens = output;
    req.observed.cached_tokens = first_count(attrs, CACHED)?;
    req.observed.ttft_ms = ttft_ms(obj, attrs, start)?;
    req.observed.e2e_ms = start.zip(end).map(|(s, e)| (e - s) as f64 / 1e6);
    req.fate = if is_error(obj, attrs) {
        Fate::Failed
    } else {
        Fate::Ok
    };
    req.output_length = match (output, req.max_tokens) {
        (Some(n), _) => n,
        (None, Some(max)) if req.fate == Fate::Ok => {
            st.tally.no_output += 1;
            if st.first_no_output.is_none() {
                st.first_no_output = Some((
                    loc.clone(),
                    ids.span.clone().unwrap_or_else(|| "without id".into()),
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
    req.model = model;
    req.session = first_string(attrs, SESSION)?;
    req.id = ids.span.clone();
    req.trace_id = ids.trace.clone();
    if req.id.is_some() && start.is_some() && end.is_some() {
        req.group = req.session.clone().or_else(|| ids.trace.clone());
    }
    req.prompt = prompt(attrs).map(Box::new);
    let response_id = first_string(attrs, &["gen_ai.response.id", "ai.response.id"])?;
    let dup_key = start.map(|s| {
        let key = json!([
            ids.trace,
            s,
            end,
            response_id,
            req.model,
            req.input_length,
            output
        ]);
        xxhash_rust::xxh3::xxh3_128(key.to_string().as_bytes())
    });
    st.tally.calls += 1;
    st.calls.push(Call {
        req,
        span: ids.span.clone(),
        parent: ids.parent.clone(),
        dup_key,
    });
    Ok(())
}

/// Leave out wrappers and duplicates, hand the calls on, and say what the
/// input held.
fn finish_input(ctx: &mut Ctx, st: State, source: &str) -> Result<()> {
    let State {
        calls,
        parents,
        mut tally,
        first_no_output,
        ..
    } = st;
    // A call with a call under it, over that call's whole time, wraps it
    // (a client's span over a gateway's). A parent that ended before its
    // child started is an earlier turn, not a wrapper.
    let spans: HashMap<&str, (i64, Option<i64>)> = calls
        .iter()
        .filter_map(|c| Some((c.span.as_deref()?, (c.req.start_ns, c.req.end_ns))))
        .collect();
    let mut wrappers: HashSet<String> = HashSet::new();
    for c in &calls {
        let inner = (c.req.start_ns, c.req.end_ns);
        let mut at = c.parent.as_deref();
        let mut steps = 0;
        while let Some(p) = at {
            if let Some(&outer) = spans.get(p) {
                if covers(outer, inner) {
                    wrappers.insert(p.to_string());
                }
            }
            steps += 1;
            if steps > 10_000 {
                break; // a parent cycle
            }
            at = parents.get(p).map(String::as_str);
        }
    }
    let mut seen: HashSet<u128> = HashSet::new();
    for c in calls {
        if c.span.as_ref().is_some_and(|s| wrappers.contains(s)) {
            tally.wrappers += 1;
            continue;
        }
        if let Some(key) = c.dup_key {
            if !seen.insert(key) {
                tally.duplicates += 1;
                continue;
            }
        }
        ctx.push(c.req)?;
    }
    if let Some((loc, id, max)) = first_no_output {
        crate::cli::warn_at(
            &loc,
            format!(
                "span {id}: no output token count; output_length is its gen_ai.request.max_tokens ({max}){}",
                if tally.no_output > 1 {
                    format!(", and so for {} more", tally.no_output - 1)
                } else {
                    String::new()
                }
            ),
        );
    }
    let mut left_out = Vec::new();
    if tally.wrappers > 0 {
        left_out.push(format!(
            "{} wrapper{} of another call",
            tally.wrappers,
            plural(tally.wrappers)
        ));
    }
    if tally.duplicates > 0 {
        left_out.push(format!(
            "{} duplicate{}",
            tally.duplicates,
            plural(tally.duplicates)
        ));
    }
    crate::cli::note(format!(
        "{source}: {} span{} read, {} model call{}{}",
        tally.spans,
        plural(tally.spans),
        tally.calls,
        plural(tally.calls),
        if left_out.is_empty() {
            String::new()
        } else {
            format!(" ({} left out)", left_out.join(", "))
        }
    ));
    Ok(())
}

/// Whether a span's time holds another's (unknown ends hold anything).
fn covers(outer: (i64, Option<i64>), inner: (i64, Option<i64>)) -> bool {
    outer.0 <= inner.0
        && match (outer.1, inner.1) {
            (Some(o), Some(i)) => i <= o,
            _ => true,
        }
}

/// The prompt, where the span carries it, as OpenAI chat messages.
fn prompt(attrs: &Object) -> Option<Prompt> {
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
        for m in &list {
            openai_messages(m, &mut messages);
        }
    } else {
        indexed(attrs, "gen_ai.prompt.", ".role", ".content", &mut messages);
        indexed(
            attrs,
            "llm.input_messages.",
            ".message.role",
            ".message.content",
            &mut messages,
        );
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

/// An attribute that holds JSON, as JSON text or as a value.
fn json_attr(attrs: &Object, key: &str) -> Option<Value> {
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
fn indexed(attrs: &Object, prefix: &str, role: &str, content: &str, out: &mut Vec<Value>) {
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
