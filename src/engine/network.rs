//! The network executor: each request sent to a server in a task of its
//! own on the run's runtime, timed on the wall clock (it times a real
//! server), its result written and its completion told to the dispatcher.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

use futures_util::FutureExt;

use super::abort::Fate;
use super::conversation;
use super::dispatch::ms_between;
use super::exchange::{self, Target, skeleton};
use super::internal::{self, Stage};
use super::output::Results;
use super::request::Prepared;
use super::shared::{Control, Shared};
use crate::cli;
use crate::result::{Status, round_us};

/// A request to send, and what its task needs.
pub(super) struct Launch {
    pub(super) req: Prepared,
    pub(super) scheduled_ms: f64,
    pub(super) warmup: bool,
    /// The run's start.
    pub(super) origin: Instant,
    pub(super) shared: Arc<Shared>,
    pub(super) target: Arc<Target>,
    pub(super) results: Results,
    pub(super) cancel: tokio::sync::watch::Receiver<bool>,
    pub(super) shard: Option<String>,
}

/// Start the request's task; it runs as soon as the dispatcher waits.
pub(super) fn spawn(launch: Launch) {
    let Launch {
        mut req,
        scheduled_ms,
        warmup,
        origin,
        shared,
        target,
        results,
        mut cancel,
        shard,
    } = launch;
    tokio::spawn(async move {
        // Before the clock starts: translating is the client's time.
        req.render(target.endpoint);
        let sent = Instant::now();
        let sent_ms = ms_between(origin, sent);
        let lag_ms = sent_ms - scheduled_ms;
        let mut written = false;
        let work = async {
            // Formatted once the answer is in: off the send path.
            let wall_sent = SystemTime::now();
            // The result before the answer; again if the exchange fails.
            let fresh = || {
                let mut r = skeleton(
                    &req,
                    round_us(scheduled_ms),
                    round_us(sent_ms),
                    String::new(),
                );
                r.warmup = warmup;
                r.shard = shard.clone();
                r
            };
            let result = fresh();
            shared
                .counters
                .lag_us
                .store((lag_ms.max(0.0) * 1000.0) as u64, Ordering::Relaxed);
            let cancelled = async move {
                if cancel.wait_for(|c| *c).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            // Boxed: the exchange's state is most of the task's size,
            // and a task is moved whole several times on its way
            // through the runtime.
            let exchange = Box::pin(exchange::send(&target, &req, result, sent, cancelled));
            // A bug in the exchange fails this request only.
            let (mut result, transcript) = exchange::or_error_result(exchange, fresh).await;
            if result.measure.status == Status::Error
                && result
                    .measure
                    .error
                    .as_deref()
                    .is_some_and(|e| e.starts_with(exchange::INTERNAL_ERROR))
            {
                let e = result.measure.error.clone().unwrap_or_default();
                shared.print(|| {
                    cli::warn(format!(
                        "record {}: {e} (its result is an error; the run goes on)",
                        req.index + 1
                    ))
                });
            }
            result.start_time = crate::time::rfc3339(wall_sent);
            if let Some((field, n)) = result.measure.drop_huge_counts() {
                if !shared.counters.huge_counts.swap(true, Ordering::Relaxed) {
                    shared.print(|| {
                        cli::warn(format!(
                            "record {}: the server reported `usage.{field}` {n}, over the \
                             2^32 a summary takes: written as null (and so for any later \
                             count beyond it)",
                            req.index + 1
                        ))
                    });
                }
            }
            internal::fail_point(Stage::Task, req.index);
            // What a later turn continues: the messages sent, the answer.
            let conversation = match (req.keep, req.messages_span) {
                (true, Some((start, end))) => {
                    let answer = transcript.and_then(|t| {
                        conversation::answer_of(t, req.index, |w| shared.print(|| cli::warn(w)))
                    });
                    let messages = conversation::continued(&req.body[start..end], answer.as_ref());
                    let prompt = req.input_length.unwrap_or(0);
                    let tokens =
                        prompt.saturating_add(result.measure.completion_tokens.unwrap_or(0));
                    Some((messages, prompt, tokens))
                }
                _ => None,
            };
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
            let fate = match result.measure.status {
                Status::Ok => Fate::Ok,
                Status::Cancelled => Fate::Cancelled,
                Status::Error | Status::Timeout => Fate::Failed {
                    error: result.measure.error.clone().unwrap_or_default(),
                    http_status: result.measure.http_status,
                },
            };
            written = true;
            results.send(result);
            (conversation, fate)
        };
        // A bug past the exchange stops the run, and this request
        // still leaves its line.
        let (conversation, fate) = match AssertUnwindSafe(work).catch_unwind().await {
            Ok(done) => done,
            Err(panic) => {
                let what = internal::describe(&*panic);
                shared.fail(what.clone());
                if !written {
                    let mut r = skeleton(
                        &req,
                        round_us(scheduled_ms),
                        round_us(sent_ms),
                        crate::time::rfc3339(SystemTime::now()),
                    );
                    r.warmup = warmup;
                    r.shard = shard;
                    r.measure.status = Status::Error;
                    r.measure.error = Some(what.clone());
                    results.send(r);
                }
                let fate = Fate::Failed {
                    error: what,
                    http_status: None,
                };
                (None, fate)
            }
        };
        let _ = shared.control.send(Control::Done {
            key: req.index,
            id: req.id,
            session: req.session_id,
            conversation,
            at: Instant::now(),
            lag_ms,
            warmup,
            fate,
        });
    });
}
