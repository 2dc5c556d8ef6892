//! The requests kept until the input ends, and the records written from
//! them.
//!
//! The sort by start, the dependency graph and the session counts need
//! every call before the first record can be written. What they need of a
//! call is held in a small fixed [`Held`] (times, its session, group and
//! trace as interned names, where its bytes are); the rest of its record is
//! written out as JSON when the call is kept, into one arena. Only the
//! fields that depend on the whole input (`timestamp`, `hash_ids`
//! renumbered, `session_id`, `delay`, `after`) are written with the record.
//! A million calls held a `Request` of some 400 bytes and its strings each.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;

use serde_json::Value;

use super::hashing::Renumber;
use super::{Args, Fate, Request, Summary, graph, ms_value, ns_to_ms};
use crate::error::Result;
use crate::io::Output;
use crate::record::{self, Record};
use crate::text::format_ms;

/// No name, no hashes.
const NONE: u32 = u32::MAX;

/// Distinct names (sessions, traces), each stored once.
#[derive(Default)]
struct Names {
    index: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    fn get(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    fn len(&self) -> usize {
        self.names.len()
    }
}

/// The kept records' bytes, in chunks: one growing vector would copy
/// itself as it doubles, holding both copies at once (the peak of memory).
#[derive(Default)]
struct Arena {
    chunks: Vec<Vec<u8>>,
}

/// The size of a chunk (a record longer than this has a chunk of its own).
const CHUNK: usize = 1 << 20;

impl Arena {
    /// Store `bytes`; where they are, as chunk << 32 | offset.
    fn put(&mut self, bytes: &[u8]) -> u64 {
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            self.chunks.push(Vec::with_capacity(CHUNK.max(bytes.len())));
        }
        let chunk = self.chunks.len() - 1;
        let last = &mut self.chunks[chunk];
        let offset = last.len();
        last.extend_from_slice(bytes);
        ((chunk as u64) << 32) | offset as u64
    }

    fn get(&self, at: u64, len: usize) -> &[u8] {
        let offset = (at & u64::from(u32::MAX)) as usize;
        &self.chunks[(at >> 32) as usize][offset..offset + len]
    }
}

/// One kept call: what the sort, the graph and the sessions read, and
/// where the rest of its record is.
struct Held {
    start_ns: i64,
    end_ns: Option<i64>,
    /// Its bytes in the arena: the fields before `hash_ids`
    /// (`input_length`, `output_length`), those after the session's
    /// (`model` to `observed`), then its id as JSON (for others' `after`).
    at: u64,
    head_len: u32,
    tail_len: u32,
    /// 0: no id.
    id_len: u32,
    /// Its block hashes in the hash arena (`hashes_len` NONE: none).
    hashes_at: usize,
    hashes_len: u32,
    session: u32,
    group: u32,
    trace: u32,
    /// A source record passed through (Mooncake): only its timestamp
    /// changes.
    passthrough: Option<Box<Record<'static>>>,
}

impl Held {
    fn has_id(&self) -> bool {
        self.id_len > 0
    }

    fn bytes<'a>(&self, arena: &'a Arena) -> &'a [u8] {
        let len = self.head_len as usize + self.tail_len as usize + self.id_len as usize;
        arena.get(self.at, len)
    }

    fn head<'a>(&self, arena: &'a Arena) -> &'a [u8] {
        &self.bytes(arena)[..self.head_len as usize]
    }

    fn tail<'a>(&self, arena: &'a Arena) -> &'a [u8] {
        &self.bytes(arena)[self.head_len as usize..][..self.tail_len as usize]
    }

    fn id<'a>(&self, arena: &'a Arena) -> &'a [u8] {
        &self.bytes(arena)[self.head_len as usize + self.tail_len as usize..]
    }
}

/// The calls kept so far, in the order read, and the count of those left
/// out by reason.
pub(super) struct Kept {
    calls: Vec<Held>,
    /// One record's bytes while they are written.
    bytes: Vec<u8>,
    arena: Arena,
    hashes: Vec<u64>,
    names: Names,
    /// Sessions (by name) that are sessions only where they repeat
    /// ([`Request::session_if_repeated`]).
    if_repeated: std::collections::HashSet<u32>,
    pub(super) dropped: BTreeMap<&'static str, u64>,
    keep_failed: bool,
    keep_cache_hits: bool,
    keep_messages: bool,
}

impl Kept {
    pub(super) fn new(args: &Args) -> Kept {
        Kept {
            calls: Vec::new(),
            bytes: Vec::new(),
            arena: Arena::default(),
            hashes: Vec::new(),
            names: Names::default(),
            if_repeated: std::collections::HashSet::new(),
            dropped: BTreeMap::new(),
            keep_failed: args.keep_failed,
            keep_cache_hits: args.keep_cache_hits,
            keep_messages: args.keep_messages,
        }
    }

