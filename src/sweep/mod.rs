//! trace-sweep: replay one trace at several speeds and find the highest
//! that the server serves within its SLO.
//!
//! Each run is the replay engine's ([`crate::engine`]), in process, on the
//! trace scaled as `trace-rescale --speed` scales it; its results are an
//! ordinary results file, read with trace-summarize's figures
//! ([`crate::metrics`], [`crate::report`]).

mod offline;
mod plot;
mod rows;
pub mod search;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;

use self::rows::{PERCENTILES, percent, render, slo_text, write_xlsx};
use self::search::Plan;
use crate::cli::{self, Outcome};
use crate::engine::{self, Engine, Ndjson, Records, RunEnd, Sink};
use crate::error::{Error, Location, Result};
use crate::io::{self, Lines, Output};
use crate::metrics::{self, Aggregate, Conventions, Slo, SummaryOptions};
use crate::record::Record;
pub use crate::report::Format;
use crate::report::Report;
use crate::result::{ResultRecord, ResultView, Status};
use crate::server_metrics::{self, RunFigures};

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

  The same question with no server, in seconds: each run through the twin
  (a profile trace-sim --fit made from one real run) in virtual time:
    trace-sweep --offline --profile server.profile.json --slo ttft=200ms \\
        --search 0.5..64 -o sweep trace.jsonl

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
/// With --offline --profile FILE, each run goes through the twin
/// (trace-sim --offline's model, in virtual time) instead of a server: the
/// same results, rows and answer, in seconds.
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
    #[arg(long, value_name = "URL", required_unless_present_any = ["sim", "offline"])]
    pub url: Option<String>,

    /// A simulated server in place of --url: a new one for each run.
    #[command(flatten)]
    pub simulated: crate::simulator::SimFlags,

    /// Run each speed through the twin (trace-sim --offline) in virtual
    /// time, with no server: a sweep in seconds. Needs --profile.
    #[arg(long, conflicts_with_all = ["url", "sim"], requires = "profile")]
    pub offline: bool,

    #[command(flatten)]
    pub twin: crate::simulator::ProfileFlag,

    /// With --offline: seed of the draws of the profile's step spread (as
    /// trace-sim --seed): the same seed, the same runs and answer.
    #[arg(long, value_name = "S", default_value_t = crate::simulator::batch::DEFAULT_SEED, requires = "offline")]
    pub seed: u64,

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
    #[arg(long, value_name = "D", default_value = "1s", requires = "metrics", value_parser = engine::parse_every)]
    pub metrics_every: f64,

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

/// --search without one.
const DEFAULT_SEARCH: (f64, f64) = (0.25, 16.0);

/// Speeds given with --speeds.
#[derive(Clone, Debug)]
pub struct Speeds(pub Vec<f64>);

/// The slowest and fastest speeds a sweep runs: below, a run's scaled
/// times grow past any useful length (and its file name with them).
const SPEEDS: std::ops::RangeInclusive<f64> = 0.001..=1e6;

/// The longest a run may last (its trace's span at its speed, or
/// --duration): a week. Longer is a mistyped speed.
const MAX_RUN_MS: f64 = 7.0 * 86_400_000.0;

fn parse_speed(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if SPEEDS.contains(&s) => Ok(s),
        _ => Err(format!(
            "`{text}` is not a speed: give a number from {} to {}",
            SPEEDS.start(),
            SPEEDS.end()
        )),
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
    /// Each record's line number in the trace.
    numbers: Vec<u64>,
    /// The trace's name, as errors name it.
    source: Arc<str>,
}

impl Trace {
    fn read(name: &str) -> Result<Trace> {
        let specs = io::input_specs(std::slice::from_ref(&name.to_string()))?;
        let mut lines = Lines::new(&specs);
        let mut trace = Trace {
            lines: Vec::new(),
            timestamps: Vec::new(),
            numbers: Vec::new(),
            source: name.into(),
        };
        while let Some((loc, line)) = lines.next_line()? {
            let rec = Record::parse_at(line, &loc)?;
            trace
                .timestamps
                .push(rec.timestamp().map_err(|e| e.at(&loc))?);
            trace.lines.push(line.to_string());
            trace.numbers.push(loc.line);
            trace.source = loc.source.clone();
        }
        if trace.lines.is_empty() {
            return Err(Error::usage(format!(
                "{name}: the trace has no records: give a trace, one JSON object per line"
            )));
        }
        Ok(trace)
    }

