//! When each request is due: the scheduling rules of trace-replay, kept
//! free of threads and clocks so that tests can drive them with exact times.
//!
//! Times are milliseconds since the run started. Open loop: a record is due
//! at its timestamp minus the first record's. A record with `after` is due
//! `delay` ms (0 when absent) after the last of the records it names
//! completed, whatever their outcome: several records after one fan out,
//! one record after several joins them. A later turn of a session with
//! `delay` and no `after` waits for the previous turn of its session the
//! same way. `--max-concurrency` holds due requests back while that many
//! are in flight (they are sent late, and the lag shows). Closed loop
//! (`--concurrency N`): timestamps, delays and dependencies are ignored,
//! and a request is due as soon as one of the N slots is free.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// What the scheduler needs to know of a request.
pub trait Turn {
    /// A key unique in the run (the record's position in the trace).
    fn key(&self) -> u64;
    /// Trace timestamp, ms (absolute or relative: only differences count).
    fn timestamp(&self) -> Option<f64>;
    /// The record's `id`, which later records' `after` may name.
    fn id(&self) -> Option<&str>;
    /// The conversation the request belongs to.
    fn session(&self) -> Option<&str>;
    /// Wait after the dependencies (or the previous turn of the session)
    /// completed, ms.
    fn delay(&self) -> Option<f64>;
    /// The ids of earlier records this one waits for.
    fn after(&self) -> &[String];
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

/// Where a record that others may wait for stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Progress {
    /// Queued, waiting or in flight: its key.
    Open(u64),
    /// Completed at this time.
    Done(f64),
}

/// A request waiting for dependencies to complete.
struct Blocked<T> {
    item: T,
    /// Dependencies not yet completed.
    open: usize,
    /// The latest completion among those that did.
    ready_at: f64,
    delay: f64,
}

/// A record that names an `after` id no earlier record has.
#[derive(Clone, Debug, PartialEq)]
pub struct Unknown {
    /// The record's key.
    pub key: u64,
    /// The id it names.
    pub id: String,
}

