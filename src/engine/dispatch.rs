//! The dispatcher: owns the schedule and sends each request when due.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;

use super::abort::{Context, FailWatch, Fate};
use super::clock::{Clock, SPIN};
use super::conversation::{self, Kept, Parent};
use super::exchange::{Target, skeleton};
use super::feed::{READ_AHEAD, Read, Reading};
use super::internal::{self, Stage};
use super::network;
use super::output::Results;
use super::plan::Plan;
use super::request::Prepared;
use super::schedule::{Completed, Pace, Plan as Due, Schedule};
use super::shared::{Control, Shared};
use super::twin::Twin;

mod virtual_time;
use crate::cli;
use crate::error::{Error, Result};
use crate::result::{Measure, ResultRecord, Status, round_us};
use crate::stats::Dist;

/// Records waiting for a dependency taken in at most: they are read ahead
/// too (their dependencies may complete at any time), but without this
/// bound a trace of long agent sessions would be read whole into memory.
/// Their dependencies all come before them, so the wait always drains.
pub(super) const MAX_WAITING: usize = 16 * READ_AHEAD;

/// Unknown `after` ids warned of one by one; the rest are counted at the end.
pub(super) const MAX_UNKNOWN_WARNINGS: u64 = 10;

/// How long a wait of the dispatcher may last.
pub(super) enum Until {
    /// To the microsecond: a request is due.
    Precise(Instant),
    /// Roughly: a safety net while waiting for completions or records.
    About(Duration),
}

/// What ended a wait.
pub(super) enum Woken {
    Control(Option<Control>),
    Records(Option<Vec<Read>>),
    Timer,
    Stop,
}

/// Who serves the requests: hyperfine's one scheduler with swappable
/// executors.
pub(super) enum Executor {
    /// A server over the network, each request in a task of its own
    /// ([`network`]), on the wall clock.
    Network(Arc<Target>),
    /// The twin's model, on the virtual clock that runs it
    /// ([`super::twin`]).
    Twin(Rc<RefCell<Twin>>),
}

/// The dispatcher: owns the schedule, sends requests when due. It runs on
/// the same thread as the requests' tasks, so a send needs no handover
/// between threads and one wakeup can serve a due request and the responses
/// that arrived meanwhile.
pub(super) struct Dispatcher<'a, C> {
    plan: &'a Plan,
    shared: Arc<Shared>,
    exec: Executor,
    results: Results,
    control: UnboundedReceiver<Control>,
    /// `None` once the run stopped reading (--duration).
    records: Option<tokio::sync::mpsc::Receiver<Vec<Read>>>,
    /// What the reader holds, and what its input is.
    reading: Arc<Reading>,
    /// Records received and not yet taken.
    unread: VecDeque<Read>,
    /// Records taken, until they are sent.
    schedule: Schedule<Prepared>,
    reader_done: bool,
    /// The reader sent its last record and closed its channel (it is
    /// about to end, and can be waited for).
    input_ended: bool,
    /// The run's clock: every due instant and wait is on it.
    clock: C,
    /// A record that stopped the run.
    failure: Option<Error>,
    lag: Dist,
    /// Requests sent more than 5 ms after they were due.
    late: u64,
    /// `after` ids that named no earlier record.
    unknown_after: u64,
    /// Conversations later delta turns may continue.
    kept: Kept,
    /// Delta turns whose conversation was not kept.
    lost_parents: u64,
    /// --live-answers turns whose `input_length` is shorter than the
    /// history they continue (sent with it and no new tokens).
    short_turns: u64,
    /// --live-answers turns shorter than even the prompt of the turn they
    /// follow (sent as conversations of their own).
    own_turns: u64,
    /// Start of the run (of the warmup, before it).
    origin: Instant,
    /// --abort-after.
    watch: FailWatch,
    /// Why the run stopped early, when it did: the advice for the final line.
    aborted: Option<String>,
    /// Requests whose task has not reported yet (warmup ones too).
    tasks: usize,
    /// The record being taken into the schedule, while it is: should that
    /// panic, its result is written from this.
    taking: Option<u64>,
    /// A request whose launch panicked before its task owned it.
    dropped: Option<(f64, bool, Prepared)>,
    /// On a virtual clock: when the last record taken by its timestamp is
    /// due (ms). Time goes no further than this until more is read, since
    /// a record not read yet may be due before it.
    read_to: f64,
}

