//! What the endpoints whose results are `choices` (completions, chat)
//! share: the answer reader (one pass on the bytes, serde for the rest:
//! see `super::read`) and the simulated server's whole answer.

use std::borrow::Cow;

use serde::de::MapAccess;
use serde_json::{Value, json};

use super::read::{
    self, Lenient, NonEmpty, Scan, Text, deserialize_leniently, fields, nonempty, text,
};
use super::{Answer, Reply};

/// Read an answer object of `choices`: an error only for malformed JSON.
/// A choice that failed (a choice-level `error`, or `finish_reason`
/// "error", as vLLM and OpenRouter end a stream that failed midway) makes
/// the answer an error, unless the answer has one of its own.
pub fn read(bytes: &[u8]) -> serde_json::Result<Answer<'_>> {
    read::answer(bytes, scan).map(|ChoicesAnswer(a)| a)
}

/// The error of a choice ended by `finish_reason` "error" without one.
fn finished_by_error() -> Value {
    json!({"message": "the server ended the answer with finish_reason \"error\""})
}

/// A whole answer: `object`, and `choice` as its one choice.
pub fn answer(object: &str, choice: Value, reply: &Reply) -> Value {
    json!({
        "id": format!("cmpl-{}", reply.n), "object": object, "created": 0, "model": reply.model,
        "choices": [choice], "usage": reply.usage(),
    })
}

/// A stream chunk of `object` with `choice` as its one choice (none for
/// null), and the usage when `usage`.
pub fn chunk(object: &str, reply: &Reply, choice: Value, usage: bool) -> String {
    let choices = if choice.is_null() {
        json!([])
    } else {
        json!([choice])
    };
    let mut c = json!({"id": format!("cmpl-{}", reply.n), "object": object, "created": 0,
                       "model": reply.model, "choices": choices});
    if usage {
        c["usage"] = reply.usage();
    }
    super::sse(None, &c)
}

/// The end of a stream: a chunk of the usage, when asked for, and `[DONE]`.
pub fn closing(object: &str, reply: &Reply, usage: bool) -> Vec<String> {
    let mut out = Vec::new();
    if usage {
        out.push(chunk(object, reply, Value::Null, true));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// What an answer of `choices` adds to the assistant message: its first
/// choice's text (`content` of the delta or message, or completions'
/// `text`) and tool calls (numbered by `index` in streams, in order in a
/// whole message).
pub fn transcribe<'v>(v: &'v Value, said: &mut dyn FnMut(super::Said<'v>)) -> bool {
    let Some(choice) = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return false;
    };
    let part = choice.get("delta").or_else(|| choice.get("message"));
    if let Some(text) = part
        .and_then(|p| p.get("content"))
        .or_else(|| choice.get("text"))
        .and_then(Value::as_str)
    {
        said(super::Said::Text(text));
    }
    let calls = part
        .and_then(|p| p.get("tool_calls"))
        .and_then(Value::as_array);
    for (n, call) in calls.into_iter().flatten().enumerate() {
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(n as u64);
        let f = call.get("function");
        let text = |v: Option<&'v Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_str);
        said(super::Said::Call {
            key: index.to_string(),
            id: text(Some(call), "id"),
            name: text(f, "name"),
            arguments: text(f, "arguments").map(Cow::Borrowed),
        });
    }
    true
}

/// One element of `choices`.
#[derive(Debug, Default)]
struct Choice<'a> {
    /// Non-empty `text` (completions).
    text: bool,
    /// `delta` (chat streams), when present, even null.
    delta: Option<Parts>,
    /// `message` (whole chat answers), when present, even null.
    message: Option<Parts>,
    /// `finish_reason`, when it is a string.
    finish_reason: Option<Cow<'a, str>>,
    /// `error`, when present and not null.
    error: Option<Value>,
}

