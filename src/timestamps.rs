//! Whether a trace's timestamps are in the unit the format says
//! (milliseconds): the evidence, gathered record by record, and the
//! warnings it supports. trace-validate weighs the whole trace;
//! trace-replay the records it reads before its clock starts.

/// What the timestamps seen so far say about their unit.
#[derive(Clone, Debug)]
pub struct UnitEvidence {
    /// Records seen, with a timestamp or not.
    records: u64,
    first: Option<f64>,
    min: f64,
    max: f64,
    max_gap: f64,
    /// Gaps that are not 0, and whether each is a whole number of seconds.
    nonzero_gaps: u64,
    whole_second_gaps: bool,
    prev: Option<f64>,
}

impl Default for UnitEvidence {
    fn default() -> UnitEvidence {
        UnitEvidence {
            records: 0,
            first: None,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            max_gap: 0.0,
            nonzero_gaps: 0,
            whole_second_gaps: true,
            prev: None,
        }
    }
}

impl UnitEvidence {
    /// Count one record, with its timestamp if it has one.
    pub fn add(&mut self, timestamp: Option<f64>) {
        self.records += 1;
        let Some(t) = timestamp else {
            return;
        };
        self.first.get_or_insert(t);
        self.min = self.min.min(t);
        self.max = self.max.max(t);
        if let Some(prev) = self.prev {
            let gap = (t - prev).abs();
            self.max_gap = self.max_gap.max(gap);
            if gap > 0.0 {
                self.nonzero_gaps += 1;
                self.whole_second_gaps &= gap % 1000.0 == 0.0;
            }
        }
        self.prev = Some(t);
    }

    /// Records counted.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The first timestamp seen.
    pub fn first(&self) -> Option<f64> {
        self.first
    }

    /// The smallest and largest timestamps seen.
    pub fn range(&self) -> Option<(f64, f64)> {
        self.first.map(|_| (self.min, self.max))
    }

    /// Largest minus smallest timestamp.
    pub fn duration_ms(&self) -> Option<f64> {
        self.range().map(|(lo, hi)| hi - lo)
    }

    /// Mean request rate: (records − 1) / duration, so that a trace
    /// rescaled with `trace-rescale --rate R` reports R.
    pub fn mean_rate(&self) -> Option<f64> {
        let d = self.duration_ms()?;
        (d > 0.0 && self.records > 1).then(|| (self.records - 1) as f64 / (d / 1000.0))
    }

    /// Warnings about the unit of the timestamps, each from evidence it
    /// names: the mean rate, the gaps, the span and the magnitude.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        // A source with one-second resolution written in milliseconds
        // (BurstGPT, `trace-convert --absolute`) has every gap a whole
        // number of seconds: it is milliseconds already.
        let whole_seconds = self.nonzero_gaps > 0 && self.whole_second_gaps;
        let rate_span = (self.mean_rate(), self.duration_ms());
        if let (false, (Some(rate), Some(span))) = (whole_seconds, rate_span) {
            if rate > 1000.0 || self.max_gap < 1.0 {
                out.push(format!(
                    "timestamps look like seconds, not milliseconds: the trace would replay at {rate:.0} requests/s on average{}; \
                     to convert, use trace-rescale --speed 0.001",
                    if self.max_gap < 1.0 { " and every gap is under 1 ms" } else { "" }
                ));
            } else if self.records >= 10 && rate > self.records as f64 {
                // The mean rate then exceeds what any 1 s window can hold.
                out.push(format!(
                    "timestamps look like seconds, not milliseconds: all {} records fall within {} ms, \
                     a mean of {rate:.0} requests/s that no second of the trace reaches; \
                     as seconds the trace spans {} s; to convert, use trace-rescale --speed 0.001",
                    self.records,
                    crate::text::format_ms(span),
                    crate::text::format_ms(span),
                ));
            }
        }
        let epoch_seconds = self.first.is_some() && (1.0e9..1.0e11).contains(&self.min);
        let mean_gap = self
            .duration_ms()
            .filter(|_| self.records > 1)
            .map(|d| d / (self.records - 1) as f64);
        // Epoch seconds are a few units apart; milliseconds since a start
        // 12 days to 3 years back are hundreds or thousands apart.
        if epoch_seconds && !whole_seconds && mean_gap.is_none_or(|g| g < 1000.0) {
            let year = 1970 + (self.min / 31_556_952.0) as u64;
            let days = (self.min / 86_400_000.0) as u64;
            out.push(format!(
                "timestamps look like absolute epoch seconds (first {}: a date in {year} as seconds, \
                 {days} days after 1970 as milliseconds{}), but timestamps are milliseconds: \
                 trace-slice --rebase | trace-rescale --speed 0.001 converts them",
                crate::text::format_ms(self.min),
                mean_gap
                    .map(|g| format!("; records {} apart on average", crate::text::format_ms(g)))
                    .unwrap_or_default()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(ts: impl IntoIterator<Item = f64>) -> UnitEvidence {
        let mut e = UnitEvidence::default();
        for t in ts {
            e.add(Some(t));
        }
        e
    }

    #[test]
    fn seconds_written_as_small_integers_are_caught() {
        // 3,000 records, ten to each whole "ms" from 0 to 299: 2,999 gaps
        // over 0.299 s.
        let w = evidence((0..3000).map(|i| f64::from(i / 10))).warnings();
        assert_eq!(
            w,
            vec![
                "timestamps look like seconds, not milliseconds: the trace would replay at 10030 requests/s on average; \
                 to convert, use trace-rescale --speed 0.001"
                    .to_string()
            ]
        );
        // 20 records 2 "ms" apart: 19 gaps over 0.038 s, 500/s, more than
        // the 20 records any 1 s window could hold.
        let w = evidence((0..20).map(|i| f64::from(i * 2))).warnings();
        assert_eq!(
            w,
            vec![
                "timestamps look like seconds, not milliseconds: all 20 records fall within 38 ms, \
                 a mean of 500 requests/s that no second of the trace reaches; \
                 as seconds the trace spans 38 s; to convert, use trace-rescale --speed 0.001"
                    .to_string()
            ]
        );
    }

    #[test]
    fn milliseconds_and_whole_seconds_pass() {
        assert!(
            evidence((0..50).map(|i| f64::from(i) * 100.0))
                .warnings()
                .is_empty()
        );
        assert!(
            evidence((0..50).map(|i| f64::from(i) * 1000.0))
                .warnings()
                .is_empty()
        );
        assert!(evidence([]).warnings().is_empty());
    }
}
