//! trace-sweep: replay one trace at several speeds and find the highest
//! that the server serves within its SLO.
//!
//! Each run is the replay engine's ([`crate::engine`]), in process, on the
//! trace scaled as `trace-rescale --speed` scales it; its results are an
//! ordinary results file, read with trace-summarize's figures
//! ([`crate::metrics`], [`crate::report`]).

mod plot;
pub mod search;

use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::{Map, Value, json};

use self::search::Plan;
use crate::cli::{self, Outcome};
use crate::engine::{self, Hooks};
use crate::error::{Error, Result};
use crate::io::{self, Lines, Output};
use crate::metrics::{Aggregate, Convention, FoldOptions, Slo};
use crate::record::{Record, Speedup};
pub use crate::report::Format;
use crate::report::{self, Report, ReportOptions, Style};
use crate::result::{ResultView, Status};
use crate::server_metrics::{self, RUN_COLUMNS, RunFigures};
use crate::xlsx::{Cell, Workbook};

const EXAMPLES: &str = "\
Exit status: 0 when a speed met the SLO (the answer is printed), 1 when none
did (the rows are printed), 2 on trouble (bad usage, an unreadable or
malformed trace, a server that cannot be reached, a --between command that
failed), 130 when interrupted by Ctrl-C (143 by SIGTERM, 129 by SIGHUP)
after the rows so far were printed.

Examples:
  The highest speed of the bundled trace the simulator serves within the SLO:
    trace-sweep --sim --sim-arg=--max-batch=8 --slo ttft=200ms -o sweep \\
        --search 1..16 --duration 10s trace.jsonl

  Four speeds against a vLLM server, its prefix cache reset between runs:
    trace-sweep --url http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B \\
        --slo ttft=500ms,tpot=50ms --speeds 0.5,1,2,4 --cooldown 30s \\
        --between 'curl -s -X POST http://127.0.0.1:8000/reset_prefix_cache' \\
        -o sweep trace.jsonl

  Each run is a results file like trace-replay's:
    trace-summarize sweep/speed-2.ndjson";

/// Replay a trace at several speeds and find the highest one whose run
/// meets the SLO.
///
/// Each run replays the whole trace (or --limit / --duration of it) at one
/// speed: timestamps and delays divided by the speed, as trace-rescale
/// --speed does. Its results are kept as DIR/speed-X.ndjson, an ordinary
/// results file. A run passes when its attainment (the share of its
/// requests that were ok and met every SLO; errors, timeouts and cancelled
/// requests miss) is at least --attainment and its error rate (errors and
/// timeouts) at most --max-error-rate. A run stops early once the misses
/// and errors already seen make passing impossible.
///
/// --search LO..HI (the default is 0.25..16) runs LO, then doubles until a
/// run fails or HI is reached, then bisects between the last pass and the
/// first fail until they are within --precision of each other. --speeds
/// runs each speed listed. The answer is the highest speed that passed.
///
/// The rows (one per run: speed, offered and achieved request rates,
/// attainment, goodput, error rate, TTFT, TPOT and E2E percentiles, and
/// with --metrics the server's figures) are printed as a table, JSON, CSV
/// or Markdown.
#[derive(Parser, Debug)]
#[command(name = "trace-sweep", version, after_long_help = EXAMPLES)]
pub struct Args {
    /// The trace (a file, or `-` for standard input): it is read once and
    /// kept in memory.
    #[arg(value_name = "FILE")]
    pub trace: String,

    /// Directory for the runs' results (speed-X.ndjson), made if missing.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub dir: PathBuf,

    /// Base URL of the server, as trace-replay takes it.
    #[arg(long, value_name = "URL", required_unless_present = "sim")]
    pub url: Option<String>,

    /// Replay against a simulated server (see trace-sim), a new one for
    /// each run.
    #[arg(long, conflicts_with = "url")]
    pub sim: bool,

    /// A flag of trace-sim's model for --sim (`--sim-arg=--max-batch=8`);
    /// repeatable.
    #[arg(long = "sim-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sim_args: Vec<String>,

    /// Model to name in every request (as trace-replay --model).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// Service-level objectives every request should meet, e.g.
    /// ttft=500ms,tpot=50ms (as trace-summarize --slo).
    #[arg(long, value_name = "LIST", value_parser = crate::metrics::parse_slo)]
    pub slo: Slo,

    /// Share of a run's requests that must meet every SLO for it to pass.
    #[arg(long, value_name = "F", default_value_t = 0.99, value_parser = share)]
    pub attainment: f64,

    /// Largest share of a run's requests that may fail (error or timeout)
    /// for it to pass.
    #[arg(long, value_name = "F", default_value_t = 0.01, value_parser = share)]
    pub max_error_rate: f64,

