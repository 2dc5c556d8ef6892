//! trace-summarize: result streams in, the metrics serving teams quote out.

pub mod compare;
pub mod html;
pub mod plot;
pub mod requests;
mod runs;
mod server;
pub mod sheets;

use std::collections::{BTreeMap, HashMap};

use clap::{Parser, ValueEnum};
use serde_json::Value;

use crate::cli::{self, InputArgs, Outcome, OutputArgs, SkipArgs, Skipper};
use crate::duration;
use crate::error::{Error, FieldError, Location, Result};
use crate::io::{self, InputSpec, Output};
use crate::json;
use crate::metrics::{
    self, Aggregate, Convention, Conventions, MAX_WINDOWS, Slo, SloMetric, SummaryOptions,
    session_of,
};
use crate::peers::Results;
use crate::record::{self, Kind, Record};
pub use crate::report::Format;
use crate::report::{self, Report, ServerSection, Style};
use crate::result::{ResultView, Status};
use crate::xlsx::Cell;

const EXAMPLES: &str = "\
Exit status: 0 on success, 1 when a --fail-if threshold is crossed or when
no result is ok (none at all, or every one failed; the report is still
printed), 2 on trouble (bad usage, unreadable input, a malformed result
without --skip-invalid). (3 is trace-replay's early stop; never from this
tool.)

Examples:
  Replay and read the metrics, keeping the results:
    trace-replay --url http://127.0.0.1:8000 trace.jsonl | tee run.ndjson | trace-summarize

  One row per run in a spreadsheet:
    trace-summarize --format csv run1.ndjson > runs.csv
    trace-summarize --format csv --no-header run2.ndjson >> runs.csv

  One figure, for a script:
    trace-summarize --format json run.ndjson | jq .ttft.p99

  Goodput against SLOs, and a CI gate:
    trace-summarize --slo ttft=200ms,tpot=50ms run.ndjson
    trace-summarize --fail-if 'ttft.p99>500ms' --fail-if 'requests.error>0' run.ndjson

  The shards of a replay from four machines, as one run:
    trace-summarize shard-*.ndjson

  Two setups side by side, three runs each (mean ± standard deviation):
    trace-summarize --compare a1.ndjson,a2.ndjson,a3.ndjson b1.ndjson,b2.ndjson,b3.ndjson

  One row per request, for a spreadsheet:
    trace-summarize --requests csv run.ndjson > requests.csv";

