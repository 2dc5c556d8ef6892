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
//!
//! Beyond the memory budget (`--memory`) the calls held so far are sorted
//! and written to a temporary file, a run ([`spill`]); at the end the runs
//! are merged. Counts over the whole input (sessions, dependency groups)
//! are taken in passes over the calls before the first record is written
//! ([`write`]), and the records are written by one streaming writer
//! whether the calls come from memory or from runs: the output is the
//! same byte for byte.

mod spill;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;

use serde_json::Value;

use super::{Args, Fate, Request, ms_value};
use crate::error::Result;
use crate::record::Record;
use crate::text::format_ms;

pub(super) use write::write;

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
    /// Its session is one only where it repeats (an id the logger gives
    /// every call).
    session_if_repeated: bool,
    passthrough: Option<Box<Record<'static>>>,
}

impl Held {
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

    /// The call as the writer takes it (without its passed-through record).
    fn call<'a>(&self, arena: &'a Arena, hashes: &'a [u64], names: &'a Names) -> write::Call<'a> {
        let name = |id: u32| (id != NONE).then(|| names.get(id));
        write::Call {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            session: name(self.session),
            group: name(self.group),
            trace: name(self.trace),
            head: self.head(arena),
            hashes: (self.hashes_len != NONE)
                .then(|| &hashes[self.hashes_at..self.hashes_at + self.hashes_len as usize]),
            tail: self.tail(arena),
            id: self.id(arena),
            session_if_repeated: self.session_if_repeated,
            passthrough: None,
        }
    }
}

/// What a held call costs beyond its [`Held`]: its names' share, a
/// passed-through record (a guess: they are small).
const NAME_BYTES: usize = 96;
const PASSTHROUGH_BYTES: usize = 512;

/// The calls kept so far, in the order read, and the count of those left
/// out by reason.
pub(super) struct Kept {
    calls: Vec<Held>,
    /// One record's bytes while they are written.
    bytes: Vec<u8>,
    arena: Arena,
    hashes: Vec<u64>,
    names: Names,
    /// Passed-through records held.
    passthroughs: usize,
    /// The calls sorted and written out so far.
    runs: spill::Runs,
    /// Memory the held calls may take before they are written out.
    budget: usize,
    pub(super) dropped: BTreeMap<&'static str, u64>,
    keep_failed: bool,
    keep_cache_hits: bool,
    keep_messages: bool,
    no_graph: bool,
}

impl Kept {
    pub(super) fn new(args: &Args) -> Kept {
        Kept {
            calls: Vec::new(),
            bytes: Vec::new(),
            arena: Arena::default(),
            hashes: Vec::new(),
            names: Names::default(),
            passthroughs: 0,
            runs: spill::Runs::default(),
            budget: usize::try_from(args.memory).unwrap_or(usize::MAX),
            dropped: BTreeMap::new(),
            keep_failed: args.keep_failed,
            keep_cache_hits: args.keep_cache_hits,
            keep_messages: args.keep_messages,
            no_graph: args.no_graph,
        }
    }

    /// Room for `n` more calls (a reader that knows how many it hands on).
    pub(super) fn reserve(&mut self, n: usize) {
        self.calls
            .reserve(n.min(self.budget / std::mem::size_of::<Held>()));
    }

    /// About what the held calls take in memory.
    fn size(&self) -> usize {
        self.calls.len() * std::mem::size_of::<Held>()
            + self.arena.chunks.len() * CHUNK
            + self.hashes.len() * 8
            + self.names.len() * NAME_BYTES
            + self.passthroughs * PASSTHROUGH_BYTES
    }

    /// Sort the calls held and write them out as a run, to hold none.
    fn spill(&mut self) -> Result<()> {
        super::sort_by_start(&mut self.calls, |c| c.start_ns);
        let mut run = self.runs.create()?;
        for c in &mut self.calls {
            let mut call = c.call(&self.arena, &self.hashes, &self.names);
            call.passthrough = c.passthrough.take();
            run.put(&call)?;
        }
        self.runs.finish(run)?;
        self.calls.clear();
        self.arena = Arena::default();
        self.hashes = Vec::new();
        self.names = Names::default();
        self.passthroughs = 0;
        Ok(())
    }

    /// Whether a request will be kept (see [`Kept::push`]).
    pub(super) fn keeps(&self, req: &Request) -> bool {
        match req.fate {
            Fate::Failed => self.keep_failed,
            Fate::CacheHit => self.keep_cache_hits,
            Fate::NotGeneration | Fate::Unreplayable => false,
            Fate::Ok => req.output_length > 0 || req.passthrough.is_some() || self.keep_failed,
        }
    }

    /// Keep a request, or count it as left out (failed, cache hit, not a
    /// model call, no output).
    pub(super) fn push(&mut self, req: Request) -> Result<()> {
        self.hold(req);
        if self.size() > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn hold(&mut self, mut req: Request) {
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
            session_if_repeated: req.session_if_repeated,
            passthrough: None,
        };
        if let Some(rec) = req.passthrough.take() {
            held.passthrough = Some(Box::new(rec));
            self.passthroughs += 1;
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

    /// `model`, `messages`, `tools`, `id`, `observed`, and the source's
    /// own `after` (not under --no-graph) and `delay`, each where the
    /// request has it, comma-separated (nothing when it has none).
    fn write_tail(&mut self, req: &Request, messages: Option<(Value, Option<Value>)>) {
        let mut key = Members::default();
        self.write_fields(req, messages, &mut key);
        let out = &mut self.bytes;
        if !req.after.is_empty() && !self.no_graph {
            key.open(out, "after");
            json(out, &req.after);
        }
        if let Some(ms) = req.delay_ms {
            key.open(out, "delay");
            out.extend_from_slice(format_ms(ms.max(0.0)).as_bytes());
        }
    }

    fn write_fields(
        &mut self,
        req: &Request,
        messages: Option<(Value, Option<Value>)>,
        key: &mut Members,
    ) {
        let out = &mut self.bytes;
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
            if req.delta {
                key.open(out, "message_mode");
                json(out, "delta");
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
}

/// `value` as JSON, as `Record::set` writes it.
fn json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serializing a value to a Vec");
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
