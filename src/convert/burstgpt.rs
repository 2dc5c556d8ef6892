//! BurstGPT (HPMLL/BurstGPT): `Timestamp,Model,Request tokens,Response
//! tokens,Total tokens,Log Type`, and the v2.0 layout that adds `Session
//! ID` and `Elapsed time` (seconds from submission to the complete
//! response). Columns are found by name. A row with a `Session ID` (a
//! conversation-mode request, which carries the conversation so far) gets
//! `hash_ids` as a prefix chain: its prompt begins with the previous
//! prompt of its session, unless it is shorter than that one (see
//! [`super::prefix::Chains::grown`]).
//!
//! Timestamps are seconds from midnight of the first day (local time), not
//! epoch times: --absolute keeps that origin. `Response tokens` 0 marks a
//! failed request. The `Model` names (`ChatGPT`, `GPT-4`) are not ids a
//! server serves, so no `model` is written.

use std::io::BufRead;
use std::sync::Arc;

use super::fields::{cell_count, cell_number};
use super::{Ctx, Fate, Head, Request, container, prefix};
use crate::error::{FieldError, Result};
use crate::time;

struct Columns {
    timestamp: usize,
    request: usize,
    response: usize,
    session: Option<usize>,
    elapsed: Option<usize>,
}

/// BurstGPT's CSV header.
pub fn sniff(head: &Head) -> bool {
    head.has_columns(&["Timestamp", "Request tokens", "Response tokens"])
}

/// Read a BurstGPT CSV.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut chains = prefix::Chains::default();
    container::for_each_row(
        reader,
        source,
        ctx,
        |h| {
            Ok(Columns {
                timestamp: h.need("Timestamp")?,
                request: h.need("Request tokens")?,
                response: h.need("Response tokens")?,
                session: h.find("Session ID"),
                elapsed: h.find("Elapsed time"),
            })
        },
        |ctx, loc, c, row| {
            let parsed = (|| -> std::result::Result<_, FieldError> {
                let secs = cell_number("Timestamp", &row[c.timestamp])?;
                let start = time::seconds_to_ns(secs).ok_or_else(|| {
                    FieldError::new("Timestamp", format!("{secs} is out of range"))
                })?;
                let input = cell_count("Request tokens", &row[c.request])?;
                let output = cell_count("Response tokens", &row[c.response])?;
                let elapsed = match c.elapsed {
                    Some(i) if !row[i].trim().is_empty() => {
                        Some(cell_number("Elapsed time", &row[i])?)
                    }
                    _ => None,
                };
                Ok((start, input, output, elapsed))
            })();
            let (start, input, output, elapsed) = match parsed {
                Ok(v) => v,
                Err(e) => return ctx.bad(e.at(loc)),
            };
            let mut req = Request::new(loc.clone(), start);
            req.input_length = Some(input);
            req.output_length = output;
            if output == 0 {
                req.fate = Fate::Failed;
            }
            if let Some(secs) = elapsed.filter(|s| *s >= 0.0) {
                req.end_ns = time::seconds_to_ns(secs).map(|d| start + d);
                req.observed.e2e_ms = Some(secs * 1000.0);
            }
            if let Some(i) = c.session {
                let s = row[i].trim();
                if !s.is_empty() {
                    // A conversation's request carries the conversation so
                    // far: its prompt begins with the one before.
                    req.hashes = Some(chains.grown(s, input));
                    req.session = Some(s.to_string());
                }
            }
            ctx.push(req)
        },
    )
}
