//! The result record: one JSON line per replayed request (man/tracekit.7), written
//! by trace-replay and read by trace-summarize.
//!
//! Its fields are described once, in the table given to `result_fields!`
//! below (name, kind, what an absent value is, limit, where it lives): the
//! table writes the line (`to_json_line` and `Serialize`), reads it
//! (`Deserialize`, the one-pass reader's keys), checks its limits, names the
//! field of a bad line, and gives `--requests` its cells. A new field is one
//! row there and a field of the struct that holds it ([`ResultRecord`] for
//! what is known before sending, [`Measure`] for what the answer shows, and
//! [`ResultView`] or its [`Labels`] for what readers take).
//!
//! Optional measurements are written as `null` when they could not be taken
//! (`ttft_ms` of a failed request); optional labels (`id`, `error`, `warmup`,
//! `shard`) are left out when they do not apply.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

use crate::cell::Cell;
use crate::error::FieldError;
use crate::json::Cursor;
use crate::record::{MAX_SPAN_MS, MAX_TOKENS};

/// The `error` of a record's result that was never sent: the run stopped
/// first (a signal, or a sweep's run that could no longer pass).
pub const NOT_SENT: &str = "not sent: the run was stopped";

/// What happened to a request.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A complete answer.
    #[default]
    Ok,
    /// An HTTP error, a refused or reset connection, a cut stream, bad SSE.
    Error,
    /// No complete answer within `--timeout`.
    Timeout,
    /// Not sent, or stopped, because the run was interrupted.
    Cancelled,
}

impl Status {
    /// The name written in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Cancelled => "cancelled",
        }
    }
}

/// One request's outcome. Times are milliseconds; `*_ms` latencies are
/// measured from `sent_ms` on a monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Flat")]
pub struct ResultRecord {
    /// 0-based position of the record in the replayed trace.
    pub index: u64,
    /// The trace record's `id`.
    pub id: Option<String>,
    /// The trace record's `session_id`.
    pub session_id: Option<String>,
    /// The turn's position in its session, from 1.
    pub turn: Option<u64>,
    /// The trace record's `after`: the ids of the records it waited for.
    pub after: Vec<String>,
    /// The model the request named.
    pub model: Option<String>,
    /// When the request was due, ms since the run started.
    pub scheduled_ms: f64,
    /// When it was sent, ms since the run started.
    pub sent_ms: f64,
    /// Wall-clock send time, RFC 3339, for matching server logs.
    pub start_time: String,
    /// Prompt tokens the trace asked for.
    pub input_length: Option<u64>,
    /// Output tokens the trace asked for (`max_tokens`).
    pub output_length: Option<u64>,
    /// The trace's `observed.cached_tokens`: prompt tokens the recorded
    /// session's provider cache served.
    pub observed_cached_tokens: Option<u64>,
    /// A warmup request, left out of summaries.
    pub warmup: bool,
    /// `K/N` when the run was one shard of a multi-machine replay.
    pub shard: Option<String>,
    /// What the answer showed; its fields sit among the others in the line.
    pub measure: Measure,
}

/// The measured part of a result: what the exchange fills in as the answer
/// comes (the replay engine's `exchange.rs`), held by the result as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measure {
    /// First chunk with non-empty content (text, reasoning or tool call) − sent.
    pub ttft_ms: Option<f64>,
    /// First chunk carrying `choices`, even empty − sent (older vLLM releases' TTFT).
    pub first_chunk_ms: Option<f64>,
    /// Last byte of the response − sent.
    pub e2e_ms: Option<f64>,
    /// Gaps between successive content chunks.
    pub itl_ms: Vec<f64>,
    /// `usage.prompt_tokens` as the server reported it.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens` as the server reported it.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`, where reported.
    pub cached_tokens: Option<u64>,
    /// As the server sent it.
    pub finish_reason: Option<String>,
    /// What happened.
    pub status: Status,
    /// The response's HTTP status, if one arrived.
    pub http_status: Option<u16>,
    /// A one-line reason, never a credential.
    pub error: Option<String>,
}

