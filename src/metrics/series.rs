//! Figures over time: the windows of a time series, requests in flight,
//! and sums by second.

use std::collections::BTreeMap;

use crate::result::ResultView;
use crate::stats::Dist;

/// The most windows a time series may have: each is a row of the report,
/// built in memory.
pub const MAX_WINDOWS: u64 = 100_000;

/// Values a window keeps exactly before its percentiles become
/// approximate (within 0.1 %).
pub const WINDOW_EXACT_LIMIT: usize = 1_000;

/// A window of the time series.
#[derive(Clone, Debug)]
pub struct Window {
    /// Requests sent in the window.
    pub started: u64,
    /// Requests that ended in the window.
    pub completed: u64,
    /// Requests that ended in the window without `ok`.
    pub errors: u64,
    /// Output tokens of ok requests that arrived in the window (see
    /// [`token_arrivals`]).
    pub output_tokens: f64,
    /// TTFT of ok requests that ended in the window.
    pub ttft: Dist,
    /// E2E of ok requests that ended in the window.
    pub e2e: Dist,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            started: 0,
            completed: 0,
            errors: 0,
            output_tokens: 0.0,
            ttft: Dist::with_exact_limit(WINDOW_EXACT_LIMIT),
            e2e: Dist::with_exact_limit(WINDOW_EXACT_LIMIT),
        }
    }
}

impl Window {
    pub(super) fn merge(&mut self, o: &Window) {
        self.started += o.started;
        self.completed += o.completed;
        self.errors += o.errors;
        self.output_tokens += o.output_tokens;
        self.ttft.merge(&o.ttft);
        self.e2e.merge(&o.e2e);
    }
}

/// Requests in flight over time, as +1/−1 steps in buckets whose width
/// doubles whenever the run outgrows [`InFlight::MAX_BUCKETS`].
#[derive(Clone, Debug)]
pub struct InFlight {
    /// Bucket width, ms.
    pub resolution_ms: f64,
    steps: Vec<i32>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            resolution_ms: 1.0,
            steps: Vec::new(),
        }
    }
}

impl InFlight {
    /// At 1 ms, 2^21 buckets cover 35 minutes in 8 MB.
    pub const MAX_BUCKETS: usize = 1 << 21;

    fn step(&mut self, at_ms: f64, delta: i32) {
        let mut i = (at_ms.max(0.0) / self.resolution_ms) as usize;
        while i >= Self::MAX_BUCKETS {
            self.coarsen();
            i = (at_ms.max(0.0) / self.resolution_ms) as usize;
        }
        if i >= self.steps.len() {
            self.steps.resize(i + 1, 0);
        }
        self.steps[i] += delta;
    }

    fn coarsen(&mut self) {
        self.resolution_ms *= 2.0;
        let merged: Vec<i32> = self.steps.chunks(2).map(|c| c.iter().sum()).collect();
        self.steps = merged;
    }

    pub(super) fn add(&mut self, start_ms: f64, end_ms: f64) {
        self.step(start_ms, 1);
        self.step(end_ms, -1);
    }

    pub(super) fn merge(&mut self, o: &InFlight) {
        while self.resolution_ms < o.resolution_ms {
            self.coarsen();
        }
        let ratio = (self.resolution_ms / o.resolution_ms) as usize;
        for (i, &d) in o.steps.iter().enumerate() {
            if d != 0 {
                let at = (i / ratio) as f64 * self.resolution_ms;
                self.step(at, d);
            }
        }
    }

    /// The most requests in flight at any bucket boundary.
    pub fn peak(&self) -> u64 {
        let mut level: i64 = 0;
        let mut peak: i64 = 0;
        for &d in &self.steps {
            level += i64::from(d);
            peak = peak.max(level);
        }
        peak as u64
    }
}

/// A sum by second. A run's seconds lie close together, so they are a
/// vector from the first one seen (the sum runs for every chunk of every
/// answer, and a map's search cost most of summarize's time). A second
/// before the vector, or so far past it that the vector would be mostly
/// empty, goes to a map: no clock value makes it allocate more than the
/// sums given warrant. Each second is in one of the two.
#[derive(Clone, Debug, Default)]
pub struct Seconds {
    base: u64,
    dense: Vec<f64>,
    sums: usize,
    sparse: BTreeMap<u64, f64>,
}

impl Seconds {
    /// Room before the first second seen, for results written out of order.
    const EARLIER: u64 = 60;

    /// Add `n` to `second`'s sum.
    #[inline]
    pub fn add(&mut self, second: u64, n: f64) {
        self.sums += 1;
        match second
            .checked_sub(self.base)
            .and_then(|i| self.dense.get_mut(usize::try_from(i).ok()?))
        {
            Some(sum) => *sum += n,
            None => self.add_outside(second, n),
        }
    }

