//! Alibaba Bailian (Qwen) usage traces (alibaba-edu/qwen-bailian-usagetraces-anon):
//! JSONL with `chat_id`, `parent_chat_id` (-1 for a first turn),
//! `timestamp` (seconds from the trace start), `input_length`,
//! `output_length`, `type`, `turn` and `hash_ids` over 16-token blocks.
//!
//! A request's session is the first turn its parent chain leads to, in
//! whatever order the file lists them. Rows whose `hash_ids` are short of
//! what `input_length` needs are fitted with a warning, as AIPerf loads
//! them. The
//! 16-token blocks are re-blocked to the canonical 512: each run of 32 ids
//! becomes one block whose id hashes those ids chained with the previous
//! block's id, so equal 512-token prefixes keep equal ids. There are no
//! completion times, so no `delay`.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, block_ids, count, number, required};
use super::{Ctx, Head, Request, container, hashing};
use crate::error::{FieldError, Location, Result};
use crate::time;

/// Tokens per block in the source.
pub const SOURCE_BLOCK: u64 = 16;

/// Bailian rows link turns by `chat_id` and `parent_chat_id`.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && head.contains("\"parent_chat_id\"")
        && head.contains("\"chat_id\"")
        && !super::openai_batch::sniff(head)
}

/// Read a Bailian trace.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        let mut warning = None;
        match record(&obj, loc, &mut ctx.bailian_parents, &mut warning) {
            Ok(req) => {
                if let Some(w) = warning {
                    crate::cli::warn_at(loc, w);
                }
                ctx.push(req)
            }
            Err(e) => ctx.bad(e.at(loc)),
        }
    })
}

/// Give every turn the session of the first turn its parent chain leads
/// to, whatever the order of the file (a turn may come before its parent):
/// the sessions are joined on each request's chat id afterwards.
pub fn finish(ctx: &mut Ctx, _rate: Option<f64>) -> Result<()> {
    let parents = std::mem::take(&mut ctx.bailian_parents);
    let mut roots: HashMap<i64, i64> = HashMap::with_capacity(parents.len());
    for &chat in parents.keys() {
        let mut path = Vec::new();
        let mut at = chat;
        let root = loop {
            if let Some(&r) = roots.get(&at) {
                break r;
            }
            match parents.get(&at) {
                // A parent missing from the file stands for its session.
                Some(&p) if p >= 0 && path.len() <= parents.len() => {
                    path.push(at);
                    at = p;
                }
                _ => break at,
            }
        };
        roots.insert(at, root);
        for c in path {
            roots.insert(c, root);
        }
    }
    // A chat alone in its session is no session: the log names none, the
    // id is only its own.
    let mut sizes: HashMap<i64, u32> = HashMap::new();
    for &chat in parents.keys() {
        *sizes.entry(roots[&chat]).or_insert(0) += 1;
    }
    for (chat, root) in roots {
        if parents.contains_key(&chat) && sizes[&root] > 1 {
            ctx.trace_sessions
                .insert(chat.to_string(), root.to_string());
        }
    }
    Ok(())
}

fn chat_id(obj: &Object, field: &str) -> std::result::Result<i64, FieldError> {
    match obj.get(field) {
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64().expect("checked")),
        Some(Value::String(s)) if s.parse::<i64>().is_ok() => Ok(s.parse().expect("checked")),
        Some(v) => Err(FieldError::new(
            field,
            format!(
                "expected an integer id, found {}",
                crate::error::quote_value(&v.to_string())
            ),
        )),
        None => Err(FieldError::new(field, "is missing")),
    }
}

fn record(
    obj: &Object,
    loc: &Location,
    parents: &mut HashMap<i64, i64>,
    warning: &mut Option<String>,
) -> std::result::Result<Request, FieldError> {
    let chat = chat_id(obj, "chat_id")?;
    let parent = chat_id(obj, "parent_chat_id")?;
    let secs = required(number(obj, "timestamp")?, "timestamp")?;
    if secs < 0.0 {
        return Err(FieldError::new(
            "timestamp",
            format!("expected seconds ≥ 0, found {secs}"),
        ));
    }
    let start = time::seconds_to_ns(secs)
        .ok_or_else(|| FieldError::new("timestamp", format!("{secs} is out of range")))?;
    let input = required(count(obj, "input_length")?, "input_length")?;
    let output = required(count(obj, "output_length")?, "output_length")?;
    let ids = block_ids(obj, "hash_ids")?.unwrap_or_default();
    let want = input.div_ceil(SOURCE_BLOCK);
    let blocks = format!(
        "has {} block{}, but input_length {input} needs ceil({input} / {SOURCE_BLOCK}) = {want}",
        ids.len(),
        crate::text::plural(ids.len() as u64)
    );
    if ids.len() as u64 > want {
        return Err(FieldError::new("hash_ids", blocks));
    }
    if !ids.is_empty() && (ids.len() as u64) < want {
        // AIPerf loads such rows: the missing blocks are new content.
        *warning = Some(format!(
            "field `hash_ids`: {blocks}; the missing blocks are taken as content no other request shares"
        ));
    }
    parents.insert(chat, parent);

    let mut req = Request::new(loc.clone(), start);
    req.input_length = Some(input);
    req.output_length = output;
    req.id = Some(chat.to_string());
    // The session is known once every row is read (see `finish`).
    req.trace_id = Some(chat.to_string());
    if !ids.is_empty() {
        req.hashes = Some(hashing::from_source_blocks(
            &ids,
            SOURCE_BLOCK,
            ("input_length", input),
            0,
        )?);
    }
    Ok(req)
}
