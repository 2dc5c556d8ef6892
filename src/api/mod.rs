//! The OpenAI-compatible endpoints tracekit speaks, each described once:
//! how a request body gives the prompt (the replay engine writes it), how
//! the answers read (the engine measures them) and how they look (the
//! simulated server writes them).
//!
//! An endpoint is one file here implementing [`Api`], and one line in the
//! table of [`endpoints!`].

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::FieldError;

mod choices;
mod read;
#[cfg(test)]
mod testing;

/// The table of endpoints: each line is a value of [`Endpoint`] (its
/// `--endpoint` name, documented), the module and the type describing it.
/// [`Endpoint::read`] is a `match`, not a `dyn` call: it runs once per
/// streamed event.
macro_rules! endpoints {
    ($($(#[$doc:meta])* $value:ident => $module:ident::$api:ident,)*) => {
        $(mod $module;)*

        /// Which endpoint the requests go to (`--endpoint`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
        pub enum Endpoint {
            $($(#[$doc])* $value,)*
        }

        impl Endpoint {
            /// What the endpoint is.
            pub fn api(self) -> &'static dyn Api {
                match self {
                    $(Endpoint::$value => &$module::$api,)*
                }
            }

            /// Read one answer object (a stream event's data or a whole
            /// body) as the endpoint's [`Api::read`] does.
            #[inline]
            pub fn read(self, bytes: &[u8]) -> serde_json::Result<Answer<'_>> {
                match self {
                    $(Endpoint::$value => $module::$api.read(bytes),)*
                }
            }
        }
    };
}

endpoints! {
    /// `/v1/completions`: a `prompt`.
    Completions => completions::Completions,
    /// `/v1/chat/completions`: `messages`.
    Chat => chat::Chat,
    /// `/v1/embeddings`: an `input`; whole answers, nothing generated.
    Embeddings => embeddings::Embeddings,
    /// `/v1/messages` (Anthropic's Messages API): `system` and `messages`
    /// of content blocks.
    Messages => messages::Messages,
    /// `/v1/responses` (OpenAI's Responses API): `input` items.
    Responses => responses::Responses,
}

impl Endpoint {
    /// The path under the base URL.
    pub fn path(self) -> &'static str {
        self.api().path()
    }
}

/// What an endpoint is, as facts: its path, the prompt it takes, how it
/// generates and how its answers say they have no result or are cut off.
/// Each endpoint states only what differs from OpenAI's shape.
#[derive(Clone, Copy)]
pub struct About {
    /// The path under the base URL, e.g. `/v1/completions`.
    pub path: &'static str,
    /// The prompt it takes and the body member that carries it.
    pub takes: Takes,
    /// How it generates tokens, if it does: then a body asks for
    /// `max_tokens` (and `min_tokens`, `ignore_eos` when the flags say so)
    /// and for a stream, and the simulated server streams them. `None`: a
    /// body carries neither, and the answer is one whole body.
    pub generation: Option<&'static dyn Generation>,
    /// The error of a whole answer whose results ([`Answer::results`])
    /// are missing or empty, e.g. "no choices in the answer".
    pub no_results: &'static str,
    /// The name of the event that ends a stream, for the error of a
    /// stream cut off.
    pub end_event: &'static str,
    /// The event a stream of typed events must open with (`None`: a
    /// stream of chat's shape, ended by `[DONE]`). A stream of such an
    /// endpoint is judged by its own protocol: each event has a `type`,
    /// the opening event comes before the end event, and `[DONE]` is not
    /// its end.
    pub start_event: Option<&'static str>,
}

/// Which of a record's prompts an endpoint takes.
#[derive(Clone, Copy)]
pub enum Takes {
    /// A conversation, in chat's `messages` (an endpoint of another shape
    /// translates them in [`Api::render`]): the record's `messages`, else
    /// its text as one user message. Its `tools` are sent, `delta` turns
    /// continue earlier turns, and `--live-answers` applies.
    Conversation,
    /// Token ids, else the text, in the body member `key`; `what` says
    /// what the endpoint takes, for the error of a record with
    /// `messages` only.
    Prompt {
        key: &'static str,
        what: &'static str,
    },
}

impl About {
    /// A conversation endpoint generating as `generation` says.
    pub const fn conversation(path: &'static str, generation: &'static dyn Generation) -> About {
        About {
            path,
            takes: Takes::Conversation,
            generation: Some(generation),
            no_results: "no choices in the answer",
            end_event: "[DONE]",
            start_event: None,
        }
    }

    /// An endpoint taking token ids or text in `key`, generating nothing.
    pub const fn prompt(path: &'static str, key: &'static str, what: &'static str) -> About {
        About {
            path,
            takes: Takes::Prompt { key, what },
            generation: None,
            no_results: "no choices in the answer",
            end_event: "[DONE]",
            start_event: None,
        }
    }

    /// The same, generating as `generation` says.
    pub const fn generating(self, generation: &'static dyn Generation) -> About {
        About {
            generation: Some(generation),
            ..self
        }
    }

    /// The same, whose answers carry their results in another member
    /// than `choices`: `no_results` is the error of an answer without them.
    pub const fn no_results(self, no_results: &'static str) -> About {
        About { no_results, ..self }
    }

    /// The same, whose streams are typed events that open with the event
    /// `start` and end with the event `end`, not `[DONE]`.
    pub const fn typed_stream(self, start: &'static str, end: &'static str) -> About {
        About {
            start_event: Some(start),
            end_event: end,
            ..self
        }
    }
}

/// One endpoint: its requests and its answers.
pub trait Api: Sync {
    /// What the endpoint is; the methods below without a body of their
    /// own read it.
    fn about(&self) -> About;

    /// The path under the base URL, e.g. `/v1/completions`.
    fn path(&self) -> &'static str {
        self.about().path
    }

    /// The body member that carries the prompt.
    fn prompt_key(&self) -> &'static str {
        match self.about().takes {
            Takes::Conversation => "messages",
            Takes::Prompt { key, .. } => key,
        }
    }

    /// The prompt a record gives this endpoint, from what it has; an
    /// error naming the record's field when it has no prompt this endpoint
    /// takes.
    fn prompt<'a>(&self, given: &Given<'a>) -> Result<Prompt<'a>, FieldError> {
        match self.about().takes {
            Takes::Conversation => given.messages_or_text(),
            Takes::Prompt { what, .. } => given.ids_or_text(what),
        }
    }

    /// A conversation endpoint ([`Takes::Conversation`]).
    fn conversation(&self) -> bool {
        matches!(self.about().takes, Takes::Conversation)
    }

    /// How the endpoint generates tokens, if it does ([`About::generation`]).
    fn generation(&self) -> Option<&'static dyn Generation> {
        self.about().generation
    }

    /// Read one answer object, a stream event's data or a whole body: an
    /// error only for malformed JSON (a field of an unexpected type counts
    /// as absent). The engine times and counts from what it says.
    /// By default, OpenAI's shape: results in `choices`.
    fn read<'a>(&self, bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        choices::read(bytes)
    }

    /// The error of a whole answer without results (the `no_results` of [`About`]).
    fn no_results(&self) -> &'static str {
        self.about().no_results
    }

    /// The data of the event that ends a stream (`[DONE]`): a stream that
    /// ends without it (or an answer object the reader marks as the end,
    /// [`Answer::end`]) is cut off.
    fn stream_end(&self) -> &'static [u8] {
        b"[DONE]"
    }

    /// The name of the event that ends a stream (the `end_event` of [`About`]).
    fn end_event(&self) -> &'static str {
        self.about().end_event
    }

    /// The event a typed stream opens with (the `start_event` of [`About`]).
    fn start_event(&self) -> Option<&'static str> {
        self.about().start_event
    }

    /// The body sent for a request built in chat's form (`messages`,
    /// `tools`, `max_tokens`, `stream_options`): `None` when it is sent
    /// as it is. An endpoint of another shape translates it (the trace's
    /// records are always in OpenAI's chat form).
    fn render(&self, _chat_body: &[u8]) -> Option<Vec<u8>> {
        None
    }

    /// What one answer object (a stream event's data or a whole body) adds
    /// to the assistant message a later turn sends back: `said` gets each
    /// piece. False when the object carries no result.
    fn transcribe<'v>(&self, v: &'v Value, said: &mut dyn FnMut(Said<'v>)) -> bool {
        choices::transcribe(v, said)
    }

    /// The prompt of a request body as the simulated server reads it, in
    /// pieces; `None` when the body has none it can read.
    fn read_prompt<'v>(&self, body: &'v Value) -> Option<Vec<Piece<'v>>>;

    /// The whole answer the simulated server gives.
    fn answer(&self, reply: &Reply) -> Value;
}

