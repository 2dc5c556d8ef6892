//! Which speeds a sweep runs: the ones listed, or a search for the highest
//! speed whose run meets the SLO. Pure: the runs' verdicts come in, the
//! next speed goes out.

/// The speeds to run, and the answer they give.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Each speed given, in order.
    List {
        /// The speeds.
        speeds: Vec<f64>,
        /// How many have run.
        done: usize,
        /// The highest speed that passed.
        best: Option<f64>,
    },
    /// Double from the lowest until a run fails, then bisect between the
    /// last pass and the first fail.
    Search(Search),
}

/// The state of a `--search LO..HI`.
#[derive(Debug, Clone)]
pub struct Search {
    hi: f64,
    /// Stop when (fail − pass) / pass is at most this.
    precision: f64,
    /// The highest speed that passed.
    pass: Option<f64>,
    /// The lowest speed that failed.
    fail: Option<f64>,
    next: Option<f64>,
}

impl Plan {
    /// Run `speeds` as given.
    pub fn list(speeds: Vec<f64>) -> Plan {
        Plan::List {
            speeds,
            done: 0,
            best: None,
        }
    }

    /// Search `lo..hi` to `precision`.
    pub fn search(lo: f64, hi: f64, precision: f64) -> Plan {
        Plan::Search(Search {
            hi,
            precision,
            pass: None,
            fail: None,
            next: Some(lo),
        })
    }

    /// The next speed to run; `None` when the sweep is over.
    pub fn next(&self) -> Option<f64> {
        match self {
            Plan::List { speeds, done, .. } => speeds.get(*done).copied(),
            Plan::Search(s) => s.next,
        }
    }

    /// A run at `speed` passed or failed.
    pub fn record(&mut self, speed: f64, passed: bool) {
        match self {
            Plan::List { done, best, .. } => {
                *done += 1;
                if passed && best.is_none_or(|b| speed > b) {
                    *best = Some(speed);
                }
            }
            Plan::Search(s) => s.record(speed, passed),
        }
    }

    /// The highest speed that met the SLO, so far, and whether it is the
    /// highest speed tried (then the capacity is at least that).
    pub fn answer(&self) -> Answer {
        match self {
            Plan::List {
                speeds, done, best, ..
            } => Answer {
                speed: *best,
                beyond: best.is_some_and(|b| speeds[..*done].iter().all(|&s| s <= b)),
            },
            Plan::Search(s) => Answer {
                speed: s.pass,
                beyond: s.pass.is_some() && s.fail.is_none(),
            },
        }
    }
}

/// What a sweep found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Answer {
    /// The highest speed that met the SLO.
    pub speed: Option<f64>,
    /// It was the highest speed tried: no run failed above it, so the
    /// capacity may be more (`--search` to a higher bound finds it).
    pub beyond: bool,
}

impl Search {
    fn record(&mut self, speed: f64, passed: bool) {
        if passed {
            self.pass = Some(self.pass.map_or(speed, |p| p.max(speed)));
        } else {
            self.fail = Some(self.fail.map_or(speed, |f| f.min(speed)));
        }
        self.next = match (self.pass, self.fail) {
            // Even the lowest speed failed.
            (None, _) => None,
            (Some(p), None) if p >= self.hi => None,
            (Some(p), None) => Some((p * 2.0).min(self.hi)),
            // A pass above a fail (a noisy server): the pass stands.
            (Some(p), Some(f)) if f <= p => None,
            (Some(p), Some(f)) if (f - p) / p <= self.precision => None,
            (Some(p), Some(f)) => {
                let mid = round_significant((p + f) / 2.0, 3);
                (mid > p && mid < f).then_some(mid)
            }
        };
    }
}

/// `x` to `digits` significant digits, so that speeds (and the file names
/// made of them) stay short: 1.9375 is 1.94.
pub fn round_significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The speeds a plan runs when runs pass up to `capacity`.
    fn runs(mut plan: Plan, capacity: f64) -> (Vec<f64>, Answer) {
        let mut seen = Vec::new();
        while let Some(s) = plan.next() {
            seen.push(s);
            plan.record(s, s <= capacity);
            assert!(seen.len() < 50, "the plan does not end: {seen:?}");
        }
        (seen, plan.answer())
    }

    #[test]
    fn a_search_doubles_then_bisects_to_the_precision() {
        // 0.25, 0.5, 1, 2 pass; 4 fails; then 3 (pass), 3.5 (fail),
        // 3.25 (fail): (3.25 − 3) / 3 = 8.3 % > 5 %, so 3.13 (3.125 to
        // three digits, a pass); (3.25 − 3.13) / 3.13 = 3.8 %: done.
        let (seen, answer) = runs(Plan::search(0.25, 16.0, 0.05), 3.2);
        assert_eq!(seen, vec![0.25, 0.5, 1.0, 2.0, 4.0, 3.0, 3.5, 3.25, 3.13]);
        let found = Answer {
            speed: Some(3.13),
            beyond: false,
        };
        assert_eq!(answer, found);
    }

    #[test]
    fn a_search_stops_at_its_top_and_at_a_failing_bottom() {
        let (seen, answer) = runs(Plan::search(1.0, 6.0, 0.05), 100.0);
        assert_eq!(seen, vec![1.0, 2.0, 4.0, 6.0]);
        // Its top met the SLO: the capacity is at least that.
        let at_least = Answer {
            speed: Some(6.0),
            beyond: true,
        };
        assert_eq!(answer, at_least);
        let (seen, answer) = runs(Plan::search(1.0, 16.0, 0.05), 0.5);
        assert_eq!(seen, vec![1.0]);
        assert_eq!(answer, Answer::default());
    }

    #[test]
    fn a_list_runs_every_speed_and_answers_the_highest_pass() {
        let (seen, answer) = runs(Plan::list(vec![0.5, 4.0, 1.0, 2.0]), 1.5);
        assert_eq!(seen, vec![0.5, 4.0, 1.0, 2.0]);
        let found = Answer {
            speed: Some(1.0),
            beyond: false,
        };
        assert_eq!(answer, found);
        let (_, answer) = runs(Plan::list(vec![2.0, 4.0]), 1.0);
        assert_eq!(answer, Answer::default());
        // The highest listed met it: at least that.
        let (_, answer) = runs(Plan::list(vec![2.0, 4.0, 1.0]), 5.0);
        let at_least = Answer {
            speed: Some(4.0),
            beyond: true,
        };
        assert_eq!(answer, at_least);
    }

    #[test]
    fn speeds_are_rounded_to_three_digits() {
        assert_eq!(round_significant(1.9375, 3), 1.94);
        assert_eq!(round_significant(0.15625, 3), 0.156);
        assert_eq!(round_significant(12.75, 3), 12.8);
        assert_eq!(round_significant(3.0, 3), 3.0);
    }
}
