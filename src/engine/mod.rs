//! The replay engine: send each record to an OpenAI-compatible server on
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

mod abort;
mod args;
pub mod conversation;
mod dispatch;
mod dry_run;
pub mod exchange;
mod feed;
mod internal;
mod output;
mod plain;
mod preflight;
mod progress;
pub mod request;
pub mod schedule;
mod scrape;
pub mod sse;
mod timer;

pub use self::args::{Args, endpoint_url};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{self};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use self::args::{CONNECT_TIMEOUT, body_options, ca_certificates, headers, request_url};
use self::dispatch::{Control, Dispatcher, MAX_UNKNOWN_WARNINGS, ms_between};
use self::dry_run::dry_run;
use self::exchange::Target;
use self::feed::{READ_AHEAD, READ_BATCH, read_records};
use self::output::{ResultWriter, Results, finish_results, write_results};
use self::progress::{final_line, progress, progress_bar};
use self::timer::Timer;
use crate::cli::{self, Outcome};
use crate::error::{Error, Result};
use crate::io::{self, Output};
use crate::result::ResultRecord;
use crate::stats::Dist;

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
    /// When the last timed request is due, ms after the start, once the
    /// whole input is read (open loop only): the progress bar's length.
    schedule_ms: OnceLock<f64>,
    /// Until then, what the first and last lines of a plain file say.
    schedule_estimate_ms: OnceLock<f64>,
    /// A token count beyond what a summary takes was written as null (and
    /// said once).
    huge_counts: AtomicBool,
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
    /// The caller's `on_result` hook stopped the run.
    stopped_by_caller: AtomicBool,
    /// The internal error (a panic) that stopped the run, on one line.
    internal: OnceLock<String>,
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

    /// An internal error (`what`, from [`internal::describe`]): stop at
    /// once, as a second Ctrl-C does; from now on a result the stop cuts
    /// short is an `error` naming it. The first one is the run's.
    fn fail(&self, what: String) {
        let _ = self.internal.set(what);
        self.stop();
        let _ = self.cancel.send(true);
    }
}

/// What a caller that runs the engine in process (trace-sweep) adds to
/// a run.
#[derive(Default)]
pub struct Hooks {
    /// Sees each result as it is written; `true` stops the run as a first
    /// Ctrl-C does (nothing more is sent, requests in flight finish, the
    /// rest is written `cancelled`), and the run then ends as a success.
    pub on_result: Option<OnResult>,
}

/// See [`Hooks::on_result`].
pub type OnResult = Box<dyn FnMut(&ResultRecord) -> bool + Send>;

/// Run trace-replay.
pub fn run(args: &Args) -> Result<Outcome> {
    run_with(args, Hooks::default())
}