/// How an endpoint that generates tokens streams them (as the simulated
/// server sends them): each event is SSE text, `event:` line and `data`.
pub trait Generation: Sync {
    /// The events a stream opens with, before the first token.
    fn opening(&self, s: &Reply) -> Vec<String>;

    /// The event carrying one token's `text` (`last`: the answer's last).
    fn token(&self, s: &Reply, text: &str, last: bool) -> String;

    /// The events that end a stream once every token is sent (`usage`:
    /// the request asked for it, where the endpoint asks).
    fn closing(&self, s: &Reply, usage: bool) -> Vec<String>;
}

/// One server-sent event: its name, if any, and its data.
pub fn sse(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(n) => format!("event: {n}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A piece of an answer's assistant message.
#[derive(Debug, PartialEq)]
pub enum Said<'v> {
    /// Text (a streamed piece of it, or the whole).
    Text(&'v str),
    /// A tool call, or a piece of one: the call is named by `key` (its
    /// index in a stream); the pieces of its name and arguments add up.
    Call {
        key: String,
        id: Option<&'v str>,
        name: Option<&'v str>,
        arguments: Option<std::borrow::Cow<'v, str>>,
    },
}

/// What one answer object says, as an endpoint's reader finds it.
#[derive(Debug, Default)]
pub struct Answer<'a> {
    /// `error`, when present and not null.
    pub error: Option<Value>,
    /// How many results the object carries (`choices`), when it carries
    /// the endpoint's array of them, even empty: the first such object is
    /// the first chunk (vLLM's TTFT).
    pub results: Option<usize>,
    /// Some result carries output (text, reasoning or a tool call): what
    /// TTFT and the ITL time in a stream.
    pub content: bool,
    /// The finish reason of the last result that gives one as a string.
    pub finish_reason: Option<Cow<'a, str>>,
    /// `usage`, when it is an object.
    pub usage: Option<Usage>,
    /// The object is the event that ends a stream (endpoints whose streams
    /// end with an event of their own, not `[DONE]`).
    pub end: bool,
    /// The object is the event that opens a typed stream
    /// ([`About::start_event`]).
    pub start: bool,
    /// The object has no `type` string: no event of a typed stream (a
    /// chunk of chat's shape, say).
    pub untyped: bool,
}

/// `usage`: the token counts, each when it is a non-negative integer.
#[derive(Debug, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

/// What the simulated server answers a request with.
pub struct Reply<'a> {
    /// The request's number, from 0 in order of arrival.
    pub n: u64,
    /// The model the request named (or the server's).
    pub model: &'a str,
    /// The answer's text (empty for an endpoint that generates none).
    pub text: &'a str,
    /// Seeds what the answer holds besides its text (embeddings).
    pub seed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

impl Reply<'_> {
    /// `usage` as vLLM gives it for generated answers.
    pub fn usage(&self) -> Value {
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        })
    }
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

