//! The record feed: records parsed, filtered to the shard, counted against
//! --warmup and --limit and prepared on the reader thread, ahead of the
//! schedule.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use tokio::sync::mpsc::error::TrySendError;

use super::conversation::Parent;
use super::internal::{self, Stage};
use super::plan::Plan;
use super::request::{self, PrepareError, Prepared, PromptSource};
use super::shared::Shared;
use crate::cli::{SkipArgs, Skipper};
use crate::error::{Error, Location, Result};
use crate::io::{InputSpec, Lines};
use crate::prompts::Synthesizer;
use crate::record::{Record, Speedup};
use crate::shard::Dealer;
use crate::timestamps::UnitEvidence;

/// Where a run's records come from, in order: a trace's lines
/// ([`TraceLines`]), records in memory ([`InMemory`]), or any adapter
/// over them. Read on a thread of its own, ahead of the schedule.
pub trait Records: Send + 'static {
    /// The next record and where it is from; `None` at the end. The outer
    /// error is input that cannot be read (it stops the run); the inner
    /// one a record that does not read (skipped with `skip_invalid`).
    #[allow(clippy::type_complexity)]
    fn next_record(&mut self) -> Result<Option<(Location, Result<Record<'_>>)>>;

    /// How long the schedule runs, ms, judged before the run (for the
    /// progress bar until the whole input is read); `None` when unknown.
    fn span_estimate(&self) -> Option<f64> {
        None
    }

    /// Whether the input may never end (a pipe, a terminal): a stopped
    /// run reads such input for a moment only, where it reads an input
    /// file to its end.
    fn endless(&self) -> bool {
        false
    }
}

/// The records of trace files (or standard input), one JSON object a
/// line.
pub struct TraceLines {
    inputs: Vec<InputSpec>,
    lines: Lines,
}

impl TraceLines {
    /// The trace in `files` (none, or `-`: standard input).
    pub fn open(files: &[String]) -> Result<TraceLines> {
        let inputs = crate::io::input_specs(files)?;
        let lines = Lines::new(&inputs);
        Ok(TraceLines { inputs, lines })
    }
}

impl Records for TraceLines {
    fn next_record(&mut self) -> Result<Option<(Location, Result<Record<'_>>)>> {
        Ok(self.lines.next_line()?.map(|(loc, line)| {
            let rec = Record::parse_at(line, &loc);
            (loc, rec)
        }))
    }

    fn span_estimate(&self) -> Option<f64> {
        super::progress::estimate_span(&self.inputs)
    }

    fn endless(&self) -> bool {
        self.inputs.iter().any(|i| !is_file(i))
    }
}

/// Whether `input` is a regular file (standard input redirected from one
/// too): it ends.
fn is_file(input: &InputSpec) -> bool {
    let meta = match input {
        InputSpec::Stdin => {
            use std::os::fd::AsFd;
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .and_then(|fd| std::fs::File::from(fd).metadata())
        }
        InputSpec::Path(p) => std::fs::metadata(p),
    };
    meta.is_ok_and(|m| m.is_file())
}

/// Records in memory (a vector's, an iterator's), numbered from 1 as
/// the lines of `<memory>`.
pub struct InMemory<I> {
    records: I,
    line: u64,
    source: std::sync::Arc<str>,
}

impl<I: Iterator<Item = Record<'static>>> InMemory<I> {
    pub fn new(records: impl IntoIterator<IntoIter = I>) -> InMemory<I> {
        InMemory {
            records: records.into_iter(),
            line: 0,
            source: "<memory>".into(),
        }
    }
}

impl<I: Iterator<Item = Record<'static>> + Send + 'static> Records for InMemory<I> {
    fn next_record(&mut self) -> Result<Option<(Location, Result<Record<'_>>)>> {
        let Some(rec) = self.records.next() else {
            return Ok(None);
        };
        self.line += 1;
        let loc = Location {
            source: self.source.clone(),
            line: self.line,
            column: None,
        };
        Ok(Some((loc, Ok(rec))))
    }
}

/// Records read ahead of the schedule (bodies built, prompts synthesized).
pub(super) const READ_AHEAD: usize = 1024;

/// Records the reader hands over at once when the read-ahead is full.
pub(super) const READ_BATCH: usize = 64;

/// Records whose timestamps are weighed for their unit: the read-ahead,
/// read before the clock starts, so that the warning comes first.
const UNIT_SAMPLE: u64 = READ_AHEAD as u64;

/// The synthesizer, loaded on first need.
pub(super) struct LazyPrompts<'a> {
    plan: &'a Plan,
    synth: Option<Synthesizer>,
}

