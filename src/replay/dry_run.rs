//! --dry-run: the schedule as JSON lines, nothing sent.

use serde_json::json;

use super::args::Args;
use super::feed::Feed;
use super::request::BodyOptions;
use crate::cli::Outcome;
use crate::error::Result;
use crate::io::{InputSpec, Output};
use crate::result::round_us;

/// --dry-run: the schedule as JSON lines, nothing sent.
pub(super) fn dry_run(args: &Args, inputs: &[InputSpec], opts: &BodyOptions) -> Result<Outcome> {
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut feed = Feed::new(args, inputs, opts);
    let mut sessions = std::collections::HashSet::new();
    let mut origin: Option<f64> = None;
    let mut last_ts = 0.0;
    while let Some(req) = feed.next(false)? {
        let warmup = feed.in_warmup();
        if !warmup && args.shard.is_some() {
            origin = origin.or(feed.first_timestamp);
        }
        let ts = req.timestamp.unwrap_or(last_ts);
        last_ts = ts;
        let follows = match &req.session_id {
            Some(s) => !sessions.insert(s.clone()) && req.delay.is_some(),
            None => false,
        };
        let scheduled = if warmup || args.concurrency.is_some() || follows {
            None
        } else {
            Some(ts - *origin.get_or_insert(ts))
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
        if follows {
            m.insert("after_previous_turn_ms".into(), json!(req.delay));
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
    out.finish()?;
    Ok(Outcome::Success)
}