impl<'a> Given<'a> {
    /// The error for a record with nothing to send.
    pub fn missing() -> FieldError {
        FieldError::new("input_length", "missing: the record has no prompt")
    }

    /// The messages, else the text as one user message: the prompt of a
    /// conversation endpoint.
    pub fn messages_or_text(&self) -> Result<Prompt<'a>, FieldError> {
        match (self.messages, self.text) {
            (Some(m), _) => Ok(Prompt::Messages(m)),
            (None, Some(t)) => Ok(Prompt::UserMessage(t)),
            (None, None) if self.token_ids.is_some() => Err(FieldError::new(
                "prompt_token_ids",
                "token ids need --endpoint completions",
            )),
            (None, None) => Err(Given::missing()),
        }
    }

    /// Token ids, else the text: the prompt of an endpoint that takes no
    /// conversation (`takes` says what it takes, for the error a record
    /// with `messages` gets).
    pub fn ids_or_text(&self, takes: &str) -> Result<Prompt<'a>, FieldError> {
        match (self.token_ids, self.text) {
            (Some(ids), _) => Ok(Prompt::TokenIds(ids)),
            (None, Some(t)) => Ok(Prompt::Text(t)),
            (None, None) if self.messages.is_some() => Err(FieldError::new(
                "messages",
                format!("a conversation needs --endpoint chat ({takes})"),
            )),
            (None, None) => Err(Given::missing()),
        }
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

/// A body built in chat's form, translated member by member: `member`
/// puts what each becomes into the body sent. `None` when the body is not
/// a JSON object.
fn translate(
    chat_body: &[u8],
    mut member: impl FnMut(String, Value, &mut Map<String, Value>),
) -> Option<Map<String, Value>> {
    let Ok(Value::Object(body)) = serde_json::from_slice(chat_body) else {
        return None;
    };
    let mut out = Map::new();
    for (k, v) in body {
        member(k, v, &mut out);
    }
    Some(out)
}

/// A prompt a server reads as a string, or an array of token ids and
/// strings (completions' `prompt`, embeddings' `input`).
fn text_or_tokens(v: &Value) -> Option<Vec<Piece<'_>>> {
    match v {
        Value::String(s) => Some(vec![Piece::Text(s)]),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Number(n) => n.as_u64().map(Piece::Token),
                Value::String(s) => Some(Piece::Text(s)),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The text of a message's content, a tool result's or an input item's,
/// as a server reads it: a string, or the `text` of its parts (and the
/// text of the parts' own `content` or `output`).
fn texts<'v>(content: &'v Value, out: &mut Vec<Piece<'v>>) {
    match content {
        Value::String(s) => out.push(Piece::Text(s)),
        Value::Array(parts) => {
            for p in parts {
                match p.get("text") {
                    Some(Value::String(s)) => out.push(Piece::Text(s)),
                    _ => {
                        if let Some(c) = p.get("content").or_else(|| p.get("output")) {
                            texts(c, out);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// The text of a chat message's content, its parts' joined by newlines.
fn text_of(content: Option<&Value>) -> String {
    let mut pieces = Vec::new();
    if let Some(c) = content {
        texts(c, &mut pieces);
    }
    let parts: Vec<&str> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Text(t) => Some(*t),
            Piece::Token(_) => None,
        })
        .collect();
    parts.join("\n")
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
