//! `trace-sim --offline`: a trace run against the model in virtual time.
//! No server and no clock: the replay engine's own schedule decides when
//! each record is due (timestamps, sessions, `after`, `delay`), the batch
//! model when its tokens come, and each request ends as the result line
//! trace-replay would have written.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use crate::api::Endpoint;
use crate::cli::Outcome;
use crate::engine::Records;
use crate::engine::exchange::skeleton;
use crate::engine::request::{BodyOptions, Prepared, outline};
use crate::engine::schedule::{Completed, Pace, Plan, Schedule};
use crate::error::{FieldError, Result};
use crate::record::{Record, Speedup};
use crate::result::{ResultRecord, Status, round_us};
use crate::simulator::batch::{Batch, Event, Job};
use crate::simulator::profile::Profile;

/// Output tokens of a record that asks for none: what a server gives
/// without `max_tokens` (and trace-sim's answer then).
const DEFAULT_OUTPUT: u64 = 16;

/// Absolute epoch timestamps start here (ms): 1973. Below it, a trace's
/// timestamps are taken as relative, and the run starts at the epoch.
const EPOCH_MS: f64 = 1.0e11;

/// A request in the batch.
struct Pending {
    req: Prepared,
    scheduled: f64,
    sent: f64,
    prompt: u64,
    first: Option<f64>,
    last: f64,
    itl: Vec<f64>,
}

/// Takes each result as it completes; `Ok(true)` asks the run to stop, as
/// a replay's [`crate::engine::Sink`] does: nothing more is sent, the
/// requests in the batch finish, the rest are written `cancelled`.
pub type Emit<'a> = &'a mut dyn FnMut(&ResultRecord) -> Result<bool>;

/// What an offline run needs besides the profile.
pub struct Run<'a> {
    pub profile: Profile,
    /// `--model`: named in every result, as trace-replay's `--model` is.
    pub model: Option<String>,
    /// Timestamps and delays divided by this, as trace-rescale --speed
    /// divides them (trace-sweep's runs); 1 leaves them.
    pub speed: f64,
    pub emit: Emit<'a>,
    /// The records are in memory: on Ctrl-C, those not read yet are
    /// written `cancelled` too.
    pub in_memory: bool,
    /// Set by Ctrl-C: stop, writing what is left as cancelled.
    pub stop: Arc<AtomicBool>,
}

/// Set the flag it returns on Ctrl-C, from a thread of its own: an
/// offline run checks it between steps.
pub fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
                flag.store(true, Ordering::Relaxed);
            }
        });
    stop
}