impl Measure {
    /// The token counts a summary cannot take (over
    /// [`MAX_REPORTED_TOKENS`]) made none, as a count that is not one
    /// (negative, fractional) is: the first one's name and value.
    pub fn drop_huge_counts(&mut self) -> Option<(&'static str, u64)> {
        let mut first = None;
        for (name, count) in [
            ("prompt_tokens", &mut self.prompt_tokens),
            ("completion_tokens", &mut self.completion_tokens),
            ("cached_tokens", &mut self.cached_tokens),
        ] {
            if let Some(n) = count.filter(|&n| n > MAX_REPORTED_TOKENS) {
                *count = None;
                first.get_or_insert((name, n));
            }
        }
        first
    }
}

/// What a reader takes a field's value to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Integer,
    OptInteger,
    Number,
    OptNumber,
    Text,
    OptText,
    Numbers,
    Texts,
    Status,
    Bool,
}

/// How a field is written when it has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absent {
    /// It always has one.
    Never,
    /// `null` (a measurement that could not be taken).
    Null,
    /// Left out (a label that does not apply; an empty list, `false`).
    Omitted,
}

/// Who reads a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Summaries: read and checked on every line, a bad value refuses it.
    Figure,
    /// It names or explains the request: kept as its JSON text by the
    /// reader, decoded only where it is shown (`--requests`).
    Label,
}

/// The range a figure may have; results beyond it are refused where read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    None,
    /// Milliseconds, in absolute value.
    Ms(f64),
    /// A duration in milliseconds: from 0 to the limit (a negative one is
    /// no measurement, and would make a trace no tool takes back).
    Span(f64),
    /// Tokens.
    Tokens(u64),
}

/// One field of the result record.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub absent: Absent,
    pub role: Role,
    pub limit: Limit,
}

/// The latest `scheduled_ms` and `sent_ms`: as far from the run's start as
/// a trace's timestamps may be apart (crate::record::MAX_TIMESTAMP_MS).
/// `ttft_ms`, `first_chunk_ms`, `e2e_ms` and each `itl_ms` gap are spans,
/// at most crate::record::MAX_SPAN_MS (ten years).
pub const MAX_RESULT_TIME_MS: f64 = crate::record::MAX_TIMESTAMP_MS;

/// The most tokens a server may report in `prompt_tokens`,
/// `completion_tokens` or `cached_tokens`: 2^32, so that sums over
/// billions of results stay exact. `input_length` and `output_length` are
/// the trace's and keep the record's limit (crate::record::MAX_TOKENS).
pub const MAX_REPORTED_TOKENS: u64 = 1 << 32;

/// A field of the record, the measure, the view or its labels.
macro_rules! at {
    ($r:expr, record, $name:ident) => {
        $r.$name
    };
    ($r:expr, measure, $name:ident) => {
        $r.measure.$name
    };
    ($v:expr, Figure, $name:ident) => {
        $v.$name
    };
    ($v:expr, Label, $name:ident) => {
        $v.labels.$name
    };
}

/// A label's place in [`Labels`]; a figure has none.
macro_rules! label {
    ($l:expr, Label, $name:ident) => {
        Some(&mut $l.$name)
    };
    ($l:expr, Figure, $name:ident) => {
        None
    };
}

