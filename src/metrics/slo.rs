//! Service-level objectives and whether a result meets them.

use super::convention::Convention;
use crate::result::{ResultView, Status};

/// Service-level objectives: a request meets one when its figure is at most
/// the bound.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slo {
    /// (name, bound in ms), in the order given.
    pub bounds: Vec<(SloMetric, f64)>,
}

/// What an SLO bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SloMetric {
    /// TTFT under the printed convention; a result without one misses.
    Ttft,
    /// TPOT; a one-token answer has none and meets it.
    Tpot,
    /// Every gap between content chunks.
    Itl,
    /// End-to-end latency.
    E2e,
}

impl Slo {
    /// Whether an ok result meets every bound, its figures taken under
    /// convention `c` (a result that is not ok meets none).
    pub fn met_by(&self, c: Convention, r: &ResultView, itl: &[f64]) -> bool {
        r.status == Status::Ok
            && self
                .bounds
                .iter()
                .all(|&(metric, bound)| metric.met(bound, c, r, itl))
    }
}

impl SloMetric {
    /// Whether a result's figure is within `bound`, under convention `c`.
    pub fn met(self, bound: f64, c: Convention, r: &ResultView, itl: &[f64]) -> bool {
        match self {
            SloMetric::Ttft => c.ttft(r).is_some_and(|v| v <= bound),
            SloMetric::Tpot => c.tpot(r, itl).is_none_or(|v| v <= bound),
            SloMetric::Itl => itl.iter().all(|&g| g <= bound),
            SloMetric::E2e => r.e2e_ms.is_some_and(|v| v <= bound),
        }
    }

    /// Its name on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Itl => "itl",
            SloMetric::E2e => "e2e",
        }
    }
}

/// Parse `--slo`: `ttft=200ms,tpot=50ms,e2e=10s,itl=100ms`.
pub fn parse_slo(text: &str) -> std::result::Result<Slo, String> {
    let mut bounds = Vec::new();
    for part in text.split(',') {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not NAME=DURATION, e.g. ttft=200ms"))?;
        let metric = match name.trim() {
            "ttft" => SloMetric::Ttft,
            "tpot" => SloMetric::Tpot,
            "itl" => SloMetric::Itl,
            "e2e" => SloMetric::E2e,
            other => {
                return Err(format!(
                    "`{other}` is not an SLO: use ttft, tpot, itl or e2e"
                ));
            }
        };
        if bounds.iter().any(|&(m, _)| m == metric) {
            return Err(format!(
                "`{}` is given twice: give each SLO once",
                name.trim()
            ));
        }
        bounds.push((metric, crate::duration::parse_ms(value)?));
    }
    Ok(Slo { bounds })
}
