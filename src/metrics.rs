//! Folding result records into figures, in memory bounded by the number of
//! groups and windows, not by the number of results.

use std::collections::BTreeMap;

use crate::result::{Labels, ResultRecord, ResultView, Status};
pub use crate::stats::{Dist, EXACT_LIMIT, PercentileRule, Summary};

mod sessions;
pub use sessions::{SessionFigures, Sessions};

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

/// How the figures are defined: tracekit's own, or those a peer prints for
/// the same requests. Each peer's rules follow its source, at the release
/// named in [`Convention::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Convention {
    /// tracekit's own (the default): TTFT at the first content; TPOT =
    /// (E2E − TTFT) / (tokens − 1); ITL = the gaps between content chunks,
    /// pooled; E2E to the last byte; nearest-rank percentiles.
    Tracekit,
    /// AIPerf's: TTFT at the first content; request latency to the last
    /// content chunk; "inter token latency" per request = (latency − TTFT)
    /// / (tokens − 1); "inter chunk latency" = the gaps, pooled; numpy's
    /// linear percentiles.
    Aiperf,
    /// vLLM bench serve's: TTFT at the first content, reasoning or tool-call
    /// delta; E2E to the last token chunk; TPOT = (E2E − TTFT) / (tokens
    /// − 1); ITL = the gaps, pooled; numpy's linear percentiles.
    Vllm,
    /// GuideLLM's: TPOT = (last token − start) / tokens, weighted by
    /// tokens; ITL = (last − first token) / (tokens − 1), weighted by
    /// tokens − 1; GuideLLM's cumulative-share percentiles.
    Guidellm,
}

/// What one convention's figures are called by the tool that defines them,
/// in the order TTFT, TPOT, ITL, E2E.
pub struct Names {
    /// Time to first token.
    pub ttft: &'static str,
    /// The per-request average time per token.
    pub tpot: &'static str,
    /// Inter-token latency: pooled gaps, or per request under guidellm.
    pub itl: &'static str,
    /// Request latency.
    pub e2e: &'static str,
}

impl Convention {
    /// The name printed and used as a JSON key.
    pub fn name(self) -> &'static str {
        match self {
            Convention::Tracekit => "tracekit",
            Convention::Aiperf => "aiperf",
            Convention::Vllm => "vllm",
            Convention::Guidellm => "guidellm",
        }
    }

    /// The peer release whose source the rules follow.
    pub fn release(self) -> Option<&'static str> {
        match self {
            Convention::Tracekit => None,
            Convention::Aiperf => Some("AIPerf 0.13.0"),
            Convention::Vllm => Some("vLLM 0.33.0 (vllm bench serve)"),
            Convention::Guidellm => Some("GuideLLM 0.8.1"),
        }
    }

    /// The names the figures go by under this convention: TTFT, TPOT,
    /// ITL and E2E, as the peer's report spells them.
    pub fn names(self) -> Names {
        let [ttft, tpot, itl, e2e] = match self {
            Convention::Tracekit => ["TTFT", "TPOT", "ITL", "E2E"],
            Convention::Aiperf => [
                "Time to First Token",
                "Inter Token Latency",
                "Inter Chunk Latency",
                "Request Latency",
            ],
            Convention::Vllm => ["TTFT", "TPOT", "ITL", "E2EL"],
            Convention::Guidellm => [
                "time_to_first_token_ms",
                "time_per_output_token_ms",
                "inter_token_latency_ms",
                "request_latency",
            ],
        };
        Names {
            ttft,
            tpot,
            itl,
            e2e,
        }
    }

    /// How percentiles are read.
    pub fn percentile_rule(self) -> PercentileRule {
        match self {
            Convention::Tracekit => PercentileRule::NearestRank,
            Convention::Aiperf | Convention::Vllm => PercentileRule::Linear,
            Convention::Guidellm => PercentileRule::CumulativeShare,
        }
    }

    /// TTFT of one result under this convention. Every convention takes it
    /// at the first content, reasoning or tool-call chunk (`ttft_ms`): a
    /// chunk carrying only the role is not a token.
    pub fn ttft(self, r: &ResultView) -> Option<f64> {
        r.ttft_ms
    }

    /// Output tokens: the server's usage; under a peer's convention, an
    /// answer without usage counts one token per content chunk, as the
    /// peers do without a tokenizer (results carry no text to tokenize).
    pub fn output_tokens(self, r: &ResultView, itl: &[f64]) -> Option<u64> {
        match (r.completion_tokens, self) {
            (Some(n), _) => Some(n),
            (None, Convention::Tracekit) => None,
            (None, _) => r.ttft_ms.map(|_| itl.len() as u64 + 1),
        }
    }

    /// When the last token arrived, from the send: the last content chunk
    /// (TTFT plus every gap), or the end for an answer that did not stream.
    fn last_token(r: &ResultView, itl: &[f64]) -> Option<f64> {
        match r.ttft_ms {
            Some(t) => Some(t + itl.iter().sum::<f64>()),
            None => r.e2e_ms,
        }
    }

    /// E2E of one result: to the last byte (tracekit, GuideLLM's request
    /// end), or to the last token chunk (AIPerf, vLLM: the usage chunk and
    /// `[DONE]` do not count).
    pub fn e2e(self, r: &ResultView, itl: &[f64]) -> Option<f64> {
        match self {
            Convention::Tracekit | Convention::Guidellm => r.e2e_ms,
            Convention::Aiperf | Convention::Vllm => {
                r.e2e_ms?;
                Self::last_token(r, itl)
            }
        }
    }

    /// TPOT of one result, when it has one.
    pub fn tpot(self, r: &ResultView, itl: &[f64]) -> Option<f64> {
        let tokens = self.output_tokens(r, itl)?;
        match self {
            Convention::Guidellm => {
                r.e2e_ms?;
                let last = Self::last_token(r, itl)?;
                (tokens >= 1).then(|| last / tokens as f64)
            }
            _ => {
                let e2e = self.e2e(r, itl)?;
                let ttft = self.ttft(r)?;
                (tokens > 1).then(|| (e2e - ttft) / (tokens - 1) as f64)
            }
        }
    }
}

