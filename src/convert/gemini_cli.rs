//! Gemini CLI chats, as Gemini CLI keeps them under
//! `~/.gemini/tmp/<project hash>/chats/`: `session-<time>-<id>.json`, one
//! JSON object (`sessionId`, `projectHash`, `startTime`, `messages[]`), or,
//! from later releases, `session-<time>-<id>.jsonl`: that object's fields
//! on the first line, then one line per message written (a message written
//! again under its `id` replaces it), `{"$set": {...}}` updates (`messages`
//! among them replaces them all) and `{"$rewindTo": ID}` (the messages
//! from ID on are gone); a subagent's chat is `chats/<parent session
//! id>/<id>.jsonl` with `kind` `subagent` (gemini-cli
//! `packages/core/src/services/chatRecordingService.ts`).
//!
//! A message of `type` `gemini` with `tokens` is one model call; its
//! `tokens` are the response's `usageMetadata`: `input` (promptTokenCount,
//! the whole prompt, cached part included), `output`
//! (candidatesTokenCount), `cached` (cachedContentTokenCount, kept as
//! `observed.cached_tokens`), `thoughts` (thoughtsTokenCount), `tool`,
//! `total`. Gemini counts thoughts outside `output` (OpenAI and Anthropic
//! count reasoning inside it); a replay must generate them too, so
//! `output_length` (and `observed.completion_tokens`) is `output` +
//! `thoughts`. An answer without `tokens` is left out, and counted.
//!
//! Times: a message's `timestamp` is when Gemini CLI recorded it, once the
//! answer was in (the call's end). A call starts at the later of the
//! message before it and the last tool call that message ran (its result
//! went out with this request).
//!
//! --keep-messages: each call's new messages in OpenAI's chat form
//! (`message_mode` `"delta"`): the user's words, and the previous
//! answer's tool results as `tool` messages under the tool calls' ids.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::sync::Arc;

use serde_json::{Value, json};

use super::agents::{self, Call};
use super::{Ctx, Head};
use crate::error::{Error, Location, Result};

/// A Gemini CLI chat: `sessionId` and `projectHash`.
pub fn sniff(head: &Head) -> bool {
    head.is_json() && head.contains("\"sessionId\"") && head.contains("\"projectHash\"")
}

/// One message, with the line it was read on.
struct Message {
    loc: Location,
    value: Value,
}

/// Read one chat.
pub fn read(mut reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let name = agents::file_name(&source);
    let jsonl = source.ends_with(".jsonl");
    if !(jsonl || source.ends_with(".json") || &*source == "<stdin>") || name == "logs.json" {
        agents::not_a_session(ctx, &source, "a Gemini CLI chat (session-*.json, .jsonl)");
        return Ok(());
    }
    let mut meta = serde_json::Map::new();
    let mut messages: Vec<Message> = Vec::new();
    let mut text = Vec::new();
    reader
        .read_to_end(&mut text)
        .map_err(|e| Error::io(&*source, e))?;
    let text = String::from_utf8_lossy(&text);
    // One object (the first releases), else JSONL.
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(mut obj)) => {
            let list = obj.remove("messages");
            meta = obj;
            if let Some(Value::Array(list)) = list {
                messages = list
                    .into_iter()
                    .map(|value| Message {
                        loc: Location::new(source.clone(), 1),
                        value,
                    })
                    .collect();
            }
        }
        _ => {
            let mut at: HashMap<String, usize> = HashMap::new();
            for (i, line) in text.lines().enumerate() {
                let loc = Location::new(source.clone(), i as u64 + 1);
                let Some(value) = ctx.agents.object(&loc, line) else {
                    continue;
                };
                if let Some(id) = value.get("$rewindTo").and_then(Value::as_str) {
                    let cut = at.get(id).copied().unwrap_or(0);
                    messages.truncate(cut);
                    at.retain(|_, i| *i < cut);
                } else if let Some(Value::Object(set)) = value.get("$set") {
                    for (k, v) in set {
                        if k == "messages"
                            && let Value::Array(list) = v
                        {
                            messages = list
                                .iter()
                                .map(|m| Message {
                                    loc: loc.clone(),
                                    value: m.clone(),
                                })
                                .collect();
                            at = ids(&messages);
                        } else {
                            meta.insert(k.clone(), v.clone());
                        }
                    }
                } else if let Some(id) = value.get("id").and_then(Value::as_str) {
                    let m = Message {
                        loc,
                        value: value.clone(),
                    };
                    match at.get(id) {
                        Some(&i) => messages[i] = m,
                        None => {
                            at.insert(id.to_string(), messages.len());
                            messages.push(m);
                        }
                    }
                } else if let Value::Object(fields) = value {
                    meta.extend(fields);
                }
            }
        }
    }
    let Some(id) = meta
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        agents::not_a_session(ctx, &source, "a Gemini CLI chat (no `sessionId`)");
        return Ok(());
    };
    // A subagent's chat sits in a folder named by its parent session.
    let (session, agent) = if meta.get("kind").and_then(Value::as_str) == Some("subagent") {
        let parent = source
            .rsplit(['/', '\\'])
            .nth(1)
            .filter(|p| !p.is_empty() && *p != "chats")
            .unwrap_or(&id)
            .to_string();
        (parent, Some(id))
    } else {
        (id, None)
    };
    let keep = ctx.keep_messages();
    let mut last_ns: Option<i64> = None;
    let mut pending: Vec<Value> = Vec::new();
    for m in messages {
        if let Err((field, msg)) =
            message(&m, &session, &agent, keep, &mut last_ns, &mut pending, ctx)
        {
            ctx.agents
                .damaged(&m.loc, format!("field `{field}`: {msg}"));
        }
    }
    Ok(())
}

