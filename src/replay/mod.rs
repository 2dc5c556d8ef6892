//! trace-replay: send each record to an OpenAI-compatible server on
//! schedule, and write one result line per request.
//!
//! Three threads share the work, so that nothing slow sits on the send
//! path: a reader parses records and builds their bodies (synthesizing
//! prompts) ahead of time; the main thread runs a single-threaded tokio
//! runtime in which a dispatcher sleeps until each request is due (on a
//! microsecond timer), spins the last few microseconds and starts the
//! request's task, which sends and measures; a writer prints each result as
//! it arrives and flushes it. One thread for all the network work keeps
//! wakeups and handovers between threads, most of a replay's CPU cost, to
//! a minimum. Every record the run takes on ends as exactly one result: the
//! tasks always return one, and the dispatcher writes `cancelled` results
//! for what it never sent.

pub mod answer;
pub mod exchange;
mod plain;
pub mod request;
pub mod schedule;
pub mod sse;
mod timer;

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::error::TrySendError;

use self::exchange::{Target, skeleton};
use self::request::{BodyOptions, Endpoint, PrepareError, Prepared, PromptSource};
use self::schedule::{Pace, Schedule};
use self::timer::Timer;
use crate::cli::{self, InputArgs, Outcome, OutputArgs, SkipArgs, Skipper};
use crate::error::{Error, Result};
use crate::io::{self, InputSpec, Lines, Output};
use crate::record::{DEFAULT_BLOCK_SIZE, Record};
use crate::result::{ResultRecord, Status, round_us};
use crate::summarize::metrics::Dist;
use crate::synth::{DEFAULT_SEED, Synthesizer};

const EXAMPLES: &str = "\
Exit status: 0 when the run ended (even if requests failed: their results
say so; gate on them with trace-summarize --fail-if), 2 on trouble (bad
usage, unreadable input, a malformed record), 130 when interrupted by Ctrl-C
after every result was written.

Examples:
  A demo with the built-in simulated server:
    trace-replay --sim trace.jsonl | trace-summarize

  A vLLM server, exact output lengths, results kept:
    trace-replay --url http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B \\
        --ignore-eos trace.jsonl | tee results.ndjson | trace-summarize

  Ten minutes of production logs at twice the speed, at most 64 in flight:
    trace-convert --from litellm logs.json | trace-slice --to 10m \\
      | trace-rescale --speed 2 \\
      | trace-replay --url http://gpu-1:8000 --max-concurrency 64 > results.ndjson

  A capacity test: 32 closed-loop workers, 5 minutes:
    trace-replay --url http://127.0.0.1:8000 --concurrency 32 --duration 5m trace.jsonl

  Check what would be sent, without sending:
    trace-replay --dry-run trace.jsonl | head";

/// Records read ahead of the schedule (bodies built, prompts synthesized).
const READ_AHEAD: usize = 1024;

/// Records the reader hands over at once when the read-ahead is full.
const READ_BATCH: usize = 64;

/// The dispatcher sleeps until this long before a request is due, then
/// spins: a sleeping thread wakes some microseconds late.
const SPIN: Duration = Duration::from_micros(20);

/// Send each trace record to an OpenAI-compatible server at its timestamp.
///
/// Record i is sent at run start + (timestamp_i − timestamp_0), whatever
/// earlier requests are doing (open loop: no coordinated omission). A later
/// turn of a session with `delay` is sent `delay` ms after the previous turn
/// of its session completed. Each response is read chunk by chunk and one
/// result line (JSON) per request is written and flushed as it completes:
/// times of the first chunk and first content, the gaps between chunks, the
/// server's token counts, the status. Records without a prompt get one
/// synthesized from `input_length` and `hash_ids` before they are due.
///
/// Every record taken on yields exactly one result, whatever the server
/// does. Ctrl-C stops sending, waits --grace for requests in flight, writes
/// `cancelled` results for the rest (and for the records left in the
/// input), and exits 130; a second Ctrl-C cancels at once.
#[derive(Parser, Debug)]
#[command(name = "trace-replay", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Base URL of the server (`http://host:port`; a trailing `/v1` is
    /// fine; a URL ending in `/completions` is used as it is).
    #[arg(long, value_name = "URL", required_unless_present_any = ["sim", "dry_run"])]
    pub url: Option<String>,

    /// Start a simulated server (see trace-sim) in-process on a free
    /// loopback port, and replay against it.
    #[arg(long, conflicts_with = "url")]
    pub sim: bool,

    /// API to call: `/v1/chat/completions` or `/v1/completions`.
    #[arg(long, value_enum, default_value = "chat")]
    pub endpoint: Endpoint,

    /// Model to name in requests; a record's own `model` wins.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// Environment variable holding the API key, sent as a bearer token.
    /// The key is never printed nor written to results.
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,

    /// Extra HTTP header, `Name: value`; repeatable.
    #[arg(long = "header", value_name = "'K: V'")]
    pub headers: Vec<String>,

    /// JSON object merged into every request body; a record's `extra` wins.
    #[arg(long, value_name = "JSON")]
    pub extra: Option<String>,

    /// Ask for whole answers instead of streams (no TTFT nor ITL then).
    #[arg(long)]
    pub no_stream: bool,

    /// Give up on a request after this long (status `timeout`).
    #[arg(long, value_name = "D", default_value = "10m", value_parser = crate::duration::parse_ms_arg)]
    pub timeout: f64,

    /// Send `ignore_eos: true` (vLLM, SGLang) so answers have exactly
    /// `output_length` tokens.
    #[arg(long)]
    pub ignore_eos: bool,

    /// Send `min_tokens` = `output_length` (vLLM).
    #[arg(long)]
    pub min_tokens: bool,

    /// At most N requests in flight; a due request waits for a free slot
    /// and the wait shows as dispatch lag.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64, conflicts_with = "concurrency")]
    pub max_concurrency: Option<u64>,

    /// Ignore timestamps: N closed-loop workers, each sending its next
    /// request when the previous one completed.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub concurrency: Option<u64>,

    /// Replay only the first N records (after the warmup ones).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,

    /// Stop sending after this long; records due later are left out.
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_ms_arg)]
    pub duration: Option<f64>,

    /// Send the first N records first, wait for their answers, then start
    /// the run; their results are marked `"warmup": true`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,

    /// Start the run at this wall-clock time (RFC 3339), so that shards on
    /// several machines start together. A time already past is an error.
    #[arg(long, value_name = "TIME", value_parser = crate::time::parse_rfc3339)]
    pub start_at: Option<SystemTime>,

    /// Replay shard K of N (as trace-slice --shard deals them: by session,
    /// else by position), scheduled from the whole trace's first timestamp
    /// so that shards run together; results carry `"shard": "K/N"` and
    /// their position in the whole trace as `index`.
    #[arg(long, value_name = "K/N", value_parser = crate::slice::parse_shard)]
    pub shard: Option<(u64, u64)>,

    /// Print the schedule (one JSON line per request) and send nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// After the first Ctrl-C, wait this long for requests in flight.
    #[arg(long, value_name = "D", default_value = "5s", value_parser = crate::duration::parse_ms_arg)]
    pub grace: f64,

    /// Use HTTP/2 without TLS (h2c prior knowledge). Over https, HTTP/2 is
    /// used whenever the server offers it.
    #[arg(long)]
    pub http2: bool,

    /// Over https, also trust the CA certificates in this PEM file (besides
    /// the system's and the built-in roots): for a server whose certificate
    /// a private CA signed.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<String>,

    /// Over https, accept any certificate: self-signed, expired, or for
    /// another name. For test servers only: the server is then not
    /// authenticated.
    #[arg(long)]
    pub insecure: bool,

    /// No progress nor notes on standard error (the final line is still
    /// printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Tokenizer for synthesized prompts (see trace-synth).
    #[arg(long, value_name = "NAME|FILE", default_value = crate::tokenizer::DEFAULT)]
    pub tokenizer: String,

    /// Seed of synthesized prompts (see trace-synth).
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Tokens per `hash_ids` block, for traces that are not canonical.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE, value_parser = cli::positive_u64)]
    pub block_size: u64,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

