//! Folding result records into figures, in memory bounded by the number of
//! groups and windows, not by the number of results: the conventions the
//! figures follow, the SLOs, the series over time, one group's
//! [`Aggregate`], and the one [`fold`] trace-summarize and trace-sweep run.

/// Fold `$o`'s figures into `$a`'s (shards, `--by` groups): those with a
/// `merge` (distributions) by it, counters by adding.
macro_rules! merge_fields {
    ($a:ident, $o:ident; merge: $($m:ident),*; add: $($n:ident),* $(,)?) => {
        $($a.$m.merge(&$o.$m);)*
        $($a.$n += $o.$n;)*
    };
}

mod aggregate;
mod convention;
mod fold;
mod options;
mod series;
mod sessions;
mod slo;

pub use crate::stats::{Dist, EXACT_LIMIT, PercentileRule, Summary};
pub use aggregate::{Aggregate, ErrorKind, Errors, Fidelity, MAX_ERROR_KINDS};
pub use convention::{Convention, ConventionDists, Names};
pub use fold::{fold, fold_call, session_of, view_of};
pub use options::{Conventions, SummaryOptions};
pub use series::{InFlight, MAX_WINDOWS, Seconds, WINDOW_EXACT_LIMIT, Window, token_arrivals};
pub use sessions::{SessionFigures, Sessions, Side};
pub use slo::{Slo, SloMetric, parse_slo};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ResultView;

    #[test]
    fn an_slo_given_twice_is_refused() {
        assert_eq!(
            parse_slo("ttft=1ms,ttft=1h").unwrap_err(),
            "`ttft` is given twice: give each SLO once"
        );
        assert_eq!(
            parse_slo("e2e=1s, tpot=5ms ,e2e=2s").unwrap_err(),
            "`e2e` is given twice: give each SLO once"
        );
    }

    #[test]
    fn session_figures_do_not_depend_on_the_maps_order() {
        // 0.1 + 0.2 + 0.3 sums to 0.6 or 0.6000000000000001 by its order.
        let figures = || {
            let mut s = Sessions::default();
            for (id, ms) in [("a", 0.1), ("b", 0.2), ("c", 0.3)] {
                let r = ResultView {
                    e2e_ms: Some(ms),
                    ..ResultView::empty()
                };
                s.add(id, None, None, None, &r);
            }
            let f = s.figures();
            let d = f.duration_ms.summary(&[]).expect("three sessions");
            (d.mean, d.std)
        };
        let first = figures();
        for _ in 0..20 {
            assert_eq!(figures(), first);
        }
    }

    #[test]
    fn exact_then_histogram() {
        let mut d = Dist::default();
        for v in 1..=10 {
            d.record(v as f64);
        }
        let s = d.summary(&[50.0, 90.0, 100.0]).unwrap();
        assert_eq!(s.percentiles, vec![(50.0, 5.0), (90.0, 9.0), (100.0, 10.0)]);
        assert_eq!((s.mean, s.min, s.max), (5.5, 1.0, 10.0));
        // Population std of 1..10: sqrt(8.25).
        assert!((s.std - 8.25f64.sqrt()).abs() < 1e-12);

        let mut big = Dist::default();
        for v in 0..(EXACT_LIMIT + 1000) {
            big.record(v as f64 / 100.0);
        }
        assert!(!big.is_exact());
        let s = big.summary(&[50.0]).unwrap();
        let want = (EXACT_LIMIT + 1000) as f64 / 200.0;
        assert!(
            (s.percentiles[0].1 - want).abs() / want < 0.001,
            "{}",
            s.percentiles[0].1
        );
    }

    #[test]
    fn merging_equals_recording_together() {
        let (mut a, mut b, mut all) = (Dist::default(), Dist::default(), Dist::default());
        for v in [3.0, 1.0, 7.0] {
            a.record(v);
            all.record(v);
        }
        for v in [2.0, 9.0] {
            b.record(v);
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.summary(&[50.0, 99.0]), all.summary(&[50.0, 99.0]));
    }

    #[test]
    fn in_flight_peak_survives_coarsening() {
        let mut f = InFlight::default();
        f.add(0.0, 10.0);
        f.add(5.0, 20.0);
        f.add(30.0, 40.0);
        assert_eq!(f.peak(), 2);
        f.add(
            InFlight::MAX_BUCKETS as f64 * 3.0,
            InFlight::MAX_BUCKETS as f64 * 3.0 + 1.0,
        );
        assert!(f.resolution_ms >= 4.0);
        assert_eq!(f.peak(), 2);
    }
}
