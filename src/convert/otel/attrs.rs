//! A span's attributes: read from each shape's layout into one flat list, and
//! the names the rules look up.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::super::fields::{Fields, Object, count, string};
use crate::error::{FieldError, quote_value};

/// A span's attributes that the rules read, in the span's order (a later
/// one of the same name replaces the value, as in a map). Found by a
/// linear scan: a span has a handful, and the rules look up some 60 names
/// a span, most of them absent, where a map hashed each name.
#[derive(Default)]
pub(super) struct Attrs<'a>(pub(super) Vec<(Cow<'a, str>, Value)>);

impl<'a> Attrs<'a> {
    pub(super) fn insert(&mut self, key: Cow<'a, str>, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }
}

impl Fields for Attrs<'_> {
    fn field(&self, field: &str) -> Option<&Value> {
        self.get(field)
    }
}

impl From<Object> for Attrs<'static> {
    fn from(map: Object) -> Self {
        Attrs(map.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect())
    }
}

/// A span's attributes as one flat object: OTLP key/value lists (typed
/// values decoded, 64-bit integers exactly), Jaeger tags, or plain objects
/// (nested objects flattened to dotted names, as Phoenix nests them).
pub(super) fn attributes(obj: &Object) -> std::result::Result<Object, FieldError> {
    let mut out = Map::new();
    if let Some(Value::Array(tags)) = obj.get("tags") {
        for t in tags {
            let Some(key) = t.get("key").and_then(Value::as_str) else {
                continue;
            };
            let v = t.get("value").cloned().unwrap_or(Value::Null);
            let v = match (t.get("type").and_then(Value::as_str), &v) {
                (Some("int64"), Value::String(s)) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .map_err(|_| bad_value(key, &v))?,
                (Some("float64"), Value::String(s)) => s
                    .parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                    .ok_or_else(|| bad_value(key, &v))?,
                _ => v,
            };
            out.insert(key.to_string(), v);
        }
        return Ok(out);
    }
    match obj.get("attributes") {
        Some(Value::Array(kvs)) => {
            for kv in kvs {
                let Some(key) = kv.get("key").and_then(Value::as_str) else {
                    return Err(FieldError::new(
                        "attributes",
                        format!(
                            "expected {{\"key\", \"value\"}} objects, found {}",
                            quote_value(&kv.to_string())
                        ),
                    ));
                };
                if let Some(v) = any_value(key, kv.get("value").unwrap_or(&Value::Null))? {
                    out.insert(key.to_string(), v);
                }
            }
        }
        Some(Value::Object(map)) => flatten("", map, &mut out),
        None | Some(Value::Null) => {}
        Some(other) => {
            return Err(FieldError::new(
                "attributes",
                format!(
                    "expected an object or a list, found {}",
                    quote_value(&other.to_string())
                ),
            ));
        }
    }
    // AgentOps' trace export: its attributes nested, lists of messages
    // as arrays (`gen_ai.prompt: [{role, content}]`): as the SDK set them,
    // `gen_ai.prompt.0.role` and so on.
    if let Some(Value::Object(map)) = obj.get("span_attributes") {
        flatten_indexed("", map, &mut out);
    }
    Ok(out)
}

/// Nested objects, and arrays of objects, to dotted (and indexed) names.
fn flatten_indexed(prefix: &str, map: &Object, out: &mut Object) {
    flatten_into(prefix, map, out, true);
}

/// Nested objects to dotted names.
pub(super) fn flatten(prefix: &str, map: &Object, out: &mut Object) {
    flatten_into(prefix, map, out, false);
}

/// Nested objects to dotted names; with `indexed`, arrays of objects too,
/// each object's names after its index.
fn flatten_into(prefix: &str, map: &Object, out: &mut Object, indexed: bool) {
    for (k, v) in map {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) => flatten_into(&key, inner, out, indexed),
            Value::Array(items)
                if indexed && !items.is_empty() && items.iter().all(Value::is_object) =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Object(inner) = item {
                        flatten_into(&format!("{key}.{i}"), inner, out, indexed);
                    }
                }
            }
            other => {
                out.insert(key, other.clone());
            }
        }
    }
}

pub(super) fn bad_value(key: &str, v: &Value) -> FieldError {
    FieldError::new(
        key,
        format!("unreadable value {}", quote_value(&v.to_string())),
    )
}

