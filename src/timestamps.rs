//! Whether a trace's timestamps are in the unit the format says
//! (milliseconds): the evidence, gathered record by record, and the
//! warnings it supports. trace-validate weighs the whole trace;
//! trace-replay the records it reads before its clock starts.

/// The fewest records whose mean rate can say the timestamps are seconds.
pub const SECONDS_MIN_RECORDS: u64 = 100;

/// The mean rate, requests/s as milliseconds, above which timestamps are
/// taken for seconds: more than one replay process sends.
pub const SECONDS_MIN_RATE: f64 = 10_000.0;

/// Whether a record is sent at its own timestamp, and so says something of
/// the trace's unit: a record with `after` is sent once what it names
/// completed, and a later turn of a session with a `delay` once its
/// previous turn did, whatever their timestamps (trace-gen and Dynamo give
/// thousands of such turns one nominal instant). Replay's schedule reads
/// them so (crate::engine's schedule).
pub fn sent_at_timestamp(has_after: bool, later_turn: bool, has_delay: bool) -> bool {
    !(has_after || (later_turn && has_delay))
}

/// trace-validate's rule that timestamps are on every record that starts
/// something or on none (records that follow another may go without in a
/// timed trace), for a reader that takes records one at a time. Whether a
/// record follows is asked only where it decides.
#[derive(Debug, Default)]
pub struct Presence {
    rule: crate::record::Presence,
    /// Whether the record that decided had a timestamp.
    timed: Option<bool>,
}

impl Presence {
    /// The record at `line`, with a timestamp or not; `follows`: whether it
    /// is a later turn of its session or has `after`. The error when the
    /// first record decided otherwise.
    pub fn check(
        &mut self,
        line: u64,
        has_timestamp: bool,
        follows: impl FnOnce() -> bool,
    ) -> Option<crate::error::FieldError> {
        if self.timed == Some(has_timestamp) || (!has_timestamp && follows()) {
            return None;
        }
        self.timed.get_or_insert(has_timestamp);
        self.rule.check(line, has_timestamp)
    }
}

/// The mean rate, requests/s as milliseconds, above which whole-number
/// timestamps draw a note: a trace in whole seconds at a few requests/s
/// (0, 0, 0, 1, 1, 1, ...) reads as thousands a second in milliseconds,
/// under [`SECONDS_MIN_RATE`], but a busy trace in milliseconds may be as
/// fast: a note, which fails no check.
pub const WHOLE_UNITS_MIN_RATE: f64 = 1_000.0;

/// What the timestamps seen so far say about their unit.
#[derive(Clone, Debug)]
pub struct UnitEvidence {
    /// Records seen, with a timestamp or not.
    records: u64,
    first: Option<f64>,
    min: f64,
    max: f64,
    /// Gaps that are not 0, and whether each is a whole number of seconds.
    nonzero_gaps: u64,
    whole_second_gaps: bool,
    /// Every timestamp is a whole number.
    integral: bool,
    prev: Option<f64>,
}

