//! OpenTelemetry spans of model calls (GenAI semantic conventions,
//! OpenInference, Vercel AI SDK), in the shapes tools hand them out: OTLP
//! JSON (`{"resourceSpans": …}`, one document per line as the Collector's
//! file exporter writes it, or one per file), single protojson spans,
//! Jaeger's JSON download, flat span lists (`{"spans": [...]}` with
//! `start_time`), Phoenix span JSON and JavaScript `ReadableSpan` dumps.
//!
//! A span is a model call when `gen_ai.operation.name` is a generation
//! (chat, text_completion, generate_content), else when OpenInference's
//! span kind is LLM, else when promptflow's `span_type` is LLM, else when
//! the Vercel `ai.operationId` is a provider call (`….doGenerate`,
//! `….doStream`), else when it reports token usage.
//! A call with another call under it (a client span over a gateway's) is a
//! wrapper and is left out; so is the same call exported twice (same
//! trace, start, end, response id, model and token counts).
//!
//! Spans are gathered per input: wrappers and duplicates are found within
//! one input, and the calls of one trace (or session) are given `after`
//! and `delay` by [`super::graph`] when every input was read.
//!
//! What an input holds until its end is kept small: per span its id and
//! its parent's as 128-bit hashes, per model call its request (no
//! attribute map), in blocks that are freed as the calls are handed on.
//! OTLP JSON lines are read by [`otlp`] without a tree of the document.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;

use super::fields::Object;
use super::{Ctx, Head, Prompt};
use crate::error::{Error, FieldError, Location, Result, quote_value};
use crate::text::plural;

mod attrs;
mod call;
mod otlp;
mod pb;

use attrs::{Attrs, any_value, attributes, read_by_rules};
use call::call;

/// OTLP JSON, Jaeger downloads, flat span lists, Vercel and Phoenix spans.
pub fn sniff(head: &Head) -> bool {
    if !head.is_json() {
        return head_is_protobuf(head);
    }
    let otlp = head.contains_any(&[
        "\"resourceSpans\"",
        "\"scopeSpans\"",
        "\"startTimeUnixNano\"",
    ]);
    let jaeger = head.contains("\"spanID\"") && head.contains("\"operationName\"");
    let vercel = head.contains("\"spanContext\"") && head.contains("\"ai.operationId\"");
    let flat = head.contains("\"span_id\"")
        && head.contains("\"start_time\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference.", "\"span_kind\""]);
    let protojson = head.contains("\"kind\"")
        && head.contains("\"attributes\"")
        && head.contains("\"key\"")
        && head.contains_any(&["\"gen_ai.", "\"llm.", "\"openinference."]);
    otlp || jaeger || vercel || flat || protojson
}

/// OTLP protobuf, as far as the head's text shows it (the head's leading
/// whitespace, which may be the first tag byte, is trimmed): binary bytes
/// JSON never holds, and attribute names of spans; or a Collector file
/// export compressed message by message (see [`pb::decode`]): a 4-byte
/// size, then a zstd frame's magic bytes (28 b5 2f fd, which the head's
/// text shows as `(`, a replacement character, `/` and another).
fn head_is_protobuf(head: &Head) -> bool {
    let spans = head.contains_any(&["gen_ai.", "llm.", "openinference.", "service.name"])
        && head
            .text
            .bytes()
            .any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
    // Four size bytes, each at most 3 bytes of text when replaced.
    let zstd_framed = head
        .text
        .find("(\u{fffd}/\u{fffd}")
        .is_some_and(|at| at <= 12);
    spans || zstd_framed
}

/// What one input held, for the note at its end.
#[derive(Default)]
struct Tally {
    spans: u64,
    calls: u64,
    wrappers: u64,
    duplicates: u64,
    no_output: u64,
    /// Media parts (images, audio…) of prompts, which have no text to
    /// hash or send: how many, in how many calls, of which kinds.
    media_parts: u64,
    media_calls: u64,
    media_kinds: BTreeMap<String, u64>,
}

/// A model call read, before wrappers and duplicates are left out: the
/// few fields its request is made of (an input may hold hundreds of
/// thousands; a whole `Request` each was most of the memory).
struct Call {
    /// The span's line in the input.
    line: u64,
    start: Option<i64>,
    end: Option<i64>,
    input: Option<u64>,
    /// The output count the span reports.
    output: Option<u64>,
    /// What `output_length` starts as (the count, else max_tokens, else 0).
    output_length: u64,
    max_tokens: Option<u64>,
    cached: Option<u64>,
    ttft_ms: Option<f64>,
    failed: bool,
    model: Text,
    session: Text,
    id: Text,
    /// The trace, only where the request needs it (see [`call`]).
    trace: Text,
    prompt: Option<Box<Prompt>>,
    output_text: Text,
    /// Its span id and its parent's, as [`id_key`]s (0: none).
    span: u128,
    parent: u128,
    /// What makes two exports one call, hashed (128 bits: a collision is
    /// as likely as between random numbers; 0: no start, never one).
    dup_key: u128,
}

