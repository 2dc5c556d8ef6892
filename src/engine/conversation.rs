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

use crate::api::{Endpoint, Said};

/// Conversations kept for each of ids and sessions: the most recently
/// completed ones. Memory is bounded by this many conversations, whatever
/// the length of the trace.
pub const MAX_KEPT: usize = 4096;

/// The assistant message of one answer, assembled from a whole body or
/// from the deltas of a stream, in chat's form whatever the endpoint (its
/// `transcribe` says what each answer object adds).
#[derive(Debug)]
pub struct Transcript {
    endpoint: Endpoint,
    content: String,
    tool_calls: Vec<ToolCall>,
    /// Some answer object carried a result.
    answered: bool,
}

#[derive(Debug, Default)]
struct ToolCall {
    /// The call's key in the answer (its index in a stream).
    key: String,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Transcript {
    pub fn new(endpoint: Endpoint) -> Transcript {
        Transcript {
            endpoint,
            content: String::new(),
            tool_calls: Vec::new(),
            answered: false,
        }
    }

    /// Take one answer object: an SSE event's data or a whole body. Text
    /// that is not JSON, or has no result, adds nothing.
    pub fn take(&mut self, data: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        let calls = &mut self.tool_calls;
        let content = &mut self.content;
        let answered = self.endpoint.api().transcribe(&v, &mut |said| match said {
            Said::Text(t) => content.push_str(t),
            Said::Call {
                key,
                id,
                name,
                arguments,
            } => {
                let pos = match calls.iter().position(|c| c.key == key) {
                    Some(pos) => pos,
                    None => {
                        calls.push(ToolCall {
                            key,
                            ..ToolCall::default()
                        });
                        calls.len() - 1
                    }
                };
                let c = &mut calls[pos];
                if c.id.is_none() {
                    c.id = id.map(str::to_string);
                }
                c.name.push_str(name.unwrap_or(""));
                c.arguments.push_str(arguments.as_deref().unwrap_or(""));
            }
        });
        self.answered |= answered;
    }

    /// The assistant message, or `None` when no choice came back. A call
    /// the server gave no id of its own (none, an empty one, one not a
    /// string, or one an earlier call of the answer has) gets a made-up
    /// one, unique in the run: every API refuses a later turn whose calls
    /// and tool results go under `""` or share an id. `made_up` is told
    /// how many were made up.
    pub fn message(self, made_up: impl FnOnce(usize)) -> Option<Value> {
        if !self.answered {
            return None;
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        let mut seen: Vec<String> = Vec::new();
        let mut invented = 0;
        let calls: Vec<Value> = self
            .tool_calls
            .into_iter()
            .map(|c| {
                let id = match c.id.filter(|id| !id.is_empty() && !seen.contains(id)) {
                    Some(id) => id,
                    None => {
                        invented += 1;
                        made_up_id()
                    }
                };
                seen.push(id.clone());
                json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        if invented > 0 {
            made_up(invented);
        }
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

/// The assistant message of record `index`'s answer, as
/// [`Transcript::message`] makes it; `warn` is given the warning, the first
/// time in the process that ids are made up (one answer without ids
/// usually means all of them).
pub fn answer_of(t: Transcript, index: u64, warn: impl FnOnce(String)) -> Option<Value> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: AtomicBool = AtomicBool::new(false);
    t.message(|n| {
        if !WARNED.swap(true, Ordering::Relaxed) {
            warn(format!(
                "record {}: the answer's tool call{} came without a usable id (none, empty, \
                 not a string, or repeated): sent back under made-up id{} (call_tracekit_N), \
                 with the tool results that answer {}; later answers like it are not named",
                index + 1,
                crate::text::plural(n as u64),
                crate::text::plural(n as u64),
                if n == 1 { "it" } else { "them" },
            ));
        }
    })
}

/// A tool call id no server gives: `call_tracekit_N`, N counting the
/// process's made-up ids from 1 (letters, digits and `_` only, as the
/// Messages API asks of ids).
fn made_up_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("call_tracekit_{}", NEXT.fetch_add(1, Ordering::Relaxed))
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
/// messages it sent, then the answer, if any. For a completions prompt
/// (a string), its text then the answer's, inside the quotes.
pub fn continued(sent: &[u8], answer: Option<&Value>) -> Vec<u8> {
    if let Some(text) = string_inner(sent) {
        let mut out = text.to_vec();
        if let Some(said) = answer
            .and_then(|a| a.get("content"))
            .and_then(Value::as_str)
        {
            out.extend_from_slice(&escaped(said));
        }
        return out;
    }
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
/// A kept conversation, its prompt's length in tokens (as the trace gives
/// it), and its whole length (the prompt's plus the answer's, as the server
/// counted it).
pub type Conversation = (Messages, u64, u64);

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

/// The text between a JSON string's quotes, escaped as it stands.
fn string_inner(b: &[u8]) -> Option<&[u8]> {
    b.trim_ascii().strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// A text escaped for JSON, without its quotes.
fn escaped(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 2);
    crate::json::write_str(&mut out, text);
    out.pop();
    out.remove(0);
    out
}

/// A delta turn's body: its own body with the parent's conversation
/// spliced in before its own messages, which stand at `span` in the body.
/// Its tool results that answer calls none of its own messages make are
/// sent under the ids of the calls the parent's live answer made (see
/// [`rebind`]).
pub fn splice(body: &[u8], span: (usize, usize), parent: &[u8]) -> Vec<u8> {
    let own = inner(&body[span.0..span.1]).unwrap_or_default();
    match rebind(own, parent) {
        Some(own) => replace(body, span, &[parent, &own]),
        None => replace(body, span, &[parent, own]),
    }
}

/// Tool results of a delta turn's own messages that answer calls the
/// trace recorded, sent under the ids of the calls the parent's live
/// answer made (a server refuses results for calls it never made): the
/// k-th recorded id the results answer, in their order, becomes the live
/// answer's k-th call's id. Results for calls an assistant message of the
/// turn's own makes keep their ids; beyond the live calls, ids stay as
/// recorded. `None` when nothing changes (the turn is sent byte for byte).
pub fn rebind(own: &[u8], parent: &[u8]) -> Option<Vec<u8>> {
    // Most turns carry no tool result: no parse for them.
    memchr::memmem::find(own, b"tool_call_id")?;
    let live = live_call_ids(parent);
    if live.is_empty() {
        return None;
    }
    let Ok(Value::Array(mut messages)) = serde_json::from_slice(&join(&[own])) else {
        return None;
    };
    let declared: Vec<String> = messages
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut map: Vec<(String, String)> = Vec::new();
    let mut changed = false;
    for m in &mut messages {
        if m.get("role").and_then(Value::as_str) != Some("tool") {
            continue;
        }
        let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
            continue;
        };
        if declared.iter().any(|d| d == id) {
            continue;
        }
        let to = match map.iter().find(|(from, _)| from == id) {
            Some((_, to)) => to.clone(),
            None => match live.get(map.len()) {
                Some(to) => {
                    map.push((id.to_string(), to.clone()));
                    to.clone()
                }
                None => continue,
            },
        };
        if to != id {
            m["tool_call_id"] = Value::String(to);
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    let text = Value::Array(messages).to_string();
    inner(text.as_bytes()).map(<[u8]>::to_vec)
}

/// The ids of the tool calls of a kept conversation's last assistant
/// message (the live answer, which `continued` puts last).
fn live_call_ids(parent: &[u8]) -> Vec<String> {
    let Some(at) = memchr::memmem::rfind(parent, br#"{"role":"assistant""#) else {
        return Vec::new();
    };
    let mut values = serde_json::Deserializer::from_slice(&parent[at..]).into_iter::<Value>();
    let Some(Ok(answer)) = values.next() else {
        return Vec::new();
    };
    answer
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// `--live-answers`: a later turn's body, its prompt replaced by the
/// conversation it continues (`kept`) and the new part of its synthesized
/// prompt past `history` tokens: a user message after the conversation,
/// or, for a completions prompt (a string), the text after the kept text.
pub fn live_turn(
    body: &[u8],
    span: (usize, usize),
    kept: &[u8],
    prompt: &str,
    history: u64,
) -> Vec<u8> {
    if body.get(span.0) != Some(&b'"') {
        return replace(body, span, &[kept, &live_message(prompt, history)]);
    }
    let content = live_text(prompt, history);
    let mut out = Vec::with_capacity(body.len() + kept.len() + content.len());
    out.extend_from_slice(&body[..span.0]);
    out.push(b'"');
    out.extend_from_slice(kept);
    out.extend_from_slice(&escaped(content));
    out.push(b'"');
    out.extend_from_slice(&body[span.1..]);
    out
}

/// `--live-answers`: the new part of a synthesized turn, the words of its
/// prompt past the session's history (`history` tokens: the words are one
/// token each), as one user message.
pub fn live_message(prompt: &str, history: u64) -> Vec<u8> {
    json!({"role": "user", "content": live_text(prompt, history)})
        .to_string()
        .into_bytes()
}

/// The words of a synthesized prompt past `history` tokens.
fn live_text(prompt: &str, history: u64) -> &str {
    // Words start with their space: " apple".
    let starts: Vec<usize> = prompt
        .char_indices()
        .filter(|&(i, c)| c == ' ' && (i == 0 || !prompt[..i].ends_with(' ')))
        .map(|(i, _)| i)
        .collect();
    let from = starts
        .get(usize::try_from(history).unwrap_or(usize::MAX))
        .map_or(prompt.len(), |&i| i);
    &prompt[from..]
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
        let mut t = Transcript::new(Endpoint::Chat);
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
            t.message(|_| panic!("no id made up")).unwrap(),
            json!({"role": "assistant", "content": "Hello", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":1}"}}]})
        );
    }

    #[test]
    fn a_whole_answer_with_only_tool_calls_has_null_content() {
        let mut t = Transcript::new(Endpoint::Chat);
        t.take(
            br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"[]"}}]}}]}"#,
        );
        assert_eq!(
            t.message(|_| panic!("no id made up")).unwrap(),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[]"}}]})
        );
        assert_eq!(Transcript::new(Endpoint::Chat).message(|_| {}), None);
    }

    #[test]
    fn calls_without_a_usable_id_get_unique_made_up_ones() {
        let mut t = Transcript::new(Endpoint::Chat);
        // No id, an empty one, a number, a good one, the good one again.
        for call in [
            r#"{"index":0,"function":{"name":"a","arguments":"{}"}}"#,
            r#"{"index":1,"id":"","function":{"name":"b","arguments":"{}"}}"#,
            r#"{"index":2,"id":7,"function":{"name":"c","arguments":"{}"}}"#,
            r#"{"index":3,"id":"live_1","function":{"name":"d","arguments":"{}"}}"#,
            r#"{"index":4,"id":"live_1","function":{"name":"e","arguments":"{}"}}"#,
        ] {
            t.take(
                format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{call}]}}}}]}}"#)
                    .as_bytes(),
            );
        }
        let mut told = 0;
        let m = t.message(|n| told = n).unwrap();
        assert_eq!(told, 4);
        let ids: Vec<&str> = m["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        // The made-up ids count up from where the process is; each is new.
        assert_eq!(ids[3], "live_1");
        let made: Vec<u64> = [0, 1, 2, 4]
            .iter()
            .map(|&i| {
                ids[i]
                    .strip_prefix("call_tracekit_")
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(made.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
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
    fn recorded_tool_results_go_under_the_live_answers_call_ids_in_order() {
        let answer = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "live_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "live_b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]});
        let kept = continued(br#"[{"role":"user","content":"go"}]"#, Some(&answer));
        // The recorded results answer rec_2 first, then rec_1 (twice);
        // rec_3 is called and answered within the turn itself.
        let body = br#"{"messages":[{"role":"tool","tool_call_id":"rec_2","content":"x"},{"role":"tool","tool_call_id":"rec_1","content":"y"},{"role":"tool","tool_call_id":"rec_1","content":"z"},{"role":"assistant","content":null,"tool_calls":[{"id":"rec_3","type":"function","function":{"name":"h","arguments":"{}"}}]},{"role":"tool","tool_call_id":"rec_3","content":"w"}]}"#;
        let spliced = splice(body, (12, body.len() - 1), &kept);
        let sent: Value = serde_json::from_slice(&spliced).unwrap();
        let ids: Vec<&str> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m.get("tool_call_id").and_then(Value::as_str))
            .collect();
        assert_eq!(ids, ["live_a", "live_b", "live_b", "rec_3"]);
        assert_eq!(sent["messages"][1], answer);
        // Results that already carry the live ids, and turns without
        // results, are sent byte for byte.
        let own = br#"{"role":"tool","tool_call_id":"live_a","content":"x"}"#;
        assert_eq!(rebind(own, &kept), None);
        assert_eq!(rebind(br#"{"role":"user","content":"more"}"#, &kept), None);
        // More results than live calls: the extra keep their ids.
        let own = br#"{"role":"tool","tool_call_id":"r1","content":"1"},{"role":"tool","tool_call_id":"r2","content":"2"},{"role":"tool","tool_call_id":"r3","content":"3"}"#;
        assert_eq!(
            text(&rebind(own, &kept).unwrap()),
            r#"{"role":"tool","tool_call_id":"live_a","content":"1"},{"role":"tool","tool_call_id":"live_b","content":"2"},{"role":"tool","tool_call_id":"r3","content":"3"}"#
        );
        // A live answer without calls changes nothing.
        let plain = continued(b"[]", Some(&json!({"role": "assistant", "content": "ok"})));
        assert_eq!(rebind(own, &plain), None);
    }

    #[test]
    fn a_live_completions_turn_is_the_previous_prompt_the_answer_and_the_new_text() {
        let answer = json!({"role": "assistant", "content": " six \"seven\""});
        let kept = continued(br#"" one two three""#, Some(&answer));
        assert_eq!(text(&kept), r#" one two three six \"seven\""#);
        let body =
            br#"{"model":"m","prompt":" one two three four five six seven eight","max_tokens":2}"#;
        let start = body.windows(9).position(|w| w == br#""prompt":"#).unwrap() + 9;
        let end = body.windows(6).position(|w| w == br#"","max"#).unwrap() + 1;
        // History: 3 prompt tokens and 2 answered: the new words from the sixth.
        assert_eq!(
            text(&live_turn(
                body,
                (start, end),
                &kept,
                " one two three four five six seven eight",
                5
            )),
            r#"{"model":"m","prompt":" one two three six \"seven\" six seven eight","max_tokens":2}"#
        );
        // A chat turn: the conversation, then the new words as a user message.
        let body = br#"{"messages":[{"role":"user","content":"x"}]}"#;
        let kept = br#"{"role":"user","content":"a"}"#;
        assert_eq!(
            text(&live_turn(body, (12, body.len() - 1), kept, " a b c", 1)),
            r#"{"messages":[{"role":"user","content":"a"},{"role":"user","content":" b c"}]}"#
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
