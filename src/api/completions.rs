//! `/v1/completions`.

use serde_json::{Value, json};

use super::{Api, Generation, Given, Piece, Prompt, Reply, choices};
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
        given.ids_or_text("the completions API takes a prompt")
    }

    /// A string, or an array of token ids and strings.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        super::text_or_tokens(body.get("prompt")?)
    }

    fn generation(&self) -> Option<&'static dyn Generation> {
        Some(&Completions)
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
