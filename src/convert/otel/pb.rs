//! OTLP protobuf input: the trace messages of the published
//! `opentelemetry/proto` (`trace/v1/trace.proto`, `common/v1/common.proto`,
//! `resource/v1/resource.proto`), written out for prost by hand so that no
//! protoc is needed to build, with the fields the converter reads.
//!
//! A message becomes the OTLP JSON form of the same spans (hex ids,
//! decimal-string nanoseconds, typed attribute values), which `super::otel`
//! then reads like any JSON document: every rule is the same for both.

use prost::Message;
use serde_json::{Map, Value, json};

/// `TracesData` and `ExportTraceServiceRequest`: the same wire form.
#[derive(Clone, PartialEq, Message)]
pub struct TracesData {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    #[prost(int32, tag = "6")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
    #[prost(message, repeated, tag = "13")]
    pub links: Vec<Link>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Event {
    #[prost(fixed64, tag = "1")]
    pub time_unix_nano: u64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Link {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(int32, tag = "3")]
    pub code: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    /// The proto's `string_value` … `bytes_value`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        String(String),
        #[prost(bool, tag = "2")]
        Bool(bool),
        #[prost(int64, tag = "3")]
        Int(i64),
        #[prost(double, tag = "4")]
        Double(f64),
        #[prost(message, tag = "5")]
        Array(super::ArrayValue),
        #[prost(message, tag = "6")]
        Kvlist(super::KeyValueList),
        #[prost(bytes = "vec", tag = "7")]
        Bytes(Vec<u8>),
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

/// The first bytes of a zstd frame.
const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Whether bytes are OTLP protobuf rather than JSON: a `resource_spans`
/// field (tag 1, length-delimited) whose message starts with a resource or
/// scope spans field, in a head with a byte JSON text never holds (a
/// control character); or the Collector's file export (see [`decode`]): a
/// 4-byte big-endian size, then such a message or a zstd frame.
pub fn looks_like(head: &[u8]) -> bool {
    let binary = head
        .iter()
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
    let message = |b: &[u8]| -> bool {
        if b.first() != Some(&0x0a) {
            return false;
        }
        let mut rest = &b[1..];
        match prost::encoding::decode_varint(&mut rest) {
            Ok(_) => matches!(rest.first(), Some(0x0a | 0x12)),
            Err(_) => false,
        }
    };
    let framed = |b: &[u8]| b.len() > 4 && (message(&b[4..]) || b[4..].starts_with(&ZSTD));
    binary && (message(head) || framed(head))
}

/// One message of an input: protobuf, or (a compressed frame of the
/// Collector's JSON format) the text of one OTLP JSON document.
pub enum Frame {
    Proto(TracesData),
    Json(String),
}

/// The messages of a binary input, as the OpenTelemetry Collector's file
/// exporter writes them (opentelemetry-collector-contrib,
/// `exporter/fileexporter/file_writer.go`, `exportMessageAsBuffer`): each
/// message after its size, a 4-byte big-endian unsigned integer. With
/// `format: proto` every message is framed so; with `compression: zstd`
/// each message, JSON or protobuf, is compressed into one zstd frame before
/// it is framed (`marshaller.go`), unless the native compression feature
/// gate makes the whole file one zstd stream (`compression_writer.go`),
/// which the input reader opens like any zstd file. One message on its own
/// (a `.pb` request body) is read too: it starts with its first field's
/// tag, 0x0a, where a size starts with 0 (messages under 16 MiB), or the
/// sizes lead exactly to the end of the input. An error names the byte
/// offset and the reason.
pub fn decode(bytes: &[u8]) -> Result<Vec<Frame>, String> {
    if bytes.first() == Some(&0x0a) && !frames_fit(bytes) {
        return TracesData::decode(bytes)
            .map(|m| vec![Frame::Proto(m)])
            .map_err(|e| format!("malformed OTLP protobuf (byte 0): {e}"));
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let Some(size) = bytes.get(at..at + 4) else {
            return Err(format!(
                "malformed OTLP protobuf (byte {at}): {} bytes left, not a 4-byte message size",
                bytes.len() - at
            ));
        };
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
        let body = at + 4;
        let Some(msg) = bytes.get(body..body.saturating_add(size)) else {
            return Err(format!(
                "malformed OTLP protobuf (byte {at}): a message of {size} bytes, but {} are left",
                bytes.len() - body
            ));
        };
        out.push(frame(msg, body)?);
        at = body + size;
    }
    Ok(out)
}

/// Whether the input is a sequence of size-framed messages to its last
/// byte.
fn frames_fit(bytes: &[u8]) -> bool {
    let mut at = 0usize;
    while let Some(size) = bytes.get(at..at + 4) {
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
        at = at + 4 + size;
    }
    at == bytes.len()
}

/// One framed message, at byte `at`: protobuf, or a zstd frame of
/// protobuf or JSON.
fn frame(msg: &[u8], at: usize) -> Result<Frame, String> {
    let proto = |b: &[u8]| {
        TracesData::decode(b)
            .map(Frame::Proto)
            .map_err(|e| format!("malformed OTLP protobuf (byte {at}): {e}"))
    };
    if !msg.starts_with(&ZSTD) {
        return proto(msg);
    }
    let plain = zstd::stream::decode_all(msg)
        .map_err(|e| format!("malformed zstd frame (byte {at}): {e}"))?;
    if plain.first() == Some(&b'{') {
        return String::from_utf8(plain)
            .map(Frame::Json)
            .map_err(|e| format!("malformed OTLP JSON in the zstd frame at byte {at}: {e}"));
    }
    proto(&plain)
}

fn hex(bytes: &[u8]) -> Value {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    Value::String(s)
}

fn any(v: &AnyValue) -> Value {
    use any_value::Value as V;
    match &v.value {
        None => json!({}),
        Some(V::String(s)) => json!({"stringValue": s}),
        Some(V::Bool(b)) => json!({"boolValue": b}),
        // As protojson writes 64-bit integers: decimal text.
        Some(V::Int(i)) => json!({"intValue": i.to_string()}),
        Some(V::Double(d)) => json!({"doubleValue": d}),
        Some(V::Array(a)) => {
            json!({"arrayValue": {"values": a.values.iter().map(any).collect::<Vec<_>>()}})
        }
        Some(V::Kvlist(l)) => json!({"kvlistValue": {"values": kvs(&l.values)}}),
        Some(V::Bytes(b)) => json!({"bytesValue": hex(b)}),
    }
}

fn kvs(list: &[KeyValue]) -> Vec<Value> {
    list.iter()
        .map(|kv| json!({"key": kv.key, "value": kv.value.as_ref().map_or(json!({}), any)}))
        .collect()
}

/// A span in OTLP JSON's form (absent fields left out, as protojson does).
fn span(s: &Span) -> Value {
    let mut o = Map::new();
    if !s.trace_id.is_empty() {
        o.insert("traceId".into(), hex(&s.trace_id));
    }
    if !s.span_id.is_empty() {
        o.insert("spanId".into(), hex(&s.span_id));
    }
    if !s.parent_span_id.is_empty() {
        o.insert("parentSpanId".into(), hex(&s.parent_span_id));
    }
    o.insert("name".into(), json!(s.name));
    o.insert("kind".into(), json!(s.kind));
    o.insert(
        "startTimeUnixNano".into(),
        json!(s.start_time_unix_nano.to_string()),
    );
    o.insert(
        "endTimeUnixNano".into(),
        json!(s.end_time_unix_nano.to_string()),
    );
    o.insert("attributes".into(), Value::Array(kvs(&s.attributes)));
    if !s.events.is_empty() {
        let events = s
            .events
            .iter()
            .map(|e| {
                json!({"timeUnixNano": e.time_unix_nano.to_string(), "name": e.name,
                       "attributes": kvs(&e.attributes)})
            })
            .collect();
        o.insert("events".into(), Value::Array(events));
    }
    if !s.links.is_empty() {
        let links = s
            .links
            .iter()
            .map(|l| json!({"traceId": hex(&l.trace_id), "spanId": hex(&l.span_id)}))
            .collect();
        o.insert("links".into(), Value::Array(links));
    }
    let status = s.status.as_ref().map_or(json!({}), |st| {
        let mut m = Map::new();
        if !st.message.is_empty() {
            m.insert("message".into(), json!(st.message));
        }
        if st.code != 0 {
            m.insert("code".into(), json!(st.code));
        }
        Value::Object(m)
    });
    o.insert("status".into(), status);
    Value::Object(o)
}

/// One message as the OTLP JSON document `{"resourceSpans": …}`.
pub fn to_json(m: &TracesData) -> Value {
    let rs: Vec<Value> =
        m.resource_spans
            .iter()
            .map(|r| {
                let scopes: Vec<Value> = r
                .scope_spans
                .iter()
                .map(|s| {
                    let scope = s.scope.as_ref().map_or(json!({}), |sc| {
                        json!({"name": sc.name, "version": sc.version})
                    });
                    json!({"scope": scope, "spans": s.spans.iter().map(span).collect::<Vec<_>>()})
                })
                .collect();
                let resource = r
                    .resource
                    .as_ref()
                    .map_or(json!({}), |res| json!({"attributes": kvs(&res.attributes)}));
                json!({"resource": resource, "scopeSpans": scopes})
            })
            .collect();
    json!({ "resourceSpans": rs })
}