/// What connects a dispatcher to the run's other threads, whatever its
/// executor and clock.
pub(super) struct Wiring {
    pub(super) shared: Arc<Shared>,
    pub(super) results: Results,
    /// Completions and stops, from the requests and the signal handler.
    pub(super) control: UnboundedReceiver<Control>,
    /// The records from the reader, and what it shares.
    pub(super) reader: (tokio::sync::mpsc::Receiver<Vec<Read>>, Arc<Reading>),
}

/// What a dispatcher leaves when it is done: what the run's end reports.
pub(super) struct Dispatched {
    /// A record that stopped the run.
    pub(super) failure: Option<Error>,
    pub(super) lag: Dist,
    /// Requests sent more than 5 ms after they were due.
    pub(super) late: u64,
    /// `after` ids that named no earlier record.
    pub(super) unknown_after: u64,
    /// --live-answers turns shorter than the history they continue.
    pub(super) short_turns: u64,
    /// --live-answers turns that started conversations of their own.
    pub(super) own_turns: u64,
    /// Why the run stopped early, when it did.
    pub(super) aborted: Option<String>,
    /// The reader closed its channel: every record was read.
    pub(super) input_ended: bool,
    /// On a virtual clock: how long the run lasted in its time, ms.
    pub(super) virtual_ms: Option<f64>,
}

