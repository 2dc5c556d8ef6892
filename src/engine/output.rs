//! Where results go: a [`Sink`] the run is given (the NDJSON writer, a
//! caller's live fold, both), fed one result at a time, on the runtime's
//! thread when taking a result cannot block (a regular file), else on a
//! writer thread.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use super::shared::Shared;
use crate::cli;
use crate::error::{Error, Result};
use crate::io::Output;
use crate::result::{Measure, ResultRecord, Status};
use crate::run_info::RunInfo;

/// Where a run's results go, one at a time, in the order they are
/// written.
pub trait Sink: Send + 'static {
    /// Take one result. `Ok(true)` asks the run to stop as a first Ctrl-C
    /// does: nothing more is sent, requests in flight finish, the rest is
    /// given as `cancelled`, and the run ends as a success. An error
    /// (nobody reads the output any more) stops the run at once; no more
    /// results are given, and the run ends with it.
    fn take(&mut self, r: &ResultRecord) -> Result<bool>;

    /// After the last result: flush and close.
    fn finish(self: Box<Self>) -> Result<()>;

    /// Whether taking a result may wait for a reader (a pipe, a
    /// terminal): results are then handed to a thread of their own, so
    /// that sending never waits for them.
    fn may_block(&self) -> bool {
        false
    }

    /// The run's settings, once its server is known, before any result:
    /// a sink that writes results where a person keeps them keeps these
    /// beside them.
    fn settings(&mut self, _info: &RunInfo) {}
}

/// The result records as NDJSON: one line per result, flushed as it
/// comes, credentials redacted.
pub struct Ndjson {
    out: Output,
    path: Option<std::path::PathBuf>,
}

impl Ndjson {
    /// Results to `path` (`None` or `-`: standard output; `.gz`: gzip).
    pub fn open(path: Option<&std::path::Path>) -> Result<Ndjson> {
        let mut out = Output::open(path)?;
        out.set_line_flush(true);
        Ok(Ndjson {
            out,
            path: path.map(std::path::Path::to_path_buf),
        })
    }
}

impl Sink for Ndjson {
    fn take(&mut self, r: &ResultRecord) -> Result<bool> {
        let line = r.to_json_line();
        self.out.write_line(cli::redact(&line).as_bytes())?;
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.out.finish()
    }

    fn may_block(&self) -> bool {
        !self.out.is_file()
    }

    /// Beside the results file (or the file standard output is).
    fn settings(&mut self, info: &RunInfo) {
        info.write_beside(self.path.as_deref());
    }
}

/// `--keep`: the results to the output and to a file. The file is
/// written first, and an output that closes (nobody reads it any more)
/// stops nothing: the run goes on to its end in the file, and says how
/// many results the output missed.
pub struct Tee {
    out: Ndjson,
    kept: Ndjson,
    kept_path: std::path::PathBuf,
    /// Results written to the file only, once the output failed.
    missed: u64,
    /// Why the output failed.
    failed: Option<Error>,
}

impl Tee {
    pub fn new(out: Ndjson, kept: Ndjson, kept_path: &std::path::Path) -> Tee {
        Tee {
            out,
            kept,
            kept_path: kept_path.to_path_buf(),
            missed: 0,
            failed: None,
        }
    }
}

impl Sink for Tee {
    fn take(&mut self, r: &ResultRecord) -> Result<bool> {
        self.kept.take(r)?;
        if self.failed.is_none() {
            if let Err(e) = self.out.take(r) {
                self.failed = Some(e);
            }
        }
        if self.failed.is_some() {
            self.missed += 1;
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let Tee {
            out,
            kept,
            kept_path,
            missed,
            failed,
        } = *self;
        Box::new(kept).finish()?;
        let failed = match failed {
            Some(e) => Some(e),
            None => Box::new(out).finish().err(),
        };
        if let Some(e) = failed {
            // Nothing is lost: the file has every result.
            let why = if e.is_broken_pipe() {
                "the output closed".to_string()
            } else {
                e.message()
            };
            cli::warn(format!(
                "{why}: {missed} result{} went to {} only",
                crate::text::plural(missed),
                kept_path.display()
            ));
        }
        Ok(())
    }

    fn may_block(&self) -> bool {
        self.out.may_block() || self.kept.may_block()
    }

    fn settings(&mut self, info: &RunInfo) {
        self.kept.settings(info);
        self.out.settings(info);
    }
}

/// Both sinks, the first first: the second is given a result only once
/// the first took it.
impl<A: Sink, B: Sink> Sink for (A, B) {
    fn take(&mut self, r: &ResultRecord) -> Result<bool> {
        let stop = self.0.take(r)?;
        Ok(self.1.take(r)? || stop)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let (a, b) = *self;
        let first = Box::new(a).finish();
        let second = Box::new(b).finish();
        first.and(second)
    }

    fn may_block(&self) -> bool {
        self.0.may_block() || self.1.may_block()
    }

