//! The result record: one JSON line per replayed request (man/tracekit.7), written
//! by trace-replay and read by trace-summarize.
//!
//! Field order is the struct's order. Optional measurements are written as
//! `null` when they could not be taken (`ttft_ms` of a failed request);
//! optional labels (`id`, `error`, `warmup`, `shard`) are left out when they
//! do not apply.

use serde::{Deserialize, Serialize};

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

fn is_false(b: &bool) -> bool {
    !*b
}

/// One request's outcome. Times are milliseconds; `*_ms` latencies are
/// measured from `sent_ms` on a monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// 0-based position of the record in the replayed trace.
    pub index: u64,
    /// The trace record's `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The trace record's `session_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The turn's position in its session, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// The trace record's `after`: the ids of the records it waited for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// The model the request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When the request was due, ms since the run started.
    pub scheduled_ms: f64,
    /// When it was sent, ms since the run started.
    pub sent_ms: f64,
    /// Wall-clock send time, RFC 3339, for matching server logs.
    pub start_time: String,
    /// First chunk with non-empty content (text, reasoning or tool call) − sent.
    pub ttft_ms: Option<f64>,
    /// First chunk carrying `choices`, even empty − sent (older vLLM releases' TTFT).
    pub first_chunk_ms: Option<f64>,
    /// Last byte of the response − sent.
    pub e2e_ms: Option<f64>,
    /// Gaps between successive content chunks.
    #[serde(default)]
    pub itl_ms: Vec<f64>,
    /// Prompt tokens the trace asked for.
    pub input_length: Option<u64>,
    /// Output tokens the trace asked for (`max_tokens`).
    pub output_length: Option<u64>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A warmup request, left out of summaries.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warmup: bool,
    /// `K/N` when the run was one shard of a multi-machine replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

impl ResultRecord {
    /// The record as one compact JSON line (no newline): the text its
    /// `Serialize` form gives (a test holds the two equal), written field
    /// by field, which costs a fraction of serde's way with maps for each
    /// of a replay's requests.
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::with_capacity(320 + 12 * self.itl_ms.len());
        out.extend_from_slice(b"{\"index\":");
        json_u64(&mut out, Some(self.index));
        for (name, value) in [("id", &self.id), ("session_id", &self.session_id)] {
            if let Some(v) = value {
                field(&mut out, name);
                crate::json::write_str(&mut out, v);
            }
        }
        if let Some(turn) = self.turn {
            field(&mut out, "turn");
            json_u64(&mut out, Some(turn));
        }
        if !self.after.is_empty() {
            field(&mut out, "after");
            out.push(b'[');
            for (i, id) in self.after.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                crate::json::write_str(&mut out, id);
            }
            out.push(b']');
        }
        if let Some(v) = &self.model {
            field(&mut out, "model");
            crate::json::write_str(&mut out, v);
        }
        field(&mut out, "scheduled_ms");
        json_f64(&mut out, Some(self.scheduled_ms));
        field(&mut out, "sent_ms");
        json_f64(&mut out, Some(self.sent_ms));
        field(&mut out, "start_time");
        crate::json::write_str(&mut out, &self.start_time);
        for (name, value) in [
            ("ttft_ms", self.ttft_ms),
            ("first_chunk_ms", self.first_chunk_ms),
            ("e2e_ms", self.e2e_ms),
        ] {
            field(&mut out, name);
            json_f64(&mut out, value);
        }
        field(&mut out, "itl_ms");
        out.push(b'[');
        for (i, &gap) in self.itl_ms.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_f64(&mut out, Some(gap));
        }
        out.push(b']');
        for (name, value) in [
            ("input_length", self.input_length),
            ("output_length", self.output_length),
            ("prompt_tokens", self.prompt_tokens),
            ("completion_tokens", self.completion_tokens),
            ("cached_tokens", self.cached_tokens),
        ] {
            field(&mut out, name);
            json_u64(&mut out, value);
        }
        field(&mut out, "finish_reason");
        match &self.finish_reason {
            Some(f) => crate::json::write_str(&mut out, f),
            None => out.extend_from_slice(b"null"),
        }
        field(&mut out, "status");
        out.push(b'"');
        out.extend_from_slice(self.status.as_str().as_bytes());
        out.push(b'"');
        field(&mut out, "http_status");
        json_u64(&mut out, self.http_status.map(u64::from));
        if let Some(e) = &self.error {
            field(&mut out, "error");
            crate::json::write_str(&mut out, e);
        }
        if self.warmup {
            out.extend_from_slice(b",\"warmup\":true");
        }
        if let Some(s) = &self.shard {
            field(&mut out, "shard");
            crate::json::write_str(&mut out, s);
        }
        out.push(b'}');
        String::from_utf8(out).expect("JSON text is UTF-8")
    }
}