    /// Run these speeds, in this order (comma-separated multiples of the
    /// trace's own rate).
    #[arg(long, value_name = "LIST", value_parser = parse_speeds, conflicts_with = "search")]
    pub speeds: Option<Speeds>,

    /// Search LO..HI for the highest speed that passes (default 0.25..16).
    #[arg(long, value_name = "LO..HI", value_parser = parse_range)]
    pub search: Option<(f64, f64)>,

    /// Stop a search when the last pass and the first fail are within this
    /// share of each other.
    #[arg(long, value_name = "F", default_value_t = 0.05, value_parser = share)]
    pub precision: f64,

    /// Wait this long between runs, so that the server drains.
    #[arg(long, value_name = "D", default_value = "0s", value_parser = crate::duration::parse_ms_arg)]
    pub cooldown: f64,

    /// Run this shell command between runs (`sh -c`), e.g. to reset the
    /// server's prefix cache; a command that fails stops the sweep.
    #[arg(long, value_name = "CMD")]
    pub between: Option<String>,

    /// Send the first N records before each run and wait for them; left
    /// out of the figures (as trace-replay --warmup).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,

    /// Replay only this long of the (scaled) trace in each run.
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_ms_arg)]
    pub duration: Option<f64>,

    /// Replay only the first N records in each run.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,

    /// Scrape the server's Prometheus metrics during each run into
    /// DIR/speed-X.metrics.ndjson (trace-summarize --metrics reads it):
    /// from URL, or without one from the simulated server (--sim) or the
    /// host and port of --url (its /metrics). Each row then says what the
    /// server was doing (vLLM's, SGLang's or llama.cpp's metrics): requests
    /// running and waiting and KV-cache usage (mean and max over the
    /// scrapes), prefix-cache hit rate, and preemptions.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub metrics: Option<String>,

    /// Time between two scrapes with --metrics.
    #[arg(long, value_name = "D", default_value = "1s", requires = "metrics")]
    pub metrics_every: String,

    /// Also write the sweep to a spreadsheet FILE (.xlsx): a `sweep` sheet
    /// with the rows, and a sheet per run with every figure of its report.
    #[arg(long, value_name = "FILE")]
    pub xlsx: Option<PathBuf>,

    /// A trace-replay flag for every run (`--replay-arg=--ignore-eos`,
    /// `--replay-arg=--max-concurrency=64`); repeatable.
    #[arg(long = "replay-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub replay_args: Vec<String>,

    /// How to print the rows: an aligned table, one JSON object (the runs
    /// and the answer), CSV (a header and one row per run) or Markdown.
    #[arg(long, default_value = "table", value_parser = Format::parser(&FORMATS))]
    pub format: Format,

    /// Also draw the sweep to FILE (.svg, or .html with the SVG inline):
    /// attainment, goodput and latency percentiles against the offered
    /// request rate, with the SLO lines and the answer marked; with
    /// --metrics, the server's requests waiting and KV-cache usage too.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// The printed forms: no xlsx (--xlsx FILE writes the spreadsheet beside
/// the printed form).
const FORMATS: [Format; 4] = [Format::Table, Format::Json, Format::Csv, Format::Markdown];

/// Speeds given with --speeds.
#[derive(Clone, Debug)]
pub struct Speeds(pub Vec<f64>);

fn parse_speed(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s <= 1e6 => Ok(s),
        _ => Err(format!("`{text}` is not a speed: give a number above 0")),
    }
}

fn parse_speeds(text: &str) -> std::result::Result<Speeds, String> {
    text.split(',')
        .map(parse_speed)
        .collect::<std::result::Result<_, _>>()
        .map(Speeds)
}

fn parse_range(text: &str) -> std::result::Result<(f64, f64), String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not LO..HI, e.g. 0.25..16"))?;
    let (lo, hi) = (parse_speed(lo)?, parse_speed(hi)?);
    if lo > hi {
        return Err(format!("`{text}`: {lo} is above {hi}"));
    }
    Ok((lo, hi))
}

fn share(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("`{text}` is not a share between 0 and 1")),
    }
}

/// The trace, read once.
struct Trace {
    /// Each record's line.
    lines: Vec<String>,
    /// Each record's timestamp, where it has one.
    timestamps: Vec<Option<f64>>,
}

impl Trace {
    fn read(name: &str) -> Result<Trace> {
        let specs = io::input_specs(std::slice::from_ref(&name.to_string()))?;
        let mut lines = Lines::new(&specs);
        let mut trace = Trace {
            lines: Vec::new(),
            timestamps: Vec::new(),
        };
        while let Some((loc, line)) = lines.next_line()? {
            let rec = Record::parse_at(line, &loc)?;
            trace
                .timestamps
                .push(rec.timestamp().map_err(|e| e.at(&loc))?);
            trace.lines.push(line.to_string());
        }
        if trace.lines.is_empty() {
            return Err(Error::usage(format!(
                "{name}: the trace has no records: give a trace, one JSON object per line"
            )));
        }
        Ok(trace)
    }