/// A text of a call, in its input's [`Texts`] (`len` NONE: none).
#[derive(Clone, Copy)]
struct Text {
    at: usize,
    len: u32,
}

impl Text {
    const NONE: Text = Text {
        at: 0,
        len: u32::MAX,
    };
}

/// The texts of an input's calls, one after another: a string each (and
/// its allocation's overhead) was a third of what a call held.
#[derive(Default)]
struct Texts(String);

impl Texts {
    fn add(&mut self, text: Option<&str>) -> Text {
        match text {
            Some(t) if t.len() < u32::MAX as usize => {
                let at = self.0.len();
                self.0.push_str(t);
                Text {
                    at,
                    len: t.len() as u32,
                }
            }
            // Over 4 GiB (never a real attribute): as good as none.
            _ => Text::NONE,
        }
    }

    fn get(&self, t: Text) -> Option<&str> {
        (t.len != u32::MAX).then(|| &self.0[t.at..t.at + t.len as usize])
    }
}

/// A span id as a 128-bit hash: the ids of a large export take 16 bytes
/// each (a collision is as likely as between random numbers).
fn id_key(id: &str) -> u128 {
    // 0 stands for no id.
    xxhash_rust::xxh3::xxh3_128(id.as_bytes()).max(1)
}

/// Calls in blocks of this many, so that each block is freed once its
/// calls are handed on (the whole input's calls and the converter's list of
/// them never take memory at once).
const BLOCK: usize = 4096;

/// Per input: the calls, and every span's parent (to find wrappers).
#[derive(Default)]
struct State {
    calls: Vec<Vec<Call>>,
    texts: Texts,
    parents: HashMap<u128, u128>,
    tally: Tally,
    /// The whole text, for single-document inputs (to find a span's line).
    text: Option<String>,
    first_no_output: Option<(Location, String, u64)>,
}

pub fn read(mut reader: Box<dyn BufRead + Send>, source: Arc<str>, ctx: &mut Ctx) -> Result<()> {
    let mut st = State::default();
    let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
    if source.ends_with(".pb") || pb::looks_like(&head[..head.len().min(64 * 1024)]) {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&*source, e))?;
        let loc = Location::new(source.clone(), 1);
        match pb::decode(&bytes) {
            Ok(messages) => {
                drop(bytes);
                for m in messages {
                    match m {
                        pb::Frame::Proto(m) => document(ctx, &mut st, &loc, pb::to_json(&m))?,
                        pb::Frame::Json(text) => {
                            if !fast_document(ctx, &mut st, &loc, &text)? {
                                match serde_json::from_str::<Value>(&text) {
                                    Ok(doc) => document(ctx, &mut st, &loc, doc)?,
                                    Err(e) => ctx.bad(malformed(&loc, &e))?,
                                }
                            }
                        }
                    }
                }
            }
            Err(msg) => ctx.bad(FieldError::record(msg).at(&loc))?,
        }
        return finish_input(ctx, st, &source);
    }
    let mut first = String::new();
    let mut line_no = 0u64;
    // Skip blank lines; the first line that is a JSON value on its own
    // makes the input one document per line.
    loop {
        first.clear();
        let n = reader
            .read_line(&mut first)
            .map_err(|e| Error::io(&*source, e))?;
        line_no += 1;
        if n == 0 || !first.trim().is_empty() {
            break;
        }
    }
    let first_line = line_no;
    let first_loc = Location::new(source.clone(), first_line);
    let per_line = fast_document(ctx, &mut st, &first_loc, &first)?
        || match serde_json::from_str::<Value>(&first) {
            Ok(doc) => {
                document(ctx, &mut st, &first_loc, doc)?;
                true
            }
            Err(_) => false,
        };
    match per_line {
        true => {
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader
                    .read_line(&mut line)
                    .map_err(|e| Error::io(&*source, e))?;
                if n == 0 {
                    break;
                }
                line_no += 1;
                if line.trim().is_empty() {
                    continue;
                }
                let loc = Location::new(source.clone(), line_no);
                if fast_document(ctx, &mut st, &loc, &line)? {
                    continue;
                }
                match serde_json::from_str::<Value>(&line) {
                    Ok(doc) => document(ctx, &mut st, &loc, doc)?,
                    Err(e) => ctx.bad(malformed(&loc, &e))?,
                }
            }
        }
        false => {
            let mut text = first;
            reader
                .read_to_string(&mut text)
                .map_err(|e| Error::io(&*source, e))?;
            let base = first_line - 1;
            // One document, or several one after another (the SDKs'
            // console exporter prints each span as an indented object).
            let mut docs = Vec::new();
            let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
            let mut failed = None;
            loop {
                let at = stream.byte_offset();
                match stream.next() {
                    None => break,
                    Some(Ok(doc)) => {
                        let skipped = text[at..].len() - text[at..].trim_start().len();
                        let lines = text.as_bytes()[..at + skipped]
                            .iter()
                            .filter(|&&b| b == b'\n')
                            .count() as u64;
                        docs.push((first_line + lines, doc));
                    }
                    Some(Err(e)) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            // A span's line is found by its id in a single document; each
            // of several is at its own first line.
            if docs.len() == 1 {
                st.text = Some(text);
            }
            for (line, doc) in docs {
                document(ctx, &mut st, &Location::new(source.clone(), line), doc)?;
            }
            if let Some(e) = failed {
                let loc = Location {
                    source: source.clone(),
                    line: base + e.line() as u64,
                    column: Some(e.column() as u64),
                };
                ctx.bad(malformed(&loc, &e))?;
            }
        }
    }
    finish_input(ctx, st, &source)
}

