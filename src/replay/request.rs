//! Request bodies from trace records.

use serde_json::{Map, Value, json};

use crate::error::FieldError;
use crate::record::{self, Record};
use crate::synth::{Synthesizer, prompt_for};

/// Which OpenAI API the requests go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Endpoint {
    /// `/v1/completions`: a `prompt`.
    Completions,
    /// `/v1/chat/completions`: `messages`.
    Chat,
}

impl Endpoint {
    /// The path under the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/v1/completions",
            Endpoint::Chat => "/v1/chat/completions",
        }
    }
}

/// What every body gets, from the flags.
#[derive(Clone, Debug)]
pub struct BodyOptions {
    pub endpoint: Endpoint,
    pub model: Option<String>,
    pub stream: bool,
    pub ignore_eos: bool,
    pub min_tokens: bool,
    /// `--extra`, merged into every body.
    pub extra: Map<String, Value>,
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
    /// Session delay after the previous turn completed, ms.
    pub delay: Option<f64>,
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
    let observed_prompt = rec
        .get("observed")
        .and_then(|o| serde_json::from_str::<Value>(o.get()).ok())
        .and_then(|o| o.get("prompt_tokens").and_then(Value::as_u64));
    Ok(Prepared {
        index,
        id: rec.id()?.map(|s| s.into_owned()),
        session_id: rec.session_id()?.map(|s| s.into_owned()),
        model: rec.model()?.map(|m| m.into_owned()).or(opts.model.clone()),
        body: bytes::Bytes::new(),
        stream: opts.stream,
        input_length: rec.input_length()?.or(observed_prompt),
        output_length: rec.output_length()?,
        timestamp: rec.timestamp()?,
        delay: rec.delay()?,
    })
}

impl super::schedule::Turn for Prepared {
    fn timestamp(&self) -> Option<f64> {
        self.timestamp
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
    let base = outline(rec, index, opts)?;
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
    let mut body = Map::new();
    if let Some(m) = &model {
        body.insert("model".into(), json!(m));
    }
    let text: Option<String> = match rec.text_input()? {
        Some(t) => Some(t.into_owned()),
        None if crate::synth::needs_prompt(rec) => {
            let synth = prompts.synthesizer().map_err(PrepareError::Fatal)?;
            prompt_for(rec, synth, index)?.map(|p| p.text)
        }
        None => None,
    };
    let messages = rec
        .get("messages")
        .map(|m| serde_json::from_str::<Value>(m.get()))
        .transpose()
        .map_err(|_| FieldError::new("messages", "is not valid JSON"))?;
    let token_ids = rec
        .get("prompt_token_ids")
        .map(|ids| record::integer_array("prompt_token_ids", ids))
        .transpose()?;
    match opts.endpoint {
        Endpoint::Chat => {
            if let Some(m) = messages {
                body.insert("messages".into(), m);
            } else if let Some(t) = text {
                body.insert("messages".into(), json!([{"role": "user", "content": t}]));
            } else if token_ids.is_some() {
                return Err(FieldError::new(
                    "prompt_token_ids",
                    "token ids need --endpoint completions",
                )
                .into());
            } else {
                return Err(
                    FieldError::new("input_length", "missing: the record has no prompt").into(),
                );
            }
            if let Some(tools) = rec.get("tools") {
                let tools: Value = serde_json::from_str(tools.get())
                    .map_err(|_| FieldError::new("tools", "is not valid JSON"))?;
                body.insert("tools".into(), tools);
            }
        }
        Endpoint::Completions => {
            if let Some(ids) = token_ids {
                body.insert("prompt".into(), json!(ids));
            } else if let Some(t) = text {
                body.insert("prompt".into(), json!(t));
            } else if messages.is_some() {
                return Err(FieldError::new(
                    "messages",
                    "a conversation needs --endpoint chat (the completions API takes a prompt)",
                )
                .into());
            } else {
                return Err(
                    FieldError::new("input_length", "missing: the record has no prompt").into(),
                );
            }
        }
    }
    if let Some(n) = output_length {
        body.insert("max_tokens".into(), json!(n));
        if opts.min_tokens {
            body.insert("min_tokens".into(), json!(n));
        }
    }
    if opts.ignore_eos {
        body.insert("ignore_eos".into(), json!(true));
    }
    body.insert("stream".into(), json!(opts.stream));
    if opts.stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (k, v) in &opts.extra {
        body.insert(k.clone(), v.clone());
    }
    if let Some(extra) = rec.get("extra") {
        let extra: Map<String, Value> = serde_json::from_str(extra.get())
            .map_err(|_| FieldError::new("extra", "is not a JSON object"))?;
        for (k, v) in extra {
            body.insert(k, v);
        }
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(Prepared {
        body: serde_json::to_vec(&Value::Object(body))
            .expect("JSON values serialize")
            .into(),
        stream,
        ..base
    })
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
