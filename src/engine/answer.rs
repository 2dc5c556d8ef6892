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
        match Scan::answer(bytes) {
            Some(a) => Ok(a),
            None => serde_json::from_slice(bytes),
        }
    }
}

/// A single pass over an answer's bytes, for the shapes servers send: it
/// takes three quarters of the instructions serde's reader takes (3.7k
/// instead of 5.0k for a 150-byte chunk), which matters because it runs
/// once per streamed token. It validates everything it passes over as
/// JSON, and gives up (`None`) on anything it is not sure to read as serde
/// would: an `error` member, escapes in keys or in `finish_reason`,
/// surrogate escapes, a negative or overlong count, numbers serde might
/// find out of range, deep nesting, a top level that is not an object.
/// serde then reads the text, so both readers always agree (a test checks
/// this on thousands of mangled answers).
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

/// Nesting beyond this is left to serde (whose limit is 128).
const SCAN_DEPTH: u32 = 100;

impl<'a> Scan<'a> {
    fn answer(b: &'a [u8]) -> Option<Answer<'a>> {
        // With the whole text valid UTF-8, so is every string in it.
        std::str::from_utf8(b).ok()?;
        let mut s = Scan { b, i: 0, depth: 0 };
        s.ws();
        if s.peek()? != b'{' {
            return None;
        }
        let mut a = Answer::default();
        s.object(|s, key| {
            match key {
                b"error" => return None,
                b"choices" => a.choices = s.choices()?,
                b"usage" => a.usage = s.usage()?,
                _ => s.skip()?,
            }
            Some(())
        })?;
        s.ws();
        (s.i == b.len()).then_some(a)
    }

    fn choices(&mut self) -> Option<Option<Vec<Choice<'a>>>> {
        if self.peek()? != b'[' {
            self.skip()?;
            return Some(None);
        }
        let mut v = Vec::new();
        self.array(|s| {
            v.push(s.choice()?);
            Some(())
        })?;
        Some(Some(v))
    }

