//! Chat messages as logs write them, mapped to OpenAI's chat messages,
//! which is what a replay sends: the one mapping every source shares.
//!
//! Logs hold the conversation in the shape of the framework that made the
//! call: OpenTelemetry GenAI messages (`{"role", "parts": [...]}`, tool
//! calls and tool results as parts), LangChain messages as Langfuse's
//! handler renders them (`tool_calls` as `{"name", "args", "id"}`, OpenAI's
//! tool calls under `additional_kwargs`, a tool definition as a `tool`
//! message, a tool's answer under the tool's name as its role), LangChain's
//! serialized messages (`{"type": "human", ...}`, `{"type": "human",
//! "data": {...}}`, `{"lc": 1, "type": "constructor", "id": [...,
//! "HumanMessage"], "kwargs": {...}}`), and Anthropic-style content blocks
//! (`tool_use`, `tool_result`, `image`). An OpenAI-compatible server
//! answers each of those with 400.
//!
//! [`to_openai`] leaves a conversation that is already OpenAI's alone and
//! maps the others; what has no OpenAI form (an audio part of an OTel
//! message, a tool message that answers no call) is an error naming the
//! message, and the caller leaves the record out.

use serde_json::{Map, Value, json};

use crate::error::{FieldError, quote_value};
use crate::record::{CHAT_ROLES, check_chat_messages};

/// The messages of a log as OpenAI chat messages, and the tools (the
/// log's own, else the definitions found among the messages). `Ok(None)`
/// when they are OpenAI's already; an error says which message has no
/// OpenAI form, and why.
pub fn to_openai(
    messages: &Value,
    tools: Option<&Value>,
) -> Result<Option<(Value, Option<Value>)>, String> {
    let Value::Array(items) = messages else {
        return Err(format!(
            "field `messages`: expected a list of chat messages, found {}",
            show(messages)
        ));
    };
    let mut errors = Vec::new();
    check_chat_messages(items, &mut errors);
    if errors.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (i, m) in items.iter().enumerate() {
        one(i, m, &mut out, &mut found)?;
    }
    if out.is_empty() {
        return Err(
            "field `messages`: no chat message is left once mapped to OpenAI's form".into(),
        );
    }
    let mut errors: Vec<FieldError> = Vec::new();
    check_chat_messages(&out, &mut errors);
    if let Some(e) = errors.first() {
        return Err(format!("{e} (once mapped to OpenAI's form)"));
    }
    let tools = match tools {
        Some(t) if t.as_array().is_some_and(|a| !a.is_empty()) => Some(t.clone()),
        _ => (!found.is_empty()).then_some(Value::Array(found)),
    };
    Ok(Some((Value::Array(out), tools)))
}

fn show(v: &Value) -> String {
    quote_value(&v.to_string())
}

/// The role of a LangChain message type or class name.
fn langchain_role(kind: &str, body: &Map<String, Value>) -> Option<String> {
    let base = kind
        .trim_end_matches("Chunk")
        .trim_end_matches("Message")
        .to_ascii_lowercase();
    let role = match base.as_str() {
        "human" | "user" => "user",
        "ai" | "assistant" => "assistant",
        "system" => "system",
        "developer" => "developer",
        "tool" => "tool",
        "function" => "function",
        "chat" | "" => return body.get("role")?.as_str().map(str::to_string),
        _ => return None,
    };
    Some(role.to_string())
}

