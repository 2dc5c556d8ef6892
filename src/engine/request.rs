//! Request bodies from trace records.

use std::io::Write;

use serde_json::{Map, Value};

use super::conversation::Parent;
pub use crate::api::Endpoint;
use crate::api::{Given, Prompt};
use crate::error::FieldError;
use crate::json;
use crate::prompts::{Synthesizer, prompt_for};
use crate::record::{self, Record};

/// What every body gets, from the flags.
#[derive(Clone, Debug)]
pub struct BodyOptions {
    pub endpoint: Endpoint,
    /// `--model`: named in every request, whatever the record's `model`.
    pub model: Option<String>,
    /// `--model-map FROM=TO`: renames records' models (without --model).
    pub model_map: Vec<(String, String)>,
    pub stream: bool,
    pub ignore_eos: bool,
    pub min_tokens: bool,
    /// `--extra`, merged into every body.
    pub extra: Map<String, Value>,
    /// `--session-header`: send each record's `session_id` in this header.
    pub session_header: Option<reqwest::header::HeaderName>,
    /// `--live-answers`: later turns of synthesized sessions carry the
    /// answers the server gave.
    pub live_answers: bool,
}

impl BodyOptions {
    /// The model a request names: `--model` wins; else the record's own,
    /// renamed by `--model-map`.
    pub fn model_for(&self, record: Option<&str>) -> Option<String> {
        if let Some(m) = &self.model {
            return Some(m.clone());
        }
        let m = record?;
        let renamed = self.model_map.iter().find(|(from, _)| from == m);
        Some(renamed.map_or(m, |(_, to)| to.as_str()).to_string())
    }
}

/// A request ready to send, and the trace's figures for its result.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    pub index: u64,
    pub id: Option<String>,
    pub session_id: Option<String>,
    pub model: Option<String>,
    /// Shared, so that sending it again (a stale connection) copies nothing.
    pub body: bytes::Bytes,
    /// The body asks for a stream (`payload` records decide for themselves).
    pub stream: bool,
    pub input_length: Option<u64>,
    pub output_length: Option<u64>,
    /// Trace timestamp, ms.
    pub timestamp: Option<f64>,
    /// Wait after the dependencies (or the previous turn of the session)
    /// completed, ms.
    pub delay: Option<f64>,
    /// The ids of earlier records this one waits for.
    pub after: Vec<String>,
    /// Where the body's `messages` stand (chat requests), byte offsets.
    pub messages_span: Option<(usize, usize)>,
    /// A later turn may continue this conversation: keep its answer.
    pub keep: bool,
    /// `message_mode: "delta"`: the conversation this turn continues.
    pub parent: Option<Parent>,
    /// The turn's position in its session, from 1 (set by the feed).
    pub turn: Option<u64>,
    /// `--live-answers`: the synthesized prompt of a session turn, whose
    /// part beyond the session's history is sent after it.
    pub synthesized: Option<String>,
    /// The value of `--session-header`: the record's `session_id`.
    pub session_header: Option<reqwest::header::HeaderValue>,
    /// The body is built in chat's form (not a record's `payload`): an
    /// endpoint of another shape translates it before it is sent.
    pub built: bool,
    /// The body as the endpoint takes it, when it differs from `body`.
    pub wire: Option<bytes::Bytes>,
    /// The prompt's `hash_ids`, for a server that models a prefix cache
    /// (the twin); empty otherwise.
    pub blocks: Vec<u64>,
    /// The record's `observed.cached_tokens`, copied to its result.
    pub observed_cached_tokens: Option<u64>,
}

impl Prepared {
    /// The body as sent.
    pub fn wire(&self) -> &bytes::Bytes {
        self.wire.as_ref().unwrap_or(&self.body)
    }

    /// Translate a built body for an endpoint that takes another shape
    /// than chat's. Done just before sending: until then a delta turn is
    /// spliced, and a conversation kept, in chat's form.
    pub fn render(&mut self, endpoint: Endpoint) {
        if self.built {
            self.wire = endpoint.api().render(&self.body).map(bytes::Bytes::from);
        }
    }
}

