//! --dry-run: the schedule as JSON lines, nothing sent.

use serde_json::json;

use super::args::Args;
use super::feed::Feed;
use super::request::{BodyOptions, Prepared};
use super::schedule::{Pace, Plan, Schedule};
use crate::cli::{self, Outcome};
use crate::error::Result;
use crate::io::{InputSpec, Output};
use crate::result::round_us;

/// --dry-run: the schedule as JSON lines, nothing sent. Each record goes
/// through the run's own [`Schedule`] (no request ever completes), so what
/// is printed is what the run decides: due at a time, or after the
/// records it waits for. Warmup records, sent before the clock starts,
/// are not in it.
pub(super) fn dry_run(args: &Args, inputs: &[InputSpec], opts: &BodyOptions) -> Result<Outcome> {
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut feed = Feed::new(args, inputs, opts);
    let mut schedule: Schedule<Prepared> = Schedule::new(match args.concurrency {
        Some(workers) => Pace::Closed {
            workers: workers as usize,
        },
        None => Pace::Open {
            max_in_flight: None,
        },
    });
    let mut origin_set = false;
    while let Some(mut req) = feed.next(false)? {
        let warmup = feed.in_warmup();
        // What the line says of the request itself, before the schedule
        // takes it (without its body: only records waiting for others stay).
        let index = req.index;
        let mut about = serde_json::Map::new();
        for (k, v) in [
            ("id", &req.id),
            ("session_id", &req.session_id),
            ("model", &req.model),
        ] {
            if let Some(v) = v {
                about.insert(k.into(), json!(v));
            }
        }
        about.insert("input_length".into(), json!(req.input_length));
        about.insert("output_length".into(), json!(req.output_length));
        about.insert("stream".into(), json!(req.stream));
        about.insert("body_bytes".into(), json!(req.body.len()));
        if warmup {
            about.insert("warmup".into(), json!(true));
        }
        let plan = if warmup {
            None
        } else {
            if !origin_set && args.shard.is_some() {
                if let Some(ts) = feed.first_timestamp {
                    schedule.set_origin(ts);
                }
            }
            origin_set = true;
            req.body = bytes::Bytes::new();
            req.synthesized = None;
            let plan = schedule.push(req);
            for u in schedule.take_unknown() {
                cli::warn(format!(
                    "record {}: `after` names `{}`, which no earlier record of this run has \
                     (sliced away?): it is scheduled as if it had no such dependency",
                    u.key + 1,
                    u.id
                ));
            }
            // What is due by its time (or a free worker) is let go at
            // once, its slot freed without a completion (nothing completes
            // here), so that only records waiting for others are kept.
            while schedule.pop_due(f64::INFINITY).is_some() {
                schedule.complete(None, 0.0);
            }
            Some(plan)
        };
        let scheduled = match &plan {
            Some(Plan::At(at)) => Some(*at),
            _ => None,
        };
        if args
            .duration
            .is_some_and(|d| scheduled.is_some_and(|s| s >= d))
        {
            break;
        }
        let mut line = json!({
            "index": index,
            "scheduled_ms": scheduled.map(round_us),
        });
        let m = line.as_object_mut().expect("an object");
        match plan {
            Some(Plan::AfterTurn { delay }) => {
                m.insert("after_previous_turn_ms".into(), json!(delay));
            }
            Some(Plan::AfterIds { ids, delay }) => {
                m.insert("after".into(), json!(ids));
                m.insert("after_ms".into(), json!(delay));
            }
            _ => {}
        }
        m.extend(about);
        out.write_line(crate::cli::redact(&line.to_string()).as_bytes())?;
    }
    for w in feed.unit_warnings.take().unwrap_or_default() {
        cli::warn(w);
    }
    out.finish()?;
    Ok(Outcome::Success)
}
