//! Turning an [`Aggregate`] into the report: the typed [`Report`], built in
//! one place, is the one schema. `--format json` serializes it; the CSV
//! columns and `--fail-if` paths read its JSON value; the table and
//! Markdown forms render its fields through the one table writer
//! ([`table`]). [`FIGURES`] describes its figures once (unit, shown by
//! `--compare` and trace-sweep), for the summaries that list figures.

mod json;
mod keyed;
mod server;
mod table;
mod text;

use serde::Serialize;
use serde_json::Value;

use crate::metrics::{
    Aggregate, Convention, ConventionDists, Dist, Errors, Fidelity, MAX_ERROR_KINDS,
    PercentileRule, SessionFigures, Slo, Summary, SummaryOptions, Window,
};
use crate::result::Status;
pub use json::{flatten, lookup, windows_csv};
pub use keyed::{Keyed, percentile_key};
pub use server::{ServerFigure, ServerSection, ServerWindow};
pub use table::{Format, Style, columns, num, number, table};
pub use text::{convention_note, to_text};

/// The whole report of one group. Field order is key order; `None` in an
/// `Option` skipped when absent is a key the report leaves out, any other
/// `None` is `null`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The report's own convention.
    pub convention: &'static str,
    /// The peer release it follows (peers' conventions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<&'static str>,
    /// `exact`, or `3 significant digits` once a distribution became a
    /// histogram.
    pub precision: &'static str,
    pub requests: Requests,
    /// Count by HTTP status, `none` for no response.
    pub http_status: Keyed<u64>,
    /// The results not ok by status, HTTP status and message, the most
    /// frequent first.
    pub errors: Vec<ErrorCount>,
    /// First send to last end, s.
    pub duration_s: Option<f64>,
    /// Ok results without usage counted one token per content chunk (peers'
    /// conventions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens_from_chunks: Option<u64>,
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    pub throughput: Throughput,
    pub peak: Peak,
    pub ttft: Stats,
    pub tpot: Stats,
    pub itl: Stats,
    pub e2e: Stats,
    pub output_tokens_per_s_per_request: Stats,
    pub dispatch_lag: Stats,
    /// With --from-scheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_scheduled: Option<FromScheduled>,
    pub input_length_error: FidelityFigures,
    pub output_length_error: FidelityFigures,
    pub prefix_cache: PrefixCache,
    /// When results carry sessions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsFigures>,
    /// With --slo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloFigures>,
    /// The other conventions asked for, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conventions: Option<Keyed<ConventionFigures>>,
    /// With --window: every window from the first to the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<WindowFigures>>,
    /// With --metrics (the whole run's report only): see
    /// [`ServerSection::of`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSection>,
}

/// Results not ok with one status, HTTP status and `error` message.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorCount {
    pub count: u64,
    pub status: &'static str,
    pub http_status: Option<u16>,
    /// The result's `error`; with status `other`, results of kinds beyond
    /// the first 100 (by status, HTTP status and message).
    pub message: String,
}

impl ErrorCount {
    /// The kinds, the most frequent first (then by status, HTTP status
    /// and message), and those beyond the limit as one.
    fn of(e: &Errors) -> Vec<ErrorCount> {
        let mut out: Vec<ErrorCount> = e
            .kinds
            .iter()
            .map(|((status, http, message), n)| ErrorCount {
                count: *n,
                status: status.as_str(),
                http_status: *http,
                message: message.clone(),
            })
            .collect();
        // Stable: equal counts keep the map's order.
        out.sort_by_key(|e| std::cmp::Reverse(e.count));
        if e.other > 0 {
            out.push(ErrorCount {
                count: e.other,
                status: "other",
                http_status: None,
                message: format!("results of kinds beyond the first {MAX_ERROR_KINDS}"),
            });
        }
        out
    }
}

/// Results by status.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Requests {
    pub total: u64,
    pub ok: u64,
    pub error: u64,
    pub timeout: u64,
    pub cancelled: u64,
    pub warmup_excluded: u64,
    pub ok_without_usage: u64,
}

/// Per second of the run's duration; null without a duration.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Throughput {
    pub requests_per_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub total_tokens_per_s: Option<f64>,
}

/// Peaks over the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Peak {
    /// The busiest 1-second bucket.
    pub output_tokens_per_s: Option<f64>,
    pub in_flight: u64,
    pub in_flight_resolution_ms: f64,
}