    /// Refuse a trace whose speed changes nothing (its timestamps all
    /// equal, or absent), as trace-rescale --rate does, and a sweep whose
    /// slowest run would last longer than [`MAX_RUN_MS`].
    fn check_span(&self, args: &Args) -> Result<()> {
        let timed = self.timestamps.iter().flatten();
        let (first, last) = timed.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &t| {
            (a.min(t), b.max(t))
        });
        let span = last - first;
        if span.is_nan() || span <= 0.0 {
            return Err(Error::usage(format!(
                "{}: trace-sweep needs records at different times, as trace-rescale --rate \
                 does; this trace spans 0 ms, so its speed changes nothing",
                args.trace
            )));
        }
        let slowest = match (&args.speeds, args.search) {
            (Some(Speeds(list)), _) => list.iter().copied().fold(f64::INFINITY, f64::min),
            (None, Some((lo, _))) => lo,
            (None, None) => DEFAULT_SEARCH.0,
        };
        let longest = args
            .duration
            .map_or(span / slowest, |d| d.min(span / slowest));
        if longest > MAX_RUN_MS {
            return Err(Error::usage(format!(
                "at speed {slowest} the trace's {} would last {}: give higher speeds, or \
                 --duration (a run lasts at most {})",
                crate::duration::human(span),
                crate::duration::human(span / slowest),
                crate::duration::human(MAX_RUN_MS)
            )));
        }
        Ok(())
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