/// TTFT, TPOT, ITL and E2E under one convention.
#[derive(Clone, Debug, Default)]
pub struct ConventionDists {
    /// Time to first token.
    pub ttft: Dist,
    /// Time per output token.
    pub tpot: Dist,
    /// Inter-token latency.
    pub itl: Dist,
    /// End-to-end latency.
    pub e2e: Dist,
    /// Σ output tokens of ok results, as this convention counts them.
    pub output_tokens: u64,
    /// Ok results without usage whose tokens were counted as content
    /// chunks.
    pub tokens_from_chunks: u64,
}

/// Fold `$o`'s figures into `$a`'s (shards, `--by` groups): those with a
/// `merge` (distributions) by it, counters by adding.
macro_rules! merge_fields {
    ($a:ident, $o:ident; merge: $($m:ident),*; add: $($n:ident),* $(,)?) => {
        $($a.$m.merge(&$o.$m);)*
        $($a.$n += $o.$n;)*
    };
}

impl ConventionDists {
    fn merge(&mut self, o: &ConventionDists) {
        merge_fields!(self, o; merge: ttft, tpot, itl, e2e; add: output_tokens, tokens_from_chunks);
    }

    /// Fold in one ok result under convention `c`.
    fn add(&mut self, c: Convention, r: &ResultView, itl: &[f64]) {
        let tokens = c.output_tokens(r, itl);
        self.output_tokens += tokens.unwrap_or(0);
        if r.completion_tokens.is_none() && tokens.is_some() {
            self.tokens_from_chunks += 1;
        }
        if let Some(e) = c.e2e(r, itl) {
            self.e2e.record(e);
        }
        if c != Convention::Guidellm {
            if let Some(t) = c.ttft(r) {
                self.ttft.record(t);
            }
            if let Some(t) = c.tpot(r, itl) {
                self.tpot.record(t);
            }
            for &gap in itl {
                self.itl.record(gap);
            }
            return;
        }
        // GuideLLM (guidellm/benchmark/schemas/generative/metrics.py) counts
        // a missing TTFT as 0, weights TPOT by tokens and ITL by tokens − 1
        // (a missing ITL as 0 too); weight 0 drops a value.
        self.ttft.record(c.ttft(r).unwrap_or(0.0));
        let n = tokens.unwrap_or(0);
        if let Some(t) = c.tpot(r, itl) {
            self.tpot.record_weighted(t, n);
        }
        // ITL = (last − first token) / (tokens − 1): the gaps' sum.
        let itl_value = match (r.ttft_ms, n > 1) {
            (Some(_), true) => itl.iter().sum::<f64>() / (n - 1) as f64,
            _ => 0.0,
        };
        self.itl.record_weighted(itl_value, n.saturating_sub(1));
    }
}

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