fn malformed(loc: &Location, e: &serde_json::Error) -> Error {
    let mut loc = loc.clone();
    if loc.column.is_none() && e.line() == 1 {
        loc.column = Some(e.column() as u64);
    }
    FieldError::record(format!("malformed JSON: {e}")).at(&loc)
}

/// One JSON document: any of the shapes in the module's description.
fn document(ctx: &mut Ctx, st: &mut State, loc: &Location, doc: Value) -> Result<()> {
    match doc {
        Value::Array(items) => {
            for item in items {
                document(ctx, st, loc, item)?;
            }
            Ok(())
        }
        Value::Object(mut obj) => {
            if let Some(Value::Array(rs)) = obj.remove("resourceSpans") {
                for r in rs {
                    let scopes = r
                        .get("scopeSpans")
                        .or_else(|| r.get("instrumentationLibrarySpans"))
                        .and_then(Value::as_array);
                    for s in scopes.into_iter().flatten() {
                        let spans = s.get("spans").and_then(Value::as_array);
                        for span in spans.into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                }
                return Ok(());
            }
            if let Some(Value::Array(data)) = obj.get("data") {
                // Jaeger: {"data": [{"traceID", "spans", "processes"}]}.
                if data.iter().all(|t| t.get("spans").is_some()) {
                    for t in data {
                        for span in t["spans"].as_array().into_iter().flatten() {
                            one_span(ctx, st, loc, span)?;
                        }
                    }
                    return Ok(());
                }
            }
            if let Some(Value::Array(spans)) = obj.remove("spans") {
                // AgentOps' trace export gives the trace id once, beside.
                let trace = obj.get("trace").and_then(|t| t.get("trace_id")).cloned();
                for mut span in spans {
                    if let (Some(t), Value::Object(s)) = (&trace, &mut span) {
                        s.entry("trace_id").or_insert_with(|| t.clone());
                    }
                    one_span(ctx, st, loc, &span)?;
                }
                return Ok(());
            }
            let is_span = [
                "spanId",
                "span_id",
                "spanID",
                "spanContext",
                "context",
                "name",
            ]
            .iter()
            .any(|k| obj.contains_key(*k));
            if is_span {
                return one_span(ctx, st, loc, &Value::Object(obj));
            }
            let keys: Vec<&str> = obj.keys().map(String::as_str).take(5).collect();
            ctx.bad(
                FieldError::record(format!(
                    "not an OpenTelemetry document or span (keys: {})",
                    keys.join(", ")
                ))
                .at(loc),
            )
        }
        other => ctx.bad(
            FieldError::record(format!(
                "expected a JSON object of spans, found {}",
                quote_value(&other.to_string())
            ))
            .at(loc),
        ),
    }
}

/// One OTLP JSON document read by [`otlp`]; false when it is not in the
/// shape that reader takes (then nothing was read, and [`document`] reads
/// it). Every span goes through the rules as [`one_span`]'s would.
fn fast_document(ctx: &mut Ctx, st: &mut State, loc: &Location, text: &str) -> Result<bool> {
    let Some(spans) = otlp::spans(text) else {
        return Ok(false);
    };
    for span in spans {
        st.tally.spans += 1;
        let ids = Ids {
            span: span.span.map(|s| s.0),
            parent: span.parent.map(|s| s.0),
            trace: span.trace.map(|s| s.0),
        };
        let loc = span_loc(st, loc, ids.span.as_deref());
        if let (Some(id), Some(parent)) = (&ids.span, &ids.parent) {
            st.parents.insert(id_key(id), id_key(parent));
        }
        // Its four fields at most, each once.
        let obj = Attrs(
            span.fields
                .into_iter()
                .map(|(name, v)| (Cow::Borrowed(name), v))
                .collect(),
        );
        let result = fast_attributes(span.attributes)
            .and_then(|attrs| call(&obj, &attrs, &ids, &loc, st, ctx));
        if let Err(e) = result {
            let who = ids.span.as_deref().unwrap_or("without id");
            ctx.bad(FieldError::new(e.field, format!("span {who}: {}", e.msg)).at(&loc))?;
        }
    }
    Ok(true)
}

/// The attributes the rules read, as [`attributes`] has them (every value
/// is still checked, so that a bad one is the same error).
fn fast_attributes<'a>(
    list: Vec<(otlp::Str<'a>, otlp::Attr<'a>)>,
) -> std::result::Result<Attrs<'a>, FieldError> {
    let mut out = Attrs::default();
    for (key, attr) in list {
        let key = key.0;
        let wanted = read_by_rules(&key);
        let value = match attr {
            otlp::Attr::Unset => None,
            otlp::Attr::Text(s) => wanted.then(|| Value::String(s.0.into_owned())),
            otlp::Attr::Value(v) => wanted.then_some(v),
            otlp::Attr::Any(v) => any_value(&key, &v)?.filter(|_| wanted),
        };
        if let Some(v) = value {
            out.insert(key, v);
        }
    }
    Ok(out)
}