/// A distribution's figures; without values, the same keys with nulls, so
/// that every report has the same shape (CSV columns, `--fail-if` paths).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub count: u64,
    pub mean: Option<f64>,
    pub std: Option<f64>,
    pub min: Option<f64>,
    /// By [`percentile_key`], in the order asked.
    #[serde(flatten)]
    pub percentiles: Keyed<Option<f64>>,
    pub max: Option<f64>,
}

impl Stats {
    fn of(d: &Dist, ps: &[f64]) -> Stats {
        Stats::by(d, ps, PercentileRule::NearestRank)
    }

    fn by(d: &Dist, ps: &[f64], rule: PercentileRule) -> Stats {
        match d.summary_by(ps, rule) {
            Some(s) => Stats::summary(&s),
            None => Stats {
                percentiles: ps.iter().map(|p| (percentile_key(*p), None)).collect(),
                ..Stats::default()
            },
        }
    }

    fn summary(s: &Summary) -> Stats {
        Stats {
            count: s.count,
            mean: finite(s.mean),
            std: finite(s.std),
            min: finite(s.min),
            percentiles: s
                .percentiles
                .iter()
                .map(|(p, v)| (percentile_key(*p), finite(*v)))
                .collect(),
            max: finite(s.max),
        }
    }

    /// The `p`-th percentile, when asked for and known.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles.get(&percentile_key(p)).copied().flatten()
    }
}

/// Latencies measured from the scheduled instant.
#[derive(Clone, Debug, Serialize)]
pub struct FromScheduled {
    pub ttft: Stats,
    pub e2e: Stats,
}

/// Differences between the tokens asked for and those reported.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FidelityFigures {
    pub count: u64,
    pub exact: u64,
    pub mean: Option<f64>,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl FidelityFigures {
    fn of(f: &Fidelity) -> FidelityFigures {
        let range = f.range();
        FidelityFigures {
            count: f.count,
            exact: f.exact,
            mean: f.mean().and_then(finite),
            min: range.map(|r| r.0),
            max: range.map(|r| r.1),
        }
    }
}

/// The server's prefix cache, as the results report it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PrefixCache {
    pub hit_rate: Option<f64>,
    pub cached_tokens: u64,
    pub prompt_tokens: u64,
    pub results: u64,
}

/// The sessions' figures: counts, turns per session, session duration
/// (first send to last completion), tokens and prefix cache hit rate per
/// session, the hit rate by turn position, keyed by the turn
/// (`--fail-if 'sessions.cache_hit_rate_by_turn.2<0.5'`), and TTFT by turn
/// position (the first turn against later ones) and by model (an agent's
/// main model against its subagents'), keyed by the model.
#[derive(Clone, Debug, Serialize)]
pub struct SessionsFigures {
    pub count: u64,
    pub completed: u64,
    pub turns: Stats,
    pub duration_ms: Stats,
    pub tokens: Stats,
    pub cache_hit_rate: Stats,
    pub cache_hit_rate_by_turn: Keyed<Option<f64>>,
    pub ttft_first_turn_ms: Stats,
    pub ttft_later_turns_ms: Stats,
    pub ttft_by_model_ms: Keyed<Stats>,
    /// Per session: the prefix cache hit rate the recorded session had
    /// (`observed_cached_tokens` / `input_length`), for traces that kept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_cache_hit_rate: Option<Stats>,
    /// The same by turn position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_cache_hit_rate_by_turn: Option<Keyed<Option<f64>>>,
    /// The main agents' calls against the subagents', when results name
    /// subagents' calls (`SESSION/AGENT:N` ids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<AgentsFigures>,
}

/// The main agents' calls and the subagents'.
#[derive(Clone, Debug, Serialize)]
pub struct AgentsFigures {
    pub main: AgentSide,
    pub subagents: AgentSide,
}

/// One side's calls: how many, how many ok, the prefix cache hit rate this
/// run had and the one recorded, and TTFT.
#[derive(Clone, Debug, Serialize)]
pub struct AgentSide {
    pub calls: u64,
    pub ok: u64,
    pub cache_hit_rate: Option<f64>,
    pub recorded_cache_hit_rate: Option<f64>,
    pub ttft_ms: Stats,
}

impl AgentSide {
    fn of(s: &crate::metrics::Side, ps: &[f64]) -> AgentSide {
        AgentSide {
            calls: s.calls,
            ok: s.ok,
            cache_hit_rate: per(s.cached, s.prompt),
            recorded_cache_hit_rate: per(s.recorded_cached, s.recorded_prompt),
            ttft_ms: Stats::of(&s.ttft, ps),
        }
    }
}