/// Run a replay with the caller's hooks.
pub fn run_with(args: &Args, hooks: Hooks) -> Result<Outcome> {
    let inputs = io::input_specs(&args.input.files)?;
    let opts = body_options(args)?;
    let api_key = || std::env::var(&args.api_key_env).ok();
    if args.dry_run {
        if let Ok(h) = headers(args) {
            cli::hide_secrets(exchange::secrets(&h, None, api_key()));
        }
        return dry_run(args, &inputs, &opts);
    }
    let headers = headers(args)?;
    internal::install_hook();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
    // The in-process simulated server gets a runtime (a thread) of its
    // own, so that it does not take the client's.
    let mut sim_runtime = None;
    if !args.sim_args.is_empty() && !args.sim {
        return Err(Error::usage("--sim-arg applies to --sim only"));
    }
    scrape_plan(args, "http://127.0.0.1", false)?;
    let sim_options = crate::simulator::SimOptions::from_flags(&args.sim_args)
        .map_err(|e| Error::usage(format!("--sim-arg: {e} (give trace-sim's flags)")))?;
    let base = match (&args.url, args.sim) {
        (Some(url), _) => url.clone(),
        (None, true) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
            let server = rt.block_on(crate::simulator::start("127.0.0.1", 0, sim_options))?;
            sim_runtime = Some(rt);
            if !args.quiet {
                cli::note(format!("simulated server at {}", server.url));
            }
            server.url
        }
        (None, false) => return Err(Error::usage("give --url URL, or --sim")),
    };
    let url = request_url(&base, opts.endpoint)?;
    cli::hide_secrets(exchange::secrets(&headers, Some(&url), api_key()));
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
    if sim_runtime.is_none() {
        runtime.block_on(preflight::check_server(&client, &headers, &base, &url))?;
    }
    let target = Arc::new(Target {
        client,
        plain,
        url,
        headers,
        timeout: Some(Duration::from_secs_f64(args.timeout / 1000.0)),
        max_answer_bytes: usize::try_from(args.max_answer_bytes).unwrap_or(usize::MAX),
        open_files_limit: crate::io::raise_open_files_limit(),
        session_header: opts.session_header.clone(),
        endpoint: opts.endpoint,
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
        stopped_by_caller: AtomicBool::new(false),
        internal: OnceLock::new(),
        bar: progress_bar(args),
    });
    if let Some(limit) = args.limit {
        shared.counters.total.store(limit, Ordering::Relaxed);
    }
    if args.concurrency.is_none() {
        if let Some(ms) = progress::estimate_span(&inputs) {
            let _ = shared.counters.schedule_estimate_ms.set(ms);
        }
    }
    let direct = output.is_file();
    let writer = ResultWriter::new(output, shared.clone(), hooks.on_result);
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
    let dispatcher_results = results.clone();
    let mut finishing = Some((results, writer_thread));
    let (records_tx, records_rx) = tokio::sync::mpsc::channel(READ_AHEAD / READ_BATCH);
    let signal = {
        let shared = shared.clone();
        let grace = Duration::from_secs_f64(args.grace / 1000.0);
        let quiet = args.quiet;
        runtime.spawn(async move { on_ctrl_c(&shared, grace, quiet).await })
    };

    let run_start: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let mut scraper = match scrape_plan(args, &base, true)? {
        Some(plan) => {
            let s = scrape::Scraper::start(plan, run_start.clone(), shared.clone())?;
            s.wait_first(Duration::from_secs(1));
            Some(s)
        }
        None => None,
    };
    let progress_done = AtomicBool::new(false);
    let (ended, failure, lag, late, aborted, cpu_ms) = thread::scope(|scope| {
        let reader = {
            let shared = &shared;
            let (opts, inputs) = (&opts, &inputs);
            scope.spawn(move || read_records(args, inputs, opts, records_tx, shared))
        };
        if !args.quiet {
            let (shared, done, start) = (&shared, &progress_done, &run_start);
            scope.spawn(move || progress(shared, done, start, args.duration));
        }
        let mut dispatcher = Dispatcher {
            args,
            shared: shared.clone(),
            target,
            results: dispatcher_results,
            control: control_rx,
            records: Some(records_rx),
            unread: VecDeque::new(),
            schedule: schedule::Schedule::new(dispatch::pace(args)),
            reader_done: false,
            input_ended: false,
            timer,
            failure: None,
            lag: Dist::default(),
            late: 0,
            unknown_after: 0,
            kept: Default::default(),
            lost_parents: 0,
            short_turns: 0,
            origin: Instant::now(),
            watch: abort::FailWatch::new(args.abort_after),
            aborted: None,
            tasks: 0,
            taking: None,
            dropped: None,
        };
        // The sending thread's CPU over the run tells a busy replay from
        // a busy machine, for the lateness warning.
        let cpu_before = progress::thread_cpu_ms();
        let ended = {
            // A panic of the dispatcher or of a request's task is caught
            // and told here, in one line, with every record's result.
            let _caught = internal::caught_here();
            runtime.block_on(async {
                let run = std::panic::AssertUnwindSafe(dispatcher.run(&run_start));
                match futures_util::FutureExt::catch_unwind(run).await {
                    Ok(ended) => ended,
                    Err(panic) => Err(dispatcher.recover(internal::describe(&*panic)).await),
                }
            })
        };
        if let Some(s) = scraper.take() {
            s.finish();
        }
        let cpu_ms = progress::thread_cpu_ms()
            .zip(cpu_before)
            .map(|(after, before)| after - before);
        progress_done.store(true, Ordering::SeqCst);
        let Dispatcher {
            failure,
            lag,
            late,
            unknown_after,
            short_turns,
            aborted,
            input_ended,
            ..
        } = dispatcher;
        if short_turns > 0 {
            cli::warn(format!(
                "--live-answers: {short_turns} later turn{} asked for fewer prompt tokens than \
                 their session's history (previous prompt + the answer given): they were sent \
                 with the history and no new tokens",
                crate::text::plural(short_turns)
            ));
        }
        let internal = shared.internal.get();
        let stopped = matches!(ended, Ok(true)) && failure.is_none() || internal.is_some();
        if stopped && !input_ended && !reader.is_finished() {
            // Stopped while the input has not ended (a pipe still open):
            // its reader is blocked in a read that may never return, and
            // every record it passed on has its result. End here.
            drop(dispatcher.results);
            let (results, writer_thread) = finishing.take().expect("taken once");
            let written = finish_results(results, writer_thread);
            let elapsed_ms = run_start.get().map(|s| ms_between(*s, Instant::now()));
            final_line(args, &shared, &lag, late, elapsed_ms, None, None);
            cli::exit(match (written, internal) {
                (Err(e), _) if !e.is_broken_pipe() => Err(e),
                (_, Some(what)) => Err(internal::stopped(what)),
                _ => Ok(stop_outcome()),
            });
        }
        let _ = reader.join();
        if unknown_after > MAX_UNKNOWN_WARNINGS {
            cli::warn(format!(
                "{unknown_after} `after` ids in all named no earlier record of this run (the first {MAX_UNKNOWN_WARNINGS} are listed above)"
            ));
        }
        (ended, failure, lag, late, aborted, cpu_ms)
    });
    signal.abort();
    drop(runtime);
    let (results, writer_thread) = finishing.take().expect("taken once");
    let written = finish_results(results, writer_thread);
    drop(sim_runtime);
    let interrupted = ended?;
    let elapsed_ms = run_start.get().map(|s| ms_between(*s, Instant::now()));
    final_line(
        args,
        &shared,
        &lag,
        late,
        elapsed_ms,
        cpu_ms,
        aborted.as_deref(),
    );
    if failure.is_none() && shared.counters.done.load(Ordering::Relaxed) == 0 {
        cli::warn(
            "no requests replayed: the input has no records (or --skip-invalid skipped them \
             all); give a trace, one JSON object per line (trace-convert makes one from logs)",
        );
    }
    if let Err(e) = written {
        if !e.is_broken_pipe() {
            return Err(e);
        }
        return Ok(Outcome::Success);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(what) = shared.internal.get() {
        return Err(internal::stopped(what));
    }
    Ok(if aborted.is_some() {
        Outcome::Aborted
    } else if interrupted
        && !(shared.stopped_by_caller.load(Ordering::SeqCst)
            && STOPPED_BY.load(Ordering::SeqCst) == 0)
    {
        stop_outcome()
    } else {
        Outcome::Success
    })
}