/// The line a span is on: its id's first occurrence in a single-document
/// input, else the document's line.
fn span_loc(st: &State, loc: &Location, id: Option<&str>) -> Location {
    if let (Some(text), Some(id)) = (&st.text, id) {
        if let Some(at) = text.find(&format!("\"{id}\"")) {
            let line = loc.line + text[..at].bytes().filter(|&b| b == b'\n').count() as u64;
            return Location::new(loc.source.clone(), line);
        }
    }
    loc.clone()
}

fn one_span(ctx: &mut Ctx, st: &mut State, loc: &Location, span: &Value) -> Result<()> {
    st.tally.spans += 1;
    let Some(obj) = span.as_object() else {
        return ctx.bad(
            FieldError::record(format!(
                "expected a span object, found {}",
                quote_value(&span.to_string())
            ))
            .at(loc),
        );
    };
    let ids = Ids::of(obj);
    let loc = span_loc(st, loc, ids.span.as_deref());
    if let (Some(id), Some(parent)) = (&ids.span, &ids.parent) {
        st.parents.insert(id_key(id), id_key(parent));
    }
    let who = ids.span.as_deref().unwrap_or("without id");
    let result =
        attributes(obj).and_then(|attrs| call(obj, &Attrs::from(attrs), &ids, &loc, st, ctx));
    match result {
        Ok(()) => Ok(()),
        Err(e) => ctx.bad(FieldError::new(e.field, format!("span {who}: {}", e.msg)).at(&loc)),
    }
}

/// A span's identity, under each shape's names.
struct Ids<'a> {
    span: Option<Cow<'a, str>>,
    parent: Option<Cow<'a, str>>,
    trace: Option<Cow<'a, str>>,
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        // The Python SDK's console exporter writes hex ids as `0x…`: the
        // same id as OTLP's hex, which other exports of the span give.
        Value::String(s)
            if s.len() > 2
                && s.starts_with("0x")
                && s[2..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Some(s[2..].to_string())
        }
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Ids<'static> {
    fn of(obj: &Object) -> Ids<'static> {
        let ctx = obj.get("spanContext").or_else(|| obj.get("context"));
        let in_ctx = |k: &str| ctx.and_then(|c| c.get(k));
        let span = text_of(obj.get("spanId"))
            .or_else(|| text_of(obj.get("span_id")))
            .or_else(|| text_of(obj.get("spanID")))
            .or_else(|| text_of(in_ctx("spanId")))
            .or_else(|| text_of(in_ctx("span_id")));
        let trace = text_of(obj.get("traceId"))
            .or_else(|| text_of(obj.get("trace_id")))
            .or_else(|| text_of(obj.get("traceID")))
            .or_else(|| text_of(in_ctx("traceId")))
            .or_else(|| text_of(in_ctx("trace_id")));
        let jaeger_parent = obj
            .get("references")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("refType").and_then(Value::as_str) == Some("CHILD_OF"))
            })
            .and_then(|r| text_of(r.get("spanID")));
        let parent = text_of(obj.get("parentSpanId"))
            .or_else(|| text_of(obj.get("parent_span_id")))
            .or_else(|| text_of(obj.get("parent_id")))
            .or_else(|| text_of(obj.get("parentSpanContext").and_then(|c| c.get("spanId"))))
            .or(jaeger_parent);
        Ids {
            span: span.map(Cow::Owned),
            parent: parent.map(Cow::Owned),
            trace: trace.map(Cow::Owned),
        }
    }
}