impl SessionsFigures {
    fn of(f: &SessionFigures, ps: &[f64]) -> SessionsFigures {
        SessionsFigures {
            count: f.count,
            completed: f.completed,
            turns: Stats::of(&f.turns, ps),
            duration_ms: Stats::of(&f.duration_ms, ps),
            tokens: Stats::of(&f.tokens, ps),
            cache_hit_rate: Stats::of(&f.cache_hit_rate, ps),
            cache_hit_rate_by_turn: f
                .cache_by_turn
                .iter()
                .map(|(t, c, p)| (t.to_string(), per(*c, *p)))
                .collect(),
            ttft_first_turn_ms: Stats::of(&f.ttft_first_turn, ps),
            ttft_later_turns_ms: Stats::of(&f.ttft_later_turns, ps),
            ttft_by_model_ms: f
                .ttft_by_model
                .iter()
                .map(|(m, d)| (m.clone(), Stats::of(d, ps)))
                .collect(),
            recorded_cache_hit_rate: (f.recorded_cache_hit_rate.count() > 0)
                .then(|| Stats::of(&f.recorded_cache_hit_rate, ps)),
            recorded_cache_hit_rate_by_turn: (!f.recorded_by_turn.is_empty()).then(|| {
                f.recorded_by_turn
                    .iter()
                    .map(|(t, c, p)| (t.to_string(), per(*c, *p)))
                    .collect()
            }),
            agents: f.agents.as_ref().map(|[main, sub]| AgentsFigures {
                main: AgentSide::of(main, ps),
                subagents: AgentSide::of(sub, ps),
            }),
        }
    }
}

/// The SLOs tested and the share of results meeting them.
#[derive(Clone, Debug, Serialize)]
pub struct SloFigures {
    /// `ttft_ms`: the bound, in the order given.
    pub bounds: Keyed<f64>,
    pub met: SloMet,
    /// Results meeting every SLO per second.
    pub goodput_per_s: Option<f64>,
}

/// Shares of every result meeting each SLO (by its name), then all.
#[derive(Clone, Debug, Serialize)]
pub struct SloMet {
    #[serde(flatten)]
    pub each: Keyed<Option<f64>>,
    pub all: Option<f64>,
}

/// One convention's figures beside the report's own.
#[derive(Clone, Debug, Serialize)]
pub struct ConventionFigures {
    #[serde(skip)]
    pub convention: Convention,
    pub follows: Option<&'static str>,
    pub ttft: Stats,
    pub tpot: Stats,
    pub itl: Stats,
    pub e2e: Stats,
    pub output_tokens: u64,
    pub output_tokens_from_chunks: u64,
}

impl ConventionFigures {
    fn of(c: Convention, d: &ConventionDists, ps: &[f64]) -> ConventionFigures {
        let rule = c.percentile_rule();
        ConventionFigures {
            convention: c,
            follows: c.release(),
            ttft: Stats::by(&d.ttft, ps, rule),
            tpot: Stats::by(&d.tpot, ps, rule),
            itl: Stats::by(&d.itl, ps, rule),
            e2e: Stats::by(&d.e2e, ps, rule),
            output_tokens: d.output_tokens,
            output_tokens_from_chunks: d.tokens_from_chunks,
        }
    }
}

/// One window of the time series.
#[derive(Clone, Debug, Serialize)]
pub struct WindowFigures {
    pub start_s: f64,
    pub started: u64,
    pub completed: u64,
    pub errors: u64,
    pub output_tokens_per_s: f64,
    pub ttft_p50: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub e2e_p50: Option<f64>,
    pub e2e_p99: Option<f64>,
}

impl WindowFigures {
    /// The cells of its row, in [`WINDOW_COLUMNS`](json::WINDOW_COLUMNS)
    /// order.
    fn cells(&self) -> [Option<f64>; 9] {
        [
            Some(self.start_s),
            Some(self.started as f64),
            Some(self.completed as f64),
            Some(self.errors as f64),
            Some(self.output_tokens_per_s),
            self.ttft_p50,
            self.ttft_p99,
            self.e2e_p50,
            self.e2e_p99,
        ]
    }
}

/// A figure as the JSON report has it: a number that is not finite is
/// null there, so it is none here.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn per_s(n: f64, duration: Option<f64>) -> Option<f64> {
    duration.and_then(|d| finite(n / d))
}

