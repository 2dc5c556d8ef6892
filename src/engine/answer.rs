//! The measured fields of an answer object (a stream chunk or a whole
//! body), read straight from its bytes. Building a `serde_json::Value` per
//! chunk was the costliest part of reading a stream. Every reader here
//! takes any JSON value: a field of an unexpected type counts as absent,
//! the same as looking it up in a `Value` would, so only malformed JSON is
//! an error. Where a key repeats, the last one counts, as in a `Value`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

use crate::json::{Cursor, Grammar};

/// An answer object's measured fields; all absent for a non-object.
#[derive(Debug, Default)]
pub struct Answer<'a> {
    /// `error`, when present and not null.
    pub error: Option<Value>,
    /// `choices`, when it is an array.
    pub choices: Option<Vec<Choice<'a>>>,
    /// `usage`, when it is an object.
    pub usage: Option<Usage>,
}

/// One element of `choices`.
#[derive(Debug, Default)]
pub struct Choice<'a> {
    /// Non-empty `text` (completions).
    text: bool,
    /// `delta` (chat streams), when present, even null.
    delta: Option<Parts>,
    /// `message` (whole chat answers), when present, even null.
    message: Option<Parts>,
    /// `finish_reason`, when it is a string.
    pub finish_reason: Option<Cow<'a, str>>,
}

impl Choice<'_> {
    /// Non-empty text, reasoning or tool call, in the delta (or, without
    /// one, the message) or as completions text.
    pub fn has_content(&self) -> bool {
        self.text
            || self
                .delta
                .as_ref()
                .or(self.message.as_ref())
                .is_some_and(|p| p.any())
    }
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

/// `usage`: the token counts, each when it is a non-negative integer.
#[derive(Debug, Default)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

