//! Alibaba Bailian (Qwen) usage traces (alibaba-edu/qwen-bailian-usagetraces-anon):
//! JSONL with `chat_id`, `parent_chat_id` (-1 for a first turn),
//! `timestamp` (seconds from the trace start), `input_length`,
//! `output_length`, `type`, `turn` and `hash_ids` over 16-token blocks.
//!
//! A request's session is the first turn its parent chain leads to. The
//! 16-token blocks are re-blocked to the canonical 512: each run of 32 ids
//! becomes one block whose id hashes those ids chained with the previous
//! block's id, so equal 512-token prefixes keep equal ids. There are no
//! completion times, so no `delay`.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, count, number};
use super::{Ctx, Head, Request, container, hashing};
use crate::error::{FieldError, Location, Result};
use crate::hash::stable_hash;
use crate::time;

/// Tokens per block in the source.
pub const SOURCE_BLOCK: u64 = 16;

/// Read a Bailian trace.
/// Bailian rows link turns by `chat_id` and `parent_chat_id`.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && head.contains("\"parent_chat_id\"")
        && head.contains("\"chat_id\"")
        && !super::openai_batch::sniff(head)
}

pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        match record(&obj, loc, &mut ctx.bailian_roots) {
            Ok(req) => ctx.push(req),
            Err(e) => ctx.bad(e.at(loc)),
        }
    })
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
    roots: &mut HashMap<i64, i64>,
) -> std::result::Result<Request, FieldError> {
    let chat = chat_id(obj, "chat_id")?;
    let parent = chat_id(obj, "parent_chat_id")?;
    let secs =
        number(obj, "timestamp")?.ok_or_else(|| FieldError::new("timestamp", "is missing"))?;
    if secs < 0.0 {
        return Err(FieldError::new(
            "timestamp",
            format!("expected seconds ≥ 0, found {secs}"),
        ));
    }
    let start = time::seconds_to_ns(secs)
        .ok_or_else(|| FieldError::new("timestamp", format!("{secs} is out of range")))?;
    let input =
        count(obj, "input_length")?.ok_or_else(|| FieldError::new("input_length", "is missing"))?;
    let output = count(obj, "output_length")?
        .ok_or_else(|| FieldError::new("output_length", "is missing"))?;
    let ids: Vec<u64> = match obj.get("hash_ids") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    FieldError::new(
                        "hash_ids",
                        format!("element {i}: expected an integer ≥ 0, found {v}"),
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?,
        Some(v) => {
            return Err(FieldError::new(
                "hash_ids",
                format!(
                    "expected an array of integers, found {}",
                    crate::error::quote_value(&v.to_string())
                ),
            ));
        }
        None => Vec::new(),
    };
    let want = input.div_ceil(SOURCE_BLOCK);
    if !ids.is_empty() && ids.len() as u64 != want {
        return Err(FieldError::new(
            "hash_ids",
            format!(
                "has {} blocks, but input_length {input} needs ceil({input} / {SOURCE_BLOCK}) = {want}",
                ids.len()
            ),
        ));
    }
    let root = if parent < 0 {
        chat
    } else {
        roots.get(&parent).copied().unwrap_or(parent)
    };
    roots.insert(chat, root);

    let mut req = Request::new(loc.clone(), start);
    req.input_length = Some(input);
    req.output_length = output;
    req.id = Some(chat.to_string());
    req.session = Some(root.to_string());
    if !ids.is_empty() {
        req.hashes = Some(reblock(
            &ids,
            (hashing::BLOCK as u64 / SOURCE_BLOCK) as usize,
        ));
    }
    Ok(req)
}

/// Group `per` source ids into one block, chained with the previous one.
pub fn reblock(ids: &[u64], per: usize) -> Vec<u64> {
    let mut prev = 0u64;
    let mut bytes = Vec::with_capacity(per * 8);
    ids.chunks(per)
        .map(|group| {
            bytes.clear();
            for id in group {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            prev = stable_hash(prev ^ 0xb1, &bytes);
            prev
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::reblock;

    #[test]
    fn reblocking_keeps_shared_prefixes() {
        let a: Vec<u64> = (0..70).collect();
        let mut b = a[..64].to_vec();
        b.extend([999, 1000]);
        let (ra, rb) = (reblock(&a, 32), reblock(&b, 32));
        assert_eq!(ra.len(), 3);
        assert_eq!(ra[..2], rb[..2]);
        assert_ne!(ra[2], rb[2]);
        // One differing id in the first group changes every block.
        let mut c = a.clone();
        c[3] = 500;
        let rc = reblock(&c, 32);
        assert!(ra.iter().zip(&rc).all(|(x, y)| x != y));
    }
}