    /// The records of a run at `speed`: the first --warmup ones, then
    /// the first --limit of the rest, those due within --duration (untimed
    /// ones, later turns, are kept: they count as due).
    fn selection(&self, speed: f64, args: &Args) -> (usize, Vec<usize>) {
        let warmup = usize::try_from(args.warmup)
            .unwrap_or(usize::MAX)
            .min(self.lines.len());
        let mut run: Vec<usize> = (warmup..self.lines.len()).collect();
        if let Some(limit) = args.limit {
            run.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        let origin = run.iter().find_map(|&i| self.timestamps[i]);
        if let (Some(d), Some(origin)) = (args.duration, origin) {
            run.retain(|&i| self.timestamps[i].is_none_or(|t| (t - origin) / speed <= d));
        }
        (warmup, run)
    }

    /// The records of a run at `speed`, scaled, written to `path`: the
    /// engine is given only what the run replays, so that a run stopped
    /// early writes `cancelled` for the rest of the run, not of the trace.
    fn write_run(&self, speed: f64, args: &Args, path: &Path) -> Result<()> {
        let (warmup, run) = self.selection(speed, args);
        let mut out = Output::open(Some(path))?;
        let mut scale = Speedup::new(speed);
        let mut buf = Vec::new();
        for i in (0..warmup).chain(run) {
            let mut rec = Record::parse(&self.lines[i])
                .map_err(|_| Error::msg("a record read before cannot be read again"))?;
            scale
                .apply(&mut rec, self.timestamps[i])
                .map_err(|e| Error::msg(format!("at speed {speed}: {e}")))?;
            buf.clear();
            rec.write_json(&mut buf);
            out.write_line(&buf)?;
        }
        out.finish()
    }

    /// The records a run at `speed` replays (not counting the warmup
    /// ones), and the offered request rate (per second) of their
    /// timestamps.
    fn run_size(&self, speed: f64, args: &Args) -> (u64, Option<f64>) {
        let (_, run) = self.selection(speed, args);
        let timed: Vec<f64> = run.iter().filter_map(|&i| self.timestamps[i]).collect();
        let span_s = match (timed.first(), timed.last()) {
            (Some(a), Some(b)) => (b - a) / speed / 1000.0,
            _ => 0.0,
        };
        // Six digits: 47 gaps of 50 ms at 1.2× are 24/s, not 23.999999999999996.
        let rate = (timed.len() > 1 && span_s > 0.0)
            .then(|| search::round_significant((timed.len() - 1) as f64 / span_s, 6));
        (run.len() as u64, rate)
    }
}

/// One run's verdict and figures.
#[derive(Debug, Clone)]
pub struct Row {
    /// The speed.
    pub speed: f64,
    /// Its results file.
    pub file: String,
    /// Records replayed, not counting warmup ones.
    pub requests: u64,
    /// Requests per second the scaled trace asks for.
    pub offered_rps: Option<f64>,
    /// The report of its results (trace-summarize --format json, with the
    /// SLO).
    pub report: Report,
    /// Ok and meeting every SLO, over every result.
    pub attainment: Option<f64>,
    /// Errors and timeouts, over every result.
    pub error_rate: Option<f64>,
    /// Whether the run met the SLO.
    pub passed: bool,
    /// Why it did not, or how it ended.
    pub note: String,
    /// What the server was doing during the run, from its scrape (with
    /// --metrics).
    pub server: Option<RunFigures>,
}

/// Run trace-sweep.
pub fn run(args: &Args) -> Result<Outcome> {
    if !args.sim_args.is_empty() && !args.sim {
        return Err(Error::usage("--sim-arg applies to --sim only"));
    }
    if let Some(path) = &args.plot {
        plot::check_name(path)?;
    }
    if let Some(path) = &args.xlsx {
        if !path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("xlsx"))
        {
            return Err(Error::usage(format!(
                "--xlsx {}: give a name ending in .xlsx",
                path.display()
            )));
        }
    }
    // Every run's flags are checked before the first run starts.
    replay_args(args, "trace.jsonl", Path::new("speed-1.ndjson"))?;
    let trace = Trace::read(&args.trace)?;
    std::fs::create_dir_all(&args.dir).map_err(|e| Error::io(args.dir.display().to_string(), e))?;
    let mut plan = match (&args.speeds, args.search) {
        (Some(Speeds(list)), _) => Plan::list(list.clone()),
        (None, Some((lo, hi))) => Plan::search(lo, hi, args.precision),
        (None, None) => Plan::search(0.25, 16.0, args.precision),
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut stopped = None;
    while let Some(speed) = plan.next() {
        if !rows.is_empty() {
            match between_runs(args) {
                Ok(None) => {}
                Ok(Some(outcome)) => {
                    stopped = Some(outcome);
                    break;
                }
                Err(e) => {
                    print_rows(args, &rows, plan.answer())?;
                    return Err(e);
                }
            }
        }
        let (row, outcome) = match run_one(args, &trace, speed) {
            Ok(ran) => ran,
            Err(e) => {
                // The rows so far still answer something.
                if !rows.is_empty() {
                    print_rows(args, &rows, plan.answer())?;
                }
                return Err(e);
            }
        };
        cli::note(format!(
            "speed {}: {}",
            speed_label(speed),
            if row.passed {
                "met the SLO".to_string()
            } else {
                format!("missed the SLO: {}", row.note)
            }
        ));
        plan.record(speed, row.passed);
        rows.push(row);
        if outcome != Outcome::Success {
            stopped = Some(outcome);
            break;
        }
    }
    let answer = plan.answer();
    print_rows(args, &rows, answer)?;
    if let Some(outcome) = stopped {
        return Ok(outcome);
    }
    if answer.is_none() {
        cli::warn(format!(
            "no speed met the SLO ({}): even the lowest run missed it",
            slo_text(args)
        ));
        return Ok(Outcome::Negative);
    }
    Ok(Outcome::Success)
}

/// The rows on standard output, and the plot.
fn print_rows(args: &Args, rows: &[Row], answer: Option<f64>) -> Result<()> {
    let mut out = Output::open(None)?;
    out.write_all(render(args, rows, answer).as_bytes())?;
    out.finish()?;
    if let Some(path) = &args.plot {
        plot::write(path, args, rows, answer)?;
    }
    if let Some(path) = &args.xlsx {
        write_xlsx(path, rows, args.metrics.is_some())?;
    }
    Ok(())
}

/// The rows as a `sweep` sheet, and each run's report as a sheet of
/// figures.
fn write_xlsx(path: &Path, rows: &[Row], with_server: bool) -> Result<()> {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| a.speed.total_cmp(&b.speed));
    let mut book = Workbook::new(path);
    if let Some(first) = sorted.first() {
        let headers: Vec<String> = flat_columns(first, with_server)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let cells: Vec<Vec<Cell>> = sorted
            .iter()
            .map(|r| {
                flat_columns(r, with_server)
                    .iter()
                    .map(|(_, v)| Cell::from_json(v))
                    .collect()
            })
            .collect();
        book.add_table("sweep", &headers, &cells)?;
    }
    for r in &sorted {
        let mut figures: Vec<Vec<Cell>> = report::flatten(&r.report.to_value())
            .into_iter()
            .map(|(k, v)| {
                let value = match v.parse::<f64>() {
                    Ok(n) => Cell::Number(n),
                    Err(_) if v.is_empty() => Cell::Empty,
                    Err(_) => Cell::Text(v),
                };
                vec![Cell::Text(k), value]
            })
            .collect();
        if let Some(server) = &r.server {
            for (name, v) in RUN_COLUMNS.iter().zip(server.columns()) {
                figures.push(vec![
                    Cell::Text(format!("server.{name}")),
                    Cell::from_json(&v),
                ]);
            }
        }
        let name = format!("speed-{}", speed_label(r.speed));
        book.add_table(&name, &["figure".into(), "value".into()], &figures)?;
    }
    book.close()
}