/// The table, and what it generates; see the module's comment.
macro_rules! result_fields {
    ($(
        $(#[$serde:meta])*
        $name:ident: $ty:ty, $kind:ident, $absent:ident, $role:ident, $limit:expr, $home:ident;
    )*) => {
        /// The fields, in the line's order.
        pub const FIELDS: &[Field] = &[$(
            Field {
                name: stringify!($name),
                kind: Kind::$kind,
                absent: Absent::$absent,
                role: Role::$role,
                limit: $limit,
            },
        )*];

        /// A field, by its place in [`FIELDS`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Key {
            $($name,)*
        }

        impl Key {
            /// The field a JSON key names.
            #[inline]
            pub fn of(key: &str) -> Option<Key> {
                match key {
                    $(stringify!($name) => Some(Key::$name),)*
                    _ => None,
                }
            }

            pub const fn field(self) -> &'static Field {
                &FIELDS[self as usize]
            }
        }

        impl ResultRecord {
            fn write_fields(&self, out: &mut Vec<u8>) {
                $(put(out, Absent::$absent, stringify!($name), &at!(self, $home, $name));)*
            }

            /// The record a line read by the one-pass reader holds, if it
            /// is one as `Deserialize` takes it (the labels decoded, a
            /// `scheduled_ms`, an `index` and a `start_time`); `None` when
            /// only `Deserialize` can tell (and word why).
            pub fn from_view(view: &ResultView<'_>, itl: &[f64]) -> Option<ResultRecord> {
                if !view.labels.read {
                    return None;
                }
                let mut r = ResultRecord::default();
                $(at!(r, $home, $name) = Take::take(&at!(view, $role, $name), itl)?;)*
                Some(r)
            }
        }

        impl Serialize for ResultRecord {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut st = s.serialize_struct("ResultRecord", FIELDS.len())?;
                $(
                    let v = &at!(self, $home, $name);
                    if Absent::$absent == Absent::Omitted && Put::absent(v) {
                        st.skip_field(stringify!($name))?;
                    } else {
                        st.serialize_field(stringify!($name), v)?;
                    }
                )*
                st.end()
            }
        }

        /// The line as serde reads it.
        #[derive(Deserialize)]
        struct Flat {
            $($(#[$serde])* $name: $ty,)*
        }

        impl From<Flat> for ResultRecord {
            fn from(f: Flat) -> ResultRecord {
                let mut r = ResultRecord::default();
                $(at!(r, $home, $name) = f.$name;)*
                r
            }
        }

        impl<'a> Labels<'a> {
            /// Where the label `key` names is held; `None` for a figure.
            fn slot(&mut self, key: Key) -> Option<&mut Option<Raw<'a>>> {
                match key {
                    $(Key::$name => label!(self, $role, $name),)*
                }
            }
        }

        impl<'a> ResultView<'a> {
            /// Read the value of `key` under the cursor.
            #[inline]
            fn read_key(&mut self, key: Key, c: &mut Cursor<'a>, line: &'a str, itl: &mut Vec<f64>) -> Option<()> {
                match key {
                    $(Key::$name => at!(self, $role, $name) = Slot::fast(c, line, itl)?,)*
                }
                Some(())
            }

            /// Every figure within [the result's limits](MAX_RESULT_TIME_MS), so
            /// that sums, buckets and printed cells stay finite and short.
            pub fn check_limits(&self, itl: &[f64]) -> Result<(), FieldError> {
                $(Bounded::check(&at!(self, $role, $name), stringify!($name), $limit, itl)?;)*
                Ok(())
            }

            /// The field's value as a cell of `--requests`; `None` for a
            /// label whose text does not decode as its kind.
            pub fn cell(&self, key: Key) -> Option<Cell> {
                match key {
                    $(Key::$name => ToCell::cell(&at!(self, $role, $name), Kind::$kind),)*
                }
            }
        }
    };
}

// The result record's fields, in the line's order.
//   name: Rust type, kind, when absent, role, limit, where it lives;
// with the attributes serde reads the field with.
result_fields! {
    index: u64, Integer, Never, Label, Limit::None, record;
    #[serde(default)]
    id: Option<String>, OptText, Omitted, Label, Limit::None, record;
    #[serde(default)]
    session_id: Option<String>, OptText, Omitted, Label, Limit::None, record;
    #[serde(default)]
    turn: Option<u64>, OptInteger, Omitted, Label, Limit::None, record;
    #[serde(default)]
    after: Vec<String>, Texts, Omitted, Label, Limit::None, record;
    #[serde(default)]
    model: Option<String>, OptText, Omitted, Label, Limit::None, record;
    // Written always; peers' results may have none.
    scheduled_ms: f64, OptNumber, Never, Figure, Limit::Ms(MAX_RESULT_TIME_MS), record;
    sent_ms: f64, Number, Never, Figure, Limit::Ms(MAX_RESULT_TIME_MS), record;
    start_time: String, Text, Never, Label, Limit::None, record;
    ttft_ms: Option<f64>, OptNumber, Null, Figure, Limit::Span(MAX_SPAN_MS), measure;
    first_chunk_ms: Option<f64>, OptNumber, Null, Figure, Limit::Span(MAX_SPAN_MS), measure;
    e2e_ms: Option<f64>, OptNumber, Null, Figure, Limit::Span(MAX_SPAN_MS), measure;
    // Each gap within the limit.
    #[serde(default)]
    itl_ms: Vec<f64>, Numbers, Never, Figure, Limit::Span(MAX_SPAN_MS), measure;
    input_length: Option<u64>, OptInteger, Null, Figure, Limit::Tokens(MAX_TOKENS), record;
    output_length: Option<u64>, OptInteger, Null, Figure, Limit::Tokens(MAX_TOKENS), record;
    prompt_tokens: Option<u64>, OptInteger, Null, Figure, Limit::Tokens(MAX_REPORTED_TOKENS), measure;
    completion_tokens: Option<u64>, OptInteger, Null, Figure, Limit::Tokens(MAX_REPORTED_TOKENS), measure;
    cached_tokens: Option<u64>, OptInteger, Null, Figure, Limit::Tokens(MAX_REPORTED_TOKENS), measure;
    // The trace's `observed.cached_tokens`: what the recorded session's
    // provider cache served, beside what this run's did.
    #[serde(default)]
    observed_cached_tokens: Option<u64>, OptInteger, Omitted, Figure, Limit::Tokens(MAX_TOKENS), record;
    finish_reason: Option<String>, OptText, Null, Label, Limit::None, measure;
    status: Status, Status, Never, Figure, Limit::None, measure;
    http_status: Option<u16>, OptInteger, Null, Figure, Limit::None, measure;
    #[serde(default)]
    error: Option<String>, OptText, Omitted, Label, Limit::None, measure;
    #[serde(default)]
    warmup: bool, Bool, Omitted, Figure, Limit::None, record;
    #[serde(default)]
    shard: Option<String>, OptText, Omitted, Label, Limit::None, record;
}

