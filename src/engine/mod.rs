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
//!
//! The engine is a library: [`Plan`] says what a run does (from
//! trace-replay's flags, `Plan::try_from(&Args)`, or built by code),
//! [`Engine::run`] runs it on records from any [`Records`] source, gives
//! each result to a [`Sink`], and returns how the run ended ([`RunEnd`]);
//! only the tools turn that into an exit status. Scheduling and dispatch
//! take the time from the run's [`Clock`] (the wall clock for a replay;
//! see [`clock`] for the seam).

mod abort;
mod args;
pub mod clock;
pub mod conversation;
mod dispatch;
mod dry_run;
pub mod exchange;
mod feed;
mod internal;
mod lengths;
mod network;
mod output;
mod plain;
mod plan;
mod preflight;
mod progress;
pub mod request;
pub mod schedule;
mod scrape;
mod shared;
pub mod sse;
mod timer;
mod twin;

pub use self::args::{Args, endpoint_url, parse_every};
pub use self::clock::{Clock, WallClock};
pub use self::dry_run::dry_run;
pub use self::feed::{InMemory, Records, TraceLines};
pub use self::output::{Ndjson, Sink, Tee};
pub use self::plan::{Limits, Pacing, Plan, Prompts, Scrape, Server, Target};

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{self};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use self::args::{CONNECT_TIMEOUT, request_url};
use self::dispatch::{Dispatched, Dispatcher, Executor, MAX_UNKNOWN_WARNINGS, Wiring, ms_between};
use self::feed::{READ_AHEAD, READ_BATCH, Reading, read_records};
use self::output::{ResultWriter, Results, finish_results, write_results};
use self::progress::{Took, final_line, progress, progress_bar, start_bar};
use self::shared::{Shared, StopSignals, on_ctrl_c};
use crate::cli::{self, Outcome};
use crate::error::{Error, Result};
use crate::io::Output;
use crate::result::ResultRecord;

/// How a run ended.
#[derive(Debug)]
pub enum RunEnd {
    /// Every record ran.
    Completed,
    /// The sink asked to stop: the rest was given as `cancelled`.
    StoppedBySink,
    /// A signal stopped it (its number; 0 when not known): sending
    /// stopped, every result was given.
    Interrupted(i32),
    /// Its first requests all failed (`abort_after`): stopped early.
    Aborted,
    /// Nobody reads the results any more (a closed pipe).
    OutputClosed,
    /// It could not start, a record stopped it, or an internal error did.
    Failed(Error),
}

impl RunEnd {
    /// The tool's outcome of a run that ended so.
    pub fn outcome(self) -> Result<Outcome> {
        match self {
            RunEnd::Completed | RunEnd::StoppedBySink | RunEnd::OutputClosed => {
                Ok(Outcome::Success)
            }
            RunEnd::Interrupted(0 | libc::SIGINT) => Ok(Outcome::Interrupted),
            RunEnd::Interrupted(sig) => Ok(Outcome::Signalled(u8::try_from(sig).unwrap_or(0))),
            RunEnd::Aborted => Ok(Outcome::Aborted),
            RunEnd::Failed(e) => Err(e),
        }
    }
}

/// The replay engine.
pub struct Engine;

impl Engine {
    /// Run `plan` on `records`, giving each result to `sink`, on the
    /// wall clock.
    pub fn run(plan: Plan, records: impl Records, sink: impl Sink) -> RunEnd {
        run_plan(plan, records, Box::new(sink)).unwrap_or_else(RunEnd::Failed)
    }
}

