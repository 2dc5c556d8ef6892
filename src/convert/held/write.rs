//! The records written from the calls kept, in start order: counts over
//! the whole input first (which groups have a graph, which sessions have
//! more than one call), then one streaming pass that rebases time, follows
//! each group's dependency graph and each session's last end, and writes.
//!
//! The passes take the calls from memory or from the runs on disk alike,
//! and the streaming pass holds only the groups and sessions still open:
//! what grows with the input is a count per distinct name (session, trace,
//! group), about 40 bytes each.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_128;

use super::{Arena, Held, Kept, Names, json};
use crate::convert::graph::Frontier;
use crate::convert::hashing::Renumber;
use crate::convert::{Args, Summary, ns_to_ms};
use crate::error::Result;
use crate::io::Output;
use crate::record::{self, Record};
use crate::text::format_ms;

/// One kept call as the writer takes it.
pub(super) struct Call<'a> {
    pub start_ns: i64,
    pub end_ns: Option<i64>,
    pub session: Option<&'a str>,
    pub group: Option<&'a str>,
    pub trace: Option<&'a str>,
    /// Its fields before `hash_ids` (`input_length`, `output_length`).
    pub head: &'a [u8],
    /// Its block hashes, before renumbering.
    pub hashes: Option<&'a [u64]>,
    /// Its fields after the session's (`model` to `observed`).
    pub tail: &'a [u8],
    /// Its id as JSON (for others' `after`); empty: none.
    pub id: &'a [u8],
    /// Its session is one only where it repeats (an id the logger gives
    /// every call); other sessions the log names are sessions with one call.
    pub session_if_repeated: bool,
    /// A source record passed through (Mooncake): only its timestamp
    /// changes. Given in the writing pass only.
    pub passthrough: Option<Box<Record<'static>>>,
}

impl Call<'_> {
    /// A node of its group's dependency graph, given a group.
    fn has_node(&self) -> bool {
        !self.id.is_empty() && self.end_ns.is_some()
    }
}

/// The calls, from memory or from runs.
pub(super) trait Calls {
    /// Every call, in any order, without passed-through records.
    fn each(&mut self, f: &mut dyn FnMut(&Call)) -> Result<()>;
    /// Every call, in start order (ties: the order read).
    fn sorted(&mut self, f: &mut dyn FnMut(Call) -> Result<()>) -> Result<()>;
}

/// The calls held in memory.
struct Memory {
    calls: Vec<Held>,
    arena: Arena,
    hashes: Vec<u64>,
    names: Names,
}

impl Calls for Memory {
    fn each(&mut self, f: &mut dyn FnMut(&Call)) -> Result<()> {
        for c in &self.calls {
            f(&c.call(&self.arena, &self.hashes, &self.names));
        }
        Ok(())
    }

    fn sorted(&mut self, f: &mut dyn FnMut(Call) -> Result<()>) -> Result<()> {
        crate::convert::sort_by_start(&mut self.calls, |c| c.start_ns);
        for c in &mut self.calls {
            let mut call = c.call(&self.arena, &self.hashes, &self.names);
            // Moved out, as the record is written only once.
            call.passthrough = c.passthrough.take();
            f(call)?;
        }
        Ok(())
    }
}

/// Sort, rebase, find sessions and dependencies, and write the records.
/// Calls without a session take the one their trace record gave
/// (`trace_sessions`).
pub fn write(
    args: &Args,
    kept: Kept,
    trace_sessions: &HashMap<String, String>,
    out: &mut Output,
) -> Result<Summary> {
    let summary = Summary {
        dropped: kept.dropped.clone(),
        ..Summary::default()
    };
    let mut kept = kept;
    if kept.runs.is_empty() {
        let Kept {
            calls,
            arena,
            hashes,
            names,
            ..
        } = kept;
        let memory = Memory {
            calls,
            arena,
            hashes,
            names,
        };
        return write_calls(args, memory, trace_sessions, summary, out);
    }
    if !kept.calls.is_empty() {
        kept.spill()?;
    }
    let runs = std::mem::take(&mut kept.runs);
    // What reading held goes before the counts take their room.
    drop(kept);
    write_calls(args, runs.merged()?, trace_sessions, summary, out)
}