impl<'a, C: Clock> Dispatcher<'a, C> {
    /// A dispatcher for `plan`, sending to `exec` the records the reader
    /// hands over on its channel (`reader`, with what it shares), its
    /// results to `results`, on `clock`.
    pub(super) fn new(
        plan: &'a Plan,
        wiring: Wiring,
        exec: Executor,
        clock: C,
    ) -> Dispatcher<'a, C> {
        let Wiring {
            shared,
            results,
            control,
            reader,
        } = wiring;
        Dispatcher {
            plan,
            shared,
            exec,
            results,
            control,
            records: Some(reader.0),
            reading: reader.1,
            unread: VecDeque::new(),
            schedule: Schedule::new(plan.pacing.pace),
            reader_done: false,
            input_ended: false,
            origin: clock.now(),
            clock,
            failure: None,
            lag: Dist::default(),
            late: 0,
            unknown_after: 0,
            kept: Kept::default(),
            lost_parents: 0,
            short_turns: 0,
            own_turns: 0,
            watch: FailWatch::new(plan.limits.abort_after),
            aborted: None,
            tasks: 0,
            taking: None,
            dropped: None,
            read_to: f64::NEG_INFINITY,
        }
    }

    /// What the run's end reports; the results' channel is closed.
    pub(super) fn end(self) -> Dispatched {
        Dispatched {
            failure: self.failure,
            lag: self.lag,
            late: self.late,
            unknown_after: self.unknown_after,
            short_turns: self.short_turns,
            own_turns: self.own_turns,
            aborted: self.aborted,
            input_ended: self.input_ended,
            virtual_ms: self
                .clock
                .is_virtual()
                .then(|| ms_between(self.origin, self.clock.now())),
        }
    }

    /// Run to the end; `Ok(true)` when interrupted.
    pub(super) async fn run(&mut self, run_start: &OnceLock<Instant>) -> Result<bool> {
        let pace = self.plan.pacing.pace;
        self.warm_up(pace).await?;
        if self.shared.stopping.load(Ordering::SeqCst) {
            self.cancel_rest().await;
            return Ok(true);
        }
        // Fill the read-ahead before the clock starts, so the first
        // requests never wait for a prompt to be synthesized.
        // A stop is heard here too: an input that has not ended (a pipe
        // still open) may never fill the read-ahead.
        let shared = self.shared.clone();
        while self.schedule.queued() < READ_AHEAD
            && self.schedule.waiting() < MAX_WAITING
            && !self.reader_done
            && !shared.stopping.load(Ordering::SeqCst)
        {
            tokio::select! {
                r = self.read() => match r {
                    Some(r) => self.accept(r),
                    None => self.input_closed(),
                },
                () = shared.stop_signal.notified() => {}
            }
        }
        if self.failure.is_some() {
            // Nothing was sent: the run could not start. After an internal
            // error, what was taken on still gets its result.
            if self.shared.internal.get().is_some() {
                self.cancel_rest().await;
            }
            return Err(self.failure.take().expect("just checked"));
        }
        if let Some(at) = self.plan.pacing.start_at {
            self.wait_for_start(at).await?;
        }
        let start = self.clock.now();
        self.origin = start;
        let _ = run_start.set(start);
        let duration = self.plan.pacing.duration_ms;
        loop {
            while self.schedule.queued() < READ_AHEAD
                && self.schedule.waiting() < MAX_WAITING
                && self.try_take_record()
            {}
            while let Ok(c) = self.control.try_recv() {
                self.handle(c);
            }
            if self.shared.stopping.load(Ordering::SeqCst) || self.failure.is_some() {
                break;
            }
            let now_ms = ms_between(start, self.clock.now());
            if duration.is_some_and(|d| now_ms >= d && matches!(pace, Pace::Closed { .. })) {
                self.stop_reading();
            }
            if let Executor::Twin(twin) = &self.exec {
                let twin = twin.clone();
                if self.turn_in_virtual_time(&twin, start).await {
                    continue;
                }
                break;
            }
            // Records wake the dispatcher only once half the read-ahead is
            // used: until then the top of this loop takes what the reader
            // has sent, at wakeups that happen anyway.
            let want_records = !self.reader_done
                && self.schedule.queued() < READ_AHEAD / 2
                && self.schedule.waiting() < MAX_WAITING;
            match self.schedule.next_due() {
                Some(due) if duration.is_some_and(|d| due >= d) => {
                    self.stop_reading();
                }
                Some(due) => {
                    let due_at = start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
                    if due_at > self.clock.now() + SPIN {
                        // Completions wake the wait only when one may make
                        // a request due sooner (a session turn, a cap);
                        // otherwise they are counted at the next wake, and
                        // a request costs one wakeup fewer.
                        let until = Until::Precise(due_at - SPIN);
                        let completions = self.schedule.waits_on_completions();
                        let woken = self.wait(until, want_records, completions).await;
                        self.on_wake(woken);
                        continue;
                    }
                    self.clock.sleep_until(due_at).await;
                    let now_ms = ms_between(start, self.clock.now());
                    while let Some((due, req)) = self.schedule.pop_due(now_ms) {
                        if duration.is_some_and(|d| due >= d) {
                            // Due after the end: left out, like --limit.
                            self.schedule.complete(None, now_ms);
                            self.stop_reading();
                            break;
                        }
                        self.launch(req, due, false);
                    }
                }
                None if self.schedule.in_flight() == 0
                    && self.schedule.is_empty()
                    && self.reader_done =>
                {
                    break;
                }
                None => {
                    // Waiting for completions (sessions, a concurrency
                    // cap) or for the reader.
                    let until = Until::About(Duration::from_millis(100));
                    let woken = self.wait(until, want_records, true).await;
                    self.on_wake(woken);
                }
            }
        }
        let interrupted = self.shared.stopping.load(Ordering::SeqCst);
        self.cancel_rest().await;
        Ok(interrupted)
    }

    /// --start-at: wait for a wall-clock instant, in steps, so that Ctrl-C
    /// is not held up until the start.
    pub(super) async fn wait_for_start(&mut self, at: SystemTime) -> Result<()> {
        let wait = at.duration_since(SystemTime::now()).map_err(|_| {
            Error::usage(format!(
                "--start-at {} is already past (the read-ahead and the warmup are done first)",
                crate::time::rfc3339(at)
            ))
        })?;
        if !clock_synchronized() {
            self.shared.print(|| {
                cli::warn(
                    "the system clock is not synchronized (NTP): shards on other machines may start apart",
                )
            });
        }
        let until = self.clock.now() + wait;
        while !self.shared.stopping.load(Ordering::SeqCst) && self.clock.now() < until {
            let step = until.min(self.clock.now() + Duration::from_millis(50));
            self.clock.sleep_until(step).await;
        }
        Ok(())
    }

    /// Wait for a stop, a completion (when wanted), a batch of records
    /// (when wanted), or the time given.
    pub(super) async fn wait(
        &mut self,
        until: Until,
        want_records: bool,
        want_completions: bool,
    ) -> Woken {
        let Dispatcher {
            control,
            records,
            clock,
            shared,
            ..
        } = self;
        let records = records.as_mut().filter(|_| want_records);
        tokio::select! {
            biased;
            c = control.recv(), if want_completions => Woken::Control(c),
            () = shared.stop_signal.notified(), if !want_completions => Woken::Stop,
            r = async {
                match records {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => Woken::Records(r),
            () = async {
                let at = match until {
                    Until::Precise(at) => at,
                    Until::About(d) => clock.now() + d,
                };
                clock.sleep_until(at).await
            } => Woken::Timer,
        }
    }

    pub(super) fn on_wake(&mut self, woken: Woken) {
        match woken {
            Woken::Control(Some(c)) => self.handle(c),
            // The senders live in `Shared`, which outlives the dispatcher.
            Woken::Control(None) | Woken::Timer | Woken::Stop => {}
            Woken::Records(Some(batch)) => self.unread.extend(batch),
            Woken::Records(None) => self.input_closed(),
        }
    }

    /// Send the warmup records, all at once (up to the concurrency cap),
    /// and wait for their answers.
    pub(super) async fn warm_up(&mut self, pace: Pace) -> Result<()> {
        let cap = pace.max_in_flight().unwrap_or(usize::MAX);
        let mut left = self.plan.warmup;
        while left > 0 && !self.shared.stopping.load(Ordering::SeqCst) {
            if self.tasks >= cap {
                if let Some(c) = self.next_control().await {
                    self.handle(c);
                }
                continue;
            }
            match self.read().await {
                Some(Read::Ready(req)) => {
                    self.launch(req, 0.0, true);
                }
                Some(Read::Unsent(req)) => self.unsent(req, None, true),
                Some(Read::Origin(_)) => continue,
                Some(Read::Failed(e)) => {
                    self.reader_done = true;
                    self.failure = Some(e);
                    break;
                }
                None => {
                    self.input_closed();
                    break;
                }
            }
            left -= 1;
        }
        while self.tasks > 0 {
            match self.next_control().await {
                Some(c) => self.handle(c),
                None => break,
            }
        }
        match self.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The reader closed its channel: every record has been read.
    fn input_closed(&mut self) {
        self.reader_done = true;
        self.input_ended = true;
    }

    /// The next record, waiting for the reader; `None` when it is done.
    pub(super) async fn read(&mut self) -> Option<Read> {
        loop {
            if let Some(r) = self.unread.pop_front() {
                return Some(r);
            }
            let batch = self.records.as_mut()?.recv().await?;
            self.unread.extend(batch);
        }
    }

    /// Take a record if one is ready; false when none is.
    pub(super) fn try_take_record(&mut self) -> bool {
        if self.unread.is_empty() {
            let Some(rx) = &mut self.records else {
                self.reader_done = true;
                return false;
            };
            match rx.try_recv() {
                Ok(batch) => self.unread.extend(batch),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return false,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    self.input_closed();
                    return false;
                }
            }
        }
        match self.unread.pop_front() {
            Some(r) => {
                self.accept(r);
                true
            }
            None => false,
        }
    }

    pub(super) fn accept(&mut self, read: Read) {
        match read {
            Read::Ready(req) => {
                self.taking = Some(req.index);
                internal::fail_point(Stage::Accept, req.index);
                if let Due::At(due) = self.schedule.push(req) {
                    self.read_to = due;
                }
                self.taking = None;
                for u in self.schedule.take_unknown() {
                    self.unknown_after += 1;
                    if self.unknown_after <= MAX_UNKNOWN_WARNINGS {
                        self.shared.print(|| {
                            cli::warn(format!(
                                "record {}: `after` names `{}`, which no earlier record of this run has \
                                 (sliced away?): it is scheduled as if it had no such dependency",
                                u.key + 1,
                                u.id
                            ))
                        });
                    }
                }
            }
            Read::Unsent(req) => self.unsent(req, None, false),
            Read::Origin(ts) => self.schedule.set_origin(ts),
            Read::Failed(e) => {
                self.reader_done = true;
                self.failure = Some(e);
            }
        }
    }

    /// --duration reached: read no more; drop what is queued (left out).
    pub(super) fn stop_reading(&mut self) {
        self.records = None;
        self.unread.clear();
        self.reader_done = true;
        drop(self.schedule.drain());
    }

    pub(super) fn handle(&mut self, c: Control) {
        match c {
            Control::Done {
                key,
                id,
                session,
                conversation,
                at,
                lag_ms,
                warmup,
                fate,
            } => {
                self.tasks -= 1;
                if warmup {
                    return;
                }
                // Kept before the turns waiting for it are released.
                if let Some((c, prompt, tokens)) = conversation {
                    self.kept.keep(
                        id.as_deref(),
                        session.as_deref(),
                        (Arc::new(c), prompt, tokens),
                    );
                }
                let done = Completed {
                    key,
                    id: id.as_deref(),
                    session: session.as_deref(),
                };
                self.schedule
                    .complete(Some(done), ms_between(self.origin, at));
                self.lag.record(lag_ms);
                if lag_ms > 5.0 {
                    self.late += 1;
                }
                self.watch_for_failures(&fate);
            }
            Control::Stop => {}
        }
    }

    /// Stop the run when its first requests all failed: stop sending (as
    /// Ctrl-C does) and cancel the requests in flight at once, since they
    /// are likely to fail the same way.
    fn watch_for_failures(&mut self, fate: &Fate) {
        if !self.watch.watching() || self.shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let plan = self.plan;
        let url = match &self.exec {
            Executor::Network(target) => super::preflight::redacted(target.url.as_str()),
            Executor::Twin(_) => "the twin".to_string(),
        };
        // Built only when the run stops.
        let cx = || Context {
            key_env: &plan.target.api_key_env,
            key_set: std::env::var(&plan.target.api_key_env).is_ok_and(|k| !k.is_empty()),
            auth_header: plan.target.auth_given,
            url: &url,
            model: plan.body.model.as_deref(),
        };
        let Some(abort) = self.watch.observe(fate, cx) else {
            return;
        };
        self.shared
            .print(|| eprintln!("{}: error: {}", cli::tool(), abort.message));
        self.aborted = Some(abort.advice);
        self.shared.stop();
        let _ = self.shared.cancel.send(true);
    }

    /// `K/N` for results of a shard.
    pub(super) fn shard_label(&self) -> Option<String> {
        self.plan.pacing.shard.map(|(k, n)| format!("{k}/{n}"))
    }

    /// Start one request; its task runs as soon as the dispatcher waits.
    pub(super) fn launch(&mut self, mut req: Prepared, scheduled_ms: f64, warmup: bool) {
        // Until its task owns the request, a panic leaves it here for its
        // result.
        let before = std::panic::catch_unwind(AssertUnwindSafe(|| {
            internal::fail_point(Stage::Dispatch, req.index);
            if let Some(parent) = req.parent.take() {
                self.continue_conversation(&mut req, &parent);
            }
        }));
        if let Err(panic) = before {
            self.dropped = Some((scheduled_ms, warmup, req));
            std::panic::resume_unwind(panic);
        }
        self.tasks += 1;
        self.shared
            .counters
            .sent
            .fetch_add(u64::from(!warmup), Ordering::Relaxed);
        match &self.exec {
            Executor::Network(target) => network::spawn(network::Launch {
                req,
                scheduled_ms,
                warmup,
                origin: self.origin,
                shared: self.shared.clone(),
                target: target.clone(),
                results: self.results.clone(),
                cancel: self.shared.cancel.subscribe(),
                shard: self.shard_label(),
            }),
            Executor::Twin(twin) => {
                // Held back while the model's queue was long, a request
                // arrives at its due time, as it would have; one a cap of
                // the run's held back leaves now, late, as in a replay.
                let now = self.clock.now();
                let due = self.origin + Duration::from_secs_f64(scheduled_ms.max(0.0) / 1000.0);
                let at = match self.plan.pacing.pace.max_in_flight() {
                    None => due.min(now),
                    Some(_) => now,
                };
                let sent_ms = ms_between(self.origin, at);
                twin.borrow_mut()
                    .arrive(req, at, scheduled_ms, sent_ms, warmup);
            }
        }
    }

    /// A delta turn: its body gets the conversation it continues, as sent
    /// and answered. Without one (its parent failed to start, was never
    /// kept, or the turn opens its session) it goes with its own messages.
    fn continue_conversation(&mut self, req: &mut Prepared, parent: &Parent) {
        let Some(span) = req.messages_span else {
            return;
        };
        match self.kept.get(parent) {
            Some((messages, prompt_before, history)) => {
                let asked = req.input_length.unwrap_or(0);
                let body = match req.synthesized.take() {
                    // --live-answers: a turn shorter than even the prompt
                    // of the turn it follows cannot hold it (a subagent's
                    // first call, a compacted context): it starts a
                    // conversation of its own, as recorded.
                    Some(_) if asked < prompt_before => {
                        self.own_turns += 1;
                        return;
                    }
                    // The history, then the prompt's words past it (none
                    // for a turn shorter than the history: an answer the
                    // agent did not keep whole, such as its thinking).
                    Some(prompt) => {
                        if asked < history {
                            self.short_turns += 1;
                        }
                        conversation::live_turn(&req.body, span, &messages, &prompt, history)
                    }
                    None => conversation::splice(&req.body, span, &messages),
                };
                // What follows the messages is unchanged.
                let tail = req.body.len() - span.1;
                req.messages_span = Some((span.0, body.len() - tail));
                req.body = body.into();
            }
            None => {
                if let Parent::Id(id) = parent {
                    self.lost_parents += 1;
                    if self.lost_parents <= MAX_UNKNOWN_WARNINGS {
                        self.shared.print(|| {
                            cli::warn(format!(
                                "record {}: the conversation of `{id}`, which this delta turn \
                                 continues, is not kept (it had no `messages`, or more than {} \
                                 conversations came after it): only the turn's own messages are sent",
                                req.index + 1,
                                conversation::MAX_KEPT
                            ))
                        });
                    }
                }
            }
        }
    }

    /// A `cancelled` result for a request never sent.
    pub(super) fn unsent(&self, req: Prepared, due: Option<f64>, warmup: bool) {
        let now = ms_between(self.origin, self.clock.now());
        let mut r = skeleton(
            &req,
            round_us(due.unwrap_or(now)),
            round_us(now),
            crate::time::rfc3339(self.clock.system_time()),
        );
        r.warmup = warmup;
        r.shard = self.shard_label();
        r.measure.error = Some(crate::result::NOT_SENT.into());
        self.results.send(r);
    }

    /// After a stop: `cancelled` results for everything unsent, including
    /// the records still to be read; then wait for the requests in flight
    /// (their tasks write their own results).
    pub(super) async fn cancel_rest(&mut self) {
        let failed = self.failure.is_some();
        for (due, req) in self.schedule.drain() {
            self.unsent(req, due, false);
        }
        if !failed {
            self.failure = self.drain().await;
        }
        self.records = None;
        self.unread.clear();
        if let Executor::Twin(twin) = &self.exec {
            self.finish_in_virtual_time(&twin.clone()).await;
        }
        while self.schedule.in_flight() > 0 {
            match self.next_control().await {
                Some(c) => self.handle(c),
                None => break,
            }
        }
    }
}

impl<C: Clock> Dispatcher<'_, C> {
    /// After a stop: a `cancelled` result for each record still to come
    /// from the reader, all of an input file's, what a pipe sends within
    /// [`DRAIN`]; a second signal ends the reading at once (the end of
    /// --grace does not). Then the records the reader holds, and it
    /// reads no more. The error of a record that stops the run, if one
    /// came.
    async fn drain(&mut self) -> Option<Error> {
        let mut failure = None;
        let reading = self.records.is_some();
        // The upstream tool of a pipeline is stopping too (Ctrl-C reaches
        // the whole pipeline): its last records come within --grace.
        let until = self
            .reading
            .endless
            .then(|| tokio::time::Instant::now() + DRAIN.max(self.plan.limits.grace));
        let mut second = self.shared.second_signal.subscribe();
        loop {
            let next = tokio::select! {
                biased;
                _ = second.wait_for(|s| *s) => break,
                () = async {
                    match until {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => break,
                next = self.read() => next,
            };
            match next {
                Some(read) => self.unsent_read(read, &mut failure),
                None => {
                    if reading {
                        self.input_closed();
                    }
                    break;
                }
            }
        }
        // The batches handed over meanwhile, then the reader's own.
        if let Some(rx) = &mut self.records {
            loop {
                while let Ok(batch) = rx.try_recv() {
                    self.unread.extend(batch);
                }
                if let Some(held) = self.reading.try_close() {
                    self.unread.extend(held);
                    while let Ok(batch) = rx.try_recv() {
                        self.unread.extend(batch);
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        for read in std::mem::take(&mut self.unread) {
            self.unsent_read(read, &mut failure);
        }
        failure
    }

    /// A `cancelled` result for a record read after a stop (the first
    /// record that stops the run, into `failure`).
    fn unsent_read(&mut self, read: Read, failure: &mut Option<Error>) {
        match read {
            Read::Ready(req) | Read::Unsent(req) => self.unsent(req, None, false),
            Read::Failed(e) => {
                failure.get_or_insert(e);
            }
            Read::Origin(_) => {}
        }
    }

    /// After the dispatcher panicked (`what`, described): stop at once,
    /// write a result for every record taken on and not yet answered, as
    /// an `error` naming the internal error, and wait for the requests in
    /// flight, cancelled at once, to write theirs.
    pub(super) async fn recover(&mut self, what: String) -> Error {
        self.shared.fail(what.clone());
        // Results of unsent records are written `cancelled`; the writer
        // makes them `error`s naming the internal error.
        if let Some((due, warmup, req)) = self.dropped.take() {
            self.unsent(req, Some(due), warmup);
        }
        // The schedule may be half updated: what it still yields is kept.
        let queued = std::panic::catch_unwind(AssertUnwindSafe(|| self.schedule.drain()))
            .unwrap_or_default();
        for (due, req) in queued {
            if self.taking == Some(req.index) {
                self.taking = None;
            }
            self.unsent(req, due, false);
        }
        // The rest of the input, as after Ctrl-C.
        let _ = self.drain().await;
        // The reader, if blocked handing over more, stops.
        self.records = None;
        self.unread.clear();
        if let Some(index) = self.taking.take() {
            // Lost inside the schedule: its index at least.
            let now = round_us(ms_between(self.origin, self.clock.now()));
            self.results.send(ResultRecord {
                index,
                scheduled_ms: now,
                sent_ms: now,
                start_time: crate::time::rfc3339(self.clock.system_time()),
                shard: self.shard_label(),
                measure: Measure {
                    status: Status::Error,
                    error: Some(format!("{what}: not sent")),
                    ..Measure::default()
                },
                ..ResultRecord::default()
            });
        }
        // The tasks in flight end at once (cancelled) with their results.
        if let Executor::Twin(twin) = &self.exec {
            twin.borrow_mut().cancel_all(self.clock.now());
        }
        while self.tasks > 0 {
            match tokio::time::timeout(Duration::from_secs(10), self.control.recv()).await {
                Ok(Some(Control::Done { .. })) => self.tasks -= 1,
                Ok(Some(Control::Stop)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        internal::stopped(&what)
    }
}

/// After a stop, how long an input that may never end (a pipe) is read
/// on at least (--grace, when longer): the records it already holds get
/// their results, then it is read no more.
const DRAIN: Duration = Duration::from_millis(500);

/// Whether the kernel says the clock is synchronized (adjtimex does not
/// report TIME_ERROR); true where that cannot be read.
pub(super) fn clock_synchronized() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: adjtimex with modes = 0 only reads the clock's state
        // into the zeroed struct it is given.
        let state = unsafe {
            let mut tx: libc::timex = std::mem::zeroed();
            libc::adjtimex(&mut tx)
        };
        state != libc::TIME_ERROR
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

pub(super) fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}
