//! `/v1/messages`: Anthropic's Messages API, as Claude Code speaks it.
//!
//! Requests are built in chat's form and translated here (`render`):
//! system messages become `system`, each message's content becomes content
//! blocks, tool calls `tool_use` blocks, tool messages `tool_result` blocks
//! of one user message, tools `input_schema`s; `max_tokens`, which the API
//! requires, is [`DEFAULT_MAX_TOKENS`] when the record gives no
//! `output_length`. Answers are a `message` of content blocks, or a stream
//! of typed events (`message_start`, `content_block_delta`…,
//! `message_delta` with the usage, `message_stop`). Usage counts the
//! prompt in three parts: `input_tokens` (not read from the cache),
//! `cache_read_input_tokens` and `cache_creation_input_tokens`; the
//! result's `prompt_tokens` is their sum and its `cached_tokens` the
//! second, so that a hit rate is cached / prompt tokens as for the other
//! endpoints.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::read::{self, Scan, count_of, filled, nonempty};
use super::{About, Answer, Api, Generation, Piece, Reply, Said, Usage, sse};

pub struct Messages;

/// `max_tokens` when the record gives no `output_length`.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

impl Api for Messages {
    /// Built in chat's form, translated by `render`.
    fn about(&self) -> About {
        About::conversation("/v1/messages", &Messages)
            .no_results("no content in the answer")
            .typed_stream("message_start", "message_stop")
    }

    /// The single pass where it can, else serde.
    fn read<'a>(&self, bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        scan(bytes).map_or_else(|| by_value(bytes), Ok)
    }

    fn render(&self, chat_body: &[u8]) -> Option<Vec<u8>> {
        let mut out = super::translate(chat_body, |k, v, out| match k.as_str() {
            "messages" => {
                let (system, messages) = translate(v);
                if let Some(s) = system {
                    out.insert("system".into(), s);
                }
                out.insert(k, messages);
            }
            "tools" => {
                out.insert(k, tools(v));
            }
            // Anthropic refuses members it does not know.
            "stream_options" => {}
            _ => {
                out.insert(k, v);
            }
        })?;
        if !out.contains_key("max_tokens") {
            out.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
        }
        serde_json::to_vec(&Value::Object(out)).ok()
    }

    fn transcribe<'v>(&self, v: &'v Value, said: &mut dyn FnMut(Said<'v>)) -> bool {
        let block = |b: &'v Value, key: String, said: &mut dyn FnMut(Said<'v>)| match b
            .get("type")
            .and_then(Value::as_str)
        {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    said(Said::Text(t));
                }
            }
            Some("tool_use") => said(Said::Call {
                key,
                id: b.get("id").and_then(Value::as_str),
                name: b.get("name").and_then(Value::as_str),
                // Streams send the input as pieces of JSON text.
                arguments: b
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(|i| Cow::Owned(i.to_string())),
            }),
            _ => {}
        };
        let index = || v.get("index").and_then(Value::as_u64).unwrap_or(0).to_string();
        match v.get("type").and_then(Value::as_str) {
            Some("message") => {
                let blocks = v.get("content").and_then(Value::as_array);
                for (i, b) in blocks.into_iter().flatten().enumerate() {
                    block(b, i.to_string(), said);
                }
                true
            }
            Some("message_start") => true,
            Some("content_block_start") => {
                if let Some(b) = v.get("content_block") {
                    block(b, index(), said);
                }
                true
            }
            Some("content_block_delta") => {
                let d = v.get("delta");
                let text = |k: &str| d.and_then(|d| d.get(k)).and_then(Value::as_str);
                if let Some(t) = text("text") {
                    said(Said::Text(t));
                }
                if let Some(j) = text("partial_json") {
                    said(Said::Call {
                        key: index(),
                        id: None,
                        name: None,
                        arguments: Some(Cow::Borrowed(j)),
                    });
                }
                true
            }
            _ => false,
        }
    }

    /// `system`, then each message's text (strings, text blocks, the text
    /// of tool results).
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        let mut out = Vec::new();
        if let Some(s) = body.get("system") {
            super::texts(s, &mut out);
        }
        for m in body.get("messages")?.as_array()? {
            if let Some(c) = m.get("content") {
                super::texts(c, &mut out);
            }
        }
        Some(out)
    }

    fn answer(&self, reply: &Reply) -> Value {
        json!({
            "id": format!("msg_{}", reply.n), "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": reply.text}], "model": reply.model,
            "stop_reason": "max_tokens", "stop_sequence": null, "usage": usage(reply),
        })
    }
}

