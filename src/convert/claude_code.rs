//! Claude Code sessions, as Claude Code keeps them under
//! `~/.claude/projects/<project>/`: `<session>.jsonl`, one JSON object per
//! line (`type` `user`, `assistant`, `system`, `progress`, `summary`, …,
//! with `sessionId`, `timestamp`, `isSidechain`), and each subagent's
//! lines in `<session>/subagents/agent-<id>.jsonl` (older releases:
//! `agent-<id>.jsonl` beside the session), whose lines carry `agentId`.
//!
//! One model call is one API request, not one line: Claude Code writes an
//! `assistant` line per content block and repeats the request's
//! `message.usage` on each; the lines of a request share `requestId`
//! (Amazon Bedrock sessions have none: `message.id` then). The prompt is
//! `input_tokens` + `cache_creation_input_tokens` +
//! `cache_read_input_tokens` (`input_tokens` alone is the uncached tail),
//! and `cache_read_input_tokens` is `observed.cached_tokens`. The output
//! is the largest `output_tokens` of the request's lines: the final count
//! is on the line that states a `stop_reason`; a request none of whose
//! lines does kept only the count its stream started with, and is counted
//! as understated. Lines of model `<synthetic>` (errors Claude Code shows
//! as answers) are not calls.
//!
//! Times: a line's `timestamp` is when it was written. A call starts when
//! the line before its first block was written (the user's message or the
//! tool result it answers: the request left then), and ends at its last
//! block. A `Task` (or `Agent`) tool call whose result names an `agentId`
//! spawned that subagent. A subagent's calls copied into the parent as
//! `progress` lines (`agent_progress`) are the same calls as in its own
//! file (one call per request id); where its file was not given, the
//! copies are all there is, and the subagent is said to be incomplete. A
//! `compact_boundary` starts the context anew; the compaction's own call
//! (its file among the subagents') is a call of the session.
//!
//! --keep-messages: each call's new `user` messages (the user's words, the
//! tool results), in Anthropic's content blocks, which the common mapping
//! turns into OpenAI's chat form (`message_mode` `"delta"`).

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Value, json};

use super::agents::{self, Call};
use super::{Ctx, Head};
use crate::error::{Location, Result};

/// A Claude Code session file: JSONL lines with `sessionId` and Claude
/// Code's message threading.
pub fn sniff(head: &Head) -> bool {
    head.starts_with("{")
        && head.contains("\"sessionId\"")
        && head.contains_any(&["\"parentUuid\"", "\"leafUuid\"", "\"isSidechain\""])
}

/// The calls of one agent in one file, as its lines are read.
#[derive(Default)]
struct Agent {
    /// When the last line that was not an answer was written.
    last_ns: Option<i64>,
    epoch: u32,
    /// The new user messages since the last call (--keep-messages).
    pending: Vec<Value>,
}

/// What is read of one file.
struct File {
    keep: bool,
    /// Agents by name (`None`: the main agent).
    agents: HashMap<Option<String>, Agent>,
    calls: Vec<Call>,
    /// Request key → its call, for the later lines of a request.
    open: HashMap<(Option<String>, String), usize>,
    /// Tool-use id of a `Task` / `Agent` call → the key of its request.
    tasks: HashMap<String, String>,
    session: Option<String>,
}

/// Read one Claude Code file.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    if !source.ends_with(".jsonl") && &*source != "<stdin>" {
        agents::not_a_session(ctx, &source, "a Claude Code session (.jsonl)");
        return Ok(());
    }
    let mut f = File {
        keep: ctx.keep_messages(),
        agents: HashMap::new(),
        calls: Vec::new(),
        open: HashMap::new(),
        tasks: HashMap::new(),
        session: None,
    };
    agents::each_object(reader, &source, ctx, |ctx, loc, line| {
        if let Err((field, msg)) = f.line(&line, &loc, false, None, ctx) {
            ctx.agents.damaged(&loc, format!("field `{field}`: {msg}"));
        }
    })?;
    for call in f.calls {
        ctx.agents.add(call);
    }
    Ok(())
}

type LineError = (String, String);

