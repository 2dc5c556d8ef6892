//! Turning an [`Aggregate`] into the report: the typed [`Report`], built in
//! one place, is the one schema. `--format json` serializes it; the CSV
//! columns and `--fail-if` paths read its JSON value; the table and
//! Markdown forms render its fields through the one table writer
//! ([`table`]).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::metrics::{
    Aggregate, Convention, ConventionDists, Dist, Fidelity, PercentileRule, SessionFigures, Slo,
    Summary, Window,
};
use crate::result::Status;
use crate::server_metrics::{self, Figures, Kind, Known, Scrape};

/// What the report shows besides the aggregate itself.
pub struct ReportOptions<'a> {
    /// Conventions; the first is the report's own.
    pub conventions: &'a [Convention],
    /// Percentiles to print.
    pub percentiles: &'a [f64],
    /// SLOs tested.
    pub slo: &'a Slo,
    /// Add latencies measured from the scheduled instant.
    pub from_scheduled: bool,
    /// Window width, ms, for the time series.
    pub window_ms: Option<f64>,
}

/// The JSON key of a percentile: `p50`, `p99.9`.
pub fn percentile_key(p: f64) -> String {
    format!("p{}", crate::text::format_ms(p))
}

/// Entries whose keys are only known at run time (percentiles, HTTP
/// statuses, turn positions, SLOs), serialized as a JSON object in the order
/// inserted. A key inserted again keeps its place and takes the new value,
/// as a JSON object does (`--percentiles 50,50`).
#[derive(Clone, Debug, PartialEq)]
pub struct Keyed<V>(pub Vec<(String, V)>);

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed(Vec::new())
    }
}

impl<V> Keyed<V> {
    /// Add `key`, or replace its value where it is.
    pub fn insert(&mut self, key: String, value: V) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> FromIterator<(String, V)> for Keyed<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut k = Keyed::default();
        for (key, value) in iter {
            k.insert(key, value);
        }
        k
    }
}

impl<V: Serialize> Serialize for Keyed<V> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

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
    /// The cells of its row, in [`WINDOW_COLUMNS`] order.
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

/// The server's own figures, from trace-replay's scrape file
/// (`--metrics-out`): `scrapes`, then one entry per recognised figure the
/// scrapes have, in [`server_metrics::KNOWN`]'s order, and with a window
/// width, `windows`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerSection {
    pub scrapes: usize,
    /// By figure (`running`, `kv_cache_usage`, ...), with the metric each
    /// was read from.
    #[serde(flatten)]
    pub figures: Keyed<ServerFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<ServerWindow>>,
}

/// The server's figures of one window (without the metrics' names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerWindow {
    pub start_s: f64,
    #[serde(flatten)]
    pub figures: Keyed<ServerFigure>,
}

/// One figure: a gauge's mean, p99 and max, or a counter's increase and
/// rate; in the whole run's figures, the metric it was read from too.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerFigure {
    #[serde(flatten)]
    pub figures: Figures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<&'static str>,
}

impl ServerFigure {
    /// What a window's table shows of it: a counter's rate, a gauge's mean.
    pub fn headline(&self) -> f64 {
        match &self.figures {
            Figures::Gauge(g) => g.mean,
            Figures::Counter(c) => c.per_s,
        }
    }
}

impl ServerSection {
    /// The section of a run's scrapes; with a window width, its windows,
    /// from 0 to the last scrape.
    pub fn of(scrapes: &[Scrape], window_ms: Option<f64>) -> ServerSection {
        let all = server_metrics::figures(scrapes, f64::NEG_INFINITY, f64::INFINITY);
        ServerSection {
            scrapes: scrapes.len(),
            figures: by_figure(all, true),
            windows: window_ms.map(|w| server_windows(scrapes, w)),
        }
    }
}

