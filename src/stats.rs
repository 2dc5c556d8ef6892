//! Exact statistics over integer values (token lengths), in memory bounded
//! by the number of distinct values rather than the number of records.

use std::collections::HashMap;

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
