//! Delta conversations: a record with `message_mode: "delta"` carries only
//! the messages its turn adds; the conversation sent is its parent's
//! conversation as it was sent, then the answer the server actually gave
//! the parent, then these messages. The parent is the first id of `after`,
//! else the previous turn of the session.
//!
//! A request whose conversation a later turn may continue (a chat request
//! with `messages` and an `id` or a `session_id`) keeps its answer: the
//! streamed deltas are assembled (text and tool calls; reasoning is left
//! out, as clients do when they send a conversation back). Conversations
//! are kept as the bytes of their messages, so that a delta turn's body is
//! its own body with the conversation spliced in, byte for byte.

use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use serde_json::{Map, Value, json};

/// Conversations kept for each of ids and sessions: the most recently
/// completed ones. Memory is bounded by this many conversations, whatever
/// the length of the trace.
pub const MAX_KEPT: usize = 4096;

/// The assistant message of one answer, assembled from a whole body or
/// from the deltas of a stream.
#[derive(Debug, Default)]
pub struct Transcript {
    content: String,
    tool_calls: Vec<ToolCall>,
    /// Some answer object carried a choice.
    answered: bool,
}

#[derive(Debug, Default)]
struct ToolCall {
    index: u64,
    id: Option<String>,
    kind: Option<String>,
    name: String,
    arguments: String,
}

impl Transcript {
    /// Take one answer object: an SSE event's data or a whole body. Text
    /// that is not JSON, or has no choice, adds nothing.
    pub fn take(&mut self, data: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        self.answered = true;
        let part = choice.get("delta").or_else(|| choice.get("message"));
        if let Some(text) = part
            .and_then(|p| p.get("content"))
            .or_else(|| choice.get("text"))
            .and_then(Value::as_str)
        {
            self.content.push_str(text);
        }
        let calls = part
            .and_then(|p| p.get("tool_calls"))
            .and_then(Value::as_array);
        for (n, call) in calls.into_iter().flatten().enumerate() {
            // Streams number the calls and send each in pieces; a whole
            // message lists them in order.
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(n as u64);
            let pos = match self.tool_calls.iter().position(|c| c.index == index) {
                Some(pos) => pos,
                None => {
                    self.tool_calls.push(ToolCall {
                        index,
                        ..ToolCall::default()
                    });
                    self.tool_calls.len() - 1
                }
            };
            let c = &mut self.tool_calls[pos];
            let text = |k: &str| call.get(k).and_then(Value::as_str).map(str::to_string);
            c.id = c.id.take().or_else(|| text("id"));
            c.kind = c.kind.take().or_else(|| text("type"));
            if let Some(f) = call.get("function") {
                if let Some(name) = f.get("name").and_then(Value::as_str) {
                    c.name.push_str(name);
                }
                if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                    c.arguments.push_str(args);
                }
            }
        }
    }

    /// The assistant message, or `None` when no choice came back.
    pub fn message(self) -> Option<Value> {
        if !self.answered {
            return None;
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        let calls: Vec<Value> = self
            .tool_calls
            .into_iter()
            .map(|c| {
                json!({
                    "id": c.id.unwrap_or_default(),
                    "type": c.kind.unwrap_or_else(|| "function".into()),
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        // OpenAI's shape: content is null when the answer is only calls.
        let content = if self.content.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            Value::String(self.content)
        };
        m.insert("content".into(), content);
        if !calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        Some(Value::Object(m))
    }
}

/// A conversation as sent and answered: the JSON text of its messages,
/// without the enclosing brackets (empty for none).
pub type Messages = Arc<Vec<u8>>;

/// The messages inside a JSON array's text: what is between the brackets,
/// trimmed; `None` when the text is not an array.
pub fn inner(array: &[u8]) -> Option<&[u8]> {
    let t = array.trim_ascii();
    let t = t.strip_prefix(b"[")?.strip_suffix(b"]")?;
    Some(t.trim_ascii())
}

/// `[a…, b…, c…]` from the inner texts of several arrays, empty ones left
/// out.
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for p in parts.iter().filter(|p| !p.is_empty()) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(p);
    }
    out.push(b']');
    out
}

/// The conversation a completed request leaves for its continuations: the
/// messages it sent, then the answer, if any.
pub fn continued(sent: &[u8], answer: Option<&Value>) -> Vec<u8> {
    let answer = answer.map(|a| a.to_string());
    let sent = inner(sent).unwrap_or_default();
    let mut out = join(&[sent, answer.as_deref().unwrap_or("").as_bytes()]);
    // Kept without brackets: a continuation splices it into its own array.
    out.pop();
    out.remove(0);
    out
}

/// Which earlier conversation a delta turn continues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parent {
    /// The record with this id (the first of its `after`).
    Id(String),
    /// The previous turn of this session.
    Session(String),
}

/// The conversations later turns may continue, by id and by session.
/// A kept conversation, and its length in tokens (the prompt's, as the
/// trace gives it, plus the answer's, as the server counted it).
pub type Conversation = (Messages, u64);