impl Report {
    /// The report of one group.
    pub fn of(a: &Aggregate, o: &SummaryOptions) -> Report {
        let ps = &o.percentiles;
        let primary = o.conventions.primary;
        let duration = a.duration_s();
        let count = |s: Status| a.by_status.get(&s).copied().unwrap_or(0);
        let dists = a.conventions.get(&primary).cloned().unwrap_or_default();
        let all_exact = a.conventions.values().all(|c| {
            c.ttft.is_exact() && c.tpot.is_exact() && c.itl.is_exact() && c.e2e.is_exact()
        }) && a.e2e.is_exact()
            && a.lag.is_exact()
            && a.tokens_per_s.is_exact();
        // A peer counts the tokens of answers without usage (as content
        // chunks here); tracekit leaves them out.
        let (output_tokens, output_tokens_from_chunks) = if primary == Convention::Tracekit {
            (a.output_tokens, None)
        } else {
            (dists.output_tokens, Some(dists.tokens_from_chunks))
        };
        let rule = primary.percentile_rule();
        Report {
            convention: primary.name(),
            follows: primary.release(),
            precision: if all_exact {
                "exact"
            } else {
                "3 significant digits"
            },
            requests: Requests {
                total: a.total,
                ok: count(Status::Ok),
                error: count(Status::Error),
                timeout: count(Status::Timeout),
                cancelled: count(Status::Cancelled),
                warmup_excluded: a.warmup,
                ok_without_usage: a.ok_without_usage,
            },
            http_status: a
                .by_http
                .iter()
                .map(|(k, v)| (k.map_or_else(|| "none".to_string(), |c| c.to_string()), *v))
                .collect(),
            errors: ErrorCount::of(&a.errors),
            duration_s: duration,
            output_tokens_from_chunks,
            output_tokens,
            prompt_tokens: a.prompt_tokens,
            throughput: Throughput {
                requests_per_s: per_s(a.ok() as f64, duration),
                output_tokens_per_s: per_s(output_tokens as f64, duration),
                total_tokens_per_s: per_s((output_tokens + a.prompt_tokens) as f64, duration),
            },
            peak: Peak {
                output_tokens_per_s: a.peak_tokens_per_s().and_then(finite),
                in_flight: a.in_flight.peak(),
                in_flight_resolution_ms: a.in_flight.resolution_ms,
            },
            ttft: Stats::by(&dists.ttft, ps, rule),
            tpot: Stats::by(&dists.tpot, ps, rule),
            itl: Stats::by(&dists.itl, ps, rule),
            e2e: if primary == Convention::Tracekit {
                Stats::of(&a.e2e, ps)
            } else {
                Stats::by(&dists.e2e, ps, rule)
            },
            output_tokens_per_s_per_request: Stats::of(&a.tokens_per_s, ps),
            dispatch_lag: Stats::of(&a.lag, ps),
            from_scheduled: o.from_scheduled.then(|| FromScheduled {
                ttft: Stats::of(&a.ttft_from_scheduled, ps),
                e2e: Stats::of(&a.e2e_from_scheduled, ps),
            }),
            input_length_error: FidelityFigures::of(&a.input_fidelity),
            output_length_error: FidelityFigures::of(&a.output_fidelity),
            prefix_cache: PrefixCache {
                hit_rate: per(a.cached_tokens, a.cache_prompt_tokens),
                cached_tokens: a.cached_tokens,
                prompt_tokens: a.cache_prompt_tokens,
                results: a.cache_reports,
            },
            sessions: (!a.sessions.is_empty())
                .then(|| SessionsFigures::of(&a.sessions.figures(), ps)),
            slo: (!o.slo.bounds.is_empty()).then(|| slo_figures(a, &o.slo, duration)),
            conventions: (!o.conventions.also.is_empty()).then(|| {
                o.conventions
                    .also
                    .iter()
                    .map(|c| {
                        let d = a.conventions.get(c).cloned().unwrap_or_default();
                        (c.name().to_string(), ConventionFigures::of(*c, &d, ps))
                    })
                    .collect()
            }),
            windows: o.window_ms.map(|w| windows(a, w)),
            server: None,
        }
    }

    /// The report as a JSON value, for `--format json`, the CSV columns and
    /// `--fail-if` paths.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("reports serialize")
    }
}

/// `n / of`, none when `of` is 0.
fn per(n: u64, of: u64) -> Option<f64> {
    (of > 0).then(|| n as f64 / of as f64)
}

