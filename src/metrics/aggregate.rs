//! One group's figures: every result folded in, in memory bounded by the
//! number of windows, not by the number of results.

use std::collections::BTreeMap;

use super::convention::{Convention, ConventionDists};
use super::options::SummaryOptions;
use super::series::{InFlight, Seconds, Window, token_arrivals};
use super::sessions::Sessions;
use crate::result::{ResultView, Status};
use crate::stats::Dist;

/// Differences between what was asked and what the server reported
/// (`prompt_tokens − input_length`), exact.
#[derive(Clone, Debug, Default)]
pub struct Fidelity {
    /// Results with both numbers.
    pub count: u64,
    /// Results where they are equal.
    pub exact: u64,
    sum: i64,
    min: i64,
    max: i64,
}

impl Fidelity {
    fn record(&mut self, asked: Option<u64>, got: Option<u64>) {
        let (Some(asked), Some(got)) = (asked, got) else {
            return;
        };
        let d = got as i64 - asked as i64;
        if self.count == 0 {
            (self.min, self.max) = (d, d);
        }
        self.count += 1;
        self.exact += u64::from(d == 0);
        self.sum += d;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }

    fn merge(&mut self, o: &Fidelity) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            (self.min, self.max) = (o.min, o.max);
        }
        self.count += o.count;
        self.exact += o.exact;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Mean difference.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Smallest and largest difference.
    pub fn range(&self) -> Option<(i64, i64)> {
        (self.count > 0).then_some((self.min, self.max))
    }
}

/// The most kinds of error [`Errors`] tells apart: results with other
/// messages are counted together (memory does not grow with the results,
/// whose errors may each name a request).
pub const MAX_ERROR_KINDS: usize = 100;

/// One kind of failed result: its status, HTTP status and `error` text.
pub type ErrorKind = (Status, Option<u16>, String);

/// The results that are not ok, by what their `error` says (AIPerf's
/// error summary): a count per kind, up to [`MAX_ERROR_KINDS`] kinds.
#[derive(Clone, Debug, Default)]
pub struct Errors {
    pub kinds: BTreeMap<ErrorKind, u64>,
    /// Results of kinds beyond the first [`MAX_ERROR_KINDS`].
    pub other: u64,
}

impl Errors {
    fn count(&mut self, kind: ErrorKind, n: u64) {
        if let Some(c) = self.kinds.get_mut(&kind) {
            *c += n;
        } else if self.kinds.len() < MAX_ERROR_KINDS {
            self.kinds.insert(kind, n);
        } else {
            self.other += n;
        }
    }

    fn merge(&mut self, o: &Errors) {
        for (k, n) in &o.kinds {
            self.count(k.clone(), *n);
        }
        self.other += o.other;
    }
}

/// Everything summarize knows about one group of results.
#[derive(Clone, Debug, Default)]
pub struct Aggregate {
    /// Results counted (warmup left out).
    pub total: u64,
    /// Warmup results seen and left out.
    pub warmup: u64,
    /// Count by status.
    pub by_status: BTreeMap<Status, u64>,
    /// Count by HTTP status (`None` when no response arrived).
    pub by_http: BTreeMap<Option<u16>, u64>,
    /// The results not ok, by status, HTTP status and message.
    pub errors: Errors,
    /// Earliest send, ms.
    pub first_sent_ms: Option<f64>,
    /// Latest completion (or send, for a result without one), ms.
    pub last_end_ms: Option<f64>,
    /// Σ completion_tokens of ok results.
    pub output_tokens: u64,
    /// Σ prompt_tokens of ok results.
    pub prompt_tokens: u64,
    /// Ok results without usage: token throughput does not count them.
    pub ok_without_usage: u64,
    /// Per convention.
    pub conventions: BTreeMap<Convention, ConventionDists>,
    /// E2E of ok results.
    pub e2e: Dist,
    /// Output tokens per second of each ok result: tokens / E2E.
    pub tokens_per_s: Dist,
    /// Dispatch lag, sent − scheduled, of every result.
    pub lag: Dist,
    /// TTFT measured from the scheduled instant (primary convention).
    pub ttft_from_scheduled: Dist,
    /// E2E measured from the scheduled instant.
    pub e2e_from_scheduled: Dist,
    /// prompt_tokens − input_length.
    pub input_fidelity: Fidelity,
    /// completion_tokens − output_length.
    pub output_fidelity: Fidelity,
    /// Σ cached_tokens, and Σ prompt_tokens of the same results.
    pub cached_tokens: u64,
    /// See `cached_tokens`.
    pub cache_prompt_tokens: u64,
    /// Results that reported cached_tokens.
    pub cache_reports: u64,
    /// Output tokens per 1-second bucket (from the run's start), spread
    /// over each answer's chunks.
    pub tokens_per_second: Seconds,
    /// Requests in flight.
    pub in_flight: InFlight,
    /// Ok results meeting each SLO, in `Slo::bounds` order, and all of them.
    pub slo_met: Vec<u64>,
    /// Ok results meeting every SLO.
    pub slo_met_all: u64,
    /// Time series, by window index.
    pub windows: BTreeMap<i64, Window>,
    /// Results of sessions.
    pub sessions: Sessions,
}

