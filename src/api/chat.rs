//! `/v1/chat/completions`.

use serde_json::{Value, json};

use super::{Api, Generation, Given, Piece, Prompt, Reply, choices};
use crate::error::FieldError;

pub struct Chat;

impl Api for Chat {
    fn path(&self) -> &'static str {
        "/v1/chat/completions"
    }

    fn prompt_key(&self) -> &'static str {
        "messages"
    }

    fn prompt<'a>(&self, given: &Given<'a>) -> Result<Prompt<'a>, FieldError> {
        match (given.messages, given.text) {
            (Some(m), _) => Ok(Prompt::Messages(m)),
            (None, Some(t)) => Ok(Prompt::UserMessage(t)),
            (None, None) if given.token_ids.is_some() => Err(FieldError::new(
                "prompt_token_ids",
                "token ids need --endpoint completions",
            )),
            (None, None) => Err(Given::missing()),
        }
    }

    fn conversation(&self) -> bool {
        true
    }

    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        let mut out = Vec::new();
        for m in body.get("messages")?.as_array()? {
            match m.get("content") {
                Some(Value::String(s)) => out.push(Piece::Text(s)),
                Some(Value::Array(parts)) => out.extend(
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .map(Piece::Text),
                ),
                _ => {}
            }
        }
        Some(out)
    }

    fn generation(&self) -> Option<&'static dyn Generation> {
        Some(&Chat)
    }

    fn answer(&self, reply: &Reply) -> Value {
        let message = json!({"role": "assistant", "content": reply.text});
        let choice = json!({"index": 0, "message": message, "finish_reason": "length"});
        choices::answer("chat.completion", choice, reply)
    }
}

impl Generation for Chat {
    fn chunk_object(&self) -> &'static str {
        "chat.completion.chunk"
    }

    fn chunk_choice(&self, text: &str, finish: Option<&str>) -> Value {
        json!({"index": 0, "delta": {"content": text}, "finish_reason": finish})
    }

    fn opening_choice(&self) -> Option<Value> {
        Some(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
        )
    }
}