fn run_plan(plan: Plan, records: impl Records, sink: Box<dyn Sink>) -> Result<RunEnd> {
    let plan = Arc::new(plan);
    internal::install_hook();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
    // The signals are heard from here on, through the server check too: a
    // stop before the run started still gives every record its result.
    let (control_tx, control_rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(control_tx, progress_bar(&plan)));
    let signal = {
        let signals = {
            let _inside = runtime.enter();
            StopSignals::new()
        };
        let shared = shared.clone();
        let (grace, quiet) = (plan.limits.grace, plan.quiet);
        runtime.spawn(async move { on_ctrl_c(signals, &shared, grace, quiet).await })
    };
    // The in-process simulated server gets a runtime (a thread) of its
    // own, so that it does not take the client's.
    let mut sim_runtime = None;
    let base = match &plan.target.server {
        Server::Url(url) => url.clone(),
        Server::Twin(_) => String::new(),
        Server::Sim(options) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|e| Error::msg(format!("cannot start the async runtime: {e}")))?;
            let server = rt.block_on(crate::simulator::start("127.0.0.1", 0, options.clone()))?;
            sim_runtime = Some(rt);
            if !plan.quiet {
                cli::note(format!("simulated server at {}", server.url));
            }
            server.url
        }
    };
    let target = match &plan.target.server {
        Server::Twin(_) => None,
        _ => Some(network_target(
            &runtime,
            &plan,
            &shared,
            &base,
            sim_runtime.is_some(),
        )?),
    };
    let endpoint = clap::ValueEnum::to_possible_value(&plan.body.endpoint)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let mut sink = sink;
    sink.settings(&crate::run_info::RunInfo::now(
        target.as_ref().map(|t| t.url.as_str()),
        if plan.offline() { "offline" } else { &endpoint },
        plan.body.model.as_deref(),
    ));
    start_bar(&shared);
    if let Some(limit) = plan.pacing.limit {
        shared.counters.total.store(limit, Ordering::Relaxed);
    }
    if !plan.closed_loop() {
        if let Some(ms) = records.span_estimate() {
            let _ = shared.counters.schedule_estimate_ms.set(ms);
        }
    }
    let may_block = sink.may_block();
    let writer = ResultWriter::new(sink, shared.clone());
    let (results, writer_thread) = if !may_block {
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

    let run_start: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let mut scraper = match &plan.scrape {
        Some(s) => {
            let job = scrape::Job {
                url: s.url.clone().unwrap_or_else(|| format!("{base}/metrics")),
                every_ms: s.every_ms,
                out: Output::open(Some(&s.out))?,
                keep: s.keep.clone(),
                quiet: plan.quiet,
                tls: scrape::Tls {
                    cacert: plan.target.cacert.clone(),
                    insecure: plan.target.insecure,
                },
            };
            let s = scrape::Scraper::start(job, run_start.clone(), shared.clone())?;
            s.wait_first(Duration::from_secs(1));
            Some(s)
        }
        None => None,
    };
    // The reader is a thread of its own, not scoped: stopped while its
    // input has not ended (a pipe still open), it may be blocked in a read
    // that never returns, and the run ends without it.
    let reading = Arc::new(Reading::new(records.endless()));
    let reader = {
        let (plan, shared, reading) = (plan.clone(), shared.clone(), reading.clone());
        thread::spawn(move || read_records(&plan, records, records_tx, &shared, &reading))
    };
    let progress_done = Arc::new(AtomicBool::new(false));
    let progress_thread = (!plan.quiet).then(|| {
        let (shared, done, start) = (shared.clone(), progress_done.clone(), run_start.clone());
        let duration = plan.pacing.duration_ms;
        thread::spawn(move || progress(&shared, &done, &start, duration))
    });
    let wiring = Wiring {
        shared: shared.clone(),
        results: results.clone(),
        control: control_rx,
        reader: (records_rx, reading),
    };
    let wall_start = Instant::now();
    let (ended, dispatched, cpu_ms) = match (&plan.target.server, target) {
        (_, Some(target)) => {
            let clock = {
                let _inside = runtime.enter();
                WallClock::new().map_err(|e| Error::msg(format!("cannot create a timer: {e}")))?
            };
            let d = Dispatcher::new(&plan, wiring, Executor::Network(target), clock);
            drive(&runtime, d, &run_start)
        }
        // No network target: the twin's run.
        (server, None) => {
            let profile = match server {
                Server::Twin(profile) => (**profile).clone(),
                _ => return Err(Error::msg("a server over the network needs its target")),
            };
            // The twin and its clock share the model: the dispatcher hands
            // it requests, the clock runs it.
            let twin = Rc::new(RefCell::new(twin::Twin::new(
                profile,
                results.clone(),
                shared.control.clone(),
                Instant::now(),
                plan.pacing.shard.map(|(k, n)| format!("{k}/{n}")),
            )));
            let clock = twin::VirtualClock::new(twin.clone());
            let d = Dispatcher::new(&plan, wiring, Executor::Twin(twin), clock);
            drive(&runtime, d, &run_start)
        }
    };
    if let Some(s) = scraper.take() {
        s.finish();
    }
    progress_done.store(true, Ordering::SeqCst);
    let Dispatched {
        failure,
        lag,
        late,
        unknown_after,
        short_turns,
        own_turns,
        aborted,
        input_ended,
        virtual_ms,
    } = dispatched;
    if short_turns > 0 {
        cli::warn(format!(
            "--live-answers: {short_turns} later turn{} asked for fewer prompt tokens than \
             the conversation they continue (its prompt + the answer given): they were sent \
             with that conversation and no new tokens",
            crate::text::plural(short_turns)
        ));
    }
    if own_turns > 0 {
        cli::warn(format!(
            "--live-answers: {own_turns} later turn{} asked for fewer prompt tokens than \
             even the prompt of the turn they follow: each was sent as a conversation of its \
             own, of its recorded length (a subagent's first call, a compacted context)",
            crate::text::plural(own_turns)
        ));
    }
    let internal = shared.internal.get().cloned();
    let stopped = matches!(ended, Ok(true)) && failure.is_none() || internal.is_some();
    // Stopped while the input has not ended (a pipe still open): its
    // reader is blocked in a read that may never return, and every record
    // it passed on has its result. The run ends without it.
    let reader_left = stopped && !input_ended && !reader.is_finished();
    if !reader_left {
        let _ = reader.join();
        if unknown_after > MAX_UNKNOWN_WARNINGS {
            cli::warn(format!(
                "{unknown_after} `after` ids in all named no earlier record of this run (the first {MAX_UNKNOWN_WARNINGS} are listed above)"
            ));
        }
    }
    if let Some(t) = progress_thread {
        let _ = t.join();
    }
    signal.abort();
    drop(runtime);
    let written = finish_results(results, writer_thread);
    drop(sim_runtime);
    let elapsed_ms = match virtual_ms {
        Some(_) => Some(ms_between(wall_start, Instant::now())),
        None => run_start.get().map(|s| ms_between(*s, Instant::now())),
    };
    if reader_left {
        let took = Took {
            elapsed_ms,
            cpu_ms: None,
            virtual_ms,
        };
        final_line(&plan, &shared, &lag, late, took, None);
        return Ok(match (written, internal) {
            (Err(e), _) if !e.is_broken_pipe() => RunEnd::Failed(e),
            (_, Some(what)) => RunEnd::Failed(internal::stopped(&what)),
            _ => stop_end(&shared),
        });
    }
    let interrupted = ended?;
    final_line(
        &plan,
        &shared,
        &lag,
        late,
        Took {
            elapsed_ms,
            cpu_ms,
            virtual_ms,
        },
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
        return Ok(RunEnd::OutputClosed);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(what) = &internal {
        return Err(internal::stopped(what));
    }
    Ok(if aborted.is_some() {
        RunEnd::Aborted
    } else if interrupted {
        stop_end(&shared)
    } else {
        RunEnd::Completed
    })
}

/// Run the dispatcher to its end on its clock: how it ended, what it
/// leaves, and the CPU the sending thread took (which tells a busy replay
/// from a busy machine, for the lateness warning).
fn drive<C: Clock>(
    runtime: &tokio::runtime::Runtime,
    mut dispatcher: Dispatcher<'_, C>,
    run_start: &OnceLock<Instant>,
) -> (Result<bool>, Dispatched, Option<f64>) {
    let cpu_before = progress::thread_cpu_ms();
    let ended = {
        // A panic of the dispatcher or of a request's task is caught
        // and told here, in one line, with every record's result.
        let _caught = internal::caught_here();
        runtime.block_on(async {
            let run = std::panic::AssertUnwindSafe(dispatcher.run(run_start));
            match futures_util::FutureExt::catch_unwind(run).await {
                Ok(ended) => ended,
                Err(panic) => Err(dispatcher.recover(internal::describe(&*panic)).await),
            }
        })
    };
    let cpu_ms = progress::thread_cpu_ms()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    (ended, dispatcher.end(), cpu_ms)
}

/// How a stopped run ended: by its sink, or by a signal.
fn stop_end(shared: &Shared) -> RunEnd {
    match shared.signal() {
        None if shared.stopped_by_caller.load(Ordering::SeqCst) => RunEnd::StoppedBySink,
        sig => RunEnd::Interrupted(sig.unwrap_or(0)),
    }
}

/// The network executor's target: the request URL, the HTTP clients, the
/// server checked (unless it is the simulated one, started in process).
fn network_target(
    runtime: &tokio::runtime::Runtime,
    plan: &Plan,
    shared: &Shared,
    base: &str,
    simulated: bool,
) -> Result<Arc<exchange::Target>> {
    let api_key = || std::env::var(&plan.target.api_key_env).ok();
    let headers = plan.target.headers.clone();
    let url = request_url(base, plan.body.endpoint)?;
    cli::hide_secrets(exchange::secrets(&headers, Some(&url), api_key()));
    let plain = if plan.target.http2 {
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
    if plan.target.http2 {
        client = client.http2_prior_knowledge();
    }
    for cert in &plan.target.cacert {
        client = client.add_root_certificate(cert.clone());
    }
    if plan.target.insecure {
        client = client.danger_accept_invalid_certs(true);
    }
    let client = client
        .build()
        .map_err(|e| Error::msg(format!("cannot build the HTTP client: {e}")))?;
    if !simulated {
        runtime.block_on(async {
            tokio::select! {
                checked = preflight::check_server(&client, &headers, base, &url) => checked,
                // Stopped: the run writes its results without sending.
                () = shared.stop_signal.notified() => Ok(()),
            }
        })?;
    }
    Ok(Arc::new(exchange::Target {
        client,
        plain,
        url,
        headers,
        timeout: Some(plan.limits.timeout),
        idle_timeout: plan.limits.idle_timeout,
        max_answer_bytes: plan.limits.max_answer_bytes,
        open_files_limit: crate::io::raise_open_files_limit(),
        session_header: plan.body.session_header.clone(),
        endpoint: plan.body.endpoint,
        out_of_files: AtomicU8::new(0),
    }))
}
