//! The fit's own check: a profile must predict the run it was fitted to
//! before it is trusted with another. Each request of the run arrives at
//! its `sent` with its prompt, its cached tokens and as many tokens to
//! give as it received; the pure model ([`crate::simulator::batch`]) runs
//! over them, and the figures users read (TTFT p50 and p90, ITL p50, E2E
//! p50 and p90, as trace-summarize computes them) are set beside the
//! run's own.

use std::collections::HashMap;

use crate::simulator::batch::{Batch, Event, Job};
use crate::simulator::profile::{Figure, Profile};
use crate::stats::Dist;

use super::fit::Seen;

/// A figure off by more than this, %, and the profile is refused.
pub const LIMIT_PCT: f64 = 15.0;

/// The figures compared, in the report's order: name, distribution,
/// percentile.
const FIGURES: [(&str, Kind, f64); 5] = [
    ("TTFT p50", Kind::Ttft, 50.0),
    ("TTFT p90", Kind::Ttft, 90.0),
    ("ITL p50", Kind::Itl, 50.0),
    ("E2E p50", Kind::E2e, 50.0),
    ("E2E p90", Kind::E2e, 90.0),
];

#[derive(Clone, Copy)]
enum Kind {
    Ttft,
    Itl,
    E2e,
}

/// TTFT, ITL and E2E of a run, as trace-summarize folds them: one TTFT
/// and one E2E per request, every gap pooled.
#[derive(Default)]
pub struct Dists {
    ttft: Dist,
    itl: Dist,
    e2e: Dist,
}

impl Dists {
    fn of(&self, kind: Kind) -> &Dist {
        match kind {
            Kind::Ttft => &self.ttft,
            Kind::Itl => &self.itl,
            Kind::E2e => &self.e2e,
        }
    }

    /// One request: sent at `sent`, its tokens at `tokens`, done at `end`.
    fn add(&mut self, sent: f64, tokens: &[f64], end: f64) {
        if let Some(first) = tokens.first() {
            self.ttft.record(first - sent);
        }
        for w in tokens.windows(2) {
            self.itl.record(w[1] - w[0]);
        }
        self.e2e.record(end - sent);
    }
}

/// The runs' own figures.
pub fn real(runs: &[Vec<Seen>]) -> Dists {
    let mut d = Dists::default();
    for s in runs.iter().flatten() {
        d.add(s.sent, &s.tokens, s.sent + s.e2e);
    }
    d
}

/// Each run is predicted this many times, from seeds 1, 2, ..., and the
/// figures pooled: one draw of a wide step spread over a short run moves
/// a percentile by more than the model does.
pub const DRAWS: u64 = 8;

/// The figures `profile` gives for the runs, each run in a batch of its
/// own (a run's timeline is its own), [`DRAWS`] times over (a profile
/// without a spread draws nothing: once is enough).
pub fn twin(profile: &Profile, runs: &[Vec<Seen>]) -> Dists {
    let mut d = Dists::default();
    let draws = if profile.step_spread.is_empty() && profile.prefill_spread.is_empty() {
        1
    } else {
        DRAWS
    };
    for seed in 1..=draws {
        for run in runs {
            twin_run(profile, run, seed, &mut d);
        }
    }
    d
}

/// One run through the model, its draws from `seed`, into `d`.
fn twin_run(profile: &Profile, run: &[Seen], seed: u64, d: &mut Dists) {
    {
        let mut order: Vec<usize> = (0..run.len()).collect();
        order.sort_by(|&a, &b| run[a].sent.total_cmp(&run[b].sent));
        let mut batch = Batch::seeded(profile.clone(), seed);
        let mut tokens: HashMap<u64, Vec<f64>> = HashMap::new();
        let mut events: Vec<Event> = Vec::new();
        let take = |events: &mut Vec<Event>, tokens: &mut HashMap<u64, Vec<f64>>| {
            for e in events.drain(..) {
                tokens.entry(e.key).or_default().push(e.at);
            }
        };
        for &i in &order {
            let s = &run[i];
            batch.advance(s.sent, &mut events);
            take(&mut events, &mut tokens);
            batch.arrive(
                s.sent,
                Job {
                    key: i as u64,
                    prompt: s.prompt,
                    output: s.tokens.len() as u64,
                    blocks: Vec::new(),
                    known_cached: s.cached,
                },
            );
        }
        batch.advance(f64::INFINITY, &mut events);
        take(&mut events, &mut tokens);
        for (i, s) in run.iter().enumerate() {
            let t = tokens.remove(&(i as u64)).unwrap_or_default();
            let end = t.last().copied().unwrap_or(s.sent);
            d.add(s.sent, &t, end);
        }
    }
}