/// The simulated server's usage, as llama.cpp counts it.
fn usage(reply: &Reply) -> Value {
    json!({
        "input_tokens": reply.prompt_tokens - reply.cached_tokens,
        "cache_read_input_tokens": reply.cached_tokens,
        "output_tokens": reply.completion_tokens,
    })
}

impl Generation for Messages {
    fn opening(&self, r: &Reply) -> Vec<String> {
        let mut u = usage(r);
        u["output_tokens"] = json!(0);
        let message = json!({
            "id": format!("msg_{}", r.n), "type": "message", "role": "assistant", "content": [],
            "model": r.model, "stop_reason": null, "stop_sequence": null, "usage": u,
        });
        vec![
            sse(
                Some("message_start"),
                &json!({"type": "message_start", "message": message}),
            ),
            sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
            ),
        ]
    }

    fn token(&self, _: &Reply, text: &str, _last: bool) -> String {
        sse(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}}),
        )
    }

    fn closing(&self, r: &Reply, _usage: bool) -> Vec<String> {
        vec![
            sse(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": 0}),
            ),
            sse(
                Some("message_delta"),
                &json!({"type": "message_delta",
                        "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
                        "usage": {"output_tokens": r.completion_tokens}}),
            ),
            sse(
                Some("message_stop"),
                &json!({"type": "message_stop"}),
            ),
        ]
    }
}

/// Chat's `messages` as Anthropic's `system` and `messages`.
fn translate(messages: Value) -> (Option<Value>, Value) {
    let Value::Array(list) = messages else {
        return (None, messages);
    };
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    for m in list {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" | "developer" => system.push(super::text_of(m.get("content"))),
            "user" => out.push(json!({"role": "user", "content": content(m.get("content"))})),
            "assistant" => out.push(assistant(&m)),
            "tool" => {
                let result = json!({
                    "type": "tool_result",
                    "tool_use_id": m.get("tool_call_id").cloned().unwrap_or(Value::Null),
                    "content": content(m.get("content")),
                });
                // The results of one turn's calls go in one user message.
                match out.last_mut() {
                    Some(prev) if is_tool_results(prev) => {
                        if let Some(Value::Array(blocks)) = prev.get_mut("content") {
                            blocks.push(result);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [result]})),
                }
            }
            _ => out.push(m),
        }
    }
    let system = match system.len() {
        0 => None,
        1 => system.pop().map(Value::String),
        _ => Some(Value::Array(
            system
                .into_iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect(),
        )),
    };
    (system, Value::Array(out))
}

/// A user message made of tool results.
fn is_tool_results(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .and_then(|b| b.get("type"))
        .is_some_and(|t| t == "tool_result")
}

/// An assistant message: its text, then a `tool_use` block per call (the
/// arguments' JSON as `input`; arguments that are not a JSON object give
/// an empty one). Text alone stays a string.
fn assistant(m: &Value) -> Value {
    let calls = m.get("tool_calls").and_then(Value::as_array);
    let Some(calls) = calls.filter(|c| !c.is_empty()) else {
        return json!({"role": "assistant", "content": content(m.get("content"))});
    };
    let mut blocks = match content(m.get("content")) {
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(b) => b,
        _ => Vec::new(),
    };
    for c in calls {
        let f = c.get("function");
        let input = f
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use",
            "id": c.get("id").cloned().unwrap_or(Value::Null),
            "name": f.and_then(|f| f.get("name")).cloned().unwrap_or(Value::Null),
            "input": input,
        }));
    }
    json!({"role": "assistant", "content": blocks})
}

/// A message's content: a string stays one (null is empty); parts become
/// blocks (text as text, `image_url` as an image from a data URL or a
/// URL, others as they are).
fn content(c: Option<&Value>) -> Value {
    match c {
        None | Some(Value::Null) => json!(""),
        Some(Value::Array(parts)) => Value::Array(parts.iter().map(block).collect()),
        Some(other) => other.clone(),
    }
}

fn block(part: &Value) -> Value {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": part.get("text").cloned().unwrap_or_default()}),
        Some("image_url") => {
            let url = part
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .unwrap_or("");
            let source = match url
                .strip_prefix("data:")
                .and_then(|d| d.split_once(";base64,"))
            {
                Some((media, data)) => {
                    json!({"type": "base64", "media_type": media, "data": data})
                }
                None => json!({"type": "url", "url": url}),
            };
            json!({"type": "image", "source": source})
        }
        _ => part.clone(),
    }
}