fn slo_figures(a: &Aggregate, slo: &Slo, duration: Option<f64>) -> SloFigures {
    let share = |n: u64| per(n, a.total);
    let mut bounds = Keyed::default();
    let mut each = Keyed::default();
    for (i, (metric, bound)) in slo.bounds.iter().enumerate() {
        bounds.insert(format!("{}_ms", metric.name()), *bound);
        each.insert(
            metric.name().to_string(),
            share(a.slo_met.get(i).copied().unwrap_or(0)),
        );
    }
    SloFigures {
        bounds,
        met: SloMet {
            each,
            all: share(a.slo_met_all),
        },
        goodput_per_s: per_s(a.slo_met_all as f64, duration),
    }
}

/// Every window from the first to the last, empty ones too: a gap in the
/// series is a stretch of nothing, which the reader must see.
fn windows(a: &Aggregate, w: f64) -> Vec<WindowFigures> {
    let empty = Window::default();
    let first = a.windows.keys().next().copied().unwrap_or(0);
    (0..a.window_count())
        .map(|k| first + k as i64)
        .map(|i| (i, a.windows.get(&i).unwrap_or(&empty)))
        .map(|(i, win)| {
            let q = |d: &Dist, p: f64| d.summary(&[p]).and_then(|s| finite(s.percentiles[0].1));
            WindowFigures {
                start_s: i as f64 * w / 1000.0,
                started: win.started,
                completed: win.completed,
                errors: win.errors,
                output_tokens_per_s: win.output_tokens / (w / 1000.0),
                ttft_p50: q(&win.ttft, 50.0),
                ttft_p99: q(&win.ttft, 99.0),
                e2e_p50: q(&win.e2e, 50.0),
                e2e_p99: q(&win.e2e, 99.0),
            }
        })
        .collect()
}

/// The whole report of one group as JSON.
pub fn to_json(a: &Aggregate, o: &SummaryOptions) -> Value {
    Report::of(a, o).to_value()
}

/// What a figure is measured in: the spreadsheet's `unit` column, the
/// suffix of trace-sweep's columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A count, a share or a label.
    None,
    Ms,
    S,
    Tokens,
    TokensPerS,
    RequestsPerS,
    /// A server counter's increase: tokens when it counts tokens (its name
    /// says so, or it is the prefix cache's), requests otherwise.
    Counted,
    /// A server counter's rate: tokens or requests per second, as
    /// [`Unit::Counted`].
    CountedPerS,
}

impl Unit {
    /// As printed; empty for none.
    pub fn name(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Tokens => "tokens",
            Unit::TokensPerS => "tokens/s",
            Unit::RequestsPerS | Unit::CountedPerS => "requests/s",
            Unit::Counted => "requests",
        }
    }
}

/// A figure of the report, described once for every summary that lists
/// figures: where it is, its unit, and who shows it.
#[derive(Clone, Copy, Debug)]
pub struct Figure {
    /// Its path in the JSON report; `*` is a key known at run time (a
    /// convention, a server figure). Everything under it shares its unit,
    /// but a `count` or `exact`, which count results.
    pub path: &'static str,
    pub unit: Unit,
    /// A distribution ([`Stats`]): compare shows its mean and percentiles,
    /// trace-sweep its percentiles.
    pub stats: bool,
    /// Shown by `trace-summarize --compare`.
    pub compare: bool,
    /// A distribution trace-sweep's rows show, by percentile.
    pub sweep: bool,
}

/// A distribution ([`Stats`]), of [`figure`]'s marks.
const STATS: u8 = 1;
/// Shown by `--compare`.
const COMPARE: u8 = 2;
/// Shown by trace-sweep.
const SWEEP: u8 = 4;

/// A figure's description: `marks` of [`STATS`], [`COMPARE`], [`SWEEP`].
const fn figure(path: &'static str, unit: Unit, marks: u8) -> Figure {
    Figure {
        path,
        unit,
        stats: marks & STATS != 0,
        compare: marks & COMPARE != 0,
        sweep: marks & SWEEP != 0,
    }
}

/// Writes [`FIGURES`] from rows `"path" => Unit, marks;`.
macro_rules! figures {
    ($($path:literal => $unit:ident, $marks:expr;)*) => {
        /// The report's figures in key order, those with a unit or shown by
        /// a summary; a key not here has no unit and is in the JSON, CSV
        /// and spreadsheet forms only.
        pub const FIGURES: &[Figure] = &[$(figure($path, Unit::$unit, $marks)),*];
    };
}