    fn settings(&mut self, info: &RunInfo) {
        self.0.settings(info);
        self.1.settings(info);
    }
}

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
                // A writer that panicked caught it and can go on.
                w.lock().unwrap_or_else(PoisonError::into_inner).write(r);
            }
            Results::Thread(tx) => {
                let _ = tx.send(r);
            }
        }
    }
}

/// Gives results to the sink, counts them, and stops the run if the sink
/// fails (the output closed) or asks to.
pub(super) struct ResultWriter {
    sink: Box<dyn Sink>,
    shared: Arc<Shared>,
    failure: Option<Error>,
    /// Results not written once the sink failed, the one it failed on too.
    lost: u64,
}

impl ResultWriter {
    pub(super) fn new(sink: Box<dyn Sink>, shared: Arc<Shared>) -> ResultWriter {
        ResultWriter {
            sink,
            shared,
            failure: None,
            lost: 0,
        }
    }

    /// Write one result; a panic while writing it stops the run (an
    /// internal error), and the result is written again in its simplest
    /// form, an `error` with its labels.
    pub(super) fn write(&mut self, mut r: ResultRecord) {
        if r.measure.status == Status::Cancelled {
            if let Some(what) = self.shared.internal.get() {
                r.measure.status = Status::Error;
                r.measure.error = Some(match r.measure.error.take() {
                    Some(e) => format!("{what}: {e}"),
                    None => what.clone(),
                });
            }
        }
        // The line is redacted whole below; the error first too, so that
        // a credential the server sent JSON-escaped (escaped twice in the
        // line) is hidden as well.
        if let Some(e) = &r.measure.error {
            if let std::borrow::Cow::Owned(hidden) = cli::redact(e) {
                r.measure.error = Some(hidden);
            }
        }
        let wrote = std::panic::catch_unwind(AssertUnwindSafe(|| self.write_one(&r)));
        if let Err(panic) = wrote {
            let what = super::internal::describe(&*panic);
            self.shared.fail(what.clone());
            let plain = ResultRecord {
                index: r.index,
                id: r.id.take(),
                session_id: r.session_id.take(),
                turn: r.turn,
                after: std::mem::take(&mut r.after),
                model: r.model.take(),
                scheduled_ms: r.scheduled_ms,
                sent_ms: r.sent_ms,
                start_time: std::mem::take(&mut r.start_time),
                input_length: r.input_length,
                output_length: r.output_length,
                observed_cached_tokens: r.observed_cached_tokens,
                warmup: r.warmup,
                shard: r.shard.take(),
                measure: Measure {
                    status: Status::Error,
                    error: Some(what),
                    ..Measure::default()
                },
            };
            // Counted once: the first try counted it.
            if self.failure.is_none() {
                if let Err(e) = self.sink.take(&plain) {
                    self.failure = Some(e);
                    self.lost += 1;
                }
            }
        }
    }

    fn write_one(&mut self, r: &ResultRecord) {
        let c = &self.shared.counters;
        if !r.warmup {
            c.done.fetch_add(1, Ordering::Relaxed);
            let counter = match r.measure.status {
                Status::Ok => &c.ok,
                Status::Error => &c.errors,
                Status::Timeout => &c.timeouts,
                Status::Cancelled => &c.cancelled,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        c.lengths.add(r);
        if self.failure.is_some() {
            self.lost += 1;
            return;
        }
        if !r.warmup {
            super::internal::fail_point(super::internal::Stage::Write, r.index);
        }
        match self.sink.take(r) {
            Err(e) => {
                // Nobody reads the results any more: stop the run at once.
                self.shared.output_closed.store(true, Ordering::SeqCst);
                self.shared.stop();
                let _ = self.shared.cancel.send(true);
                self.failure = Some(e);
                self.lost += 1;
            }
            Ok(true) if !self.shared.stopping.load(Ordering::SeqCst) => {
                self.shared.stopped_by_caller.store(true, Ordering::SeqCst);
                self.shared.stop();
            }
            Ok(_) => {}
        }
    }

    /// Close the sink. A run that lost results to a failed output does
    /// not end quietly: the error says how many.
    pub(super) fn finish(self) -> Result<()> {
        match self.failure {
            Some(e) => Err(lost(&e, self.lost)),
            None => self.sink.finish(),
        }
    }
}

/// The error of an output that failed with `e`, `n` results not written.
fn lost(e: &Error, n: u64) -> Error {
    let why = if e.is_broken_pipe() {
        "the output closed (nobody reads it any more)".to_string()
    } else {
        e.message()
    };
    Error::msg(format!(
        "{why}: {n} result{} could not be written; --keep FILE keeps every result on disk \
         as well",
        crate::text::plural(n)
    ))
}

/// Close the output once every result is written.
pub(super) fn finish_results(
    results: Results,
    thread: Option<thread::JoinHandle<Result<()>>>,
) -> Result<()> {
    match results {
        Results::Direct(w) => match Arc::try_unwrap(w) {
            Ok(w) => w
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .finish(),
            Err(_) => Err(Error::msg("the result writer is still in use")),
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
    let _caught = super::internal::caught_here();
    for r in rx {
        writer.write(r);
    }
    writer.finish()
}
