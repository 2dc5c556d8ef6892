//! `/v1/completions`.

use serde_json::{Value, json};

use super::{Answer, Api, Generation, Given, Piece, Prompt, Reply, choices};
use crate::error::FieldError;

pub struct Completions;

impl Api for Completions {
    fn path(&self) -> &'static str {
        "/v1/completions"
    }

    fn prompt_key(&self) -> &'static str {
        "prompt"
    }

    fn prompt<'a>(&self, given: &Given<'a>) -> Result<Prompt<'a>, FieldError> {
        match (given.token_ids, given.text) {
            (Some(ids), _) => Ok(Prompt::TokenIds(ids)),
            (None, Some(t)) => Ok(Prompt::Text(t)),
            (None, None) if given.messages.is_some() => Err(FieldError::new(
                "messages",
                "a conversation needs --endpoint chat (the completions API takes a prompt)",
            )),
            (None, None) => Err(Given::missing()),
        }
    }

    fn conversation(&self) -> bool {
        false
    }

    /// A string, or an array of token ids and strings.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        super::text_or_tokens(body.get("prompt")?)
    }

    fn generation(&self) -> Option<&'static dyn Generation> {
        Some(&Completions)
    }

    fn read<'a>(&self, bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        choices::read(bytes)
    }

    fn no_results(&self) -> &'static str {
        "no choices in the answer"
    }

    fn stream_end(&self) -> &'static [u8] {
        b"[DONE]"
    }

    fn answer(&self, reply: &Reply) -> Value {
        let choice = json!({"index": 0, "text": reply.text, "finish_reason": "length"});
        choices::answer("text_completion", choice, reply)
    }
}

impl Generation for Completions {
    fn chunk_object(&self) -> &'static str {
        "text_completion"
    }

    fn chunk_choice(&self, text: &str, finish: Option<&str>) -> Value {
        json!({"index": 0, "text": text, "finish_reason": finish})
    }

    fn opening_choice(&self) -> Option<Value> {
        None
    }
}