    /// Room for `n` more calls (a reader that knows how many it hands on).
    pub(super) fn reserve(&mut self, n: usize) {
        self.calls.reserve(n);
    }

    /// Keep a request, or count it as left out (failed, cache hit, not a
    /// model call, no output).
    pub(super) fn push(&mut self, mut req: Request) {
        let reason = match req.fate {
            Fate::Failed if !self.keep_failed => Some("failed"),
            Fate::CacheHit if !self.keep_cache_hits => Some("cache hit"),
            Fate::NotGeneration => Some("not model calls"),
            Fate::Unreplayable => Some("with messages no server takes"),
            Fate::Ok if req.output_length == 0 && req.passthrough.is_none() => {
                if self.keep_failed {
                    if !req.embedding {
                        req.fate = Fate::Failed;
                    }
                    None
                } else {
                    Some(req.no_output.unwrap_or("with no output tokens"))
                }
            }
            _ => None,
        };
        if let Some(why) = reason {
            *self.dropped.entry(why).or_insert(0) += 1;
            return;
        }
        self.bytes.clear();
        let mut held = Held {
            start_ns: req.start_ns,
            end_ns: req.end_ns,
            at: 0,
            head_len: 0,
            tail_len: 0,
            id_len: 0,
            hashes_at: 0,
            hashes_len: NONE,
            session: req.session.as_deref().map_or(NONE, |s| self.names.id(s)),
            group: req.group.as_deref().map_or(NONE, |s| self.names.id(s)),
            trace: req.trace_id.as_deref().map_or(NONE, |s| self.names.id(s)),
            passthrough: None,
        };
        if req.session_if_repeated && held.session != NONE {
            self.if_repeated.insert(held.session);
        }
        if let Some(rec) = req.passthrough.take() {
            held.passthrough = Some(Box::new(rec));
        } else {
            let messages = self.messages(&req);
            self.write_head(&req, messages.is_some());
            held.head_len = self.bytes.len() as u32;
            if messages.is_none() {
                if let Some(hashes) = &req.hashes {
                    held.hashes_at = self.hashes.len();
                    held.hashes_len = hashes.len() as u32;
                    self.hashes.extend_from_slice(hashes);
                }
            }
            let tail = self.bytes.len();
            self.write_tail(&req, messages);
            held.tail_len = (self.bytes.len() - tail) as u32;
        }
        if let Some(id) = &req.id {
            let from = self.bytes.len();
            json(&mut self.bytes, id);
            held.id_len = (self.bytes.len() - from) as u32;
        }
        held.at = self.arena.put(&self.bytes);
        self.calls.push(held);
    }

    /// The messages (and tools) written instead of `input_length` and
    /// `hash_ids`, under --keep-messages.
    fn messages(&self, req: &Request) -> Option<(Value, Option<Value>)> {
        if !self.keep_messages {
            return None;
        }
        req.prompt.as_ref().and_then(|p| {
            p.messages
                .clone()
                .map(|m| (m, p.tools.clone()))
                .or_else(|| {
                    p.text.as_ref().map(|t| {
                        (
                            serde_json::json!([{"role": "user", "content": t}]),
                            p.tools.clone(),
                        )
                    })
                })
        })
    }

    /// `"input_length":N,"output_length":N` (the first without messages).
    fn write_head(&mut self, req: &Request, has_messages: bool) {
        let out = &mut self.bytes;
        if !has_messages {
            let _ = write!(out, "\"input_length\":{},", req.input_length.unwrap_or(0));
        }
        let output_length = match req.fate {
            Fate::Ok => req.output_length.max(1),
            _ if req.output_length > 0 => req.output_length,
            _ => req.max_tokens.filter(|&n| n > 0).unwrap_or(1),
        };
        let _ = write!(out, "\"output_length\":{output_length}");
    }