/// Summarize replay results (NDJSON): request counts, throughput, TTFT,
/// TPOT, ITL, end-to-end latency, dispatch lag, length fidelity, prefix
/// cache hit rate, goodput.
///
/// Several inputs are read as one run (the shards of a multi-machine replay
/// merge this way); --compare sets runs side by side instead. Warmup results are left out. Memory does not grow with
/// the number of results: percentiles are exact (nearest rank) up to
/// 100,000 values per metric and within 0.1 % beyond (HDR histogram, 3
/// significant digits); mean, std, min and max are always exact. --by and
/// --window keep one set of figures per group and per window.
///
/// Definitions (the default tracekit convention; --convention prints a
/// peer's): TTFT, E2E per request; TPOT =
/// (E2E − TTFT) / (completion_tokens − 1), for answers of more than one
/// token; ITL = every gap between content chunks, pooled; duration = first
/// send to last completion; throughput = ok requests, output tokens, or
/// output plus prompt tokens, per second of duration; goodput = ok requests
/// meeting every SLO per second. Latency figures count ok results only;
/// dispatch lag (sent − scheduled) counts every result.
#[derive(Parser, Debug)]
#[command(name = "trace-summarize", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Output format: an aligned table, one JSON object (stable keys, for
    /// jq), one CSV row per run or group, Markdown for a pull request, or
    /// an xlsx spreadsheet (with -o FILE.xlsx): a summary sheet, a sheet of
    /// the requests and, with --window, one of the windows.
    #[arg(long, default_value = "table", value_parser = Format::parser(&Format::ALL))]
    pub format: Format,

    /// With --format csv, leave out the header row (to append runs to one
    /// file).
    #[arg(long)]
    pub no_header: bool,

    /// Percentiles to print, comma-separated, each in (0, 100].
    #[arg(long, value_name = "LIST", default_value = "50,90,95,99", value_parser = parse_percentiles)]
    pub percentiles: Percentiles,

    /// Whose definitions the figures follow: tracekit (the default), or the
    /// figures a peer prints for the same requests, under its own names and
    /// percentile rule: aiperf (AIPerf 0.13.0), vllm (vLLM 0.33.0 bench
    /// serve), guidellm (GuideLLM 0.8.1). A comma-separated list prints the
    /// others beside the first.
    #[arg(long, value_name = "LIST", default_value = "tracekit", value_parser = parse_conventions)]
    pub convention: Conventions,

    /// Service-level objectives, e.g. ttft=200ms,tpot=50ms,e2e=10s,itl=100ms:
    /// goodput counts ok requests meeting all of them; a request without a
    /// TTFT or E2E misses those, a one-token answer meets TPOT, and ITL is
    /// met when every gap is within the bound.
    #[arg(long, value_name = "LIST", value_parser = crate::metrics::parse_slo)]
    pub slo: Option<Slo>,

    /// Also report TTFT and E2E measured from the scheduled instant instead
    /// of the send (corrected for coordinated omission).
    #[arg(long)]
    pub from_scheduled: bool,

    /// One set of figures per value of this top-level result field (model,
    /// session_id, status, shard, or any other; `session` is session_id);
    /// a result without it is in group "(none)".
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,

    /// Add a time series: one row per window of this width, empty ones
    /// included (requests started, completed, errors, output tokens/s
    /// counted when their chunks arrived, TTFT and E2E p50 and p99 of the
    /// requests that ended in the window). With --format csv the series is
    /// printed instead of the summary row (with --metrics, each window's
    /// row adds the server's figures of that window).
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<f64>,

    /// Exit 1 when a figure crosses a threshold: PATH OP VALUE, where PATH
    /// is a key of the JSON report (ttft.p99, requests.error,
    /// throughput.requests_per_s), OP one of > >= < <= == !=, and VALUE a
    /// number or a duration (500ms, 2s) for latencies. Repeatable; a figure
    /// that is null (no ok request) counts as crossed.
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = parse_threshold)]
    pub fail_if: Vec<Threshold>,

    /// Instead of the summary, one row per result with its figures (lag,
    /// TTFT and TPOT under the first --convention, ITL count, mean and max):
    /// csv (with a header, for spreadsheets), json (each result line with
    /// those figures added) or otlp (one OpenTelemetry GenAI span per
    /// result, OTLP JSON, which trace-convert --from otel reads back).
    #[arg(long, value_enum, value_name = "FORMAT",
          conflicts_with_all = ["fail_if", "window", "by", "slo", "format", "plot"])]
    pub requests: Option<requests::RequestsFormat>,

    /// Also draw the run to FILE (.svg, or .html for a self-contained web
    /// page: the summary tables, the plots with values on hover and zoom on
    /// the time axis, and the run's flags; other names are refused): each
    /// request's TTFT and E2E by send time with errors marked, requests in
    /// flight and output tokens/s over time (with --metrics, the server's
    /// requests running and waiting, KV-cache usage and prefix-cache hit
    /// rate under them), and latency percentiles. Each input file is drawn
    /// as its own run, overlaid, for comparisons (the summary still reads
    /// them as one run). Keeps 16 bytes per result.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,

    /// Add a server section from FILE, trace-replay's --metrics-out: for
    /// the gauges vLLM, SGLang and llama.cpp expose (requests running and
    /// waiting, KV-cache usage, prefix-cache hit rate) mean, p99 and max
    /// over the scrapes, and per --window; their counters (tokens,
    /// requests, preemptions, cache queries and hits) as increase and rate
    /// per second. Other metrics are ignored.
    #[arg(long, value_name = "FILE", conflicts_with = "requests")]
    pub metrics: Option<std::path::PathBuf>,
    /// With --plot, end the time axis at the P-th percentile of the ok
    /// requests' completion times (e.g. 99), so that one straggler does
    /// not squeeze the run into a corner.
    #[arg(long, value_name = "P", requires = "plot", value_parser = parse_clip)]
    pub plot_clip: Option<f64>,

    /// Compare setups instead of reading the inputs as one run: each FILE
    /// is a setup with its own column (or one per --by group), beside the
    /// difference to the first; files joined by commas
    /// (a1.ndjson,a2.ndjson,a3.ndjson) are repeated runs of one setup,
    /// shown as mean ± standard deviation (min … max) over the runs.
    #[arg(long, conflicts_with_all = ["requests", "window", "fail_if"])]
    pub compare: bool,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