/// Lazily loaded synthesizer: only traces without prompts need one.
pub trait PromptSource {
    fn synthesizer(&mut self) -> crate::error::Result<&Synthesizer>;
}

/// Everything about a record's request except its body.
pub fn outline(
    rec: &Record,
    index: u64,
    opts: &BodyOptions,
) -> std::result::Result<Prepared, FieldError> {
    let observed = rec
        .get("observed")
        .and_then(|o| serde_json::from_str::<Value>(o.get()).ok());
    let observed_count = |field: &str| {
        observed
            .as_ref()
            .and_then(|o| o.get(field).and_then(Value::as_u64))
            .filter(|&n| n <= record::MAX_TOKENS)
    };
    let observed_prompt = observed_count("prompt_tokens");
    Ok(Prepared {
        index,
        id: rec.id()?.map(|s| s.into_owned()),
        session_id: rec.session_id()?.map(|s| s.into_owned()),
        model: opts.model_for(rec.model()?.as_deref()),
        body: bytes::Bytes::new(),
        stream: opts.stream,
        input_length: rec.input_length()?.or(observed_prompt),
        // What the request asks for: nothing, of an endpoint that
        // generates nothing.
        output_length: rec
            .output_length()?
            .filter(|_| opts.endpoint.api().generation().is_some()),
        timestamp: rec.timestamp()?,
        delay: rec.delay()?,
        after: after(rec)?,
        session_header: session_header(rec, opts)?,
        observed_cached_tokens: observed_count("cached_tokens"),
        ..Prepared::default()
    })
}

/// The `--session-header` value: the session id, when it can be one.
fn session_header(
    rec: &Record,
    opts: &BodyOptions,
) -> std::result::Result<Option<reqwest::header::HeaderValue>, FieldError> {
    let (Some(name), Some(session)) = (&opts.session_header, rec.session_id()?) else {
        return Ok(None);
    };
    reqwest::header::HeaderValue::from_str(&session)
        .map(Some)
        .map_err(|_| {
            FieldError::new(
                "session_id",
                format!(
                    "cannot be sent in the {name} header (control characters): {}",
                    crate::error::quote_value(&format!("{session:?}"))
                ),
            )
        })
}

/// `message_mode`: true for `"delta"`, false for `"history"` or absent.
fn is_delta(rec: &Record) -> std::result::Result<bool, FieldError> {
    match rec.get("message_mode") {
        None => Ok(false),
        Some(raw) => match record::string("message_mode", raw)?.as_ref() {
            "history" => Ok(false),
            "delta" => Ok(true),
            other => Err(FieldError::new(
                "message_mode",
                format!("expected \"history\" or \"delta\", found \"{other}\""),
            )),
        },
    }
}

/// `after`: an array of the ids of earlier records.
pub fn after(rec: &Record) -> std::result::Result<Vec<String>, FieldError> {
    match rec.get("after") {
        None => Ok(Vec::new()),
        Some(raw) => serde_json::from_str::<Vec<String>>(raw.get()).map_err(|_| {
            FieldError::new(
                "after",
                format!(
                    "expected an array of record ids (strings), found {}",
                    crate::error::quote_value(raw.get())
                ),
            )
        }),
    }
}

