//! Coding agents' own session logs (Claude Code, Codex CLI, Gemini CLI):
//! what their three readers share. Each reader turns its lines into
//! [`Call`]s, one per model call, into the run's [`Store`]; once every
//! input was read, [`finish`] makes each session's calls into records.
//!
//! A session's calls are grouped by agent (its main agent, and each
//! subagent), each in start order. Ids are `SESSION:N` for the main
//! agent's N-th call and `SESSION/AGENT:N` for a subagent's (the naming
//! the kv-cache-tester source uses, which trace-summarize reads to tell
//! the main agent's calls from the subagents'). A call waits (`after`)
//! for the call before it in its agent, `delay` from that call's end to
//! its start (the model's, the user's and the tools' time between); a
//! subagent's first call waits for the call that spawned it (where the
//! log says which, else the main agent's call that ended last before it
//! started), and the main agent's first call that starts once a subagent
//! ended joins it.
//!
//! `hash_ids` follow the conversation: a call's prompt begins with the one
//! before it in its agent (that call's answer and the new messages come
//! after), so consecutive calls share the full blocks of the earlier
//! prompt (see [`super::prefix`]); a subagent starts its own chain, and a
//! compaction (or a prompt shorter than the one before) starts it anew.
//! The provider's cache reads are kept as `observed.cached_tokens`, beside.
//!
//! Memory: a few hundred bytes per call (none of the text unless
//! --keep-messages), and a reader holds no more than one file's calls.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::{Args, Ctx, Prompt, Request, prefix};
use crate::cli;
use crate::error::{Location, Result};
use crate::text::plural;

/// One model call as a log gives it.
#[derive(Clone, Debug)]
pub struct Call {
    pub loc: Location,
    pub session: String,
    /// `None` for the session's main agent.
    pub agent: Option<String>,
    /// Compactions before it in its agent: a new one starts the context anew.
    pub epoch: u32,
    /// When the request left (see each reader for the line it takes).
    pub start_ns: i64,
    /// When its answer was written.
    pub end_ns: i64,
    /// The whole prompt, cached part included.
    pub input: u64,
    /// Generated tokens, reasoning included.
    pub output: u64,
    /// Prompt tokens the provider's cache served.
    pub cached: Option<u64>,
    pub model: Option<String>,
    /// The log's request id: a call copied into another file is one call.
    pub key: Option<String>,
    /// Read from a copy (a subagent's call as its parent's file repeats it).
    pub copy: bool,
    /// The output count is the stream's first (the log kept no final one).
    pub understated: bool,
    /// What the call adds to its agent's conversation (--keep-messages),
    /// in OpenAI's chat form or one `chat::to_openai` maps to it.
    pub messages: Option<Vec<Value>>,
}

/// The calls of every input, and what the readers counted on the way.
#[derive(Default)]
pub struct Store {
    calls: Vec<Call>,
    /// A hash of (session, request key) → the call: 16 bytes a call where
    /// the strings would take a hundred.
    by_key: HashMap<u64, usize>,
    /// (session, agent) → the key of the call that spawned the agent.
    spawns: HashMap<(String, String), String>,
    /// A subagent's own session id → its parent's (Codex keeps each
    /// spawned thread as a session of its own that names its parent).
    parents: HashMap<String, String>,
    since_ns: Option<i64>,
    until_ns: Option<i64>,
    /// Lines that could not be read (cut short, another version's shape).
    pub damaged: u64,
    /// Answers the log gives no token counts for.
    pub no_tokens: u64,
    /// Inputs that were not session files (left alone).
    pub not_sessions: u64,
}

impl Store {
    pub fn new(args: &Args) -> Store {
        Store {
            since_ns: args.since.map(|t| t.0),
            until_ns: args.until.map(|t| t.0),
            ..Store::default()
        }
    }

    /// A call read; a second call with the same key in a session is the
    /// same call: a copy gives way to the original.
    pub fn add(&mut self, call: Call) {
        if let Some(key) = &call.key {
            let k = crate::hash::stable_hash(
                crate::hash::stable_hash(0xca11, call.session.as_bytes()),
                key.as_bytes(),
            );
            if let Some(&i) = self.by_key.get(&k) {
                if self.calls[i].copy && !call.copy {
                    self.calls[i] = call;
                }
                return;
            }
            self.by_key.insert(k, self.calls.len());
        }
        self.calls.push(call);
    }

