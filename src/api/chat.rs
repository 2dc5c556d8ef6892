//! `/v1/chat/completions`.

use serde_json::{Value, json};

use super::{About, Api, Generation, Piece, Reply, choices};

pub struct Chat;

impl Api for Chat {
    fn about(&self) -> About {
        About::conversation("/v1/chat/completions", &Chat)
    }

    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>> {
        let mut out = Vec::new();
        for m in body.get("messages")?.as_array()? {
            if let Some(c) = m.get("content") {
                super::texts(c, &mut out);
            }
        }
        Some(out)
    }

    fn answer(&self, reply: &Reply) -> Value {
        let message = json!({"role": "assistant", "content": reply.text});
        let choice = json!({"index": 0, "message": message, "finish_reason": "length"});
        choices::answer("chat.completion", choice, reply)
    }
}

const CHUNK: &str = "chat.completion.chunk";

impl Generation for Chat {
    /// vLLM's chat streams open with the role.
    fn opening(&self, r: &Reply) -> Vec<String> {
        let choice =
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null});
        vec![choices::chunk(CHUNK, r, choice, false)]
    }

    fn token(&self, r: &Reply, text: &str, last: bool) -> String {
        let finish = last.then_some("length");
        let choice = json!({"index": 0, "delta": {"content": text}, "finish_reason": finish});
        choices::chunk(CHUNK, r, choice, false)
    }

    fn closing(&self, r: &Reply, usage: bool) -> Vec<String> {
        choices::closing(CHUNK, r, usage)
    }
}