    #[cold]
    fn add_outside(&mut self, second: u64, n: f64) {
        if self.dense.is_empty() {
            self.base = second.saturating_sub(Self::EARLIER);
        }
        // The vector grows to at most eight slots a sum given, plus a few.
        let room = 64 + 8 * self.sums as u64;
        match second.checked_sub(self.base) {
            Some(i) if i < room => {
                let (from, to) = (self.dense.len() as u64, i + 1);
                self.dense.resize(to as usize, 0.0);
                // A second the map held moves into the vector, its sum so far
                // carried as it is.
                let moved: Vec<u64> = self
                    .sparse
                    .range(self.base + from..=second)
                    .map(|(&s, _)| s)
                    .collect();
                for s in moved {
                    self.dense[(s - self.base) as usize] = self.sparse.remove(&s).unwrap_or(0.0);
                }
                self.dense[i as usize] += n;
            }
            _ => *self.sparse.entry(second).or_insert(0.0) += n,
        }
    }

    /// Each second given a sum (and some seconds between them, at 0), with
    /// its sum, in order: the map's seconds before the vector, the vector's,
    /// the map's after it. (The map holds none within the vector; before
    /// the first sum both are empty.)
    pub fn iter(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        use std::ops::Bound::{Excluded, Unbounded};
        let last = self.base + (self.dense.len() as u64).saturating_sub(1);
        let map = |(&s, &v): (&u64, &f64)| (s, v);
        let dense = self.dense.iter().enumerate();
        (self.sparse.range(..self.base).map(map))
            .chain(dense.map(|(i, &v)| (self.base + i as u64, v)))
            .chain(self.sparse.range((Excluded(last), Unbounded)).map(map))
    }
}

/// When an ok answer's output tokens arrived, as (ms from time 0, tokens)
/// pairs given to `at`: `completion_tokens` divided evenly over its content
/// chunks (the first at `sent_ms + ttft_ms`, each next one a gap of `itl`
/// later; fractions kept), or all at `sent_ms + e2e_ms` when it has no TTFT
/// (not streamed). An answer without usage gives nothing. The peak, the
/// windows and the plot all read tokens through this one rule.
pub fn token_arrivals(r: &ResultView, itl: &[f64], mut at: impl FnMut(f64, f64)) {
    let Some(tokens) = r.completion_tokens.filter(|&t| t > 0) else {
        return;
    };
    match r.ttft_ms {
        Some(ttft) => {
            let per_chunk = tokens as f64 / (itl.len() + 1) as f64;
            let mut t = r.sent_ms + ttft;
            at(t, per_chunk);
            for gap in itl {
                t += gap;
                at(t, per_chunk);
            }
        }
        None => at(r.sent_ms + r.e2e_ms.unwrap_or(0.0), tokens as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seconds given a sum other than 0, in `iter`'s order.
    fn sums(s: &Seconds) -> Vec<(u64, f64)> {
        s.iter().filter(|&(_, n)| n != 0.0).collect()
    }

    #[test]
    fn seconds_before_or_far_past_the_vector_go_to_the_map() {
        let mut s = Seconds::default();
        for (second, n) in [
            (100, 1.5),
            (30, 2.0),
            (1_000_000, 4.0),
            (101, 0.25),
            (100, 1.0),
        ] {
            s.add(second, n);
        }
        assert_eq!(
            sums(&s),
            [(30, 2.0), (100, 2.5), (101, 0.25), (1_000_000, 4.0)]
        );
        // Seconds 40 to 101; 30 and 1,000,000 in the map.
        assert_eq!((s.base, s.dense.len(), s.sparse.len()), (40, 62, 2));
    }

    #[test]
    fn a_second_the_map_held_moves_into_the_vector_with_its_sum() {
        let mut s = Seconds::default();
        s.add(60, 1.0); // the vector from 0, room for 72 slots
        s.add(200, 3.0); // past the room (80): the map
        for _ in 0..20 {
            s.add(60, 0.5);
        }
        s.add(150, 1.0); // room 248: the vector grows to 151
        assert_eq!(s.sparse.len(), 1);
        s.add(201, 1.0); // to 202, taking 200 in
        s.add(200, 0.5);
        assert!(s.sparse.is_empty());
        assert_eq!(s.dense.len(), 202);
        assert_eq!(sums(&s), [(60, 11.0), (150, 1.0), (200, 3.5), (201, 1.0)]);
    }

    #[test]
    fn seconds_sum_to_the_bit_as_a_map_does() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..50 {
            let (mut s, mut map) = (Seconds::default(), BTreeMap::<u64, f64>::new());
            for _ in 0..2_000 {
                // Mostly near each other, some far off, in any order.
                let second = match next() % 10 {
                    0 => next() % 100_000,
                    1 => u64::MAX - next() % 3,
                    _ => 5_000 + next() % 300,
                };
                let n = (next() % 1000) as f64 / 7.0;
                s.add(second, n);
                *map.entry(second).or_insert(0.0) += n;
            }
            let want: Vec<(u64, f64)> = map.into_iter().filter(|&(_, n)| n != 0.0).collect();
            assert_eq!(sums(&s), want);
        }
    }
}