    /// The log says which call spawned `agent`.
    pub fn spawned(&mut self, session: &str, agent: &str, key: &str) {
        self.spawns
            .entry((session.to_string(), agent.to_string()))
            .or_insert_with(|| key.to_string());
    }

    /// The calls of session `child` are a subagent's of session `parent`.
    pub fn child_of(&mut self, child: &str, parent: &str) {
        if child != parent {
            self.parents.insert(child.to_string(), parent.to_string());
        }
    }

    /// The session a session's calls belong to: its parents' followed to
    /// the one that has none (`None`: it has none itself).
    fn root(&self, session: &str) -> Option<String> {
        let mut at = self.parents.get(session)?;
        // A log naming a circle of parents must not loop.
        for _ in 0..self.parents.len() {
            match self.parents.get(at) {
                Some(up) if up != session => at = up,
                _ => break,
            }
        }
        Some(at.clone())
    }

    /// The calls read so far (tests).
    #[cfg(test)]
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// The spawner named for an agent (tests).
    #[cfg(test)]
    pub fn spawner(&self, session: &str, agent: &str) -> Option<&str> {
        self.spawns
            .get(&(session.to_string(), agent.to_string()))
            .map(String::as_str)
    }

    /// A line that could not be read: said where, and counted.
    pub fn damaged(&mut self, loc: &Location, why: impl std::fmt::Display) {
        self.damaged += 1;
        cli::warn_at(loc, format!("{why}; line left out"));
    }

    /// One line of a log as the JSON object it should be; `None` for a
    /// blank line, or for one that is not an object (told as damaged: the
    /// other lines still count).
    pub fn object(&mut self, loc: &Location, text: &str) -> Option<Value> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => Some(v),
            Ok(_) => {
                self.damaged(loc, "expected a JSON object");
                None
            }
            Err(e) => {
                self.damaged(loc, format!("not a whole JSON line (cut short?): {e}"));
                None
            }
        }
    }
}

/// Each line of a JSONL log that is a JSON object, with where it is from
/// (the others told as damaged), given to `each` with the run's context.
pub fn each_object(
    mut reader: Box<dyn std::io::BufRead + Send>,
    source: &std::sync::Arc<str>,
    ctx: &mut Ctx,
    mut each: impl FnMut(&mut Ctx, Location, Value),
) -> Result<()> {
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        if super::container::read_line(&mut reader, &mut buf, source)? == 0 {
            return Ok(());
        }
        n += 1;
        let loc = Location::new(source.clone(), n);
        if let Some(line) = ctx.agents.object(&loc, &String::from_utf8_lossy(&buf)) {
            each(ctx, loc, line);
        }
    }
}

/// The time a `--since` / `--until` value names: epoch nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct When(pub i64);

/// clap value parser for `--since` / `--until`: a date-time with a zone,
/// or a date (midnight UTC).
pub fn when(text: &str) -> std::result::Result<When, String> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_string()
    };
    match crate::time::parse_datetime(&full) {
        Some(t) if t.has_zone => Ok(When(t.epoch_ns)),
        Some(_) => Err(format!(
            "`{text}` has no time zone; add Z (UTC) or an offset such as +02:00"
        )),
        None => Err(format!(
            "`{text}` is not a date (2026-03-01) or a date-time (2026-03-01T09:30:00Z)"
        )),
    }
}

/// The sources these flags apply to.
pub const SOURCES: [&str; 3] = ["claude-code", "codex", "gemini-cli"];

/// A date-time of a log line: epoch nanoseconds.
pub fn timestamp(v: Option<&Value>) -> std::result::Result<i64, String> {
    match v {
        Some(Value::String(s)) => match crate::time::parse_datetime(s) {
            Some(t) => Ok(t.epoch_ns),
            None => Err(format!(
                "expected a date-time, found {}",
                crate::error::quote_value(&format!("{s:?}"))
            )),
        },
        Some(other) => Err(format!(
            "expected a date-time, found {}",
            crate::error::quote_value(&other.to_string())
        )),
        None => Err("is missing".to_string()),
    }
}

