//! ShareGPT conversations, the JSON most serving benchmarks load (vLLM's
//! `bench serve --dataset-name sharegpt` reads ShareGPT_V3's): an array
//! (or JSONL) of `{"id", "conversations": [{"from", "value"}, ...]}`, `from`
//! being `human`, `gpt` or `system`.
//!
//! Each conversation is a session and each answer (`gpt`) one request: its
//! prompt is every message before it, its output the answer's tokens
//! (counted with --tokenizer). The file has no times: conversation i starts
//! at 0, or at i / R seconds with `--rate R`, and each later turn is sent
//! as soon as the previous one is answered (`delay` 0).

use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Value, json};

use super::fields::Object;
use super::{Ctx, Head, Prompt, Request, container};
use crate::error::{FieldError, Result};

/// ShareGPT's speakers in OpenAI's roles.
fn role(from: &str) -> Option<&'static str> {
    match from {
        "human" | "user" => Some("user"),
        "gpt" | "chatgpt" | "bard" | "bing" | "assistant" => Some("assistant"),
        "system" => Some("system"),
        _ => None,
    }
}

/// A conversation list whose entries name their speaker with `from`.
pub fn sniff(head: &Head) -> bool {
    head.is_json()
        && head.contains("\"conversations\"")
        && head.contains_any(&["\"from\": \"human\"", "\"from\":\"human\""])
}

/// Read one file of conversations.
pub fn read(reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    container::for_each_object(reader, source, ctx, None, |ctx, loc, obj| {
        let n = ctx.conversations;
        ctx.conversations += 1;
        let turns = match turns(&obj) {
            Ok(t) => t,
            Err(e) => return ctx.bad(e.at(loc)),
        };
        let session = match obj.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => format!("conversation-{n}"),
        };
        let start = ctx.rate.map_or(0, |r| (n as f64 * 1e9 / r).round() as i64);
        let mut messages: Vec<Value> = Vec::new();
        let mut turn = 0;
        for (role, text) in turns {
            let answer = role == "assistant";
            if answer && !messages.is_empty() && !text.is_empty() {
                turn += 1;
                let mut req = Request::new(loc.clone(), start);
                // Answered at once: the next turn follows it with no pause.
                req.end_ns = Some(start);
                req.id = Some(format!("{session}/{turn}"));
                req.session = Some(session.clone());
                req.output_text = Some(text.clone());
                req.mark_counts = true;
                req.prompt = Some(Box::new(Prompt {
                    messages: Some(Value::Array(messages.clone())),
                    ..Prompt::default()
                }));
                ctx.push(req)?;
            }
            messages.push(json!({"role": role, "content": text}));
        }
        Ok(())
    })
}

/// The conversation's messages as (OpenAI role, text).
fn turns(obj: &Object) -> std::result::Result<Vec<(&'static str, String)>, FieldError> {
    let Some(Value::Array(items)) = obj.get("conversations") else {
        return Err(FieldError::new(
            "conversations",
            "missing or not an array: a ShareGPT entry is {\"id\", \"conversations\": [{\"from\", \"value\"}]}",
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (k, item) in items.iter().enumerate() {
        let field = |name: &str| format!("conversations[{k}].{name}");
        let from = item.get("from").and_then(Value::as_str).unwrap_or_default();
        let Some(role) = role(from) else {
            return Err(FieldError::new(
                field("from"),
                format!(
                    "expected \"human\", \"gpt\" or \"system\", found {}",
                    crate::error::quote_value(
                        &item.get("from").map_or("nothing".into(), Value::to_string)
                    )
                ),
            ));
        };
        let Some(text) = item.get("value").and_then(Value::as_str) else {
            return Err(FieldError::new(field("value"), "missing or not a string"));
        };
        out.push((role, text.to_string()));
    }
    Ok(out)
}
