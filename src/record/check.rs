//! The whole-record check of the table of man/tracekit.7.

use serde_json::value::RawValue;

use super::*;
use crate::error::FieldError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputMode {
    /// `input_length` (with optional `hash_ids`): the prompt is synthesized.
    Length,
    /// `text_input`: the exact prompt text.
    Text,
    /// `messages`: the exact conversation.
    Messages,
    /// `payload`: a verbatim request body.
    Payload,
    /// `prompt_token_ids`: token ids, for servers that take them.
    TokenIds,
}

impl InputMode {
    /// The field that selects this mode.
    pub fn field(self) -> &'static str {
        match self {
            InputMode::Length => "input_length",
            InputMode::Text => "text_input",
            InputMode::Messages => "messages",
            InputMode::Payload => "payload",
            InputMode::TokenIds => "prompt_token_ids",
        }
    }

    pub(super) const ALL: [InputMode; 5] = [
        InputMode::Length,
        InputMode::Text,
        InputMode::Messages,
        InputMode::Payload,
        InputMode::TokenIds,
    ];
}

/// The known fields of a record, typed. Fields that failed their check are
/// `None` here and reported in the error list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// `timestamp`, ms.
    pub timestamp: Option<f64>,
    /// `input_length`, tokens.
    pub input_length: Option<u64>,
    /// `output_length`, tokens.
    pub output_length: Option<u64>,
    /// `hash_ids`.
    pub hash_ids: Option<Vec<u64>>,
    /// `session_id`.
    pub session_id: Option<String>,
    /// `delay`, ms.
    pub delay: Option<f64>,
    /// `model`.
    pub model: Option<String>,
    /// `id`.
    pub id: Option<String>,
    /// The input mode, when exactly one is given.
    pub mode: Option<InputMode>,
    /// `after`: ids of earlier records this one waits for.
    pub after: Option<Vec<String>>,
}

/// Number of blocks a prompt of `input_length` tokens takes.
pub fn blocks_for(input_length: u64, block_size: u64) -> u64 {
    input_length.div_ceil(block_size)
}

/// `hash_ids` must have ceil(input_length / block_size) entries.
pub fn check_block_count(ids: usize, input_length: u64, block_size: u64) -> Result<(), FieldError> {
    let want = blocks_for(input_length, block_size);
    if ids as u64 == want {
        return Ok(());
    }
    Err(FieldError::new(
        "hash_ids",
        format!(
            "has {ids} block{}, but input_length {input_length} needs ceil({input_length} / {block_size}) = {want}; \
             if the trace uses another block size, give --block-size",
            crate::text::plural(ids as u64),
        ),
    ))
}