impl Aggregate {
    /// Fold one result in. `itl` holds its gaps (already parsed).
    pub fn add(&mut self, r: &ResultView, itl: &[f64], opts: &SummaryOptions) {
        if r.warmup {
            self.warmup += 1;
            return;
        }
        self.total += 1;
        *self.by_status.entry(r.status).or_insert(0) += 1;
        *self.by_http.entry(r.http_status).or_insert(0) += 1;
        let end = r.sent_ms + r.e2e_ms.unwrap_or(0.0);
        // A cancelled request may never have been sent: its times are
        // those of the interruption, not of a request.
        let lag = r.scheduled_ms.map(|s| r.sent_ms - s);
        if r.status != Status::Cancelled {
            self.first_sent_ms = Some(self.first_sent_ms.map_or(r.sent_ms, |f| f.min(r.sent_ms)));
            self.last_end_ms = Some(self.last_end_ms.map_or(end, |l| l.max(end)));
            if let Some(lag) = lag {
                self.lag.record(lag);
            }
        }
        if let Some(e2e) = r.e2e_ms {
            self.in_flight.add(r.sent_ms, r.sent_ms + e2e);
        }
        let ok = r.status == Status::Ok;
        if let Some(w) = opts.window_ms {
            let started = self
                .windows
                .entry((r.sent_ms / w).floor() as i64)
                .or_default();
            started.started += 1;
            let ended = self.windows.entry((end / w).floor() as i64).or_default();
            ended.completed += 1;
            if ok {
                if let Some(t) = opts.conventions.primary.ttft(r) {
                    ended.ttft.record(t);
                }
                if let Some(e) = r.e2e_ms {
                    ended.e2e.record(e);
                }
            } else {
                ended.errors += 1;
            }
            if ok {
                let windows = &mut self.windows;
                token_arrivals(r, itl, |t, n| {
                    windows
                        .entry((t / w).floor() as i64)
                        .or_default()
                        .output_tokens += n;
                });
            }
        }
        if !ok {
            // The message is a label: read where the one-pass reader took
            // the labels (a result folded without its line has none).
            let message = r
                .labels
                .error
                .filter(|_| r.labels.read)
                .and_then(|raw| serde_json::from_str::<String>(raw.0).ok())
                .unwrap_or_default();
            self.errors.count((r.status, r.http_status, message), 1);
            return;
        }

        self.input_fidelity.record(r.input_length, r.prompt_tokens);
        self.output_fidelity
            .record(r.output_length, r.completion_tokens);
        if let (Some(c), Some(p)) = (r.cached_tokens, r.prompt_tokens) {
            self.cached_tokens += c;
            self.cache_prompt_tokens += p;
            self.cache_reports += 1;
        }
        match r.completion_tokens {
            Some(t) => self.output_tokens += t,
            None => self.ok_without_usage += 1,
        }
        self.prompt_tokens += r.prompt_tokens.unwrap_or(0);

        for c in opts.conventions.iter() {
            self.conventions.entry(c).or_default().add(c, r, itl);
        }
        if let Some(e2e) = r.e2e_ms {
            self.e2e.record(e2e);
            if let Some(n) = r.completion_tokens {
                if e2e > 0.0 {
                    self.tokens_per_s.record(n as f64 / (e2e / 1000.0));
                }
            }
            if let Some(lag) = lag {
                self.e2e_from_scheduled.record(e2e + lag);
            }
        }
        if let (Some(ttft), Some(lag)) = (opts.conventions.primary.ttft(r), lag) {
            self.ttft_from_scheduled.record(ttft + lag);
        }
        self.spread_tokens(r, itl);
        self.check_slo(r, itl, opts);
    }