/// Chat's tools (`{"type":"function","function":{…}}`) as Anthropic's.
fn tools(v: Value) -> Value {
    let Value::Array(list) = v else {
        return v;
    };
    Value::Array(
        list.into_iter()
            .map(|t| match t.get("function") {
                Some(f) => {
                    let mut out = Map::new();
                    out.insert("name".into(), f.get("name").cloned().unwrap_or_default());
                    if let Some(d) = f.get("description") {
                        out.insert("description".into(), d.clone());
                    }
                    let schema = f
                        .get("parameters")
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                    out.insert("input_schema".into(), schema);
                    Value::Object(out)
                }
                None => t,
            })
            .collect(),
    )
}

/// The single pass, for the events a stream sends per token
/// (`content_block_delta`) and the others without the members serde's side
/// reads (`error`, `message`, `content`, `stop_reason`, `usage`: those are
/// serde's).
fn scan(b: &[u8]) -> Option<Answer<'_>> {
    let mut content = [false; 3];
    let kind = read::typed_event(b, |s, key| match key {
        b"delta" => {
            content = [false; 3];
            delta(s, &mut content)
        }
        b"error" | b"message" | b"content" | b"stop_reason" | b"usage" => None,
        _ => s.skip(),
    })?;
    let mut a = Answer::default();
    match kind.as_deref() {
        Some("content_block_delta") => {
            a.results = Some(1);
            a.content = content.iter().any(|&c| c);
        }
        Some("message_start") => {
            a.results = Some(0);
            a.start = true;
        }
        Some("content_block_start") => a.results = Some(1),
        Some("message_stop") => a.end = true,
        None => a.untyped = true,
        _ => {}
    }
    Some(a)
}

/// A delta's `text`, `thinking` and `partial_json`, each non-empty or not;
/// a `stop_reason` is serde's.
fn delta(s: &mut Scan, content: &mut [bool; 3]) -> Option<()> {
    if s.peek()? != b'{' {
        return s.skip();
    }
    s.object(|s, key| {
        match DELTAS.iter().position(|d| d.as_bytes() == key) {
            Some(i) => content[i] = nonempty(s)?,
            None if key == b"stop_reason" => return None,
            None => s.skip()?,
        }
        Some(())
    })
}

/// What a delta carries that is output: text, thinking, a tool's input.
const DELTAS: [&str; 3] = ["text", "thinking", "partial_json"];

/// Any answer object, read from a `Value`: an error only for malformed
/// JSON.
fn by_value(bytes: &[u8]) -> serde_json::Result<Answer<'static>> {
    let v: Value = serde_json::from_slice(bytes)?;
    let mut a = Answer {
        error: v.get("error").filter(|e| !e.is_null()).cloned(),
        ..Answer::default()
    };
    let stop = |v: Option<&Value>| {
        v.and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str)
            .map(|s| Cow::Owned(s.to_string()))
    };
    match v.get("type").and_then(Value::as_str) {
        Some("message") => {
            let blocks = v.get("content").and_then(Value::as_array);
            a.results = blocks.map(Vec::len);
            a.content = blocks.into_iter().flatten().any(|b| {
                ["text", "thinking"].iter().any(|k| filled(b.get(*k)))
                    || b.get("type").is_some_and(|t| t == "tool_use")
            });
            a.finish_reason = stop(Some(&v));
            a.usage = anthropic_usage(v.get("usage"));
        }
        Some("message_start") => {
            a.results = Some(0);
            a.start = true;
            a.usage = anthropic_usage(v.pointer("/message/usage"));
        }
        Some("content_block_start") => a.results = Some(1),
        Some("content_block_delta") => {
            a.results = Some(1);
            let d = v.get("delta").filter(|d| d.is_object());
            a.content = DELTAS
                .iter()
                .any(|k| filled(d.and_then(|d| d.get(*k))));
        }
        Some("message_delta") => {
            a.finish_reason = stop(v.get("delta"));
            a.usage = anthropic_usage(v.get("usage"));
        }
        Some("message_stop") => a.end = true,
        None => a.untyped = true,
        _ => {}
    }
    Ok(a)
}

/// Anthropic's usage as the result's: the prompt is the sum of its three
/// parts (when `input_tokens` is given), the cached part
/// `cache_read_input_tokens`.
fn anthropic_usage(u: Option<&Value>) -> Option<Usage> {
    let u = u.filter(|u| u.is_object())?;
    let read = count_of(u, "cache_read_input_tokens");
    let created = count_of(u, "cache_creation_input_tokens");
    let prompt = count_of(u, "input_tokens").and_then(|i| {
        i.checked_add(read.unwrap_or(0))?
            .checked_add(created.unwrap_or(0))
    });
    Some(Usage {
        prompt_tokens: prompt,
        completion_tokens: count_of(u, "output_tokens"),
        cached_tokens: read,
    })
}

#[cfg(test)]
mod tests;