/// The role and fields of one logged message, whichever its form.
fn unwrap(i: usize, obj: &Map<String, Value>) -> Result<(String, &Map<String, Value>), String> {
    let kind = obj.get("type").and_then(Value::as_str);
    if obj.contains_key("lc") && kind == Some("constructor") {
        let class = obj
            .get("id")
            .and_then(Value::as_array)
            .and_then(|id| id.last())
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(kwargs) = obj.get("kwargs").and_then(Value::as_object) else {
            return Err(format!(
                "field `messages[{i}]`: a serialized LangChain {class} without `kwargs`"
            ));
        };
        let role = langchain_role(class, kwargs).ok_or_else(|| {
            format!("field `messages[{i}].id`: LangChain's {class:?} is no chat message")
        })?;
        return Ok((role, kwargs));
    }
    match (obj.get("role"), kind) {
        (Some(Value::String(role)), _) => Ok((role.clone(), obj)),
        (None | Some(Value::Null), Some(kind)) => {
            let body = obj.get("data").and_then(Value::as_object).unwrap_or(obj);
            let role = langchain_role(kind, body).ok_or_else(|| {
                format!(
                    "field `messages[{i}].type`: {} is no chat message type",
                    show(&obj["type"])
                )
            })?;
            Ok((role, body))
        }
        (None | Some(Value::Null), None) => Err(format!(
            "field `messages[{i}]`: has no `role` (nor a LangChain message `type`)"
        )),
        (Some(other), _) => Err(format!(
            "field `messages[{i}].role`: expected a string, found {}",
            show(other)
        )),
    }
}

/// The text of a value: a string as it is, anything else as JSON.
fn as_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The text parts of a list of parts, joined.
pub(super) fn parts_text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| {
            p.get("type")
                .and_then(Value::as_str)
                .is_none_or(|t| t == "text")
        })
        .map(|p| as_text(p.get("content").or_else(|| p.get("text"))))
        .collect::<Vec<_>>()
        .join("")
}

