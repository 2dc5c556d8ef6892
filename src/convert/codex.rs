//! Codex CLI rollouts, as Codex keeps them under
//! `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`: one JSON
//! object per line, `{timestamp, type, payload}`, `type` one of
//! `session_meta` (the session's `id`), `turn_context` (the `model` of the
//! calls that follow), `response_item` (messages, reasoning, tool calls
//! and their outputs), `event_msg` and `compacted` (codex-rs
//! `protocol/src/protocol.rs`, `RolloutItem`).
//!
//! A model call ends at each `event_msg` of type `token_count` whose
//! `info` is new: its usage is `info.last_token_usage` (the call's own;
//! `total_token_usage` is the session's running sum, and summing it would
//! multiply the traffic by tens). Codex writes the same `info` again when
//! a response's rate limits arrive; a `token_count` whose
//! `total_token_usage` has not changed is that repeat, not a call. Input
//! is `input_tokens`, which includes `cached_input_tokens` (kept as
//! `observed.cached_tokens`); output is `output_tokens`, which includes
//! `reasoning_output_tokens`. Tool calls (`function_call`,
//! `custom_tool_call`, `web_search_call`, `local_shell_call`) are the
//! model's answer, not model calls.
//!
//! A call starts at the time of the last line before its answer that was
//! not one (the `turn_context` written as the request is built, the tool
//! output or user message it answers) and ends at its `token_count`. A
//! `compacted` line starts the context anew.
//!
//! Subagents: a thread Codex spawns is a rollout of its own whose
//! `session_meta` names its parent (`source.subagent.thread_spawn.
//! parent_thread_id`, codex-rs `SessionSource::SubAgent`); newer releases
//! also give the root session as `session_id` beside the thread's `id`.
//! Its calls are the root session's, as the agent named by the thread's
//! id (see [`agents`]). A thread forked from its parent begins with a copy
//! of the parent's rollout (its `session_meta`, its events, token counts
//! included, written at the fork): those lines, from a second
//! `session_meta` of another id until the child's own first turn starts
//! (a `task_started` while the copied turn that spawned it is still
//! open, or one written a second or more after the copy began: a fork of
//! an idle thread), are the parent's calls, read in the parent's own
//! rollout, and are left out here.
//!
//! --keep-messages: each call's new input items, in OpenAI's chat form
//! (`message_mode` `"delta"`): user messages as `user`, developer
//! messages as `system`, tool outputs as `tool` messages under their
//! `call_id`.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Value, json};

use super::agents::{self, Call};
use super::{Ctx, Head};
use crate::error::{Location, Result};

/// The copy of a parent's lines a forked thread begins with is written at
/// once, its lines all stamped within this of its first.
const COPY_WINDOW_NS: i64 = 1_000_000_000;

/// A Codex rollout: `{timestamp, type, payload}` lines.
pub fn sniff(head: &Head) -> bool {
    head.starts_with("{")
        && head.contains("\"payload\"")
        && head.contains_any(&[
            "\"type\":\"session_meta\"",
            "\"type\":\"turn_context\"",
            "\"type\":\"response_item\"",
        ])
}

/// The session's running totals as the last new `token_count` gave them.
#[derive(Clone, Copy, Default, PartialEq)]
struct Totals {
    input: u64,
    cached: u64,
    output: u64,
    total: u64,
}

/// Read one rollout.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    if !source.ends_with(".jsonl") && &*source != "<stdin>" {
        agents::not_a_session(ctx, &source, "a Codex rollout (.jsonl)");
        return Ok(());
    }
    let keep = ctx.keep_messages();
    let mut r = Rollout {
        session: agents::file_name(&source)
            .trim_end_matches(".jsonl")
            .to_string(),
        ..Rollout::default()
    };
    agents::each_object(reader, &source, ctx, |ctx, loc, line| {
        let said = r.line(&line, &loc, keep);
        if let Some((child, parent)) = r.parent.take() {
            ctx.agents.child_of(&child, &parent);
        }
        match said {
            Ok(Some(call)) => ctx.agents.add(call),
            Ok(None) => {}
            Err((field, msg)) => ctx.agents.damaged(&loc, format!("field `{field}`: {msg}")),
        }
    })
}

#[derive(Default)]
struct Rollout {
    session: String,
    /// The thread's own id, once its first `session_meta` gave it.
    own: Option<String>,
    /// A subagent's thread of a session whose root the log names.
    agent: Option<String>,
    /// (thread, parent thread) to tell the store, once.
    parent: Option<(String, String)>,
    /// Inside the parent's lines a forked thread begins with: when they
    /// were written, and the turns they opened and have not closed.
    inherited: Option<(i64, u32)>,
    model: Option<String>,
    epoch: u32,
    /// When the last line that was not part of an answer was written.
    last_ns: Option<i64>,
    totals: Option<Totals>,
    pending: Vec<Value>,
}

type LineError = (String, String);

fn err(field: &str, msg: impl Into<String>) -> LineError {
    (field.to_string(), msg.into())
}