/// Leave out wrappers and duplicates, hand the calls on, and say what the
/// input held.
fn finish_input(ctx: &mut Ctx, st: State, source: &Arc<str>) -> Result<()> {
    let State {
        calls,
        texts,
        parents,
        mut tally,
        first_no_output,
        ..
    } = st;
    // A call with a call under it, over that call's whole time, wraps it
    // (a client's span over a gateway's). A parent that ended before its
    // child started is an earlier turn, not a wrapper.
    let spans: HashMap<u128, (i64, Option<i64>)> = calls
        .iter()
        .flatten()
        .filter(|c| c.span != 0)
        .map(|c| (c.span, (c.start.unwrap_or(0), c.end)))
        .collect();
    let mut wrappers: HashSet<u128> = HashSet::new();
    for c in calls.iter().flatten() {
        let inner = (c.start.unwrap_or(0), c.end);
        let mut at = Some(c.parent).filter(|&p| p != 0);
        let mut steps = 0;
        while let Some(p) = at {
            if let Some(&outer) = spans.get(&p) {
                if covers(outer, inner) {
                    wrappers.insert(p);
                }
            }
            steps += 1;
            if steps > 10_000 {
                break; // a parent cycle
            }
            at = parents.get(&p).copied();
        }
    }
    drop(spans);
    drop(parents);
    // Room for every call at once: the list of requests would otherwise
    // double its capacity as they come, copying itself each time (with
    // the held blocks not yet freed, the input's peak of memory).
    ctx.reserve(calls.iter().map(Vec::len).sum());
    let mut seen: HashSet<u128> = HashSet::new();
    // Block by block: each is freed as its calls are handed on.
    for block in calls {
        for c in block {
            if c.span != 0 && wrappers.contains(&c.span) {
                tally.wrappers += 1;
                continue;
            }
            if c.dup_key != 0 && !seen.insert(c.dup_key) {
                tally.duplicates += 1;
                continue;
            }
            ctx.push(c.request(source, &texts))?;
        }
    }
    if let Some((loc, id, max)) = first_no_output {
        crate::cli::warn_at(
            &loc,
            format!(
                "span {id}: no output token count; output_length is its gen_ai.request.max_tokens ({max}){}",
                if tally.no_output > 1 {
                    format!(", and so for {} more", tally.no_output - 1)
                } else {
                    String::new()
                }
            ),
        );
    }
    let mut left_out = Vec::new();
    if tally.wrappers > 0 {
        left_out.push(format!(
            "{} wrapper{} of another call",
            tally.wrappers,
            plural(tally.wrappers)
        ));
    }
    if tally.duplicates > 0 {
        left_out.push(format!(
            "{} duplicate{}",
            tally.duplicates,
            plural(tally.duplicates)
        ));
    }
    let media = if tally.media_parts > 0 {
        let kinds: Vec<String> = tally
            .media_kinds
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        format!(
            "; {} media part{} ({}) left out of the prompts of {} call{}: only text is hashed or sent",
            tally.media_parts,
            plural(tally.media_parts),
            kinds.join(", "),
            tally.media_calls,
            plural(tally.media_calls)
        )
    } else {
        String::new()
    };
    crate::cli::note(format!(
        "{source}: {} span{} read, {} model call{}{}{media}",
        tally.spans,
        plural(tally.spans),
        tally.calls,
        plural(tally.calls),
        if left_out.is_empty() {
            String::new()
        } else {
            format!(" ({} left out)", left_out.join(", "))
        }
    ));
    Ok(())
}

/// Whether a span's time holds another's (unknown ends hold anything).
fn covers(outer: (i64, Option<i64>), inner: (i64, Option<i64>)) -> bool {
    outer.0 <= inner.0
        && match (outer.1, inner.1) {
            (Some(o), Some(i)) => i <= o,
            _ => true,
        }
}

#[cfg(test)]
mod tests;
