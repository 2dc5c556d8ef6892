//! The twin as the engine's server: each request is served by the
//! iteration-level model ([`crate::simulator::batch`]) of a fitted
//! profile, on a virtual clock that moves only when the dispatcher waits
//! on it. Everything else (the schedule, sessions, `after` and `delay`,
//! limits, signals, result lines and their texts) is the engine's, as in a
//! replay: the twin only says when each token comes.
//!
//! One event loop, as in a discrete-event simulator: the dispatcher's next
//! due request and the model's next step end are the only two kinds of
//! event; [`VirtualClock::sleep_until`] runs the model's steps up to the
//! instant asked for and returns early at a step that completes a request,
//! so that the turns waiting for it are due at the right time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedSender;

use super::abort::Fate;
use super::clock::Clock;
use super::exchange::skeleton;
use super::output::Results;
use super::request::Prepared;
use super::shared::Control;
use crate::result::{Status, round_us};
use crate::simulator::batch::{Batch, Event, Job};
use crate::simulator::profile::Profile;

/// Output tokens of a record that asks for none: what a server gives
/// without `max_tokens` (and trace-sim's answer then).
const DEFAULT_OUTPUT: u64 = 16;

/// Absolute epoch timestamps start here (ms): 1973. A trace whose first
/// timestamp is past it was recorded at that time: its results are dated
/// from it; others from when the run started.
const EPOCH_MS: f64 = 1.0e11;

/// The dispatcher yields to the runtime once every this many waits, so
/// that a signal is heard while virtual time runs ahead.
const YIELD_EVERY: u32 = 64;

/// A request in the model.
struct Pending {
    req: Prepared,
    /// Prompt tokens.
    prompt: u64,
    scheduled_ms: f64,
    sent_ms: f64,
    /// When it arrived, on the model's clock (ms from the clock's zero).
    arrived: f64,
    first: Option<f64>,
    last: f64,
    itl: Vec<f64>,
    warmup: bool,
}

/// The twin's server: the model, and the requests in it.
pub(crate) struct Twin {
    batch: Batch,
    block_size: u64,
    pending: HashMap<u64, Pending>,
    events: Vec<Event>,
    results: Results,
    control: UnboundedSender<Control>,
    /// The virtual clock's zero.
    zero: Instant,
    /// What the clock's zero is on the calendar.
    zero_wall: SystemTime,
    /// Requests waiting for a slot beyond which the dispatcher holds due
    /// requests back (see [`Twin::backed_up`]).
    hold: usize,
    shard: Option<String>,
    /// The calendar is set (by the first request).
    dated: bool,
}

impl Twin {
    pub(super) fn new(
        profile: Profile,
        results: Results,
        control: UnboundedSender<Control>,
        zero: Instant,
        shard: Option<String>,
    ) -> Twin {
        // A step starts at most this many prefills (each takes a slot and
        // at least a token of the budget); while twice as many are queued,
        // a request held back could not have started before those ahead
        // of it.
        let chunk = usize::try_from(profile.prefill_chunk)
            .unwrap_or(usize::MAX)
            .max(1);
        let starts = match profile.slots {
            0 => chunk,
            n => n.min(chunk),
        };
        let hold = starts.saturating_mul(2).max(256);
        Twin {
            block_size: profile.block_size,
            batch: Batch::new(profile),
            pending: HashMap::new(),
            events: Vec::new(),
            results,
            control,
            zero,
            zero_wall: SystemTime::now(),
            hold,
            shard,
            dated: false,
        }
    }

    /// Date the run from the first request's timestamp when it is an
    /// absolute one (ms since the epoch): the run starts when its trace
    /// did.
    fn date(&mut self, timestamp: Option<f64>, scheduled_ms: f64) {
        self.dated = true;
        if let Some(ts) = timestamp.filter(|t| (EPOCH_MS..1.0e15).contains(t)) {
            let start = (ts - scheduled_ms).max(0.0);
            self.zero_wall = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(start / 1000.0);
        }
    }