    /// The records of a run at `speed`, as the engine takes them (it
    /// scales them): only what the run replays, so that a run stopped
    /// early gives `cancelled` for the rest of the run, not of the trace.
    fn run_records(self: &Arc<Trace>, speed: f64, args: &Args) -> RunRecords {
        let (warmup, run) = self.selection(speed, args);
        RunRecords {
            trace: self.clone(),
            order: (0..warmup).chain(run).collect::<Vec<_>>().into_iter(),
        }
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

/// The records of one run, from the trace in memory, each named by its
/// place in the trace.
struct RunRecords {
    trace: Arc<Trace>,
    order: std::vec::IntoIter<usize>,
}

impl Records for RunRecords {
    fn next_record(&mut self) -> Result<Option<(Location, Result<Record<'_>>)>> {
        let Some(i) = self.order.next() else {
            return Ok(None);
        };
        let loc = Location {
            source: self.trace.source.clone(),
            line: self.trace.numbers[i],
            column: None,
        };
        let rec = Record::parse_at(&self.trace.lines[i], &loc);
        Ok(Some((loc, rec)))
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
    /// Ok and meeting every SLO, over every request sent.
    pub attainment: Option<f64>,
    /// Errors and timeouts, over every request sent.
    pub error_rate: Option<f64>,
    /// Whether the run met the SLO.
    pub passed: bool,
    /// Why it did not, or how it ended.
    pub note: String,
    /// What the server was doing during the run, from its scrape (with
    /// --metrics).
    pub server: Option<RunFigures>,
    /// Records never sent: the run stopped early once it could no longer
    /// pass. Attainment and error rate are over the others.
    pub not_sent: u64,
}

/// Run trace-sweep.
pub fn run(args: &Args) -> Result<Outcome> {
    if !args.simulated.sim_args.is_empty() && !args.simulated.sim {
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
    let base = base_plan(args)?;
    let trace = Arc::new(Trace::read(&args.trace)?);
    trace.check_span(args)?;
    std::fs::create_dir_all(&args.dir).map_err(|e| Error::io(args.dir.display().to_string(), e))?;
    let mut plan = match (&args.speeds, args.search) {
        (Some(Speeds(list)), _) => Plan::list(list.clone()),
        (None, Some((lo, hi))) => Plan::search(lo, hi, args.precision),
        (None, None) => Plan::search(DEFAULT_SEARCH.0, DEFAULT_SEARCH.1, args.precision),
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
        let (row, outcome) = match run_one(args, &base, &trace, speed) {
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
    if answer.speed.is_none() {
        cli::warn(format!(
            "no speed met the SLO ({}): even the lowest run missed it",
            slo_text(args)
        ));
        return Ok(Outcome::Negative);
    }
    Ok(Outcome::Success)
}

/// The rows on standard output, and the plot.
fn print_rows(args: &Args, rows: &[Row], answer: search::Answer) -> Result<()> {
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

/// The plan every run shares: the server (the twin's model with
/// --offline) and trace-replay's flags (--replay-arg, the only ones given
/// as text), read once, before the first run.
fn base_plan(args: &Args) -> Result<engine::Plan> {
    let argv = ["trace-replay", "--sim"].into_iter().map(String::from);
    let mut replay = engine::Args::try_parse_from(argv.chain(args.replay_args.iter().cloned()))
        .map_err(|e| {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            Error::usage(format!(
                "--replay-arg: {} (give trace-replay's flags)",
                first.strip_prefix("error: ").unwrap_or(first)
            ))
        })?;
    if replay.dry_run {
        return Err(Error::usage(
            "--replay-arg=--dry-run: a sweep sends its runs; to see a run's schedule, give \
             trace-rescale --speed X's output to trace-replay --dry-run",
        ));
    }
    replay.url = args.url.clone();
    replay.simulated = args.simulated.clone();
    replay.simulated.sim |= args.offline;
    replay.model = args.model.clone();
    if !args.offline {
        replay.twin = args.twin.clone();
    }
    if let Some(url) = &args.metrics {
        let url = match (url.as_str(), &args.url) {
            ("", Some(base)) => server_root(base)?,
            (url, _) => url.to_string(),
        };
        replay.metrics_url = (!url.is_empty()).then_some(url);
        replay.metrics_every = args.metrics_every;
        // Each run's own file: see `run_one`.
        replay.metrics_out = Some("speed.metrics.ndjson".into());
    }
    let mut plan = engine::Plan::try_from(&replay)?;
    if let Some(profile) = offline::profile(args)? {
        plan.target.server = engine::Server::Twin(Box::new(profile));
    }
    Ok(plan)
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
    allowed_misses: u64,
    allowed_errors: u64,
    misses: u64,
    errors: u64,
}

impl Watch {
    fn new(args: &Args, requests: u64) -> Watch {
        // Passing needs met ≥ attainment × n, that is misses ≤ (1 −
        // attainment) × n; and errors ≤ max_error_rate × n.
        let n = requests as f64;
        Watch {
            allowed_misses: ((1.0 - args.attainment) * n + 1e-9).floor() as u64,
            allowed_errors: (args.max_error_rate * n + 1e-9).floor() as u64,
            misses: 0,
            errors: 0,
        }
    }

    /// See one result, its SLOs taken as `opts` says.
    fn see(&mut self, opts: &SummaryOptions, view: &ResultView, itl: &[f64]) -> bool {
        if view.warmup {
            return false;
        }
        if !opts.slo.met_by(opts.conventions.primary, view, itl) {
            self.misses += 1;
        }
        if matches!(view.status, Status::Error | Status::Timeout) {
            self.errors += 1;
        }
        self.cannot_pass()
    }

    fn cannot_pass(&self) -> bool {
        self.misses > self.allowed_misses || self.errors > self.allowed_errors
    }
}

/// A run's results folded as they come, as trace-summarize folds a
/// results file, and watched for a run that can no longer pass.
struct Fold {
    agg: Aggregate,
    watch: Watch,
    opts: SummaryOptions,
    /// Records the run never sent, once it stopped early: counted apart,
    /// not as misses (the figures are over the requests sent).
    not_sent: u64,
}

/// The sink of a run's fold (beside its results file).
struct LiveFold(Arc<Mutex<Fold>>);

/// trace-sweep's figures are trace-summarize's, in tracekit's own
/// convention (a sweep has no --convention), at the percentiles its rows
/// show, against its SLO.
fn summary_options(args: &Args) -> SummaryOptions {
    SummaryOptions {
        conventions: Conventions::default(),
        percentiles: PERCENTILES.to_vec(),
        slo: args.slo.clone(),
        from_scheduled: false,
        window_ms: None,
    }
}

impl Sink for LiveFold {
    fn take(&mut self, r: &ResultRecord) -> Result<bool> {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let fold = &mut *guard;
        if fold.watch.cannot_pass() && r.measure.error.as_deref() == Some(crate::result::NOT_SENT) {
            fold.not_sent += 1;
            return Ok(true);
        }
        let (view, itl) = (metrics::view_of(r), &r.measure.itl_ms);
        view.check_limits(itl)
            .map_err(|e| Error::msg(format!("result {}: {e}", r.index + 1)))?;
        let session = r
            .session_id
            .as_deref()
            .map(|s| (s, r.turn, r.model.as_deref()));
        metrics::fold(&mut fold.agg, &view, itl, session, &fold.opts);
        Ok(fold.watch.see(&fold.opts, &view, itl))
    }

    fn finish(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// Replay the trace at `speed`; its row, and how the run ended.
fn run_one(
    args: &Args,
    base: &engine::Plan,
    trace: &Arc<Trace>,
    speed: f64,
) -> Result<(Row, Outcome)> {
    let label = speed_label(speed);
    let results = args.dir.join(format!("speed-{label}.ndjson"));
    let (requests, offered_rps) = trace.run_size(speed, args);
    let plan = engine::Plan {
        speed,
        warmup: args.warmup,
        scrape: base.scrape.clone().map(|s| engine::Scrape {
            out: scrape_path(&results),
            ..s
        }),
        ..base.clone()
    };
    let fold = Arc::new(Mutex::new(Fold {
        agg: Aggregate::default(),
        watch: Watch::new(args, requests),
        opts: summary_options(args),
        not_sent: 0,
    }));
    cli::note(format!(
        "speed {label}: replaying {requests} request{}{} to {}",
        crate::text::plural(requests),
        offered_rps.map_or(String::new(), |r| format!(" at {r:.2}/s")),
        results.display()
    ));
    let sink = (Ndjson::open(Some(&results))?, LiveFold(fold.clone()));
    let records = trace.run_records(speed, args);
    let outcome = match Engine::run(plan, records, sink) {
        RunEnd::Failed(e) => return Err(e),
        end => end.outcome()?,
    };
    let fold = fold.lock().unwrap_or_else(PoisonError::into_inner);
    let stopped_early = fold.watch.cannot_pass();
    let report = Report::of(&fold.agg, &fold.opts);
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
                let early = match (stopped_early, fold.not_sent) {
                    (false, _) => String::new(),
                    (true, 0) => " (stopped early: it could no longer pass)".into(),
                    (true, n) => format!(
                        " (stopped early: it could no longer pass; {n} request{} not sent, \
                         not counted)",
                        crate::text::plural(n)
                    ),
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
        not_sent: fold.not_sent,
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
