//! --dry-run: the schedule as JSON lines, nothing sent.

use serde_json::json;

use super::feed::{Feed, Records};
use super::plan::Plan;
use super::request::Prepared;
use super::schedule::{self, Pace, Schedule};
use crate::cli;
use crate::error::Result;
use crate::io::Output;
use crate::result::round_us;

/// --dry-run: the schedule as JSON lines, nothing sent. Each record goes
/// through the run's own [`Schedule`] (no request ever completes), so what
/// is printed is what the run decides: due at a time, or after the
/// records it waits for. Warmup records, sent before the clock starts,
/// are not in it.
pub fn dry_run(plan: &Plan, records: impl Records, output: Option<&std::path::Path>) -> Result<()> {
    let api_key = std::env::var(&plan.target.api_key_env).ok();
    cli::hide_secrets(super::exchange::secrets(
        &plan.target.headers,
        None,
        api_key,
    ));
    let mut out = Output::open(output)?;
    let mut feed = Feed::new(plan, records);
    let mut schedule: Schedule<Prepared> = Schedule::new(match plan.pacing.pace {
        Pace::Closed { workers } => Pace::Closed { workers },
        Pace::Open { .. } => Pace::Open {
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
        // The size of what would go on the wire: an endpoint of another
        // shape than chat's (messages, responses) translates the body first.
        req.render(plan.body.endpoint);
        about.insert("body_bytes".into(), json!(req.wire().len()));
        if warmup {
            about.insert("warmup".into(), json!(true));
        }
        let planned = if warmup {
            None
        } else {
            if !origin_set && plan.pacing.shard.is_some() {
                if let Some(ts) = feed.first_timestamp {
                    schedule.set_origin(ts);
                }
            }
            origin_set = true;
            req.body = bytes::Bytes::new();
            req.wire = None;
            req.synthesized = None;
            let planned = schedule.push(req);
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
            Some(planned)
        };
        let scheduled = match &planned {
            Some(schedule::Plan::At(at)) => Some(*at),
            _ => None,
        };
        if plan
            .pacing
            .duration_ms
            .is_some_and(|d| scheduled.is_some_and(|s| s >= d))
        {
            break;
        }
        let mut line = json!({
            "index": index,
            "scheduled_ms": scheduled.map(round_us),
        });
        let m = line.as_object_mut().expect("an object");
        match planned {
            Some(schedule::Plan::AfterTurn { delay }) => {
                m.insert("after_previous_turn_ms".into(), json!(delay));
            }
            Some(schedule::Plan::AfterIds { ids, delay }) => {
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
    out.finish()
}