/// The most windows a time series may have: each is a row of the report,
/// built in memory.
pub const MAX_WINDOWS: u64 = 100_000;

/// Values a window keeps exactly before its percentiles become
/// approximate (within 0.1 %).
pub const WINDOW_EXACT_LIMIT: usize = 1_000;

/// A window of the time series.
#[derive(Clone, Debug)]
pub struct Window {
    /// Requests sent in the window.
    pub started: u64,
    /// Requests that ended in the window.
    pub completed: u64,
    /// Requests that ended in the window without `ok`.
    pub errors: u64,
    /// Output tokens of ok requests that arrived in the window (see
    /// [`token_arrivals`]).
    pub output_tokens: f64,
    /// TTFT of ok requests that ended in the window.
    pub ttft: Dist,
    /// E2E of ok requests that ended in the window.
    pub e2e: Dist,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            started: 0,
            completed: 0,
            errors: 0,
            output_tokens: 0.0,
            ttft: Dist::with_exact_limit(WINDOW_EXACT_LIMIT),
            e2e: Dist::with_exact_limit(WINDOW_EXACT_LIMIT),
        }
    }
}

impl Window {
    fn merge(&mut self, o: &Window) {
        self.started += o.started;
        self.completed += o.completed;
        self.errors += o.errors;
        self.output_tokens += o.output_tokens;
        self.ttft.merge(&o.ttft);
        self.e2e.merge(&o.e2e);
    }
}

/// Requests in flight over time, as +1/−1 steps in buckets whose width
/// doubles whenever the run outgrows [`InFlight::MAX_BUCKETS`].
#[derive(Clone, Debug)]
pub struct InFlight {
    /// Bucket width, ms.
    pub resolution_ms: f64,
    steps: Vec<i32>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            resolution_ms: 1.0,
            steps: Vec::new(),
        }
    }
}

impl InFlight {
    /// At 1 ms, 2^21 buckets cover 35 minutes in 8 MB.
    pub const MAX_BUCKETS: usize = 1 << 21;

    fn step(&mut self, at_ms: f64, delta: i32) {
        let mut i = (at_ms.max(0.0) / self.resolution_ms) as usize;
        while i >= Self::MAX_BUCKETS {
            self.coarsen();
            i = (at_ms.max(0.0) / self.resolution_ms) as usize;
        }
        if i >= self.steps.len() {
            self.steps.resize(i + 1, 0);
        }
        self.steps[i] += delta;
    }

    fn coarsen(&mut self) {
        self.resolution_ms *= 2.0;
        let merged: Vec<i32> = self.steps.chunks(2).map(|c| c.iter().sum()).collect();
        self.steps = merged;
    }

    fn add(&mut self, start_ms: f64, end_ms: f64) {
        self.step(start_ms, 1);
        self.step(end_ms, -1);
    }

    fn merge(&mut self, o: &InFlight) {
        while self.resolution_ms < o.resolution_ms {
            self.coarsen();
        }
        let ratio = (self.resolution_ms / o.resolution_ms) as usize;
        for (i, &d) in o.steps.iter().enumerate() {
            if d != 0 {
                let at = (i / ratio) as f64 * self.resolution_ms;
                self.step(at, d);
            }
        }
    }

    /// The most requests in flight at any bucket boundary.
    pub fn peak(&self) -> u64 {
        let mut level: i64 = 0;
        let mut peak: i64 = 0;
        for &d in &self.steps {
            level += i64::from(d);
            peak = peak.max(level);
        }
        peak as u64
    }
}

/// A sum by second. A run's seconds lie close together, so they are a
/// vector from the first one seen (the sum runs for every chunk of every
/// answer, and a map's search cost most of summarize's time). A second
/// before the vector, or so far past it that the vector would be mostly
/// empty, goes to a map: no clock value makes it allocate more than the
/// sums given warrant. Each second is in one of the two.
#[derive(Clone, Debug, Default)]
pub struct Seconds {
    base: u64,
    dense: Vec<f64>,
    sums: usize,
    sparse: BTreeMap<u64, f64>,
}

impl Seconds {
    /// Room before the first second seen, for results written out of order.
    const EARLIER: u64 = 60;