/// Run every record of `records` through the model, giving one result per
/// record as it completes. Interrupted, what was not done is written as
/// `cancelled` and the outcome says so.
pub fn run(records: &mut dyn Records, run: Run<'_>) -> Result<Outcome> {
    let opts = BodyOptions {
        endpoint: Endpoint::Chat,
        model: run.model.clone(),
        model_map: Vec::new(),
        stream: true,
        ignore_eos: false,
        min_tokens: false,
        extra: serde_json::Map::new(),
        session_header: None,
        live_answers: false,
    };
    let block_size = run.profile.block_size;
    let mut batch = Batch::new(run.profile);
    let mut schedule: Schedule<Prepared> = Schedule::new(Pace::Open {
        max_in_flight: None,
    });
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut turns: HashMap<String, u64> = HashMap::new();
    let mut events = Vec::new();
    let mut index = 0u64;
    let mut eof = false;
    // The due time of the last record read by its timestamp.
    let mut read_to = f64::NEG_INFINITY;
    let mut origin: Option<SystemTime> = None;
    let mut speedup = (run.speed != 1.0).then(|| Speedup::new(run.speed));
    let out = run.emit;
    // The results asked the run to stop: the batch finishes, nothing more
    // is sent.
    let mut winding_down = false;
    loop {
        if run.stop.load(Ordering::Relaxed) {
            // Records in memory end; a pipe might not: its unread records
            // are left, as they were never taken on.
            let rest = match run.in_memory {
                true => rest_of(records, index, speedup.as_mut(), &opts)?,
                false => Vec::new(),
            };
            let mut left = schedule.drain();
            left.extend(rest);
            return cancel(out, left, pending, origin);
        }
        // Read on until the records read reach past the next thing to do:
        // a later record (in timestamp order) cannot come before it.
        while !eof {
            let next = earliest(schedule.next_due(), batch.next_end());
            if next.is_some_and(|t| t < read_to) {
                break;
            }
            let Some((loc, rec)) = records.next_record()? else {
                eof = true;
                break;
            };
            let mut rec = rec?;
            if let Some(scale) = &mut speedup {
                rescale(scale, &mut rec).map_err(|e| e.at(&loc))?;
            }
            let mut req = outline(&rec, index, &opts).map_err(|e| e.at(&loc))?;
            let blocks = rec.hash_ids().map_err(|e| e.at(&loc))?.unwrap_or_default();
            if origin.is_none() {
                let ts = req.timestamp.unwrap_or(0.0);
                let start = if ts >= EPOCH_MS { ts } else { 0.0 };
                origin = Some(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(start / 1000.0));
            }
            if let Some(s) = &req.session_id {
                let n = turns.entry(s.clone()).or_insert(0);
                *n += 1;
                req.turn = Some(*n);
            }
            let prompt = req.input_length.unwrap_or(blocks.len() as u64 * block_size);
            jobs.insert(
                index,
                Job {
                    key: index,
                    prompt,
                    output: req.output_length.unwrap_or(DEFAULT_OUTPUT),
                    blocks,
                    known_cached: 0,
                },
            );
            if let Plan::At(due) = schedule.push(req) {
                read_to = due;
            }
            // An `after` id no earlier record has: scheduled without it,
            // as trace-replay does.
            schedule.take_unknown();
            index += 1;
        }
        let due = schedule.next_due();
        let end = batch.next_end();
        match (due, end) {
            (Some(d), e) if e.is_none_or(|e| d < e) => {
                let Some((scheduled, req)) = schedule.pop_due(d) else {
                    continue;
                };
                let job = jobs.remove(&req.index).expect("read with its job");
                let prompt = job.prompt;
                batch.arrive(d, job);
                pending.insert(
                    req.index,
                    Pending {
                        req,
                        scheduled,
                        sent: d,
                        prompt,
                        first: None,
                        last: d,
                        itl: Vec::new(),
                    },
                );
            }
            (_, Some(e)) => {
                events.clear();
                batch.advance(e, &mut events);
                for ev in &events {
                    if let Some(done) = take(&mut pending, ev) {
                        schedule.complete(
                            Some(Completed {
                                key: done.index,
                                id: done.id.as_deref(),
                                session: done.session_id.as_deref(),
                            }),
                            ev.at,
                        );
                        if out(&finished(done, origin))? && !winding_down {
                            winding_down = true;
                            let now = ev.at;
                            unsent(out, schedule.drain(), now, origin)?;
                            let rest = rest_of(records, index, speedup.as_mut(), &opts)?;
                            unsent(out, rest, now, origin)?;
                            eof = true;
                        }
                    }
                }
            }
            _ if eof => break,
            _ => {}
        }
    }
    Ok(Outcome::Success)
}

/// Scale one record's timestamp and delay; the error names the speed.
fn rescale(scale: &mut Speedup, rec: &mut Record) -> std::result::Result<(), FieldError> {
    let speed = scale.speed;
    let at_speed = |e: FieldError| FieldError::new(e.field, format!("at speed {speed}: {}", e.msg));
    let timestamp = rec.timestamp().map_err(at_speed)?;
    scale.apply(rec, timestamp).map_err(at_speed)?;
    Ok(())
}

