//! --dry-run: the schedule as JSON lines, nothing sent.

use serde_json::json;

use super::args::Args;
use super::feed::Feed;
use super::request::{BodyOptions, Prepared};
use super::schedule::{Pace, Plan, Schedule, Turn};
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
    let mut schedule: Schedule<Planned> = Schedule::new(match args.concurrency {
        Some(workers) => Pace::Closed {
            workers: workers as usize,
        },
        None => Pace::Open {
            max_in_flight: None,
        },
    });
    let mut origin_set = false;
    while let Some(req) = feed.next(false)? {
        let warmup = feed.in_warmup();
        let plan = if warmup {
            None
        } else {
            if !origin_set && args.shard.is_some() {
                if let Some(ts) = feed.first_timestamp {
                    schedule.set_origin(ts);
                }
            }
            origin_set = true;
            let plan = schedule.push(Planned::of(&req));
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
            "index": req.index,
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
        out.write_line(crate::cli::redact(&line.to_string()).as_bytes())?;
    }
    for w in feed.unit_warnings.take().unwrap_or_default() {
        cli::warn(w);
    }
    out.finish()?;
    Ok(Outcome::Success)
}

/// What the schedule needs of a request, without its body.
struct Planned {
    index: u64,
    timestamp: Option<f64>,
    id: Option<String>,
    session_id: Option<String>,
    delay: Option<f64>,
    after: Vec<String>,
}

impl Planned {
    fn of(req: &Prepared) -> Planned {
        Planned {
            index: req.index,
            timestamp: req.timestamp,
            id: req.id.clone(),
            session_id: req.session_id.clone(),
            delay: req.delay,
            after: req.after.clone(),
        }
    }
}

impl Turn for Planned {
    fn key(&self) -> u64 {
        self.index
    }
    fn timestamp(&self) -> Option<f64> {
        self.timestamp
    }
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn session(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
    fn delay(&self) -> Option<f64> {
        self.delay
    }
    fn after(&self) -> &[String] {
        &self.after
    }
}
