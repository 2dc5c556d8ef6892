//! `/v1/responses`: OpenAI's Responses API, as Codex speaks it.
//!
//! Requests are built in chat's form and translated here (`render`): the
//! messages become `input` items (messages, `function_call` for each tool
//! call, `function_call_output` for each tool message), tools lose their
//! `function` wrapper, `max_tokens` is `max_output_tokens`. Answers are a
//! `response` of `output` items, or a stream of typed events
//! (`response.created`, `response.output_text.delta`…, then
//! `response.completed` carrying the usage), which ends without `[DONE]`.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::read::{self, count_of, filled, nonempty};
use super::{About, Answer, Api, Generation, Piece, Reply, Said, Usage, sse};

pub struct Responses;

impl Api for Responses {
    /// Built in chat's form, translated by `render`.
    fn about(&self) -> About {
        About::conversation("/v1/responses", &Responses)
            .no_results("no output in the answer")
            .typed_stream("response.created", "response.completed")
    }

    /// The single pass where it can, else serde.
    fn read<'a>(&self, bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        scan(bytes).map_or_else(|| by_value(bytes), Ok)
    }

    fn render(&self, chat_body: &[u8]) -> Option<Vec<u8>> {
        let out = super::translate(chat_body, |k, v, out| match k.as_str() {
            "messages" => {
                out.insert("input".into(), input(v));
            }
            "tools" => {
                out.insert(k, tools(v));
            }
            "max_tokens" => {
                out.insert("max_output_tokens".into(), v);
            }
            // Its streams always carry the usage.
            "stream_options" => {}
            _ => {
                out.insert(k, v);
            }
        })?;
        serde_json::to_vec(&Value::Object(out)).ok()
    }

    fn transcribe<'v>(&self, v: &'v Value, said: &mut dyn FnMut(Said<'v>)) -> bool {
        let text = |v: &'v Value, k: &str| v.get(k).and_then(Value::as_str);
        let call = |item: &'v Value, key: String| Said::Call {
            key,
            id: text(item, "call_id"),
            name: text(item, "name"),
            arguments: text(item, "arguments").map(Cow::Borrowed),
        };
        match text(v, "type") {
            None => {
                let Some(items) = v.get("output").and_then(Value::as_array) else {
                    return false;
                };
                for (i, item) in items.iter().enumerate() {
                    match text(item, "type") {
                        Some("message") => {
                            let parts = item.get("content").and_then(Value::as_array);
                            for p in parts.into_iter().flatten() {
                                if let Some(t) = text(p, "text") {
                                    said(Said::Text(t));
                                }
                            }
                        }
                        Some("function_call") => said(call(item, i.to_string())),
                        _ => {}
                    }
                }
                true
            }
            Some("response.created") => true,
            Some("response.output_text.delta") => {
                if let Some(t) = text(v, "delta") {
                    said(Said::Text(t));
                }
                true
            }
            Some("response.output_item.added") => {
                let item = v.get("item").filter(|i| text(i, "type") == Some("function_call"));
                if let Some(item) = item {
                    let key = text(item, "id").unwrap_or_default().to_string();
                    said(call(item, key));
                }
                true
            }
            Some("response.function_call_arguments.delta") => {
                said(Said::Call {
                    key: text(v, "item_id").unwrap_or_default().to_string(),
                    id: None,
                    name: None,
                    arguments: text(v, "delta").map(Cow::Borrowed),
                });
                true
            }
            _ => false,
        }
    }

    /// `instructions`, then the text of each input item (messages' content,
    /// function call outputs).
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        let mut out = Vec::new();
        if let Some(s) = body.get("instructions") {
            super::texts(s, &mut out);
        }
        match body.get("input")? {
            v @ (Value::String(_) | Value::Array(_)) => super::texts(v, &mut out),
            _ => return None,
        }
        Some(out)
    }

    fn answer(&self, reply: &Reply) -> Value {
        let mut r = response(reply, "completed");
        r["output"] = json!([{
            "type": "message", "id": format!("msg_{}", reply.n), "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }]);
        r
    }
}

/// The simulated server's `response` object, without output.
fn response(reply: &Reply, status: &str) -> Value {
    json!({
        "id": format!("resp_{}", reply.n), "object": "response", "created_at": 0,
        "status": status, "model": reply.model, "output": [],
        "usage": {
            "input_tokens": reply.prompt_tokens,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens},
            "output_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    })
}

impl Generation for Responses {
    fn opening(&self, r: &Reply) -> Vec<String> {
        let mut created = response(r, "in_progress");
        created["usage"] = Value::Null;
        let item = json!({"id": format!("msg_{}", r.n), "type": "message",
                          "status": "in_progress", "role": "assistant", "content": []});
        vec![
            sse(
                Some("response.created"),
                &json!({"type": "response.created", "response": created}),
            ),
            sse(
                Some("response.output_item.added"),
                &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ),
        ]
    }

    fn token(&self, r: &Reply, text: &str, _last: bool) -> String {
        sse(
            Some("response.output_text.delta"),
            &json!({"type": "response.output_text.delta", "item_id": format!("msg_{}", r.n),
                    "output_index": 0, "content_index": 0, "delta": text}),
        )
    }

    fn closing(&self, r: &Reply, _usage: bool) -> Vec<String> {
        vec![sse(
            Some("response.completed"),
            &json!({"type": "response.completed", "response": response(r, "completed")}),
        )]
    }
}

/// Chat's messages as input items.
fn input(messages: Value) -> Value {
    let Value::Array(list) = messages else {
        return messages;
    };
    let mut out = Vec::new();
    for m in list {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" | "developer" | "user" => {
                out.push(json!({"role": role, "content": content(m.get("content"))}));
            }
            "assistant" => {
                let text = super::text_of(m.get("content"));
                if !text.is_empty() {
                    out.push(json!({"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": text}]}));
                }
                let calls = m.get("tool_calls").and_then(Value::as_array);
                for c in calls.into_iter().flatten() {
                    let f = c.get("function");
                    let field = |k: &str| f.and_then(|f| f.get(k)).cloned().unwrap_or_default();
                    out.push(json!({
                        "type": "function_call",
                        "call_id": c.get("id").cloned().unwrap_or_default(),
                        "name": field("name"), "arguments": field("arguments"),
                    }));
                }
            }
            "tool" => out.push(json!({
                "type": "function_call_output",
                "call_id": m.get("tool_call_id").cloned().unwrap_or_default(),
                "output": super::text_of(m.get("content")),
            })),
            _ => out.push(m),
        }
    }
    Value::Array(out)
}

