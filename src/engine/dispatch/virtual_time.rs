//! The dispatcher on a virtual clock (the twin's): time moves only when
//! the run waits, so the run reads its input up to each instant before
//! going there, and waits for completions by running the model.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::super::clock::Clock;
use super::super::feed::READ_AHEAD;
use super::super::shared::Control;
use super::super::twin::Twin;
use super::{Dispatcher, Executor, MAX_WAITING, ms_between};

impl<C: Clock> Dispatcher<'_, C> {
    /// One turn of the run on a virtual clock (the twin's): read what may
    /// be due by the next event, go to that event (a request due, or the
    /// end of one of the model's steps) and send what is due then. False
    /// when nothing is left to do.
    pub(super) async fn turn_in_virtual_time(
        &mut self,
        twin: &Rc<RefCell<Twin>>,
        start: Instant,
    ) -> bool {
        let duration = self.plan.pacing.duration_ms;
        let held = twin.borrow().backed_up();
        let next_end = twin.borrow_mut().next_end();
        if !held {
            // A record not read yet may be due before the next event:
            // read on until the records read reach past it. Records come
            // in timestamp order, so a later one is due no earlier.
            let shared = self.shared.clone();
            loop {
                let now_ms = ms_between(start, self.clock.now());
                let end_ms = next_end.map(|e| ms_between(start, e));
                let next = match (self.schedule.next_due(), end_ms) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b).unwrap_or(f64::INFINITY),
                };
                if self.reader_done
                    || self.read_to > next.max(now_ms)
                    || self.schedule.queued() >= READ_AHEAD
                    || self.schedule.waiting() >= MAX_WAITING
                {
                    break;
                }
                tokio::select! {
                    r = self.read() => match r {
                        Some(r) => self.accept(r),
                        None => self.input_closed(),
                    },
                    () = shared.stop_signal.notified() => return true,
                }
                if self.failure.is_some() {
                    return true;
                }
            }
        }
        match self.schedule.next_due() {
            Some(due) if duration.is_some_and(|d| due >= d) => {
                self.stop_reading();
            }
            Some(due) if !held => {
                let due_at = start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
                if due_at > self.clock.now() {
                    self.clock.sleep_until(due_at).await;
                    if self.clock.now() < due_at {
                        // A request completed first.
                        return true;
                    }
                }
                let now_ms = ms_between(start, self.clock.now()).max(due);
                while let Some((due, req)) = self.schedule.pop_due(now_ms) {
                    if duration.is_some_and(|d| due >= d) {
                        self.schedule.complete(None, now_ms);
                        self.stop_reading();
                        break;
                    }
                    self.launch(req, due, false);
                }
            }
            // Requests held back, or none due before the model's next
            // step ends: the model runs to it.
            _ if next_end.is_some() => {
                self.clock
                    .sleep_until(next_end.expect("just checked"))
                    .await;
            }
            // Nothing in the model, nothing due: what is left waits for
            // records not read yet, or for nothing.
            _ if !self.reader_done => match self.read().await {
                Some(r) => self.accept(r),
                None => self.input_closed(),
            },
            _ => return false,
        }
        true
    }

    /// After a stop on a virtual clock: the requests in the model get
    /// --grace of its time to complete, as a replay's requests in flight
    /// get it; then (or at a second signal) the rest end `cancelled`.
    pub(super) async fn finish_in_virtual_time(&mut self, twin: &Rc<RefCell<Twin>>) {
        let deadline = self.clock.now() + self.plan.limits.grace;
        loop {
            while let Ok(c) = self.control.try_recv() {
                self.handle(c);
            }
            let next = twin.borrow_mut().next_end();
            let cancelled = *self.shared.cancel.borrow();
            match next {
                Some(end) if end <= deadline && !cancelled => {
                    self.clock.sleep_until(end).await;
                }
                Some(_) => {
                    // The grace runs out first (a second signal: now).
                    if !cancelled {
                        self.clock.sleep_until(deadline).await;
                    }
                    twin.borrow_mut().cancel_all(self.clock.now());
                }
                None => break,
            }
        }
    }

    /// The next completion told (or `None` when none can come): on a
    /// virtual clock the model runs until one comes.
    pub(super) async fn next_control(&mut self) -> Option<Control> {
        if let Executor::Twin(twin) = &self.exec {
            let twin = twin.clone();
            loop {
                if let Ok(c) = self.control.try_recv() {
                    return Some(c);
                }
                let next = twin.borrow_mut().next_end()?;
                self.clock.sleep_until(next).await;
            }
        }
        self.control.recv().await
    }
}