/// Check a record against the table of man/tracekit.7; every problem found is pushed
/// to `errors` (several per record when several fields are wrong).
pub fn check(rec: &Record, block_size: u64, errors: &mut Vec<FieldError>) -> Checked {
    fn keep<T>(r: Result<Option<T>, FieldError>, errors: &mut Vec<FieldError>) -> Option<T> {
        r.unwrap_or_else(|e| {
            errors.push(e);
            None
        })
    }
    let mut c = Checked {
        timestamp: keep(rec.timestamp(), errors),
        input_length: keep(rec.input_length(), errors),
        output_length: keep(rec.output_length(), errors),
        hash_ids: keep(rec.hash_ids(), errors),
        session_id: keep(rec.session_id(), errors).map(Cow::into_owned),
        delay: keep(rec.delay(), errors),
        model: keep(rec.model(), errors).map(Cow::into_owned),
        id: keep(rec.id(), errors).map(Cow::into_owned),
        mode: None,
        after: None,
    };
    if let Some(v) = rec.get("after") {
        match serde_json::from_str::<Vec<String>>(v.get()) {
            Ok(ids) => c.after = Some(ids),
            Err(_) => errors.push(expected(
                "after",
                "an array of strings (the `id`s of earlier records)",
                v,
            )),
        }
    }
    if let Some(v) = rec.get("message_mode") {
        match serde_json::from_str::<String>(v.get()).as_deref() {
            Ok("history" | "delta") => {}
            _ => errors.push(expected("message_mode", "\"history\" or \"delta\"", v)),
        }
    }
    keep(rec.text_input(), errors);
    for (field, want) in [("payload", Kind::Object), ("extra", Kind::Object)] {
        if let Some(v) = rec.get(field) {
            if kind(v) != want {
                errors.push(expected(field, "an object", v));
            }
        }
    }
    if let Some(v) = rec.get("prompt_token_ids") {
        match integer_array("prompt_token_ids", v) {
            Err(e) => errors.push(e),
            Ok(ids) => {
                if let Err(e) = at_most("prompt_token_ids", ids.len() as u64, MAX_TOKENS, "tokens")
                {
                    errors.push(e);
                }
            }
        }
    }
    if let Some(v) = rec.get("messages") {
        check_messages(v, errors);
    }
    if let Some(v) = rec.get("tools") {
        if kind(v) != Kind::Array {
            errors.push(expected("tools", "an array of tool definitions", v));
        } else if !rec.contains("messages") {
            errors.push(FieldError::new(
                "tools",
                format!(
                    "given without `messages`: tools go with a conversation (`tools` belongs to the `messages` input mode{})",
                    mode_of_record(rec)
                ),
            ));
        }
    }
    if let Some(v) = rec.get("observed") {
        check_observed(v, errors);
    }

    let mut modes = rec.input_modes();
    match (modes.next(), modes.next()) {
        (None, _) => errors.push(FieldError::record(
            "no prompt: a record needs one of `input_length`, `text_input`, `messages`, `payload` or `prompt_token_ids`",
        )),
        (Some(one), None) => c.mode = Some(one),
        (Some(a), Some(b)) => {
            let names: Vec<String> = [a, b]
                .into_iter()
                .chain(modes)
                .map(|m| format!("`{}`", m.field()))
                .collect();
            errors.push(FieldError::record(format!(
                "{} given together: a record has exactly one input mode{}",
                names.join(" and "),
                if rec.contains("input_length") {
                    " (move the prompt size to `observed.prompt_tokens`)"
                } else {
                    ""
                }
            )));
        }
    }

    if rec.contains("hash_ids") && !rec.contains("input_length") {
        errors.push(FieldError::new(
            "hash_ids",
            format!(
                "given without `input_length`: blocks describe a prompt of known length (`hash_ids` belongs to the `input_length` input mode{})",
                mode_of_record(rec)
            ),
        ));
    }
    if let (Some(ids), Some(len)) = (&c.hash_ids, c.input_length) {
        if let Err(e) = check_block_count(ids.len(), len, block_size) {
            errors.push(e);
            c.hash_ids = None;
        }
    }
    // A `delay` without `session_id` is a one-turn conversation's, as AIPerf
    // reads it (each such record is its own session): nothing to check.
    c
}

/// ", this record's is `F`" when the record has exactly one input mode, for
/// messages about a field of another mode.
fn mode_of_record(rec: &Record) -> String {
    match rec.input_mode() {
        Some(one) => format!("; this record's is `{}`", one.field()),
        _ => String::new(),
    }
}

/// Which records may go without a `timestamp` in a timed trace: the later
/// turns of a session (AIPerf's multi-turn layout: the first turn has
/// `timestamp`, later ones `delay`) and records that wait for others
/// (`after`). Remembers the sessions seen: memory grows with their number.
#[derive(Debug, Default)]
pub struct Turns {
    seen: std::collections::HashSet<String>,
}

impl Turns {
    /// Note a record; true when it follows an earlier one (a session seen
    /// before, or `after`), so that its own time comes from that one.
    pub fn follows(&mut self, session_id: Option<&str>, has_after: bool) -> bool {
        let later = match session_id {
            Some(s) if self.seen.contains(s) => true,
            Some(s) => {
                self.seen.insert(s.to_string());
                false
            }
            None => false,
        };
        later || has_after
    }

    /// Whether a record of `session_id` was noted.
    pub fn has_seen(&self, session_id: &str) -> bool {
        self.seen.contains(session_id)
    }