/// A token count of a log line: a whole number ≥ 0, or absent.
pub fn tokens(obj: &Value, field: &str) -> std::result::Result<Option<u64>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            format!(
                "expected a token count, found {}",
                crate::error::quote_value(&v.to_string())
            )
        }),
    }
}

/// The name of a file, without its directories.
pub fn file_name(source: &str) -> &str {
    source.rsplit(['/', '\\']).next().unwrap_or(source)
}

/// An input that is not one of this source's session files: said, counted
/// and left alone (a folder of an agent's data holds other files too).
pub fn not_a_session(ctx: &mut Ctx, source: &str, what: &str) {
    ctx.agents.not_sessions += 1;
    cli::note(format!("{source}: not {what}; left out"));
}

/// The last step of the three sources: every session's calls into records.
pub fn finish(ctx: &mut Ctx, _rate: Option<f64>) -> Result<()> {
    let mut store = std::mem::take(&mut ctx.agents);
    // A subagent kept as a session of its own joins its root's, as one of
    // its agents named by its own id.
    let roots: Vec<Option<String>> = store.calls.iter().map(|c| store.root(&c.session)).collect();
    for (c, root) in store.calls.iter_mut().zip(roots) {
        if let Some(root) = root {
            let own = std::mem::replace(&mut c.session, root);
            c.agent.get_or_insert(own);
        }
    }
    let Store {
        calls,
        spawns,
        parents: _,
        since_ns,
        until_ns,
        damaged,
        no_tokens,
        not_sessions: _,
        by_key,
    } = store;
    drop(by_key);
    let mut sessions: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    for c in calls {
        sessions.entry(c.session.clone()).or_default().push(c);
    }
    let mut counts = Counts::default();
    let mut padding: Option<Padding> = None;
    // One session at a time: its records go to the sort as they are made
    // (its chains' seeds are its own, so nothing of it is kept after).
    while let Some((session, calls)) = sessions.pop_first() {
        let mut chains = prefix::Chains::default();
        let mut records = session_records(&session, calls, &spawns, &mut chains, &mut counts);
        // In order of start: a call's dependencies (the call before it,
        // a subagent's spawner, the subagent a call joins) start before it,
        // so every `after` names a record kept earlier, as the trace's rule
        // is.
        records.sort_by_key(|(_, start)| *start);
        let inside =
            |start: i64| since_ns.is_none_or(|s| start >= s) && until_ns.is_none_or(|u| start < u);
        let total = records.len();
        let kept: Vec<Request> = records
            .into_iter()
            .filter(|(_, start)| inside(*start))
            .map(|(r, _)| r)
            .collect();
        counts.outside += (total - kept.len()) as u64;
        let kept_ids: std::collections::HashSet<String> =
            kept.iter().filter_map(|r| r.id.clone()).collect();
        // Each kept call's (input, output), for the growth of the next.
        let mut sizes: HashMap<String, (u64, u64)> = HashMap::new();
        for mut req in kept {
            // A call whose dependencies were cut away by --since / --until
            // is placed by its timestamp.
            let before = req.after.len();
            req.after.retain(|a| kept_ids.contains(a));
            if req.after.is_empty() && before > 0 {
                req.delay_ms = None;
            }
            if req.prompt.is_some() {
                if padding.is_none() {
                    padding = Some(Padding::new(ctx.tokenizer_name())?);
                }
                let padding = padding.as_mut().expect("made above");
                if !req.delta {
                    padding.pad(&mut req)?;
                } else if let Some(&(input, output)) = req
                    .after
                    .first()
                    .filter(|a| same_agent(a, req.id.as_deref().unwrap_or("")))
                    .and_then(|a| sizes.get(a))
                {
                    // The call before in its agent comes first in `after`
                    // (unless --since cut it away).
                    let grown = req.input_length.unwrap_or(0).saturating_sub(input + output);
                    padding.pad_delta(&mut req, grown)?;
                }
            }
            if let Some(id) = &req.id {
                sizes.insert(
                    id.clone(),
                    (req.input_length.unwrap_or(0), req.output_length),
                );
            }
            ctx.push(req)?;
        }
    }
    counts.report(damaged, no_tokens);
    if let Some(p) = padding.as_ref().filter(|p| p.padded > 0) {
        cli::note(format!(
            "the system prompt and tool definitions are not in these logs: a made-up system \
             message begins the first prompt of {} conversation{} ({} tokens in all), bringing \
             each to its recorded size",
            p.padded,
            plural(p.padded),
            p.tokens
        ));
    }
    if let Some(p) = padding.as_ref().filter(|p| p.grown > 0) {
        cli::note(format!(
            "{} later call{} of these conversations grew by more than their new messages hold \
             under --tokenizer (what the log leaves out: thinking, tool definitions sent again, \
             another tokenizer's counts): made-up words end their new messages ({} tokens in \
             all), bringing each prompt to its recorded size",
            p.grown,
            plural(p.grown),
            p.grown_tokens
        ));
    }
    Ok(())
}