impl PromptSource for LazyPrompts<'_> {
    fn synthesizer(&mut self) -> Result<&Synthesizer> {
        if self.synth.is_none() {
            let p = &self.plan.prompts;
            let s = crate::prompts::synthesizer(&p.tokenizer, p.seed, p.block_size, None)?;
            self.synth = Some(s);
        }
        Ok(self.synth.as_ref().expect("just set"))
    }
}

/// What the reader hands the dispatcher.
pub(super) enum Read {
    /// A request ready to send.
    Ready(Prepared),
    /// A record read after the run was stopped: only its labels.
    Unsent(Prepared),
    /// A record that stops the run.
    Failed(Error),
    /// The timestamp the schedule counts from (a shard's whole trace's).
    Origin(f64),
}

/// The records a run takes on, in order: parsed, filtered to the shard,
/// counted against --warmup and --limit, and prepared (or, once the run is
/// stopping, only outlined). Shared by the run and --dry-run.
pub(super) struct Feed<'a, R> {
    plan: &'a Plan,
    records: R,
    prompts: LazyPrompts<'a>,
    /// `plan.speed`, unless 1.
    speedup: Option<Speedup>,
    skipper: Skipper,
    /// Position of the next record in the input.
    index: u64,
    /// Records taken on so far.
    taken: u64,
    /// Timestamp of the input's first record.
    pub(super) first_timestamp: Option<f64>,
    ended: bool,
    /// Turns taken on so far in each session (one counter a session).
    turns: std::collections::HashMap<String, u64>,
    /// --shard: which records are this shard's.
    dealer: Option<Dealer>,
    /// The first records' timestamps (of those sent at them), weighed for
    /// their unit, and how many records were looked at.
    units: UnitEvidence,
    weighed: u64,
    /// Timestamps on all records or none, as trace-validate wants.
    presence: crate::timestamps::Presence,
    /// The unit warnings, once the sample is weighed (taken by the caller).
    pub(super) unit_warnings: Option<Vec<String>>,
    /// The first and largest timestamps of the records run (not warmup).
    run_span: Option<(f64, f64)>,
}