fn ids(messages: &[Message]) -> HashMap<String, usize> {
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((m.value.get("id")?.as_str()?.to_string(), i)))
        .collect()
}

type LineError = (String, String);

fn err(field: &str, msg: impl Into<String>) -> LineError {
    (field.to_string(), msg.into())
}

/// One message: a call (an answer with tokens), or what the next call sends.
fn message(
    m: &Message,
    session: &str,
    agent: &Option<String>,
    keep: bool,
    last_ns: &mut Option<i64>,
    pending: &mut Vec<Value>,
    ctx: &mut Ctx,
) -> std::result::Result<(), LineError> {
    let v = &m.value;
    let t = agents::timestamp(v.get("timestamp")).map_err(|e| err("timestamp", e))?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "gemini" {
        *last_ns = Some(t);
        if keep && kind == "user" {
            pending.push(json!({"role": "user", "content": text_of(v.get("content"))}));
        }
        return Ok(());
    }
    // The tool calls this answer ran: their results go with the next call.
    let mut tools_end = t;
    let mut results = Vec::new();
    if let Some(Value::Array(calls)) = v.get("toolCalls") {
        for c in calls {
            if let Some(Ok(ct)) = c.get("timestamp").map(|x| agents::timestamp(Some(x))) {
                tools_end = tools_end.max(ct);
            }
            if keep {
                let id = c.get("id").and_then(Value::as_str).unwrap_or("");
                let result = c.get("result").map(Value::to_string).unwrap_or_default();
                results.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
            }
        }
    }
    let start = last_ns.unwrap_or(t).min(t);
    *last_ns = Some(tools_end);
    let Some(tokens) = v.get("tokens").filter(|x| x.is_object()) else {
        ctx.agents.no_tokens += 1;
        pending.extend(results);
        return Ok(());
    };
    let count = |f: &str| agents::tokens(tokens, f).map_err(|e| err(&format!("tokens.{f}"), e));
    let input = count("input")?.ok_or_else(|| err("tokens.input", "is missing"))?;
    let output = count("output")?.unwrap_or(0) + count("thoughts")?.unwrap_or(0);
    let cached = count("cached")?;
    ctx.agents.add(Call {
        loc: m.loc.clone(),
        session: session.to_string(),
        agent: agent.clone(),
        epoch: 0,
        start_ns: start,
        end_ns: t,
        input,
        output,
        cached,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        key: v.get("id").and_then(Value::as_str).map(str::to_string),
        copy: false,
        understated: false,
        messages: keep.then(|| std::mem::take(pending)),
    });
    pending.extend(results);
    Ok(())
}