fn write_calls(
    args: &Args,
    mut calls: impl Calls,
    trace_sessions: &HashMap<String, String>,
    summary: Summary,
    out: &mut Output,
) -> Result<Summary> {
    let names = Resolve {
        trace_sessions,
        graph: !args.no_graph,
    };
    let mut counts: HashMap<u128, Count> = HashMap::new();
    calls.each(&mut |c| {
        if let (true, Some(g)) = (c.has_node(), names.group(c)) {
            counts.entry(key(g)).or_default().nodes += 1;
        }
    })?;
    calls.each(&mut |c| {
        if let Some(s) = names.session(c, &counts) {
            let count = counts.entry(key(s)).or_default();
            count.calls += 1;
            count.named |= !c.session_if_repeated;
        }
    })?;
    let mut writer = Writer {
        args,
        names,
        summary,
        counts,
        groups: HashMap::new(),
        last_end: HashMap::new(),
        renumber: Renumber::default(),
        buf: Vec::with_capacity(4096),
        first: None,
        order: 0,
    };
    writer.summary.sessions = writer.counts.values().filter(|c| c.is_session()).count() as u64;
    calls.sorted(&mut |c| writer.write(c, out))?;
    Ok(writer.summary)
}

/// A name's key in the counts: names are not held, only their hashes.
fn key(name: &str) -> u128 {
    xxh3_128(name.as_bytes())
}

impl Count {
    /// A session: one the log named, or one that repeats.
    fn is_session(&self) -> bool {
        self.calls > 1 || self.named
    }
}

/// What the whole input says of one name.
#[derive(Clone, Copy, Default)]
struct Count {
    /// Calls of the group with an id and an end (a graph needs two).
    nodes: u32,
    /// Calls of the session.
    calls: u32,
    /// The log named the session for one of them (not an id it gives
    /// every call): a session even with one call.
    named: bool,
    /// Of those, the ones written so far.
    nodes_written: u32,
    calls_written: u32,
}

/// The session and group of a call.
struct Resolve<'m> {
    trace_sessions: &'m HashMap<String, String>,
    /// Calls without a group of their own take their session's, else
    /// their trace's (not under --no-graph).
    graph: bool,
}

impl<'m> Resolve<'m> {
    /// Its own session, else its trace's.
    fn own_session<'x>(&self, c: &Call<'x>) -> Option<&'x str>
    where
        'm: 'x,
    {
        c.session.or_else(|| {
            c.trace
                .and_then(|t| self.trace_sessions.get(t))
                .map(String::as_str)
        })
    }

    /// The dependency group.
    fn group<'x>(&self, c: &Call<'x>) -> Option<&'x str>
    where
        'm: 'x,
    {
        c.group.or_else(|| {
            self.graph
                .then(|| self.own_session(c).or(c.trace))
                .flatten()
        })
    }

    /// The session: the calls of one dependency group form one session,
    /// so that `delay` (for readers of the trace that do not follow
    /// `after`) is within it.
    fn session<'x>(&self, c: &Call<'x>, counts: &HashMap<u128, Count>) -> Option<&'x str>
    where
        'm: 'x,
    {
        match self.group(c) {
            Some(g) if counts.get(&key(g)).is_some_and(|n| n.nodes > 1) => Some(g),
            _ => self.own_session(c),
        }
    }
}

/// The streaming pass.
struct Writer<'a, 'm> {
    args: &'a Args,
    names: Resolve<'m>,
    summary: Summary,
    counts: HashMap<u128, Count>,
    /// The graphs of the groups still open, with the ids of their calls.
    groups: HashMap<u128, Frontier<Box<[u8]>>>,
    /// The last end of each session still open (None: the last call had
    /// no end).
    last_end: HashMap<u128, Option<i64>>,
    renumber: Renumber,
    buf: Vec<u8>,
    /// The first call's start.
    first: Option<i64>,
    /// Calls written: the graphs' order.
    order: u64,
}