/// One message in OTel's "parts" form, OpenAI's form or the Vercel AI
/// SDK's, as OpenAI chat messages: text joined into `content`, tool calls
/// as `tool_calls`, tool results as `role: tool` messages.
pub fn openai_messages(m: &Value, out: &mut Vec<Value>) {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let parts = match m.get("parts").or_else(|| m.get("content")) {
        Some(Value::Array(parts)) => parts,
        _ => {
            // Already OpenAI's shape (a content string, maybe tool calls).
            out.push(m.clone());
            return;
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut results = false;
    for p in parts {
        match p.get("type").and_then(Value::as_str).unwrap_or("text") {
            "text" => text.push_str(&as_text(p.get("content").or_else(|| p.get("text")))),
            "tool_call" | "tool-call" | "tool_use" => {
                let args = p
                    .get("arguments")
                    .or_else(|| p.get("input"))
                    .or_else(|| p.get("args"));
                calls.push(json!({
                    "id": as_text(p.get("id").or_else(|| p.get("toolCallId"))),
                    "type": "function",
                    "function": {
                        "name": as_text(p.get("name").or_else(|| p.get("toolName"))),
                        "arguments": as_text(args),
                    },
                }));
            }
            "tool_call_response" | "tool-result" | "tool_result" => {
                results = true;
                out.push(json!({
                "role": "tool",
                "tool_call_id": as_text(p.get("id").or_else(|| p.get("toolCallId")).or_else(|| p.get("tool_use_id"))),
                "content": match p.get("response").or_else(|| p.get("result")).or_else(|| p.get("output")).or_else(|| p.get("content")) {
                    Some(Value::Array(inner)) => parts_text(inner),
                    other => as_text(other),
                },
                }));
            }
            _ => {}
        }
    }
    if (results || role == "tool") && calls.is_empty() && text.is_empty() {
        return;
    }
    let mut msg = Map::new();
    msg.insert("role".into(), role.into());
    if calls.is_empty() || !text.is_empty() {
        msg.insert("content".into(), Value::String(text));
    } else {
        msg.insert("content".into(), Value::Null);
    }
    if !calls.is_empty() {
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    out.push(Value::Object(msg));
}

/// The part types of an OTel GenAI message that [`openai_messages`]
/// carries over (reasoning has no place in a chat request: OpenAI's chat
/// API takes no reasoning back, so leaving it out is what a client does).
const OTEL_PARTS: &[&str] = &["text", "tool_call", "tool_call_response", "reasoning"];

/// Map message `i` onto `out` (a log's message can become several: tool
/// results carried in one message are one `tool` message each); tool
/// definitions logged as messages go to `tools`.
fn one(i: usize, m: &Value, out: &mut Vec<Value>, tools: &mut Vec<Value>) -> Result<(), String> {
    let Value::Object(obj) = m else {
        return Err(format!(
            "field `messages[{i}]`: expected a chat message (an object), found {}",
            show(m)
        ));
    };
    if let Some(parts) = obj.get("parts") {
        let Value::Array(parts) = parts else {
            return Err(format!(
                "field `messages[{i}].parts`: expected an array of parts, found {}",
                show(parts)
            ));
        };
        for (j, p) in parts.iter().enumerate() {
            let ty = p.get("type").and_then(Value::as_str).unwrap_or("text");
            if !OTEL_PARTS.contains(&ty) {
                return Err(format!(
                    "field `messages[{i}].parts[{j}].type`: \"{ty}\" parts are not mapped to OpenAI chat content"
                ));
            }
        }
        if obj.get("role").and_then(Value::as_str) == Some("model") {
            // Gemini's name for the assistant.
            let mut m = obj.clone();
            m.insert("role".into(), "assistant".into());
            openai_messages(&Value::Object(m), out);
        } else {
            openai_messages(m, out);
        }
        return Ok(());
    }
    let (mut role, body) = unwrap(i, obj)?;
    let mut calls = Vec::new();
    let listed = body
        .get("tool_calls")
        .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        .or_else(|| {
            body.get("additional_kwargs")
                .and_then(|k| k.get("tool_calls"))
                .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        });
    if let Some(Value::Array(list)) = listed {
        for (k, c) in list.iter().enumerate() {
            calls.push(tool_call(&format!("messages[{i}].tool_calls[{k}]"), c)?);
        }
    }
    let mut results = Vec::new();
    let content = match body.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Value::String(s.clone())),
        Some(Value::Array(parts)) => {
            let mut mapped = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let field = format!("messages[{i}].content[{j}]");
                content_part(&field, p, &mut mapped, &mut calls, &mut results)?;
            }
            (!mapped.is_empty()).then_some(Value::Array(mapped))
        }
        Some(Value::Object(def)) if role == "tool" && !body.contains_key("tool_call_id") => {
            // Langfuse's LangChain handler lists the call's tool
            // definitions as `tool` messages.
            match tool_definition(def) {
                Some(t) => {
                    tools.push(t);
                    return Ok(());
                }
                None => Some(Value::String(Value::Object(def.clone()).to_string())),
            }
        }
        Some(other) if role != "user" && role != "system" && role != "developer" => {
            // A tool's answer as data: the model saw its JSON text.
            Some(Value::String(other.to_string()))
        }
        Some(other) => {
            return Err(format!(
                "field `messages[{i}].content`: expected a string or an array of content parts, found {}",
                show(other)
            ));
        }
    };
    role = match role.as_str() {
        "human" => "user".into(),
        "ai" => "assistant".into(),
        _ => role,
    };
    let mut call_id = body
        .get("tool_call_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    if !CHAT_ROLES.contains(&role.as_str()) {
        // LangChain's tool answers under the tool's name as the role.
        let name = role.clone();
        if call_id.is_none() {
            call_id = Some(answered_call(out, Some(&name)).ok_or_else(|| {
                format!(
                    "field `messages[{i}].role`: \"{name}\" is no chat role, and no earlier tool call of that name is unanswered"
                )
            })?);
        }
        role = "tool".into();
    } else if role == "tool" && call_id.is_none() {
        let name = body.get("name").and_then(Value::as_str);
        call_id = Some(answered_call(out, name).ok_or_else(|| {
            format!(
                "field `messages[{i}]`: a tool message without `tool_call_id`, and no earlier tool call it can answer"
            )
        })?);
    }
    out.append(&mut results);
    if content.is_none() && calls.is_empty() && results_only(body) {
        return Ok(());
    }
    let mut msg = Map::new();
    msg.insert("role".into(), Value::String(role.clone()));
    let content = match content {
        Some(c) => c,
        // An empty turn: OpenAI takes "" where a log has nothing.
        None if role == "assistant" && !calls.is_empty() => Value::Null,
        None => Value::String(String::new()),
    };
    msg.insert("content".into(), content);
    if let Some(name) = body.get("name").and_then(Value::as_str) {
        if role != "tool" {
            msg.insert("name".into(), name.into());
        }
    }
    if !calls.is_empty() {
        if role != "assistant" {
            return Err(format!(
                "field `messages[{i}]`: a {role} message with tool calls (only an assistant calls tools)"
            ));
        }
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    if role == "tool" {
        msg.insert("tool_call_id".into(), call_id.unwrap_or_default().into());
    }
    out.push(Value::Object(msg));
    Ok(())
}

/// Whether a message's content is made only of tool results (an
/// Anthropic-style user turn): it becomes the `tool` messages alone.
fn results_only(body: &Map<String, Value>) -> bool {
    body.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            !parts.is_empty()
                && parts.iter().all(|p| {
                    matches!(
                        p.get("type").and_then(Value::as_str),
                        Some("tool_result" | "tool_call_response" | "tool-result")
                    )
                })
        })
}