/// `,"name":` for a name that needs no escaping.
fn field(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// A number as serde_json writes it; null for none (or not finite).
fn json_f64(out: &mut Vec<u8>, v: Option<f64>) {
    use serde_json::ser::Formatter;
    match v {
        Some(v) if v.is_finite() => {
            let _ = serde_json::ser::CompactFormatter.write_f64(out, v);
        }
        _ => out.extend_from_slice(b"null"),
    }
}

fn json_u64(out: &mut Vec<u8>, v: Option<u64>) {
    use serde_json::ser::Formatter;
    match v {
        Some(v) => {
            let _ = serde_json::ser::CompactFormatter.write_u64(out, v);
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// Milliseconds rounded to the microsecond, the precision results are
/// written with.
pub fn round_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
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
            let r = ResultRecord {
                index: i,
                id: text(),
                session_id: text(),
                turn: None,
                after: Vec::new(),
                model: text(),
                finish_reason: text(),
                error: text(),
                shard: text(),
                scheduled_ms: [0.0, 1e21, 0.1 + 0.2, 12.5, -3.0][next(5) as usize],
                sent_ms: next(1_000_000) as f64 / 7.0,
                start_time: "2026-11-22T10:00:00.123456Z".into(),
                ttft_ms: (next(3) > 0).then(|| [f64::NAN, 1.0 / 3.0, 4.0][next(3) as usize]),
                first_chunk_ms: (next(3) > 0).then(|| next(10_000) as f64 / 100.0),
                e2e_ms: (next(3) > 0).then_some(f64::INFINITY),
                itl_ms: (0..next(4)).map(|_| next(10_000) as f64 / 1000.0).collect(),
                input_length: (next(2) == 0).then(|| next(u64::MAX)),
                output_length: (next(2) == 0).then(|| next(50)),
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
                warmup: next(2) == 0,
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

    #[test]
    fn nulls_for_missing_measurements_absent_labels() {
        let r = ResultRecord {
            index: 3,
            scheduled_ms: 10.0,
            sent_ms: 10.25,
            start_time: "2026-11-22T10:00:00.010Z".into(),
            status: Status::Error,
            http_status: Some(503),
            error: Some("HTTP 503: overloaded".into()),
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

// The range of every figure a result may give, stated once; results beyond
// it are refused where they are read. `input_length` and `output_length`
// are the trace's and keep the record's limit (crate::record::MAX_TOKENS).

/// The latest `scheduled_ms` and `sent_ms`: as far from the run's start as
/// a trace's timestamps may be apart (crate::record::MAX_TIMESTAMP_MS).
/// `ttft_ms`, `first_chunk_ms`, `e2e_ms` and each `itl_ms` gap are spans,
/// at most crate::record::MAX_SPAN_MS (ten years).
pub const MAX_RESULT_TIME_MS: f64 = crate::record::MAX_TIMESTAMP_MS;

/// The most tokens a server may report in `prompt_tokens`,
/// `completion_tokens` or `cached_tokens`: 2^32, so that sums over
/// billions of results stay exact.
pub const MAX_REPORTED_TOKENS: u64 = 1 << 32;

/// A result line read for summarizing: the measurements borrowed from the
/// line, nothing allocated. Unknown fields are ignored here; `--by` reads
/// its field from the raw line.
#[derive(Debug, Deserialize)]
pub struct ResultView<'a> {
    /// When the request was due, ms.
    #[serde(default)]
    pub scheduled_ms: Option<f64>,
    /// When it was sent, ms.
    pub sent_ms: f64,
    /// First content − sent.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// First chunk − sent.
    #[serde(default)]
    pub first_chunk_ms: Option<f64>,
    /// Last byte − sent.
    #[serde(default)]
    pub e2e_ms: Option<f64>,
    /// Gaps between content chunks, raw: parsed only when needed.
    #[serde(default, borrow)]
    pub itl_ms: Option<&'a serde_json::value::RawValue>,
    /// Asked-for prompt tokens.
    #[serde(default)]
    pub input_length: Option<u64>,
    /// Asked-for output tokens.
    #[serde(default)]
    pub output_length: Option<u64>,
    /// Server-reported prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Server-reported output tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Server-reported cached prompt tokens.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// What happened.
    pub status: Status,
    /// HTTP status, if any.
    #[serde(default)]
    pub http_status: Option<u16>,
    /// Warmup results are left out of summaries.
    #[serde(default)]
    pub warmup: bool,
}

impl<'a> ResultView<'a> {
    /// Read one result line, its `itl_ms` gaps into `itl` (cleared first).
    /// The common shape of a line is read in one pass; anything unusual
    /// (escaped keys, exponents, a bad value) goes through serde_json, which
    /// also words the error.
    pub fn read(
        line: &'a str,
        itl: &mut Vec<f64>,
    ) -> Result<ResultView<'a>, crate::error::FieldError> {
        itl.clear();
        if let Some(view) = read_fast(line, itl) {
            view.check_limits(itl)?;
            return Ok(view);
        }
        itl.clear();
        let view = ResultView::parse(line)?;
        view.itl(itl)?;
        view.check_limits(itl)?;
        Ok(view)
    }

    /// Every figure within [the result's limits](MAX_RESULT_TIME_MS), so
    /// that sums, buckets and printed cells stay finite and short.
    pub fn check_limits(&self, itl: &[f64]) -> Result<(), crate::error::FieldError> {
        use crate::record::MAX_SPAN_MS;
        let times = [
            ("scheduled_ms", self.scheduled_ms, MAX_RESULT_TIME_MS),
            ("sent_ms", Some(self.sent_ms), MAX_RESULT_TIME_MS),
            ("ttft_ms", self.ttft_ms, MAX_SPAN_MS),
            ("first_chunk_ms", self.first_chunk_ms, MAX_SPAN_MS),
            ("e2e_ms", self.e2e_ms, MAX_SPAN_MS),
        ];
        let gaps = itl.iter().map(|&g| ("itl_ms", Some(g), MAX_SPAN_MS));
        for (field, v, max) in times.into_iter().chain(gaps) {
            match v {
                Some(v) if v.is_nan() || v.abs() > max => {
                    return Err(crate::error::FieldError::new(
                        field,
                        format!(
                            "{v:e} is over the limit of {} ms",
                            crate::text::format_ms(max)
                        ),
                    ));
                }
                _ => {}
            }
        }
        for (field, n, max) in [
            ("input_length", self.input_length, crate::record::MAX_TOKENS),
            (
                "output_length",
                self.output_length,
                crate::record::MAX_TOKENS,
            ),
            ("prompt_tokens", self.prompt_tokens, MAX_REPORTED_TOKENS),
            (
                "completion_tokens",
                self.completion_tokens,
                MAX_REPORTED_TOKENS,
            ),
            ("cached_tokens", self.cached_tokens, MAX_REPORTED_TOKENS),
        ] {
            if let Some(n) = n {
                crate::record::at_most(field, n, max, "tokens")?;
            }
        }
        Ok(())
    }

    /// Parse one result line. serde's message for a wrong type does not
    /// name the field, so on failure [`diagnose`] finds it.
    pub fn parse(line: &'a str) -> Result<ResultView<'a>, crate::error::FieldError> {
        serde_json::from_str(line).map_err(|e| diagnose(line, &e))
    }

    /// The `itl_ms` gaps, appended to `out`.
    pub fn itl(&self, out: &mut Vec<f64>) -> Result<(), crate::error::FieldError> {
        let Some(raw) = self.itl_ms else {
            return Ok(());
        };
        let text = raw.get().trim();
        let bad = || {
            crate::error::FieldError::new(
                "itl_ms",
                format!(
                    "expected an array of numbers ≥ 0, found {}",
                    crate::error::quote_value(text)
                ),
            )
        };
        if text == "null" {
            return Ok(());
        }
        let inner = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .ok_or_else(bad)?;
        if inner.trim().is_empty() {
            return Ok(());
        }
        for item in inner.split(',') {
            match item.trim().parse::<f64>() {
                Ok(v) if v >= 0.0 && v.is_finite() => out.push(v),
                _ => return Err(bad()),
            }
        }
        Ok(())
    }
}

/// One pass over a well-formed result line; `None` for anything else.
fn read_fast<'a>(line: &'a str, itl: &mut Vec<f64>) -> Option<ResultView<'a>> {
    use crate::json::{decimal, string, value, ws};
    fn optional<T>(
        b: &[u8],
        i: usize,
        parse: impl Fn(&[u8], usize) -> Option<(T, usize)>,
    ) -> Option<(Option<T>, usize)> {
        if b[i..].starts_with(b"null") {
            Some((None, i + 4))
        } else {
            parse(b, i).map(|(v, end)| (Some(v), end))
        }
    }
    fn integer(b: &[u8], mut i: usize) -> Option<(u64, usize)> {
        let start = i;
        let mut v: u64 = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            v = v.checked_mul(10)?.checked_add(u64::from(b[i] - b'0'))?;
            i += 1;
        }
        let len = i - start;
        let clean = len > 0 && (len == 1 || b[start] != b'0');
        (clean && !matches!(b.get(i), Some(b'.' | b'e' | b'E'))).then_some((v, i))
    }

    let b = line.as_bytes();
    let mut view = ResultView {
        scheduled_ms: None,
        sent_ms: 0.0,
        ttft_ms: None,
        first_chunk_ms: None,
        e2e_ms: None,
        itl_ms: None,
        input_length: None,
        output_length: None,
        prompt_tokens: None,
        completion_tokens: None,
        cached_tokens: None,
        status: Status::Ok,
        http_status: None,
        warmup: false,
    };
    let mut seen: u32 = 0;
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string(b, i)?;
        let key = &line[i + 1..key_end - 1];
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        let bit = match key {
            "sent_ms" => 0,
            "scheduled_ms" => 1,
            "ttft_ms" => 2,
            "first_chunk_ms" => 3,
            "e2e_ms" => 4,
            "itl_ms" => 5,
            "input_length" => 6,
            "output_length" => 7,
            "prompt_tokens" => 8,
            "completion_tokens" => 9,
            "cached_tokens" => 10,
            "status" => 11,
            "http_status" => 12,
            "warmup" => 13,
            _ if key.contains('\\') => return None,
            _ => 31,
        };
        if bit != 31 {
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
        }
        i = match bit {
            0 => {
                let (v, end) = decimal(b, i)?;
                view.sent_ms = v;
                end
            }
            1..=4 => {
                let (v, end) = optional(b, i, decimal)?;
                match bit {
                    1 => view.scheduled_ms = v,
                    2 => view.ttft_ms = v,
                    3 => view.first_chunk_ms = v,
                    _ => view.e2e_ms = v,
                }
                end
            }
            5 => {
                if b[i..].starts_with(b"null") {
                    i + 4
                } else {
                    if b.get(i) != Some(&b'[') {
                        return None;
                    }
                    i = ws(b, i + 1);
                    if b.get(i) == Some(&b']') {
                        i + 1
                    } else {
                        loop {
                            let (v, end) = decimal(b, i)?;
                            if v < 0.0 {
                                return None;
                            }
                            itl.push(v);
                            i = ws(b, end);
                            match b.get(i) {
                                Some(b',') => i = ws(b, i + 1),
                                Some(b']') => break i + 1,
                                _ => return None,
                            }
                        }
                    }
                }
            }
            6..=10 => {
                let (v, end) = optional(b, i, integer)?;
                match bit {
                    6 => view.input_length = v,
                    7 => view.output_length = v,
                    8 => view.prompt_tokens = v,
                    9 => view.completion_tokens = v,
                    _ => view.cached_tokens = v,
                }
                end
            }
            11 => {
                let end = string(b, i)?;
                view.status = match &line[i..end] {
                    "\"ok\"" => Status::Ok,
                    "\"error\"" => Status::Error,
                    "\"timeout\"" => Status::Timeout,
                    "\"cancelled\"" => Status::Cancelled,
                    _ => return None,
                };
                end
            }
            12 => {
                let (v, end) = optional(b, i, integer)?;
                view.http_status = match v {
                    Some(code) => Some(u16::try_from(code).ok()?),
                    None => None,
                };
                end
            }
            13 => {
                if b[i..].starts_with(b"true") {
                    view.warmup = true;
                    i + 4
                } else if b[i..].starts_with(b"false") {
                    i + 5
                } else {
                    return None;
                }
            }
            _ => value(b, i, 1)?,
        };
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    let required = (1 << 0) | (1 << 11);
    (ws(b, i + 1) == b.len() && seen & required == required).then_some(view)
}

/// Name the field that made a result line unreadable.
fn diagnose(line: &str, err: &serde_json::Error) -> crate::error::FieldError {
    use crate::error::FieldError;
    use crate::record::{self, Kind, Record};
    let rec = match Record::parse(line) {
        Ok(rec) => rec,
        Err(e) => return FieldError::record(e.msg),
    };
    let optional_numbers = ["scheduled_ms", "ttft_ms", "first_chunk_ms", "e2e_ms"];
    let optional_integers = [
        "input_length",
        "output_length",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "http_status",
    ];
    for (key, value) in rec.iter() {
        let null = record::kind(value) == Kind::Null;
        let result = match key {
            "sent_ms" => record::number(key, value).map(drop),
            k if optional_numbers.contains(&k) && !null => record::number(key, value).map(drop),
            k if optional_integers.contains(&k) && !null => record::integer(key, value).map(drop),
            "status" => match record::string(key, value) {
                Ok(s) if matches!(&*s, "ok" | "error" | "timeout" | "cancelled") => Ok(()),
                Ok(_) | Err(_) => Err(FieldError::new(
                    key,
                    format!(
                        "expected \"ok\", \"error\", \"timeout\" or \"cancelled\", found {}",
                        crate::error::quote_value(value.get())
                    ),
                )),
            },
            "warmup" if record::kind(value) != Kind::Bool => Err(FieldError::new(
                key,
                format!(
                    "expected true or false, found {}",
                    crate::error::quote_value(value.get())
                ),
            )),
            _ => Ok(()),
        };
        if let Err(e) = result {
            return e;
        }
    }
    for required in ["sent_ms", "status"] {
        if !rec.contains(required) {
            return FieldError::new(required, "missing: every result has one");
        }
    }
    let text = err.to_string();
    FieldError::record(match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    })
}