impl<'a> Choice<'a> {
    /// Non-empty text, reasoning or tool call, in the delta (or, without
    /// one, the message) or as completions text.
    fn has_content(&self) -> bool {
        self.text
            || self
                .delta
                .as_ref()
                .or(self.message.as_ref())
                .is_some_and(|p| p.any())
    }

    /// Count the choice into the answer's figures; the first choice that
    /// failed gives `failed`.
    fn tally(self, a: &mut Answer<'a>, failed: &mut Option<Value>) {
        a.content |= self.has_content();
        if failed.is_none() {
            *failed = self.error.or_else(|| {
                (self.finish_reason.as_deref() == Some("error")).then(finished_by_error)
            });
        }
        if let Some(f) = self.finish_reason {
            a.finish_reason = Some(f);
        }
        *a.results.get_or_insert(0) += 1;
    }
}

/// The answer's own error, else its failed choice's.
fn with_failed(mut a: Answer<'_>, failed: Option<Value>) -> Answer<'_> {
    if a.error.is_none() {
        a.error = failed;
    }
    a
}

/// Which content fields of a delta or message are non-empty.
#[derive(Debug, Default)]
struct Parts {
    /// `content`, `reasoning_content`, `reasoning`, `tool_calls`.
    nonempty: [bool; 4],
}

impl Parts {
    const FIELDS: [&'static str; 4] = ["content", "reasoning_content", "reasoning", "tool_calls"];

    fn any(&self) -> bool {
        self.nonempty.iter().any(|&b| b)
    }
}

/// The single pass: it takes three quarters of the instructions serde's
/// reader takes (3.7k instead of 5.0k for a 150-byte chunk), which matters
/// because it runs once per streamed token.
fn scan(b: &[u8]) -> Option<ChoicesAnswer<'_>> {
    let mut failed = None;
    let a = read::scan(b, b"choices", |s, a| choices(s, a, &mut failed))?;
    Some(ChoicesAnswer(with_failed(a, failed)))
}

/// `choices`, tallied into `a` when it is an array (a repeated key
/// counts afresh, as the last one wins in a `Value`).
fn choices<'a>(s: &mut Scan<'a>, a: &mut Answer<'a>, failed: &mut Option<Value>) -> Option<()> {
    (a.results, a.content, a.finish_reason, *failed) = (None, false, None, None);
    if s.peek()? != b'[' {
        return s.skip();
    }
    a.results = Some(0);
    s.array(|s| {
        choice(s)?.tally(a, failed);
        Some(())
    })
}

fn choice<'a>(s: &mut Scan<'a>) -> Option<Choice<'a>> {
    let mut c = Choice::default();
    if s.peek()? != b'{' {
        s.skip()?;
        return Some(c);
    }
    s.object(|s, key| {
        match key {
            b"text" => c.text = nonempty(s)?,
            b"delta" => c.delta = Some(parts(s)?),
            b"message" => c.message = Some(parts(s)?),
            b"finish_reason" => c.finish_reason = text(s)?,
            // A choice's error is rare: serde reads what it says.
            b"error" if s.peek()? == b'n' => s.skip()?,
            b"error" => return None,
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(c)
}

fn parts(s: &mut Scan) -> Option<Parts> {
    let mut p = Parts::default();
    if s.peek()? != b'{' {
        s.skip()?;
        return Some(p);
    }
    s.object(|s, key| {
        match Parts::FIELDS.iter().position(|f| f.as_bytes() == key) {
            Some(i) => p.nonempty[i] = nonempty(s)?,
            None => s.skip()?,
        }
        Some(())
    })?;
    Some(p)
}

/// An answer of `choices`, as serde reads it.
#[derive(Default)]
struct ChoicesAnswer<'a>(Answer<'a>);

deserialize_leniently!(ChoicesAnswer<'de>, Choices<'de>, Choice<'de>, Parts);

impl<'de> Lenient<'de> for ChoicesAnswer<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut failed = None;
        let a = read::answer_members(map, "choices", |map, a| {
            (a.results, a.content, a.finish_reason, failed) = (None, false, None, None);
            if let Some(cs) = map.next_value::<Choices>()?.0 {
                a.results = Some(0);
                cs.into_iter().for_each(|c| c.tally(a, &mut failed));
            }
            Ok(())
        })?;
        Ok(ChoicesAnswer(with_failed(a, failed)))
    }
}