/// A message's content: a string stays one (null is empty); parts become
/// input parts (`input_text`, `input_image`; others as they are).
fn content(c: Option<&Value>) -> Value {
    match c {
        None | Some(Value::Null) => json!(""),
        Some(Value::Array(parts)) => Value::Array(
            parts
                .iter()
                .map(|p| match p.get("type").and_then(Value::as_str) {
                    Some("text") => json!({"type": "input_text",
                                           "text": p.get("text").cloned().unwrap_or_default()}),
                    Some("image_url") => json!({"type": "input_image",
                        "image_url": p.pointer("/image_url/url").cloned().unwrap_or_default()}),
                    _ => p.clone(),
                })
                .collect(),
        ),
        Some(other) => other.clone(),
    }
}

/// Chat's tools (`{"type":"function","function":{…}}`) as the Responses
/// API's (`{"type":"function","name":…,"parameters":…}`).
fn tools(v: Value) -> Value {
    let Value::Array(list) = v else {
        return v;
    };
    Value::Array(
        list.into_iter()
            .map(|t| match t.get("function").and_then(Value::as_object) {
                Some(f) => {
                    let mut out = Map::new();
                    out.insert("type".into(), json!("function"));
                    out.extend(f.clone());
                    Value::Object(out)
                }
                None => t,
            })
            .collect(),
    )
}