/// Under --keep-messages, the first prompt of each conversation made up to
/// its recorded size: the logs hold the messages, not the system prompt
/// and tool definitions the agent sent before them, so a system message of
/// synthesized words (under --tokenizer) stands in for what is missing.
/// Later calls carry that conversation on, and grow as the recorded ones
/// did by the answer and their new messages.
struct Padding {
    tokenizer: crate::tokenizer::Tokenizer,
    synth: crate::prompts::Synthesizer,
    padded: u64,
    tokens: u64,
    /// Later calls whose new messages were made up to their growth.
    grown: u64,
    grown_tokens: u64,
}

/// The text of chat messages, as the padding counts it: the words a
/// tokenizer sees, not their JSON (escapes would count as tokens).
fn messages_text(list: &[Value]) -> String {
    let mut text = String::new();
    for m in list {
        if !text.is_empty() {
            text.push('\n');
        }
        if let Some(c) = m.get("content") {
            content_text(c, &mut text);
        }
    }
    text
}

/// A message content's text: a string, or the text, results and tool
/// inputs of its parts (Anthropic's blocks, OpenAI's parts).
fn content_text(c: &Value, out: &mut String) {
    match c {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                content_text(p, out);
            }
        }
        Value::Object(o) => {
            if let Some(t) = o.get("text").and_then(Value::as_str) {
                out.push_str(t);
            } else if let Some(inner) = o.get("content") {
                content_text(inner, out);
            } else if let Some(input) = o.get("input") {
                out.push_str(&input.to_string());
            }
        }
        _ => {}
    }
}

impl Padding {
    fn new(tokenizer: &str) -> Result<Padding> {
        let tokenizer = crate::tokenizer::Tokenizer::load(tokenizer)?;
        let synth = crate::prompts::Synthesizer::new(
            &tokenizer,
            crate::prompts::DEFAULT_SEED,
            crate::record::DEFAULT_BLOCK_SIZE,
            None,
        )?;
        Ok(Padding {
            tokenizer,
            synth,
            padded: 0,
            tokens: 0,
            grown: 0,
            grown_tokens: 0,
        })
    }

    fn pad(&mut self, req: &mut Request) -> Result<()> {
        let want = req.input_length.unwrap_or(0);
        if let Some((list, words, missing)) = self.short_of(req, want, 0xa9)? {
            list.insert(0, serde_json::json!({"role": "system", "content": words}));
            self.padded += 1;
            self.tokens += missing;
        }
        Ok(())
    }

    /// A later call's new messages (delta form) made up to `grown`, the
    /// tokens its prompt grew by beyond the call before's prompt and
    /// answer: made-up words end its last message.
    fn pad_delta(&mut self, req: &mut Request, grown: u64) -> Result<()> {
        if let Some((list, words, missing)) = self.short_of(req, grown, 0xa8)?
            && let Some(last) = list.last_mut()
        {
            append_words(last, words);
            self.grown += 1;
            self.grown_tokens += missing;
        }
        Ok(())
    }