impl Writer<'_, '_> {
    fn write(&mut self, c: Call, out: &mut Output) -> Result<()> {
        let first = *self.first.get_or_insert(c.start_ns);
        let origin = if self.args.absolute { 0 } else { first };
        self.summary.span_ms = ns_to_ms(c.start_ns - first);
        let timestamp = ns_to_ms(c.start_ns - origin);
        let session = self
            .names
            .session(&c, &self.counts)
            .map(|s| (s, key(s)))
            .filter(|(_, k)| self.counts[k].is_session());
        let dep = self.dependencies(&c);
        self.order += 1;
        let buf = &mut self.buf;
        buf.clear();
        if let Some((after, gap_ns)) = dep {
            if let Some((_, k)) = session {
                self.last_end.insert(k, c.end_ns);
            }
            let delay = ns_to_ms(gap_ns.max(0));
            match c.passthrough {
                Some(rec) => {
                    let mut rec = passthrough(*rec, timestamp);
                    let after = String::from_utf8(after).expect("JSON is UTF-8");
                    rec.set_raw("after", record::raw(after));
                    rec.set_ms("delay", delay);
                    rec.write_json(buf);
                }
                None => {
                    record(buf, &c, &mut self.renumber, timestamp);
                    if let Some((s, _)) = session {
                        buf.extend_from_slice(b",\"session_id\":");
                        json(buf, s);
                    }
                    tail(buf, &c);
                    buf.extend_from_slice(b",\"after\":");
                    buf.extend_from_slice(&after);
                    buf.extend_from_slice(b",\"delay\":");
                    buf.extend_from_slice(format_ms(delay).as_bytes());
                    buf.push(b'}');
                }
            }
        } else {
            let delay = session.and_then(|(_, k)| match self.last_end.insert(k, c.end_ns) {
                Some(Some(end)) => Some(ns_to_ms((c.start_ns - end).max(0))),
                _ => None,
            });
            match c.passthrough {
                Some(rec) => passthrough(*rec, timestamp).write_json(buf),
                None => {
                    record(buf, &c, &mut self.renumber, timestamp);
                    if let Some((s, _)) = session {
                        buf.extend_from_slice(b",\"session_id\":");
                        json(buf, s);
                        if let Some(d) = delay {
                            buf.extend_from_slice(b",\"delay\":");
                            buf.extend_from_slice(format_ms(d).as_bytes());
                        }
                    }
                    tail(buf, &c);
                    buf.push(b'}');
                }
            }
        }
        if let Some((_, k)) = session {
            let n = self.counts.get_mut(&k).expect("counted");
            n.calls_written += 1;
            if n.calls_written == n.calls {
                self.last_end.remove(&k);
            }
        }
        out.write_line(&self.buf)?;
        self.summary.written += 1;
        Ok(())
    }

    /// The ids (a JSON array) of the calls this one waits for, and the gap
    /// after the last of them; None for a call that waits for nothing or
    /// is not in a graph.
    fn dependencies(&mut self, c: &Call) -> Option<(Vec<u8>, i64)> {
        let group = self.names.group(c).filter(|_| c.has_node())?;
        let k = key(group);
        let end = c.end_ns.expect("a node has an end");
        let mut after = vec![b'['];
        let gap = self.groups.entry(k).or_default().start(
            c.start_ns,
            end,
            self.order,
            c.id.into(),
            |id| {
                if after.len() > 1 {
                    after.push(b',');
                }
                after.extend_from_slice(id);
            },
        );
        after.push(b']');
        let n = self.counts.get_mut(&k).expect("counted");
        n.nodes_written += 1;
        if n.nodes_written == n.nodes {
            self.groups.remove(&k);
        }
        gap.map(|gap| (after, gap))
    }
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
fn record(buf: &mut Vec<u8>, c: &Call, renumber: &mut Renumber, timestamp: f64) {
    buf.extend_from_slice(b"{\"timestamp\":");
    buf.extend_from_slice(format_ms(timestamp).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(c.head);
    if let Some(own) = c.hashes {
        let ids: Vec<u64> = own.iter().map(|&h| renumber.id(h)).collect();
        buf.extend_from_slice(b",\"hash_ids\":");
        json(buf, &ids);
    }
}

/// The fields from `model` to `observed`.
fn tail(buf: &mut Vec<u8>, c: &Call) {
    if !c.tail.is_empty() {
        buf.push(b',');
        buf.extend_from_slice(c.tail);
    }
}