    fn choice(&mut self) -> Option<Choice<'a>> {
        let mut c = Choice::default();
        if self.peek()? != b'{' {
            self.skip()?;
            return Some(c);
        }
        self.object(|s, key| {
            match key {
                b"text" => c.text = s.nonempty()?,
                b"delta" => c.delta = Some(s.parts()?),
                b"message" => c.message = Some(s.parts()?),
                b"finish_reason" => c.finish_reason = s.text()?,
                _ => s.skip()?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn parts(&mut self) -> Option<Parts> {
        let mut p = Parts::default();
        if self.peek()? != b'{' {
            self.skip()?;
            return Some(p);
        }
        self.object(|s, key| {
            match Parts::FIELDS.iter().position(|f| f.as_bytes() == key) {
                Some(i) => p.nonempty[i] = s.nonempty()?,
                None => s.skip()?,
            }
            Some(())
        })?;
        Some(p)
    }

    fn usage(&mut self) -> Option<Option<Usage>> {
        if self.peek()? != b'{' {
            self.skip()?;
            return Some(None);
        }
        let mut u = Usage::default();
        self.object(|s, key| {
            match key {
                b"prompt_tokens" => u.prompt_tokens = s.count()?,
                b"completion_tokens" => u.completion_tokens = s.count()?,
                b"prompt_tokens_details" => u.cached_tokens = s.details()?,
                _ => s.skip()?,
            }
            Some(())
        })?;
        Some(Some(u))
    }

    fn details(&mut self) -> Option<Option<u64>> {
        if self.peek()? != b'{' {
            self.skip()?;
            return Some(None);
        }
        let mut cached = None;
        self.object(|s, key| {
            match key {
                b"cached_tokens" => cached = s.count()?,
                _ => s.skip()?,
            }
            Some(())
        })?;
        Some(cached)
    }

    /// A non-empty string or array.
    fn nonempty(&mut self) -> Option<bool> {
        match self.peek()? {
            // Any escape stands for at least one character.
            b'"' => Some(!self.string()?.0.is_empty()),
            b'[' => {
                let mut any = false;
                self.array(|s| {
                    any = true;
                    s.skip()
                })?;
                Some(any)
            }
            _ => self.skip().map(|()| false),
        }
    }

    fn text(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? != b'"' {
            self.skip()?;
            return Some(None);
        }
        match self.string()? {
            (raw, false) => Some(Some(Cow::Borrowed(std::str::from_utf8(raw).ok()?))),
            (_, true) => None,
        }
    }

    /// A non-negative integer; other numbers and types are none.
    fn count(&mut self) -> Option<Option<u64>> {
        match self.peek()? {
            b'0'..=b'9' => {
                let start = self.i;
                self.number()?;
                let text = &self.b[start..self.i];
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
            _ => self.skip().map(|()| None),
        }
    }

    /// Any value, checked and passed over.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|s, _| s.skip()),
            b'[' => self.array(|s| s.skip()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object; `member` reads each value, given its key.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.open(b'{')?;
        self.ws();
        if self.peek()? != b'}' {
            loop {
                self.ws();
                let (key, escaped) = self.string()?;
                if escaped {
                    return None;
                }
                self.ws();
                if self.bump()? != b':' {
                    return None;
                }
                self.ws();
                member(self, key)?;
                self.ws();
                if self.peek()? != b',' {
                    break;
                }
                self.i += 1;
            }
        }
        self.close(b'}')
    }

    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.open(b'[')?;
        self.ws();
        if self.peek()? != b']' {
            loop {
                self.ws();
                element(self)?;
                self.ws();
                if self.peek()? != b',' {
                    break;
                }
                self.i += 1;
            }
        }
        self.close(b']')
    }

    fn open(&mut self, c: u8) -> Option<()> {
        self.depth += 1;
        (self.bump()? == c && self.depth <= SCAN_DEPTH).then_some(())
    }

    fn close(&mut self, c: u8) -> Option<()> {
        self.depth -= 1;
        (self.bump()? == c).then_some(())
    }

    /// A string's raw bytes between its quotes, and whether it has escapes.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        if self.bump()? != b'"' {
            return None;
        }
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i = crate::json::string_stop(self.b, self.i)?;
            match self.b[self.i] {
                b'"' => {
                    let raw = &self.b[start..self.i];
                    self.i += 1;
                    return Some((raw, escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return None,
            }
        }
    }

    /// One escape, at its backslash; surrogates are left to serde.
    fn escape(&mut self) -> Option<()> {
        match *self.b.get(self.i + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
            b'u' => {
                let hex = self.b.get(self.i + 2..self.i + 6)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) || matches!(hex[0], b'd' | b'D') {
                    return None;
                }
                self.i += 6;
            }
            _ => return None,
        }
        Some(())
    }

    /// A number in JSON's grammar, short enough to be in f64's range.
    fn number(&mut self) -> Option<()> {
        let start = self.i;
        if self.peek()? == b'-' {
            self.i += 1;
        }
        match self.bump()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            let digits = self.i;
            self.digits();
            if !(1..=2).contains(&(self.i - digits)) {
                return None;
            }
        }
        (self.i - start <= 100).then_some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
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
            let fast = Scan::answer(text.as_bytes()).map(seen);
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
        let swaps = b"\"\\{}[],:0-.eE+ \x01tnu9\xff";
        let (mut both, mut fast_only) = (0, 0);
        let mut check = |bytes: &[u8]| {
            if let Some(a) = Scan::answer(bytes) {
                let slow = serde_json::from_slice::<Answer>(bytes);
                assert!(slow.is_ok(), "{:?}", String::from_utf8_lossy(bytes));
                assert_eq!(
                    seen(a),
                    seen(slow.unwrap()),
                    "{:?}",
                    String::from_utf8_lossy(bytes)
                );
                both += 1;
            } else {
                fast_only += usize::from(serde_json::from_slice::<Answer>(bytes).is_ok());
            }
        };
        for text in SHAPES {
            let text = text.as_bytes();
            for cut in 0..=text.len() {
                check(&text[..cut]);
            }
            for at in 0..text.len() {
                for &b in swaps {
                    let mut t = text.to_vec();
                    t[at] = b;
                    check(&t);
                    t.insert(at, b);
                    check(&t);
                }
            }
        }
        // Most mangled answers that are still JSON take the single pass.
        assert!(both > 5 * fast_only, "{both} {fast_only}");
    }

    #[test]
    fn malformed_json_is_an_error() {
        for text in [r#"{"choices":[{"delta":"#, "{not json", r#"{"a":1} x"#, ""] {
            assert!(Answer::parse(text.as_bytes()).is_err(), "{text}");
        }
    }
}