/// Figures by their report key; with `with_metric`, each names the metric
/// it was read from.
fn by_figure(figures: Vec<(&'static Known, Figures)>, with_metric: bool) -> Keyed<ServerFigure> {
    let mut out = Keyed::default();
    for (k, figures) in figures {
        // Two names of one figure (an engine's older name beside its new
        // one): the first recognised wins.
        if out.get(k.figure).is_none() {
            let metric = with_metric.then_some(k.name);
            out.insert(k.figure.to_string(), ServerFigure { figures, metric });
        }
    }
    out
}

fn server_windows(scrapes: &[Scrape], w: f64) -> Vec<ServerWindow> {
    let last = scrapes.iter().map(|s| s.t_ms).fold(0.0, f64::max);
    let count = (last / w).floor() as usize + 1;
    (0..count)
        .map(|i| {
            let from = i as f64 * w;
            // A counter's rate in a window runs from the last scrape
            // before it to its last scrape inside, so that no increase
            // falls between windows.
            let before = scrapes.iter().rposition(|s| s.t_ms < from);
            let first = if i == 0 { f64::NEG_INFINITY } else { from };
            let mut win: Vec<Scrape> = Vec::new();
            if i > 0
                && let Some(b) = before
            {
                let mut opening = scrapes[b].clone();
                // A gauge's level before the window is not in it.
                opening
                    .values
                    .retain(|(j, _)| server_metrics::KNOWN[*j].kind == Kind::Counter);
                win.push(opening);
            }
            win.extend(
                scrapes
                    .iter()
                    .filter(|s| s.t_ms >= first && s.t_ms < from + w)
                    .cloned(),
            );
            let figures = server_metrics::figures(&win, f64::NEG_INFINITY, f64::INFINITY);
            ServerWindow {
                start_s: from / 1000.0,
                figures: by_figure(figures, false),
            }
        })
        .collect()
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
    pub fn of(a: &Aggregate, o: &ReportOptions) -> Report {
        let ps = o.percentiles;
        let primary = o.conventions[0];
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
            slo: (!o.slo.bounds.is_empty()).then(|| slo_figures(a, o.slo, duration)),
            conventions: (o.conventions.len() > 1).then(|| {
                o.conventions[1..]
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
pub fn to_json(a: &Aggregate, o: &ReportOptions) -> Value {
    Report::of(a, o).to_value()
}

/// A number for people: up to `decimals` places, trailing zeros trimmed;
/// `-` for none (a JSON null: not a finite number).
pub fn number(x: Option<f64>, decimals: usize) -> String {
    match x.filter(|x| x.is_finite()) {
        None => "-".into(),
        Some(x) => {
            let text = format!("{x:.decimals$}");
            if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                text
            }
        }
    }
}

/// [`number`] of a JSON value.
pub fn num(v: &Value, decimals: usize) -> String {
    number(v.as_f64(), decimals)
}

/// The forms the reports of trace-summarize and trace-sweep are printed
/// in (`--format`). Each tool offers those it writes ([`Format::parser`]);
/// what a form holds for that tool its flag's own help says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON object.
    Json,
    /// A header and rows.
    Csv,
    /// GitHub Markdown tables.
    Markdown,
    /// A spreadsheet, to the -o file.
    Xlsx,
}

impl Format {
    /// Every form, in the order `--help` lists them.
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Json,
        Format::Csv,
        Format::Markdown,
        Format::Xlsx,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Markdown => "markdown",
            Format::Xlsx => "xlsx",
        }
    }

    /// What `--help` says of it, beside its name.
    fn help(self) -> &'static str {
        match self {
            Format::Table => "Aligned columns for people",
            Format::Json => "One JSON object",
            Format::Csv => "A header and rows",
            Format::Markdown => "GitHub Markdown tables",
            Format::Xlsx => "A spreadsheet, to the -o file",
        }
    }

    /// How a table of this form is drawn: Markdown's, or aligned columns
    /// (the forms that are not text have no tables).
    pub fn style(self) -> Style {
        match self {
            Format::Markdown => Style::Markdown,
            _ => Style::Plain,
        }
    }

    /// The `--format` parser of a tool that writes `forms`.
    pub fn parser(
        forms: &'static [Format],
    ) -> impl clap::builder::TypedValueParser<Value = Format> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
        PossibleValuesParser::new(
            forms
                .iter()
                .map(|f| PossibleValue::new(f.name()).help(f.help())),
        )
        .map(move |name| {
            *forms
                .iter()
                .find(|f| f.name() == name)
                .expect("the parser accepts only these names")
        })
    }
}

/// How a table is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns.
    Plain,
    /// GitHub Markdown.
    Markdown,
}

