//! The OpenAI-compatible endpoints tracekit speaks, each described once:
//! how a request body gives the prompt (the replay engine writes it) and
//! how the answers look (the simulated server writes them; the engine's
//! answer reader reads every endpoint whose answers carry `choices`).
//!
//! An endpoint is one file here implementing [`Api`], and one line in
//! [`Endpoint`] and its table.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::FieldError;

mod chat;
mod completions;

/// Which endpoint the requests go to (`--endpoint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Endpoint {
    /// `/v1/completions`: a `prompt`.
    Completions,
    /// `/v1/chat/completions`: `messages`.
    Chat,
}

impl Endpoint {
    /// What the endpoint is: the one table of endpoints.
    pub fn api(self) -> &'static dyn Api {
        match self {
            Endpoint::Completions => &completions::Completions,
            Endpoint::Chat => &chat::Chat,
        }
    }

    /// The path under the base URL.
    pub fn path(self) -> &'static str {
        self.api().path()
    }
}

/// One endpoint: its requests and its answers.
pub trait Api: Sync {
    /// The path under the base URL, e.g. `/v1/completions`.
    fn path(&self) -> &'static str;

    /// The body member that carries the prompt.
    fn prompt_key(&self) -> &'static str;

    /// The prompt a record gives this endpoint, from what it has; an
    /// error naming the record's field when it has no prompt this endpoint
    /// takes.
    fn prompt<'a>(&self, given: &Given<'a>) -> Result<Prompt<'a>, FieldError>;

    /// A conversation endpoint: the record's `tools` are sent, `delta`
    /// turns continue earlier turns, and `--live-answers` applies.
    fn conversation(&self) -> bool;

    /// The prompt of a request body as the simulated server reads it, in
    /// pieces; `None` when the body has none it can read.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>>;

    /// A whole answer's `object` and its choice carrying `text`.
    fn answer(&self, text: &str) -> (&'static str, Value);

    /// A stream chunk's `object`.
    fn chunk_object(&self) -> &'static str;

    /// A stream chunk's choice carrying `text` (and the finish reason on
    /// the last one).
    fn chunk_choice(&self, text: &str, finish: Option<&str>) -> Value;

    /// The choice of the chunk a server sends before any content, if the
    /// endpoint has one (vLLM's chat streams open with the role).
    fn opening_choice(&self) -> Option<Value>;
}

/// What a trace record has that can be a prompt.
pub struct Given<'a> {
    /// `messages`.
    pub messages: Option<&'a RawValue>,
    /// `text_input`, or the text synthesized for `input_length`.
    pub text: Option<&'a str>,
    /// `prompt_token_ids`.
    pub token_ids: Option<&'a [u64]>,
}

impl Given<'_> {
    /// The error for a record with nothing to send.
    pub fn missing() -> FieldError {
        FieldError::new("input_length", "missing: the record has no prompt")
    }
}

/// A prompt as a body carries it.
pub enum Prompt<'a> {
    /// `messages` as the record gives them.
    Messages(&'a RawValue),
    /// The text as one user message.
    UserMessage(&'a str),
    Text(&'a str),
    TokenIds(&'a [u64]),
}

impl Prompt<'_> {
    /// The prompt's JSON value, written to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        match self {
            Prompt::Messages(raw) => out.extend_from_slice(raw.get().as_bytes()),
            Prompt::UserMessage(text) => {
                out.extend_from_slice(br#"[{"role":"user","content":"#);
                crate::json::write_str(out, text);
                out.extend_from_slice(b"}]");
            }
            Prompt::Text(text) => crate::json::write_str(out, text),
            Prompt::TokenIds(ids) => {
                out.push(b'[');
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    let _ = write!(out, "{id}");
                }
                out.push(b']');
            }
        }
    }
}

/// A piece of a prompt as a server reads it.
#[derive(Debug, PartialEq)]
pub enum Piece<'v> {
    Text(&'v str),
    Token(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(e: Endpoint, given: &Given) -> Result<String, String> {
        let mut out = Vec::new();
        match e.api().prompt(given) {
            Ok(p) => {
                p.write(&mut out);
                Ok(String::from_utf8(out).unwrap())
            }
            Err(err) => Err(err.to_string()),
        }
    }

    #[test]
    fn each_endpoint_takes_the_prompts_it_can_send() {
        let messages = RawValue::from_string(r#"[{"role":"user","content":"hi"}]"#.into()).unwrap();
        let all = Given {
            messages: Some(&messages),
            text: Some("a \"b\""),
            token_ids: Some(&[5, 7]),
        };
        let text = Given {
            messages: None,
            text: Some("a \"b\""),
            token_ids: None,
        };
        let none = Given {
            messages: None,
            text: None,
            token_ids: None,
        };
        let only_messages = Given {
            messages: Some(&messages),
            ..none
        };
        let only_ids = Given {
            token_ids: Some(&[5, 7]),
            ..none
        };
        // Chat: messages first, else the text as one user message.
        assert_eq!(
            body(Endpoint::Chat, &all).unwrap(),
            r#"[{"role":"user","content":"hi"}]"#
        );
        assert_eq!(
            body(Endpoint::Chat, &text).unwrap(),
            r#"[{"role":"user","content":"a \"b\""}]"#
        );
        assert!(
            body(Endpoint::Chat, &only_ids)
                .unwrap_err()
                .contains("prompt_token_ids")
        );
        // Completions: token ids first, else the text.
        assert_eq!(body(Endpoint::Completions, &all).unwrap(), "[5,7]");
        assert_eq!(body(Endpoint::Completions, &text).unwrap(), r#""a \"b\"""#);
        assert!(
            body(Endpoint::Completions, &only_messages)
                .unwrap_err()
                .contains("needs --endpoint chat")
        );
        for e in [Endpoint::Chat, Endpoint::Completions] {
            assert!(body(e, &none).unwrap_err().contains("input_length"));
        }
    }

    #[test]
    fn the_server_reads_the_prompt_each_endpoint_sends() {
        let chat: Value = serde_json::json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "image_url"}]},
            {"role": "assistant", "tool_calls": []},
        ]});
        assert_eq!(
            Endpoint::Chat.api().read_prompt(&chat),
            Some(vec![Piece::Text("be brief"), Piece::Text("one")])
        );
        let ids: Value = serde_json::json!({"prompt": [3, "x y", 4]});
        assert_eq!(
            Endpoint::Completions.api().read_prompt(&ids),
            Some(vec![Piece::Token(3), Piece::Text("x y"), Piece::Token(4)])
        );
        let bad: Value = serde_json::json!({"prompt": [3, null]});
        assert_eq!(Endpoint::Completions.api().read_prompt(&bad), None);
        assert_eq!(Endpoint::Completions.api().read_prompt(&chat), None);
        assert_eq!(Endpoint::Chat.api().read_prompt(&ids), None);
    }
}