impl super::schedule::Turn for Prepared {
    fn key(&self) -> u64 {
        self.index
    }
    fn timestamp(&self) -> Option<f64> {
        self.timestamp
    }
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn after(&self) -> &[String] {
        &self.after
    }
    fn session(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
    fn delay(&self) -> Option<f64> {
        self.delay
    }
}

/// Build the request for one record.
pub fn prepare(
    rec: &Record,
    index: u64,
    opts: &BodyOptions,
    prompts: &mut dyn PromptSource,
) -> std::result::Result<Prepared, PrepareError> {
    let mut base = outline(rec, index, opts)?;
    if is_delta(rec)? {
        if !opts.endpoint.api().conversation() {
            return Err(FieldError::new(
                "message_mode",
                "\"delta\" continues a conversation: it needs --endpoint chat, messages or responses",
            )
            .into());
        }
        base.parent = match (base.after.first(), &base.session_id) {
            (Some(id), _) => Some(Parent::Id(id.clone())),
            (None, Some(s)) => Some(Parent::Session(s.clone())),
            (None, None) => {
                return Err(FieldError::new(
                    "message_mode",
                    "\"delta\" needs a conversation to continue: give `after` or `session_id`",
                )
                .into());
            }
        };
        // A delta turn is sent once the turn it continues has completed.
        if base.after.is_empty() && base.delay.is_none() {
            base.delay = Some(0.0);
        }
    }
    let model = base.model.clone();
    let output_length = base.output_length;
    if let Some(payload) = rec.get("payload") {
        let v: Value = serde_json::from_str(payload.get())
            .map_err(|_| FieldError::new("payload", "is not valid JSON"))?;
        let stream = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
        return Ok(Prepared {
            body: bytes::Bytes::copy_from_slice(payload.get().as_bytes()),
            stream,
            ..base
        });
    }
    let mut synthesized = false;
    let text: Option<String> = match rec.text_input()? {
        Some(t) => Some(t.into_owned()),
        None if crate::prompts::needs_prompt(rec) => {
            let synth = prompts.synthesizer().map_err(PrepareError::Fatal)?;
            synthesized = true;
            prompt_for(rec, synth, index)?.map(|p| p.text)
        }
        None => None,
    };
    // On every endpoint that generates: a conversation's next turn
    // carries the answer as a message, a completions prompt as text.
    let live = opts.live_answers
        && synthesized
        && opts.endpoint.api().generation().is_some()
        && base.session_id.is_some();
    let messages = rec.get("messages");
    let token_ids = rec
        .get("prompt_token_ids")
        .map(|ids| record::integer_array("prompt_token_ids", ids))
        .transpose()?;
    let api = opts.endpoint.api();
    let prompt = api.prompt(&Given {
        messages,
        text: text.as_deref(),
        token_ids: token_ids.as_deref(),
    })?;
    let prompt_key = api.prompt_key();
    let tools = rec.get("tools").filter(|_| api.conversation());
    let record_extra: Map<String, Value> = match rec.get("extra") {
        Some(extra) => serde_json::from_str(extra.get())
            .map_err(|_| FieldError::new("extra", "is not a JSON object"))?,
        None => Map::new(),
    };
    let mut body = BodyWriter::new([&record_extra, &opts.extra]);
    if let Some(m) = &model {
        body.field("model", |out| json::write_str(out, m));
    }
    let start = body.len_after_key(prompt_key);
    body.field(prompt_key, |out| prompt.write(out));
    // Where the conversation (or, with --live-answers, a completions
    // prompt's text) stands, for a later turn to continue it.
    let continued = prompt_key == "messages" || (live && matches!(prompt, Prompt::Text(_)));
    let messages_span = continued.then(|| (start, body.len()));
    if let Some(tools) = tools {
        body.field("tools", |out| out.extend_from_slice(tools.get().as_bytes()));
    }
    // An endpoint that generates nothing is asked for no tokens and no
    // stream.
    let generates = api.generation().is_some();
    if let Some(n) = output_length.filter(|_| generates) {
        body.field("max_tokens", |out| {
            let _ = write!(out, "{n}");
        });
        if opts.min_tokens {
            body.field("min_tokens", |out| {
                let _ = write!(out, "{n}");
            });
        }
    }
    if opts.ignore_eos && generates {
        body.field("ignore_eos", |out| out.extend_from_slice(b"true"));
    }
    let stream = match body.extra("stream") {
        Some(v) => v.as_bool().unwrap_or(false),
        None => opts.stream && generates,
    };
    if generates {
        body.field("stream", |out| {
            out.extend_from_slice(if opts.stream { b"true" } else { b"false" })
        });
    }
    if opts.stream && generates {
        body.field("stream_options", |out| {
            out.extend_from_slice(br#"{"include_usage":true}"#)
        });
    }
    let keep = messages_span.is_some() && (base.id.is_some() || base.session_id.is_some());
    Ok(Prepared {
        body: body.finish().into(),
        stream,
        messages_span,
        keep,
        synthesized: if live { text } else { None },
        built: true,
        ..base
    })
}

/// A JSON object written field by field, with the `extra` maps merged in
/// shallowly, as inserting them into a map in order would: a key of
/// `extra` already written takes that place with its value; the others
/// follow, `--extra`'s first. The record's `extra` wins over `--extra`.
struct BodyWriter<'a> {
    out: Vec<u8>,
    /// The record's `extra`, then `--extra`.
    extras: [&'a Map<String, Value>; 2],
    written: Vec<&'static str>,
}

impl<'a> BodyWriter<'a> {
    fn new(extras: [&'a Map<String, Value>; 2]) -> BodyWriter<'a> {
        BodyWriter {
            out: Vec::with_capacity(256),
            extras,
            written: Vec::new(),
        }
    }

    /// The value `extra` gives `key`, if any.
    fn extra(&self, key: &str) -> Option<&'a Value> {
        self.extras.iter().find_map(|m| m.get(key))
    }

    /// Write `key` with the value `write` writes, unless `extra` gives one.
    fn field(&mut self, key: &'static str, write: impl FnOnce(&mut Vec<u8>)) {
        self.key(key);
        match self.extra(key) {
            Some(v) => write_value(&mut self.out, v),
            None => write(&mut self.out),
        }
        self.written.push(key);
    }

    /// The body's length once `key` is written: where its value starts.
    fn len_after_key(&self, key: &str) -> usize {
        // `{` or `,`, the quoted key (no escapes in ours), `:`.
        self.out.len() + 1 + key.len() + 2 + 1
    }

    fn len(&self) -> usize {
        self.out.len()
    }

    fn key(&mut self, key: &str) {
        self.out.push(if self.out.is_empty() { b'{' } else { b',' });
        json::write_str(&mut self.out, key);
        self.out.push(b':');
    }

    fn wrote(&self, key: &str) -> bool {
        self.written.contains(&key)
    }

    /// The keys of `extra` not written yet, then the closing brace.
    fn finish(mut self) -> Vec<u8> {
        let [record, flag] = self.extras;
        for (k, v) in flag {
            if !self.wrote(k) {
                self.key(k);
                write_value(&mut self.out, record.get(k).unwrap_or(v));
            }
        }
        for (k, v) in record {
            if !self.wrote(k) && !flag.contains_key(k) {
                self.key(k);
                write_value(&mut self.out, v);
            }
        }
        if self.out.is_empty() {
            self.out.push(b'{');
        }
        self.out.push(b'}');
        self.out
    }
}

/// An `extra` value, compact.
fn write_value(out: &mut Vec<u8>, v: &Value) {
    serde_json::to_writer(out, v).expect("writing JSON to memory cannot fail");
}

/// Why a record could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// The record is at fault.
    Record(FieldError),
    /// Something else (the tokenizer would not load).
    Fatal(crate::error::Error),
}

impl From<FieldError> for PrepareError {
    fn from(e: FieldError) -> Self {
        PrepareError::Record(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoPrompts;

    impl PromptSource for NoPrompts {
        fn synthesizer(&mut self) -> crate::error::Result<&Synthesizer> {
            Err(crate::error::Error::msg("no synthesizer in these tests"))
        }
    }

    fn options(endpoint: Endpoint, flags: u8, extra: &str) -> BodyOptions {
        BodyOptions {
            endpoint,
            model: (flags & 1 != 0).then(|| "flag-model".to_string()),
            model_map: Vec::new(),
            stream: flags & 2 != 0,
            ignore_eos: flags & 4 != 0,
            min_tokens: flags & 8 != 0,
            extra: serde_json::from_str(extra).unwrap(),
            session_header: None,
            live_answers: false,
        }
    }

    fn body(line: &str, opts: &BodyOptions) -> (String, bool) {
        let rec = Record::parse(line).unwrap();
        let p = prepare(&rec, 0, opts, &mut NoPrompts).unwrap();
        (String::from_utf8(p.body.to_vec()).unwrap(), p.stream)
    }

    #[test]
    fn bodies_are_compact_json_in_a_fixed_order() {
        let opts = options(Endpoint::Chat, 0b1111, "{}");
        let line = r#"{"timestamp":0,"text_input":"say \"hi\"\n","output_length":3}"#;
        assert_eq!(
            body(line, &opts),
            (
                r#"{"model":"flag-model","messages":[{"role":"user","content":"say \"hi\"\n"}],"max_tokens":3,"min_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#
                    .to_string(),
                true
            )
        );
        let opts = options(Endpoint::Completions, 0, "{}");
        let line = r#"{"timestamp":0,"prompt_token_ids":[5, 0,7],"model":"m"}"#;
        assert_eq!(
            body(line, &opts).0,
            r#"{"model":"m","prompt":[5,0,7],"stream":false}"#
        );
        // Messages and tools go as the record gives them.
        let opts = options(Endpoint::Chat, 0, "{}");
        let line = r#"{"timestamp":0,"messages":[ {"role": "user", "content": "\u00e9"} ],"tools":[{"type":"function"}],"output_length":1}"#;
        assert_eq!(
            body(line, &opts).0,
            r#"{"messages":[ {"role": "user", "content": "\u00e9"} ],"tools":[{"type":"function"}],"max_tokens":1,"stream":false}"#
        );
    }

    #[test]
    fn the_model_flag_wins_and_the_map_renames_records_models() {
        let mut opts = options(Endpoint::Chat, 0, "{}");
        opts.model_map = vec![("a".into(), "x".into()), ("a".into(), "y".into())];
        assert_eq!(opts.model_for(Some("a")).as_deref(), Some("x"));
        assert_eq!(opts.model_for(Some("b")).as_deref(), Some("b"));
        assert_eq!(opts.model_for(None), None);
        opts.model = Some("flag".into());
        assert_eq!(opts.model_for(Some("a")).as_deref(), Some("flag"));
        assert_eq!(opts.model_for(None).as_deref(), Some("flag"));
    }

    /// Extras merge as inserting them into the map of the other fields
    /// would: `--extra` first, then the record's `extra`.
    #[test]
    fn extras_merge_shallowly_as_map_insertions() {
        let records = [
            r#"{"timestamp":0,"text_input":"a","output_length":3}"#,
            r#"{"timestamp":0,"model":"m","messages":[{"role":"user","content":"b"}],"tools":[{"type":"function"}]}"#,
            r#"{"timestamp":0,"prompt_token_ids":[1,2],"output_length":2}"#,
        ];
        let record_extras = [
            None,
            Some(r#"{"top_k":1}"#),
            Some(
                r#"{"stream":"yes","max_tokens":7,"temperature":0.5,"say \"x\"":[1],"model":null}"#,
            ),
            Some(r#"{"a":1,"stream":true,"seed":9}"#),
        ];
        let flag_extras = [
            "{}",
            r#"{"temperature":0,"stream":false,"max_tokens":5}"#,
            r#"{"seed":3,"messages":"flag","top_k":2}"#,
        ];
        let mut checked = 0;
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            for flags in 0..16 {
                for rec in records {
                    let bare = options(endpoint, flags, "{}");
                    let r = Record::parse(rec).unwrap();
                    if prepare(&r, 0, &bare, &mut NoPrompts).is_err() {
                        continue; // token ids on chat, messages on completions
                    }
                    let base: Map<String, Value> =
                        serde_json::from_str(&body(rec, &bare).0).unwrap();
                    for flag_extra in flag_extras {
                        for record_extra in record_extras {
                            let mut line: Map<String, Value> = serde_json::from_str(rec).unwrap();
                            let mut want = base.clone();
                            for (k, v) in
                                serde_json::from_str::<Map<String, Value>>(flag_extra).unwrap()
                            {
                                want.insert(k, v);
                            }
                            if let Some(e) = record_extra {
                                let e: Map<String, Value> = serde_json::from_str(e).unwrap();
                                line.insert("extra".into(), Value::Object(e.clone()));
                                for (k, v) in e {
                                    want.insert(k, v);
                                }
                            }
                            let line = Value::Object(line).to_string();
                            let opts = options(endpoint, flags, flag_extra);
                            let want_stream = want.get("stream").and_then(Value::as_bool);
                            assert_eq!(
                                body(&line, &opts),
                                (
                                    Value::Object(want).to_string(),
                                    want_stream.unwrap_or(false)
                                ),
                                "{line} with --extra {flag_extra}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 2 * 16 * 2 * 3 * 4);
    }
}
