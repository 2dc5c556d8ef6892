//! ServeGen offline (batch) traces (alibaba/ServeGen `data/offline/`): JSONL,
//! one request of a batch job per line, `request_id` (its place in the
//! job's input file), `type`, `input_length`, and either `hash_ids` over
//! 16-token blocks and `img_ids` (the content-hash traces a–c) or
//! `output_length` and `duration`, ms (the stat traces d–f).
//!
//! A batch has no arrival times: every record is at 0, or with `--rate R`
//! request N is at N / R seconds. `hash_ids` are re-blocked to 512 tokens
//! as Bailian's are. The content-hash traces have no output length: their
//! records ask for 1 token (the prefill alone; `trace-rescale
//! --min-output` asks for more). `duration` is kept as `observed.e2e_ms`.

use std::io::BufRead;
use std::sync::Arc;

use super::fields::{Object, block_ids, count, number, required};
use super::{Ctx, Head, Request, bailian, container, hashing};
use crate::error::{FieldError, Result};

/// ServeGen offline rows: `request_id` with `img_ids` or `duration`.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && head.contains("\"request_id\"")
        && head.contains("\"input_length\"")
        && head.contains_any(&["\"img_ids\"", "\"duration\""])
}

/// Read a ServeGen offline trace.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let rate = ctx.rate;
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        ctx.row(request(&obj, loc, rate), loc)
    })
}

fn request(
    obj: &Object,
    loc: &crate::error::Location,
    rate: Option<f64>,
) -> std::result::Result<Request, FieldError> {
    let n = required(count(obj, "request_id")?, "request_id")?;
    let input = required(count(obj, "input_length")?, "input_length")?;
    let start = rate.map_or(0, |r| (n as f64 * 1e9 / r).round() as i64);
    let mut req = Request::new(loc.clone(), start);
    req.id = Some(n.to_string());
    req.input_length = Some(input);
    req.output_length = count(obj, "output_length")?.unwrap_or(1);
    if let Some(ms) = number(obj, "duration")? {
        if ms < 0.0 {
            return Err(FieldError::new(
                "duration",
                format!("expected milliseconds ≥ 0, found {ms}"),
            ));
        }
        req.observed.e2e_ms = Some(ms);
    }
    if let Some(ids) = block_ids(obj, "hash_ids")? {
        req.hashes = Some(hashing::from_source_blocks(
            &ids,
            bailian::SOURCE_BLOCK,
            ("input_length", input),
            0,
        )?);
    }
    Ok(req)
}