/// The id of the latest tool call, among the messages so far, that no
/// tool message answers yet, and whose function is `name` (when given).
fn answered_call(out: &[Value], name: Option<&str>) -> Option<String> {
    let answered: std::collections::HashSet<&str> = out
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    out.iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .filter(|c| name.is_none_or(|n| c["function"]["name"] == n))
        .filter_map(|c| c["id"].as_str())
        .find(|id| !answered.contains(id))
        .map(str::to_string)
}

/// A tool definition, in OpenAI's form, from one logged as a message.
fn tool_definition(def: &Map<String, Value>) -> Option<Value> {
    if def.get("function").and_then(|f| f.get("name")).is_some() {
        let mut t = def.clone();
        t.entry("type").or_insert_with(|| "function".into());
        return Some(Value::Object(t));
    }
    if def.get("name").is_some_and(Value::is_string)
        && (def.contains_key("parameters") || def.contains_key("description"))
    {
        return Some(json!({"type": "function", "function": def}));
    }
    None
}

/// A tool call in OpenAI's form, from OpenAI's (arguments as an object
/// too), LangChain's (`name`, `args`), OTel's (`name`, `arguments`) or
/// Anthropic's (`name`, `input`).
fn tool_call(field: &str, c: &Value) -> Result<Value, String> {
    let Value::Object(c) = c else {
        return Err(format!(
            "field `{field}`: expected a tool call, found {}",
            show(c)
        ));
    };
    let (name, args) = match c.get("function") {
        Some(Value::Object(f)) => (f.get("name"), f.get("arguments")),
        _ => (
            c.get("name").or_else(|| c.get("toolName")),
            c.get("args")
                .or_else(|| c.get("arguments"))
                .or_else(|| c.get("input")),
        ),
    };
    let Some(Value::String(name)) = name else {
        return Err(format!(
            "field `{field}`: a tool call without a function name"
        ));
    };
    let id = match c.get("id").or_else(|| c.get("toolCallId")) {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => {
            return Err(format!(
                "field `{field}`: a tool call without an `id` (the tool message that answers it names it)"
            ));
        }
    };
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Ok(json!({
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }))
}