impl Rollout {
    /// The thread's own `session_meta` (the first), or the parent's that a
    /// fork's copy of its lines begins with.
    fn session_meta(&mut self, payload: &Value, t: i64) {
        let Some(id) = payload.get("id").and_then(Value::as_str) else {
            return;
        };
        match &self.own {
            None => {
                self.own = Some(id.to_string());
                self.session = id.to_string();
                let root = payload
                    .get("session_id")
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty() && *r != id);
                let spawn = payload
                    .get("source")
                    .and_then(|s| s.get("subagent").or_else(|| s.get("sub_agent")))
                    .and_then(|s| s.get("thread_spawn"));
                let parent = spawn
                    .and_then(|s| s.get("parent_thread_id"))
                    .or_else(|| payload.get("parent_thread_id"))
                    .and_then(Value::as_str);
                if let Some(root) = root {
                    self.session = root.to_string();
                    self.agent = Some(id.to_string());
                } else if let Some(parent) = parent {
                    self.parent = Some((id.to_string(), parent.to_string()));
                }
                self.last_ns = Some(t);
            }
            Some(own) if own != id => self.inherited = Some((t, 0)),
            Some(_) => {}
        }
    }

    fn line(
        &mut self,
        line: &Value,
        loc: &Location,
        keep: bool,
    ) -> std::result::Result<Option<Call>, LineError> {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        let payload = line.get("payload").unwrap_or(&Value::Null);
        let t = agents::timestamp(line.get("timestamp")).map_err(|m| err("timestamp", m))?;
        let ptype = payload.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some((copied_at, open)) = self.inherited.as_mut() {
            match (kind, ptype) {
                // The thread's own first turn: one starting while the
                // copied turn that spawned it is open, or (a fork of an
                // idle thread, whose copied turns are all closed) one
                // written well after the copy was.
                ("event_msg", "task_started" | "turn_started")
                    if *open > 0 || t >= *copied_at + COPY_WINDOW_NS =>
                {
                    self.inherited = None;
                }
                ("event_msg", "task_started" | "turn_started") => *open += 1,
                ("event_msg", "task_complete" | "turn_complete" | "turn_aborted") => {
                    *open = open.saturating_sub(1);
                }
                _ => {}
            }
            if self.inherited.is_some() {
                return Ok(None);
            }
        }
        match kind {
            "session_meta" => self.session_meta(payload, t),
            "turn_context" => {
                if let Some(m) = payload.get("model").and_then(Value::as_str) {
                    self.model = Some(m.to_string());
                }
                self.last_ns = Some(t);
            }
            "compacted" => {
                self.epoch += 1;
                self.pending.clear();
                self.last_ns = Some(t);
            }
            "response_item" => match ptype {
                "message" => {
                    let role = payload.get("role").and_then(Value::as_str).unwrap_or("");
                    if role != "assistant" {
                        self.last_ns = Some(t);
                        if keep {
                            let role = if role == "developer" {
                                "system"
                            } else {
                                "user"
                            };
                            self.pending
                                .push(json!({"role": role, "content": text_of(payload)}));
                        }
                    }
                }
                "function_call_output" | "custom_tool_call_output" => {
                    self.last_ns = Some(t);
                    if keep {
                        let id = payload.get("call_id").and_then(Value::as_str).unwrap_or("");
                        let output = match payload.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            Some(Value::Object(o)) => o
                                .get("content")
                                .and_then(Value::as_str)
                                .map(str::to_string)
                                .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        self.pending
                            .push(json!({"role": "tool", "tool_call_id": id, "content": output}));
                    }
                }
                _ => {}
            },
            "event_msg" if ptype == "token_count" => {
                let Some(info) = payload.get("info").filter(|i| i.is_object()) else {
                    return Ok(None);
                };
                return self.token_count(info, t, loc, keep);
            }
            _ => {}
        }
        Ok(None)
    }

    /// A `token_count`: a call, unless it repeats the last one's.
    fn token_count(
        &mut self,
        info: &Value,
        t: i64,
        loc: &Location,
        keep: bool,
    ) -> std::result::Result<Option<Call>, LineError> {
        let totals = match info.get("total_token_usage") {
            Some(u) if u.is_object() => Some(usage(u, "payload.info.total_token_usage")?),
            _ => None,
        };
        if totals.is_some() && totals == self.totals {
            return Ok(None);
        }
        let last = match info.get("last_token_usage") {
            Some(u) if u.is_object() => usage(u, "payload.info.last_token_usage")?,
            // Releases before `last_token_usage`: the difference of totals.
            _ => match (totals, self.totals) {
                (Some(now), Some(before)) => Totals {
                    input: now.input.saturating_sub(before.input),
                    cached: now.cached.saturating_sub(before.cached),
                    output: now.output.saturating_sub(before.output),
                    total: now.total.saturating_sub(before.total),
                },
                (Some(now), None) => now,
                _ => return Err(err("payload.info.last_token_usage", "is missing")),
            },
        };
        if totals.is_some() {
            self.totals = totals;
        }
        let start = self.last_ns.unwrap_or(t).min(t);
        // The next call's request leaves after this answer at the earliest.
        self.last_ns = Some(t);
        Ok(Some(Call {
            loc: loc.clone(),
            session: self.session.clone(),
            agent: self.agent.clone(),
            epoch: self.epoch,
            start_ns: start,
            end_ns: t,
            input: last.input,
            output: last.output,
            cached: Some(last.cached),
            model: self.model.clone(),
            key: None,
            copy: false,
            understated: false,
            messages: keep.then(|| std::mem::take(&mut self.pending)),
        }))
    }
}

/// A usage object's counts.
fn usage(u: &Value, at: &str) -> std::result::Result<Totals, LineError> {
    let get = |f: &str| agents::tokens(u, f).map_err(|m| err(&format!("{at}.{f}"), m));
    Ok(Totals {
        input: get("input_tokens")?
            .ok_or_else(|| err(&format!("{at}.input_tokens"), "is missing"))?,
        cached: get("cached_input_tokens")?.unwrap_or(0),
        output: get("output_tokens")?.unwrap_or(0),
        total: get("total_tokens")?.unwrap_or(0),
    })
}

/// The text of a Responses message's content parts.
fn text_of(payload: &Value) -> String {
    match payload.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