impl<'a, R: Records> Feed<'a, R> {
    pub(super) fn new(plan: &'a Plan, records: R) -> Feed<'a, R> {
        Feed {
            plan,
            records,
            prompts: LazyPrompts { plan, synth: None },
            speedup: (plan.speed != 1.0).then(|| Speedup::new(plan.speed)),
            skipper: Skipper::new(&SkipArgs {
                skip_invalid: plan.skip_invalid,
            }),
            index: 0,
            taken: 0,
            first_timestamp: None,
            ended: false,
            turns: std::collections::HashMap::new(),
            dealer: None,
            units: UnitEvidence::default(),
            weighed: 0,
            presence: crate::timestamps::Presence::default(),
            unit_warnings: None,
            run_span: None,
        }
    }

    /// When the last timed record is due, ms after the first (a shard's:
    /// after its whole trace's first); `None` before the input's end, or
    /// with no timestamp at all.
    pub(super) fn schedule_ms(&self) -> Option<f64> {
        let (first, last) = self.run_span?;
        let origin = match self.plan.pacing.shard {
            Some(_) => self.first_timestamp.unwrap_or(first),
            None => first,
        };
        self.ended.then_some(last - origin)
    }

    /// Weigh one more record's timestamp, up to [`UNIT_SAMPLE`] records:
    /// of a record sent at it only (see
    /// [`crate::timestamps::sent_at_timestamp`]), as trace-validate does.
    fn weigh(&mut self, p: &Prepared) {
        if self.weighed < UNIT_SAMPLE {
            self.weighed += 1;
            let later = p
                .session_id
                .as_ref()
                .is_some_and(|s| self.turns.contains_key(s));
            if crate::timestamps::sent_at_timestamp(!p.after.is_empty(), later, p.delay.is_some()) {
                self.units.add(p.timestamp);
            }
            if self.weighed == UNIT_SAMPLE {
                self.judge_units(false);
            }
        }
    }

    /// The unit warnings of the sample (or of the whole input, when it
    /// ended first). Closed-loop runs ignore timestamps: no warning.
    fn judge_units(&mut self, whole: bool) {
        if self.plan.closed_loop() || self.units.records() == 0 {
            return;
        }
        let n = self.units.records();
        // The note on whole numbers is a warning here: the run is about
        // to send at that rate.
        let warnings = self
            .units
            .warnings()
            .into_iter()
            .chain(self.units.note())
            .map(|w| {
                if whole {
                    w
                } else {
                    format!("{w} (judged from the first {n} records)")
                }
            });
        self.unit_warnings = Some(warnings.collect());
    }

    /// The next record to take on; `outline_only` skips building the body.
    /// Errors are records that stop the run (or unreadable input).
    pub(super) fn next(&mut self, outline_only: bool) -> Result<Option<Prepared>> {
        let wanted = (self.plan.pacing.limit).map(|n| n.saturating_add(self.plan.warmup));
        loop {
            let next = match wanted {
                Some(w) if self.taken >= w => None,
                _ => self.records.next_record()?,
            };
            let Some((loc, rec)) = next else {
                if !self.ended {
                    self.ended = true;
                    self.skipper.finish();
                    if self.weighed < UNIT_SAMPLE {
                        self.judge_units(true);
                    }
                }
                return Ok(None);
            };
            let mut rec = match rec {
                Ok(rec) => rec,
                Err(e) => {
                    self.skipper.skip(e)?;
                    continue;
                }
            };
            if let Some(scale) = &mut self.speedup {
                let speed = scale.speed;
                let at_speed =
                    |e: crate::error::FieldError| Error::msg(format!("at speed {speed}: {e}"));
                let timestamp = rec.timestamp().map_err(at_speed)?;
                scale.apply(&mut rec, timestamp).map_err(at_speed)?;
            }
            let index = self.index;
            self.index += 1;
            internal::fail_point(Stage::Read, index);
            if self.first_timestamp.is_none() {
                self.first_timestamp = rec.timestamp().ok().flatten();
            }
            if let Some((k, n)) = self.plan.pacing.shard {
                let session = rec.session_id().ok().flatten();
                let id = rec.id().ok().flatten();
                let after = request::after(&rec).unwrap_or_default();
                let dealer = self.dealer.get_or_insert_with(|| Dealer::new(n));
                if dealer.deal(id.as_deref(), session.as_deref(), &after, index) != k - 1 {
                    continue;
                }
            }
            // Timestamps on some records only: refused before the clock
            // starts (within the read-ahead), as trace-validate refuses it
            // (a stopped run only outlines what it still reads).
            let turns = &self.turns;
            let follows = || {
                rec.contains("after")
                    || rec
                        .session_id()
                        .ok()
                        .flatten()
                        .is_some_and(|s| turns.contains_key(&*s))
            };
            let has_timestamp = rec.contains("timestamp");
            if let (false, Some(e)) = (
                outline_only,
                self.presence.check(loc.line, has_timestamp, follows),
            ) {
                self.skipper.skip(e.at(&loc))?;
                continue;
            }
            let prepared = if self.plan.offline() {
                // The twin needs no body: the lengths and the blocks.
                request::outline(&rec, index, &self.plan.body)
                    .and_then(|mut p| {
                        p.blocks = rec.hash_ids()?.unwrap_or_default();
                        Ok(p)
                    })
                    .map_err(PrepareError::Record)
            } else if outline_only {
                Ok(
                    request::outline(&rec, index, &self.plan.body).unwrap_or_else(|_| Prepared {
                        index,
                        ..Prepared::default()
                    }),
                )
            } else {
                request::prepare(&rec, index, &self.plan.body, &mut self.prompts)
            };
            match prepared {
                Ok(mut p) => {
                    self.taken += 1;
                    self.weigh(&p);
                    if let (false, Some(t)) = (self.in_warmup(), p.timestamp) {
                        let (_, last) = self.run_span.get_or_insert((t, t));
                        *last = last.max(t);
                    }
                    if let Some(s) = &p.session_id {
                        let n = self.turns.entry(s.clone()).or_insert(0);
                        *n += 1;
                        p.turn = Some(*n);
                        // --live-answers: a later turn continues the
                        // conversation of the call it names first in
                        // `after` (its conversation parent: a subagent's
                        // calls continue the subagent's), else its
                        // session's previous turn, once that is done; a
                        // first turn goes as it is.
                        if p.synthesized.is_some() && p.parent.is_none() {
                            if let Some(id) = p.after.first() {
                                p.parent = Some(Parent::Id(id.clone()));
                            } else if *n > 1 {
                                p.parent = Some(Parent::Session(s.clone()));
                                if p.after.is_empty() && p.delay.is_none() {
                                    p.delay = Some(0.0);
                                }
                            } else {
                                p.synthesized = None;
                            }
                        }
                    }
                    return Ok(Some(p));
                }
                Err(PrepareError::Record(e)) => self.skipper.skip(e.at(&loc))?,
                Err(PrepareError::Fatal(e)) => return Err(e),
            }
        }
    }

    /// Whether the last record taken is a warmup one.
    pub(super) fn in_warmup(&self) -> bool {
        self.taken <= self.plan.warmup
    }
}

/// What the dispatcher shares with the reader besides the channel.
pub(super) struct Reading {
    /// The input may never end (see [`Records::endless`]).
    pub(super) endless: bool,
    /// The batch the reader is gathering, not handed over yet: once the
    /// run stopped, the dispatcher takes it, since the reader may be
    /// blocked reading an input that has not ended and every record read
    /// gets its result. `None` once taken: the reader reads no more.
    held: Mutex<Option<Vec<Read>>>,
}

impl Reading {
    pub(super) fn new(endless: bool) -> Reading {
        Reading {
            endless,
            held: Mutex::new(Some(Vec::new())),
        }
    }

