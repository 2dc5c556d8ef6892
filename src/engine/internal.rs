//! Internal errors (panics): caught where the engine's threads run, told
//! in one line, and turned into results, so that a bug loses no record's
//! line.
//!
//! A panic inside a request's exchange fails that request only. A panic
//! anywhere else (the dispatcher, the reader, the result writer, a
//! request's task outside its exchange) stops the run at once: every
//! record taken on and not yet written gets an `error` result naming the
//! internal error, the results are flushed, and the run ends with status 2.

use std::any::Any;

/// Install, once per process, the hook that keeps quiet on the engine's
/// threads (see [`crate::panics`]).
pub(super) fn install_hook() {
    crate::panics::install_hook();
}

/// Mark this thread's panics as the engine's to report, until the guard
/// is dropped.
pub(super) fn caught_here() -> crate::panics::CaughtHere {
    crate::panics::caught_here()
}

/// A caught panic on one line: `internal error at FILE:LINE: message`
/// (the location when the hook saw it on this thread).
pub fn describe(payload: &(dyn Any + Send)) -> String {
    crate::text::one_line(&crate::panics::describe(payload))
}

/// The error a run stopped by the internal error `what` ends with.
pub(super) fn stopped(what: &str) -> crate::error::Error {
    crate::error::Error::msg(format!(
        "{what}: the run stopped; every record taken on has its result, an `error` naming this \
         for those not answered (a bug: please report it)"
    ))
}

/// Where a test can provoke a panic.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Stage {
    /// The dispatcher, launching the record's request.
    Dispatch,
    /// The dispatcher, taking the record into its schedule.
    Accept,
    /// The reader, preparing the record.
    Read,
    /// The request's task, after its exchange.
    Task,
    /// The request's exchange.
    Exchange,
    /// The result writer, writing the record's result.
    Write,
    /// The metrics scraper, writing its N-th scrape (from 1).
    Scrape,
}

/// Debug builds only: `TRACEKIT_PANIC_AT=STAGE:N` panics at that stage
/// for the record of index N (stages: dispatch, accept, read, task,
/// exchange, write; scrape: the N-th scrape), so that tests can provoke an internal error through
/// the real binary. Release builds carry no such hook: this is empty.
#[inline(always)]
#[track_caller]
pub(super) fn fail_point(stage: Stage, index: u64) {
    #[cfg(debug_assertions)]
    {
        use std::sync::OnceLock;
        static AT: OnceLock<Option<(Stage, u64)>> = OnceLock::new();
        let at = AT.get_or_init(|| {
            let v = std::env::var("TRACEKIT_PANIC_AT").ok()?;
            let (stage, n) = v.split_once(':')?;
            let stage = match stage {
                "dispatch" => Stage::Dispatch,
                "accept" => Stage::Accept,
                "read" => Stage::Read,
                "task" => Stage::Task,
                "exchange" => Stage::Exchange,
                "write" => Stage::Write,
                "scrape" => Stage::Scrape,
                _ => return None,
            };
            Some((stage, n.parse().ok()?))
        });
        if *at == Some((stage, index)) {
            let name = format!("{stage:?}").to_lowercase();
            panic!("injected panic (TRACEKIT_PANIC_AT={name}:{index})");
        }
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = (stage, index);
    }
}