    /// A record's messages when they hold fewer than `want` tokens, with
    /// made-up words for the difference (drawn from the record's id and
    /// `salt`) and how many tokens those are.
    fn short_of<'r>(
        &mut self,
        req: &'r mut Request,
        want: u64,
        salt: u64,
    ) -> Result<Option<(&'r mut Vec<Value>, String, u64)>> {
        let key = crate::hash::stable_hash(salt, req.id.as_deref().unwrap_or("").as_bytes());
        let Some(Value::Array(list)) = req.prompt.as_mut().and_then(|p| p.messages.as_mut()) else {
            return Ok(None);
        };
        let have = self.tokenizer.count(&messages_text(list))? as u64;
        if want <= have {
            return Ok(None);
        }
        let missing = want - have;
        Ok(Some((
            list,
            self.synth.prompt_text(missing, None, key),
            missing,
        )))
    }
}

/// Two ids (`SESSION:N`, `SESSION/AGENT:N`) of one agent's calls.
fn same_agent(a: &str, b: &str) -> bool {
    a.rsplit_once(':').map(|(p, _)| p) == b.rsplit_once(':').map(|(p, _)| p)
}

/// Made-up words at the end of a message: of its text, or of its last
/// part's (a tool result's own content, so that the message keeps its
/// shape in every API's form).
fn append_words(message: &mut Value, words: String) {
    fn onto(text: &mut String, words: &str) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(words);
    }
    let Some(content) = message.get_mut("content") else {
        message["content"] = Value::String(words);
        return;
    };
    match content {
        Value::String(s) => onto(s, &words),
        Value::Array(parts) => match parts.last_mut() {
            Some(Value::Object(part)) if part.get("text").is_some_and(Value::is_string) => {
                if let Some(Value::String(t)) = part.get_mut("text") {
                    onto(t, &words);
                }
            }
            Some(part @ Value::Object(_)) if part.get("content").is_some() => {
                append_words(part, words);
            }
            _ => parts.push(serde_json::json!({"type": "text", "text": words})),
        },
        other => *other = Value::String(words),
    }
}

/// What the last step says at the end.
#[derive(Default)]
struct Counts {
    outside: u64,
    understated: u64,
    incomplete: Vec<String>,
}

impl Counts {
    fn report(&self, damaged: u64, no_tokens: u64) {
        if self.understated > 0 {
            cli::note(format!(
                "the output_length of {} call{} is the count the stream started with (the log \
                 kept no final count): understated",
                self.understated,
                plural(self.understated)
            ));
        }
        for what in &self.incomplete {
            cli::warn(format!(
                "subagent {what} is incomplete: its own file was not given, only the calls its \
                 parent's file copies"
            ));
        }
        if no_tokens > 0 {
            cli::note(format!(
                "{no_tokens} answer{} without token counts left out",
                plural(no_tokens)
            ));
        }
        if damaged > 0 {
            cli::warn(format!(
                "{damaged} line{} could not be read and {} left out (see above); every other \
                 call was converted",
                plural(damaged),
                if damaged == 1 { "was" } else { "were" }
            ));
        }
        if self.outside > 0 {
            cli::note(format!(
                "{} call{} outside --since/--until left out",
                self.outside,
                plural(self.outside)
            ));
        }
    }
}

/// A call placed in its session: its id, and what it waits for.
struct Placed {
    call: Call,
    id: String,
    after: Vec<String>,
    /// End of the latest call it waits for.
    after_end_ns: Option<i64>,
    /// The first call of its conversation (a subagent's first, the first
    /// after a compaction): its messages are the whole conversation.
    fresh: bool,
}