/// The synthesizer, loaded on first need.
struct LazyPrompts<'a> {
    args: &'a Args,
    synth: Option<Synthesizer>,
}

impl PromptSource for LazyPrompts<'_> {
    fn synthesizer(&mut self) -> Result<&Synthesizer> {
        if self.synth.is_none() {
            let s = crate::synth::synthesizer(
                &self.args.tokenizer,
                self.args.seed,
                self.args.block_size,
                None,
            )?;
            self.synth = Some(s);
        }
        Ok(self.synth.as_ref().expect("just set"))
    }
}

/// What the reader hands the dispatcher.
enum Read {
    /// A request ready to send.
    Ready(Prepared),
    /// A record read after the run was stopped: only its labels.
    Unsent(Prepared),
    /// A record that stops the run.
    Failed(Error),
    /// The timestamp the schedule counts from (a shard's whole trace's).
    Origin(f64),
}

/// What the runtime's tasks and the signal handler tell the dispatcher.
enum Control {
    /// A request completed.
    Done {
        session: Option<String>,
        at: Instant,
        lag_ms: f64,
        warmup: bool,
    },
    /// Stop sending (Ctrl-C, or the output closed).
    Stop,
}

/// Counters for progress and the final line.
#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    done: AtomicU64,
    ok: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    cancelled: AtomicU64,
    /// Last dispatch lag, µs.
    lag_us: AtomicU64,
    /// Records to send, once known (0 until then).
    total: AtomicU64,
}

/// State every thread shares.
struct Shared {
    counters: Counters,
    /// Set by Ctrl-C or a closed output: no more requests are sent.
    stopping: AtomicBool,
    /// The output could not be written (a closed pipe).
    output_closed: AtomicBool,
    /// Tells tasks in flight to give up.
    cancel: tokio::sync::watch::Sender<bool>,
    /// The progress bar, on a terminal.
    bar: Option<indicatif::ProgressBar>,
    control: tokio::sync::mpsc::UnboundedSender<Control>,
    /// Wakes the dispatcher when it is not listening to `control`.
    stop_signal: tokio::sync::Notify,
}

impl Shared {
    /// Print on standard error, under the progress bar if there is one.
    fn print(&self, f: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    fn stop(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            let _ = self.control.send(Control::Stop);
            self.stop_signal.notify_one();
        }
    }
}

