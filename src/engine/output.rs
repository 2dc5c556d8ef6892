//! Where results go: written and flushed one by one, on the runtime's
//! thread for a regular file, else on a writer thread.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;

use super::{OnResult, Shared};
use crate::cli;
use crate::error::{Error, Result};
use crate::io::Output;
use crate::result::{ResultRecord, Status};

/// Where results go. Each is written and flushed as it comes.
#[derive(Clone)]
pub(super) enum Results {
    /// Written by the runtime's thread itself, which costs less than
    /// waking another thread for each: for a regular file, where a write
    /// never waits for a reader.
    Direct(Arc<Mutex<ResultWriter>>),
    /// Handed to a writer thread: a pipe or a terminal can block, and the
    /// sends must not wait for whoever reads it.
    Thread(Sender<ResultRecord>),
}

impl Results {
    pub(super) fn send(&self, r: ResultRecord) {
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
pub(super) struct ResultWriter {
    out: Output,
    shared: Arc<Shared>,
    failure: Option<Error>,
    on_result: Option<OnResult>,
}

impl ResultWriter {
    pub(super) fn new(
        mut out: Output,
        shared: Arc<Shared>,
        on_result: Option<OnResult>,
    ) -> ResultWriter {
        out.set_line_flush(true);
        ResultWriter {
            out,
            shared,
            failure: None,
            on_result,
        }
    }

    pub(super) fn write(&mut self, r: &ResultRecord) {
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
        let line = r.to_json_line();
        if let Err(e) = self.out.write_line(cli::redact(&line).as_bytes()) {
            // Nobody reads the results any more: stop the run at once.
            self.shared.output_closed.store(true, Ordering::SeqCst);
            self.shared.stop();
            let _ = self.shared.cancel.send(true);
            self.failure = Some(e);
            return;
        }
        if let Some(hook) = &mut self.on_result {
            if hook(r) && !self.shared.stopping.load(Ordering::SeqCst) {
                self.shared.stopped_by_caller.store(true, Ordering::SeqCst);
                self.shared.stop();
            }
        }
    }

    pub(super) fn finish(self) -> Result<()> {
        match self.failure {
            Some(e) => Err(e),
            None => self.out.finish(),
        }
    }
}

/// Close the output once every result is written.
pub(super) fn finish_results(
    results: Results,
    thread: Option<thread::JoinHandle<Result<()>>>,
) -> Result<()> {
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
pub(super) fn write_results(rx: Receiver<ResultRecord>, mut writer: ResultWriter) -> Result<()> {
    for r in rx {
        writer.write(&r);
    }
    writer.finish()
}