    /// Add `n` to `second`'s sum.
    #[inline]
    pub fn add(&mut self, second: u64, n: f64) {
        self.sums += 1;
        match second
            .checked_sub(self.base)
            .and_then(|i| self.dense.get_mut(usize::try_from(i).ok()?))
        {
            Some(sum) => *sum += n,
            None => self.add_outside(second, n),
        }
    }

    #[cold]
    fn add_outside(&mut self, second: u64, n: f64) {
        if self.dense.is_empty() {
            self.base = second.saturating_sub(Self::EARLIER);
        }
        // The vector grows to at most eight slots a sum given, plus a few.
        let room = 64 + 8 * self.sums as u64;
        match second.checked_sub(self.base) {
            Some(i) if i < room => {
                let (from, to) = (self.dense.len() as u64, i + 1);
                self.dense.resize(to as usize, 0.0);
                // A second the map held moves into the vector, its sum so far
                // carried as it is.
                let moved: Vec<u64> = self
                    .sparse
                    .range(self.base + from..=second)
                    .map(|(&s, _)| s)
                    .collect();
                for s in moved {
                    self.dense[(s - self.base) as usize] = self.sparse.remove(&s).unwrap_or(0.0);
                }
                self.dense[i as usize] += n;
            }
            _ => *self.sparse.entry(second).or_insert(0.0) += n,
        }
    }