    /// The batch (as it was if a panic interrupted its holder).
    fn held(&self) -> MutexGuard<'_, Option<Vec<Read>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take the batch and end the reading, unless the reader is handing
    /// a batch over right now (`None`: receive it and try again).
    pub(super) fn try_close(&self) -> Option<Vec<Read>> {
        let mut held = match self.held.try_lock() {
            Ok(held) => held,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(held.take().unwrap_or_default())
    }
}

/// The reader thread: parse and prepare records ahead of the schedule.
///
/// Records go over in batches: one at a time while the dispatcher has room
/// for them, gathered up to `READ_BATCH` once the read-ahead is full, so
/// that keeping it full costs one wakeup of each thread per batch rather
/// than per record. The batch is handed over under the lock of
/// [`Reading::held`], so that the dispatcher, closing it, misses none.
///
/// A panic here stops the run: the records read so far are handed over,
/// then the internal error.
pub(super) fn read_records(
    plan: &Plan,
    records: impl Records,
    out: tokio::sync::mpsc::Sender<Vec<Read>>,
    shared: &Shared,
    reading: &Reading,
) {
    let _caught = internal::caught_here();
    let read = std::panic::catch_unwind(AssertUnwindSafe(|| {
        read_into(plan, records, &out, shared, reading);
    }));
    if let Err(panic) = read {
        let what = internal::describe(&*panic);
        shared.fail(what.clone());
        if let Some(batch) = reading.held().as_mut() {
            batch.push(Read::Failed(internal::stopped(&what)));
            let _ = out.blocking_send(std::mem::take(batch));
        }
    }
}

fn read_into(
    plan: &Plan,
    records: impl Records,
    out: &tokio::sync::mpsc::Sender<Vec<Read>>,
    shared: &Shared,
    reading: &Reading,
) {
    let mut feed = Feed::new(plan, records);
    let mut origin_sent = false;
    loop {
        let stopping = shared.stopping.load(Ordering::SeqCst);
        let next = feed.next(stopping);
        for w in feed.unit_warnings.take().unwrap_or_default() {
            shared.print(|| crate::cli::warn(w));
        }
        let msg = match next {
            Ok(Some(p)) if stopping => Read::Unsent(p),
            Ok(Some(p)) => Read::Ready(p),
            Ok(None) => break,
            Err(e) => Read::Failed(e),
        };
        let mut held = reading.held();
        let Some(batch) = held.as_mut() else {
            // The dispatcher took its last records: the run has ended.
            return;
        };
        // Shards of one trace share its origin, so that they line up.
        if plan.pacing.shard.is_some() && !origin_sent && !feed.in_warmup() {
            origin_sent = true;
            if let Some(ts) = feed.first_timestamp {
                batch.push(Read::Origin(ts));
            }
        }
        let failed = matches!(msg, Read::Failed(_));
        batch.push(msg);
        if failed {
            break;
        }
        if batch.len() >= READ_BATCH {
            if out.blocking_send(std::mem::take(batch)).is_err() {
                return;
            }
            continue;
        }
        match out.try_send(std::mem::take(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(b)) => *batch = b,
            Err(TrySendError::Closed(_)) => return,
        }
    }
    if feed.ended {
        let total = feed.taken.saturating_sub(plan.warmup);
        shared.counters.total.store(total, Ordering::Relaxed);
        if let (false, Some(ms)) = (plan.closed_loop(), feed.schedule_ms()) {
            let _ = shared.counters.schedule_ms.set(ms);
        }
    }
    if let Some(batch) = reading.held().as_mut().filter(|b| !b.is_empty()) {
        let _ = out.blocking_send(std::mem::take(batch));
    }
}