/// One session's records, each with its start (epoch ns).
fn session_records(
    session: &str,
    calls: Vec<Call>,
    spawns: &HashMap<(String, String), String>,
    chains: &mut prefix::Chains,
    counts: &mut Counts,
) -> Vec<(Request, i64)> {
    // Agents: the main one first, then the subagents by name.
    let mut agents: BTreeMap<Option<String>, Vec<Call>> = BTreeMap::new();
    for c in calls {
        agents.entry(c.agent.clone()).or_default().push(c);
    }
    let mut placed: Vec<Vec<Placed>> = Vec::new();
    for (agent, mut calls) in agents {
        calls.sort_by_key(|c| c.start_ns);
        if let Some(name) = &agent
            && calls.iter().all(|c| c.copy)
        {
            counts
                .incomplete
                .push(format!("{name} of session {session}"));
        }
        let prefix = match &agent {
            None => session.to_string(),
            Some(a) => format!("{session}/{a}"),
        };
        let mut list: Vec<Placed> = Vec::with_capacity(calls.len());
        for (n, call) in calls.into_iter().enumerate() {
            let prev = list.last();
            let fresh = prev.is_none_or(|p| p.call.epoch != call.epoch);
            let (after, after_end_ns) = match prev {
                Some(p) => (vec![p.id.clone()], Some(p.call.end_ns)),
                None => (Vec::new(), None),
            };
            list.push(Placed {
                id: format!("{prefix}:{n}"),
                call,
                after,
                after_end_ns,
                fresh,
            });
        }
        placed.push(list);
    }
    // Subagents fan out from the call that spawned them and join the main
    // agent's next call.
    if let Some((main, subs)) = placed.split_first_mut()
        && main.first().is_some_and(|p| p.call.agent.is_none())
    {
        for sub in subs.iter_mut() {
            let (Some(first), Some(last)) = (sub.first(), sub.last()) else {
                continue;
            };
            let agent = first.call.agent.clone().unwrap_or_default();
            let start = first.call.start_ns;
            let end = last.call.end_ns;
            let last_id = last.id.clone();
            let named = spawns
                .get(&(session.to_string(), agent))
                .and_then(|key| main.iter().position(|p| p.call.key.as_deref() == Some(key)));
            let spawner = named.or_else(|| {
                main.iter()
                    .enumerate()
                    .filter(|(_, p)| p.call.end_ns <= start)
                    .max_by_key(|(_, p)| p.call.end_ns)
                    .map(|(i, _)| i)
            });
            if let Some(i) = spawner {
                let s = &main[i];
                let (id, end_ns) = (s.id.clone(), s.call.end_ns);
                sub[0].after = vec![id];
                sub[0].after_end_ns = Some(end_ns);
                let from = i + 1;
                if let Some(j) = (from..main.len()).find(|&j| main[j].call.start_ns >= end) {
                    main[j].after.push(last_id);
                    main[j].after_end_ns = Some(main[j].after_end_ns.unwrap_or(end).max(end));
                }
            }
        }
    }
    let mut out = Vec::new();
    for list in placed {
        for p in list {
            let chain = format!(
                "{session}/{}#{}",
                p.call.agent.as_deref().unwrap_or(""),
                p.call.epoch
            );
            let blocks = if p.fresh {
                // A new conversation shares nothing with what went before.
                chains.blocks(&chain, "", p.call.input, 0)
            } else {
                chains.grown(&chain, p.call.input)
            };
            if p.call.understated {
                counts.understated += 1;
            }
            let start = p.call.start_ns;
            out.push((request(p, session, blocks), start));
        }
    }
    out
}