/// `--cooldown`, then `--between`. A signal in the meantime ends the
/// sweep: its outcome.
fn between_runs(args: &Args) -> Result<Option<Outcome>> {
    if args.cooldown > 0.0 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
        let wait = std::time::Duration::from_secs_f64(args.cooldown / 1000.0);
        let signalled = runtime.block_on(async {
            tokio::select! {
                () = tokio::time::sleep(wait) => false,
                _ = tokio::signal::ctrl_c() => true,
            }
        });
        if signalled {
            return Ok(Some(Outcome::Interrupted));
        }
    }
    if let Some(cmd) = &args.between {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .status()
            .map_err(|e| Error::msg(format!("--between: cannot run `sh`: {e}")))?;
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            if status.signal() == Some(libc::SIGINT) {
                return Ok(Some(Outcome::Interrupted));
            }
            return Err(Error::msg(format!("--between `{cmd}` failed ({status})")));
        }
    }
    Ok(None)
}

/// A speed as people and file names read it: 2, 0.5, 1.94.
pub fn speed_label(speed: f64) -> String {
    format!("{speed}")
}

/// The trace-replay flags of one run.
fn replay_args(args: &Args, trace: &str, results: &Path) -> Result<engine::Args> {
    let mut argv: Vec<String> = vec!["trace-replay".into()];
    match &args.url {
        Some(url) => argv.extend(["--url".into(), url.clone()]),
        None => argv.push("--sim".into()),
    }
    argv.extend(args.sim_args.iter().map(|a| format!("--sim-arg={a}")));
    if let Some(model) = &args.model {
        argv.extend(["--model".into(), model.clone()]);
    }
    // --limit and --duration are the sweep's: the engine is given only
    // the records of the run.
    argv.extend(["--warmup".into(), args.warmup.to_string()]);
    if let Some(url) = &args.metrics {
        let url = match (url.as_str(), &args.url) {
            ("", Some(base)) => server_root(base)?,
            (url, _) => url.to_string(),
        };
        if !url.is_empty() {
            argv.extend(["--metrics-url".into(), url]);
        }
        let scrapes = scrape_path(results);
        argv.push(format!("--metrics-every={}", args.metrics_every));
        argv.push(format!("--metrics-out={}", scrapes.display()));
    }
    argv.extend(args.replay_args.iter().cloned());
    argv.push(format!("--output={}", results.display()));
    argv.extend(["--".into(), trace.into()]);
    engine::Args::try_parse_from(&argv).map_err(|e| {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        Error::usage(format!(
            "--replay-arg: {} (give trace-replay's flags)",
            first.strip_prefix("error: ").unwrap_or(first)
        ))
    })
}