    /// Virtual milliseconds of an instant of the clock.
    fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.zero).as_secs_f64() * 1000.0
    }

    /// The instant of `ms` on the clock.
    fn instant(&self, ms: f64) -> Instant {
        self.zero + Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }

    /// The calendar time of an instant of the clock.
    pub(super) fn system_time(&self, at: Instant) -> SystemTime {
        self.zero_wall + at.saturating_duration_since(self.zero)
    }

    /// So many requests wait for a slot that the dispatcher holds due
    /// ones back (they arrive, later, at their due time): memory holds
    /// the model's queue, not every request an overloaded trace sends.
    pub(super) fn backed_up(&self) -> bool {
        self.batch.queued() >= self.hold
    }

    /// A request reaches the server at `at` (its send time; when it was
    /// held back, its due time, before the clock's now).
    pub(super) fn arrive(
        &mut self,
        req: Prepared,
        at: Instant,
        scheduled_ms: f64,
        sent_ms: f64,
        warmup: bool,
    ) {
        let mut req = req;
        if !self.dated {
            self.date(req.timestamp, scheduled_ms);
        }
        let blocks = std::mem::take(&mut req.blocks);
        let prompt = req
            .input_length
            .unwrap_or(blocks.len() as u64 * self.block_size);
        let arrived = self.ms(at);
        self.batch.arrive(
            arrived,
            Job {
                key: req.index,
                prompt,
                output: req.output_length.unwrap_or(DEFAULT_OUTPUT),
                blocks,
                known_cached: 0,
            },
        );
        self.pending.insert(
            req.index,
            Pending {
                req,
                prompt,
                scheduled_ms,
                sent_ms,
                arrived,
                first: None,
                last: arrived,
                itl: Vec::new(),
                warmup,
            },
        );
    }

    /// When the model's next step ends, if it has work.
    pub(super) fn next_end(&mut self) -> Option<Instant> {
        let end = self.batch.next_end()?;
        Some(self.instant(end))
    }

    /// Run the steps that end at or before `until`, stopping after the
    /// first that completes a request; the instant reached (`until`, or
    /// that step's end) and whether a request completed.
    pub(super) fn run_until(&mut self, until: Instant) -> (Instant, bool) {
        // An instant holds whole nanoseconds: a step's end read back from
        // one may come out a nanosecond short.
        let until_ms = self.ms(until) + 1e-6;
        loop {
            let Some(end) = self.batch.next_end() else {
                return (until, false);
            };
            if end > until_ms {
                return (until, false);
            }
            self.events.clear();
            // One step at a time: its end is an instant of its own.
            self.batch.advance(end, &mut self.events);
            let mut completed = false;
            for i in 0..self.events.len() {
                let ev = self.events[i];
                completed |= self.account(&ev);
            }
            if completed {
                return (self.instant(end), true);
            }
        }
    }

    /// Account for one event; true when it completed its request.
    fn account(&mut self, ev: &Event) -> bool {
        let Some(p) = self.pending.get_mut(&ev.key) else {
            return false;
        };
        if ev.tokens <= 1 {
            p.first = Some(ev.at);
        } else {
            p.itl.push(round_us(ev.at - p.last));
        }
        p.last = ev.at;
        if !ev.done {
            return false;
        }
        let p = self.pending.remove(&ev.key).expect("just found");
        let done = Ending {
            at: ev.at,
            tokens: ev.tokens,
            cached: ev.cached,
        };
        self.end(p, Some(done), self.instant(ev.at));
        true
    }

    /// The run stopped and its grace ran out: every request still in the
    /// model ends `cancelled` at `now`, with the times it had, as a
    /// replay's requests in flight do.
    pub(super) fn cancel_all(&mut self, now: Instant) {
        let mut left: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        left.sort_by_key(|p| p.req.index);
        for p in left {
            self.end(p, None, now);
        }
    }
}

/// How a request's answer completed.
struct Ending {
    /// Its last token, ms.
    at: f64,
    tokens: u64,
    cached: u64,
}

impl Twin {
    /// A request leaves the model: its result (ok when it completed,
    /// else cancelled with the times it had, as a replay's request in
    /// flight), and its completion told to the dispatcher.
    fn end(&mut self, p: Pending, done: Option<Ending>, at: Instant) {
        let mut r = skeleton(
            &p.req,
            round_us(p.scheduled_ms),
            round_us(p.sent_ms),
            crate::time::rfc3339(self.system_time(self.instant(p.arrived))),
        );
        r.warmup = p.warmup;
        r.shard = self.shard.clone();
        let m = &mut r.measure;
        m.ttft_ms = p.first.map(|f| round_us(f - p.arrived));
        m.first_chunk_ms = m.ttft_ms;
        m.itl_ms = p.itl;
        let fate = match done {
            Some(d) => {
                m.e2e_ms = Some(round_us(d.at - p.arrived));
                m.prompt_tokens = Some(p.prompt);
                m.completion_tokens = Some(d.tokens);
                m.cached_tokens = Some(d.cached);
                m.finish_reason = Some("length".into());
                m.status = Status::Ok;
                m.http_status = Some(200);
                Fate::Ok
            }
            None => {
                m.error = Some("the run stopped before the answer completed".into());
                Fate::Cancelled
            }
        };
        self.results.send(r);
        let _ = self.control.send(Control::Done {
            key: p.req.index,
            id: p.req.id,
            session: p.req.session_id,
            conversation: None,
            at,
            lag_ms: 0.0,
            warmup: p.warmup,
            fate,
        });
    }
}

/// The twin's clock: virtual time, which jumps to the instant waited for,
/// running the model's steps on the way.
pub(crate) struct VirtualClock {
    now: Instant,
    twin: Rc<RefCell<Twin>>,
    waits: u32,
}

impl VirtualClock {
    pub(super) fn new(twin: Rc<RefCell<Twin>>) -> VirtualClock {
        let now = twin.borrow().zero;
        VirtualClock {
            now,
            twin,
            waits: 0,
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.now
    }

    /// Returns at `at`, or earlier at the end of a step that completed a
    /// request (the dispatcher then sees the completion and asks again).
    async fn sleep_until(&mut self, at: Instant) {
        // A step may end before now (one a request held back joined, at
        // its due time): it runs all the same, or the run would wait on it
        // for ever.
        let (reached, _) = self.twin.borrow_mut().run_until(at.max(self.now));
        self.now = self.now.max(reached);
        self.waits = self.waits.wrapping_add(1);
        if self.waits % YIELD_EVERY == 0 {
            tokio::task::yield_now().await;
        }
    }

    fn system_time(&self) -> SystemTime {
        self.twin.borrow().system_time(self.now)
    }

    fn is_virtual(&self) -> bool {
        true
    }
}