/// The record of a placed call.
fn request(p: Placed, session: &str, blocks: Vec<u64>) -> Request {
    let c = p.call;
    let mut req = Request::new(c.loc, c.start_ns);
    req.input_length = Some(c.input);
    req.output_length = c.output;
    req.session = Some(session.to_string());
    req.model = c.model;
    req.id = Some(p.id);
    req.observed.completion_tokens = Some(c.output);
    req.observed.cached_tokens = c.cached;
    let e2e = (c.end_ns - c.start_ns) as f64 / 1e6;
    if e2e >= 0.0 {
        req.observed.e2e_ms = Some(e2e);
    }
    req.hashes = Some(blocks);
    if let Some(messages) = c.messages {
        req.prompt = Some(Box::new(Prompt {
            messages: Some(Value::Array(messages)),
            ..Prompt::default()
        }));
        req.delta = !p.fresh;
    }
    if let Some(end) = p.after_end_ns {
        req.delay_ms = Some(((c.start_ns - end) as f64 / 1e6).max(0.0));
    }
    req.after = p.after;
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(agent: Option<&str>, start_s: i64, end_s: i64, input: u64) -> Call {
        Call {
            loc: Location::new("t".into(), 1),
            session: "s".into(),
            agent: agent.map(str::to_string),
            epoch: 0,
            start_ns: start_s * 1_000_000_000,
            end_ns: end_s * 1_000_000_000,
            input,
            output: 10,
            cached: None,
            model: None,
            key: None,
            copy: false,
            understated: false,
            messages: None,
        }
    }

    #[test]
    fn a_subagent_fans_out_from_its_spawner_and_joins_the_next_main_call() {
        // Main calls 0-1 s, 2-3 s (spawns a at 4 s), 20-21 s; a's calls
        // 4-6 s and 7-9 s. The spawner is named by key.
        let mut calls = vec![
            call(None, 0, 1, 1000),
            call(None, 2, 3, 1600),
            call(None, 20, 21, 2000),
            call(Some("a"), 4, 6, 700),
            call(Some("a"), 7, 9, 900),
        ];
        calls[1].key = Some("k1".into());
        let mut spawns = HashMap::new();
        spawns.insert(("s".to_string(), "a".to_string()), "k1".to_string());
        let mut counts = Counts::default();
        let out = session_records(
            "s",
            calls,
            &spawns,
            &mut prefix::Chains::default(),
            &mut counts,
        );
        let got: Vec<(String, Vec<String>, Option<f64>)> = out
            .into_iter()
            .map(|(r, _)| (r.id.unwrap(), r.after, r.delay_ms))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("s:0".into(), s(&[]), None),
                // From 1 s to 2 s.
                ("s:1".into(), s(&["s:0"]), Some(1000.0)),
                // Joins a (ended 9 s) at 20 s: 11 s after the later end.
                ("s:2".into(), s(&["s:1", "s/a:1"]), Some(11000.0)),
                // From its spawner's end (3 s) to 4 s.
                ("s/a:0".into(), s(&["s:1"]), Some(1000.0)),
                ("s/a:1".into(), s(&["s/a:0"]), Some(1000.0)),
            ]
        );
    }

    #[test]
    fn consecutive_calls_share_the_earlier_prompt_s_full_blocks_and_a_compaction_none() {
        // 1,100 then 1,600 tokens: floor(1100 / 512) = 2 blocks shared;
        // after a compaction (epoch 1) nothing is.
        let mut calls = vec![
            call(None, 0, 1, 1100),
            call(None, 2, 3, 1600),
            call(None, 4, 5, 1700),
        ];
        calls[2].epoch = 1;
        let mut counts = Counts::default();
        let out = session_records(
            "s",
            calls,
            &HashMap::new(),
            &mut prefix::Chains::default(),
            &mut counts,
        );
        let h: Vec<Vec<u64>> = out.iter().map(|(r, _)| r.hashes.clone().unwrap()).collect();
        assert_eq!((h[0].len(), h[1].len(), h[2].len()), (3, 4, 4));
        assert_eq!(h[1][..2], h[0][..2]);
        assert!(!h[0].contains(&h[1][2]));
        assert!(h[2].iter().all(|x| !h[0].contains(x) && !h[1].contains(x)));
    }

    #[test]
    fn a_copy_gives_way_to_the_call_in_its_own_file() {
        let mut store = Store::default();
        let mut copy = call(Some("a"), 4, 6, 700);
        copy.key = Some("r1".into());
        copy.copy = true;
        let mut own = copy.clone();
        own.copy = false;
        own.input = 701;
        store.add(copy.clone());
        store.add(own);
        store.add(copy);
        assert_eq!(store.calls.len(), 1);
        assert_eq!((store.calls[0].input, store.calls[0].copy), (701, false));
    }

    #[test]
    fn a_threads_root_is_its_parents_followed_to_the_top() {
        let mut store = Store::default();
        store.child_of("c", "b");
        store.child_of("b", "a");
        store.child_of("a", "a");
        assert_eq!(store.root("c").as_deref(), Some("a"));
        assert_eq!(store.root("b").as_deref(), Some("a"));
        assert_eq!(store.root("a"), None);
        // A circle ends rather than loops.
        store.child_of("x", "y");
        store.child_of("y", "x");
        assert!(store.root("x").is_some());
    }

    #[test]
    fn since_and_until_take_dates_and_zoned_date_times() {
        assert_eq!(when("1970-01-02"), Ok(When(86_400_000_000_000)));
        assert_eq!(when("1970-01-01T00:00:01+00:00"), Ok(When(1_000_000_000)));
        assert!(when("1970-01-01T00:00:01").is_err());
        assert!(when("yesterday").is_err());
    }
}