/// How long opening a connection may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Run trace-replay.
pub fn run(args: &Args) -> Result<Outcome> {
    let inputs = io::input_specs(&args.input.files)?;
    let opts = body_options(args)?;
    if args.dry_run {
        return dry_run(args, &inputs, &opts);
    }
    let headers = headers(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
    // The in-process simulated server gets a runtime (a thread) of its
    // own, so that it does not take the client's.
    let mut sim_runtime = None;
    let base = match (&args.url, args.sim) {
        (Some(url), _) => url.clone(),
        (None, true) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
            let server = rt.block_on(crate::sim::start(
                "127.0.0.1",
                0,
                crate::sim::SimOptions::default(),
            ))?;
            sim_runtime = Some(rt);
            if !args.quiet {
                cli::note(format!("simulated server at {}", server.url));
            }
            server.url
        }
        (None, false) => return Err(Error::usage("give --url URL, or --sim")),
    };
    let url = request_url(&base, opts.endpoint)?;
    let plain = if args.http2 {
        None
    } else {
        plain::Plain::new(&url, &headers, CONNECT_TIMEOUT)
    };
    let mut client = reqwest::Client::builder()
        .use_rustls_tls()
        // Reading the system's CA store takes a few milliseconds: only
        // when reqwest may speak TLS (not for plain http://).
        .tls_built_in_native_certs(plain.is_none())
        .tcp_nodelay(true)
        .pool_max_idle_per_host(usize::MAX)
        .connect_timeout(CONNECT_TIMEOUT)
        // A redirect would be a second request timed as one: it is an error
        // result, the same as on the plain path.
        .redirect(reqwest::redirect::Policy::none());
    if args.http2 {
        client = client.http2_prior_knowledge();
    }
    if let Some(path) = &args.cacert {
        for cert in ca_certificates(path)? {
            client = client.add_root_certificate(cert);
        }
    }
    if args.insecure {
        client = client.danger_accept_invalid_certs(true);
    }
    let client = client
        .build()
        .map_err(|e| Error::msg(format!("cannot build the HTTP client: {e}")))?;
    let target = Arc::new(Target {
        client,
        plain,
        url,
        headers,
        timeout: Some(Duration::from_secs_f64(args.timeout / 1000.0)),
        open_files_limit: crate::io::raise_open_files_limit(),
        out_of_files: AtomicU8::new(0),
    });
    let timer = {
        let _inside = runtime.enter();
        Timer::new().map_err(|e| Error::msg(format!("cannot create a timer: {e}")))?
    };

    let output = Output::open(args.output.output.as_deref())?;
    let (control_tx, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let (cancel, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        counters: Counters::default(),
        stopping: AtomicBool::new(false),
        output_closed: AtomicBool::new(false),
        cancel,
        control: control_tx,
        stop_signal: tokio::sync::Notify::new(),
        bar: progress_bar(args),
    });
    if let Some(limit) = args.limit {
        shared.counters.total.store(limit, Ordering::Relaxed);
    }
    let direct = output.is_file();
    let writer = ResultWriter::new(output, shared.clone());
    let (results, writer_thread) = if direct {
        (Results::Direct(Arc::new(Mutex::new(writer))), None)
    } else {
        let (tx, rx) = mpsc::channel::<ResultRecord>();
        let thread = thread::Builder::new()
            .name("writer".into())
            .spawn(move || write_results(rx, writer))
            .map_err(|e| Error::msg(format!("cannot start a thread: {e}")))?;
        (Results::Thread(tx), Some(thread))
    };
    let (records_tx, records_rx) = tokio::sync::mpsc::channel(READ_AHEAD / READ_BATCH);
    let signal = {
        let shared = shared.clone();
        let grace = Duration::from_secs_f64(args.grace / 1000.0);
        let quiet = args.quiet;
        runtime.spawn(async move { on_ctrl_c(&shared, grace, quiet).await })
    };

    let run_start: OnceLock<Instant> = OnceLock::new();
    let progress_done = AtomicBool::new(false);
    let (ended, failure, lag, late) = thread::scope(|scope| {
        let reader = {
            let shared = &shared;
            let (opts, inputs) = (&opts, &inputs);
            scope.spawn(move || read_records(args, inputs, opts, records_tx, shared))
        };
        if !args.quiet {
            let (shared, done, start) = (&shared, &progress_done, &run_start);
            scope.spawn(move || progress(shared, done, start));
        }
        let mut dispatcher = Dispatcher {
            args,
            shared: shared.clone(),
            target,
            results: results.clone(),
            control: control_rx,
            records: Some(records_rx),
            unread: VecDeque::new(),
            reader_done: false,
            timer,
            failure: None,
            lag: Dist::default(),
            late: 0,
            origin: Instant::now(),
        };
        let ended = runtime.block_on(dispatcher.run(&run_start));
        progress_done.store(true, Ordering::SeqCst);
        let Dispatcher {
            failure, lag, late, ..
        } = dispatcher;
        let _ = reader.join();
        (ended, failure, lag, late)
    });
    signal.abort();
    drop(runtime);
    let written = finish_results(results, writer_thread);
    drop(sim_runtime);
    let interrupted = ended?;
    let elapsed_ms = run_start.get().map(|s| ms_between(*s, Instant::now()));
    final_line(args, &shared, &lag, late, elapsed_ms);
    if let Err(e) = written {
        if !e.is_broken_pipe() {
            return Err(e);
        }
        return Ok(Outcome::Success);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if interrupted {
        Outcome::Interrupted
    } else {
        Outcome::Success
    })
}

/// The body options from the flags.
fn body_options(args: &Args) -> Result<BodyOptions> {
    let extra = match &args.extra {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(Error::usage(format!(
                    "--extra: `{text}` is not a JSON object such as '{{\"temperature\": 0}}'"
                )));
            }
        },
    };
    Ok(BodyOptions {
        endpoint: args.endpoint,
        model: args.model.clone(),
        stream: !args.no_stream,
        ignore_eos: args.ignore_eos,
        min_tokens: args.min_tokens,
        extra,
    })
}

/// The certificates of a `--cacert` PEM file.
fn ca_certificates(path: &str) -> Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        let mut cause: &dyn std::error::Error = &e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        Error::usage(format!("--cacert {path}: not PEM certificates ({cause})"))
    })?;
    if certs.is_empty() {
        return Err(Error::usage(format!(
            "--cacert {path}: no certificate in it (a PEM file has \"-----BEGIN CERTIFICATE-----\" blocks)"
        )));
    }
    Ok(certs)
}

/// `--header` flags and the API key.
fn headers(args: &Args) -> Result<reqwest::header::HeaderMap> {
    use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for h in &args.headers {
        let bad = || Error::usage(format!("--header: `{h}` is not `Name: value`"));
        let (name, value) = h.split_once(':').ok_or_else(bad)?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
        map.append(name, value);
    }
    if let Ok(key) = std::env::var(&args.api_key_env) {
        if !key.is_empty() && !map.contains_key(AUTHORIZATION) {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                Error::usage(format!(
                    "the API key in ${} is not a valid header value",
                    args.api_key_env
                ))
            })?;
            value.set_sensitive(true);
            map.insert(AUTHORIZATION, value);
        }
    }
    if !map.contains_key(CONTENT_TYPE) {
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    Ok(map)
}

/// The request URL for a base URL and an endpoint.
pub fn endpoint_url(base: &str, endpoint: Endpoint) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/completions") {
        return base.to_string();
    }
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}{}", endpoint.path())
}