/// The records not read yet, outlined (numbered from `index`), for their
/// `cancelled` results.
fn rest_of(
    records: &mut dyn Records,
    mut index: u64,
    mut speedup: Option<&mut Speedup>,
    opts: &BodyOptions,
) -> Result<Vec<(Option<f64>, Prepared)>> {
    let mut rest = Vec::new();
    while let Some((loc, rec)) = records.next_record()? {
        let mut rec = rec?;
        if let Some(scale) = speedup.as_deref_mut() {
            rescale(scale, &mut rec).map_err(|e| e.at(&loc))?;
        }
        let req = outline(&rec, index, opts).map_err(|e| e.at(&loc))?;
        rest.push((req.timestamp, req));
        index += 1;
    }
    Ok(rest)
}

/// `cancelled` results, at `now`, for requests never sent once the run
/// was stopped, as trace-replay writes them.
fn unsent(
    out: Emit<'_>,
    left: Vec<(Option<f64>, Prepared)>,
    now: f64,
    origin: Option<SystemTime>,
) -> Result<()> {
    for (due, req) in left {
        let mut r = skeleton(
            &req,
            round_us(due.unwrap_or(now)),
            round_us(now),
            start_time(origin, now),
        );
        r.measure.error = Some("not sent: the run was stopped".into());
        out(&r)?;
    }
    Ok(())
}

/// The earlier of two times, either may be unknown.
fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A request's result with its measures, ready to write.
struct Done {
    index: u64,
    id: Option<String>,
    session_id: Option<String>,
    result: ResultRecord,
}

/// Account for one event; the request's result when it is done.
fn take(pending: &mut HashMap<u64, Pending>, ev: &Event) -> Option<Done> {
    let p = pending.get_mut(&ev.key)?;
    if ev.tokens <= 1 {
        p.first = Some(ev.at);
    } else {
        p.itl.push(round_us(ev.at - p.last));
    }
    p.last = ev.at;
    if !ev.done {
        return None;
    }
    let p = pending.remove(&ev.key)?;
    let mut r = skeleton(
        &p.req,
        round_us(p.scheduled),
        round_us(p.sent),
        String::new(),
    );
    let m = &mut r.measure;
    m.ttft_ms = p.first.map(|f| round_us(f - p.sent));
    m.first_chunk_ms = m.ttft_ms;
    m.e2e_ms = Some(round_us(ev.at - p.sent));
    m.itl_ms = p.itl;
    m.prompt_tokens = Some(p.prompt);
    m.completion_tokens = Some(ev.tokens);
    m.cached_tokens = Some(ev.cached);
    m.finish_reason = Some("length".into());
    m.status = Status::Ok;
    m.http_status = Some(200);
    Some(Done {
        index: p.req.index,
        id: p.req.id,
        session_id: p.req.session_id,
        result: r,
    })
}

/// A finished result, its start time on the virtual clock.
fn finished(mut done: Done, origin: Option<SystemTime>) -> ResultRecord {
    done.result.start_time = start_time(origin, done.result.sent_ms);
    done.result
}

fn start_time(origin: Option<SystemTime>, sent_ms: f64) -> String {
    let at = origin.unwrap_or(SystemTime::UNIX_EPOCH) + Duration::from_secs_f64(sent_ms / 1000.0);
    crate::time::rfc3339(at)
}

/// Ctrl-C: every request in the batch or not yet sent ends `cancelled`,
/// as trace-replay's do.
fn cancel(
    out: Emit<'_>,
    unsent: Vec<(Option<f64>, Prepared)>,
    pending: HashMap<u64, Pending>,
    origin: Option<SystemTime>,
) -> Result<Outcome> {
    let mut left: Vec<(f64, f64, Prepared)> = pending
        .into_values()
        .map(|p| (p.scheduled, p.sent, p.req))
        .collect();
    left.sort_by_key(|(_, _, r)| r.index);
    for (scheduled, sent, req) in left {
        let r = skeleton(
            &req,
            round_us(scheduled),
            round_us(sent),
            start_time(origin, sent),
        );
        out(&r)?;
    }
    for (due, req) in unsent {
        let due = round_us(due.unwrap_or(0.0));
        let r = skeleton(&req, due, due, start_time(origin, due));
        out(&r)?;
    }
    Ok(Outcome::Interrupted)
}