/// What --metrics-url and --metrics-out ask for; with --sim, the
/// simulated server's /metrics by default. Without `open`, only checks
/// the flags (before the server is reached).
fn scrape_plan(args: &Args, base: &str, open: bool) -> Result<Option<scrape::Plan>> {
    let Some(path) = &args.metrics_out else {
        return Ok(None);
    };
    let url = match (&args.metrics_url, args.sim) {
        (Some(url), _) => url.clone(),
        (None, true) => format!("{base}/metrics"),
        (None, false) => {
            return Err(Error::usage(
                "--metrics-out needs --metrics-url URL (the server's Prometheus endpoint)",
            ));
        }
    };
    scrape::metrics_url(&url)?;
    if !open {
        return Ok(None);
    }
    Ok(Some(scrape::Plan {
        url,
        every_ms: args.metrics_every,
        out: Output::open(Some(path))?,
        keep: args.metrics_match.clone(),
        quiet: args.quiet,
        tls: scrape::Tls {
            cacert: match &args.cacert {
                Some(path) => ca_certificates(path)?,
                None => Vec::new(),
            },
            insecure: args.insecure,
        },
    }))
}

/// How a run stopped by a signal ends: 130 for Ctrl-C, 128 + the signal.
fn stop_outcome() -> Outcome {
    match STOPPED_BY.load(Ordering::SeqCst) {
        0 | libc::SIGINT => Outcome::Interrupted,
        sig => Outcome::Signalled(u8::try_from(sig).unwrap_or(0)),
    }
}

/// The signal that stopped the run (0: none).
static STOPPED_BY: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// SIGINT, SIGTERM and SIGHUP, as they come.
struct StopSignals(Vec<(i32, tokio::signal::unix::Signal)>);

impl StopSignals {
    fn new() -> StopSignals {
        use tokio::signal::unix::{SignalKind, signal};
        let kinds = [
            (libc::SIGINT, SignalKind::interrupt()),
            (libc::SIGTERM, SignalKind::terminate()),
            (libc::SIGHUP, SignalKind::hangup()),
        ];
        StopSignals(
            kinds
                .into_iter()
                .filter_map(|(n, kind)| signal(kind).ok().map(|s| (n, s)))
                .collect(),
        )
    }

    /// The next of them to arrive.
    async fn recv(&mut self) -> i32 {
        let waits = self.0.iter_mut().map(|(n, s)| {
            let n = *n;
            Box::pin(async move {
                s.recv().await;
                n
            })
        });
        match futures_select_all(waits).await {
            Some(n) => n,
            None => std::future::pending().await,
        }
    }
}

/// The first of `futures` to finish; `None` when there is none.
async fn futures_select_all<F: std::future::Future<Output = i32> + Unpin>(
    futures: impl Iterator<Item = F>,
) -> Option<i32> {
    let mut futures: Vec<F> = futures.collect();
    if futures.is_empty() {
        return None;
    }
    Some(
        std::future::poll_fn(|cx| {
            for f in &mut futures {
                if let std::task::Poll::Ready(n) = std::pin::Pin::new(f).poll(cx) {
                    return std::task::Poll::Ready(n);
                }
            }
            std::task::Poll::Pending
        })
        .await,
    )
}

/// First Ctrl-C (or SIGTERM, SIGHUP): stop sending, give requests in
/// flight `grace`, then cancel them. A second one: cancel at once.
async fn on_ctrl_c(shared: &Shared, grace: Duration, quiet: bool) {
    let mut signals = StopSignals::new();
    let sig = signals.recv().await;
    STOPPED_BY.store(sig, Ordering::SeqCst);
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
        _ = signals.recv() => {}
    }
    let _ = shared.cancel.send(true);
}