impl ResultRecord {
    /// The record as one compact JSON line (no newline): the text its
    /// `Serialize` form gives (a test holds the two equal), written field
    /// by field, which costs a fraction of serde's way for each of a
    /// replay's requests.
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::with_capacity(320 + 12 * self.measure.itl_ms.len());
        out.push(b'{');
        self.write_fields(&mut out);
        out.push(b'}');
        String::from_utf8(out).expect("JSON text is UTF-8")
    }
}

/// One field into the line, unless it is left out.
#[inline]
fn put<T: Put + ?Sized>(out: &mut Vec<u8>, absent: Absent, name: &str, v: &T) {
    if absent == Absent::Omitted && v.absent() {
        return;
    }
    if out.len() > 1 {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    v.put(out);
}

/// A value of the record, written as serde_json writes it.
trait Put {
    /// No value (none, empty, false): left out where the field may be.
    fn absent(&self) -> bool {
        false
    }
    fn put(&self, out: &mut Vec<u8>);
}

impl Put for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        use serde_json::ser::Formatter;
        let _ = serde_json::ser::CompactFormatter.write_u64(out, *self);
    }
}

impl Put for u16 {
    fn put(&self, out: &mut Vec<u8>) {
        u64::from(*self).put(out);
    }
}

impl Put for f64 {
    /// As serde_json writes it: `null` where not finite.
    fn put(&self, out: &mut Vec<u8>) {
        use serde_json::ser::Formatter;
        if self.is_finite() {
            let _ = serde_json::ser::CompactFormatter.write_f64(out, *self);
        } else {
            out.extend_from_slice(b"null");
        }
    }
}

impl Put for String {
    fn put(&self, out: &mut Vec<u8>) {
        crate::json::write_str(out, self);
    }
}

impl<T: Put> Put for Option<T> {
    fn absent(&self) -> bool {
        self.is_none()
    }
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => v.put(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: Put> Put for Vec<T> {
    fn absent(&self) -> bool {
        self.is_empty()
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.put(out);
        }
        out.push(b']');
    }
}

impl Put for Status {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        out.extend_from_slice(self.as_str().as_bytes());
        out.push(b'"');
    }
}