/// The parsed request URL; only http and https are spoken.
fn request_url(base: &str, endpoint: Endpoint) -> Result<reqwest::Url> {
    let text = endpoint_url(base, endpoint);
    let url = reqwest::Url::parse(&text)
        .map_err(|e| Error::usage(format!("--url: `{base}` is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::usage(format!(
            "--url: `{base}` is not an http or https URL"
        )));
    }
    Ok(url)
}

/// The records a run takes on, in order: parsed, filtered to the shard,
/// counted against --warmup and --limit, and prepared (or, once the run is
/// stopping, only outlined). Shared by the run and --dry-run.
struct Feed<'a> {
    args: &'a Args,
    opts: &'a BodyOptions,
    lines: Lines,
    prompts: LazyPrompts<'a>,
    skipper: Skipper,
    /// Position of the next record in the input.
    index: u64,
    /// Records taken on so far.
    taken: u64,
    /// Timestamp of the input's first record.
    first_timestamp: Option<f64>,
    ended: bool,
}

impl<'a> Feed<'a> {
    fn new(args: &'a Args, inputs: &[InputSpec], opts: &'a BodyOptions) -> Feed<'a> {
        Feed {
            args,
            opts,
            lines: Lines::new(inputs),
            prompts: LazyPrompts { args, synth: None },
            skipper: Skipper::new(&args.skip_invalid),
            index: 0,
            taken: 0,
            first_timestamp: None,
            ended: false,
        }
    }

    /// The next record to take on; `outline_only` skips building the body.
    /// Errors are records that stop the run (or unreadable input).
    fn next(&mut self, outline_only: bool) -> Result<Option<Prepared>> {
        let wanted = self.args.limit.map(|n| n.saturating_add(self.args.warmup));
        loop {
            let line = match wanted {
                Some(w) if self.taken >= w => None,
                _ => self.lines.next_line()?,
            };
            let Some((loc, line)) = line else {
                if !self.ended {
                    self.ended = true;
                    self.skipper.finish();
                }
                return Ok(None);
            };
            let rec = match Record::parse_at(line, &loc) {
                Ok(rec) => rec,
                Err(e) => {
                    self.skipper.skip(e)?;
                    continue;
                }
            };
            let index = self.index;
            self.index += 1;
            if self.first_timestamp.is_none() {
                self.first_timestamp = rec.timestamp().ok().flatten();
            }
            if let Some((k, n)) = self.args.shard {
                let session = rec.session_id().ok().flatten();
                if crate::slice::shard_of(session.as_deref(), index, n) != k - 1 {
                    continue;
                }
            }
            let prepared = if outline_only {
                Ok(
                    request::outline(&rec, index, self.opts).unwrap_or_else(|_| Prepared {
                        index,
                        ..Prepared::default()
                    }),
                )
            } else {
                request::prepare(&rec, index, self.opts, &mut self.prompts)
            };
            match prepared {
                Ok(p) => {
                    self.taken += 1;
                    return Ok(Some(p));
                }
                Err(PrepareError::Record(e)) => self.skipper.skip(e.at(&loc))?,
                Err(PrepareError::Fatal(e)) => return Err(e),
            }
        }
    }

    /// Whether the last record taken is a warmup one.
    fn in_warmup(&self) -> bool {
        self.taken <= self.args.warmup
    }
}

/// The reader thread: parse and prepare records ahead of the schedule.
///
/// Records go over in batches: one at a time while the dispatcher has room
/// for them, gathered up to `READ_BATCH` once the read-ahead is full, so
/// that keeping it full costs one wakeup of each thread per batch rather
/// than per record.
fn read_records(
    args: &Args,
    inputs: &[InputSpec],
    opts: &BodyOptions,
    out: tokio::sync::mpsc::Sender<Vec<Read>>,
    shared: &Shared,
) {
    let mut feed = Feed::new(args, inputs, opts);
    let mut origin_sent = false;
    let mut batch = Vec::new();
    loop {
        let stopping = shared.stopping.load(Ordering::SeqCst);
        let msg = match feed.next(stopping) {
            Ok(Some(p)) if stopping => Read::Unsent(p),
            Ok(Some(p)) => Read::Ready(p),
            Ok(None) => break,
            Err(e) => Read::Failed(e),
        };
        // Shards of one trace share its origin, so that they line up.
        if args.shard.is_some() && !origin_sent && !feed.in_warmup() {
            origin_sent = true;
            if let Some(ts) = feed.first_timestamp {
                batch.push(Read::Origin(ts));
            }
        }
        let failed = matches!(msg, Read::Failed(_));
        batch.push(msg);
        if failed {
            break;
        }
        if batch.len() >= READ_BATCH {
            if out.blocking_send(std::mem::take(&mut batch)).is_err() {
                return;
            }
            continue;
        }
        match out.try_send(std::mem::take(&mut batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(b)) => batch = b,
            Err(TrySendError::Closed(_)) => return,
        }
    }
    if feed.ended {
        let total = feed.taken.saturating_sub(args.warmup);
        shared.counters.total.store(total, Ordering::Relaxed);
    }
    if !batch.is_empty() {
        let _ = out.blocking_send(batch);
    }
}

/// How long a wait of the dispatcher may last.
enum Until {
    /// To the microsecond: a request is due.
    Precise(Instant),
    /// Roughly: a safety net while waiting for completions or records.
    About(Duration),
}

/// What ended a wait.
enum Woken {
    Control(Option<Control>),
    Records(Option<Vec<Read>>),
    Timer,
    Stop,
}