/// `choices`: `Some` for an array.
#[derive(Default)]
struct Choices<'a>(Option<Vec<Choice<'a>>>);

impl<'de> Lenient<'de> for Choices<'de> {
    fn seq<A: serde::de::SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut v = Vec::new();
        while let Some(c) = seq.next_element::<Choice>()? {
            v.push(c);
        }
        Ok(Choices(Some(v)))
    }
}

impl<'de> Lenient<'de> for Choice<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut c = Choice::default();
        fields(
            map,
            &["text", "delta", "message", "finish_reason", "error"],
            |i, map| {
                match i {
                    0 => c.text = map.next_value::<NonEmpty>()?.0,
                    1 => c.delta = Some(map.next_value::<Parts>()?),
                    2 => c.message = Some(map.next_value::<Parts>()?),
                    3 => c.finish_reason = map.next_value::<Text>()?.0,
                    _ => c.error = read::error(map)?,
                }
                Ok(())
            },
        )?;
        Ok(c)
    }
}

impl<'de> Lenient<'de> for Parts {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut p = Parts::default();
        fields(map, &Parts::FIELDS, |i, map| {
            p.nonempty[i] = map.next_value::<NonEmpty>()?.0;
            Ok(())
        })?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error; the number of choices, whether any has content and the
    /// last finish reason; the usage.
    type Seen = (
        Option<Value>,
        Option<(usize, bool, Option<String>)>,
        Option<[Option<u64>; 3]>,
    );

    /// What the answer holds, worked out from a `Value` by lookups.
    fn by_lookup(v: &Value) -> Seen {
        let nonempty = |v: Option<&Value>| match v {
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        let failed = v.get("choices").and_then(Value::as_array).and_then(|cs| {
            cs.iter().find_map(|c| {
                c.get("error")
                    .filter(|e| !e.is_null())
                    .cloned()
                    .or_else(|| {
                        (c.get("finish_reason").and_then(Value::as_str) == Some("error"))
                            .then(finished_by_error)
                    })
            })
        });
        let error = v.get("error").filter(|e| !e.is_null()).cloned().or(failed);
        let choices = v.get("choices").and_then(Value::as_array).map(|cs| {
            let content = cs.iter().any(|c| {
                nonempty(c.get("text"))
                    || c.get("delta")
                        .or_else(|| c.get("message"))
                        .is_some_and(|d| Parts::FIELDS.iter().any(|k| nonempty(d.get(*k))))
            });
            let finish = cs
                .iter()
                .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
                .next_back()
                .map(str::to_string);
            (cs.len(), content, finish)
        });
        let usage = v.get("usage").filter(|u| u.is_object()).map(|u| {
            [
                u.get("prompt_tokens").and_then(Value::as_u64),
                u.get("completion_tokens").and_then(Value::as_u64),
                u.pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64),
            ]
        });
        (error, choices, usage)
    }

    /// What an answer holds, in the form `by_lookup` gives.
    fn seen(a: Answer) -> Seen {
        let choices = a.results.map(|n| {
            (
                n,
                a.content,
                a.finish_reason.as_ref().map(|f| f.to_string()),
            )
        });
        let usage = a
            .usage
            .map(|u| [u.prompt_tokens, u.completion_tokens, u.cached_tokens]);
        (a.error, choices, usage)
    }

    fn read(text: &str) -> Seen {
        seen(super::read(text.as_bytes()).unwrap())
    }