pub struct Kept {
    by_id: LruCache<String, Conversation>,
    by_session: LruCache<String, Conversation>,
}

impl Default for Kept {
    fn default() -> Self {
        let n = NonZeroUsize::new(MAX_KEPT).expect("a positive bound");
        Kept {
            by_id: LruCache::new(n),
            by_session: LruCache::new(n),
        }
    }
}

impl Kept {
    /// Keep a completed request's conversation under its id and session.
    pub fn keep(&mut self, id: Option<&str>, session: Option<&str>, c: Conversation) {
        if let Some(id) = id {
            self.by_id.put(id.to_string(), c.clone());
        }
        if let Some(s) = session {
            self.by_session.put(s.to_string(), c);
        }
    }

    /// The conversation a turn continues, if it is still kept.
    pub fn get(&mut self, parent: &Parent) -> Option<Conversation> {
        match parent {
            Parent::Id(id) => self.by_id.get(id).cloned(),
            Parent::Session(s) => self.by_session.get(s).cloned(),
        }
    }
}

/// A delta turn's body: its own body with the parent's conversation
/// spliced in before its own messages, which stand at `span` in the body.
pub fn splice(body: &[u8], span: (usize, usize), parent: &[u8]) -> Vec<u8> {
    let own = inner(&body[span.0..span.1]).unwrap_or_default();
    replace(body, span, &[parent, own])
}

/// `--live-answers`: the new part of a synthesized turn, the words of its
/// prompt past the session's history (`history` tokens: the words are one
/// token each), as one user message.
pub fn live_message(prompt: &str, history: u64) -> Vec<u8> {
    // Words start with their space: " apple".
    let starts: Vec<usize> = prompt
        .char_indices()
        .filter(|&(i, c)| c == ' ' && (i == 0 || !prompt[..i].ends_with(' ')))
        .map(|(i, _)| i)
        .collect();
    let from = starts
        .get(usize::try_from(history).unwrap_or(usize::MAX))
        .map_or(prompt.len(), |&i| i);
    json!({"role": "user", "content": &prompt[from..]})
        .to_string()
        .into_bytes()
}

/// The body with the messages at `span` replaced by `parts` joined.
pub fn replace(body: &[u8], span: (usize, usize), parts: &[&[u8]]) -> Vec<u8> {
    let (start, end) = span;
    let messages = join(parts);
    let mut out = Vec::with_capacity(body.len() + messages.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(&messages);
    out.extend_from_slice(&body[end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap()
    }

    #[test]
    fn a_stream_is_assembled_into_one_assistant_message() {
        let mut t = Transcript::default();
        for event in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"ty\":1}"}}]}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3}}"#,
            "not json",
        ] {
            t.take(event.as_bytes());
        }
        assert_eq!(
            t.message().unwrap(),
            json!({"role": "assistant", "content": "Hello", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":1}"}}]})
        );
    }

    #[test]
    fn a_whole_answer_with_only_tool_calls_has_null_content() {
        let mut t = Transcript::default();
        t.take(
            br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"[]"}}]}}]}"#,
        );
        assert_eq!(
            t.message().unwrap(),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[]"}}]})
        );
        assert_eq!(Transcript::default().message(), None);
    }

    #[test]
    fn a_delta_body_is_its_own_with_the_parents_conversation_spliced_in() {
        let parent_sent = br#"[{"role":"user","content":"hi"}]"#;
        let answer = json!({"role": "assistant", "content": "hello"});
        let kept = continued(parent_sent, Some(&answer));
        assert_eq!(
            text(&kept),
            r#"{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}"#
        );
        let body =
            br#"{"model":"m","messages":[ {"role":"user","content":"more"} ],"stream":true}"#;
        let start = body.windows(2).position(|w| w == b"[ ").unwrap();
        let end = body.windows(2).position(|w| w == b"],").unwrap() + 1;
        assert_eq!(
            text(&splice(body, (start, end), &kept)),
            r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}],"stream":true}"#
        );
        // No answer (the parent failed): its messages only; an empty own part.
        let kept = continued(parent_sent, None);
        assert_eq!(text(&kept), r#"{"role":"user","content":"hi"}"#);
        let body = br#"{"messages":[]}"#;
        assert_eq!(
            text(&splice(body, (12, 14), &kept)),
            r#"{"messages":[{"role":"user","content":"hi"}]}"#
        );
    }

    #[test]
    fn a_live_turn_sends_the_words_past_its_history() {
        let prompt = " one two three four";
        let content = |h| {
            let v: Value = serde_json::from_slice(&live_message(prompt, h)).unwrap();
            v["content"].as_str().unwrap().to_string()
        };
        assert_eq!(content(0), " one two three four");
        assert_eq!(content(3), " four");
        // A history as long as the prompt or longer leaves nothing new.
        assert_eq!(content(4), "");
        assert_eq!(content(u64::MAX), "");
    }
}
