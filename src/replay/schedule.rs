//! When each request is due: the scheduling rules of trace-replay, kept
//! free of threads and clocks so that tests can drive them with exact times.
//!
//! Times are milliseconds since the run started. Open loop: a record is due
//! at its timestamp minus the first record's; a later turn of a session
//! with `delay` is due `delay` ms after the previous turn of its session
//! completed, whenever that is. `--max-concurrency` holds due requests back
//! while that many are in flight (they are sent late, and the lag shows).
//! Closed loop (`--concurrency N`): timestamps and delays are ignored, and a
//! request is due as soon as one of the N slots is free.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// What the scheduler needs to know of a request.
pub trait Turn {
    /// Trace timestamp, ms (absolute or relative: only differences count).
    fn timestamp(&self) -> Option<f64>;
    /// The conversation the request belongs to.
    fn session(&self) -> Option<&str>;
    /// Wait after the previous turn of the session completed, ms.
    fn delay(&self) -> Option<f64>;
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// At the trace's timestamps, with at most this many in flight.
    Open { max_in_flight: Option<usize> },
    /// As fast as this many closed-loop workers allow.
    Closed { workers: usize },
}

impl Pace {
    /// The most requests in flight at once, if capped.
    pub fn max_in_flight(self) -> Option<usize> {
        match self {
            Pace::Open { max_in_flight } => max_in_flight,
            Pace::Closed { workers } => Some(workers),
        }
    }
}

struct Timed<T> {
    due: f64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Timed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Timed<T> {}
impl<T> PartialOrd for Timed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Timed<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.due
            .total_cmp(&other.due)
            .then(self.seq.cmp(&other.seq))
    }
}

struct Session<T> {
    /// A turn of this session is queued or in flight.
    busy: bool,
    /// Later turns waiting for the busy one to complete.
    waiting: VecDeque<T>,
}

/// The queue of requests not yet sent.
pub struct Schedule<T> {
    pace: Pace,
    /// Timestamp of the first record, the origin of the schedule.
    origin: Option<f64>,
    /// Last timestamp seen, for records without one.
    last_timestamp: f64,
    /// Requests due at their timestamp, in trace order.
    by_timestamp: VecDeque<(f64, T)>,
    /// Session turns due after their previous turn.
    after_turn: BinaryHeap<Reverse<Timed<T>>>,
    seq: u64,
    sessions: HashMap<String, Session<T>>,
    /// Turns waiting in sessions.
    waiting: usize,
    in_flight: usize,
}

impl<T: Turn> Schedule<T> {
    /// An empty schedule.
    pub fn new(pace: Pace) -> Schedule<T> {
        Schedule {
            pace,
            origin: None,
            last_timestamp: 0.0,
            by_timestamp: VecDeque::new(),
            after_turn: BinaryHeap::new(),
            seq: 0,
            sessions: HashMap::new(),
            waiting: 0,
            in_flight: 0,
        }
    }

    /// Take on the next record of the trace (in trace order).
    pub fn push(&mut self, item: T) {
        let ts = item.timestamp().unwrap_or(self.last_timestamp);
        self.last_timestamp = ts;
        let origin = *self.origin.get_or_insert(ts);
        if let Pace::Closed { .. } = self.pace {
            self.by_timestamp.push_back((0.0, item));
            return;
        }
        let Some(id) = item.session().map(str::to_string) else {
            self.by_timestamp.push_back((ts - origin, item));
            return;
        };
        let session = self.sessions.entry(id).or_insert_with(|| Session {
            busy: false,
            waiting: VecDeque::new(),
        });
        // A session is in the map only while one of its turns is queued or
        // in flight: a turn with a delay then waits for it to complete.
        if item.delay().is_some() && session.busy {
            session.waiting.push_back(item);
            self.waiting += 1;
        } else {
            session.busy = true;
            self.by_timestamp.push_back((ts - origin, item));
        }
    }

    /// Count time from this timestamp rather than the first record's (for
    /// a shard of a trace: its whole trace's first); before any record.
    pub fn set_origin(&mut self, timestamp: f64) {
        self.origin.get_or_insert(timestamp);
        self.last_timestamp = timestamp;
    }

    /// Records waiting by timestamp (the read-ahead).
    pub fn queued(&self) -> usize {
        self.by_timestamp.len()
    }