    /// Forget a session noted by a record that was then left out (a
    /// converter skipping it): its next record starts the session.
    pub fn forget(&mut self, session_id: &str) {
        self.seen.remove(session_id);
    }
}

/// Timestamps on every record or on none (records that follow another
/// may go without in a timed trace: see [`Turns`]); the first record
/// checked decides.
#[derive(Debug, Default)]
pub struct Presence {
    first: Option<(bool, u64)>,
}

impl Presence {
    /// A record at `line` that starts something, with a timestamp or not
    /// (`present`); the error when the first record decided otherwise.
    pub fn check(&mut self, line: u64, present: bool) -> Option<FieldError> {
        match self.first {
            None => {
                self.first = Some((present, line));
                None
            }
            Some((first, _)) if first == present => None,
            Some((first, line)) => Some(FieldError::new(
                "timestamp",
                if first {
                    format!(
                        "missing, but the first record (line {line}) has one: give every record a timestamp, or none"
                    )
                } else {
                    format!(
                        "present, but the first record (line {line}) has none: give every record a timestamp, or none"
                    )
                },
            )),
        }
    }
}

/// What a record's place in the trace must keep (the rules of
/// trace-validate that span records): `"delta"` continues a conversation
/// (`follows`: it has `after` or an earlier turn of its session), and each
/// `after` id names an earlier record (`earlier`: whether one has it).
pub fn check_place(
    rec: &Record,
    after: Option<&[String]>,
    follows: bool,
    earlier: impl Fn(&str) -> bool,
    errors: &mut Vec<FieldError>,
) {
    let delta = rec
        .get("message_mode")
        .is_some_and(|m| m.get().trim() == "\"delta\"");
    if delta && !follows {
        errors.push(FieldError::new(
            "message_mode",
            "\"delta\" continues a conversation, but this record has no `after` and no \
             earlier turn of its `session_id`",
        ));
    }
    for id in after.unwrap_or_default() {
        if !earlier(id) {
            errors.push(FieldError::new(
                "after",
                format!(
                    "{}: no earlier record has this `id` (a record waits only for records before it)",
                    crate::error::quote_value(&serde_json::Value::from(id.as_str()).to_string())
                ),
            ));
        }
    }
}

fn check_messages(v: &RawValue, errors: &mut Vec<FieldError>) {
    let items: Vec<serde_json::Value> = match serde_json::from_str(v.get()) {
        Ok(items) if kind(v) == Kind::Array => items,
        _ => {
            errors.push(expected("messages", "an array of chat messages", v));
            return;
        }
    };
    if items.is_empty() {
        errors.push(FieldError::new(
            "messages",
            "is empty: a conversation needs a message",
        ));
    }
    check_chat_messages(&items, errors);
}

/// The roles of OpenAI's chat messages.
pub const CHAT_ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// Check that every entry of `messages` is a chat message an
/// OpenAI-compatible server accepts (role, content shape, tool calls, the
/// id a tool message answers), so that a trace that would be refused with
/// 400 at replay is refused here first. Errors name the field's path
/// (`messages[2].content[0].type`). Fields OpenAI does not define are left
/// alone: servers differ on them.
pub fn check_chat_messages(items: &[serde_json::Value], errors: &mut Vec<FieldError>) {
    for (i, item) in items.iter().enumerate() {
        check_chat_message(&format!("messages[{i}]"), item, errors);
    }
}

fn show(v: &serde_json::Value) -> String {
    quote_value(&v.to_string())
}

fn wrong(field: String, what: &str, v: &serde_json::Value) -> FieldError {
    FieldError::new(field, format!("expected {what}, found {}", show(v)))
}

/// The string `key` of the object at `field`, which must have one (else
/// None, and the error said).
fn string_in<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match obj.get(key) {
        None => errors.push(FieldError::new(field, format!("has no `{key}`"))),
        Some(serde_json::Value::String(s)) => return Some(s),
        Some(other) => errors.push(wrong(format!("{field}.{key}"), "a string", other)),
    }
    None
}

