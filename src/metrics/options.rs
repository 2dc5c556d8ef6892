//! What a summary is asked for besides the results: the one set of options
//! the fold and the report both read (trace-summarize builds it from its
//! flags, trace-sweep from its own).

use super::convention::Convention;
use super::slo::Slo;

/// The conventions figures are computed under: the report's own, and
/// those printed beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conventions {
    /// The report's own: its figures, the SLOs, windows and per-request
    /// rows follow it.
    pub primary: Convention,
    /// The others, in the order asked, without the primary or a repeat.
    pub also: Vec<Convention>,
}

impl Default for Conventions {
    /// tracekit's own, alone.
    fn default() -> Self {
        Conventions::only(Convention::Tracekit)
    }
}

impl Conventions {
    /// One convention, with none beside it.
    pub fn only(primary: Convention) -> Conventions {
        Conventions {
            primary,
            also: Vec::new(),
        }
    }

    /// Conventions as listed, the first the primary; a repeat is dropped.
    /// None for an empty list.
    pub fn of(list: impl IntoIterator<Item = Convention>) -> Option<Conventions> {
        let mut list = list.into_iter();
        let mut c = Conventions::only(list.next()?);
        for other in list {
            if other != c.primary && !c.also.contains(&other) {
                c.also.push(other);
            }
        }
        Some(c)
    }

    /// Every convention, the primary first.
    pub fn iter(&self) -> impl Iterator<Item = Convention> + '_ {
        std::iter::once(self.primary).chain(self.also.iter().copied())
    }
}

/// What folding and reporting need besides the results.
#[derive(Clone, Debug, Default)]
pub struct SummaryOptions {
    /// Conventions to compute.
    pub conventions: Conventions,
    /// Percentiles to print.
    pub percentiles: Vec<f64>,
    /// SLOs to test, if any.
    pub slo: Slo,
    /// Add latencies measured from the scheduled instant.
    pub from_scheduled: bool,
    /// Window width, ms, for the time series.
    pub window_ms: Option<f64>,
}