    /// Requests sent and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The earliest due time of a request that could be sent now or later,
    /// or `None` when nothing is queued or every slot is taken.
    pub fn next_due(&self) -> Option<f64> {
        if self
            .pace
            .max_in_flight()
            .is_some_and(|l| self.in_flight >= l)
        {
            return None;
        }
        let a = self.by_timestamp.front().map(|(d, _)| *d);
        let b = self.after_turn.peek().map(|Reverse(t)| t.due);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next request due at or before `now`, counted as in flight, with
    /// its due time.
    pub fn pop_due(&mut self, now: f64) -> Option<(f64, T)> {
        let due = self.next_due().filter(|d| *d <= now)?;
        let from_heap = self
            .after_turn
            .peek()
            .is_some_and(|Reverse(t)| t.due == due)
            && self.by_timestamp.front().is_none_or(|(d, _)| *d > due);
        let item = if from_heap {
            self.after_turn.pop().map(|Reverse(t)| t.item)
        } else {
            self.by_timestamp.pop_front().map(|(_, item)| item)
        }?;
        self.in_flight += 1;
        // A closed-loop request is due when its slot frees up.
        let due = match self.pace {
            Pace::Closed { .. } => now,
            Pace::Open { .. } => due,
        };
        Some((due, item))
    }

    /// A request completed at `at`: frees its slot and, for a session,
    /// makes the next turn due `delay` later.
    pub fn complete(&mut self, session: Option<&str>, at: f64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Pace::Closed { .. } = self.pace {
            return;
        }
        let Some(s) = session.and_then(|id| self.sessions.get_mut(id)) else {
            return;
        };
        match s.waiting.pop_front() {
            Some(next) => {
                self.waiting -= 1;
                let due = at + next.delay().unwrap_or(0.0);
                self.seq += 1;
                self.after_turn.push(Reverse(Timed {
                    due,
                    seq: self.seq,
                    item: next,
                }));
            }
            None => s.busy = false,
        }
        if let Some(id) = session {
            if self.sessions.get(id).is_some_and(|s| !s.busy) {
                // Forget finished sessions so memory follows the live ones;
                // a later turn then starts by its own timestamp.
                self.sessions.remove(id);
            }
        }
    }

    /// True when nothing is queued (in flight requests may remain).
    pub fn is_empty(&self) -> bool {
        self.by_timestamp.is_empty() && self.after_turn.is_empty() && self.waiting == 0
    }

    /// Whether a completion can make a request due sooner: a session turn
    /// waits for one, or a slot limit holds requests back. Otherwise the
    /// schedule is fixed and completions can be counted later.
    pub fn waits_on_completions(&self) -> bool {
        self.waiting > 0 || self.pace.max_in_flight().is_some()
    }

    /// Remove every request not yet sent, with its due time where known.
    pub fn drain(&mut self) -> Vec<(Option<f64>, T)> {
        let mut out: Vec<(Option<f64>, T)> = self
            .by_timestamp
            .drain(..)
            .map(|(d, t)| (Some(d), t))
            .collect();
        out.extend(
            self.after_turn
                .drain()
                .map(|Reverse(t)| (Some(t.due), t.item)),
        );
        for s in self.sessions.values_mut() {
            out.extend(s.waiting.drain(..).map(|t| (None, t)));
        }
        self.waiting = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct R {
        n: u32,
        ts: f64,
        session: Option<&'static str>,
        delay: Option<f64>,
    }

    impl Turn for R {
        fn timestamp(&self) -> Option<f64> {
            Some(self.ts)
        }
        fn session(&self) -> Option<&str> {
            self.session
        }
        fn delay(&self) -> Option<f64> {
            self.delay
        }
    }

    fn r(n: u32, ts: f64) -> R {
        R {
            n,
            ts,
            session: None,
            delay: None,
        }
    }

    fn turn(n: u32, ts: f64, session: &'static str, delay: Option<f64>) -> R {
        R {
            n,
            ts,
            session: Some(session),
            delay,
        }
    }

    /// Everything due at or before `now`, as (record, due).
    fn pop_all(s: &mut Schedule<R>, now: f64) -> Vec<(u32, f64)> {
        std::iter::from_fn(|| s.pop_due(now))
            .map(|(d, r)| (r.n, d))
            .collect()
    }

    #[test]
    fn open_loop_is_due_at_offsets_from_the_first_timestamp() {
        let mut s = Schedule::new(Pace::Open {
            max_in_flight: None,
        });
        for (n, ts) in [(0, 1000.0), (1, 1000.5), (2, 1250.0), (3, 1250.0)] {
            s.push(r(n, ts));
        }
        assert_eq!(s.next_due(), Some(0.0));
        assert_eq!(pop_all(&mut s, 0.4), vec![(0, 0.0)]);
        assert_eq!(s.next_due(), Some(0.5));
        assert_eq!(pop_all(&mut s, 249.9), vec![(1, 0.5)]);
        // Nothing in flight completes, yet the rest go out: open loop.
        assert_eq!(pop_all(&mut s, 250.0), vec![(2, 250.0), (3, 250.0)]);
        assert_eq!(s.in_flight(), 4);
        assert!(s.is_empty());
    }

    #[test]
    fn max_concurrency_holds_due_requests_back() {
        let mut s = Schedule::new(Pace::Open {
            max_in_flight: Some(2),
        });
        for n in 0..4 {
            s.push(r(n, f64::from(n) * 10.0));
        }
        assert_eq!(pop_all(&mut s, 100.0), vec![(0, 0.0), (1, 10.0)]);
        assert_eq!(s.next_due(), None);
        s.complete(None, 120.0);
        // Sent at 120 though due at 20: the lag is the wait.
        assert_eq!(pop_all(&mut s, 120.0), vec![(2, 20.0)]);
        s.complete(None, 130.0);
        s.complete(None, 130.0);
        assert_eq!(pop_all(&mut s, 130.0), vec![(3, 30.0)]);
    }

    #[test]
    fn a_later_turn_waits_for_the_previous_one_plus_delay() {
        let mut s = Schedule::new(Pace::Open {
            max_in_flight: None,
        });
        s.push(turn(0, 0.0, "a", None));
        s.push(r(1, 5.0));
        s.push(turn(2, 8.0, "a", Some(100.0)));
        s.push(turn(3, 9.0, "a", Some(50.0)));
        s.push(r(4, 500.0));
        assert_eq!(pop_all(&mut s, 10.0), vec![(0, 0.0), (1, 5.0)]);
        // Turn 2's timestamp is long past, but turn 0 has not completed.
        assert_eq!(s.next_due(), Some(500.0));
        s.complete(Some("a"), 40.0);
        assert_eq!(s.next_due(), Some(140.0));
        assert_eq!(pop_all(&mut s, 139.0), vec![]);
        assert_eq!(pop_all(&mut s, 140.0), vec![(2, 140.0)]);
        s.complete(Some("a"), 300.0);
        assert_eq!(pop_all(&mut s, 400.0), vec![(3, 350.0)]);
        assert_eq!(pop_all(&mut s, 500.0), vec![(4, 500.0)]);
        s.complete(Some("a"), 420.0);
        assert!(s.is_empty());
    }

    #[test]
    fn sessions_interleave_independently() {
        let mut s = Schedule::new(Pace::Open {
            max_in_flight: None,
        });
        s.push(turn(0, 0.0, "a", None));
        s.push(turn(1, 1.0, "b", Some(7.0)));
        s.push(turn(2, 2.0, "a", Some(10.0)));
        s.push(turn(3, 3.0, "b", Some(20.0)));
        // b's first turn has a delay but no previous turn: its timestamp counts.
        assert_eq!(pop_all(&mut s, 1.0), vec![(0, 0.0), (1, 1.0)]);
        s.complete(Some("b"), 2.0);
        s.complete(Some("a"), 4.0);
        assert_eq!(pop_all(&mut s, 100.0), vec![(2, 14.0), (3, 22.0)]);
    }

    #[test]
    fn closed_loop_ignores_time_and_keeps_n_in_flight() {
        let mut s = Schedule::new(Pace::Closed { workers: 2 });
        s.push(r(0, 0.0));
        s.push(turn(1, 1e6, "a", None));
        s.push(turn(2, 2e6, "a", Some(1e6)));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0), (1, 0.0)]);
        s.complete(None, 3.0);
        assert_eq!(pop_all(&mut s, 3.5), vec![(2, 3.5)]);
    }

    #[test]
    fn drain_returns_everything_unsent() {
        let mut s = Schedule::new(Pace::Open {
            max_in_flight: None,
        });
        s.push(turn(0, 0.0, "a", None));
        s.push(turn(1, 1.0, "a", Some(5.0)));
        s.push(r(2, 9.0));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        let mut left: Vec<u32> = s.drain().into_iter().map(|(_, r)| r.n).collect();
        left.sort();
        assert_eq!(left, vec![1, 2]);
        assert!(s.is_empty());
    }
}