    /// Each second given a sum (and some seconds between them, at 0), with
    /// its sum, in order: the map's seconds before the vector, the vector's,
    /// the map's after it. (The map holds none within the vector; before
    /// the first sum both are empty.)
    pub fn iter(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        use std::ops::Bound::{Excluded, Unbounded};
        let last = self.base + (self.dense.len() as u64).saturating_sub(1);
        let map = |(&s, &v): (&u64, &f64)| (s, v);
        let dense = self.dense.iter().enumerate();
        (self.sparse.range(..self.base).map(map))
            .chain(dense.map(|(i, &v)| (self.base + i as u64, v)))
            .chain(self.sparse.range((Excluded(last), Unbounded)).map(map))
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

/// What folding needs besides the result.
pub struct FoldOptions<'a> {
    /// Conventions to compute; the first is printed first.
    pub conventions: &'a [Convention],
    /// SLOs to test, if any.
    pub slo: &'a Slo,
    /// Window width, ms.
    pub window_ms: Option<f64>,
}

impl Aggregate {
    /// Fold one result in. `itl` holds its gaps (already parsed).
    pub fn add(&mut self, r: &ResultView, itl: &[f64], opts: &FoldOptions) {
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
                if let Some(t) = opts.conventions[0].ttft(r) {
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

        for &c in opts.conventions {
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
        if let (Some(ttft), Some(lag)) = (opts.conventions[0].ttft(r), lag) {
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

    fn check_slo(&mut self, r: &ResultView, itl: &[f64], opts: &FoldOptions) {
        if opts.slo.bounds.is_empty() {
            return;
        }
        if self.slo_met.len() < opts.slo.bounds.len() {
            self.slo_met.resize(opts.slo.bounds.len(), 0);
        }
        let c = opts.conventions[0];
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
                input_fidelity, output_fidelity, in_flight;
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

/// When an ok answer's output tokens arrived, as (ms from time 0, tokens)
/// pairs given to `at`: `completion_tokens` divided evenly over its content
/// chunks (the first at `sent_ms + ttft_ms`, each next one a gap of `itl`
/// later; fractions kept), or all at `sent_ms + e2e_ms` when it has no TTFT
/// (not streamed). An answer without usage gives nothing. The peak, the
/// windows and the plot all read tokens through this one rule.
pub fn token_arrivals(r: &ResultView, itl: &[f64], mut at: impl FnMut(f64, f64)) {
    let Some(tokens) = r.completion_tokens.filter(|&t| t > 0) else {
        return;
    };
    match r.ttft_ms {
        Some(ttft) => {
            let per_chunk = tokens as f64 / (itl.len() + 1) as f64;
            let mut t = r.sent_ms + ttft;
            at(t, per_chunk);
            for gap in itl {
                t += gap;
                at(t, per_chunk);
            }
        }
        None => at(r.sent_ms + r.e2e_ms.unwrap_or(0.0), tokens as f64),
    }
}

/// Fold one result into `agg`: its figures and, for a result of a
/// session (`session`: its `session_id` and `turn`), its session's. The
/// one fold of results: trace-summarize folds each line it reads through
/// it (with [`session_of`]), trace-sweep each result of a run as it comes
/// (with [`view_of`]).
pub fn fold(
    agg: &mut Aggregate,
    r: &ResultView,
    itl: &[f64],
    session: Option<(&str, Option<u64>, Option<&str>)>,
    opts: &FoldOptions,
) {
    agg.add(r, itl, opts);
    if let (false, Some((session, turn, model))) = (r.warmup, session) {
        agg.sessions.add(session, turn, model, r);
    }
}

/// A result line's `session_id`, `turn` and `model`, when it has a
/// session. Only lines that name one are read again, which keeps the
/// common path as it is.
pub fn session_of(line: &str) -> Option<(String, Option<u64>, Option<String>)> {
    memchr::memmem::find(line.as_bytes(), b"\"session_id\"")?;
    let [session, turn, model] = crate::json::peek(line, ["session_id", "turn", "model"])?;
    let session = crate::record::string("session_id", session?)
        .ok()?
        .into_owned();
    let turn = turn.and_then(|t| crate::record::integer("turn", t).ok());
    let model = model.and_then(|m| {
        crate::record::string("model", m)
            .ok()
            .map(|m| m.into_owned())
    });
    Some((session, turn, model))
}

/// A result record as its line reads for the fold (its gaps are
/// `r.measure.itl_ms`): what a results file gives, without writing and
/// reading it.
pub fn view_of(r: &ResultRecord) -> ResultView<'_> {
    let m = &r.measure;
    ResultView {
        scheduled_ms: Some(r.scheduled_ms),
        sent_ms: r.sent_ms,
        ttft_ms: m.ttft_ms,
        first_chunk_ms: m.first_chunk_ms,
        e2e_ms: m.e2e_ms,
        itl_ms: None,
        input_length: r.input_length,
        output_length: r.output_length,
        prompt_tokens: m.prompt_tokens,
        completion_tokens: m.completion_tokens,
        cached_tokens: m.cached_tokens,
        status: m.status,
        http_status: m.http_status,
        warmup: r.warmup,
        labels: Labels::default(),
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The seconds given a sum other than 0, in `iter`'s order.
    fn sums(s: &Seconds) -> Vec<(u64, f64)> {
        s.iter().filter(|&(_, n)| n != 0.0).collect()
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
                s.add(id, None, None, &r);
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
    fn seconds_before_or_far_past_the_vector_go_to_the_map() {
        let mut s = Seconds::default();
        for (second, n) in [
            (100, 1.5),
            (30, 2.0),
            (1_000_000, 4.0),
            (101, 0.25),
            (100, 1.0),
        ] {
            s.add(second, n);
        }
        assert_eq!(
            sums(&s),
            [(30, 2.0), (100, 2.5), (101, 0.25), (1_000_000, 4.0)]
        );
        // Seconds 40 to 101; 30 and 1,000,000 in the map.
        assert_eq!((s.base, s.dense.len(), s.sparse.len()), (40, 62, 2));
    }

    #[test]
    fn a_second_the_map_held_moves_into_the_vector_with_its_sum() {
        let mut s = Seconds::default();
        s.add(60, 1.0); // the vector from 0, room for 72 slots
        s.add(200, 3.0); // past the room (80): the map
        for _ in 0..20 {
            s.add(60, 0.5);
        }
        s.add(150, 1.0); // room 248: the vector grows to 151
        assert_eq!(s.sparse.len(), 1);
        s.add(201, 1.0); // to 202, taking 200 in
        s.add(200, 0.5);
        assert!(s.sparse.is_empty());
        assert_eq!(s.dense.len(), 202);
        assert_eq!(sums(&s), [(60, 11.0), (150, 1.0), (200, 3.5), (201, 1.0)]);
    }

    #[test]
    fn seconds_sum_to_the_bit_as_a_map_does() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..50 {
            let (mut s, mut map) = (Seconds::default(), BTreeMap::<u64, f64>::new());
            for _ in 0..2_000 {
                // Mostly near each other, some far off, in any order.
                let second = match next() % 10 {
                    0 => next() % 100_000,
                    1 => u64::MAX - next() % 3,
                    _ => 5_000 + next() % 300,
                };
                let n = (next() % 1000) as f64 / 7.0;
                s.add(second, n);
                *map.entry(second).or_insert(0.0) += n;
            }
            let want: Vec<(u64, f64)> = map.into_iter().filter(|&(_, n)| n != 0.0).collect();
            assert_eq!(sums(&s), want);
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
