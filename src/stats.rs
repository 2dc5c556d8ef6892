//! Distributions: of millisecond values ([`Dist`], exact up to a limit and
//! then an HDR histogram) and of integer values ([`IntDistribution`], token
//! lengths, exact in memory bounded by the number of distinct values).

use std::collections::HashMap;

use hdrhistogram::Histogram;

/// Values kept exactly up to this count; beyond it a distribution moves to
/// an HDR histogram of microseconds at 3 significant digits.
pub const EXACT_LIMIT: usize = 100_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// How percentiles are read from exact values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PercentileRule {
    /// The smallest value with at least p % of the values (or of the
    /// weight) at or below it: tracekit's own.
    NearestRank,
    /// numpy's default (`np.percentile`, method "linear"): between the
    /// values at ranks floor and ceil of p/100 × (n − 1), interpolated.
    /// vLLM's bench serve and AIPerf read percentiles this way.
    Linear,
    /// GuideLLM's: values merged when equal, each with its share of the
    /// total weight; the first value whose running share (a float sum, as
    /// numpy's cumsum) reaches p/100.
    CumulativeShare,
}

/// A distribution of millisecond values: count, mean, std, min and max are
/// always exact; percentiles are exact up to [`EXACT_LIMIT`] values and
/// within 0.1 % beyond. A value may carry an integer weight (GuideLLM
/// weights per-request figures by tokens): mean, std and percentiles are
/// then weighted, and a value of weight 0 is not counted at all.
#[derive(Clone, Debug)]
pub struct Dist {
    /// Values kept exactly before moving to the histogram.
    limit: usize,
    exact: Vec<f64>,
    /// Weights of `exact`, parallel to it; empty while every weight is 1,
    /// so that unweighted distributions cost nothing more.
    weights: Vec<u64>,
    hist: Option<Histogram<u64>>,
    n: u64,
    /// Σ weights (equal to `n` while unweighted).
    weight: u64,
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
            weights: Vec::new(),
            hist: None,
            n: 0,
            weight: 0,
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

/// Record one value `n` times, growing the histogram's range as needed (a
/// saturating record would clamp to the initial range and hide outliers).
fn record_us(h: &mut Histogram<u64>, ms: f64, n: u64) {
    let us = to_us(ms);
    if h.record_n(us, n).is_err() {
        h.saturating_record_n(us, n);
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
        self.weight += 1;
        self.sum += v;
        self.sum_sq += v * v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => record_us(h, v, 1),
            None => {
                self.exact.push(v);
                if !self.weights.is_empty() {
                    self.weights.push(1);
                }
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
        }
    }

    /// Add one value that counts `w` times in the mean, std and
    /// percentiles; with `w` = 0 it is left out, as GuideLLM drops
    /// zero-weight values.
    pub fn record_weighted(&mut self, v: f64, w: u64) {
        if w == 1 {
            return self.record(v);
        }
        if w == 0 {
            return;
        }
        let wf = w as f64;
        self.n += 1;
        self.weight += w;
        self.sum += v * wf;
        self.sum_sq += v * v * wf;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => record_us(h, v, w),
            None => {
                if self.weights.is_empty() {
                    self.weights = vec![1; self.exact.len()];
                }
                self.exact.push(v);
                self.weights.push(w);
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
        }
    }

    fn weight_at(&self, i: usize) -> u64 {
        self.weights.get(i).copied().unwrap_or(1)
    }

    fn spill(&mut self) {
        let mut h = new_histogram();
        for (i, &v) in self.exact.iter().enumerate() {
            record_us(&mut h, v, self.weight_at(i));
        }
        self.exact = Vec::new();
        self.weights = Vec::new();
        self.hist = Some(h);
    }

    /// Fold another distribution in (results of another shard).
    pub fn merge(&mut self, other: &Dist) {
        self.n += other.n;
        self.weight += other.weight;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        match (&mut self.hist, &other.hist) {
            (None, None) => {
                if !other.weights.is_empty() && self.weights.is_empty() {
                    self.weights = vec![1; self.exact.len()];
                }
                if !self.weights.is_empty() {
                    self.weights
                        .extend((0..other.exact.len()).map(|i| other.weight_at(i)));
                }
                self.exact.extend_from_slice(&other.exact);
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
            (Some(h), None) => {
                for (i, &v) in other.exact.iter().enumerate() {
                    record_us(h, v, other.weight_at(i));
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

    /// The figures, or `None` with no values; percentiles by nearest rank.
    pub fn summary(&self, percentiles: &[f64]) -> Option<Summary> {
        self.summary_by(percentiles, PercentileRule::NearestRank)
    }

    /// The figures, percentiles read from the exact values by `rule`. Beyond
    /// the exact limit every rule reads the histogram (within 0.1 %).
    pub fn summary_by(&self, percentiles: &[f64], rule: PercentileRule) -> Option<Summary> {
        if self.n == 0 {
            return None;
        }
        let n = self.weight as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        let values: Vec<(f64, f64)> = match &self.hist {
            None if self.weights.is_empty() && rule != PercentileRule::CumulativeShare => {
                let mut sorted = self.exact.clone();
                sorted.sort_by(f64::total_cmp);
                percentiles
                    .iter()
                    .map(|&p| match rule {
                        PercentileRule::Linear => (p, linear(&sorted, p)),
                        _ => {
                            let rank = ((p / 100.0) * n).ceil().max(1.0) as usize;
                            (p, sorted[rank.min(sorted.len()) - 1])
                        }
                    })
                    .collect()
            }
            None => {
                let mut pairs: Vec<(f64, u64)> = (0..self.exact.len())
                    .map(|i| (self.exact[i], self.weight_at(i)))
                    .collect();
                pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
                percentiles
                    .iter()
                    .map(|&p| (p, weighted(&pairs, self.weight, p, rule)))
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

/// numpy's "linear" percentile of sorted values: virtual index
/// (n − 1) × p/100, and its lerp, which for a fraction of one half or more
/// counts back from the upper value.
fn linear(sorted: &[f64], p: f64) -> f64 {
    let last = sorted.len() - 1;
    let virtual_index = last as f64 * (p / 100.0);
    let lo = (virtual_index.floor() as usize).min(last);
    let hi = (lo + 1).min(last);
    let t = virtual_index - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// A percentile of (value, weight) pairs sorted by value.
fn weighted(pairs: &[(f64, u64)], total: u64, p: f64, rule: PercentileRule) -> f64 {
    match rule {
        PercentileRule::CumulativeShare => {
            // Equal values merged, shares w / total summed in order: the
            // first value whose running share reaches p/100 (numpy's
            // searchsorted, side "left"); float rounding may leave the last
            // share short of 1, hence the last value as a fallback.
            let q = p / 100.0;
            let total = total as f64;
            let mut running = 0.0;
            let mut i = 0;
            while i < pairs.len() {
                let v = pairs[i].0;
                let mut w = 0;
                while i < pairs.len() && pairs[i].0 == v {
                    w += pairs[i].1;
                    i += 1;
                }
                running += w as f64 / total;
                if running >= q {
                    return v;
                }
            }
            pairs[pairs.len() - 1].0
        }
        PercentileRule::NearestRank | PercentileRule::Linear => {
            // Weighted nearest rank: the smallest value with at least p %
            // of the weight at or below it.
            let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for &(v, w) in pairs {
                seen += w;
                if seen >= rank {
                    return v;
                }
            }
            pairs[pairs.len() - 1].0
        }
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
    fn linear_as_numpy() {
        let mut d = Dist::default();
        for v in [40.0, 10.0, 30.0, 20.0] {
            d.record(v);
        }
        // np.percentile([10, 20, 30, 40], [50, 90, 99, 100]): index 3p/100
        // = 1.5, 2.7, 2.97, 3: 25, 37, 39.7, 40.
        let s = d
            .summary_by(&[50.0, 90.0, 99.0, 100.0], PercentileRule::Linear)
            .unwrap();
        let want = [25.0, 37.0, 39.7, 40.0];
        for ((_, got), want) in s.percentiles.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{got} {want}");
        }
        // Nearest rank is unchanged: 2nd and 4th of 4.
        let s = d.summary(&[50.0, 90.0]).unwrap();
        assert_eq!(s.percentiles, vec![(50.0, 20.0), (90.0, 40.0)]);
    }

    #[test]
    fn weighted_as_guidellm() {
        // GuideLLM's DistributionSummary.from_values on (value, weight):
        // (100, 10), (200, 1), (100, 5), (300, 0): 100 merged to weight 15,
        // 300 dropped; shares 15/16, 1/16.
        let mut d = Dist::default();
        for (v, w) in [(100.0, 10), (200.0, 1), (100.0, 5), (300.0, 0)] {
            d.record_weighted(v, w);
        }
        let s = d
            .summary_by(&[50.0, 93.75, 95.0], PercentileRule::CumulativeShare)
            .unwrap();
        // Running share 0.9375 then 1.0: p93.75 is still 100, p95 is 200.
        assert_eq!(
            s.percentiles,
            vec![(50.0, 100.0), (93.75, 100.0), (95.0, 200.0)]
        );
        // Mean (1500 + 200) / 16; three values counted, 300 left out.
        assert_eq!((s.count, s.mean, s.min, s.max), (3, 106.25, 100.0, 200.0));
        // Variance Σ w (v - mean)² / Σ w = (15 × 6.25² + 93.75²) / 16.
        let var = (15.0 * 6.25f64.powi(2) + 93.75f64.powi(2)) / 16.0;
        assert!((s.std - var.sqrt()).abs() < 1e-9);
        // Merging keeps the weights.
        let mut a = Dist::default();
        a.record_weighted(100.0, 10);
        let mut b = Dist::default();
        b.record(200.0);
        b.record_weighted(100.0, 5);
        a.merge(&b);
        assert_eq!(
            a.summary_by(&[50.0, 95.0], PercentileRule::CumulativeShare),
            d.summary_by(&[50.0, 95.0], PercentileRule::CumulativeShare)
        );
    }

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