/// Each figure real and twin, and the error, % of the real one; a figure
/// the run does not have (no gaps: answers of one token) is left out.
pub fn compare(real: &Dists, twin: &Dists) -> Vec<Figure> {
    let at = |d: &Dist, p: f64| d.summary(&[p]).map(|s| s.percentiles[0].1);
    FIGURES
        .iter()
        .filter_map(|&(name, kind, p)| {
            let r = at(real.of(kind), p)?;
            let t = at(twin.of(kind), p)?;
            (r > 0.0).then(|| Figure {
                name: name.to_string(),
                real_ms: round3(r),
                twin_ms: round3(t),
                error_pct: round1((t - r).abs() / r * 100.0),
            })
        })
        .collect()
}

/// The figures off by more than [`LIMIT_PCT`], as one sentence; `None`
/// when every figure holds.
pub fn verdict(figures: &[Figure]) -> Option<String> {
    let off: Vec<String> = figures
        .iter()
        .filter(|f| f.error_pct > LIMIT_PCT)
        .map(|f| {
            format!(
                "{} off by {:.1} % (real {:.1} ms, twin {:.1} ms)",
                f.name, f.error_pct, f.real_ms, f.twin_ms
            )
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "the profile does not predict the run it was fitted to: {} (more than {LIMIT_PCT} %)",
            off.join(", ")
        )
    })
}

/// The figures as the report prints them.
pub fn table(figures: &[Figure]) -> String {
    let mut s = String::from("the fitted run, predicted by the profile (real, twin, error):\n");
    for f in figures {
        s.push_str(&format!(
            "  {:<9} {:>10.1} ms {:>10.1} ms {:>7.1} %{}\n",
            f.name,
            f.real_ms,
            f.twin_ms,
            f.error_pct,
            if f.error_pct > LIMIT_PCT {
                "  over the limit"
            } else {
                ""
            }
        ));
    }
    s
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    // The batch's example profile: α 10 ms, β 0.01 ms per prefill token,
    // γ 1 ms per decoding request, two slots, a budget of 1000 tokens, no
    // spread.
    use crate::simulator::batch::tests::profile;
    use crate::twin::fit::tests::seen;

    #[test]
    fn the_models_own_run_is_predicted_exactly() {
        // The batch's second case: 0 (200 tokens) sent at 0, tokens at 12,
        // 26, 38; 1 (300) sent at 5, tokens at 26, 38.
        let run = vec![
            seen(0.0, 200, &[12.0, 26.0, 38.0]),
            seen(5.0, 300, &[26.0, 38.0]),
        ];
        let runs = [run];
        let f = compare(&real(&runs), &twin(&profile(), &runs));
        let errors: Vec<(&str, f64)> = f.iter().map(|f| (f.name.as_str(), f.error_pct)).collect();
        assert_eq!(
            errors,
            vec![
                ("TTFT p50", 0.0),
                ("TTFT p90", 0.0),
                ("ITL p50", 0.0),
                ("E2E p50", 0.0),
                ("E2E p90", 0.0)
            ]
        );
        assert_eq!(verdict(&f), None);
    }

    #[test]
    fn a_figure_off_by_more_than_the_limit_is_named() {
        // The same run, the server twice as slow: TTFTs 24 and 42 (p50 by
        // nearest rank: 24), gaps 28 and 24 (p50 24), E2E 76 and 66.
        let run = vec![
            seen(0.0, 200, &[24.0, 52.0, 76.0]),
            seen(5.0, 300, &[47.0, 71.0]),
        ];
        let runs = [run];
        let f = compare(&real(&runs), &twin(&profile(), &runs));
        // Twin: TTFT 12 and 21 (p50 12): 50 % off; p90 21 against 42.
        assert_eq!(f[0].real_ms, 24.0);
        assert_eq!(f[0].twin_ms, 12.0);
        assert_eq!(f[0].error_pct, 50.0);
        let v = verdict(&f).unwrap();
        assert!(
            v.starts_with(
                "the profile does not predict the run it was fitted to: TTFT p50 off by 50.0 % \
                 (real 24.0 ms, twin 12.0 ms), TTFT p90 off by 50.0 % (real 42.0 ms, twin 21.0 ms)"
            ),
            "{v}"
        );
        assert!(v.ends_with("(more than 15 %)"), "{v}");
    }
}