    /// `model`, `messages`, `tools`, `id` and `observed`, each where the
    /// request has it, comma-separated (nothing when it has none).
    fn write_tail(&mut self, req: &Request, messages: Option<(Value, Option<Value>)>) {
        let out = &mut self.bytes;
        let mut key = Members::default();
        if let Some(model) = &req.model {
            key.open(out, "model");
            json(out, model);
        }
        let has_messages = messages.is_some();
        if let Some((m, tools)) = messages {
            key.open(out, "messages");
            json(out, &m);
            if let Some(t) = tools {
                key.open(out, "tools");
                json(out, &t);
            }
        }
        if let Some(id) = &req.id {
            key.open(out, "id");
            json(out, id);
        }
        let o = &req.observed;
        let status = match req.fate {
            Fate::Ok => "ok",
            Fate::Failed => "error",
            Fate::CacheHit => "cache_hit",
            Fate::NotGeneration | Fate::Unreplayable => unreachable!("always dropped"),
        };
        let prompt_tokens = o
            .prompt_tokens
            .or(if has_messages { req.input_length } else { None });
        let any = prompt_tokens.is_some()
            || o.completion_tokens.is_some()
            || o.ttft_ms.is_some()
            || o.e2e_ms.is_some()
            || o.cached_tokens.is_some()
            || !o.counted.is_empty();
        if !any && req.fate == Fate::Ok {
            return;
        }
        key.open(out, "observed");
        out.push(b'{');
        let mut field = Members::default();
        if let Some(n) = prompt_tokens {
            field.open(out, "prompt_tokens");
            let _ = write!(out, "{n}");
        }
        if let Some(n) = o.completion_tokens {
            field.open(out, "completion_tokens");
            let _ = write!(out, "{n}");
        }
        if let Some(ms) = o.ttft_ms {
            field.open(out, "ttft_ms");
            json(out, &ms_value(ms));
        }
        if let Some(ms) = o.e2e_ms {
            field.open(out, "e2e_ms");
            json(out, &ms_value(ms));
        }
        if let Some(n) = o.cached_tokens {
            field.open(out, "cached_tokens");
            let _ = write!(out, "{n}");
        }
        if !o.counted.is_empty() {
            field.open(out, "counted");
            json(out, &o.counted);
        }
        field.open(out, "status");
        json(out, status);
        out.push(b'}');
    }

    /// Calls without a session take the one their trace record gave.
    pub(super) fn sessions_of_traces(&mut self, sessions: &HashMap<String, String>) {
        if sessions.is_empty() {
            return;
        }
        for i in 0..self.calls.len() {
            let c = &self.calls[i];
            if c.session != NONE || c.trace == NONE {
                continue;
            }
            if let Some(s) = sessions.get(self.names.get(c.trace)) {
                let s = self.names.id(s);
                self.calls[i].session = s;
            }
        }
    }
}

/// `value` as JSON, as `Record::set` writes it.
fn json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serializing a value to a Vec");
}

