//! --dry-run: the schedule as JSON lines, nothing sent.

use serde_json::json;

use super::args::Args;
use super::feed::Feed;
use super::request::BodyOptions;
use crate::cli::{self, Outcome};
use crate::error::Result;
use crate::io::{InputSpec, Output};
use crate::result::round_us;

/// --dry-run: the schedule as JSON lines, nothing sent.
pub(super) fn dry_run(args: &Args, inputs: &[InputSpec], opts: &BodyOptions) -> Result<Outcome> {
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut feed = Feed::new(args, inputs, opts);
    let mut sessions = std::collections::HashSet::new();
    let mut ids = std::collections::HashSet::new();
    let mut origin: Option<f64> = None;
    let mut last_ts = 0.0;
    while let Some(req) = feed.next(false)? {
        let warmup = feed.in_warmup();
        if !warmup && args.shard.is_some() {
            origin = origin.or(feed.first_timestamp);
        }
        let ts = req.timestamp.unwrap_or(last_ts);
        last_ts = ts;
        // As the schedule decides: the ids `after` names that an earlier
        // record has, else the previous turn of the session.
        let waits_for: Vec<&String> = req.after.iter().filter(|a| ids.contains(*a)).collect();
        for unknown in req.after.iter().filter(|a| !ids.contains(*a)) {
            cli::warn(format!(
                "record {}: `after` names `{unknown}`, which no earlier record of this run has \
                 (sliced away?): it is scheduled as if it had no such dependency",
                req.index + 1
            ));
        }
        let follows = match &req.session_id {
            Some(s) => !sessions.insert(s.clone()) && req.delay.is_some() && req.after.is_empty(),
            None => false,
        };
        if let Some(id) = &req.id {
            ids.insert(id.clone());
        }
        let depends = !waits_for.is_empty() || follows;
        let scheduled = if warmup || args.concurrency.is_some() || depends {
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
        if !waits_for.is_empty() && args.concurrency.is_none() {
            m.insert("after".into(), json!(waits_for));
            m.insert("after_ms".into(), json!(req.delay.unwrap_or(0.0)));
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