figures! {
    "requests.total" => None, COMPARE;
    "requests.ok" => None, COMPARE;
    "requests.error" => None, COMPARE;
    "requests.timeout" => None, COMPARE;
    "duration_s" => S, COMPARE;
    "output_tokens" => Tokens, 0;
    "prompt_tokens" => Tokens, 0;
    "throughput.requests_per_s" => RequestsPerS, COMPARE;
    "throughput.output_tokens_per_s" => TokensPerS, COMPARE;
    "throughput.total_tokens_per_s" => TokensPerS, 0;
    "peak.output_tokens_per_s" => TokensPerS, COMPARE;
    "peak.in_flight_resolution_ms" => Ms, 0;
    "ttft" => Ms, STATS | COMPARE | SWEEP;
    "tpot" => Ms, STATS | COMPARE | SWEEP;
    "itl" => Ms, STATS | COMPARE;
    "e2e" => Ms, STATS | COMPARE | SWEEP;
    "output_tokens_per_s_per_request" => TokensPerS, STATS;
    "dispatch_lag" => Ms, STATS;
    "from_scheduled" => Ms, STATS;
    "input_length_error" => Tokens, 0;
    "output_length_error" => Tokens, 0;
    "prefix_cache.cached_tokens" => Tokens, 0;
    "prefix_cache.prompt_tokens" => Tokens, 0;
    "sessions.duration_ms" => Ms, STATS;
    "sessions.ttft_first_turn_ms" => Ms, STATS;
    "sessions.ttft_later_turns_ms" => Ms, STATS;
    "sessions.ttft_by_model_ms" => Ms, STATS;
    "slo.bounds" => Ms, 0;
    "slo.met.all" => None, COMPARE;
    "slo.goodput_per_s" => RequestsPerS, COMPARE;
    "conventions.*.ttft" => Ms, STATS;
    "conventions.*.tpot" => Ms, STATS;
    "conventions.*.itl" => Ms, STATS;
    "conventions.*.e2e" => Ms, STATS;
    "conventions.*.output_tokens" => Tokens, 0;
    "server.*.increase" => Counted, 0;
    "server.*.per_s" => CountedPerS, 0;
}

/// Whether `path` is `pattern` or under it: `rest` is what follows.
fn under<'p>(pattern: &str, path: &'p str) -> Option<&'p str> {
    let mut rest = path;
    for part in pattern.split('.') {
        let (head, tail) = rest.split_once('.').unwrap_or((rest, ""));
        if head.is_empty() || (part != "*" && part != head) {
            return None;
        }
        rest = tail;
    }
    Some(rest)
}

/// The unit of a figure of the report, from its JSON path (the
/// spreadsheet's `unit` column); empty for a count, a label or a share.
pub fn unit(path: &str) -> &'static str {
    let last = path.rsplit('.').next().unwrap_or(path);
    // The most specific description wins.
    let Some(f) = FIGURES
        .iter()
        .filter(|f| under(f.path, path).is_some())
        .max_by_key(|f| f.path.split('.').count())
    else {
        return "";
    };
    // The server figure a counter's unit is of: `server.NAME.per_s`.
    let counts_tokens = || {
        let name = path.split('.').nth(1).unwrap_or_default();
        name.contains("tokens") || name.starts_with("prefix_cache")
    };
    match f.unit {
        _ if last == "count" || last == "exact" => "",
        Unit::Counted if counts_tokens() => Unit::Tokens.name(),
        Unit::CountedPerS if counts_tokens() => Unit::TokensPerS.name(),
        u => u.name(),
    }
}

/// The figures `--compare` shows, as paths of the JSON report, in print
/// order: those described so, a distribution by its mean and percentiles,
/// each that a report of these options has.
pub fn compared(o: &SummaryOptions) -> Vec<String> {
    let shape = Report::of(&Aggregate::default(), o).to_value();
    let mut paths = Vec::new();
    for f in FIGURES.iter().filter(|f| f.compare) {
        if f.stats {
            paths.push(format!("{}.mean", f.path));
            paths.extend(
                (o.percentiles.iter()).map(|p| format!("{}.{}", f.path, percentile_key(*p))),
            );
        } else {
            paths.push(f.path.to_string());
        }
    }
    paths.retain(|p| lookup(&shape, p).is_some());
    paths
}