/// Percentiles asked for.
#[derive(Clone, Debug)]
pub struct Percentiles(pub Vec<f64>);

fn parse_percentiles(text: &str) -> std::result::Result<Percentiles, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => out.push(p),
            _ => return Err(format!("`{part}` is not a percentile in (0, 100]")),
        }
    }
    Ok(Percentiles(out))
}

fn parse_conventions(text: &str) -> std::result::Result<Conventions, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let c = Convention::from_str(part.trim(), true).map_err(|_| {
            format!("`{part}` is not a convention: use tracekit, aiperf, vllm or guidellm")
        })?;
        out.push(c);
    }
    Conventions::of(out).ok_or_else(|| "no convention given".to_string())
}

fn parse_clip(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(format!("`{text}` is not a percentile in (0, 100]")),
    }
}

fn parse_window(text: &str) -> std::result::Result<f64, String> {
    match duration::parse_ms(text)? {
        ms if ms > 0.0 => Ok(ms),
        _ => Err(format!("`{text}`: a window must be longer than 0")),
    }
}

/// One `--fail-if` condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// The expression as given.
    pub text: String,
    /// Key path into the JSON report.
    pub path: String,
    /// Comparison.
    pub op: String,
    /// Bound; durations are in ms.
    pub value: f64,
}

fn parse_threshold(text: &str) -> std::result::Result<Threshold, String> {
    let ops = [">=", "<=", "==", "!=", ">", "<"];
    let (i, op) = ops
        .iter()
        .filter_map(|op| text.find(op).map(|i| (i, *op)))
        .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))
        .ok_or_else(|| format!("`{text}` has no comparison: write e.g. 'ttft.p99>500ms'"))?;
    let path = text[..i].trim().to_string();
    let raw = text[i + op.len()..].trim();
    let value = match raw.parse::<f64>() {
        Ok(v) => v,
        Err(_) => duration::parse_ms(raw)
            .map_err(|e| format!("`{raw}` is not a number or a duration: {e}"))?,
    };
    if path.is_empty() {
        return Err(format!("`{text}` names no figure"));
    }
    Ok(Threshold {
        text: text.to_string(),
        path,
        op: op.to_string(),
        value,
    })
}

impl Threshold {
    fn crossed(&self, v: f64) -> bool {
        match self.op.as_str() {
            ">" => v > self.value,
            ">=" => v >= self.value,
            "<" => v < self.value,
            "<=" => v <= self.value,
            "==" => v == self.value,
            _ => v != self.value,
        }
    }
}

/// The group key of a result line for `--by`.
fn group_key(line: &str, field: &str) -> String {
    // `--by session`: results name their session `session_id`.
    let field = if field == "session" {
        "session_id"
    } else {
        field
    };
    let from_text = |raw: Option<&str>| match raw {
        None => "(none)".to_string(),
        Some(raw) => match record::kind(raw) {
            Kind::Null => "(none)".to_string(),
            Kind::String => record::string(field, raw)
                .map(|s| s.into_owned())
                .unwrap_or_default(),
            _ => raw.to_string(),
        },
    };
    match json::peek(line, [field]) {
        Some([raw]) => from_text(raw),
        None => match Record::parse(line) {
            Ok(rec) => from_text(rec.get(field).map(|r| r.get())),
            Err(_) => "(none)".to_string(),
        },
    }
}

