//! OpenAI Batch API files: the input file (`custom_id`, `method`, `url`,
//! `body`) joined on `custom_id` with the output and error files
//! (`custom_id`, `response.status_code`, `response.body.usage`, `error`),
//! given in any order as separate inputs. Output lines are not in input
//! order; records keep the input file's order.
//!
//! A batch has no arrival times: every record is at 0, or with `--rate R`
//! record i is at i / R seconds. Lengths come from the output's usage;
//! without an output line, `output_length` is the request's max_tokens.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::{Object, string};
use super::{Ctx, Fate, Head, Prompt, Request, container};
use crate::error::{FieldError, Location, Result};

/// One `custom_id`: the request and its outcome, as far as read.
#[derive(Debug)]
struct Entry {
    loc: Location,
    body: Option<Value>,
    status: Option<u64>,
    error: bool,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// The lines read so far, joined on `custom_id`, in order of first
/// appearance (input lines count first when read first).
#[derive(Debug, Default)]
pub struct Batch {
    order: Vec<String>,
    entries: HashMap<String, Entry>,
}

/// Read one batch file (input, output or errors).
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        match line(&obj) {
            Ok(Some((id, update))) => {
                let batch = &mut ctx.batch;
                let entry = batch.entries.entry(id.clone()).or_insert_with(|| {
                    batch.order.push(id);
                    Entry {
                        loc: loc.clone(),
                        body: None,
                        status: None,
                        error: false,
                        prompt_tokens: None,
                        completion_tokens: None,
                    }
                });
                update(entry, loc);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => ctx.bad(e.at(loc)),
        }
    })
}

type Update = Box<dyn FnOnce(&mut Entry, &Location)>;

fn line(obj: &Object) -> std::result::Result<Option<(String, Update)>, FieldError> {
    let id = string(obj, "custom_id")?
        .ok_or_else(|| FieldError::new("custom_id", "is missing: batch lines are joined on it"))?;
    if let Some(body) = obj.get("body") {
        if !body.is_object() {
            return Err(FieldError::new(
                "body",
                format!(
                    "expected the request body (an object), found {}",
                    crate::error::quote_value(&body.to_string())
                ),
            ));
        }
        let body = body.clone();
        return Ok(Some((
            id,
            Box::new(move |e: &mut Entry, loc: &Location| {
                e.loc = loc.clone();
                e.body = Some(body);
            }),
        )));
    }
    if obj.contains_key("response") || obj.contains_key("error") {
        let response = obj.get("response").cloned().unwrap_or(Value::Null);
        let status = response.get("status_code").and_then(Value::as_u64);
        let error =
            obj.get("error").is_some_and(|e| !e.is_null()) || status.is_some_and(|s| s != 200);
        let usage = response
            .pointer("/body/usage")
            .cloned()
            .unwrap_or(Value::Null);
        let tokens = |k: &str| usage.get(k).and_then(Value::as_u64);
        let (prompt, completion) = (tokens("prompt_tokens"), tokens("completion_tokens"));
        return Ok(Some((
            id,
            Box::new(move |e: &mut Entry, _: &Location| {
                e.status = status;
                e.error = error;
                e.prompt_tokens = prompt;
                e.completion_tokens = completion;
            }),
        )));
    }
    Err(FieldError::record(
        "neither an input line (`body`) nor an output line (`response`, `error`)",
    ))
}

/// A batch line names its `custom_id`.
pub fn sniff(head: &Head) -> bool {
    head.is_json() && head.contains("\"custom_id\"")
}

/// Turn the joined lines into requests, `rate` per second or all at 0.
pub fn finish(ctx: &mut Ctx, rate: Option<f64>) -> Result<()> {
    let batch = std::mem::take(&mut ctx.batch);
    let mut entries = batch.entries;
    for (i, id) in batch.order.into_iter().enumerate() {
        let e = entries.remove(&id).expect("ordered ids have entries");
        let start = rate.map_or(0, |r| (i as f64 * 1e9 / r).round() as i64);
        let mut req = Request::new(e.loc, start);
        req.id = Some(id);
        let body = e.body.unwrap_or(Value::Null);
        req.model = body
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        req.max_tokens = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|k| body.get(k).and_then(Value::as_u64));
        req.input_length = e.prompt_tokens;
        req.observed.prompt_tokens = e.prompt_tokens;
        req.observed.completion_tokens = e.completion_tokens;
        req.output_length = match (e.completion_tokens, e.status) {
            (Some(n), _) => n,
            // Not run yet (no output line): the request's own limit.
            (None, None) if !e.error => req.max_tokens.unwrap_or(0),
            _ => 0,
        };
        if e.error {
            req.fate = Fate::Failed;
        }
        if let Some(Value::Array(messages)) = body.get("messages") {
            if !messages.is_empty() {
                req.prompt = Some(Box::new(Prompt {
                    messages: Some(Value::Array(messages.clone())),
                    text: None,
                    tools: body
                        .get("tools")
                        .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                        .cloned(),
                }));
            }
        } else if let Some(Value::String(text)) = body.get("prompt").or_else(|| body.get("input")) {
            req.prompt = Some(Box::new(Prompt {
                text: Some(text.clone()),
                ..Prompt::default()
            }));
        }
        ctx.push(req)?;
    }
    Ok(())
}