    /// Put each answer's tokens in the seconds they arrived.
    fn spread_tokens(&mut self, r: &ResultView, itl: &[f64]) {
        let seconds = &mut self.tokens_per_second;
        token_arrivals(r, itl, |t, n| {
            // `as` saturates: a time beyond u64 seconds lands in the last one.
            seconds.add((t.max(0.0) / 1000.0) as u64, n);
        });
    }

    fn check_slo(&mut self, r: &ResultView, itl: &[f64], opts: &SummaryOptions) {
        if opts.slo.bounds.is_empty() {
            return;
        }
        if self.slo_met.len() < opts.slo.bounds.len() {
            self.slo_met.resize(opts.slo.bounds.len(), 0);
        }
        let c = opts.conventions.primary;
        let mut all = true;
        for (i, &(metric, bound)) in opts.slo.bounds.iter().enumerate() {
            let met = metric.met(bound, c, r, itl);
            self.slo_met[i] += u64::from(met);
            all &= met;
        }
        self.slo_met_all += u64::from(all);
    }

    /// Fold another group's figures in.
    pub fn merge(&mut self, o: &Aggregate) {
        merge_fields!(self, o;
            merge: sessions, e2e, tokens_per_s, lag, ttft_from_scheduled, e2e_from_scheduled,
                input_fidelity, output_fidelity, in_flight, errors;
            add: total, warmup, output_tokens, prompt_tokens, ok_without_usage, cached_tokens,
                cache_prompt_tokens, cache_reports, slo_met_all);
        for (k, v) in &o.by_status {
            *self.by_status.entry(*k).or_insert(0) += v;
        }
        for (k, v) in &o.by_http {
            *self.by_http.entry(*k).or_insert(0) += v;
        }
        self.first_sent_ms = min_opt(self.first_sent_ms, o.first_sent_ms);
        self.last_end_ms = match (self.last_end_ms, o.last_end_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for (k, v) in &o.conventions {
            self.conventions.entry(*k).or_default().merge(v);
        }
        for (i, v) in o.tokens_per_second.iter() {
            self.tokens_per_second.add(i, v);
        }
        if self.slo_met.len() < o.slo_met.len() {
            self.slo_met.resize(o.slo_met.len(), 0);
        }
        for (i, v) in o.slo_met.iter().enumerate() {
            self.slo_met[i] += v;
        }
        for (k, v) in &o.windows {
            self.windows.entry(*k).or_default().merge(v);
        }
    }

    /// Ok results.
    pub fn ok(&self) -> u64 {
        self.by_status.get(&Status::Ok).copied().unwrap_or(0)
    }

    /// First send to last completion, seconds.
    pub fn duration_s(&self) -> Option<f64> {
        match (self.first_sent_ms, self.last_end_ms) {
            (Some(a), Some(b)) if b > a => Some((b - a) / 1000.0),
            _ => None,
        }
    }

    /// How many windows the time series has, empty ones included: from the
    /// first that saw anything to the last.
    pub fn window_count(&self) -> u64 {
        match (self.windows.keys().next(), self.windows.keys().next_back()) {
            (Some(&first), Some(&last)) => last.abs_diff(first) + 1,
            _ => 0,
        }
    }

    /// The busiest second's output tokens.
    pub fn peak_tokens_per_s(&self) -> Option<f64> {
        self.tokens_per_second
            .iter()
            .map(|(_, v)| v)
            .reduce(f64::max)
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