/// An empty run, but for one session of one turn: every figure a report
/// can have, for checking `--fail-if` paths.
fn with_a_session() -> Aggregate {
    let mut a = Aggregate::default();
    let line = r#"{"sent_ms":0,"status":"ok","prompt_tokens":1,"cached_tokens":0,"ttft_ms":1}"#;
    if let Ok(view) = ResultView::parse(line) {
        a.sessions.add("s", Some(1), Some("m"), None, &view);
        a.sessions.add("s", Some(2), Some("m"), None, &view);
    }
    a
}

/// Run trace-summarize.
pub fn run(args: &Args) -> Result<Outcome> {
    let report_opts = SummaryOptions {
        conventions: args.convention.clone(),
        percentiles: args.percentiles.0.clone(),
        slo: args.slo.clone().unwrap_or_default(),
        from_scheduled: args.from_scheduled,
        window_ms: args.window,
    };
    // A threshold naming no figure is a usage error, found before reading:
    // an empty run has every key of a full one.
    let shape = report::to_json(&with_a_session(), &report_opts);
    for t in &args.fail_if {
        // Turn positions and models are keys only a run knows.
        let by_turn = t.path.starts_with("sessions.cache_hit_rate_by_turn.")
            || t.path.starts_with("sessions.ttft_by_model.");
        // The server's figures are known once its file is read.
        let server = args.metrics.is_some() && t.path.starts_with("server.");
        if !by_turn && !server && report::lookup(&shape, &t.path).is_none() {
            return Err(Error::usage(format!(
                "--fail-if '{}': the report has no figure `{}` (see --format json for the keys)",
                t.text, t.path
            )));
        }
    }

    if let Some(path) = &args.plot {
        plot::check_name(path)?;
    }
    let xlsx = args.format == Format::Xlsx;
    if xlsx {
        sheets::check_output(args.output.output.as_deref())?;
    }
    let inputs = io::input_specs(&args.input.files)?;
    if let Some(format) = args.requests {
        let mut lines = read_results(&inputs);
        let mut out = Output::open(args.output.output.as_deref())?;
        let mut skipper = Skipper::new(&args.skip_invalid);
        requests::export(
            &mut lines,
            &mut out,
            format,
            args.convention.primary,
            &mut skipper,
        )?;
        skipper.finish();
        out.finish()?;
        return Ok(Outcome::Success);
    }
    if args.compare {
        return compare::run(args, &report_opts);
    }
    let mut skipper = Skipper::new(&args.skip_invalid);
    let mut runs: Vec<plot::Series> = Vec::new();
    let plot_runs = args.plot.is_some().then_some(&mut runs);
    // The per-request sheet of --format xlsx (a spreadsheet is written
    // whole, so it holds every row).
    let mut request_rows: Vec<Vec<Cell>> = Vec::new();
    let rows = xlsx.then_some(&mut request_rows);
    let (mut overall, groups) =
        fold_inputs(args, &inputs, &report_opts, &mut skipper, plot_runs, rows)?;
    skipper.finish();
    for g in groups.values() {
        overall.merge(g);
    }
    if let Some(w) = args.window {
        let n = overall.window_count();
        if n > MAX_WINDOWS {
            return Err(Error::usage(format!(
                "--window {}ms: the run spans {n} windows of that width, more than the {MAX_WINDOWS} a time series may have; give a wider window",
                crate::text::format_ms(w)
            )));
        }
    }

    let mut overall_report = Report::of(&overall, &report_opts);
    let mut scrapes = Vec::new();
    if let Some(path) = &args.metrics {
        scrapes = server::read(path)?;
        overall_report.server = Some(ServerSection::of(&scrapes, args.window));
    }
    let settings = runs::of_inputs(&args.input.files);
    let mut overall_json = overall_report.to_value();
    runs::insert_json(&mut overall_json, &settings);
    let group_reports: Vec<(String, Report)> = groups
        .iter()
        .map(|(k, a)| (k.clone(), Report::of(a, &report_opts)))
        .collect();
    let group_json: Vec<(String, Value)> = group_reports
        .iter()
        .map(|(k, r)| (k.clone(), r.to_value()))
        .collect();
    let reports = Reports {
        overall: &overall_report,
        groups: &group_reports,
        overall_json: &overall_json,
        group_json: &group_json,
    };
    if let Some(path) = &args.plot {
        let mut summary = String::new();
        if plot::is_html(path) {
            summary = text_report(args, &reports, &report_opts, Style::Markdown);
            summary = runs::after_heading(summary, &args.input.files, &settings, Style::Markdown);
            if let Some(server) = &overall_report.server {
                summary.push_str(&server::to_text(server, true));
            }
        }
        html::write_plot(
            path,
            &runs,
            &plot_options(args),
            &server::plot_series(&scrapes),
            &page(args, summary, &settings),
        )?;
    }
    let mut text = render(args, &reports, &report_opts);
    if matches!(args.format, Format::Table | Format::Markdown) {
        let style = match args.format {
            Format::Markdown => Style::Markdown,
            _ => Style::Plain,
        };
        text = runs::after_heading(text, &args.input.files, &settings, style);
    }
    if let (Some(server), Format::Table | Format::Markdown) = (&overall_report.server, args.format)
    {
        text.push_str(&server::to_text(server, args.format == Format::Markdown));
    }
    match &args.output.output {
        Some(path) if xlsx => sheets::write(
            path,
            &overall_json,
            &group_json,
            args.by.as_deref(),
            &request_rows,
        )?,
        _ => {
            let mut out = Output::open(args.output.output.as_deref())?;
            out.write_all(text.as_bytes())?;
            out.finish()?;
        }
    }

    let mut crossed = false;
    for t in &args.fail_if {
        let value = report::lookup(&overall_json, &t.path).and_then(Value::as_f64);
        match value {
            Some(v) if !t.crossed(v) => {}
            Some(v) => {
                crossed = true;
                cli::warn(format!(
                    "threshold crossed: {} is {} (--fail-if '{}')",
                    t.path,
                    report::number(Some(v), 3),
                    t.text
                ));
            }
            None => {
                crossed = true;
                cli::warn(format!(
                    "threshold crossed: {} has no value (--fail-if '{}')",
                    t.path, t.text
                ));
            }
        }
    }
    if let Some(reason) = nothing_measured(&overall) {
        cli::warn(reason);
        crossed = true;
    }
    Ok(if crossed {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// What `--plot` draws besides the runs: the clip and the latency SLOs
/// (TTFT and E2E share the plot's latency axes; TPOT and ITL do not).
fn plot_options(args: &Args) -> plot::PlotOptions {
    let slo_lines = args
        .slo
        .iter()
        .flat_map(|s| s.bounds.iter())
        .filter(|(m, _)| matches!(m, SloMetric::Ttft | SloMetric::E2e))
        .map(|(m, b)| {
            (
                format!("SLO {} {} ms", m.name(), crate::text::format_ms(*b)),
                *b,
            )
        })
        .collect();
    plot::PlotOptions {
        clip: args.plot_clip,
        slo_lines,
    }
}

/// Fold the results of `inputs` into the whole run (without `--by`) or its
/// groups (with it; the whole run is then left empty for the caller to merge
/// them into), and into one plot series per input when `plot_runs` is given.
fn fold_inputs(
    args: &Args,
    inputs: &[io::InputSpec],
    fold: &SummaryOptions,
    skipper: &mut Skipper,
    mut plot_runs: Option<&mut Vec<plot::Series>>,
    mut request_rows: Option<&mut Vec<Vec<Cell>>>,
) -> Result<(Aggregate, BTreeMap<String, Aggregate>)> {
    let mut overall = Aggregate::default();
    let mut groups: BTreeMap<String, Aggregate> = BTreeMap::new();
    let mut itl = Vec::new();
    let mut lines = read_results(inputs);
    while let Some((loc, line)) = lines.next_line()? {
        let Some(view) = kept(ResultView::read(line, &mut itl), &loc, skipper)? else {
            continue;
        };
        if let Some(rows) = request_rows.as_deref_mut() {
            let row = requests::row(line, &view, &itl, fold.conventions.primary);
            let Some(row) = kept(row, &loc, skipper)? else {
                continue;
            };
            rows.push(row);
        }
        if let Some(runs) = plot_runs.as_deref_mut() {
            if runs.last().is_none_or(|r| *r.source != *loc.source) {
                runs.push(plot::Series::new(&loc.source));
            }
            if let Some(run) = runs.last_mut() {
                run.add(&view, &itl, fold.conventions.primary.ttft(&view));
            }
        }
        let agg = match &args.by {
            None => &mut overall,
            Some(field) => groups.entry(group_key(line, field)).or_default(),
        };
        let session = if view.warmup { None } else { session_of(line) };
        let session = session
            .as_ref()
            .map(|(s, turn, model, id)| (s.as_str(), *turn, model.as_deref(), id.as_deref()));
        metrics::fold_call(agg, &view, &itl, session, fold);
    }
    Ok((overall, groups))
}

/// What a line gave, or None when it gave an error and is skipped (the
/// error itself when --skip-invalid does not allow it).
fn kept<T>(
    read: std::result::Result<T, FieldError>,
    loc: &Location,
    skipper: &mut Skipper,
) -> Result<Option<T>> {
    match read {
        Ok(v) => Ok(Some(v)),
        Err(e) => skipper.skip(e.at(loc)).map(|()| None),
    }
}

/// The result lines of the inputs: result records as trace-replay writes
/// them, or a peer's result file (AIPerf, vLLM, GuideLLM) read as them,
/// recognised by its content (see `crate::peers`).
fn read_results(inputs: &[InputSpec]) -> Results {
    Results::new(inputs)
}

/// Why a run's figures measure nothing, when they do not: no result, or
/// none ok. A report of failures is a negative answer, not a success.
fn nothing_measured(a: &Aggregate) -> Option<String> {
    let count = |s: Status| a.by_status.get(&s).copied().unwrap_or(0);
    if a.total == 0 {
        return Some(if a.warmup > 0 {
            format!(
                "no results to summarize: warmup results are left out, and there are only those ({})",
                a.warmup
            )
        } else {
            "no results to summarize: the input is empty (give trace-replay's output)".to_string()
        });
    }
    if count(Status::Ok) > 0 {
        return None;
    }
    Some(format!(
        "no result is ok: {} error, {} timeout, {} cancelled of {} (see their `error`)",
        count(Status::Error),
        count(Status::Timeout),
        count(Status::Cancelled),
        a.total
    ))
}

/// The run's reports: typed for the text forms, as JSON values for the
/// JSON and CSV forms (their serialization).
struct Reports<'a> {
    overall: &'a Report,
    groups: &'a [(String, Report)],
    overall_json: &'a Value,
    group_json: &'a [(String, Value)],
}

fn render(args: &Args, reports: &Reports, o: &SummaryOptions) -> String {
    let (overall, groups) = (reports.overall_json, reports.group_json);
    match args.format {
        Format::Json => {
            let value = match &args.by {
                None => overall.clone(),
                Some(field) => {
                    let mut m = serde_json::Map::new();
                    m.insert("by".into(), Value::from(field.clone()));
                    m.insert("overall".into(), overall.clone());
                    let g: serde_json::Map<String, Value> = groups.iter().cloned().collect();
                    m.insert("groups".into(), Value::Object(g));
                    Value::Object(m)
                }
            };
            let mut s = serde_json::to_string_pretty(&value).expect("reports serialize");
            s.push('\n');
            s
        }
        Format::Csv => {
            let mut rows: Vec<Vec<String>> = Vec::new();
            if o.window_ms.is_some() {
                // With --metrics, the server's figures join each window's row.
                rows = server::windows_csv(overall, !args.no_header);
            } else {
                let mut all = vec![("all".to_string(), overall)];
                all.extend(groups.iter().map(|(k, v)| (k.clone(), v)));
                let first = report::flatten(overall);
                if !args.no_header {
                    let mut h = vec!["group".to_string()];
                    h.extend(first.iter().map(|(k, _)| k.clone()));
                    rows.push(h);
                }
                for (name, j) in all {
                    // A group may lack a section the whole run has (the
                    // sessions, a turn position): empty cells under the
                    // run's columns, not a shorter row.
                    let cells: HashMap<String, String> = report::flatten(j).into_iter().collect();
                    let mut row = vec![name];
                    row.extend(
                        first
                            .iter()
                            .map(|(k, _)| cells.get(k).cloned().unwrap_or_default()),
                    );
                    rows.push(row);
                }
            }
            let mut w = csv::Writer::from_writer(Vec::new());
            for r in rows {
                w.write_record(&r).expect("writing CSV to memory");
            }
            String::from_utf8(w.into_inner().expect("CSV in memory")).expect("CSV is UTF-8")
        }
        // Written by sheets::write instead.
        Format::Xlsx => String::new(),
        Format::Table => text_report(args, reports, o, Style::Plain),
        Format::Markdown => text_report(args, reports, o, Style::Markdown),
    }
}

/// The report for people: the whole run, then each `--by` group.
fn text_report(args: &Args, reports: &Reports, o: &SummaryOptions, style: Style) -> String {
    let mut s = report::to_text("trace-summarize", reports.overall, o, style);
    if let Some(field) = &args.by {
        for (k, j) in reports.groups {
            s.push('\n');
            s.push_str(&report::to_text(&format!("{field} = {k}"), j, o, style));
        }
    }
    s
}

/// What the `--plot` web page says of the run besides its figures:
/// `summary`, the report in Markdown (empty for an SVG plot).
fn page(
    args: &Args,
    summary: String,
    run_settings: &[(String, crate::run_info::RunInfo)],
) -> html::Page {
    let mut settings = vec![(
        "convention".to_string(),
        args.convention
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
    )];
    for (name, value) in [
        (
            "SLO (--slo)",
            plot_options(args)
                .slo_lines
                .iter()
                .map(|l| l.0.clone())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("groups (--by)", args.by.clone().unwrap_or_default()),
        (
            "server metrics (--metrics)",
            args.metrics
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
    ] {
        if !value.is_empty() {
            settings.push((name.to_string(), value));
        }
    }
    settings.extend(runs::page_rows(run_settings));
    html::Page {
        command: html::command_line(),
        inputs: args.input.files.clone(),
        settings,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::parse_slo;

    #[test]
    fn thresholds_parse() {
        let t = parse_threshold("ttft.p99>500ms").unwrap();
        assert_eq!(
            (t.path.as_str(), t.op.as_str(), t.value),
            ("ttft.p99", ">", 500.0)
        );
        let t = parse_threshold("throughput.requests_per_s >= 2.5").unwrap();
        assert_eq!((t.op.as_str(), t.value), (">=", 2.5));
        let t = parse_threshold("e2e.p99.9<2s").unwrap();
        assert_eq!((t.path.as_str(), t.value), ("e2e.p99.9", 2000.0));
        assert!(parse_threshold("ttft.p99").is_err());
    }

    #[test]
    fn slo_and_percentiles_parse() {
        let s = parse_slo("ttft=200ms,e2e=10s").unwrap();
        assert_eq!(
            s.bounds,
            vec![(SloMetric::Ttft, 200.0), (SloMetric::E2e, 10_000.0)]
        );
        assert!(parse_slo("ttfb=1s").is_err());
        assert_eq!(parse_percentiles("50,99.9").unwrap().0, vec![50.0, 99.9]);
        assert!(parse_percentiles("0").is_err());
    }

    #[test]
    fn group_keys() {
        assert_eq!(group_key(r#"{"model":"a\"b"}"#, "model"), "a\"b");
        assert_eq!(group_key(r#"{"x":1}"#, "model"), "(none)");
        assert_eq!(group_key(r#"{"http_status":503}"#, "http_status"), "503");
        assert_eq!(group_key(r#"{"session_id":"s1"}"#, "session"), "s1");
    }
}