    #[test]
    fn agrees_with_lookups_in_a_value() {
        let cases = [
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":"h\u00e9"},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"x"}}],"usage":null}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"1"}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"text":"abc","finish_reason":"len\"gth"}]}"#,
            r#"{"choices":[{"text":""}],"usage":{"prompt_tokens":5,"completion_tokens":0}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
            r#"{"usage":{"prompt_tokens":-1,"completion_tokens":2.0,"prompt_tokens_details":null}}"#,
            r#"{"usage":{"prompt_tokens":"5","prompt_tokens_details":{"cached_tokens":[1]}}}"#,
            r#"{"usage":"none","choices":"none"}"#,
            r#"{"usage":{"prompt_tokens":1},"usage":7}"#,
            r#"{"choices":[{"delta":null,"message":{"content":"x"}}]}"#,
            r#"{"choices":[{"message":{"content":"x"}}]}"#,
            r#"{"choices":[{"message":{"content":[{"type":"text"}]}}]}"#,
            r#"{"choices":[{"delta":"text","text":5}]}"#,
            r#"{"choices":[1,null,"a",[],{}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":""}}]}"#,
            r#"{"choices":[{"finish_reason":"stop","finish_reason":1}]}"#,
            r#"{"error":{"message":"out of memory","code":500}}"#,
            r#"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"error":"bad","error":null}"#,
            r#"{"object":"chat.completion.chunk","id":"x","choices":[{"index":0,"logprobs":{"content":[{"token":"a"}]},"delta":{"reasoning":"r"}}]}"#,
            r#"[{"choices":[]}]"#,
            r#""text""#,
            "17",
            "null",
            r#"{"choices":[{"delta":{"content":{"nested":[1,{"deep":"x"}]}}}]}"#,
            // A stream that failed midway (vLLM, OpenRouter).
            r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"error","error":{"message":"engine dead","code":500}}]}"#,
            r#"{"choices":[{"delta":{"content":"x"},"error":null,"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"error":"bad"},{"finish_reason":"error"}]}"#,
            r#"{"error":{"message":"top"},"choices":[{"finish_reason":"error","error":{"message":"c"}}]}"#,
            r#"{"choices":[{"finish_reason":"error"}],"choices":[{"finish_reason":"stop"}],"error":null}"#,
        ];
        for text in cases {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(read(text), by_lookup(&v), "{text}");
        }
    }

    const SHAPES: [&str; 6] = [
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795454079,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"h\u00e9 \"x\"\n"},"logprobs":{"content":[{"token":"a","logprob":-9.5367431640625e-07,"bytes":[104]}]},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":459,"completion_tokens":1,"total_tokens":460,"prompt_tokens_details":{"cached_tokens":458}},"timings":{"prompt_ms":1.387,"ok":true,"x":false}}"#,
        r#" { "choices" : [ { "text" : "" , "finish_reason" : "length" } , 3 , null ] } "#,
        r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":0,"completion_tokens":12.0}}"#,
        r#"{"choices":[{"delta":{"reasoning":"","reasoning_content":"think"}}],"usage":{"prompt_tokens":18446744073709551615}}"#,
        r#"{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
    ];

    /// The answers servers send are read in one pass, not by serde.
    /// The usual answers take the single pass, and whatever the bytes,
    /// when the single pass reads an answer, serde reads the same one from
    /// them: mangled answers (every prefix, and each byte replaced by
    /// bytes that matter to JSON) never tell the two apart. Most mangled
    /// answers that are still JSON take the single pass.
    #[test]
    fn the_single_pass_reads_what_serde_reads() {
        let slow = |b: &[u8]| {
            serde_json::from_slice::<ChoicesAnswer>(b)
                .ok()
                .map(|a| seen(a.0))
        };
        crate::json::differential::hold_usual(&SHAPES, |b| scan(b).map(|a| seen(a.0)), slow, 5);
    }

    #[test]
    fn malformed_json_is_an_error() {
        for text in [r#"{"choices":[{"delta":"#, "{not json", r#"{"a":1} x"#, ""] {
            assert!(super::read(text.as_bytes()).is_err(), "{text}");
        }
    }
}
