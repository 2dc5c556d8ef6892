//! `/v1/completions`.

use serde_json::{Value, json};

use super::{About, Api, Generation, Piece, Reply, choices};

pub struct Completions;

impl Api for Completions {
    fn about(&self) -> About {
        About::prompt("/v1/completions", "prompt", "the completions API takes a prompt")
            .generating(&Completions)
    }

    /// A string, or an array of token ids and strings.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        super::text_or_tokens(body.get("prompt")?)
    }

    /// The text continues the prompt: each word after a space, as a
    /// model's tokens do (so that prompt and answer joined are the words of
    /// both, as a later turn of `--live-answers` sends them).
    fn answer(&self, reply: &Reply) -> Value {
        let text = format!(" {}", reply.text);
        let choice = json!({"index": 0, "text": text, "finish_reason": "length"});
        choices::answer("text_completion", choice, reply)
    }
}

impl Generation for Completions {
    fn opening(&self, _: &Reply) -> Vec<String> {
        Vec::new()
    }

    fn token(&self, r: &Reply, text: &str, last: bool) -> String {
        let finish = last.then_some("length");
        let text = format!(" {}", text.trim_end());
        let choice = json!({"index": 0, "text": text, "finish_reason": finish});
        choices::chunk("text_completion", r, choice, false)
    }

    fn closing(&self, r: &Reply, usage: bool) -> Vec<String> {
        choices::closing("text_completion", r, usage)
    }
}