impl<'a> Answer<'a> {
    /// Read an answer from JSON text; an error only for malformed JSON.
    /// Most answers are read by [`Scan`]; serde reads the others (and says
    /// what is wrong with malformed ones).
    pub fn parse(bytes: &'a [u8]) -> serde_json::Result<Answer<'a>> {
        match scan(bytes) {
            Some(a) => Ok(a),
            None => serde_json::from_slice(bytes),
        }
    }
}

/// A single pass over an answer's bytes, for the shapes servers send: it
/// takes three quarters of the instructions serde's reader takes (3.7k
/// instead of 5.0k for a 150-byte chunk), which matters because it runs
/// once per streamed token. It reads with [`crate::json::Cursor`], which
/// validates everything it passes over as JSON, and gives up (`None`) on
/// anything it is not sure to read as serde would: an `error` member,
/// escapes in keys or in `finish_reason`, surrogate escapes, a negative or
/// overlong count, numbers serde might find out of range, deep nesting, a
/// top level that is not an object. serde then reads the text, so both
/// readers always agree (the differential harness of `crate::json` checks
/// this on thousands of mangled answers).
type Scan<'a> = Cursor<'a, Answers>;

/// What the single pass reads itself (see [`Scan`]).
struct Answers;

impl Grammar for Answers {
    /// Two digits: `1e99` is in f64's range whatever its mantissa.
    const EXPONENT_DIGITS: usize = 2;
    const NUMBER_LEN: usize = 100;
    /// serde refuses a lone one in the strings it reads (`finish_reason`).
    const SURROGATES: bool = false;
    /// Below serde's limit of 128.
    const DEPTH: u32 = 100;
}

fn scan(b: &[u8]) -> Option<Answer<'_>> {
    // With the whole text valid UTF-8, so is every string in it.
    std::str::from_utf8(b).ok()?;
    let mut s = Scan::new(b);
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    let mut a = Answer::default();
    s.object(|s, key| {
        match key {
            b"error" => return None,
            b"choices" => a.choices = choices(s)?,
            b"usage" => a.usage = usage(s)?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    s.end().then_some(a)
}

fn choices<'a>(s: &mut Scan<'a>) -> Option<Option<Vec<Choice<'a>>>> {
    if s.peek()? != b'[' {
        s.skip()?;
        return Some(None);
    }
    let mut v = Vec::new();
    s.array(|s| {
        v.push(choice(s)?);
        Some(())
    })?;
    Some(Some(v))
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

fn usage(s: &mut Scan) -> Option<Option<Usage>> {
    if s.peek()? != b'{' {
        s.skip()?;
        return Some(None);
    }
    let mut u = Usage::default();
    s.object(|s, key| {
        match key {
            b"prompt_tokens" => u.prompt_tokens = count(s)?,
            b"completion_tokens" => u.completion_tokens = count(s)?,
            b"prompt_tokens_details" => u.cached_tokens = details(s)?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(Some(u))
}

fn details(s: &mut Scan) -> Option<Option<u64>> {
    if s.peek()? != b'{' {
        s.skip()?;
        return Some(None);
    }
    let mut cached = None;
    s.object(|s, key| {
        match key {
            b"cached_tokens" => cached = count(s)?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(cached)
}

/// A non-empty string or array.
fn nonempty(s: &mut Scan) -> Option<bool> {
    match s.peek()? {
        // Any escape stands for at least one character.
        b'"' => Some(!s.string()?.0.is_empty()),
        b'[' => {
            let mut any = false;
            s.array(|s| {
                any = true;
                s.skip()
            })?;
            Some(any)
        }
        _ => s.skip().map(|()| false),
    }
}

/// A string without escapes (those are left to serde).
fn text<'a>(s: &mut Scan<'a>) -> Option<Option<Cow<'a, str>>> {
    if s.peek()? != b'"' {
        s.skip()?;
        return Some(None);
    }
    match s.string()? {
        (raw, false) => Some(Some(Cow::Borrowed(std::str::from_utf8(raw).ok()?))),
        (_, true) => None,
    }
}

/// A non-negative integer; other numbers and types are none.
fn count(s: &mut Scan) -> Option<Option<u64>> {
    match s.peek()? {
        b'0'..=b'9' => {
            let start = s.i;
            s.number()?;
            let text = &s.b[start..s.i];
            if !text.iter().all(u8::is_ascii_digit) {
                return Some(None);
            }
            let mut n = 0u64;
            for &d in text {
                n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            }
            Some(Some(n))
        }
        b'-' => None,
        _ => s.skip().map(|()| None),
    }
}

/// A type read from a value of any JSON type: each kind it does not
/// override is consumed and gives the default.
trait Lenient<'de>: Sized + Default {
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }

    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }

    fn str(_: &str) -> Self {
        Self::default()
    }

    fn borrowed_str(s: &'de str) -> Self {
        Self::str(s)
    }

    fn u64(_: u64) -> Self {
        Self::default()
    }

    fn i64(_: i64) -> Self {
        Self::default()
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::seq(seq)
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<T, E> {
        Ok(T::borrowed_str(s))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        Ok(T::str(s))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Ok(T::u64(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Ok(T::i64(v))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

macro_rules! deserialize_leniently {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(LenientVisitor(PhantomData))
            }
        }
    )*};
}

deserialize_leniently!(
    Answer<'de>,
    Choices<'de>,
    Choice<'de>,
    Parts,
    Object<Usage>,
    Object<Details>,
    NonEmpty,
    Count,
    Text<'de>
);

/// Read an object: `field` is called with the position in `names` of each
/// key found there and must read its value; other values are skipped.
fn fields<'de, A: MapAccess<'de>>(
    mut map: A,
    names: &'static [&'static str],
    mut field: impl FnMut(usize, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    while let Some(known) = map.next_key_seed(KeySeed(names))? {
        match known {
            Some(i) => field(i, &mut map)?,
            None => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(())
}

/// A key, as its position in a list of names (no copy of the key is made).
struct KeySeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        // As bytes: a key that matches no name needs no UTF-8 check.
        d.deserialize_bytes(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_bytes<E: de::Error>(self, key: &[u8]) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| n.as_bytes() == key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        self.visit_bytes(key.as_bytes())
    }
}

impl<'de> Lenient<'de> for Answer<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut a = Answer::default();
        fields(map, &["error", "choices", "usage"], |i, map| {
            match i {
                0 => a.error = Some(map.next_value::<Value>()?).filter(|e| !e.is_null()),
                1 => a.choices = map.next_value::<Choices>()?.0,
                _ => a.usage = map.next_value::<Object<Usage>>()?.0,
            }
            Ok(())
        })?;
        Ok(a)
    }
}

/// `Some` for an object.
struct Object<T>(Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

/// An object's fields, read by `Object<Self>`: `field` reads the value of
/// the key `NAMES[i]`.
trait ObjectFields<'de>: Sized + Default {
    const NAMES: &'static [&'static str];

    fn field<A: MapAccess<'de>>(&mut self, i: usize, map: &mut A) -> Result<(), A::Error>;
}

impl<'de, T: ObjectFields<'de>> Lenient<'de> for Object<T> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut t = T::default();
        fields(map, T::NAMES, |i, map| t.field(i, map))?;
        Ok(Object(Some(t)))
    }
}

impl<'de> ObjectFields<'de> for Usage {
    const NAMES: &'static [&'static str] = &[
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
    ];

    fn field<A: MapAccess<'de>>(&mut self, i: usize, map: &mut A) -> Result<(), A::Error> {
        match i {
            0 => self.prompt_tokens = map.next_value::<Count>()?.0,
            1 => self.completion_tokens = map.next_value::<Count>()?.0,
            _ => self.cached_tokens = map.next_value::<Object<Details>>()?.0.and_then(|d| d.0),
        }
        Ok(())
    }
}

/// `prompt_tokens_details`: its `cached_tokens`.
#[derive(Default)]
struct Details(Option<u64>);

impl<'de> ObjectFields<'de> for Details {
    const NAMES: &'static [&'static str] = &["cached_tokens"];

    fn field<A: MapAccess<'de>>(&mut self, _: usize, map: &mut A) -> Result<(), A::Error> {
        self.0 = map.next_value::<Count>()?.0;
        Ok(())
    }
}