impl Put for bool {
    fn absent(&self) -> bool {
        !*self
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

/// Milliseconds rounded to the microsecond, the precision results are
/// written with.
mod read;

pub use read::*;
use read::{Bounded, Slot, Take, ToCell};

#[cfg(test)]
mod tests {
    use super::read::{REQUIRED, read_fast};
    use super::*;

    type Fields = (
        (Option<f64>, f64, Option<f64>, Option<f64>, Option<f64>),
        (
            Option<u64>,
            Option<u64>,
            Option<u64>,
            Option<u64>,
            Option<u64>,
        ),
        (Status, Option<u16>, bool),
    );

    fn fields(v: &ResultView) -> Fields {
        (
            (
                v.scheduled_ms,
                v.sent_ms,
                v.ttft_ms,
                v.first_chunk_ms,
                v.e2e_ms,
            ),
            (
                v.input_length,
                v.output_length,
                v.prompt_tokens,
                v.completion_tokens,
                v.cached_tokens,
            ),
            (v.status, v.http_status, v.warmup),
        )
    }

    /// The one-pass reader and serde_json read the same values.
    #[test]
    fn fast_reader_agrees_with_serde() {
        let mut state = 3u64;
        let mut next = |m: u64| {
            state = crate::hash::mix(state);
            state % m
        };
        let mut fast = 0;
        for i in 0..20_000 {
            let mut r = ResultRecord {
                index: i,
                id: (next(2) == 0).then(|| format!("r\"{i}")),
                scheduled_ms: next(100_000) as f64 / 1000.0,
                sent_ms: next(100_000) as f64 / 8.0,
                start_time: "2026-11-22T10:00:00Z".into(),
                measure: Measure {
                    ttft_ms: (next(3) > 0).then(|| next(10_000) as f64 / 10.0),
                    first_chunk_ms: (next(3) > 0).then(|| next(10_000) as f64 / 100.0),
                    e2e_ms: (next(3) > 0).then(|| next(100_000) as f64 * 0.1),
                    itl_ms: (0..next(5)).map(|_| next(10_000) as f64 / 1000.0).collect(),
                    prompt_tokens: (next(2) == 0).then(|| next(5000)),
                    completion_tokens: (next(2) == 0).then(|| next(50)),
                    http_status: (next(2) == 0).then(|| 200 + next(400) as u16),
                    status: [
                        Status::Ok,
                        Status::Error,
                        Status::Timeout,
                        Status::Cancelled,
                    ][next(4) as usize],
                    ..Measure::default()
                },
                warmup: next(5) == 0,
                ..ResultRecord::default()
            };
            // Written with an exponent (sent_ms stops at 10^13, the
            // result's limit, where no exponent is written yet).
            if next(7) == 0 {
                r.sent_ms = 1e-7;
            }
            let line = r.to_json_line();
            let mut a = Vec::new();
            let mut b = Vec::new();
            let got = ResultView::read(&line, &mut a).unwrap();
            fast += usize::from(read_fast(&line, &mut Vec::new()).is_some());
            let want = ResultView::parse(&line).unwrap();
            want.itl(&mut b).unwrap();
            assert_eq!(fields(&got), fields(&want), "{line}");
            assert_eq!(a, b, "{line}");
        }
        // One line in seven has `1e-7` and others have 17-digit floats such
        // as 1234.5000000000002: those take the slow path by design.
        assert!(fast > 12_000, "{fast}");
    }

    /// Mangled lines: where the one-pass reader reads one, serde reads the
    /// same figures, gaps and labels (labels it gave up on, serde must
    /// refuse too).
    #[test]
    fn the_one_pass_reads_what_serde_reads() {
        type Read = (Fields, Vec<f64>, Option<Vec<Option<String>>>);
        fn labels(l: &Labels) -> Vec<Option<String>> {
            [
                l.index,
                l.id,
                l.session_id,
                l.turn,
                l.after,
                l.model,
                l.start_time,
                l.finish_reason,
                l.error,
                l.shard,
            ]
            .iter()
            .map(|r| r.map(|r| r.0.to_string()))
            .collect()
        }
        let samples = [
            r#"{"index":0,"id":"r\"1","session_id":"s1","turn":2,"after":["a","b"],"model":"m","scheduled_ms":1.5,"sent_ms":1.75,"start_time":"2026-11-22T10:00:00Z","ttft_ms":12.125,"first_chunk_ms":null,"e2e_ms":40,"itl_ms":[0.5,1,2.25],"input_length":6955,"output_length":null,"prompt_tokens":7,"completion_tokens":3,"cached_tokens":null,"finish_reason":"stop","status":"ok","http_status":200,"warmup":false,"shard":"1/2"}"#,
            r#" { "sent_ms" : 0 , "status" : "timeout" , "itl_ms" : [ ] , "x" : { "y" : [ 1 , -2.5 , "z" ] } , "error" : "read timed out" , "warmup" : true , "http_status" : null } "#,
        ];
        let fast = |b: &[u8]| -> Option<Read> {
            let mut itl = Vec::new();
            let v = read_fast(std::str::from_utf8(b).ok()?, &mut itl)?;
            let l = v.labels.read.then(|| labels(&v.labels));
            Some((fields(&v), itl, l))
        };
        let slow = |b: &[u8]| -> Option<Read> {
            let line = std::str::from_utf8(b).ok()?;
            let v = ResultView::parse(line).ok()?;
            let mut itl = Vec::new();
            v.itl(&mut itl).ok()?;
            let l = Labels::parse(line).map(|l| labels(&l));
            Some((fields(&v), itl, l))
        };
        let tally = crate::json::differential::hold(&samples, fast, slow);
        assert!(tally.both > 2 * tally.declined, "{tally:?}");
    }

    /// The hand-written line is the serde form, whatever the fields hold.
    #[test]
    fn json_lines_are_the_serde_form() {
        let mut state = 11u64;
        let mut next = |m: u64| {
            state = crate::hash::mix(state);
            state % m
        };
        let texts = [
            "",
            "plain",
            "quote \" and \\ back",
            "tab\tnew\nline\u{1}",
            "ünï ✓",
        ];
        for i in 0..5_000 {
            let mut text = || (next(3) > 0).then(|| texts[next(5) as usize].to_string());
            // Drawn in the order of the fields before the measure was nested.
            let (id, session_id, model, finish_reason, error, shard) =
                (text(), text(), text(), text(), text(), text());
            let r = ResultRecord {
                index: i,
                id,
                session_id,
                turn: None,
                after: Vec::new(),
                model,
                shard,
                scheduled_ms: [0.0, 1e21, 0.1 + 0.2, 12.5, -3.0][next(5) as usize],
                sent_ms: next(1_000_000) as f64 / 7.0,
                start_time: "2026-11-22T10:00:00.123456Z".into(),
                input_length: (next(2) == 0).then(|| next(u64::MAX)),
                output_length: (next(2) == 0).then(|| next(50)),
                observed_cached_tokens: None,
                warmup: next(2) == 0,
                measure: Measure {
                    finish_reason,
                    error,
                    ttft_ms: (next(3) > 0).then(|| [f64::NAN, 1.0 / 3.0, 4.0][next(3) as usize]),
                    first_chunk_ms: (next(3) > 0).then(|| next(10_000) as f64 / 100.0),
                    e2e_ms: (next(3) > 0).then_some(f64::INFINITY),
                    itl_ms: (0..next(4)).map(|_| next(10_000) as f64 / 1000.0).collect(),
                    prompt_tokens: (next(2) == 0).then(|| next(5000)),
                    completion_tokens: (next(2) == 0).then_some(0),
                    cached_tokens: (next(2) == 0).then(|| next(512)),
                    status: [
                        Status::Ok,
                        Status::Error,
                        Status::Timeout,
                        Status::Cancelled,
                    ][next(4) as usize],
                    http_status: (next(2) == 0).then(|| next(600) as u16),
                },
            };
            let mut r = r;
            if next(2) == 0 {
                r.turn = Some(next(40));
            }
            r.after = (0..next(3))
                .map(|k| texts[((i + k) % 5) as usize].to_string())
                .collect();
            assert_eq!(r.to_json_line(), serde_json::to_string(&r).unwrap());
        }
    }

    /// Every field of the record and its measure is a row of the table, in
    /// the struct's order or not: a field left out would never be written.
    #[test]
    fn observed_cached_tokens_is_written_after_cached_tokens_only_when_the_trace_had_it() {
        let mut r = ResultRecord {
            start_time: "t".into(),
            ..ResultRecord::default()
        };
        assert!(!r.to_json_line().contains("observed_cached_tokens"));
        r.observed_cached_tokens = Some(4096);
        let line = r.to_json_line();
        assert!(line.contains(r#""cached_tokens":null,"observed_cached_tokens":4096,"#));
        let mut itl = Vec::new();
        let view = ResultView::read(&line, &mut itl).unwrap();
        assert_eq!(view.observed_cached_tokens, Some(4096));
        let back: ResultRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn every_field_is_in_the_table() {
        let shown = format!("{:?}", ResultRecord::default());
        let mut names: Vec<&str> = shown
            .split(['{', ','])
            .filter_map(|part| part.trim().split_once(':').map(|(name, _)| name.trim()))
            .filter(|name| *name != "measure")
            .collect();
        names.sort_unstable();
        let mut table: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        table.sort_unstable();
        assert_eq!(names, table);
        assert_eq!(FIELDS.len(), 25);
        assert_eq!(Key::shard as usize, FIELDS.len() - 1);
        // Every result has these two; a peer's result may lack the rest.
        assert_eq!(
            REQUIRED,
            (1 << Key::sent_ms as u32) | (1 << Key::status as u32)
        );
    }

    /// The record the one-pass reader's view gives is the one serde reads,
    /// and there is none where serde refuses the line.
    #[test]
    fn records_from_the_view_are_what_serde_reads() {
        let mut state = 5u64;
        let mut next = |m: u64| {
            state = crate::hash::mix(state);
            state % m
        };
        let texts = ["plain", "quote \" back \\", "tab\tline", "ünï"];
        // Changes that serde refuses, or reads otherwise than the writer wrote.
        let mangles: [(&str, &str); 8] = [
            (r#""index":"#, r#""index":"7","x":"#),
            (r#","scheduled_ms":"#, r#","old_scheduled_ms":"#),
            (r#""itl_ms":["#, r#""itl_ms":null,"x":["#),
            (r#""start_time":"#, r#""start_time":null,"x":"#),
            (r#""model":"#, r#""model":3,"x":"#),
            (r#""sent_ms":"#, r#""id":"twice","id":"again","sent_ms":"#),
            (r#""status":"#, r#""after":null,"status":"#),
            (r#""status":"#, r#""turn":-1,"status":"#),
        ];
        let (mut from_view, mut refused) = (0, 0);
        for i in 0..4_000 {
            let mut text = || (next(2) == 0).then(|| texts[next(4) as usize].to_string());
            let (id, session_id, model, finish_reason, error, shard) =
                (text(), text(), text(), text(), text(), text());
            let r = ResultRecord {
                index: i,
                id,
                session_id,
                turn: (next(2) == 0).then(|| next(9)),
                after: (0..next(3))
                    .map(|k| texts[k as usize].to_string())
                    .collect(),
                model: Some(model.unwrap_or_default()),
                scheduled_ms: next(100_000) as f64 / 1000.0,
                sent_ms: next(100_000) as f64 / 8.0,
                start_time: "2026-11-22T10:00:00Z".into(),
                input_length: (next(2) == 0).then(|| next(5000)),
                output_length: (next(2) == 0).then(|| next(50)),
                observed_cached_tokens: None,
                warmup: next(5) == 0,
                shard,
                measure: Measure {
                    ttft_ms: (next(3) > 0).then(|| next(10_000) as f64 / 10.0),
                    e2e_ms: (next(3) > 0).then(|| next(100_000) as f64 * 0.1),
                    itl_ms: (0..next(5)).map(|_| next(10_000) as f64 / 1000.0).collect(),
                    completion_tokens: (next(2) == 0).then(|| next(50)),
                    finish_reason,
                    error,
                    status: Status::Error,
                    http_status: (next(2) == 0).then(|| 200 + next(400) as u16),
                    ..Measure::default()
                },
            };
            let mut line = r.to_json_line();
            if next(2) == 0 {
                let (from, to) = mangles[next(8) as usize];
                line = line.replacen(from, to, 1);
            }
            let mut itl = Vec::new();
            let Ok(view) = ResultView::read(&line, &mut itl) else {
                continue;
            };
            let want: Option<ResultRecord> = serde_json::from_str(&line).ok();
            match ResultRecord::from_view(&view, &itl) {
                Some(got) => {
                    assert_eq!(Some(&got), want.as_ref(), "{line}");
                    from_view += 1;
                }
                None => refused += usize::from(want.is_none()),
            }
        }
        assert!(from_view > 1_000 && refused > 300, "{from_view} {refused}");
    }

    #[test]
    fn nulls_for_missing_measurements_absent_labels() {
        let r = ResultRecord {
            index: 3,
            scheduled_ms: 10.0,
            sent_ms: 10.25,
            start_time: "2026-11-22T10:00:00.010Z".into(),
            measure: Measure {
                status: Status::Error,
                http_status: Some(503),
                error: Some("HTTP 503: overloaded".into()),
                ..Measure::default()
            },
            ..ResultRecord::default()
        };
        assert_eq!(
            r.to_json_line(),
            r#"{"index":3,"scheduled_ms":10.0,"sent_ms":10.25,"start_time":"2026-11-22T10:00:00.010Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":null,"output_length":null,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":503,"error":"HTTP 503: overloaded"}"#
        );
        let back: ResultRecord = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(back, r);
    }
}