/// `scheme://host:port` of a base URL: where its /metrics is.
fn server_root(base: &str) -> Result<String> {
    let url = reqwest::Url::parse(base).map_err(|e| Error::usage(format!("--url {base}: {e}")))?;
    let host = url.host_str().unwrap_or_default();
    Ok(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// Watches a run's results; says stop once the run cannot pass.
struct Watch {
    slo: Slo,
    allowed_misses: u64,
    allowed_errors: u64,
    misses: u64,
    errors: u64,
    itl: Vec<f64>,
}

impl Watch {
    fn new(args: &Args, requests: u64) -> Watch {
        // Passing needs met ≥ attainment × n, that is misses ≤ (1 −
        // attainment) × n; and errors ≤ max_error_rate × n.
        let n = requests as f64;
        Watch {
            slo: args.slo.clone(),
            allowed_misses: ((1.0 - args.attainment) * n + 1e-9).floor() as u64,
            allowed_errors: (args.max_error_rate * n + 1e-9).floor() as u64,
            misses: 0,
            errors: 0,
            itl: Vec::new(),
        }
    }

    fn see(&mut self, line: &str) -> bool {
        let Ok(view) = ResultView::read(line, &mut self.itl) else {
            return false;
        };
        if view.warmup {
            return false;
        }
        if !self.slo.met_by(Convention::Tracekit, &view, &self.itl) {
            self.misses += 1;
        }
        if matches!(view.status, Status::Error | Status::Timeout) {
            self.errors += 1;
        }
        self.misses > self.allowed_misses || self.errors > self.allowed_errors
    }
}

/// Replay the trace at `speed`; its row, and how the run ended.
fn run_one(args: &Args, trace: &Trace, speed: f64) -> Result<(Row, Outcome)> {
    let label = speed_label(speed);
    let results = args.dir.join(format!("speed-{label}.ndjson"));
    let scaled = args.dir.join(format!(".speed-{label}.trace.jsonl"));
    trace.write_run(speed, args, &scaled)?;
    let (requests, offered_rps) = trace.run_size(speed, args);
    let replay = replay_args(args, &scaled.display().to_string(), &results)?;
    let watch = std::sync::Arc::new(std::sync::Mutex::new(Watch::new(args, requests)));
    let hooks = Hooks {
        on_result: Some(Box::new({
            let watch = watch.clone();
            move |r| {
                let line = r.to_json_line();
                watch.lock().is_ok_and(|mut w| w.see(&line))
            }
        })),
    };
    cli::note(format!(
        "speed {label}: replaying {requests} request{}{} to {}",
        crate::text::plural(requests),
        offered_rps.map_or(String::new(), |r| format!(" at {r:.2}/s")),
        results.display()
    ));
    let ran = engine::run_with(&replay, hooks);
    let _ = std::fs::remove_file(&scaled);
    let outcome = ran?;
    let stopped_early = watch
        .lock()
        .map(|w| w.misses > w.allowed_misses || w.errors > w.allowed_errors)
        .unwrap_or(false);
    let report = summarize(args, &results)?;
    let counts = &report.requests;
    let total = counts.total as f64;
    let failed = counts.error as f64 + counts.timeout as f64;
    let attainment = report.slo.as_ref().and_then(|s| s.met.all);
    let error_rate = (total > 0.0).then(|| failed / total);
    let ok = counts.ok;
    let (passed, note) = match outcome {
        Outcome::Interrupted | Outcome::Signalled(_) => (false, "interrupted".to_string()),
        Outcome::Aborted => (
            false,
            "its first requests all failed (see above)".to_string(),
        ),
        _ if ok == 0 => (false, "no request was ok".to_string()),
        _ => {
            let att = attainment.unwrap_or(0.0);
            let err = error_rate.unwrap_or(1.0);
            let mut why = Vec::new();
            if att + 1e-12 < args.attainment {
                why.push(format!(
                    "attainment {} < {}",
                    percent(att),
                    percent(args.attainment)
                ));
            }
            if err > args.max_error_rate + 1e-12 {
                why.push(format!(
                    "error rate {} > {}",
                    percent(err),
                    percent(args.max_error_rate)
                ));
            }
            if why.is_empty() {
                (true, "passed".to_string())
            } else {
                let early = if stopped_early {
                    " (stopped early: it could no longer pass)"
                } else {
                    ""
                };
                (false, format!("{}{early}", why.join(", ")))
            }
        }
    };
    let server = args.metrics.is_some().then(|| server_figures(&results));
    let row = Row {
        speed,
        file: results.display().to_string(),
        requests,
        offered_rps,
        report,
        attainment,
        error_rate,
        passed,
        note,
        server,
    };
    Ok((row, outcome))
}

/// The path of a run's scrape: beside its results, as
/// DIR/speed-X.metrics.ndjson.
fn scrape_path(results: &Path) -> PathBuf {
    results.with_extension("metrics.ndjson")
}

/// The server's figures of a run, from its scrape. A scrape file that
/// cannot be read leaves them empty, with a warning: the run's own
/// figures still stand.
fn server_figures(results: &Path) -> RunFigures {
    match server_metrics::read_file(&scrape_path(results)) {
        Ok(scrapes) => RunFigures::of(&scrapes),
        Err(e) => {
            cli::warn(format!("{e} (the run's server figures are left empty)"));
            RunFigures::of(&[])
        }
    }
}

/// A run's results, as trace-summarize reports them with the SLO.
fn summarize(args: &Args, results: &Path) -> Result<Report> {
    let specs = io::input_specs(&[results.display().to_string()])?;
    let conventions = [Convention::Tracekit];
    let fold = FoldOptions {
        conventions: &conventions,
        slo: &args.slo,
        window_ms: None,
    };
    let mut a = Aggregate::default();
    let mut itl = Vec::new();
    let mut lines = Lines::new(&specs);
    while let Some((loc, line)) = lines.next_line()? {
        let view = ResultView::read(line, &mut itl).map_err(|e| e.at(&loc))?;
        a.add(&view, &itl, &fold);
    }
    Ok(Report::of(
        &a,
        &ReportOptions {
            conventions: &conventions,
            percentiles: &PERCENTILES,
            slo: &args.slo,
            from_scheduled: false,
            window_ms: None,
        },
    ))
}

const PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

fn percent(f: f64) -> String {
    let text = format!("{:.1}", f * 100.0);
    format!("{}%", text.trim_end_matches(".0"))
}

fn slo_text(args: &Args) -> String {
    let bounds: Vec<String> = args
        .slo
        .bounds
        .iter()
        .map(|(m, b)| format!("{} ≤ {}", m.name(), crate::duration::human(*b)))
        .collect();
    format!(
        "{} for {} of requests, errors ≤ {}",
        bounds.join(", "),
        percent(args.attainment),
        percent(args.max_error_rate)
    )
}

/// Results meeting every SLO per second.
fn goodput(r: &Report) -> Option<f64> {
    r.slo.as_ref().and_then(|s| s.goodput_per_s)
}

/// The columns of a row, with their values: (name, value).
fn columns(row: &Row) -> Vec<(String, Value)> {
    let r = &row.report;
    let mut c: Vec<(String, Value)> = vec![
        ("speed".into(), json!(row.speed)),
        ("requests".into(), json!(row.requests)),
        ("offered_rps".into(), json!(row.offered_rps)),
        ("achieved_rps".into(), json!(r.throughput.requests_per_s)),
        (
            "output_tokens_per_s".into(),
            json!(r.throughput.output_tokens_per_s),
        ),
        ("ok".into(), json!(r.requests.ok)),
        ("attainment".into(), json!(row.attainment)),
        ("goodput_per_s".into(), json!(goodput(r))),
        ("error_rate".into(), json!(row.error_rate)),
    ];
    for (metric, stats) in [("ttft", &r.ttft), ("tpot", &r.tpot), ("e2e", &r.e2e)] {
        for p in PERCENTILES {
            let key = report::percentile_key(p);
            c.push((format!("{metric}_{key}_ms"), json!(stats.percentile(p))));
        }
    }
    c.push(("server".into(), json!(row.server)));
    c.push(("passed".into(), json!(row.passed)));
    c.push(("note".into(), json!(row.note)));
    c.push(("file".into(), json!(row.file)));
    c
}

/// The columns of a row for CSV and spreadsheets: the server's figures
/// flattened to `server.running.mean`, ..., with --metrics, and left out
/// without.
fn flat_columns(row: &Row, with_server: bool) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (k, v) in columns(row) {
        if k != "server" {
            out.push((k, v));
            continue;
        }
        if !with_server {
            continue;
        }
        let values = row.server.as_ref().map(RunFigures::columns);
        for (i, name) in RUN_COLUMNS.iter().enumerate() {
            let v = values.as_ref().map_or(Value::Null, |vs| vs[i].clone());
            out.push((format!("server.{name}"), v));
        }
    }
    out
}

/// The server's figures by speed, under the rows (with --metrics).
fn server_table(style: Style, rows: &[&Row]) -> String {
    let header: Vec<String> = [
        "speed",
        "running mean",
        "running max",
        "waiting mean",
        "waiting max",
        "KV cache mean",
        "KV cache max",
        "prefix hits",
        "preempted",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let count =
        |x: Option<f64>, decimals| x.map_or("-".into(), |x| report::number(Some(x), decimals));
    let share = |x: Option<f64>| x.map_or("-".into(), percent);
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let f = r.server.clone().unwrap_or_else(|| RunFigures::of(&[]));
            let mean = |l: Option<server_metrics::Level>| l.map(|l| l.mean);
            let max = |l: Option<server_metrics::Level>| l.map(|l| l.max);
            vec![
                format!("{}×", speed_label(r.speed)),
                count(mean(f.running), 1),
                count(max(f.running), 1),
                count(mean(f.waiting), 1),
                count(max(f.waiting), 1),
                share(mean(f.kv_cache_usage)),
                share(max(f.kv_cache_usage)),
                share(f.prefix_cache_hit_rate),
                count(f.preemptions, 0),
            ]
        })
        .collect();
    let mut text = String::from("server during each run (from its scrape):\n\n");
    text.push_str(&report::table(style, &header, &table_rows, true));
    text
}

