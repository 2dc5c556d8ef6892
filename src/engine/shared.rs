//! What the engine's threads share during one run: the counters, the stop
//! signal (a first Ctrl-C, a closed output, the caller's sink, an early
//! stop) and how the run was stopped. Each run has its own: nothing here
//! is global to the process, so that one process can run the engine
//! several times (trace-sweep).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::abort::Fate;
use crate::cli;

/// Counters for progress and the final line.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) sent: AtomicU64,
    pub(super) done: AtomicU64,
    pub(super) ok: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) timeouts: AtomicU64,
    pub(super) cancelled: AtomicU64,
    /// Last dispatch lag, µs.
    pub(super) lag_us: AtomicU64,
    /// Records to send, once known (0 until then).
    pub(super) total: AtomicU64,
    /// When the last timed request is due, ms after the start, once the
    /// whole input is read (open loop only): the progress bar's length.
    pub(super) schedule_ms: OnceLock<f64>,
    /// Until then, what the first and last lines of a plain file say.
    pub(super) schedule_estimate_ms: OnceLock<f64>,
    /// A token count beyond what a summary takes was written as null (and
    /// said once).
    pub(super) huge_counts: AtomicBool,
    /// The prompt lengths the server counted against those asked.
    pub(super) lengths: super::lengths::Lengths,
}

/// What the runtime's tasks and the signal handler tell the dispatcher.
pub(super) enum Control {
    /// A request completed.
    Done {
        key: u64,
        id: Option<String>,
        session: Option<String>,
        /// Its conversation, for the turns that may continue it, and its
        /// prompt's and whole length in tokens.
        conversation: Option<(Vec<u8>, u64, u64)>,
        at: Instant,
        lag_ms: f64,
        warmup: bool,
        fate: Fate,
    },
    /// Stop sending (Ctrl-C, or the output closed).
    Stop,
}

/// State every thread of one run shares.
pub(super) struct Shared {
    pub(super) counters: Counters,
    /// Set by Ctrl-C or a closed output: no more requests are sent.
    pub(super) stopping: AtomicBool,
    /// The output could not be written (a closed pipe).
    pub(super) output_closed: AtomicBool,
    /// Tells tasks in flight to give up.
    pub(super) cancel: tokio::sync::watch::Sender<bool>,
    /// A second signal came: what is left to read is read no further.
    pub(super) second_signal: tokio::sync::watch::Sender<bool>,
    /// The progress bar, on a terminal.
    pub(super) bar: Option<indicatif::ProgressBar>,
    pub(super) control: tokio::sync::mpsc::UnboundedSender<Control>,
    /// Wakes the dispatcher when it is not listening to `control`.
    pub(super) stop_signal: tokio::sync::Notify,
    /// The caller's sink stopped the run.
    pub(super) stopped_by_caller: AtomicBool,
    /// The signal that stopped the run (0: none).
    pub(super) stopped_by: AtomicI32,
    /// The internal error (a panic) that stopped the run, on one line.
    pub(super) internal: OnceLock<String>,
}

impl Shared {
    pub(super) fn new(
        control: tokio::sync::mpsc::UnboundedSender<Control>,
        bar: Option<indicatif::ProgressBar>,
    ) -> Shared {
        let (cancel, _) = tokio::sync::watch::channel(false);
        let (second_signal, _) = tokio::sync::watch::channel(false);
        Shared {
            counters: Counters::default(),
            stopping: AtomicBool::new(false),
            output_closed: AtomicBool::new(false),
            cancel,
            second_signal,
            bar,
            control,
            stop_signal: tokio::sync::Notify::new(),
            stopped_by_caller: AtomicBool::new(false),
            stopped_by: AtomicI32::new(0),
            internal: OnceLock::new(),
        }
    }

    /// Print on standard error, under the progress bar if there is one.
    pub(super) fn print(&self, f: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    pub(super) fn stop(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            let _ = self.control.send(Control::Stop);
            self.stop_signal.notify_one();
        }
    }

    /// An internal error (`what`, from [`super::internal::describe`]):
    /// stop at once, as a second Ctrl-C does; from now on a result the
    /// stop cuts short is an `error` naming it. The first one is the run's.
    pub(super) fn fail(&self, what: String) {
        let _ = self.internal.set(what);
        self.stop();
        let _ = self.cancel.send(true);
    }

    /// The signal that stopped the run, if one did.
    pub(super) fn signal(&self) -> Option<i32> {
        match self.stopped_by.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP, as they come. Listening replaces their
/// default action (ending the process) from the moment it is created.
pub(super) struct StopSignals(Vec<(i32, tokio::signal::unix::Signal)>);

impl StopSignals {
    /// Listen from now on (inside a runtime).
    pub(super) fn new() -> StopSignals {
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
        match select_all(waits).await {
            Some(n) => n,
            None => std::future::pending().await,
        }
    }
}

/// The first of `futures` to finish; `None` when there is none.
async fn select_all<F: std::future::Future<Output = i32> + Unpin>(
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
/// flight `grace`, then cancel them. A second one: cancel at once, and
/// read no more input (an input file is read on to its end until then).
pub(super) async fn on_ctrl_c(
    mut signals: StopSignals,
    shared: &Shared,
    grace: Duration,
    quiet: bool,
) {
    let sig = signals.recv().await;
    shared.stopped_by.store(sig, Ordering::SeqCst);
    shared.stop();
    if !quiet {
        let grace = crate::duration::human(grace.as_secs_f64() * 1000.0);
        shared.print(|| {
            cli::note(format!(
                "interrupted: sending stopped; waiting up to {grace} for requests in flight (Ctrl-C again to stop now)"
            ))
        });
    }
    let second = tokio::select! {
        () = tokio::time::sleep(grace) => false,
        _ = signals.recv() => true,
    };
    let _ = shared.cancel.send(true);
    if !second {
        signals.recv().await;
    }
    let _ = shared.second_signal.send(true);
}