/// `key` of `obj`, a string among `allowed`: else an error saying it is
/// not `what()` (which names the choices).
fn string_among<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
    key: &str,
    allowed: &[&str],
    what: impl FnOnce() -> String,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    let s = string_in(obj, field, key, errors)?;
    if allowed.contains(&s) {
        return Some(s);
    }
    errors.push(FieldError::new(
        format!("{field}.{key}"),
        format!("{} is not {}", show(&obj[key]), what()),
    ));
    None
}

fn check_chat_message(field: &str, item: &serde_json::Value, errors: &mut Vec<FieldError>) {
    use serde_json::Value;
    let Value::Object(m) = item else {
        errors.push(wrong(
            field.to_string(),
            "an object with a string `role`",
            item,
        ));
        return;
    };
    let what = || format!("a chat role (one of {})", CHAT_ROLES.join(", "));
    let Some(role) = string_among(m, field, "role", CHAT_ROLES, what, errors) else {
        return;
    };
    let calls = m.get("tool_calls").filter(|c| !c.is_null());
    let has_calls = calls.is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        || m.get("function_call").is_some_and(|c| !c.is_null());
    match m.get("content") {
        Some(Value::String(_)) => {}
        None | Some(Value::Null) if role == "assistant" && has_calls => {}
        None => errors.push(FieldError::new(
            field,
            format!(
                "has no `content` (only an assistant message with `tool_calls` goes without; this one is {role}){}",
                if m.contains_key("parts") {
                    "; its `parts` are OpenTelemetry's form, which trace-convert --keep-messages maps to OpenAI's"
                } else {
                    ""
                }
            ),
        )),
        Some(Value::Null) => errors.push(FieldError::new(
            format!("{field}.content"),
            format!("is null: only an assistant message with `tool_calls` has no content; this one is {role}"),
        )),
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                check_content_part(&format!("{field}.content[{j}]"), role, part, errors);
            }
        }
        Some(other) => errors.push(wrong(
            format!("{field}.content"),
            "a string or an array of content parts",
            other,
        )),
    }
    if let Some(calls) = calls {
        let name = format!("{field}.tool_calls");
        if role != "assistant" {
            errors.push(FieldError::new(
                name,
                format!("only an assistant message calls tools; this one is {role}"),
            ));
        } else if let Value::Array(calls) = calls {
            for (k, call) in calls.iter().enumerate() {
                check_tool_call(&format!("{name}[{k}]"), call, errors);
            }
        } else {
            errors.push(wrong(name, "an array of tool calls", calls));
        }
    }
    match (role, m.get("tool_call_id")) {
        ("tool", None | Some(Value::Null)) => errors.push(FieldError::new(
            field,
            "is a tool message without `tool_call_id`: it needs the id of the tool call it answers",
        )),
        (
            _,
            Some(
                v @ Value::Number(_)
                | v @ Value::Bool(_)
                | v @ Value::Array(_)
                | v @ Value::Object(_),
            ),
        ) => errors.push(wrong(format!("{field}.tool_call_id"), "a string", v)),
        _ => {}
    }
    match (role, m.get("name")) {
        ("function", None | Some(Value::Null)) => errors.push(FieldError::new(
            field,
            "is a function message without `name`: it needs the name of the function that answered",
        )),
        (_, Some(v)) if !v.is_string() && !v.is_null() => {
            errors.push(wrong(format!("{field}.name"), "a string", v))
        }
        _ => {}
    }
}

/// The content part types OpenAI's chat API takes for a role (vLLM's
/// `audio_url` and `video_url` besides, for a user).
fn part_types(role: &str) -> &'static [&'static str] {
    match role {
        "user" => &[
            "text",
            "image_url",
            "input_audio",
            "file",
            "audio_url",
            "video_url",
        ],
        "assistant" => &["text", "refusal"],
        _ => &["text"],
    }
}