/// Sort, rebase, find sessions and dependencies, and write the records.
pub(super) fn write(args: &Args, kept: Kept, out: &mut Output) -> Result<Summary> {
    let Kept {
        mut calls,
        arena,
        hashes,
        names,
        if_repeated,
        dropped,
        ..
    } = kept;
    let mut summary = Summary {
        dropped,
        ..Summary::default()
    };
    super::sort_by_start(&mut calls, |c| c.start_ns);

    if !args.no_graph {
        for c in calls.iter_mut().filter(|c| c.group == NONE) {
            c.group = if c.session != NONE {
                c.session
            } else {
                c.trace
            };
        }
    }
    // The calls of one dependency group form one session: `delay` (for
    // readers of the trace that do not follow `after`) is within it.
    let mut group_sizes = vec![0u32; names.len()];
    for c in calls.iter().filter(|c| c.has_id() && c.end_ns.is_some()) {
        if c.group != NONE {
            group_sizes[c.group as usize] += 1;
        }
    }
    for c in &mut calls {
        if c.group != NONE && group_sizes[c.group as usize] > 1 {
            c.session = c.group;
        }
    }
    drop(group_sizes);
    let mut counts = vec![0u32; names.len()];
    for c in calls.iter().filter(|c| c.session != NONE) {
        counts[c.session as usize] += 1;
    }
    // A session the log names is one even with a single call, unless its
    // id is one the logger gives every call.
    for (s, n) in counts.iter_mut().enumerate() {
        if *n == 1 && if_repeated.contains(&(s as u32)) {
            *n = 0;
        }
    }
    drop(if_repeated);
    summary.sessions = counts.iter().filter(|&&n| n > 0).count() as u64;

    let origin = if args.absolute {
        0
    } else {
        calls.first().map_or(0, |c| c.start_ns)
    };
    if let (Some(first), Some(last)) = (calls.first(), calls.last()) {
        summary.span_ms = ns_to_ms(last.start_ns - first.start_ns);
    }

    // The dependency graph over the calls that have a group, an id and an
    // end (its nodes, in the calls' order).
    let mut index = Vec::new();
    let mut nodes = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        if let (true, true, Some(end)) = (c.group != NONE, c.has_id(), c.end_ns) {
            index.push(i);
            nodes.push(graph::Node {
                group: names.get(c.group),
                start_ns: c.start_ns,
                end_ns: end,
            });
        }
    }
    let deps = graph::derive(&nodes);
    drop(nodes);

    let mut last_end: Vec<Option<Option<i64>>> = vec![None; names.len()];
    let mut renumber = Renumber::default();
    let mut buf = Vec::with_capacity(4096);
    let mut node = 0;
    for i in 0..calls.len() {
        // Moved out, as the record is written only once.
        let pass = calls[i].passthrough.take();
        let c = &calls[i];
        let session = c.session != NONE && counts[c.session as usize] > 0;
        let dep = if index.get(node) == Some(&i) {
            node += 1;
            deps[node - 1].as_ref()
        } else {
            None
        };
        let timestamp = ns_to_ms(c.start_ns - origin);
        buf.clear();
        if let Some(d) = dep {
            if session {
                last_end[c.session as usize] = Some(c.end_ns);
            }
            let mut after = Vec::with_capacity(2 + d.after.len() * 20);
            after.push(b'[');
            for (k, &j) in d.after.iter().enumerate() {
                if k > 0 {
                    after.push(b',');
                }
                after.extend_from_slice(calls[index[j]].id(&arena));
            }
            after.push(b']');
            let delay = ns_to_ms(d.gap_ns.max(0));
            match pass {
                Some(rec) => {
                    let mut rec = passthrough(*rec, timestamp);
                    let after = String::from_utf8(after).expect("JSON is UTF-8");
                    rec.set_raw("after", record::raw(after));
                    rec.set_ms("delay", delay);
                    rec.write_json(&mut buf);
                }
                None => {
                    record(&mut buf, c, &arena, &hashes, &mut renumber, timestamp);
                    if session {
                        buf.extend_from_slice(b",\"session_id\":");
                        json(&mut buf, names.get(c.session));
                    }
                    tail(&mut buf, c, &arena);
                    buf.extend_from_slice(b",\"after\":");
                    buf.extend_from_slice(&after);
                    buf.extend_from_slice(b",\"delay\":");
                    buf.extend_from_slice(format_ms(delay).as_bytes());
                    buf.push(b'}');
                }
            }
            out.write_line(&buf)?;
            summary.written += 1;
            continue;
        }
        let delay = if session {
            let prev = last_end[c.session as usize].replace(c.end_ns);
            match prev {
                Some(Some(end)) => Some(ns_to_ms((c.start_ns - end).max(0))),
                _ => None,
            }
        } else {
            None
        };
        match pass {
            Some(rec) => passthrough(*rec, timestamp).write_json(&mut buf),
            None => {
                record(&mut buf, c, &arena, &hashes, &mut renumber, timestamp);
                if session {
                    buf.extend_from_slice(b",\"session_id\":");
                    json(&mut buf, names.get(c.session));
                    if let Some(d) = delay {
                        buf.extend_from_slice(b",\"delay\":");
                        buf.extend_from_slice(format_ms(d).as_bytes());
                    }
                }
                tail(&mut buf, c, &arena);
                buf.push(b'}');
            }
        }
        out.write_line(&buf)?;
        summary.written += 1;
    }
    Ok(summary)
}

/// A passed-through record at its new time (a later turn without a
/// timestamp is timed by its `delay`).
fn passthrough(mut rec: Record<'static>, timestamp: f64) -> Record<'static> {
    if rec.contains("timestamp") {
        rec.set_ms("timestamp", timestamp);
    }
    rec
}

/// The record's start, up to `hash_ids`: `{"timestamp":…,…`.
fn record(
    buf: &mut Vec<u8>,
    c: &Held,
    arena: &Arena,
    hashes: &[u64],
    renumber: &mut Renumber,
    timestamp: f64,
) {
    buf.extend_from_slice(b"{\"timestamp\":");
    buf.extend_from_slice(format_ms(timestamp).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(c.head(arena));
    if c.hashes_len != NONE {
        let own = &hashes[c.hashes_at..c.hashes_at + c.hashes_len as usize];
        let ids: Vec<u64> = own.iter().map(|&h| renumber.id(h)).collect();
        buf.extend_from_slice(b",\"hash_ids\":");
        json(buf, &ids);
    }
}

/// The fields from `model` to `observed`.
fn tail(buf: &mut Vec<u8>, c: &Held, arena: &Arena) {
    if c.tail_len > 0 {
        buf.push(b',');
        buf.extend_from_slice(c.tail(arena));
    }
}

/// The members of one JSON object being written: each `"name":`, with
/// the comma before every one but the first.
#[derive(Default)]
struct Members {
    written: bool,
}

impl Members {
    fn open(&mut self, out: &mut Vec<u8>, name: &str) {
        if self.written {
            out.push(b',');
        }
        self.written = true;
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
    }
}