/// An OTLP `AnyValue`; None for an empty one (protojson leaves unset
/// values as `{}`).
pub(super) fn any_value(key: &str, v: &Value) -> std::result::Result<Option<Value>, FieldError> {
    let Some(obj) = v.as_object() else {
        return match v {
            Value::Null => Ok(None),
            other => Err(bad_value(key, other)),
        };
    };
    let Some((kind, inner)) = obj.iter().next() else {
        return Ok(None);
    };
    let value = match kind.as_str() {
        "stringValue" | "bytesValue" => inner.clone(),
        "boolValue" => inner.clone(),
        // 64-bit integers come as strings in protojson: read them exactly.
        "intValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "doubleValue" => match inner {
            Value::Number(_) => inner.clone(),
            Value::String(s) => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| bad_value(key, inner))?,
            _ => return Err(bad_value(key, inner)),
        },
        "arrayValue" => {
            let mut items = Vec::new();
            for item in values(inner) {
                if let Some(v) = any_value(key, item)? {
                    items.push(v);
                }
            }
            Value::Array(items)
        }
        "kvlistValue" => {
            let mut map = Map::new();
            for kv in values(inner) {
                if let (Some(k), Some(v)) = (kv.get("key").and_then(Value::as_str), kv.get("value"))
                {
                    if let Some(v) = any_value(key, v)? {
                        map.insert(k.to_string(), v);
                    }
                }
            }
            Value::Object(map)
        }
        other => {
            return Err(FieldError::new(
                key,
                format!("unknown attribute type `{other}`"),
            ));
        }
    };
    Ok(Some(value))
}

/// The `values` of an `arrayValue` or `kvlistValue` (none when absent).
pub(super) fn values(inner: &Value) -> impl Iterator<Item = &Value> {
    inner
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

pub(super) fn first_string(
    attrs: &Attrs,
    keys: &[&str],
) -> std::result::Result<Option<String>, FieldError> {
    first(attrs, keys, string)
}

pub(super) fn first_count(
    attrs: &Attrs,
    keys: &[&str],
) -> std::result::Result<Option<u64>, FieldError> {
    first(attrs, keys, count)
}

/// The first of `keys` that `read` finds a value at.
fn first<'a, T>(
    attrs: &Attrs<'a>,
    keys: &[&str],
    read: impl Fn(&Attrs<'a>, &str) -> std::result::Result<Option<T>, FieldError>,
) -> std::result::Result<Option<T>, FieldError> {
    for k in keys {
        if let Some(v) = read(attrs, k)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

pub(super) const INPUT: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    // promptflow's LLM spans: the OpenAI usage, each key under `llm.usage.`.
    "llm.usage.prompt_tokens",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
];
pub(super) const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
];
pub(super) const CACHED: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.input_token_details.cached_read_tokens",
    "gen_ai.usage.input_token_details.cache_read",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.cachedInputTokens",
];
pub(super) const MODEL: &[&str] = &[
    "gen_ai.response.model",
    "llm.model_name",
    // promptflow: the answer's `model`.
    "llm.response.model",
    "gen_ai.request.model",
    "ai.response.model",
    "ai.model.id",
    // Traceloop and its forks write "unknown" above and the name here.
    "traceloop.association.properties.ls_model_name",
    "ioa_observe.association.properties.ls_model_name",
];
pub(super) const SESSION: &[&str] = &[
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "exgentic.session.id",
];
pub(super) const GENERATIONS: &[&str] = &[
    "chat",
    "text_completion",
    "generate_content",
    "completion",
    "responses",
];
pub(super) const MAX_TOKENS: &[&str] = &[
    "gen_ai.request.max_tokens",
    "llm.invocation_parameters.max_tokens",
];
pub(super) const RESPONSE_ID: &[&str] = &["gen_ai.response.id", "ai.response.id"];
/// The generated text, for a call without an output count (where a
/// JSON value, read by [`output_text`]).
pub(super) const OUTPUT_TEXT: &[&str] = &[
    "gen_ai.output.messages",
    "output.value",
    "ai.response.text",
    "gen_ai.output.text",
];
/// `PREFIX.N.SUFFIX` lists of messages: the prompt's, then the output's.
pub(super) const INDEXED_PROMPT: &[(&str, &str, &str)] = &[
    ("gen_ai.prompt.", ".role", ".content"),
    ("llm.input_messages.", ".message.role", ".message.content"),
];
pub(super) const INDEXED_OUTPUT: &[(&str, &str, &str)] = &[
    ("gen_ai.completion.", ".role", ".content"),
    ("llm.output_messages.", ".message.role", ".message.content"),
];

/// Whether a rule reads the attribute `key` (the lists above and the
/// names in the rules below): what the OTLP reader keeps of a span.
pub(super) fn read_by_rules(key: &str) -> bool {
    const OTHERS: &[&str] = &[
        "gen_ai.operation.name",
        "openinference.span.kind",
        "framework",
        "span_type",
        "ai.operationId",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.server.time_to_first_token",
        "gen_ai.response.time_to_first_token",
        "ai.response.msToFirstChunk",
        "otel.status_code",
        "error",
        "error.type",
        "gen_ai.system_instructions",
        "gen_ai.input.messages",
        "ai.prompt.messages",
        "input.value",
        "gen_ai.tool.definitions",
    ];
    [
        INPUT,
        OUTPUT,
        CACHED,
        MODEL,
        SESSION,
        MAX_TOKENS,
        RESPONSE_ID,
        OUTPUT_TEXT,
        OTHERS,
    ]
    .iter()
    .any(|list| list.contains(&key))
        || INDEXED_PROMPT
            .iter()
            .chain(INDEXED_OUTPUT)
            .any(|(prefix, _, _)| key.starts_with(prefix))
}