/// One part of a content array in OpenAI's form: text and media parts
/// kept or renamed, tool calls and tool results moved to where OpenAI has
/// them, reasoning left out (no chat request carries it back).
fn content_part(
    field: &str,
    p: &Value,
    mapped: &mut Vec<Value>,
    calls: &mut Vec<Value>,
    results: &mut Vec<Value>,
) -> Result<(), String> {
    let obj = match p {
        Value::String(s) => {
            mapped.push(json!({"type": "text", "text": s}));
            return Ok(());
        }
        Value::Object(obj) => obj,
        other => {
            return Err(format!(
                "field `{field}`: expected a content part, found {}",
                show(other)
            ));
        }
    };
    let ty = obj.get("type").and_then(Value::as_str);
    match ty {
        Some("text" | "input_text" | "output_text") | None => {
            match obj.get("text").or_else(|| obj.get("content")) {
                Some(Value::String(t)) => mapped.push(json!({"type": "text", "text": t})),
                _ => {
                    return Err(format!(
                        "field `{field}`: a content part without `type` or text"
                    ));
                }
            }
        }
        Some("image_url") => match obj.get("image_url") {
            Some(Value::String(url)) => {
                mapped.push(json!({"type": "image_url", "image_url": {"url": url}}))
            }
            _ => mapped.push(p.clone()),
        },
        Some("image") => {
            let url = image_url(obj).ok_or_else(|| {
                format!("field `{field}`: an image part with neither a URL nor base64 data")
            })?;
            mapped.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        Some("input_audio" | "file" | "refusal" | "audio_url" | "video_url") => {
            mapped.push(p.clone())
        }
        Some("tool_use" | "tool_call" | "tool-call") => calls.push(tool_call(field, p)?),
        Some("tool_result" | "tool_call_response" | "tool-result") => {
            let id = obj
                .get("tool_use_id")
                .or_else(|| obj.get("id"))
                .or_else(|| obj.get("toolCallId"))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    format!("field `{field}`: a tool result without the id of its call")
                })?;
            let answer = obj
                .get("content")
                .or_else(|| obj.get("response"))
                .or_else(|| obj.get("result"))
                .or_else(|| obj.get("output"));
            let text = match answer {
                Some(Value::Array(inner)) => parts_text(inner),
                other => as_text(other),
            };
            results.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        }
        Some("reasoning" | "thinking" | "redacted_thinking") => {}
        Some(other) => {
            return Err(format!(
                "field `{field}.type`: \"{other}\" has no OpenAI content part to map to"
            ));
        }
    }
    Ok(())
}

/// The URL of an image block: LangChain's (`url`, or `source_type`
/// base64 with `data` and `mime_type`) or Anthropic's (`source`).
fn image_url(obj: &Map<String, Value>) -> Option<String> {
    if let Some(url) = obj.get("url").and_then(Value::as_str) {
        return Some(url.to_string());
    }
    let source = obj.get("source").and_then(Value::as_object).unwrap_or(obj);
    if let Some(url) = source.get("url").and_then(Value::as_str) {
        return Some(url.to_string());
    }
    let data = source
        .get("data")
        .or_else(|| source.get("base64"))
        .and_then(Value::as_str)?;
    let mime = source
        .get("mime_type")
        .or_else(|| source.get("media_type"))
        .and_then(Value::as_str)
        .unwrap_or("image/png");
    Some(format!("data:{mime};base64,{data}"))
}

/// The reason a summary gives for a call left out because its log has
/// neither an output count nor the output text to count.
pub const NO_OUTPUT: &str = "with no output count or output text in the log";

/// The text a call generated, from the output its log recorded: a
/// string, JSON text of one, an OpenAI message, choice list or response,
/// OTel output messages (`parts`), LangChain's AI message. Tool calls
/// count by their name and arguments, as the model generated them.
pub fn output_text(v: &Value) -> Option<String> {
    let mut out = String::new();
    collect_output(v, &mut out, 0);
    (!out.is_empty()).then_some(out)
}

fn collect_output(v: &Value, out: &mut String, depth: u32) {
    // Outputs nest a few levels at most; deeper is not an output.
    if depth > 6 {
        return;
    }
    let o = match v {
        Value::String(s) => {
            let t = s.trim_start();
            match serde_json::from_str::<Value>(s) {
                Ok(inner) if t.starts_with('{') || t.starts_with('[') => {
                    collect_output(&inner, out, depth + 1)
                }
                _ => out.push_str(s),
            }
            return;
        }
        Value::Array(items) => {
            for item in items {
                collect_output(item, out, depth + 1);
            }
            return;
        }
        Value::Object(o) => o,
        _ => return,
    };
    if let Some(choices) = o.get("choices").and_then(Value::as_array) {
        for c in choices {
            match c.get("message").or_else(|| c.get("delta")) {
                Some(m) => collect_output(m, out, depth + 1),
                None => collect_output(c.get("text").unwrap_or(&Value::Null), out, depth + 1),
            }
        }
        return;
    }
    for key in ["parts", "content", "text", "refusal", "reasoning_content"] {
        match o.get(key) {
            Some(Value::Array(parts)) => {
                for p in parts {
                    match p.get("type").and_then(Value::as_str) {
                        Some("tool_call" | "tool_use" | "tool-call") => tool_text(p, out),
                        _ => match p.get("text").or_else(|| p.get("content")) {
                            Some(t @ Value::String(_)) => collect_output(t, out, depth + 1),
                            _ if p.is_string() => collect_output(p, out, depth + 1),
                            _ => {}
                        },
                    }
                }
            }
            Some(Value::String(t)) => out.push_str(t),
            _ => {}
        }
    }
    let calls = o
        .get("tool_calls")
        .or_else(|| o.get("additional_kwargs").and_then(|k| k.get("tool_calls")));
    for c in calls.and_then(Value::as_array).into_iter().flatten() {
        tool_text(c, out);
    }
}