/// The events that carry output, each in its `delta`.
const DELTAS: [&str; 5] = [
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
    "response.function_call_arguments.delta",
    "response.refusal.delta",
];

/// The single pass, for the events a stream sends per token and the
/// others without the members serde's side reads (`error`, `output`,
/// `status`, `incomplete_details`, `usage`, `response`: those are serde's).
fn scan(b: &[u8]) -> Option<Answer<'_>> {
    let mut content = false;
    let kind = read::typed_event(b, |s, key| match key {
        b"delta" => {
            content = nonempty(s)?;
            Some(())
        }
        b"error" | b"output" | b"status" | b"incomplete_details" | b"usage" | b"response" => None,
        _ => s.skip(),
    })?;
    let mut a = Answer::default();
    match kind.as_deref() {
        Some(t) if DELTAS.contains(&t) => {
            a.results = Some(1);
            a.content = content;
        }
        Some("response.created") => {
            a.results = Some(0);
            a.start = true;
        }
        Some("response.in_progress") => a.results = Some(0),
        Some("response.completed" | "response.incomplete") => a.end = true,
        // Its error is the event itself; a failure's is in its response.
        Some("error" | "response.failed") => return None,
        None => a.untyped = true,
        _ => {}
    }
    Some(a)
}

/// Any answer object, read from a `Value`: an error only for malformed
/// JSON.
fn by_value(bytes: &[u8]) -> serde_json::Result<Answer<'static>> {
    let v: Value = serde_json::from_slice(bytes)?;
    let mut a = Answer {
        error: v.get("error").filter(|e| !e.is_null()).cloned(),
        ..Answer::default()
    };
    match v.get("type").and_then(Value::as_str) {
        None => {
            if let Some(items) = v.get("output").and_then(Value::as_array) {
                a.results = Some(items.len());
                a.content = items.iter().any(has_output);
            }
            ended(&v, &mut a);
            a.untyped = true;
        }
        Some("response.created") => {
            a.results = Some(0);
            a.start = true;
        }
        Some("response.in_progress") => a.results = Some(0),
        Some(t) if DELTAS.contains(&t) => {
            a.results = Some(1);
            a.content = filled(v.get("delta"));
        }
        Some("response.completed" | "response.incomplete" | "response.failed") => {
            a.end = true;
            if let Some(r) = v.get("response") {
                if a.error.is_none() {
                    a.error = r.get("error").filter(|e| !e.is_null()).cloned();
                }
                ended(r, &mut a);
            }
            if a.error.is_none() && v.get("type").is_some_and(|t| t == "response.failed") {
                a.error = Some(json!({"message": "response.failed without an error object"}));
            }
        }
        Some("error") => a.error = Some(v.clone()),
        _ => {}
    }
    Ok(a)
}

/// An output item with output: text, reasoning, a function call.
fn has_output(item: &Value) -> bool {
    let parts = item.get("content").and_then(Value::as_array);
    item.get("type").is_some_and(|t| t == "function_call")
        || parts.into_iter().flatten().any(|p| filled(p.get("text")))
}

/// A finished response's finish reason (why it is incomplete, else its
/// status) and usage; a failed one without an error object is an error
/// all the same (its status says so).
fn ended(r: &Value, a: &mut Answer) {
    if r.get("status").and_then(Value::as_str) == Some("failed")
        && r.get("error").is_none_or(Value::is_null)
    {
        a.error.get_or_insert_with(
            || json!({"message": "the response failed (status \"failed\") without an error object"}),
        );
    }
    a.finish_reason = r
        .pointer("/incomplete_details/reason")
        .or_else(|| r.get("status"))
        .and_then(Value::as_str)
        .map(|s| Cow::Owned(s.to_string()));
    a.usage = r.get("usage").filter(|u| u.is_object()).map(|u| Usage {
        prompt_tokens: count_of(u, "input_tokens"),
        completion_tokens: count_of(u, "output_tokens"),
        cached_tokens: u
            .get("input_tokens_details")
            .and_then(|d| count_of(d, "cached_tokens")),
    });
}

#[cfg(test)]
mod tests;