/// `choices`: `Some` for an array.
#[derive(Default)]
struct Choices<'a>(Option<Vec<Choice<'a>>>);

impl<'de> Lenient<'de> for Choices<'de> {
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
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
            &["text", "delta", "message", "finish_reason"],
            |i, map| {
                match i {
                    0 => c.text = map.next_value::<NonEmpty>()?.0,
                    1 => c.delta = Some(map.next_value::<Parts>()?),
                    2 => c.message = Some(map.next_value::<Parts>()?),
                    _ => c.finish_reason = map.next_value::<Text>()?.0,
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

/// Whether a value is a non-empty string or array.
#[derive(Default)]
struct NonEmpty(bool);

impl<'de> Lenient<'de> for NonEmpty {
    fn str(s: &str) -> Self {
        NonEmpty(!s.is_empty())
    }

    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let any = seq.next_element::<IgnoredAny>()?.is_some();
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(NonEmpty(any))
    }
}

/// A non-negative integer (as `Value::as_u64` takes it).
#[derive(Default)]
struct Count(Option<u64>);

impl Lenient<'_> for Count {
    fn u64(v: u64) -> Self {
        Count(Some(v))
    }

    fn i64(v: i64) -> Self {
        Count(u64::try_from(v).ok())
    }
}

/// A string.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de> Lenient<'de> for Text<'de> {
    fn str(s: &str) -> Self {
        Text(Some(Cow::Owned(s.to_string())))
    }

    fn borrowed_str(s: &'de str) -> Self {
        Text(Some(Cow::Borrowed(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error, each choice's content and finish reason, the usage.
    type Seen = (
        Option<Value>,
        Option<Vec<(bool, Option<String>)>>,
        Option<[Option<u64>; 3]>,
    );

    /// What the answer holds, worked out from a `Value` by lookups.
    fn by_lookup(v: &Value) -> Seen {
        let nonempty = |v: Option<&Value>| match v {
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        let error = v.get("error").filter(|e| !e.is_null()).cloned();
        let choices = v.get("choices").and_then(Value::as_array).map(|cs| {
            cs.iter()
                .map(|c| {
                    let content = nonempty(c.get("text"))
                        || c.get("delta")
                            .or_else(|| c.get("message"))
                            .is_some_and(|d| Parts::FIELDS.iter().any(|k| nonempty(d.get(*k))));
                    let finish = c
                        .get("finish_reason")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    (content, finish)
                })
                .collect()
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
        let choices = a.choices.map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c.has_content(),
                        c.finish_reason.as_ref().map(|f| f.to_string()),
                    )
                })
                .collect()
        });
        let usage = a
            .usage
            .map(|u| [u.prompt_tokens, u.completion_tokens, u.cached_tokens]);
        (a.error, choices, usage)
    }

    fn read(text: &str) -> Seen {
        seen(Answer::parse(text.as_bytes()).unwrap())
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
        ];
        for text in cases {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(read(text), by_lookup(&v), "{text}");
        }
    }

    const SHAPES: [&str; 5] = [
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795454079,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"h\u00e9 \"x\"\n"},"logprobs":{"content":[{"token":"a","logprob":-9.5367431640625e-07,"bytes":[104]}]},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":459,"completion_tokens":1,"total_tokens":460,"prompt_tokens_details":{"cached_tokens":458}},"timings":{"prompt_ms":1.387,"ok":true,"x":false}}"#,
        r#" { "choices" : [ { "text" : "" , "finish_reason" : "length" } , 3 , null ] } "#,
        r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":0,"completion_tokens":12.0}}"#,
        r#"{"choices":[{"delta":{"reasoning":"","reasoning_content":"think"}}],"usage":{"prompt_tokens":18446744073709551615}}"#,
    ];

    /// The answers servers send are read in one pass, not by serde.
    #[test]
    fn usual_answers_take_the_single_pass() {
        for text in SHAPES {
            let fast = scan(text.as_bytes()).map(seen);
            let slow = serde_json::from_str::<Answer>(text).map(seen).unwrap();
            assert_eq!(fast, Some(slow), "{text}");
        }
    }

    /// Whatever the bytes, when the single pass reads an answer, serde
    /// reads the same one from them: mangled answers (every prefix, and
    /// each byte replaced by bytes that matter to JSON) never tell the two
    /// apart.
    #[test]
    fn the_single_pass_reads_what_serde_reads() {
        let tally = crate::json::differential::hold(
            &SHAPES,
            |bytes| scan(bytes).map(seen),
            |bytes| serde_json::from_slice::<Answer>(bytes).ok().map(seen),
        );
        // Most mangled answers that are still JSON take the single pass.
        assert!(tally.both > 5 * tally.declined, "{tally:?}");
    }

    #[test]
    fn malformed_json_is_an_error() {
        for text in [r#"{"choices":[{"delta":"#, "{not json", r#"{"a":1} x"#, ""] {
            assert!(Answer::parse(text.as_bytes()).is_err(), "{text}");
        }
    }
}