/// What [`Schedule::push`] decided for a record: what `--dry-run` prints.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Due at this time (ms from the origin), by its timestamp.
    At(f64),
    /// Due `delay` ms after the records with these ids completed (the ids
    /// its `after` names that an earlier record has, in its order).
    AfterIds { ids: Vec<String>, delay: f64 },
    /// Due `delay` ms after the previous turn of its session completed.
    AfterTurn { delay: f64 },
    /// Closed loop: due when one of the workers is free.
    Slot,
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
    /// Requests due after their dependencies, by due time.
    after_turn: BinaryHeap<Reverse<Timed<T>>>,
    seq: u64,
    /// Requests whose dependencies have not all completed, by key.
    blocked: HashMap<u64, Blocked<T>>,
    /// Keys of blocked requests waiting for each open key.
    dependents: HashMap<u64, Vec<u64>>,
    /// Each id seen, and each session's latest turn: whether it completed.
    /// One small entry per id and per session, kept for the whole run, so
    /// that a record named late still counts from its completion.
    ids: HashMap<String, Progress>,
    sessions: HashMap<String, Progress>,
    /// `after` ids that named no earlier record.
    unknown: Vec<Unknown>,
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
            blocked: HashMap::new(),
            dependents: HashMap::new(),
            ids: HashMap::new(),
            sessions: HashMap::new(),
            unknown: Vec::new(),
            in_flight: 0,
        }
    }

    /// Take on the next record of the trace (in trace order), and say
    /// when it is due.
    pub fn push(&mut self, item: T) -> Plan {
        let timestamp = item.timestamp();
        let ts = timestamp.unwrap_or(self.last_timestamp);
        self.last_timestamp = ts;
        let origin = *self.origin.get_or_insert(ts);
        if let Pace::Closed { .. } = self.pace {
            self.by_timestamp.push_back((0.0, item));
            return Plan::Slot;
        }
        let key = item.key();
        // What this record waits for: the records its `after` names, else
        // (a later session turn with a delay) the session's previous turn.
        let mut open = Vec::new();
        let mut ready_at: Option<f64> = None;
        let mut known = Vec::new();
        let mut done = |p: Progress, open: &mut Vec<u64>| match p {
            Progress::Open(k) => open.push(k),
            Progress::Done(at) => ready_at = Some(ready_at.map_or(at, |r: f64| r.max(at))),
        };
        if !item.after().is_empty() {
            for id in item.after() {
                match self.ids.get(id) {
                    Some(&p) => {
                        done(p, &mut open);
                        known.push(id.clone());
                    }
                    None => self.unknown.push(Unknown {
                        key,
                        id: id.clone(),
                    }),
                }
            }
        } else if let (Some(session), Some(_)) = (item.session(), item.delay()) {
            match self.sessions.get(session) {
                Some(&Progress::Open(k)) => open.push(k),
                // The previous turn completed before this one was read: a
                // timed turn keeps its timestamp, an untimed one counts
                // from that completion.
                Some(&p @ Progress::Done(_)) if timestamp.is_none() => done(p, &mut open),
                _ => {}
            }
        }
        if let Some(id) = item.id() {
            self.ids.insert(id.to_string(), Progress::Open(key));
        }
        if let Some(session) = item.session() {
            self.sessions
                .insert(session.to_string(), Progress::Open(key));
        }
        let delay = item.delay().unwrap_or(0.0);
        let plan = if open.is_empty() && ready_at.is_none() {
            Plan::At(ts - origin)
        } else if known.is_empty() {
            Plan::AfterTurn { delay }
        } else {
            Plan::AfterIds { ids: known, delay }
        };
        if !open.is_empty() {
            open.sort_unstable();
            open.dedup();
            for k in &open {
                self.dependents.entry(*k).or_default().push(key);
            }
            self.blocked.insert(
                key,
                Blocked {
                    item,
                    open: open.len(),
                    ready_at: ready_at.unwrap_or(f64::NEG_INFINITY),
                    delay,
                },
            );
        } else if let Some(at) = ready_at {
            self.push_after(at + delay, item);
        } else {
            self.by_timestamp.push_back((ts - origin, item));
        }
        plan
    }

    fn push_after(&mut self, due: f64, item: T) {
        self.seq += 1;
        self.after_turn.push(Reverse(Timed {
            due,
            seq: self.seq,
            item,
        }));
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

    /// Records waiting for a dependency, or due after one completed.
    pub fn waiting(&self) -> usize {
        self.blocked.len() + self.after_turn.len()
    }

    /// Requests sent and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// `after` ids that named no earlier record since the last call: those
    /// records were scheduled as if they had no such dependency.
    pub fn take_unknown(&mut self) -> Vec<Unknown> {
        std::mem::take(&mut self.unknown)
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

    /// The request with this key completed at `at` (or was left out): frees
    /// its slot and makes what waited for it due, `delay` after the last of
    /// its dependencies.
    pub fn complete(&mut self, done: Option<Completed<'_>>, at: f64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Pace::Closed { .. } = self.pace {
            return;
        }
        let Some(done) = done else {
            return;
        };
        for (map, name) in [(&mut self.ids, done.id), (&mut self.sessions, done.session)] {
            if let Some(name) = name {
                if let Some(p) = map.get_mut(name) {
                    if *p == Progress::Open(done.key) {
                        *p = Progress::Done(at);
                    }
                }
            }
        }
        for key in self.dependents.remove(&done.key).unwrap_or_default() {
            let Some(b) = self.blocked.get_mut(&key) else {
                continue;
            };
            b.open -= 1;
            b.ready_at = b.ready_at.max(at);
            if b.open == 0 {
                let b = self.blocked.remove(&key).expect("found above");
                self.push_after(b.ready_at + b.delay, b.item);
            }
        }
    }

    /// True when nothing is queued (in flight requests may remain).
    pub fn is_empty(&self) -> bool {
        self.by_timestamp.is_empty() && self.after_turn.is_empty() && self.blocked.is_empty()
    }

    /// Whether a completion can make a request due sooner: a request waits
    /// for one, or a slot limit holds requests back. Otherwise the schedule
    /// is fixed and completions can be counted later.
    pub fn waits_on_completions(&self) -> bool {
        !self.blocked.is_empty() || self.pace.max_in_flight().is_some()
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
        let mut blocked: Vec<(u64, T)> = self.blocked.drain().map(|(k, b)| (k, b.item)).collect();
        blocked.sort_by_key(|(k, _)| *k);
        out.extend(blocked.into_iter().map(|(_, t)| (None, t)));
        self.dependents.clear();
        out
    }
}