/// Draw rows under a header; numbers (every column but the first) are
/// right-aligned when `numbers` is set. A plain table of facts has no header.
pub fn table(style: Style, header: &[String], rows: &[Vec<String>], numbers: bool) -> String {
    if numbers {
        columns(style, header, rows, 1)
    } else if style == Style::Plain {
        columns_under(None, style, header, rows, usize::MAX)
    } else {
        columns(style, header, rows, usize::MAX)
    }
}

/// Draw rows under a header: the columns before `left` are text, aligned
/// left; the others numbers, aligned right. Every table of every tool is
/// drawn here.
pub fn columns(style: Style, header: &[String], rows: &[Vec<String>], left: usize) -> String {
    columns_under(Some(header), style, header, rows, left)
}

/// [`columns`], the header line drawn only when `shown` is given (the
/// widths count the header all the same).
fn columns_under(
    shown: Option<&[String]>,
    style: Style,
    header: &[String],
    rows: &[Vec<String>],
    left: usize,
) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < left {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        match style {
            Style::Plain => padded.join("  ").trim_end().to_string() + "\n",
            Style::Markdown => format!("| {} |\n", padded.join(" | ")),
        }
    };
    let mut out = shown.map(line).unwrap_or_default();
    if style == Style::Markdown {
        let rule: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i < left {
                    "-".repeat(*w)
                } else {
                    format!("{}:", "-".repeat(w.saturating_sub(1)))
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
    }
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn stats_row(name: &str, s: &Stats, ps: &[f64]) -> Vec<String> {
    let mut row = vec![
        name.to_string(),
        s.count.to_string(),
        number(s.mean, 2),
        number(s.std, 2),
        number(s.min, 2),
    ];
    for p in ps {
        row.push(number(s.percentile(*p), 2));
    }
    row.push(number(s.max, 2));
    row
}

fn stats_header(first: &str, ps: &[f64]) -> Vec<String> {
    let mut h: Vec<String> = [first, "count", "mean", "std", "min"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    h.extend(ps.iter().map(|p| percentile_key(*p)));
    h.push("max".into());
    h
}

/// What a convention's figures mean, for the report's header.
pub fn convention_note(c: Convention) -> &'static str {
    match c {
        Convention::Tracekit => {
            "TTFT at the first content chunk; TPOT = (E2E - TTFT) / (output tokens - 1); ITL = gaps between content chunks"
        }
        Convention::Aiperf => {
            "as AIPerf 0.13.0: Time to First Token at the first content chunk; Request Latency to the last content chunk; Inter Token Latency = (Request Latency - TTFT) / (output tokens - 1) per request (tracekit's TPOT); Inter Chunk Latency = gaps between content chunks (tracekit's ITL); percentiles interpolated linearly"
        }
        Convention::Vllm => {
            "as vLLM 0.33.0 bench serve: TTFT at the first content, reasoning or tool-call chunk; E2EL to the last token chunk; TPOT = (E2EL - TTFT) / (output tokens - 1); ITL = gaps between content chunks; percentiles interpolated linearly"
        }
        Convention::Guidellm => {
            "as GuideLLM 0.8.1: time_per_output_token_ms = (last token - start) / output tokens, weighted by output tokens; inter_token_latency_ms = (last - first token) / (output tokens - 1), weighted by output tokens - 1; request_latency to the end; percentiles by cumulative weight"
        }
    }
}

/// The report for people (`table`) or for a pull request (`markdown`).
pub fn to_text(title: &str, j: &Report, o: &ReportOptions, style: Style) -> String {
    let ps = o.percentiles;
    let r = &j.requests;
    let mut out = String::new();
    let http: Vec<String> = j
        .http_status
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let heading = format!(
        "{title}: {} request{}: {} ok, {} error, {} timeout, {} cancelled (HTTP {})",
        r.total,
        crate::text::plural(r.total),
        r.ok,
        r.error,
        r.timeout,
        r.cancelled,
        if http.is_empty() {
            "-".to_string()
        } else {
            http.join(", ")
        }
    );
    match style {
        Style::Plain => out.push_str(&format!("{heading}\n")),
        Style::Markdown => out.push_str(&format!("### {heading}\n\n")),
    }
    let rule = match o.conventions[0].percentile_rule() {
        PercentileRule::NearestRank => "nearest rank",
        PercentileRule::Linear => "the latencies interpolated linearly, the others by nearest rank",
        PercentileRule::CumulativeShare => {
            "the latencies by cumulative weight, the others by nearest rank"
        }
    };
    let precision = if j.precision == "exact" {
        format!("percentiles exact ({rule})")
    } else {
        "percentiles within 0.1 % (HDR histogram, 3 significant digits); mean, std, min, max exact"
            .to_string()
    };
    let notes = [
        format!(
            "convention {}: {}",
            o.conventions[0].name(),
            convention_note(o.conventions[0])
        ),
        format!(
            "{precision}; warmup results excluded ({})",
            r.warmup_excluded
        ),
    ];
    for n in &notes {
        match style {
            Style::Plain => out.push_str(&format!("{n}\n")),
            Style::Markdown => out.push_str(&format!("_{n}_\n\n")),
        }
    }
    out.push('\n');

    let t = &j.throughput;
    let mut facts: Vec<Vec<String>> = vec![
        vec!["duration".into(), format!("{} s", number(j.duration_s, 3))],
        vec![
            "request throughput".into(),
            format!("{} requests/s", number(t.requests_per_s, 3)),
        ],
        vec![
            "output token throughput".into(),
            format!(
                "{} tokens/s ({} tokens)",
                number(t.output_tokens_per_s, 2),
                j.output_tokens
            ),
        ],
        vec![
            "total token throughput".into(),
            format!(
                "{} tokens/s ({} prompt + {} output tokens: {} prompt)",
                number(t.total_tokens_per_s, 2),
                j.prompt_tokens,
                j.output_tokens,
                prompt_share(j.prompt_tokens, j.output_tokens)
            ),
        ],
        vec![
            "peak output tokens/s".into(),
            format!("{} (1 s buckets)", number(j.peak.output_tokens_per_s, 1)),
        ],
        vec![
            "peak requests in flight".into(),
            j.peak.in_flight.to_string(),
        ],
    ];
    if let Some(s) = &j.sessions {
        facts.push(vec![
            "sessions".into(),
            format!(
                "{} ({} with every turn ok); turns per session mean {}, max {}; duration p50 {} ms, max {} ms",
                s.count,
                s.completed,
                number(s.turns.mean, 2),
                number(s.turns.max, 0),
                number(s.duration_ms.percentile(50.0), 1),
                number(s.duration_ms.max, 1),
            ),
        ]);
        facts.push(vec![
            "session tokens".into(),
            format!(
                "mean {}, max {}; prefix cache hit rate per session mean {}, min {}",
                number(s.tokens.mean, 1),
                number(s.tokens.max, 0),
                number(s.cache_hit_rate.mean, 3),
                number(s.cache_hit_rate.min, 3),
            ),
        ]);
        let ttft = |st: &Stats| {
            format!(
                "p50 {} ms, p90 {} ms ({})",
                number(st.percentile(50.0), 1),
                number(st.percentile(90.0), 1),
                st.count
            )
        };
        if s.ttft_first_turn_ms.count + s.ttft_later_turns_ms.count > 0 {
            facts.push(vec![
                "TTFT by turn".into(),
                format!(
                    "first {}; later {}",
                    ttft(&s.ttft_first_turn_ms),
                    ttft(&s.ttft_later_turns_ms)
                ),
            ]);
        }
        if !s.ttft_by_model_ms.is_empty() {
            let models: Vec<String> = s
                .ttft_by_model_ms
                .iter()
                .map(|(m, st)| format!("{m} {}", ttft(st)))
                .collect();
            facts.push(vec!["TTFT by model".into(), models.join("; ")]);
        }
        if !s.cache_hit_rate_by_turn.is_empty() {
            let rates: Vec<String> = s
                .cache_hit_rate_by_turn
                .iter()
                .map(|(t, r)| format!("{t}: {}", number(*r, 3)))
                .collect();
            facts.push(vec![
                "prefix cache hit rate by turn".into(),
                rates.join(", "),
            ]);
        }
    }
    let cache = &j.prefix_cache;
    if cache.results > 0 {
        facts.push(vec![
            "prefix cache hit rate".into(),
            format!(
                "{} ({} of {} prompt tokens cached)",
                number(cache.hit_rate, 4),
                cache.cached_tokens,
                cache.prompt_tokens
            ),
        ]);
    }
    for (f, name) in [
        (&j.input_length_error, "prompt tokens - input_length"),
        (&j.output_length_error, "completion tokens - output_length"),
    ] {
        if let (true, Some(min), Some(max)) = (f.count > 0, f.min, f.max) {
            facts.push(vec![
                name.into(),
                format!(
                    "mean {}, min {min}, max {max} ({} of {} exact)",
                    number(f.mean, 2),
                    f.exact,
                    f.count
                ),
            ]);
        }
    }
    if r.ok_without_usage > 0 {
        let how = match j.output_tokens_from_chunks {
            None => "their tokens are not counted".to_string(),
            Some(n) => format!("{n} of them counted one token per content chunk"),
        };
        facts.push(vec![
            "ok without usage".into(),
            format!("{} ({how})", r.ok_without_usage),
        ]);
    }
    if let Some(slo) = &j.slo {
        let met = &slo.met;
        let parts: Vec<String> = o
            .slo
            .bounds
            .iter()
            .map(|(m, b)| {
                format!(
                    "{} <= {} ms: {}",
                    m.name(),
                    crate::text::format_ms(*b),
                    number(met.each.get(m.name()).copied().flatten(), 4)
                )
            })
            .collect();
        facts.push(vec![
            "goodput".into(),
            format!(
                "{} requests/s meet every SLO (share {}; {})",
                number(slo.goodput_per_s, 3),
                number(met.all, 4),
                parts.join(", ")
            ),
        ]);
    }
    out.push_str(&table(
        style,
        &["figure".into(), "value".into()],
        &facts,
        false,
    ));
    out.push('\n');

    let names = o.conventions[0].names();
    let mut rows = vec![
        stats_row(names.ttft, &j.ttft, ps),
        stats_row(names.tpot, &j.tpot, ps),
        stats_row(names.itl, &j.itl, ps),
        stats_row(names.e2e, &j.e2e, ps),
        stats_row("dispatch lag", &j.dispatch_lag, ps),
    ];
    if let Some(fs) = &j.from_scheduled {
        rows.push(stats_row("TTFT from scheduled", &fs.ttft, ps));
        rows.push(stats_row("E2E from scheduled", &fs.e2e, ps));
    }
    out.push_str(&table(
        style,
        &stats_header("latency (ms)", ps),
        &rows,
        true,
    ));
    let tps = vec![stats_row(
        "per request",
        &j.output_tokens_per_s_per_request,
        ps,
    )];
    out.push('\n');
    out.push_str(&table(
        style,
        &stats_header("output tokens/s", ps),
        &tps,
        true,
    ));

    for (name, v) in j.conventions.iter().flat_map(Keyed::iter) {
        out.push('\n');
        let note = format!("convention {name}: {}", convention_note(v.convention));
        match style {
            Style::Plain => out.push_str(&format!("{note}\n")),
            Style::Markdown => out.push_str(&format!("_{note}_\n\n")),
        }
        let names = v.convention.names();
        let rows = vec![
            stats_row(names.ttft, &v.ttft, ps),
            stats_row(names.tpot, &v.tpot, ps),
            stats_row(names.itl, &v.itl, ps),
            stats_row(names.e2e, &v.e2e, ps),
        ];
        out.push_str(&table(
            style,
            &stats_header(&format!("{name} (ms)"), ps),
            &rows,
            true,
        ));
    }
    if let Some(series) = &j.windows {
        out.push('\n');
        out.push_str(&windows_table(series, style));
    }
    out
}

const WINDOW_COLUMNS: [&str; 9] = [
    "start_s",
    "started",
    "completed",
    "errors",
    "output_tokens_per_s",
    "ttft_p50",
    "ttft_p99",
    "e2e_p50",
    "e2e_p99",
];

fn windows_table(series: &[WindowFigures], style: Style) -> String {
    let header: Vec<String> = WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect();
    let rows: Vec<Vec<String>> = series
        .iter()
        .map(|w| w.cells().iter().map(|x| number(*x, 3)).collect())
        .collect();
    table(style, &header, &rows, true)
}

/// Flatten a report into (column, value) pairs for CSV: nested keys are
/// joined with dots; the per-status HTTP map and the windows are left out
/// so that every run of the same command has the same columns.
pub fn flatten(j: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if prefix.is_empty() && (k == "http_status" || k == "windows") {
                        continue;
                    }
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::Null => out.push((prefix.to_string(), String::new())),
            Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", j, &mut out);
    out
}

/// The time series as CSV rows (header first).
pub fn windows_csv(j: &Value, header: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if header {
        rows.push(WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect());
    }
    for w in j["windows"].as_array().into_iter().flatten() {
        rows.push(
            WINDOW_COLUMNS
                .iter()
                .map(|k| match &w[*k] {
                    Value::Null => String::new(),
                    v => v.to_string(),
                })
                .collect(),
        );
    }
    rows
}

/// Look up `a.b.c` in a report; a key may itself contain dots (`p99.9`).
pub fn lookup<'v>(j: &'v Value, path: &str) -> Option<&'v Value> {
    if let Some(v) = j.get(path) {
        return Some(v);
    }
    path.match_indices('.').find_map(|(i, _)| {
        let (head, rest) = (&path[..i], &path[i + 1..]);
        j.get(head).and_then(|v| lookup(v, rest))
    })
}