fn err(field: &str, msg: impl Into<String>) -> LineError {
    (field.to_string(), msg.into())
}

impl File {
    /// One line (or, `copy`, a line a `progress` line carries for
    /// `agent`).
    fn line(
        &mut self,
        line: &Value,
        loc: &Location,
        copy: bool,
        agent: Option<String>,
        ctx: &mut Ctx,
    ) -> std::result::Result<(), LineError> {
        if let Some(s) = line.get("sessionId").and_then(Value::as_str) {
            self.session.get_or_insert_with(|| s.to_string());
        }
        let agent = agent.or_else(|| {
            let sidechain = line.get("isSidechain").and_then(Value::as_bool) == Some(true);
            match line.get("agentId").and_then(Value::as_str) {
                Some(a) => Some(a.to_string()),
                None if sidechain => Some("sidechain".to_string()),
                None => None,
            }
        });
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "assistant" => self.answer(line, loc, copy, agent, ctx),
            "user" => self.user(line, agent, ctx),
            "system" => {
                let state = self.agents.entry(agent).or_default();
                if line.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
                    state.epoch += 1;
                    state.pending.clear();
                }
                if let Ok(t) = agents::timestamp(line.get("timestamp")) {
                    state.last_ns = Some(t);
                }
                Ok(())
            }
            "progress" => {
                let Some(data) = line.get("data") else {
                    return Ok(());
                };
                if data.get("type").and_then(Value::as_str) != Some("agent_progress") {
                    return Ok(());
                }
                let Some(sub) = data.get("agentId").and_then(Value::as_str) else {
                    return Err(err("data.agentId", "is missing"));
                };
                if let (Some(session), Some(tool)) = (
                    self.session.clone(),
                    line.get("parentToolUseID").and_then(Value::as_str),
                ) && let Some(key) = self.tasks.get(tool)
                {
                    ctx.agents.spawned(&session, sub, key);
                }
                match data.get("message") {
                    Some(inner @ Value::Object(_)) => self
                        .line(inner, loc, true, Some(sub.to_string()), ctx)
                        .map_err(|(f, m)| (format!("data.message.{f}"), m)),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// A `user` line: the user's words or tool results (a later call's new
    /// messages), and the subagent a `Task` result names.
    fn user(
        &mut self,
        line: &Value,
        agent: Option<String>,
        ctx: &mut Ctx,
    ) -> std::result::Result<(), LineError> {
        let t = agents::timestamp(line.get("timestamp")).map_err(|m| err("timestamp", m))?;
        let message = line.get("message");
        let content = message.and_then(|m| m.get("content"));
        if let (Some(spawned), Some(session), Some(Value::Array(blocks))) = (
            line.get("toolUseResult")
                .and_then(|r| r.get("agentId"))
                .and_then(Value::as_str),
            self.session.clone(),
            content,
        ) {
            for b in blocks {
                if let Some(key) = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .and_then(|id| self.tasks.get(id))
                {
                    ctx.agents.spawned(&session, spawned, key);
                }
            }
        }
        let keep = self.keep;
        let state = self.agents.entry(agent).or_default();
        state.last_ns = Some(t);
        if keep && let Some(content) = content {
            state
                .pending
                .push(json!({"role": "user", "content": content.clone()}));
        }
        Ok(())
    }

    /// An `assistant` line: a new call, or another block of one.
    fn answer(
        &mut self,
        line: &Value,
        loc: &Location,
        copy: bool,
        agent: Option<String>,
        ctx: &mut Ctx,
    ) -> std::result::Result<(), LineError> {
        let Some(message) = line.get("message").filter(|m| m.is_object()) else {
            return Err(err("message", "is missing"));
        };
        let model = message.get("model").and_then(Value::as_str);
        if model == Some("<synthetic>") {
            return Ok(());
        }
        let t = agents::timestamp(line.get("timestamp")).map_err(|m| err("timestamp", m))?;
        let Some(usage) = message.get("usage").filter(|u| u.is_object()) else {
            ctx.agents.no_tokens += 1;
            return Ok(());
        };
        let count = |field: &str| {
            agents::tokens(usage, field).map_err(|m| err(&format!("message.usage.{field}"), m))
        };
        let input = count("input_tokens")?
            .ok_or_else(|| err("message.usage.input_tokens", "is missing"))?;
        let created = count("cache_creation_input_tokens")?.unwrap_or(0);
        let read = count("cache_read_input_tokens")?;
        let output = count("output_tokens")?.unwrap_or(0);
        let stopped = message.get("stop_reason").is_some_and(|s| !s.is_null());
        let key = line
            .get("requestId")
            .and_then(Value::as_str)
            .or_else(|| message.get("id").and_then(Value::as_str))
            .map(str::to_string);
        if let Value::Array(blocks) = message.get("content").unwrap_or(&Value::Null)
            && let Some(k) = &key
        {
            for b in blocks {
                let name = b.get("name").and_then(Value::as_str);
                if b.get("type").and_then(Value::as_str) == Some("tool_use")
                    && matches!(name, Some("Task" | "Agent"))
                    && let Some(id) = b.get("id").and_then(Value::as_str)
                {
                    self.tasks.insert(id.to_string(), k.clone());
                }
            }
        }
        if let Some(k) = &key
            && let Some(&i) = self.open.get(&(agent.clone(), k.clone()))
        {
            let c = &mut self.calls[i];
            c.end_ns = c.end_ns.max(t);
            c.output = c.output.max(output);
            c.understated &= !stopped;
            return Ok(());
        }
        let session = self
            .session
            .clone()
            .ok_or_else(|| err("sessionId", "is missing"))?;
        let keep = self.keep;
        let state = self.agents.entry(agent.clone()).or_default();
        let start = state.last_ns.unwrap_or(t).min(t);
        let messages = keep.then(|| std::mem::take(&mut state.pending));
        if let Some(k) = &key {
            self.open
                .insert((agent.clone(), k.clone()), self.calls.len());
        }
        self.calls.push(Call {
            loc: loc.clone(),
            session,
            agent,
            epoch: state.epoch,
            start_ns: start,
            end_ns: t,
            input: input + created + read.unwrap_or(0),
            output,
            cached: read,
            model: model.map(str::to_string),
            key,
            copy,
            understated: !stopped,
            messages,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Lines as Claude Code writes them (the fields read here; times in
    /// seconds of 2026-01-14T19:20).
    fn at(s: u32) -> String {
        format!("2026-01-14T19:20:{s:02}.000Z")
    }

    fn user(s: u32, extra: &str) -> String {
        format!(
            r#"{{"type":"user","sessionId":"S","isSidechain":false,"timestamp":"{}","message":{{"role":"user","content":"go"}}{extra}}}"#,
            at(s)
        )
    }

    fn answer(s: u32, req: &str, usage: (u64, u64, u64, u64), stop: &str, extra: &str) -> String {
        let (i, cc, cr, o) = usage;
        format!(
            r#"{{"type":"assistant","sessionId":"S","isSidechain":false,"timestamp":"{}","requestId":"{req}","message":{{"id":"msg_{req}","model":"claude-x","role":"assistant","content":[{extra}],"stop_reason":{stop},"usage":{{"input_tokens":{i},"cache_creation_input_tokens":{cc},"cache_read_input_tokens":{cr},"output_tokens":{o}}}}}}}"#,
            at(s)
        )
    }

    fn ctx() -> Ctx {
        Ctx::new(&super::super::Args::parse_from(["trace-convert"]))
    }

    fn read_text(ctx: &mut Ctx, name: &str, lines: &[String]) {
        let text = lines.join("\n");
        read(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            name.into(),
            ctx,
        )
        .unwrap();
    }

    #[test]
    fn one_call_per_request_its_output_the_final_count_and_a_compaction_starts_anew() {
        let mut c = ctx();
        read_text(
            &mut c,
            "S.jsonl",
            &[
                user(0, ""),
                // Two blocks of one request: the second has the final count.
                answer(1, "r1", (3, 100, 0, 5), "null", ""),
                answer(2, "r1", (3, 100, 0, 40), r#""tool_use""#, ""),
                user(3, ""),
                // An error Claude Code shows as an answer: not a call.
                r#"{"type":"assistant","sessionId":"S","timestamp":"2026-01-14T19:20:04.000Z","message":{"model":"<synthetic>","content":[]}}"#.to_string(),
                // Only the stream's first count was kept.
                answer(5, "r2", (1, 10, 103, 7), "null", ""),
                r#"{"type":"system","subtype":"compact_boundary","sessionId":"S","timestamp":"2026-01-14T19:20:06.000Z"}"#.to_string(),
                user(7, ""),
                answer(8, "r3", (2, 50, 0, 9), r#""end_turn""#, ""),
            ],
        );
        let calls = c.agents.calls();
        type Seen = (u64, u64, Option<u64>, bool, u32, i64, i64);
        let got: Vec<Seen> = calls
            .iter()
            .map(|c| {
                (
                    c.input,
                    c.output,
                    c.cached,
                    c.understated,
                    c.epoch,
                    c.start_ns / 1_000_000_000 % 60,
                    c.end_ns / 1_000_000_000 % 60,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                // 3 + 100 + 0; started at the user's line (0 s).
                (103, 40, Some(0), false, 0, 0, 2),
                // 1 + 10 + 103; from the tool result (3 s), not the
                // synthetic line.
                (114, 7, Some(103), true, 0, 3, 5),
                (52, 9, Some(0), false, 1, 7, 8),
            ]
        );
    }

    #[test]
    fn a_subagent_s_copied_calls_give_way_to_its_own_file_and_its_spawner_is_named() {
        let mut c = ctx();
        let task = r#"{"type":"tool_use","id":"tu1","name":"Task","input":{}}"#;
        let progress = r#"{"type":"progress","sessionId":"S","parentToolUseID":"tu1","timestamp":"2026-01-14T19:20:02.000Z","data":{"type":"agent_progress","agentId":"ab","message":{"type":"assistant","timestamp":"2026-01-14T19:20:02.000Z","requestId":"s1","message":{"model":"claude-y","content":[],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":6}}}}}"#;
        let result = r#","toolUseResult":{"agentId":"ab"}"#;
        let mut done = user(3, result);
        done = done.replace(
            r#""content":"go""#,
            r#""content":[{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]"#,
        );
        read_text(
            &mut c,
            "S.jsonl",
            &[
                user(0, ""),
                answer(1, "r1", (1, 10, 0, 20), r#""tool_use""#, task),
                progress.to_string(),
                done,
                answer(4, "r2", (1, 0, 40, 5), r#""end_turn""#, ""),
            ],
        );
        assert_eq!(c.agents.calls().len(), 3);
        assert!(c.agents.calls()[1].copy);
        assert_eq!(c.agents.spawner("S", "ab"), Some("r1"));
        // The subagent's own file: the same request, once.
        let own = r#"{"type":"assistant","sessionId":"S","isSidechain":true,"agentId":"ab","timestamp":"2026-01-14T19:20:02.000Z","requestId":"s1","message":{"model":"claude-y","content":[],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":6}}}"#;
        read_text(&mut c, "S/subagents/agent-ab.jsonl", &[own.to_string()]);
        let calls = c.agents.calls();
        assert_eq!(calls.len(), 3);
        let sub = &calls[1];
        assert_eq!(
            (sub.agent.as_deref(), sub.copy, sub.input),
            (Some("ab"), false, 5)
        );
    }

    #[test]
    fn a_line_cut_short_or_of_another_shape_is_counted_and_the_rest_read() {
        let mut c = ctx();
        let mut cut = answer(2, "r2", (1, 1, 1, 1), "null", "");
        cut.truncate(60);
        read_text(
            &mut c,
            "S.jsonl",
            &[
                user(0, ""),
                answer(1, "r1", (1, 2, 3, 4), r#""end_turn""#, ""),
                answer(2, "r9", (1, 2, 3, 4), r#""end_turn""#, "")
                    .replace(r#""input_tokens":1"#, r#""input_tokens":"one""#),
                cut,
            ],
        );
        assert_eq!(c.agents.damaged, 2);
        assert_eq!(c.agents.calls().len(), 1);
    }
}