/// What a completion tells the schedule of its request.
#[derive(Clone, Copy, Debug)]
pub struct Completed<'a> {
    pub key: u64,
    pub id: Option<&'a str>,
    pub session: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct R {
        n: u32,
        ts: Option<f64>,
        id: Option<String>,
        session: Option<&'static str>,
        delay: Option<f64>,
        after: Vec<String>,
    }

    impl Turn for R {
        fn key(&self) -> u64 {
            u64::from(self.n)
        }
        fn timestamp(&self) -> Option<f64> {
            self.ts
        }
        fn id(&self) -> Option<&str> {
            self.id.as_deref()
        }
        fn session(&self) -> Option<&str> {
            self.session
        }
        fn delay(&self) -> Option<f64> {
            self.delay
        }
        fn after(&self) -> &[String] {
            &self.after
        }
    }

    fn r(n: u32, ts: f64) -> R {
        R {
            n,
            ts: Some(ts),
            id: None,
            session: None,
            delay: None,
            after: Vec::new(),
        }
    }

    fn turn(n: u32, ts: f64, session: &'static str, delay: Option<f64>) -> R {
        R {
            session: Some(session),
            delay,
            ..r(n, ts)
        }
    }

    /// Record `n` with id `cN`, after the ids given, `delay` ms, untimed.
    fn call(n: u32, after: &[&str], delay: Option<f64>) -> R {
        R {
            ts: None,
            id: Some(format!("c{n}")),
            delay,
            after: after.iter().map(|a| a.to_string()).collect(),
            ..r(n, 0.0)
        }
    }

    /// Record `n` (of `session`, if any) completed.
    fn done(n: u32, session: Option<&'static str>) -> Option<Completed<'static>> {
        Some(Completed {
            key: u64::from(n),
            id: None,
            session,
        })
    }

    /// Call `n` (id `cN`) completed at `at`.
    fn finish(s: &mut Schedule<R>, n: u32, at: f64) {
        let id = format!("c{n}");
        s.complete(
            Some(Completed {
                key: u64::from(n),
                id: Some(&id),
                session: None,
            }),
            at,
        );
    }

    /// Everything due at or before `now`, as (record, due).
    /// An open loop with no cap on the requests in flight.
    fn open() -> Schedule<R> {
        Schedule::new(Pace::Open {
            max_in_flight: None,
        })
    }

    fn pop_all(s: &mut Schedule<R>, now: f64) -> Vec<(u32, f64)> {
        std::iter::from_fn(|| s.pop_due(now))
            .map(|(d, r)| (r.n, d))
            .collect()
    }

    #[test]
    fn open_loop_is_due_at_offsets_from_the_first_timestamp() {
        let mut s = open();
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
        let mut s = open();
        s.push(turn(0, 0.0, "a", None));
        s.push(r(1, 5.0));
        s.push(turn(2, 8.0, "a", Some(100.0)));
        s.push(turn(3, 9.0, "a", Some(50.0)));
        s.push(r(4, 500.0));
        assert_eq!(pop_all(&mut s, 10.0), vec![(0, 0.0), (1, 5.0)]);
        // Turn 2's timestamp is long past, but turn 0 has not completed.
        assert_eq!(s.next_due(), Some(500.0));
        s.complete(done(0, Some("a")), 40.0);
        assert_eq!(s.next_due(), Some(140.0));
        assert_eq!(pop_all(&mut s, 139.0), vec![]);
        assert_eq!(pop_all(&mut s, 140.0), vec![(2, 140.0)]);
        s.complete(done(2, Some("a")), 300.0);
        assert_eq!(pop_all(&mut s, 400.0), vec![(3, 350.0)]);
        assert_eq!(pop_all(&mut s, 500.0), vec![(4, 500.0)]);
        s.complete(done(3, Some("a")), 420.0);
        assert!(s.is_empty());
    }

    #[test]
    fn sessions_interleave_independently() {
        let mut s = open();
        s.push(turn(0, 0.0, "a", None));
        s.push(turn(1, 1.0, "b", Some(7.0)));
        s.push(turn(2, 2.0, "a", Some(10.0)));
        s.push(turn(3, 3.0, "b", Some(20.0)));
        // b's first turn has a delay but no previous turn: its timestamp counts.
        assert_eq!(pop_all(&mut s, 1.0), vec![(0, 0.0), (1, 1.0)]);
        s.complete(done(1, Some("b")), 2.0);
        s.complete(done(0, Some("a")), 4.0);
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
        let mut s = open();
        s.push(turn(0, 0.0, "a", None));
        s.push(turn(1, 1.0, "a", Some(5.0)));
        s.push(r(2, 9.0));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        let mut left: Vec<u32> = s.drain().into_iter().map(|(_, r)| r.n).collect();
        left.sort();
        assert_eq!(left, vec![1, 2]);
        assert!(s.is_empty());
    }

    #[test]
    fn dependencies_fan_out_and_join_after_their_last_completion() {
        let mut s = open();
        s.push(call(0, &[], None));
        s.push(call(1, &["c0"], Some(10.0)));
        s.push(call(2, &["c0"], Some(20.0)));
        s.push(call(3, &["c1", "c2"], Some(5.0)));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        assert_eq!(s.next_due(), None);
        assert_eq!((s.queued(), s.waiting()), (0, 3));
        assert!(s.waits_on_completions());
        finish(&mut s, 0, 100.0);
        // Fan-out: both due from c0's completion.
        assert_eq!(pop_all(&mut s, 115.0), vec![(1, 110.0)]);
        assert_eq!(pop_all(&mut s, 200.0), vec![(2, 120.0)]);
        // Join: c3 waits for the later of c1 and c2, whichever ends last.
        finish(&mut s, 2, 300.0);
        assert_eq!(s.next_due(), None);
        finish(&mut s, 1, 400.0);
        assert_eq!(pop_all(&mut s, 404.9), vec![]);
        assert_eq!(pop_all(&mut s, 405.0), vec![(3, 405.0)]);
        finish(&mut s, 3, 500.0);
        assert!(s.is_empty());
        assert!(!s.waits_on_completions());
        assert_eq!(s.take_unknown(), vec![]);
    }

    #[test]
    fn push_says_what_each_record_waits_for() {
        let mut s = open();
        // Timed records are due at their offset from the first (1000 ms).
        assert_eq!(s.push(r(0, 1000.0)), Plan::At(0.0));
        assert_eq!(s.push(turn(1, 1250.0, "a", None)), Plan::At(250.0));
        // A later turn with a delay waits for the previous one.
        assert_eq!(
            s.push(turn(2, 1300.0, "a", Some(40.0))),
            Plan::AfterTurn { delay: 40.0 }
        );
        // `after` ids an earlier record has, in the record's order; an
        // unknown one is left out (and reported).
        assert_eq!(s.push(call(3, &[], None)), Plan::At(300.0));
        assert_eq!(
            s.push(call(4, &["c3", "nope"], Some(5.0))),
            Plan::AfterIds {
                ids: vec!["c3".into()],
                delay: 5.0
            }
        );
        assert_eq!(s.take_unknown().len(), 1);
        // Only unknown ids: due by its time (the last timestamp seen).
        assert_eq!(s.push(call(5, &["nope"], None)), Plan::At(300.0));
        let mut closed = Schedule::new(Pace::Closed { workers: 2 });
        assert_eq!(closed.push(turn(0, 5.0, "a", Some(1.0))), Plan::Slot);
    }

    #[test]
    fn a_dependency_completed_before_the_dependent_is_read_counts_from_its_end() {
        let mut s = open();
        s.push(call(0, &[], None));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        finish(&mut s, 0, 50.0);
        s.push(call(1, &["c0"], Some(7.0)));
        assert_eq!(pop_all(&mut s, 100.0), vec![(1, 57.0)]);
    }

    #[test]
    fn an_unknown_after_id_is_reported_and_ignored() {
        let mut s = open();
        s.push(r(0, 1000.0));
        // Names itself and a record that is not in the trace (sliced away).
        s.push(call(1, &["c1", "gone"], Some(3.0)));
        assert_eq!(
            s.take_unknown(),
            vec![
                Unknown {
                    key: 1,
                    id: "c1".into()
                },
                Unknown {
                    key: 1,
                    id: "gone".into()
                }
            ]
        );
        // Untimed and with no dependency left: at the last timestamp seen.
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0), (1, 0.0)]);
        assert_eq!(s.take_unknown(), vec![]);
    }

    #[test]
    fn untimed_later_turns_count_from_the_previous_turn_however_late_they_are_read() {
        let mut s = open();
        let untimed = |n, delay| R {
            ts: None,
            ..turn(n, 0.0, "a", Some(delay))
        };
        s.push(turn(0, 1000.0, "a", None));
        s.push(untimed(1, 500.0));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        s.complete(done(0, Some("a")), 80.0);
        assert_eq!(pop_all(&mut s, 1000.0), vec![(1, 580.0)]);
        s.complete(done(1, Some("a")), 600.0);
        // Turn 2 is read after turn 1 completed: still 250 ms after it.
        s.push(untimed(2, 250.0));
        assert_eq!(pop_all(&mut s, 1000.0), vec![(2, 850.0)]);
    }

    #[test]
    fn drain_returns_requests_blocked_on_dependencies() {
        let mut s = open();
        s.push(call(0, &[], None));
        s.push(call(1, &["c0"], None));
        s.push(call(2, &["c1"], None));
        assert_eq!(pop_all(&mut s, 0.0), vec![(0, 0.0)]);
        let left: Vec<(Option<f64>, u32)> = s.drain().into_iter().map(|(d, r)| (d, r.n)).collect();
        assert_eq!(left, vec![(None, 1), (None, 2)]);
        assert!(s.is_empty());
    }
}
