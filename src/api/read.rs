//! What every endpoint's answer reader is made of: a single pass over the
//! answer's bytes on [`crate::json::Cursor`] for the shapes servers send,
//! and serde for the others, each reading any JSON value leniently (a field
//! of an unexpected type counts as absent, the same as looking it up in a
//! `Value` would; where a key repeats, the last one counts). Building a
//! `serde_json::Value` per chunk was the costliest part of reading a
//! stream.
//!
//! The single pass gives up (`None`) on anything it is not sure to read as
//! serde would: an `error` member, escapes in keys or in the strings it
//! keeps, surrogate escapes, a negative or overlong count, numbers serde
//! might find out of range, deep nesting, a top level that is not an
//! object. serde then reads the text, so both readers always agree (each
//! reader's tests hold them together with `crate::json::differential`,
//! which mangles answers and compares).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Answer, Usage};
use crate::json::{Cursor, Grammar};

/// The single pass's cursor (see the module's text).
pub type Scan<'a> = Cursor<'a, Answers>;

/// What the single pass reads itself.
pub struct Answers;

impl Grammar for Answers {
    /// Two digits: `1e99` is in f64's range whatever its mantissa.
    const EXPONENT_DIGITS: usize = 2;
    const NUMBER_LEN: usize = 100;
    /// serde refuses a lone one in the strings it reads (`finish_reason`).
    const SURROGATES: bool = false;
    /// Below serde's limit of 128.
    const DEPTH: u32 = 100;
}

/// An answer read by `fast` when it can, else by serde as `T` (which
/// says what is wrong with malformed text).
pub fn answer<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
    fast: impl FnOnce(&'a [u8]) -> Option<T>,
) -> serde_json::Result<T> {
    match fast(bytes) {
        Some(a) => Ok(a),
        None => serde_json::from_slice(bytes),
    }
}

/// The single pass over an answer object, what every endpoint's answer
/// has: `usage` is read, the member named `results` goes to `read_results`,
/// any other is skipped, and an `error` member gives up (serde then reads
/// what it says). `None` for anything else serde must look at.
pub fn scan<'a>(
    b: &'a [u8],
    results: &[u8],
    mut read_results: impl FnMut(&mut Scan<'a>, &mut Answer<'a>) -> Option<()>,
) -> Option<Answer<'a>> {
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
            b"usage" => a.usage = usage(s)?,
            k if k == results => read_results(s, &mut a)?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    s.end().then_some(a)
}

/// `usage`, when it is an object.
pub fn usage(s: &mut Scan) -> Option<Option<Usage>> {
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
pub fn nonempty(s: &mut Scan) -> Option<bool> {
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
pub fn text<'a>(s: &mut Scan<'a>) -> Option<Option<Cow<'a, str>>> {
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
pub trait Lenient<'de>: Sized + Default {
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

/// Read a [`Lenient`] type: what its `Deserialize` does.
pub fn lenient<'de, T: Lenient<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(LenientVisitor(PhantomData))
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

/// `impl Deserialize` for [`Lenient`] types.
macro_rules! deserialize_leniently {
    ($($t:ty),*) => {$(
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                crate::api::read::lenient(d)
            }
        }
    )*};
}
pub(super) use deserialize_leniently;

deserialize_leniently!(Object<Usage>, Object<Details>, NonEmpty, Count, Text<'de>);

/// `scan`'s reading, for serde: `error` and `usage` read, the member named
/// `results` given to `read_results`, any other skipped.
pub fn answer_members<'de, A: MapAccess<'de>>(
    map: A,
    results: &str,
    mut read_results: impl FnMut(&mut A, &mut Answer<'de>) -> Result<(), A::Error>,
) -> Result<Answer<'de>, A::Error> {
    let mut a = Answer::default();
    fields(map, &["error", results, "usage"], |i, map| {
        match i {
            0 => a.error = error(map)?,
            1 => read_results(map, &mut a)?,
            _ => a.usage = map.next_value::<Object<Usage>>()?.0,
        }
        Ok(())
    })?;
    Ok(a)
}

/// Read an object: `field` is called with the position in `names` of each
/// key found there and must read its value; other values are skipped.
pub fn fields<'de, A: MapAccess<'de>>(
    mut map: A,
    names: &[&str],
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
struct KeySeed<'n>(&'n [&'n str]);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        // As bytes: a key that matches no name needs no UTF-8 check.
        d.deserialize_bytes(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
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

/// `Some` for an object.
pub struct Object<T>(pub Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

/// An object's fields, read by `Object<Self>`: `field` reads the value of
/// the key `NAMES[i]`.
pub trait ObjectFields<'de>: Sized + Default {
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
pub struct Details(Option<u64>);

impl<'de> ObjectFields<'de> for Details {
    const NAMES: &'static [&'static str] = &["cached_tokens"];

    fn field<A: MapAccess<'de>>(&mut self, _: usize, map: &mut A) -> Result<(), A::Error> {
        self.0 = map.next_value::<Count>()?.0;
        Ok(())
    }
}

/// Whether a value is a non-empty string or array.
#[derive(Default)]
pub struct NonEmpty(pub bool);

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
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de> Lenient<'de> for Text<'de> {
    fn str(s: &str) -> Self {
        Text(Some(Cow::Owned(s.to_string())))
    }

    fn borrowed_str(s: &'de str) -> Self {
        Text(Some(Cow::Borrowed(s)))
    }
}

/// `error`, when present and not null, read by serde: the single pass
/// leaves answers with one to serde.
pub fn error<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<serde_json::Value>, A::Error> {
    Ok(Some(map.next_value::<serde_json::Value>()?).filter(|e| !e.is_null()))
}

/// The single pass over a typed stream event, an object with `type` (the
/// shape of Anthropic's and the Responses API's events): `member` reads
/// each other member, given its key, or gives up. The last `type` that is
/// a string counts; `None` also when it has escapes.
pub fn typed_event<'a>(
    b: &'a [u8],
    mut member: impl FnMut(&mut Scan<'a>, &'a [u8]) -> Option<()>,
) -> Option<Option<Cow<'a, str>>> {
    std::str::from_utf8(b).ok()?;
    let mut s = Scan::new(b);
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    let mut kind = None;
    s.object(|s, key| match key {
        b"type" => {
            kind = text(s)?;
            Some(())
        }
        _ => member(s, key),
    })?;
    s.end().then_some(kind)
}

/// Whether a value is a non-empty string or array, as [`nonempty`] reads
/// it: what serde's side of a reader asks of a `Value`.
pub fn filled(v: Option<&serde_json::Value>) -> bool {
    match v {
        Some(serde_json::Value::String(s)) => !s.is_empty(),
        Some(serde_json::Value::Array(a)) => !a.is_empty(),
        _ => false,
    }
}

/// A member that is a non-negative integer (as `Value::as_u64` takes it).
pub fn count_of(v: &serde_json::Value, key: &str) -> Option<u64> {
    v.get(key).and_then(serde_json::Value::as_u64)
}