fn check_content_part(
    field: &str,
    role: &str,
    part: &serde_json::Value,
    errors: &mut Vec<FieldError>,
) {
    use serde_json::Value;
    let Value::Object(p) = part else {
        return errors.push(wrong(
            field.to_string(),
            "a content part (an object with a `type`)",
            part,
        ));
    };
    let allowed = part_types(role);
    let what = || {
        format!(
            "a content part of a {role} message ({} {})",
            if allowed.len() == 1 { "only" } else { "one of" },
            allowed.join(", ")
        )
    };
    let Some(ty) = string_among(p, field, "type", allowed, what, errors) else {
        return;
    };
    // The field each type needs, and what it holds.
    let (key, url) = match ty {
        "text" => ("text", false),
        "refusal" => ("refusal", false),
        "image_url" | "audio_url" | "video_url" => (ty, true),
        "input_audio" => ("input_audio", false),
        _ => ("file", false),
    };
    let name = format!("{field}.{key}");
    match (p.get(key), ty) {
        (Some(Value::String(_)), "text" | "refusal") => {}
        (Some(Value::Object(o)), _) if url => match o.get("url") {
            Some(Value::String(_)) => {}
            Some(other) => errors.push(wrong(format!("{name}.url"), "a string", other)),
            None => errors.push(FieldError::new(name, "has no `url`")),
        },
        (Some(Value::Object(o)), "input_audio") => {
            for k in ["data", "format"] {
                match o.get(k) {
                    Some(Value::String(_)) => {}
                    Some(other) => errors.push(wrong(format!("{name}.{k}"), "a string", other)),
                    None => errors.push(FieldError::new(name.clone(), format!("has no `{k}`"))),
                }
            }
        }
        (Some(Value::Object(_)), "file") => {}
        (None, _) => errors.push(FieldError::new(
            field,
            format!("is a {ty} part without `{key}`"),
        )),
        (Some(other), "text" | "refusal") => errors.push(wrong(name, "a string", other)),
        (Some(other), _) => errors.push(wrong(name, "an object", other)),
    }
}

fn check_tool_call(field: &str, call: &serde_json::Value, errors: &mut Vec<FieldError>) {
    use serde_json::Value;
    let Value::Object(c) = call else {
        return errors.push(wrong(
            field.to_string(),
            "a tool call ({\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}})",
            call,
        ));
    };
    match c.get("id") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(field, "has no `id`")),
        Some(other) => errors.push(wrong(format!("{field}.id"), "a string", other)),
    }
    match c.get("type") {
        Some(Value::String(t)) if t == "function" => {}
        None => errors.push(FieldError::new(field, "has no `type` (\"function\")")),
        Some(other) => errors.push(wrong(format!("{field}.type"), "\"function\"", other)),
    }
    let Some(f) = c.get("function") else {
        return errors.push(FieldError::new(
            field,
            "has no `function` ({\"name\", \"arguments\"})",
        ));
    };
    let Value::Object(f) = f else {
        return errors.push(wrong(format!("{field}.function"), "an object", f));
    };
    match f.get("name") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(
            format!("{field}.function"),
            "has no `name`",
        )),
        Some(other) => errors.push(wrong(format!("{field}.function.name"), "a string", other)),
    }
    match f.get("arguments") {
        Some(Value::String(_)) => {}
        None => errors.push(FieldError::new(
            format!("{field}.function"),
            "has no `arguments`",
        )),
        Some(other) => errors.push(wrong(
            format!("{field}.function.arguments"),
            "a string (the arguments as JSON text)",
            other,
        )),
    }
}

fn check_observed(v: &RawValue, errors: &mut Vec<FieldError>) {
    if kind(v) != Kind::Object {
        errors.push(expected("observed", "an object", v));
        return;
    }
    let Ok(obs) = Record::parse(v.get()) else {
        errors.push(expected("observed", "an object", v));
        return;
    };
    for (key, value) in obs.iter() {
        if kind(value) == Kind::Null {
            continue;
        }
        let field = format!("observed.{key}");
        let result = match key {
            "prompt_tokens" | "completion_tokens" => token_count(&field, value).map(drop),
            "ttft_ms" | "e2e_ms" => span_ms(&field, value).map(drop),
            "status" => string(&field, value).map(drop),
            _ => Ok(()),
        };
        if let Err(e) = result {
            errors.push(e);
        }
    }
}