fn tool_text(c: &Value, out: &mut String) {
    let f = c.get("function").unwrap_or(c);
    out.push_str(&as_text(f.get("name")));
    out.push_str(&as_text(
        f.get("arguments")
            .or_else(|| f.get("args"))
            .or_else(|| f.get("input")),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(messages: Value) -> Value {
        to_openai(&messages, None).unwrap().unwrap().0
    }

    #[test]
    fn output_texts_of_every_form() {
        for (v, want) in [
            (json!("Paris."), "Paris."),
            (
                json!("{\"role\": \"assistant\", \"content\": \"Hi.\"}"),
                "Hi.",
            ),
            (
                json!({"choices": [{"message": {"content": "A", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}),
                "Af{}",
            ),
            (
                json!([{"role": "assistant", "parts": [{"type": "text", "content": "B"},
                {"type": "tool_call", "name": "g", "arguments": {"x": 1}}]}]),
                "Bg{\"x\":1}",
            ),
            (
                json!({"type": "ai", "content": [{"type": "text", "text": "C"}]}),
                "C",
            ),
        ] {
            assert_eq!(output_text(&v).as_deref(), Some(want), "{v}");
        }
        assert_eq!(
            output_text(&json!({"role": "assistant", "content": ""})),
            None
        );
    }

    #[test]
    fn openai_messages_are_left_alone() {
        let m = json!([{"role": "user", "content": "hi", "extra_field": 1}]);
        assert_eq!(to_openai(&m, None), Ok(None));
    }

    #[test]
    fn langchain_serialized_forms() {
        let m = json!([
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "SystemMessage"],
             "kwargs": {"content": "Be brief.", "type": "system"}},
            {"type": "human", "data": {"content": "Weather in Paris?", "example": false}},
            {"type": "ai", "content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}],
             "response_metadata": {}, "invalid_tool_calls": []},
            {"type": "tool", "content": "sunny", "name": "get_weather", "tool_call_id": "c1", "status": "success"}
        ]);
        assert_eq!(
            mapped(m),
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
            ])
        );
    }

    #[test]
    fn a_tool_named_as_the_role_answers_its_call() {
        let m = json!([
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c7", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "get_weather", "content": "sunny"}
        ]);
        assert_eq!(
            mapped(m)[2],
            json!({"role": "tool", "content": "sunny", "tool_call_id": "c7"})
        );
        let orphan =
            json!([{"role": "user", "content": "x"}, {"role": "get_weather", "content": "sunny"}]);
        assert_eq!(
            to_openai(&orphan, None),
            Err("field `messages[1].role`: \"get_weather\" is no chat role, and no earlier tool call of that name is unanswered".into())
        );
    }

    #[test]
    fn otel_media_parts_are_refused_by_name() {
        let m = json!([{"role": "user", "parts": [{"type": "text", "content": "look"},
                        {"type": "blob", "modality": "image", "content": "aGk="}]}]);
        assert_eq!(
            to_openai(&m, None),
            Err("field `messages[0].parts[1].type`: \"blob\" parts are not mapped to OpenAI chat content".into())
        );
    }
}
