//! Distributions: of millisecond values ([`Dist`], exact up to a limit and
//! then an HDR histogram) and of integer values ([`IntDistribution`], token
//! lengths, exact in memory bounded by the number of distinct values).

use std::collections::HashMap;

use hdrhistogram::Histogram;

/// Values kept exactly up to this count; beyond it a distribution moves to
/// an HDR histogram of microseconds at 3 significant digits.
pub const EXACT_LIMIT: usize = 100_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// A distribution of millisecond values: count, mean, std, min and max are
/// always exact; percentiles are exact (nearest rank) up to
/// [`EXACT_LIMIT`] values and within 0.1 % beyond.
#[derive(Clone, Debug)]
pub struct Dist {
    /// Values kept exactly before moving to the histogram.
    limit: usize,
    exact: Vec<f64>,
    hist: Option<Histogram<u64>>,
    n: u64,
    sum: f64,
    sum_sq: f64,
    min: f64,
    max: f64,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            limit: EXACT_LIMIT,
            exact: Vec::new(),
            hist: None,
            n: 0,
            sum: 0.0,
            sum_sq: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// Figures of one distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation (numpy's default, as vLLM prints).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// (p, value) for each percentile asked for.
    pub percentiles: Vec<(f64, f64)>,
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid precision")
}

fn to_us(ms: f64) -> u64 {
    // `as` saturates: negatives become 0. Adding a half is rounding for
    // the non-negative values that matter, without a call to libm.
    (ms * 1000.0 + 0.5) as u64
}

/// Record one value, growing the histogram's range as needed (a
/// saturating record would clamp to the initial range and hide outliers).
fn record_us(h: &mut Histogram<u64>, ms: f64) {
    let us = to_us(ms);
    if h.record(us).is_err() {
        h.saturating_record(us);
    }
}

impl Dist {
    /// A distribution that keeps at most `limit` values exactly: windows of a
    /// time series are many, so each keeps few.
    pub fn with_exact_limit(limit: usize) -> Dist {
        Dist {
            limit,
            ..Dist::default()
        }
    }

    /// Add one value (ms, or any unit: the histogram stores thousandths).
    pub fn record(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        self.sum_sq += v * v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => record_us(h, v),
            None => {
                self.exact.push(v);
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
        }
    }

    fn spill(&mut self) {
        let mut h = new_histogram();
        for &v in &self.exact {
            record_us(&mut h, v);
        }
        self.exact = Vec::new();
        self.hist = Some(h);
    }

    /// Fold another distribution in (results of another shard).
    pub fn merge(&mut self, other: &Dist) {
        self.n += other.n;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        match (&mut self.hist, &other.hist) {
            (None, None) => {
                self.exact.extend_from_slice(&other.exact);
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
            (Some(h), None) => {
                for &v in &other.exact {
                    record_us(h, v);
                }
            }
            (mine, Some(theirs)) => {
                if mine.is_none() {
                    self.spill();
                }
                let h = self.hist.as_mut().expect("spilled above");
                h.add(theirs)
                    .expect("auto-resizing histograms accept any values");
            }
        }
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// True while percentiles are exact.
    pub fn is_exact(&self) -> bool {
        self.hist.is_none()
    }

    /// The figures, or `None` with no values.
    pub fn summary(&self, percentiles: &[f64]) -> Option<Summary> {
        if self.n == 0 {
            return None;
        }
        let n = self.n as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        let mut sorted;
        let values: Vec<(f64, f64)> = match &self.hist {
            None => {
                sorted = self.exact.clone();
                sorted.sort_by(f64::total_cmp);
                percentiles
                    .iter()
                    .map(|&p| {
                        let rank = ((p / 100.0) * n).ceil().max(1.0) as usize;
                        (p, sorted[rank.min(sorted.len()) - 1])
                    })
                    .collect()
            }
            Some(h) => percentiles
                .iter()
                .map(|&p| {
                    let v = h.value_at_quantile(p / 100.0) as f64 / 1000.0;
                    // The histogram reports a bucket's top: never beyond
                    // what was really seen.
                    (p, v.clamp(self.min, self.max))
                })
                .collect(),
        };
        Some(Summary {
            count: self.n,
            mean,
            std: var.sqrt(),
            min: self.min,
            max: self.max,
            percentiles: values,
        })
    }
}

/// Count of each distinct value, plus running sums.
#[derive(Clone, Debug, Default)]
pub struct IntDistribution {
    counts: HashMap<u64, u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl IntDistribution {
    /// Add one value.
    pub fn add(&mut self, v: u64) {
        *self.counts.entry(v).or_insert(0) += 1;
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if self.n == 0 || v > self.max {
            self.max = v;
        }
        self.n += 1;
        self.sum += u128::from(v);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Sum of values.
    pub fn total(&self) -> u128 {
        self.sum
    }

    /// Smallest value, if any.
    pub fn min(&self) -> Option<u64> {
        (self.n > 0).then_some(self.min)
    }

    /// Largest value, if any.
    pub fn max(&self) -> Option<u64> {
        (self.n > 0).then_some(self.max)
    }

    /// Arithmetic mean, if any.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// Nearest-rank percentiles: for each `p` in `ps` (0 < p ≤ 100), the
    /// smallest value v such that at least p % of the values are ≤ v.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<Option<u64>> {
        if self.n == 0 {
            return vec![None; ps.len()];
        }
        let mut sorted: Vec<(u64, u64)> = self.counts.iter().map(|(&v, &c)| (v, c)).collect();
        sorted.sort_unstable();
        ps.iter()
            .map(|&p| {
                let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
                let mut seen = 0;
                for &(v, c) in &sorted {
                    seen += c;
                    if seen >= rank {
                        return Some(v);
                    }
                }
                Some(self.max)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut d = IntDistribution::default();
        for v in 1..=10 {
            d.add(v);
        }
        assert_eq!(
            d.percentiles(&[50.0, 90.0, 99.0, 100.0]),
            vec![Some(5), Some(9), Some(10), Some(10)]
        );
        assert_eq!(d.mean(), Some(5.5));
        assert_eq!((d.min(), d.max(), d.total()), (Some(1), Some(10), 55));
    }
}