impl Default for UnitEvidence {
    fn default() -> UnitEvidence {
        UnitEvidence {
            records: 0,
            first: None,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            nonzero_gaps: 0,
            whole_second_gaps: true,
            integral: true,
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
        self.integral &= t.fract() == 0.0;
        self.min = self.min.min(t);
        self.max = self.max.max(t);
        if let Some(prev) = self.prev {
            let gap = (t - prev).abs();
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

    /// A note when every timestamp is a whole number and, read as
    /// milliseconds, they run faster than [`WHOLE_UNITS_MIN_RATE`] on
    /// average (over enough records, and short of the seconds warning):
    /// whole seconds at a few requests/s look so.
    pub fn note(&self) -> Option<String> {
        let rate = self.mean_rate()?;
        let fast = (WHOLE_UNITS_MIN_RATE..=SECONDS_MIN_RATE).contains(&rate);
        (self.integral && fast && self.records >= SECONDS_MIN_RECORDS).then(|| {
            format!(
                "timestamps are whole numbers, {rate:.0} requests/s on average over {} records \
                 read as milliseconds: if they are seconds, trace-rescale --speed 0.001 \
                 converts them",
                self.records
            )
        })
    }

    /// Warnings about the unit of the timestamps, each from evidence it
    /// names: the mean rate, the gaps, the span and the magnitude.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        // A source with one-second resolution written in milliseconds
        // (BurstGPT, `trace-convert --absolute`) has every gap a whole
        // number of seconds: it is milliseconds already.
        let whole_seconds = self.nonzero_gaps > 0 && self.whole_second_gaps;
        // A rate says seconds only where no trace in milliseconds could
        // have it: past what one replay process sends, over enough records
        // that a burst is not the explanation. A short or fast trace in
        // milliseconds (a slice, a rescale, trace-gen at 2,000/s) is left
        // alone: its rate is what it says.
        let enough = self.records >= SECONDS_MIN_RECORDS;
        let too_fast = self.mean_rate().filter(|&r| r > SECONDS_MIN_RATE);
        if let (false, true, Some(rate)) = (whole_seconds, enough, too_fast) {
            out.push(format!(
                "timestamps look like seconds, not milliseconds: the trace would replay at {rate:.0} requests/s on average \
                 over its {} records, more than one replay process sends (about 10,000/s); \
                 if they are seconds, convert with trace-rescale --speed 0.001",
                self.records
            ));
        }
        let epoch_seconds = self.first.is_some() && (1.0e9..1.0e11).contains(&self.min);
        let mean_gap = self
            .duration_ms()
            .filter(|_| self.records > 1)
            .map(|d| d / (self.records - 1) as f64);
        // Epoch seconds are a few units apart; milliseconds since a start
        // 12 days to 3 years back are hundreds or thousands apart. The
        // mean gap of a few records says neither (a slice of a trace in
        // milliseconds may keep one record): as for the rate, only over
        // enough of them.
        if epoch_seconds && enough && !whole_seconds && mean_gap.is_some_and(|g| g < 1000.0) {
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
        // 3,000 records, ten to each whole "ms" from 0 to 149: 2,999 gaps
        // over 0.149 s, 20,128 requests/s.
        let w = evidence((0..3000).map(|i| f64::from(i / 20))).warnings();
        assert_eq!(
            w,
            vec![
                "timestamps look like seconds, not milliseconds: the trace would replay at 20128 requests/s on average \
                 over its 3000 records, more than one replay process sends (about 10,000/s); \
                 if they are seconds, convert with trace-rescale --speed 0.001"
                    .to_string()
            ]
        );
    }

    #[test]
    fn short_and_fast_traces_in_milliseconds_pass() {
        // The bundled trace's first 20 records at 4x: ten at 0, ten at
        // 750 ms, 25 requests/s over 0.75 s (this warned before).
        let burst = (0..20).map(|i| if i < 10 { 0.0 } else { 750.0 });
        assert!(evidence(burst).warnings().is_empty());
        // 20 records 2 ms apart: 500/s, a burst, not seconds.
        assert!(
            evidence((0..20).map(|i| f64::from(i * 2)))
                .warnings()
                .is_empty()
        );
        // 10,000 records at 5,000/s (every gap 0.2 ms, under 1 ms).
        let fast = (0..10_000).map(|i| f64::from(i) * 0.2);
        assert!(evidence(fast).warnings().is_empty());
        // 99 records at 20,000/s: too few to say.
        assert!(
            evidence((0..99).map(|i| f64::from(i) * 0.05))
                .warnings()
                .is_empty()
        );
    }

    #[test]
    fn whole_seconds_at_a_few_requests_a_second_draw_a_note() {
        // 300 records, three to each whole unit from 0 to 99: 299 / 0.099 s
        // = 3,020 requests/s as milliseconds, under the warning's 10,000.
        let e = evidence((0..300).map(|i| f64::from(i / 3)));
        assert!(e.warnings().is_empty());
        assert_eq!(
            e.note().unwrap(),
            "timestamps are whole numbers, 3020 requests/s on average over 300 records read as \
             milliseconds: if they are seconds, trace-rescale --speed 0.001 converts them"
        );
        // Fractions of a millisecond (trace-gen at 2,000/s), fewer than 100
        // records, or 500/s: none.
        assert!(
            evidence((0..300).map(|i| f64::from(i) * 0.5))
                .note()
                .is_none()
        );
        assert!(evidence((0..99).map(|i| f64::from(i / 3))).note().is_none());
        assert!(
            evidence((0..300).map(|i| f64::from(i * 2)))
                .note()
                .is_none()
        );
    }

    #[test]
    fn only_records_sent_at_their_timestamp_are_evidence() {
        assert!(sent_at_timestamp(false, false, false));
        // A first turn with a delay is sent at its timestamp.
        assert!(sent_at_timestamp(false, false, true));
        // A later turn without a delay too (the schedule keeps its time).
        assert!(sent_at_timestamp(false, true, false));
        assert!(!sent_at_timestamp(false, true, true));
        assert!(!sent_at_timestamp(true, false, false));
    }

    #[test]
    fn presence_is_decided_by_the_first_record_that_starts_something() {
        let mut p = Presence::default();
        assert!(p.check(1, true, || false).is_none());
        // An untimed later turn of a timed trace is fine.
        assert!(p.check(2, false, || true).is_none());
        let e = p.check(3, false, || false).expect("an untimed first turn");
        assert_eq!(
            e.to_string(),
            "field `timestamp`: missing, but the first record (line 1) has one: give every record a timestamp, or none"
        );
        let mut p = Presence::default();
        assert!(p.check(1, false, || false).is_none());
        // Untimed, a trace takes no timestamp, not even on a later turn.
        let e = p.check(2, true, || true).expect("a timed record");
        assert_eq!(
            e.to_string(),
            "field `timestamp`: present, but the first record (line 1) has none: give every record a timestamp, or none"
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

    #[test]
    fn a_few_records_never_look_like_epoch_seconds() {
        // One record 20 days into a trace in milliseconds (what
        // `trace-slice --from` may keep), and 99 records 500 ms apart from
        // there: too few to tell from epoch seconds.
        assert!(evidence([1_728_000_123.0]).warnings().is_empty());
        let few = (0..99).map(|i| 1_728_000_123.0 + f64::from(i) * 500.0);
        assert!(evidence(few).warnings().is_empty());
        // 100 records 2 units apart from 1,728,000,123: epoch seconds in
        // 2024 (20 days after 1970 as milliseconds).
        let w = evidence((0..100).map(|i| 1_728_000_123.0 + f64::from(i) * 2.0)).warnings();
        assert_eq!(
            w,
            vec![
                "timestamps look like absolute epoch seconds (first 1728000123: a date in 2024 as seconds, \
                 20 days after 1970 as milliseconds; records 2 apart on average), but timestamps are \
                 milliseconds: trace-slice --rebase | trace-rescale --speed 0.001 converts them"
                    .to_string()
            ]
        );
    }
}
