//! The record feed: records parsed, filtered to the shard, counted against
//! --warmup and --limit and prepared on the reader thread, ahead of the
//! schedule.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc::error::TrySendError;

use super::Shared;
use super::args::Args;
use super::conversation::Parent;
use super::internal::{self, Stage};
use super::request::{self, BodyOptions, PrepareError, Prepared, PromptSource};
use crate::cli::Skipper;
use crate::error::{Error, Result};
use crate::io::{InputSpec, Lines};
use crate::prompts::Synthesizer;
use crate::record::Record;
use crate::shard::Dealer;
use crate::timestamps::UnitEvidence;

/// Records read ahead of the schedule (bodies built, prompts synthesized).
pub(super) const READ_AHEAD: usize = 1024;

/// Records the reader hands over at once when the read-ahead is full.
pub(super) const READ_BATCH: usize = 64;

/// Records whose timestamps are weighed for their unit: the read-ahead,
/// read before the clock starts, so that the warning comes first.
const UNIT_SAMPLE: u64 = READ_AHEAD as u64;

/// The synthesizer, loaded on first need.
pub(super) struct LazyPrompts<'a> {
    args: &'a Args,
    synth: Option<Synthesizer>,
}

impl PromptSource for LazyPrompts<'_> {
    fn synthesizer(&mut self) -> Result<&Synthesizer> {
        if self.synth.is_none() {
            let s = crate::prompts::synthesizer(
                &self.args.tokenizer,
                self.args.seed,
                self.args.block_size,
                None,
            )?;
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
pub(super) struct Feed<'a> {
    args: &'a Args,
    opts: &'a BodyOptions,
    lines: Lines,
    prompts: LazyPrompts<'a>,
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
    /// The first records' timestamps, weighed for their unit.
    units: UnitEvidence,
    /// The unit warnings, once the sample is weighed (taken by the caller).
    pub(super) unit_warnings: Option<Vec<String>>,
    /// The first and largest timestamps of the records run (not warmup).
    run_span: Option<(f64, f64)>,
}

impl<'a> Feed<'a> {
    pub(super) fn new(args: &'a Args, inputs: &[InputSpec], opts: &'a BodyOptions) -> Feed<'a> {
        Feed {
            args,
            opts,
            lines: Lines::new(inputs),
            prompts: LazyPrompts { args, synth: None },
            skipper: Skipper::new(&args.skip_invalid),
            index: 0,
            taken: 0,
            first_timestamp: None,
            ended: false,
            turns: std::collections::HashMap::new(),
            dealer: None,
            units: UnitEvidence::default(),
            unit_warnings: None,
            run_span: None,
        }
    }

    /// When the last timed record is due, ms after the first (a shard's:
    /// after its whole trace's first); `None` before the input's end, or
    /// with no timestamp at all.
    pub(super) fn schedule_ms(&self) -> Option<f64> {
        let (first, last) = self.run_span?;
        let origin = match self.args.shard {
            Some(_) => self.first_timestamp.unwrap_or(first),
            None => first,
        };
        self.ended.then_some(last - origin)
    }

    /// Weigh one more record's timestamp, up to [`UNIT_SAMPLE`] records.
    fn weigh(&mut self, timestamp: Option<f64>) {
        if self.units.records() < UNIT_SAMPLE {
            self.units.add(timestamp);
            if self.units.records() == UNIT_SAMPLE {
                self.judge_units(false);
            }
        }
    }

    /// The unit warnings of the sample (or of the whole input, when it
    /// ended first). Closed-loop runs ignore timestamps: no warning.
    fn judge_units(&mut self, whole: bool) {
        if self.args.concurrency.is_some() || self.units.records() == 0 {
            return;
        }
        let n = self.units.records();
        let warnings = self.units.warnings().into_iter().map(|w| {
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
        let wanted = self.args.limit.map(|n| n.saturating_add(self.args.warmup));
        loop {
            let line = match wanted {
                Some(w) if self.taken >= w => None,
                _ => self.lines.next_line()?,
            };
            let Some((loc, line)) = line else {
                if !self.ended {
                    self.ended = true;
                    self.skipper.finish();
                    if self.units.records() < UNIT_SAMPLE {
                        self.judge_units(true);
                    }
                }
                return Ok(None);
            };
            let rec = match Record::parse_at(line, &loc) {
                Ok(rec) => rec,
                Err(e) => {
                    self.skipper.skip(e)?;
                    continue;
                }
            };
            let index = self.index;
            self.index += 1;
            internal::fail_point(Stage::Read, index);
            if self.first_timestamp.is_none() {
                self.first_timestamp = rec.timestamp().ok().flatten();
            }
            if let Some((k, n)) = self.args.shard {
                let session = rec.session_id().ok().flatten();
                let id = rec.id().ok().flatten();
                let after = request::after(&rec).unwrap_or_default();
                let dealer = self.dealer.get_or_insert_with(|| Dealer::new(n));
                if dealer.deal(id.as_deref(), session.as_deref(), &after, index) != k - 1 {
                    continue;
                }
            }
            let prepared = if outline_only {
                Ok(
                    request::outline(&rec, index, self.opts).unwrap_or_else(|_| Prepared {
                        index,
                        ..Prepared::default()
                    }),
                )
            } else {
                request::prepare(&rec, index, self.opts, &mut self.prompts)
            };
            match prepared {
                Ok(mut p) => {
                    self.taken += 1;
                    self.weigh(p.timestamp);
                    if let (false, Some(t)) = (self.in_warmup(), p.timestamp) {
                        let (_, last) = self.run_span.get_or_insert((t, t));
                        *last = last.max(t);
                    }
                    if let Some(s) = &p.session_id {
                        let n = self.turns.entry(s.clone()).or_insert(0);
                        *n += 1;
                        p.turn = Some(*n);
                        // --live-answers: a later turn continues the
                        // session's conversation once its previous turn
                        // is done; a first turn goes as it is.
                        if p.synthesized.is_some() && p.parent.is_none() {
                            if *n > 1 {
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
        self.taken <= self.args.warmup
    }
}

/// The reader thread: parse and prepare records ahead of the schedule.
///
/// Records go over in batches: one at a time while the dispatcher has room
/// for them, gathered up to `READ_BATCH` once the read-ahead is full, so
/// that keeping it full costs one wakeup of each thread per batch rather
/// than per record.
///
/// A panic here stops the run: the records read so far are handed over,
/// then the internal error.
pub(super) fn read_records(
    args: &Args,
    inputs: &[InputSpec],
    opts: &BodyOptions,
    out: tokio::sync::mpsc::Sender<Vec<Read>>,
    shared: &Shared,
) {
    let _caught = internal::caught_here();
    let mut batch = Vec::new();
    let read = std::panic::catch_unwind(AssertUnwindSafe(|| {
        read_into(args, inputs, opts, &out, shared, &mut batch);
    }));
    if let Err(panic) = read {
        let what = internal::describe(&*panic);
        shared.fail(what.clone());
        batch.push(Read::Failed(internal::stopped(&what)));
        let _ = out.blocking_send(batch);
    }
}

fn read_into(
    args: &Args,
    inputs: &[InputSpec],
    opts: &BodyOptions,
    out: &tokio::sync::mpsc::Sender<Vec<Read>>,
    shared: &Shared,
    batch: &mut Vec<Read>,
) {
    let mut feed = Feed::new(args, inputs, opts);
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
        // Shards of one trace share its origin, so that they line up.
        if args.shard.is_some() && !origin_sent && !feed.in_warmup() {
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
        let total = feed.taken.saturating_sub(args.warmup);
        shared.counters.total.store(total, Ordering::Relaxed);
        if let (None, Some(ms)) = (args.concurrency, feed.schedule_ms()) {
            let _ = shared.counters.schedule_ms.set(ms);
        }
    }
    if !batch.is_empty() {
        let _ = out.blocking_send(std::mem::take(batch));
    }
}