/// The text of a message's content: a string, or parts with `text`.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_jsonl_chat_keeps_the_last_writing_of_each_message_and_forgets_what_was_rewound() {
        let mut ctx = Ctx::new(&super::super::Args::parse_from(["trace-convert"]));
        let t = |s: u32| format!("2026-01-16T11:00:{s:02}.000Z");
        let tokens = |i: u64, o: u64, th: u64| {
            format!(
                r#""tokens":{{"input":{i},"output":{o},"cached":0,"thoughts":{th},"tool":0,"total":0}}"#
            )
        };
        let lines = [
            r#"{"sessionId":"S","projectHash":"h","startTime":"2026-01-16T11:00:00.000Z","kind":"main"}"#.to_string(),
            format!(r#"{{"id":"u1","type":"user","timestamp":"{}","content":"hi"}}"#, t(0)),
            // Written first without tokens, then again with them.
            format!(r#"{{"id":"g1","type":"gemini","timestamp":"{}","content":"","model":"m"}}"#, t(2)),
            format!(r#"{{"id":"g1","type":"gemini","timestamp":"{}","content":"","model":"m",{}}}"#, t(2), tokens(10, 2, 3)),
            format!(r#"{{"id":"u2","type":"user","timestamp":"{}","content":"more"}}"#, t(4)),
            format!(r#"{{"id":"g2","type":"gemini","timestamp":"{}","content":"","model":"m",{}}}"#, t(5), tokens(20, 2, 0)),
            // The user rewound to before u2: u2 and g2 are gone.
            r#"{"$rewindTo":"u2"}"#.to_string(),
            format!(r#"{{"id":"u3","type":"user","timestamp":"{}","content":"else"}}"#, t(7)),
            format!(r#"{{"id":"g3","type":"gemini","timestamp":"{}","content":"","model":"m",{}}}"#, t(9), tokens(30, 4, 1)),
            r#"{"$set":{"lastUpdated":"2026-01-16T11:00:09.000Z"}}"#.to_string(),
        ];
        let text = lines.join("\n");
        read(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            "chats/session-x.jsonl".into(),
            &mut ctx,
        )
        .unwrap();
        let got: Vec<(Option<&str>, u64, u64, i64)> = ctx
            .agents
            .calls()
            .iter()
            .map(|c| {
                (
                    c.key.as_deref(),
                    c.input,
                    c.output,
                    c.start_ns / 1_000_000_000 % 60,
                )
            })
            .collect();
        // Outputs count thoughts: 2 + 3, 4 + 1; g3 starts at u3 (7 s).
        assert_eq!(got, vec![(Some("g1"), 10, 5, 0), (Some("g3"), 30, 5, 7)]);
        assert_eq!(ctx.agents.no_tokens, 0);
    }

    #[test]
    fn a_subagent_chat_is_a_subagent_of_the_session_its_folder_names() {
        let mut ctx = Ctx::new(&super::super::Args::parse_from(["trace-convert"]));
        let text = [
            r#"{"sessionId":"sub-1","projectHash":"h","startTime":"2026-01-16T11:00:00.000Z","kind":"subagent"}"#,
            r#"{"id":"u1","type":"user","timestamp":"2026-01-16T11:00:01.000Z","content":"task"}"#,
            r#"{"id":"g1","type":"gemini","timestamp":"2026-01-16T11:00:03.000Z","content":"","model":"m","tokens":{"input":7,"output":1,"cached":0,"thoughts":0,"tool":0,"total":8}}"#,
        ]
        .join("\n");
        read(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            "tmp/h/chats/parent-9/sub-1.jsonl".into(),
            &mut ctx,
        )
        .unwrap();
        let c = &ctx.agents.calls()[0];
        assert_eq!(
            (c.session.as_str(), c.agent.as_deref()),
            ("parent-9", Some("sub-1"))
        );
    }
}