/// The dispatcher: owns the schedule, sends requests when due. It runs on
/// the same thread as the requests' tasks, so a send needs no handover
/// between threads and one wakeup can serve a due request and the responses
/// that arrived meanwhile.
struct Dispatcher<'a> {
    args: &'a Args,
    shared: Arc<Shared>,
    target: Arc<Target>,
    results: Results,
    control: UnboundedReceiver<Control>,
    /// `None` once the run stopped reading (--duration).
    records: Option<tokio::sync::mpsc::Receiver<Vec<Read>>>,
    /// Records received and not yet taken.
    unread: VecDeque<Read>,
    reader_done: bool,
    timer: Timer,
    /// A record that stopped the run.
    failure: Option<Error>,
    lag: Dist,
    /// Requests sent more than 5 ms after they were due.
    late: u64,
    /// Start of the run (of the warmup, before it).
    origin: Instant,
}

impl Dispatcher<'_> {
    /// Run to the end; `Ok(true)` when interrupted.
    async fn run(&mut self, run_start: &OnceLock<Instant>) -> Result<bool> {
        let pace = match (self.args.concurrency, self.args.max_concurrency) {
            (Some(n), _) => Pace::Closed {
                workers: n as usize,
            },
            (None, m) => Pace::Open {
                max_in_flight: m.map(|m| m as usize),
            },
        };
        self.warm_up(pace).await?;
        if self.shared.stopping.load(Ordering::SeqCst) {
            self.cancel_rest(&mut Schedule::new(pace)).await;
            return Ok(true);
        }
        let mut schedule: Schedule<Prepared> = Schedule::new(pace);
        // Fill the read-ahead before the clock starts, so the first
        // requests never wait for a prompt to be synthesized.
        while schedule.queued() < READ_AHEAD && !self.reader_done {
            match self.read().await {
                Some(r) => self.accept(r, &mut schedule),
                None => self.reader_done = true,
            }
        }
        if let Some(e) = self.failure.take() {
            // Nothing was sent: the run could not start.
            return Err(e);
        }
        if let Some(at) = self.args.start_at {
            self.wait_for_start(at).await?;
        }
        let start = Instant::now();
        self.origin = start;
        let _ = run_start.set(start);
        let duration = self.args.duration;
        loop {
            while schedule.queued() < READ_AHEAD && self.try_take_record(&mut schedule) {}
            while let Ok(c) = self.control.try_recv() {
                self.handle(c, &mut schedule);
            }
            if self.shared.stopping.load(Ordering::SeqCst) || self.failure.is_some() {
                break;
            }
            let now_ms = ms_between(start, Instant::now());
            if duration.is_some_and(|d| now_ms >= d && matches!(pace, Pace::Closed { .. })) {
                self.stop_reading(&mut schedule);
            }
            // Records wake the dispatcher only once half the read-ahead is
            // used: until then the top of this loop takes what the reader
            // has sent, at wakeups that happen anyway.
            let want_records = !self.reader_done && schedule.queued() < READ_AHEAD / 2;
            match schedule.next_due() {
                Some(due) if duration.is_some_and(|d| due >= d) => {
                    self.stop_reading(&mut schedule);
                }
                Some(due) => {
                    let due_at = start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
                    if due_at > Instant::now() + SPIN {
                        // Completions wake the wait only when one may make
                        // a request due sooner (a session turn, a cap);
                        // otherwise they are counted at the next wake, and
                        // a request costs one wakeup fewer.
                        let until = Until::Precise(due_at - SPIN);
                        let completions = schedule.waits_on_completions();
                        let woken = self.wait(until, want_records, completions).await;
                        self.on_wake(woken, &mut schedule);
                        continue;
                    }
                    while Instant::now() < due_at {
                        std::hint::spin_loop();
                    }
                    let now_ms = ms_between(start, Instant::now());
                    while let Some((due, req)) = schedule.pop_due(now_ms) {
                        if duration.is_some_and(|d| due >= d) {
                            // Due after the end: left out, like --limit.
                            schedule.complete(None, now_ms);
                            self.stop_reading(&mut schedule);
                            break;
                        }
                        self.launch(req, due, false);
                    }
                }
                None if schedule.in_flight() == 0 && schedule.is_empty() && self.reader_done => {
                    break;
                }
                None => {
                    // Waiting for completions (sessions, a concurrency
                    // cap) or for the reader.
                    let until = Until::About(Duration::from_millis(100));
                    let woken = self.wait(until, want_records, true).await;
                    self.on_wake(woken, &mut schedule);
                }
            }
        }
        let interrupted = self.shared.stopping.load(Ordering::SeqCst);
        self.cancel_rest(&mut schedule).await;
        Ok(interrupted)
    }

    /// --start-at: wait for a wall-clock instant, in steps, so that Ctrl-C
    /// is not held up until the start.
    async fn wait_for_start(&mut self, at: SystemTime) -> Result<()> {
        let wait = at.duration_since(SystemTime::now()).map_err(|_| {
            Error::usage(format!(
                "--start-at {} is already past (the read-ahead and the warmup are done first)",
                crate::time::rfc3339(at)
            ))
        })?;
        if !clock_synchronized() {
            self.shared.print(|| {
                cli::warn(
                    "the system clock is not synchronized (NTP): shards on other machines may start apart",
                )
            });
        }
        let until = Instant::now() + wait;
        while !self.shared.stopping.load(Ordering::SeqCst) && Instant::now() < until {
            let step = until.min(Instant::now() + Duration::from_millis(50));
            self.timer.sleep_until(step).await;
        }
        Ok(())
    }

    /// Wait for a stop, a completion (when wanted), a batch of records
    /// (when wanted), or the time given.
    async fn wait(&mut self, until: Until, want_records: bool, want_completions: bool) -> Woken {
        let Dispatcher {
            control,
            records,
            timer,
            shared,
            ..
        } = self;
        let records = records.as_mut().filter(|_| want_records);
        tokio::select! {
            biased;
            c = control.recv(), if want_completions => Woken::Control(c),
            () = shared.stop_signal.notified(), if !want_completions => Woken::Stop,
            r = async {
                match records {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => Woken::Records(r),
            () = async {
                match until {
                    Until::Precise(at) => timer.sleep_until(at).await,
                    Until::About(d) => tokio::time::sleep(d).await,
                }
            } => Woken::Timer,
        }
    }

    fn on_wake(&mut self, woken: Woken, schedule: &mut Schedule<Prepared>) {
        match woken {
            Woken::Control(Some(c)) => self.handle(c, schedule),
            // The senders live in `Shared`, which outlives the dispatcher.
            Woken::Control(None) | Woken::Timer | Woken::Stop => {}
            Woken::Records(Some(batch)) => self.unread.extend(batch),
            Woken::Records(None) => self.reader_done = true,
        }
    }

    /// Send the warmup records, all at once (up to the concurrency cap),
    /// and wait for their answers.
    async fn warm_up(&mut self, pace: Pace) -> Result<()> {
        let cap = pace.max_in_flight().unwrap_or(usize::MAX);
        let mut in_flight = 0usize;
        let mut left = self.args.warmup;
        while left > 0 && !self.shared.stopping.load(Ordering::SeqCst) {
            if in_flight >= cap {
                if let Some(Control::Done { .. }) = self.control.recv().await {
                    in_flight -= 1;
                }
                continue;
            }
            match self.read().await {
                Some(Read::Ready(req)) => {
                    in_flight += 1;
                    self.launch(req, 0.0, true);
                }
                Some(Read::Unsent(req)) => self.unsent(req, None, true),
                Some(Read::Origin(_)) => continue,
                Some(Read::Failed(e)) => {
                    self.reader_done = true;
                    self.failure = Some(e);
                    break;
                }
                None => {
                    self.reader_done = true;
                    break;
                }
            }
            left -= 1;
        }
        while in_flight > 0 {
            match self.control.recv().await {
                Some(Control::Done { .. }) => in_flight -= 1,
                Some(Control::Stop) => {}
                None => break,
            }
        }
        match self.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The next record, waiting for the reader; `None` when it is done.
    async fn read(&mut self) -> Option<Read> {
        loop {
            if let Some(r) = self.unread.pop_front() {
                return Some(r);
            }
            let batch = self.records.as_mut()?.recv().await?;
            self.unread.extend(batch);
        }
    }

    /// Take a record if one is ready; false when none is.
    fn try_take_record(&mut self, schedule: &mut Schedule<Prepared>) -> bool {
        if self.unread.is_empty() {
            let Some(rx) = &mut self.records else {
                self.reader_done = true;
                return false;
            };
            match rx.try_recv() {
                Ok(batch) => self.unread.extend(batch),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return false,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    self.reader_done = true;
                    return false;
                }
            }
        }
        match self.unread.pop_front() {
            Some(r) => {
                self.accept(r, schedule);
                true
            }
            None => false,
        }
    }

    fn accept(&mut self, read: Read, schedule: &mut Schedule<Prepared>) {
        match read {
            Read::Ready(req) => schedule.push(req),
            Read::Unsent(req) => self.unsent(req, None, false),
            Read::Origin(ts) => schedule.set_origin(ts),
            Read::Failed(e) => {
                self.reader_done = true;
                self.failure = Some(e);
            }
        }
    }

    /// --duration reached: read no more; drop what is queued (left out).
    fn stop_reading(&mut self, schedule: &mut Schedule<Prepared>) {
        self.records = None;
        self.unread.clear();
        self.reader_done = true;
        drop(schedule.drain());
    }

    fn handle(&mut self, c: Control, schedule: &mut Schedule<Prepared>) {
        match c {
            Control::Done {
                session,
                at,
                lag_ms,
                warmup,
            } => {
                if warmup {
                    return;
                }
                schedule.complete(session.as_deref(), ms_between(self.origin, at));
                self.lag.record(lag_ms);
                if lag_ms > 5.0 {
                    self.late += 1;
                }
            }
            Control::Stop => {}
        }
    }

    /// `K/N` for results of a shard.
    fn shard_label(&self) -> Option<String> {
        self.args.shard.map(|(k, n)| format!("{k}/{n}"))
    }

    /// Start one request; its task runs as soon as the dispatcher waits.
    fn launch(&self, req: Prepared, scheduled_ms: f64, warmup: bool) {
        let origin = self.origin;
        let shared = self.shared.clone();
        let target = self.target.clone();
        let results = self.results.clone();
        let mut cancel = self.shared.cancel.subscribe();
        let shard = self.shard_label();
        self.shared
            .counters
            .sent
            .fetch_add(u64::from(!warmup), Ordering::Relaxed);
        tokio::spawn(async move {
            let sent = Instant::now();
            let sent_ms = ms_between(origin, sent);
            // Formatted once the answer is in: off the send path.
            let wall_sent = SystemTime::now();
            let mut result = skeleton(
                &req,
                round_us(scheduled_ms),
                round_us(sent_ms),
                String::new(),
            );
            result.warmup = warmup;
            result.shard = shard;
            let lag_ms = sent_ms - scheduled_ms;
            shared
                .counters
                .lag_us
                .store((lag_ms.max(0.0) * 1000.0) as u64, Ordering::Relaxed);
            let cancelled = async move {
                if cancel.wait_for(|c| *c).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            // Boxed: the exchange's state is most of the task's size, and
            // a task is moved whole several times on its way through the
            // runtime.
            let mut result = Box::pin(exchange::send(&target, &req, result, sent, cancelled)).await;
            result.start_time = crate::time::rfc3339(wall_sent);
            if target.take_out_of_files() {
                let limit = target
                    .open_files_limit
                    .map_or_else(String::new, |n| format!(" of {n}"));
                shared.print(|| {
                    cli::warn(format!(
                        "connections fail for lack of files: the open-file limit{limit} \
                         caps the requests in flight; raise it (ulimit -Hn) or cap them \
                         with --max-concurrency"
                    ))
                });
            }
            results.send(result);
            let _ = shared.control.send(Control::Done {
                session: req.session_id,
                at: Instant::now(),
                lag_ms,
                warmup,
            });
        });
    }

    /// A `cancelled` result for a request never sent.
    fn unsent(&self, req: Prepared, due: Option<f64>, warmup: bool) {
        let now = ms_between(self.origin, Instant::now());
        let mut r = skeleton(
            &req,
            round_us(due.unwrap_or(now)),
            round_us(now),
            crate::time::rfc3339(SystemTime::now()),
        );
        r.warmup = warmup;
        r.shard = self.shard_label();
        r.error = Some("not sent: the run was stopped".into());
        self.results.send(r);
    }

    /// After a stop: `cancelled` results for everything unsent, including
    /// the records still to be read; then wait for the requests in flight
    /// (their tasks write their own results).
    async fn cancel_rest(&mut self, schedule: &mut Schedule<Prepared>) {
        let failed = self.failure.is_some();
        for (due, req) in schedule.drain() {
            self.unsent(req, due, false);
        }
        if !failed {
            while let Some(r) = self.read().await {
                match r {
                    Read::Ready(req) | Read::Unsent(req) => self.unsent(req, None, false),
                    Read::Failed(e) => {
                        self.failure = Some(e);
                        break;
                    }
                    Read::Origin(_) => {}
                }
            }
        }
        self.records = None;
        self.unread.clear();
        while schedule.in_flight() > 0 {
            match self.control.recv().await {
                Some(c) => self.handle(c, schedule),
                None => break,
            }
        }
    }
}

/// Whether the kernel says the clock is synchronized (adjtimex does not
/// report TIME_ERROR); true where that cannot be read.
fn clock_synchronized() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: adjtimex with modes = 0 only reads the clock's state
        // into the zeroed struct it is given.
        let state = unsafe {
            let mut tx: libc::timex = std::mem::zeroed();
            libc::adjtimex(&mut tx)
        };
        state != libc::TIME_ERROR
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// Where results go. Each is written and flushed as it comes.
#[derive(Clone)]
enum Results {
    /// Written by the runtime's thread itself, which costs less than
    /// waking another thread for each: for a regular file, where a write
    /// never waits for a reader.
    Direct(Arc<Mutex<ResultWriter>>),
    /// Handed to a writer thread: a pipe or a terminal can block, and the
    /// sends must not wait for whoever reads it.
    Thread(Sender<ResultRecord>),
}

impl Results {
    fn send(&self, r: ResultRecord) {
        match self {
            Results::Direct(w) => {
                if let Ok(mut w) = w.lock() {
                    w.write(&r);
                }
            }
            Results::Thread(tx) => {
                let _ = tx.send(r);
            }
        }
    }
}

/// Writes results, counts them, and stops the run if the output closes.
struct ResultWriter {
    out: Output,
    shared: Arc<Shared>,
    failure: Option<Error>,
}

impl ResultWriter {
    fn new(mut out: Output, shared: Arc<Shared>) -> ResultWriter {
        out.set_line_flush(true);
        ResultWriter {
            out,
            shared,
            failure: None,
        }
    }

    fn write(&mut self, r: &ResultRecord) {
        let c = &self.shared.counters;
        if !r.warmup {
            c.done.fetch_add(1, Ordering::Relaxed);
            let counter = match r.status {
                Status::Ok => &c.ok,
                Status::Error => &c.errors,
                Status::Timeout => &c.timeouts,
                Status::Cancelled => &c.cancelled,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if self.failure.is_some() {
            return;
        }
        if let Err(e) = self.out.write_line(r.to_json_line().as_bytes()) {
            // Nobody reads the results any more: stop the run at once.
            self.shared.output_closed.store(true, Ordering::SeqCst);
            self.shared.stop();
            let _ = self.shared.cancel.send(true);
            self.failure = Some(e);
        }
    }

    fn finish(self) -> Result<()> {
        match self.failure {
            Some(e) => Err(e),
            None => self.out.finish(),
        }
    }
}

/// Close the output once every result is written.
fn finish_results(results: Results, thread: Option<thread::JoinHandle<Result<()>>>) -> Result<()> {
    match results {
        Results::Direct(w) => match Arc::try_unwrap(w).map(Mutex::into_inner) {
            Ok(Ok(w)) => w.finish(),
            _ => Err(Error::msg("the result writer is still in use")),
        },
        Results::Thread(tx) => {
            drop(tx);
            match thread {
                Some(t) => t
                    .join()
                    .map_err(|_| Error::msg("the result writer stopped unexpectedly"))?,
                None => Ok(()),
            }
        }
    }
}

/// The writer thread.
fn write_results(rx: Receiver<ResultRecord>, mut writer: ResultWriter) -> Result<()> {
    for r in rx {
        writer.write(&r);
    }
    writer.finish()
}

/// First Ctrl-C: stop sending, give requests in flight `grace`, then
/// cancel them. Second Ctrl-C: cancel at once.
async fn on_ctrl_c(shared: &Shared, grace: Duration, quiet: bool) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    shared.stop();
    if !quiet {
        let grace = crate::duration::human(grace.as_secs_f64() * 1000.0);
        shared.print(|| {
            cli::note(format!(
                "interrupted: sending stopped; waiting up to {grace} for requests in flight (Ctrl-C again to stop now)"
            ))
        });
    }
    tokio::select! {
        () = tokio::time::sleep(grace) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = shared.cancel.send(true);
}

/// The progress thread. On a terminal, an indicatif bar: requests done
/// out of the total once it is known (--limit, or the reader reached the
/// end of the input), else a spinner. Otherwise a status line every ten
/// seconds. Both show sent, in flight, done, errors and the last lag.
fn progress(shared: &Shared, done: &AtomicBool, run_start: &OnceLock<Instant>) {
    let every = Duration::from_secs(10);
    let mut last = Instant::now();
    let mut with_length = false;
    while !done.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(100));
        let Some(start) = run_start.get() else {
            continue;
        };
        let c = &shared.counters;
        let sent = c.sent.load(Ordering::Relaxed);
        let finished = c.done.load(Ordering::Relaxed);
        let status = format!(
            "sent {sent}, in flight {}, done {finished}, errors {}, lag {:.2}ms",
            sent.saturating_sub(finished),
            c.errors.load(Ordering::Relaxed) + c.timeouts.load(Ordering::Relaxed),
            c.lag_us.load(Ordering::Relaxed) as f64 / 1000.0,
        );
        match &shared.bar {
            Some(bar) => {
                let total = c.total.load(Ordering::Relaxed);
                if total > 0 {
                    if !with_length {
                        with_length = true;
                        bar.set_style(bar_style(BAR));
                    }
                    bar.set_length(total);
                }
                bar.set_position(finished);
                bar.set_message(status);
            }
            None if last.elapsed() >= every => {
                last = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                eprintln!("{}: {secs:.0}s: {status}", cli::tool());
            }
            None => {}
        }
    }
    if let Some(bar) = &shared.bar {
        bar.finish_and_clear();
    }
}

/// The progress bar's layouts: with a known total, and without.
const BAR: &str = "{elapsed_precise} [{bar:30}] {percent:>3}% {wide_msg}";
const SPINNER: &str = "{spinner} {elapsed_precise} {wide_msg}";

fn bar_style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

/// A progress bar on standard error when it is a terminal.
fn progress_bar(args: &Args) -> Option<indicatif::ProgressBar> {
    if args.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner().with_style(bar_style(SPINNER));
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// A warning when the schedule was not kept: more than 1% of the requests,
/// and at least 10, sent over 5 ms late with no --max-concurrency to explain
/// it. A user would otherwise blame the server for the client's limits.
fn lateness_warning(args: &Args, sent: u64, late: u64) -> Option<String> {
    if args.max_concurrency.is_some() || late < 10 || late * 100 <= sent {
        return None;
    }
    Some(format!(
        "{late} of {sent} requests left more than 5ms late: this process could not keep \
         the schedule, so the results say as much about it as about the server; split \
         the trace over several processes with --shard"
    ))
}

/// The end-of-run line on stderr, after the lateness warning if any.
fn final_line(args: &Args, shared: &Shared, lag: &Dist, late: u64, elapsed_ms: Option<f64>) {
    if args.quiet && shared.output_closed.load(Ordering::SeqCst) {
        return;
    }
    let c = &shared.counters;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut line = format!(
        "sent {}, ok {}, errors {}, timeouts {}, cancelled {}",
        load(&c.sent),
        load(&c.ok),
        load(&c.errors),
        load(&c.timeouts),
        load(&c.cancelled),
    );
    if let Some(ms) = elapsed_ms {
        line.push_str(&format!(" in {}", crate::duration::human(round_us(ms))));
    }
    if let Some(w) = lateness_warning(args, load(&c.sent), late) {
        cli::warn(w);
    }
    if let Some(s) = lag.summary(&[50.0, 99.0]) {
        line.push_str(&format!(
            "; dispatch lag p50 {:.3}ms, p99 {:.3}ms, max {:.3}ms, {late} late by more than 5ms",
            s.percentiles[0].1, s.percentiles[1].1, s.max
        ));
    }
    eprintln!("{}: {line}", cli::tool());
}

/// --dry-run: the schedule as JSON lines, nothing sent.
fn dry_run(args: &Args, inputs: &[InputSpec], opts: &BodyOptions) -> Result<Outcome> {
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut feed = Feed::new(args, inputs, opts);
    let mut sessions = std::collections::HashSet::new();
    let mut origin: Option<f64> = None;
    let mut last_ts = 0.0;
    while let Some(req) = feed.next(false)? {
        let warmup = feed.in_warmup();
        if !warmup && args.shard.is_some() {
            origin = origin.or(feed.first_timestamp);
        }
        let ts = req.timestamp.unwrap_or(last_ts);
        last_ts = ts;
        let follows = match &req.session_id {
            Some(s) => !sessions.insert(s.clone()) && req.delay.is_some(),
            None => false,
        };
        let scheduled = if warmup || args.concurrency.is_some() || follows {
            None
        } else {
            Some(ts - *origin.get_or_insert(ts))
        };
        if args
            .duration
            .is_some_and(|d| scheduled.is_some_and(|s| s >= d))
        {
            break;
        }
        let mut line = json!({
            "index": req.index,
            "scheduled_ms": scheduled.map(round_us),
        });
        let m = line.as_object_mut().expect("an object");
        if follows {
            m.insert("after_previous_turn_ms".into(), json!(req.delay));
        }
        for (k, v) in [
            ("id", &req.id),
            ("session_id", &req.session_id),
            ("model", &req.model),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        m.insert("input_length".into(), json!(req.input_length));
        m.insert("output_length".into(), json!(req.output_length));
        m.insert("stream".into(), json!(req.stream));
        m.insert("body_bytes".into(), json!(req.body.len()));
        if warmup {
            m.insert("warmup".into(), json!(true));
        }
        out.write_line(line.to_string().as_bytes())?;
    }
    out.finish()?;
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_is_warned_of_past_one_percent_unless_concurrency_is_capped() {
        let open = Args::parse_from(["trace-replay", "--sim"]);
        let capped = Args::parse_from(["trace-replay", "--sim", "--max-concurrency", "4"]);
        assert_eq!(lateness_warning(&open, 1000, 10), None);
        assert_eq!(lateness_warning(&open, 500, 9), None);
        assert_eq!(lateness_warning(&capped, 1000, 500), None);
        assert_eq!(
            lateness_warning(&open, 1000, 11).as_deref(),
            Some(
                "11 of 1000 requests left more than 5ms late: this process could not keep the \
                 schedule, so the results say as much about it as about the server; split the \
                 trace over several processes with --shard"
            )
        );
    }

    #[test]
    fn endpoint_urls() {
        let chat = Endpoint::Chat;
        assert_eq!(
            endpoint_url("http://h:8000", chat),
            "http://h:8000/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url("http://h:8000/v1/", chat),
            "http://h:8000/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url("http://h/x/v1/completions", chat),
            "http://h/x/v1/completions"
        );
        assert_eq!(
            endpoint_url("http://h", Endpoint::Completions),
            "http://h/v1/completions"
        );
    }
}