fn render(args: &Args, rows: &[Row], answer: Option<f64>) -> String {
    // By speed, whatever order the search ran them in.
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| a.speed.total_cmp(&b.speed));
    let best = answer.and_then(|a| rows.iter().find(|r| r.speed == a).copied());
    match args.format {
        Format::Json => {
            let runs: Vec<Value> = rows
                .iter()
                .map(|r| Value::Object(columns(r).into_iter().collect::<Map<_, _>>()))
                .collect();
            let mut slo = Map::new();
            for (m, b) in &args.slo.bounds {
                slo.insert(format!("{}_ms", m.name()), json!(b));
            }
            let j = json!({
                "slo": slo,
                "attainment": args.attainment,
                "max_error_rate": args.max_error_rate,
                "runs": runs,
                "max_speed": answer,
                "max_speed_requests_per_s": best.map(|b| b.report.throughput.requests_per_s),
                "max_speed_output_tokens_per_s": best.map(|b| b.report.throughput.output_tokens_per_s),
            });
            let mut text = serde_json::to_string_pretty(&j).unwrap_or_default();
            text.push('\n');
            text
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let with_server = args.metrics.is_some();
            if let Some(first) = rows.first() {
                let _ = w.write_record(
                    flat_columns(first, with_server)
                        .iter()
                        .map(|(k, _)| k.as_str()),
                );
            }
            for r in rows {
                let _ = w.write_record(flat_columns(r, with_server).iter().map(|(_, v)| match v {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }));
            }
            String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
        }
        // Not a --format of trace-sweep (see FORMATS).
        Format::Xlsx => String::new(),
        Format::Table | Format::Markdown => {
            let style = args.format.style();
            let header: Vec<String> = [
                "speed",
                "offered/s",
                "ok/s",
                "out tok/s",
                "attained",
                "goodput/s",
                "errors",
                "TTFT p50 ms",
                "TTFT p99 ms",
                "TPOT p50 ms",
                "TPOT p99 ms",
                "E2E p99 ms",
                "SLO",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let table_rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let j = &r.report;
                    vec![
                        format!("{}×", speed_label(r.speed)),
                        r.offered_rps
                            .map_or("-".into(), |v| report::number(Some(v), 2)),
                        report::number(j.throughput.requests_per_s, 2),
                        report::number(j.throughput.output_tokens_per_s, 1),
                        r.attainment.map_or("-".into(), percent),
                        report::number(goodput(j), 2),
                        r.error_rate.map_or("-".into(), percent),
                        report::number(j.ttft.percentile(50.0), 1),
                        report::number(j.ttft.percentile(99.0), 1),
                        report::number(j.tpot.percentile(50.0), 1),
                        report::number(j.tpot.percentile(99.0), 1),
                        report::number(j.e2e.percentile(99.0), 1),
                        if r.passed { "met" } else { "missed" }.to_string(),
                    ]
                })
                .collect();
            let mut text = format!("trace-sweep: SLO {}\n\n", slo_text(args));
            text.push_str(&report::table(style, &header, &table_rows, true));
            text.push('\n');
            if args.metrics.is_some() {
                text.push_str(&server_table(style, &rows));
                text.push('\n');
            }
            for r in rows.iter().filter(|r| !r.passed) {
                text.push_str(&format!("{}×: {}\n", speed_label(r.speed), r.note));
            }
            text.push_str(&match best {
                Some(b) => format!(
                    "max speed: {}× met the SLO: {} requests/s offered, {} ok/s, {} output tokens/s\n",
                    speed_label(b.speed),
                    b.offered_rps.map_or("-".into(), |v| report::number(Some(v), 2)),
                    report::number(b.report.throughput.requests_per_s, 2),
                    report::number(b.report.throughput.output_tokens_per_s, 1),
                ),
                None => "max speed: none (no run met the SLO)\n".to_string(),
            });
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["trace-sweep", "--sim", "--slo", "ttft=1s", "-o", "d"];
        argv.extend(extra);
        argv.extend(["--", "t.jsonl"]);
        Args::try_parse_from(argv).unwrap()
    }

    fn row(speed: f64, server: Option<RunFigures>) -> Row {
        Row {
            speed,
            file: format!("d/speed-{speed}.ndjson"),
            requests: 10,
            offered_rps: Some(10.0 * speed),
            report: report(),
            attainment: Some(1.0),
            error_rate: Some(0.0),
            passed: true,
            note: "passed".into(),
            server,
        }
    }

    fn report() -> Report {
        let conventions = [Convention::Tracekit];
        let mut r = Report::of(
            &Aggregate::default(),
            &ReportOptions {
                conventions: &conventions,
                percentiles: &PERCENTILES,
                slo: &Slo::default(),
                from_scheduled: false,
                window_ms: None,
            },
        );
        r.throughput.requests_per_s = Some(10.0);
        r.requests.ok = 10;
        r
    }

    fn busy() -> RunFigures {
        RunFigures {
            scrapes: 12,
            running: Some(server_metrics::Level {
                mean: 7.3,
                max: 8.0,
            }),
            waiting: Some(server_metrics::Level {
                mean: 10.5,
                max: 24.0,
            }),
            kv_cache_usage: Some(server_metrics::Level {
                mean: 0.413,
                max: 0.9,
            }),
            prefix_cache_hit_rate: Some(0.25),
            preemptions: Some(3.0),
        }
    }

    #[test]
    fn the_server_figures_of_each_run_in_every_format() {
        let rows = [row(1.0, Some(RunFigures::of(&[]))), row(2.0, Some(busy()))];
        let table = render(&args(&["--metrics"]), &rows, Some(2.0));
        let at = table.find("server during").unwrap();
        assert_eq!(
            &table[at..table.find("max speed").unwrap()],
            "server during each run (from its scrape):\n\n\
             speed  running mean  running max  waiting mean  waiting max  KV cache mean  KV cache max  prefix hits  preempted\n\
             1×                -            -             -            -              -             -            -          -\n\
             2×              7.3            8          10.5           24          41.3%           90%          25%          3\n\n"
        );
        let md = render(&args(&["--metrics", "--format", "markdown"]), &rows, None);
        assert!(
            md.contains("| 2×    |          7.3 |           8 |         10.5 |          24 |         41.3% |          90% |         25% |         3 |"),
            "{md}"
        );
        let csv = render(&args(&["--metrics", "--format", "csv"]), &rows, None);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].ends_with(
                ",server.scrapes,server.running.mean,server.running.max,server.waiting.mean,\
                 server.waiting.max,server.kv_cache_usage.mean,server.kv_cache_usage.max,\
                 server.prefix_cache_hit_rate,server.preemptions,passed,note,file"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(",0,,,,,,,,,true,passed,d/speed-1.ndjson"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2]
                .ends_with(",12,7.3,8.0,10.5,24.0,0.413,0.9,0.25,3.0,true,passed,d/speed-2.ndjson"),
            "{}",
            lines[2]
        );
        let j: Value = serde_json::from_str(&render(
            &args(&["--metrics", "--format", "json"]),
            &rows,
            None,
        ))
        .unwrap();
        assert_eq!(
            j["runs"][1]["server"],
            serde_json::to_value(busy()).unwrap()
        );
        assert_eq!(j["runs"][0]["server"]["waiting"], Value::Null);

        // Without --metrics: null in JSON, no column elsewhere.
        let rows = [row(1.0, None)];
        let j: Value =
            serde_json::from_str(&render(&args(&["--format", "json"]), &rows, None)).unwrap();
        assert_eq!(j["runs"][0]["server"], Value::Null);
        let csv = render(&args(&["--format", "csv"]), &rows, None);
        assert!(!csv.contains("server"), "{csv}");
        let table = render(&args(&[]), &rows, None);
        assert!(!table.contains("server"), "{table}");
    }
}