/// The prompt's share of all tokens, as a percentage for the text report
/// (total token throughput is mostly prompt tokens in most workloads).
fn prompt_share(prompt: u64, output: u64) -> String {
    let all = prompt + output;
    if all == 0 {
        return "-".into();
    }
    format!("{}%", number(Some(100.0 * prompt as f64 / all as f64), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrape of named metrics.
    fn scrape(t_ms: f64, values: &[(&str, f64)]) -> Scrape {
        let index = |name: &str| server_metrics::KNOWN.iter().position(|k| k.name == name);
        Scrape {
            t_ms,
            values: values
                .iter()
                .map(|(name, v)| (index(name).unwrap(), *v))
                .collect(),
        }
    }

    /// vLLM at 0 and 1.5 s, with its current and older names of the KV
    /// cache usage.
    fn two_scrapes() -> [Scrape; 2] {
        [
            scrape(
                0.0,
                &[
                    ("vllm:num_requests_running", 1.0),
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:gpu_cache_usage_perc", 0.9),
                    ("vllm:prompt_tokens_total", 100.0),
                ],
            ),
            scrape(
                1500.0,
                &[
                    ("vllm:num_requests_running", 3.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:gpu_cache_usage_perc", 0.9),
                    ("vllm:prompt_tokens_total", 400.0),
                ],
            ),
        ]
    }

    #[test]
    fn the_server_section_serializes_as_the_report_has_it() {
        // The first name of a figure wins (kv_cache_usage_perc); a gauge
        // has mean, p99 and max, a counter its increase over 1.5 s; the
        // windows name no metric, and the second opens with the counter's
        // value before it (100 at 0 s) but not the gauges'.
        let section = ServerSection::of(&two_scrapes(), Some(1000.0));
        assert_eq!(
            serde_json::to_value(&section).unwrap().to_string(),
            concat!(
                r#"{"scrapes":2,"#,
                r#""running":{"mean":2.0,"p99":3.0,"max":3.0,"metric":"vllm:num_requests_running"},"#,
                r#""kv_cache_usage":{"mean":0.375,"p99":0.5,"max":0.5,"metric":"vllm:kv_cache_usage_perc"},"#,
                r#""prompt_tokens":{"increase":300.0,"per_s":200.0,"metric":"vllm:prompt_tokens_total"},"#,
                r#""windows":[{"start_s":0.0,"running":{"mean":1.0,"p99":1.0,"max":1.0},"#,
                r#""kv_cache_usage":{"mean":0.5,"p99":0.5,"max":0.5}},"#,
                r#"{"start_s":1.0,"running":{"mean":3.0,"p99":3.0,"max":3.0},"#,
                r#""kv_cache_usage":{"mean":0.25,"p99":0.25,"max":0.25},"#,
                r#""prompt_tokens":{"increase":300.0,"per_s":200.0}}]}"#
            )
        );
        // Without a window width, no windows key; no scrape, no figure.
        let section = ServerSection::of(&[], None);
        assert_eq!(
            serde_json::to_value(&section).unwrap().to_string(),
            r#"{"scrapes":0}"#
        );
    }
}
