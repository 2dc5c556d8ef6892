//! The peers' own result files, read as result records (man/tracekit.7),
//! so that a team's earlier AIPerf, vLLM `bench serve` and GuideLLM runs
//! summarize beside tracekit's: AIPerf's per-request export
//! (`profile_export.jsonl`), vLLM's `--save-result --save-detailed` JSON and
//! GuideLLM's benchmark report (`benchmarks.json`). Each is recognised by
//! its content, not its name ([`sniff`]). What a file does not hold is left
//! null, or rebuilt from what it holds, and said in one warning per file;
//! nothing is invented.
//!
//! [`Results`] reads inputs as result lines, converting peer files on the
//! way; everything downstream sees ordinary result records.

use std::io::{BufRead, Read};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::error::{Error, FieldError, Location, Result};
use crate::io::{InputSpec, LineReader};

/// A peer whose result files are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// AIPerf's `profile_export.jsonl`: one record per line.
    Aiperf,
    /// vLLM `bench serve --save-result --save-detailed`: one JSON object.
    Vllm,
    /// GuideLLM's benchmark report: one JSON object.
    Guidellm,
}

/// Which peer wrote the input that starts with `head`, if one did. A
/// result line names `sent_ms`, which no peer writes.
pub fn sniff(head: &[u8]) -> Option<Peer> {
    let start = head.iter().position(|b| !b.is_ascii_whitespace())?;
    let head = &head[start..];
    if head.first() != Some(&b'{') {
        return None;
    }
    let first_line = &head[..memchr::memchr(b'\n', head).unwrap_or(head.len())];
    let has = |text: &[u8], key: &str| memchr::memmem::find(text, key.as_bytes()).is_some();
    if has(first_line, "\"sent_ms\"") {
        return None;
    }
    // GuideLLM's GenerativeBenchmarksReport, first: on one line it also
    // names `metadata` and `metrics`.
    if has(head, "\"benchmarks\"") {
        return Some(Peer::Guidellm);
    }
    // vLLM's result dict (vllm/benchmarks/serve.py, `benchmark`).
    if has(head, "\"ttfts\"")
        || (has(head, "\"request_throughput\"") && has(head, "\"total_output_tokens\""))
    {
        return Some(Peer::Vllm);
    }
    // AIPerf's MetricRecordInfo (aiperf/common/models/record_models.py).
    if has(first_line, "\"metadata\"") && has(first_line, "\"metrics\"") {
        return Some(Peer::Aiperf);
    }
    None
}

/// A peer file turned into result lines.
struct Converted {
    /// Each result line with the input line it comes from.
    lines: Vec<(u64, String)>,
    /// What the file could not give, for the one warning.
    warning: String,
}

/// Read the whole peer file `reader` as result lines.
fn convert(
    peer: Peer,
    mut reader: Box<dyn BufRead + Send>,
    source: &Arc<str>,
) -> Result<Converted> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(&**source, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Error::Record {
        loc: Location::new(source.clone(), line_of(&bytes, e.valid_up_to())),
        field: String::new(),
        msg: "is not valid UTF-8".into(),
    })?;
    match peer {
        Peer::Aiperf => aiperf(text, source),
        Peer::Vllm => vllm(&document(text, source)?, source),
        Peer::Guidellm => guidellm(&document(text, source)?, source),
    }
}

fn line_of(bytes: &[u8], at: usize) -> u64 {
    1 + memchr::memchr_iter(b'\n', &bytes[..at]).count() as u64
}

/// A whole-file JSON object.
fn document(text: &str, source: &Arc<str>) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::Record {
        loc: Location {
            source: source.clone(),
            line: e.line() as u64,
            column: Some(e.column() as u64),
        },
        field: String::new(),
        msg: format!("is not one JSON object: {e}"),
    })
}

fn bad(field: &str, want: &str, v: Option<&Value>) -> FieldError {
    let found = match v {
        None => "nothing".to_string(),
        Some(v) => crate::error::quote_value(&v.to_string()),
    };
    FieldError::new(field, format!("expected {want}, found {found}"))
}

/// A number that may be null or absent.
fn opt_num(v: Option<&Value>, field: &str) -> std::result::Result<Option<f64>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| bad(field, "a number", v)),
        Some(_) => Err(bad(field, "a number", v)),
    }
}

/// A count that may be null or absent.
fn opt_count(v: Option<&Value>, field: &str) -> std::result::Result<Option<u64>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(c), _) => Ok(Some(c)),
            // Python may write a count as 12.0.
            (None, Some(x)) if x >= 0.0 && x.fract() == 0.0 && x < 1e15 => Ok(Some(x as u64)),
            _ => Err(bad(field, "a count of tokens", v)),
        },
        Some(_) => Err(bad(field, "a count of tokens", v)),
    }
}

fn opt_text(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// Seconds to ms, kept to the nanosecond (the peers' clocks give no more;
/// this drops the float noise of the multiplication).
fn s_to_ms(s: f64) -> f64 {
    (s * 1e9).round() / 1e6
}

/// A span between two epoch-second timestamps in ms, kept to the
/// microsecond: a double near 1.7e9 s holds about a quarter of one.
fn epoch_span_ms(s: f64) -> f64 {
    crate::result::round_us(s * 1e3)
}

/// Epoch seconds as RFC 3339.
fn wall_clock(epoch_s: f64) -> String {
    crate::time::rfc3339(UNIX_EPOCH + Duration::from_secs_f64(epoch_s.max(0.0)))
}

/// The first line of a message, for `error`.
fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

/// One result line. `fields` hold everything known; the record's required
/// keys are written even when null.
#[derive(Default)]
struct Line {
    index: u64,
    id: Option<String>,
    session_id: Option<String>,
    model: Option<String>,
    scheduled_ms: Option<f64>,
    sent_ms: f64,
    start_time: Option<String>,
    ttft_ms: Option<f64>,
    e2e_ms: Option<f64>,
    itl_ms: Vec<f64>,
    input_length: Option<u64>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    status: &'static str,
    http_status: Option<u64>,
    error: Option<String>,
    warmup: bool,
    extra: Vec<(&'static str, Value)>,
}

impl Line {
    fn to_json(&self) -> String {
        let mut m = Map::new();
        m.insert("index".into(), json!(self.index));
        if let Some(id) = &self.id {
            m.insert("id".into(), json!(id));
        }
        if let Some(s) = &self.session_id {
            m.insert("session_id".into(), json!(s));
        }
        if let Some(model) = &self.model {
            m.insert("model".into(), json!(model));
        }
        m.insert("scheduled_ms".into(), json!(self.scheduled_ms));
        m.insert("sent_ms".into(), json!(self.sent_ms));
        m.insert("start_time".into(), json!(self.start_time));
        m.insert("ttft_ms".into(), json!(self.ttft_ms));
        m.insert("first_chunk_ms".into(), Value::Null);
        m.insert("e2e_ms".into(), json!(self.e2e_ms));
        m.insert("itl_ms".into(), json!(self.itl_ms));
        m.insert("input_length".into(), json!(self.input_length));
        m.insert("output_length".into(), Value::Null);
        m.insert("prompt_tokens".into(), json!(self.prompt_tokens));
        m.insert("completion_tokens".into(), json!(self.completion_tokens));
        m.insert("cached_tokens".into(), Value::Null);
        m.insert("finish_reason".into(), Value::Null);
        m.insert("status".into(), json!(self.status));
        m.insert("http_status".into(), json!(self.http_status));
        if let Some(e) = &self.error {
            m.insert("error".into(), json!(e));
        }
        if self.warmup {
            m.insert("warmup".into(), json!(true));
        }
        for (k, v) in &self.extra {
            m.insert((*k).into(), v.clone());
        }
        Value::Object(m).to_string()
    }
}

// ---------------------------------------------------------------- AIPerf

/// A time metric of an AIPerf record in ms: `{"value": x, "unit": "ms"}`
/// (aiperf/common/models/record_models.py, MetricValue).
fn aiperf_time(
    metrics: &Map<String, Value>,
    name: &str,
) -> std::result::Result<Option<f64>, FieldError> {
    let Some(m) = metrics.get(name).filter(|m| !m.is_null()) else {
        return Ok(None);
    };
    let field = format!("metrics.{name}");
    let scale = aiperf_unit(m, &field)?;
    opt_num(m.get("value"), &format!("{field}.value")).map(|v| v.map(|x| x * scale))
}

fn aiperf_unit(m: &Value, field: &str) -> std::result::Result<f64, FieldError> {
    match m.get("unit").and_then(Value::as_str) {
        Some("ms") => Ok(1.0),
        Some("ns") => Ok(1e-6),
        Some("us") => Ok(1e-3),
        Some("s" | "sec") => Ok(1e3),
        _ => Err(bad(
            &format!("{field}.unit"),
            "a unit of time (ns, us, ms, s)",
            m.get("unit"),
        )),
    }
}

fn aiperf_count(
    metrics: &Map<String, Value>,
    name: &str,
) -> std::result::Result<Option<u64>, FieldError> {
    match metrics.get(name).filter(|m| !m.is_null()) {
        None => Ok(None),
        Some(m) => opt_count(m.get("value"), &format!("metrics.{name}.value")),
    }
}

struct AiperfRecord {
    line: u64,
    start_ns: Option<i128>,
    out: Line,
}

fn ns(v: Option<&Value>, field: &str) -> std::result::Result<Option<i128>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i128::from(i))),
            (None, Some(f)) if f.is_finite() => Ok(Some(f as i128)),
            _ => Err(bad(field, "nanoseconds since the epoch", v)),
        },
        Some(_) => Err(bad(field, "nanoseconds since the epoch", v)),
    }
}

/// One line of `profile_export.jsonl`; its `sent_ms` is set once the
/// file's first send is known.
fn aiperf_record(text: &str) -> std::result::Result<AiperfRecord, FieldError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| FieldError::record(format!("is not a JSON object: {e}")))?;
    let meta = v
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("metadata", "an object", v.get("metadata")))?;
    let empty = Map::new();
    let metrics = match v.get("metrics") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        other => return Err(bad("metrics", "an object", other)),
    };
    let start_ns = ns(meta.get("request_start_ns"), "metadata.request_start_ns")?;
    let end_ns = ns(meta.get("request_end_ns"), "metadata.request_end_ns")?;
    let error = v.get("error").filter(|e| !e.is_null());
    let cancelled = meta.get("was_cancelled").and_then(Value::as_bool) == Some(true);
    let ok = error.is_none() && !cancelled;
    let mut out = Line {
        id: opt_text(meta.get("x_request_id")),
        session_id: opt_text(meta.get("x_correlation_id")),
        start_time: start_ns
            .map(|ns| crate::time::rfc3339(UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64))),
        status: if ok {
            "ok"
        } else if cancelled {
            "cancelled"
        } else {
            "error"
        },
        warmup: meta
            .get("benchmark_phase")
            .and_then(Value::as_str)
            .is_some_and(|p| p == "warmup"),
        ..Line::default()
    };
    // Request latency: start to the last response (request_latency_metric.py);
    // a failed request has no metrics, only its start and end.
    let latency = aiperf_time(metrics, "request_latency")?;
    let span = match (start_ns, end_ns) {
        (Some(s), Some(e)) if e >= s => Some((e - s) as f64 / 1e6),
        _ => None,
    };
    out.e2e_ms = latency.or(span);
    out.prompt_tokens = match aiperf_count(metrics, "input_sequence_length")? {
        Some(n) => Some(n),
        None => aiperf_count(metrics, "error_isl")?,
    };
    if ok {
        out.ttft_ms = aiperf_time(metrics, "time_to_first_token")?;
        if let Some(icl) = metrics.get("inter_chunk_latency").filter(|m| !m.is_null()) {
            let field = "metrics.inter_chunk_latency";
            let scale = aiperf_unit(icl, field)?;
            let values = icl.get("value").and_then(Value::as_array).ok_or_else(|| {
                bad(
                    &format!("{field}.value"),
                    "an array of numbers",
                    icl.get("value"),
                )
            })?;
            for (i, g) in values.iter().enumerate() {
                let gap = opt_num(Some(g), &format!("{field}.value[{i}]"))?
                    .ok_or_else(|| bad(&format!("{field}.value[{i}]"), "a number", Some(g)))?;
                out.itl_ms.push(gap * scale);
            }
        }
        // The output sequence length counts reasoning tokens too, as
        // `usage.completion_tokens` does (output_sequence_length_metric.py).
        out.completion_tokens = match aiperf_count(metrics, "output_sequence_length")? {
            Some(n) => Some(n),
            None => aiperf_count(metrics, "output_token_count")?,
        };
    } else if let Some(e) = error {
        out.http_status = e
            .get("code")
            .and_then(Value::as_u64)
            .filter(|c| (100..600).contains(c));
        let kind = opt_text(e.get("type")).unwrap_or_default();
        let msg = one_line(&opt_text(e.get("message")).unwrap_or_default());
        out.error = Some(match (kind.is_empty(), msg.is_empty()) {
            (false, false) => format!("{kind}: {msg}"),
            (false, true) => kind,
            _ => msg,
        });
    } else {
        out.error = Some("cancelled by AIPerf".into());
    }
    Ok(AiperfRecord {
        line: 0,
        start_ns,
        out,
    })
}

fn aiperf(text: &str, source: &Arc<str>) -> Result<Converted> {
    let mut records = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let mut r = aiperf_record(raw).map_err(|e| e.at(&Location::new(source.clone(), line)))?;
        if r.start_ns.is_none() {
            return Err(bad(
                "metadata.request_start_ns",
                "nanoseconds since the epoch",
                None,
            )
            .at(&Location::new(source.clone(), line)));
        }
        r.line = line;
        records.push(r);
    }
    let first = records.iter().filter_map(|r| r.start_ns).min().unwrap_or(0);
    let count = records.len();
    let lines = records
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r.out.index = i as u64;
            r.out.sent_ms = (r.start_ns.unwrap_or(first) - first) as f64 / 1e6;
            (r.line, r.out.to_json())
        })
        .collect();
    Ok(Converted {
        lines,
        warning: format!(
            "{source}: read as AIPerf's profile_export.jsonl ({count} records): sent_ms is each \
             request_start_ns from the first; AIPerf records no schedule, so scheduled_ms is \
             null (no dispatch lag); prompt_tokens and completion_tokens are AIPerf's input and \
             output sequence lengths (its tokenizer's count unless it ran with \
             --use-server-token-count); first_chunk_ms, cached_tokens and finish_reason are null"
        ),
    })
}

// ------------------------------------------------------------------ vLLM

/// vLLM's per-request arrays (vllm/benchmarks/serve.py, the `result` dict
/// of `benchmark`), one value per request, times in seconds.
fn vllm(doc: &Value, source: &Arc<str>) -> Result<Converted> {
    let at = |e: FieldError| e.at(&Location::new(source.clone(), 1));
    let obj = doc
        .as_object()
        .ok_or_else(|| at(bad("", "an object", Some(doc))))?;
    let array = |key: &str| -> Result<Option<&Vec<Value>>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            other => Err(at(bad(key, "an array", other))),
        }
    };
    let (Some(ttfts), Some(itls), Some(errors)) =
        (array("ttfts")?, array("itls")?, array("errors")?)
    else {
        return Err(Error::msg(format!(
            "{source}: vLLM's result has no per-request figures (ttfts, itls, errors): \
             save the run with --save-result --save-detailed"
        )));
    };
    let n = ttfts.len();
    let input_lens = array("input_lens")?;
    let output_lens = array("output_lens")?;
    let latencies = array("latencies")?;
    let start_times = array("start_times")?;
    for (key, a) in [
        ("itls", Some(itls)),
        ("errors", Some(errors)),
        ("input_lens", input_lens),
        ("output_lens", output_lens),
        ("latencies", latencies),
        ("start_times", start_times),
    ] {
        if let Some(a) = a.filter(|a| a.len() != n) {
            return Err(at(FieldError::new(
                key,
                format!(
                    "has {} values where ttfts has {n}: one per request is expected",
                    a.len()
                ),
            )));
        }
    }
    let num = |a: Option<&Vec<Value>>, key: &str, i: usize| -> Result<Option<f64>> {
        match a {
            None => Ok(None),
            Some(a) => opt_num(a.get(i), &format!("{key}[{i}]")).map_err(at),
        }
    };
    let count = |a: Option<&Vec<Value>>, key: &str, i: usize| -> Result<Option<u64>> {
        match a {
            None => Ok(None),
            Some(a) => opt_count(a.get(i), &format!("{key}[{i}]")).map_err(at),
        }
    };
    let mut starts = Vec::with_capacity(n);
    for i in 0..n {
        starts.push(num(start_times, "start_times", i)?);
    }
    let first = starts
        .iter()
        .flatten()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let model = opt_text(obj.get("model_id"));
    let mut lines = Vec::with_capacity(n);
    let mut rebuilt_e2e = 0;
    for i in 0..n {
        let ttft = num(Some(ttfts), "ttfts", i)?;
        let latency = num(latencies, "latencies", i)?;
        let error = opt_text(errors.get(i)).filter(|e| !e.trim().is_empty());
        let gaps = match &itls[i] {
            Value::Array(g) => g
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    opt_num(Some(v), &format!("itls[{i}][{k}]"))
                        .and_then(|x| {
                            x.ok_or_else(|| bad(&format!("itls[{i}][{k}]"), "a number", Some(v)))
                        })
                        .map(s_to_ms)
                })
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(at)?,
            Value::Null => Vec::new(),
            other => {
                return Err(at(bad(
                    &format!("itls[{i}]"),
                    "an array of seconds",
                    Some(other),
                )));
            }
        };
        // A failed request keeps vLLM's defaults: no error text is possible
        // (an HTTP reason may be empty), but then no time was taken either.
        let timed = ttft.is_some_and(|t| t > 0.0) || latency.is_some_and(|l| l > 0.0);
        let ok = error.is_none() && timed;
        let mut out = Line {
            index: i as u64,
            model: model.clone(),
            sent_ms: match starts[i] {
                Some(s) => s_to_ms(s - first),
                None => 0.0,
            },
            input_length: count(input_lens, "input_lens", i)?,
            prompt_tokens: count(input_lens, "input_lens", i)?,
            status: if ok { "ok" } else { "error" },
            ..Line::default()
        };
        if ok {
            out.ttft_ms = ttft.map(s_to_ms);
            out.completion_tokens = count(output_lens, "output_lens", i)?;
            out.e2e_ms = match latency {
                Some(l) => Some(s_to_ms(l)),
                None => {
                    // vLLM's latency is the last token chunk's time, which
                    // is TTFT plus every gap (endpoint_request_func.py).
                    rebuilt_e2e += 1;
                    out.ttft_ms.map(|t| t + gaps.iter().sum::<f64>())
                }
            };
            out.itl_ms = gaps;
        } else {
            out.error = Some(match error {
                Some(e) => one_line(&e),
                None => "failed, without a reason in vLLM's result".into(),
            });
        }
        lines.push((1, Line::to_json(&out)));
    }
    let sends = if start_times.is_some() {
        "sent_ms is each start_times value from the first".to_string()
    } else {
        "vLLM's detailed results have no send times (start_times, written by later releases): \
         sent_ms is left at 0 for every request, so the duration and throughputs are not the run's"
            .to_string()
    };
    let e2e = if rebuilt_e2e > 0 {
        format!(
            "; no latencies: e2e_ms is rebuilt as TTFT plus every gap, vLLM's own latency, for {rebuilt_e2e}"
        )
    } else {
        String::new()
    };
    Ok(Converted {
        lines,
        warning: format!(
            "{source}: read as vLLM bench serve's detailed result ({n} requests): {sends}{e2e}; \
             vLLM records no schedule, HTTP status nor wall-clock time, so scheduled_ms, \
             http_status and start_time are null; prompt_tokens are vLLM's prompt lengths \
             (input_lens) and completion_tokens its output_lens"
        ),
    })
}

// -------------------------------------------------------------- GuideLLM

/// GuideLLM's report: `benchmarks[].requests.{successful, errored,
/// incomplete}`, each a GenerativeRequestStats
/// (guidellm/schemas/request_stats.py) whose `info.timings`
/// (guidellm/schemas/info.py, RequestTimings) are epoch seconds.
fn guidellm(doc: &Value, source: &Arc<str>) -> Result<Converted> {
    let at = |e: FieldError| e.at(&Location::new(source.clone(), 1));
    let benchmarks = doc
        .get("benchmarks")
        .and_then(Value::as_array)
        .ok_or_else(|| at(bad("benchmarks", "an array", doc.get("benchmarks"))))?;
    struct Req<'a> {
        field: String,
        benchmark: usize,
        status: &'static str,
        stats: &'a Value,
    }
    let mut reqs = Vec::new();
    for (b, bench) in benchmarks.iter().enumerate() {
        let Some(requests) = bench.get("requests").filter(|r| !r.is_null()) else {
            continue;
        };
        for (key, status) in [
            ("successful", "ok"),
            ("errored", "error"),
            ("incomplete", "cancelled"),
        ] {
            let field = format!("benchmarks[{b}].requests.{key}");
            match requests.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Array(list)) => {
                    for (i, stats) in list.iter().enumerate() {
                        reqs.push(Req {
                            field: format!("{field}[{i}]"),
                            benchmark: b,
                            status,
                            stats,
                        });
                    }
                }
                other => return Err(at(bad(&field, "an array of requests", other))),
            }
        }
    }
    if reqs.is_empty() {
        return Err(Error::msg(format!(
            "{source}: GuideLLM's report holds no requests (benchmarks[].requests): \
             nothing to summarize"
        )));
    }
    let timing = |r: &Req, name: &str| -> Result<Option<f64>> {
        let t = r.stats.get("info").and_then(|i| i.get("timings"));
        opt_num(
            t.and_then(|t| t.get(name)),
            &format!("{}.info.timings.{name}", r.field),
        )
        .map_err(at)
    };
    let mut starts = Vec::with_capacity(reqs.len());
    let mut first = f64::INFINITY;
    for r in &reqs {
        let start = match timing(r, "request_start")? {
            Some(s) => s,
            None => timing(r, "resolve_start")?.ok_or_else(|| {
                at(bad(
                    &format!("{}.info.timings.request_start", r.field),
                    "epoch seconds",
                    None,
                ))
            })?,
        };
        let targeted = timing(r, "targeted_start")?;
        first = first.min(start).min(targeted.unwrap_or(start));
        starts.push((start, targeted));
    }
    let several = benchmarks.len() > 1;
    let mut lines = Vec::with_capacity(reqs.len());
    for (i, (r, (start, targeted))) in reqs.iter().zip(starts).enumerate() {
        let info = r.stats.get("info");
        let usage = |key: &str| -> Result<Option<u64>> {
            opt_count(
                r.stats.get(key).and_then(|m| m.get("total_tokens")),
                &format!("{}.{key}.total_tokens", r.field),
            )
            .map_err(at)
        };
        let mut out = Line {
            index: i as u64,
            id: opt_text(r.stats.get("request_id")),
            session_id: opt_text(info.and_then(|i| i.get("conversation_id"))),
            scheduled_ms: targeted.map(|t| epoch_span_ms(t - first)),
            sent_ms: epoch_span_ms(start - first),
            start_time: Some(wall_clock(start)),
            prompt_tokens: usage("input_metrics")?,
            status: r.status,
            ..Line::default()
        };
        if several {
            out.extra.push(("benchmark", json!(r.benchmark)));
        }
        let end = match timing(r, "request_end")? {
            Some(e) => Some(e),
            None => timing(r, "resolve_end")?,
        };
        out.e2e_ms = end
            .filter(|e| *e >= start)
            .map(|e| epoch_span_ms(e - start));
        if r.status == "ok" {
            let first_token = timing(r, "first_token_iteration")?;
            let last_token = timing(r, "last_token_iteration")?;
            out.ttft_ms = first_token.map(|t| epoch_span_ms(t - start));
            let iterations = opt_count(
                info.and_then(|i| i.get("timings"))
                    .and_then(|t| t.get("token_iterations")),
                &format!("{}.info.timings.token_iterations", r.field),
            )
            .map_err(at)?
            .unwrap_or(0);
            // GuideLLM keeps the first and last token's times and the count
            // of iterations between, no gap: spread evenly, as its own
            // iter_tokens_timings does.
            if let (Some(f), Some(l)) = (first_token, last_token) {
                if iterations > 1 && l >= f {
                    let gap = epoch_span_ms((l - f) / (iterations - 1) as f64);
                    out.itl_ms = vec![gap; (iterations - 1) as usize];
                }
            }
            out.completion_tokens = usage("output_metrics")?;
        } else {
            let msg = opt_text(info.and_then(|i| i.get("error")))
                .map(|e| one_line(&e))
                .filter(|e| !e.is_empty());
            out.error = Some(msg.unwrap_or_else(|| match r.status {
                "cancelled" => "incomplete when GuideLLM's benchmark ended".into(),
                _ => "errored, without a reason in GuideLLM's report".into(),
            }));
        }
        lines.push((1, out.to_json()));
    }
    let split = if several {
        format!(
            "; {} benchmarks are read as one run (--by benchmark splits them)",
            benchmarks.len()
        )
    } else {
        String::new()
    };
    Ok(Converted {
        warning: format!(
            "{source}: read as GuideLLM's benchmark report ({} requests, the ones GuideLLM kept \
             of each benchmark){split}: GuideLLM keeps no chunk times, so the itl_ms gaps are \
             spread evenly between the first and last token over token_iterations, as GuideLLM's \
             own timings are; an answer without usage has null completion_tokens (a peer's \
             convention counts its iterations); first_chunk_ms, http_status, cached_tokens and \
             finish_reason are null",
            lines.len()
        ),
        lines,
    })
}

// ---------------------------------------------------------------- inputs

enum Current {
    Plain(LineReader),
    Peer {
        source: Arc<str>,
        lines: std::vec::IntoIter<(u64, String)>,
        line: (u64, String),
    },
}

/// Result lines of several inputs in turn, as [`crate::io::Lines`] reads
/// them, with peer files converted when they are opened.
pub struct Results {
    specs: Vec<InputSpec>,
    next: usize,
    current: Option<Current>,
}

impl Results {
    /// The result lines of `specs`, in order.
    pub fn new(specs: &[InputSpec]) -> Results {
        Results {
            specs: specs.to_vec(),
            next: 0,
            current: None,
        }
    }

    fn open(spec: &InputSpec) -> Result<Current> {
        let source = spec.display_name();
        let mut reader = crate::io::open_input(spec)?;
        let head = reader.fill_buf().map_err(|e| Error::io(&*source, e))?;
        match sniff(head) {
            None => Ok(Current::Plain(LineReader::new(reader, source))),
            Some(peer) => {
                let c = convert(peer, reader, &source)?;
                crate::cli::warn(&c.warning);
                Ok(Current::Peer {
                    source,
                    lines: c.lines.into_iter(),
                    line: (0, String::new()),
                })
            }
        }
    }

    /// The next result line and where it is; `None` after the last input.
    pub fn next_line(&mut self) -> Result<Option<(Location, &str)>> {
        loop {
            let ready = match &mut self.current {
                None => match self.specs.get(self.next) {
                    None => return Ok(None),
                    Some(spec) => {
                        self.next += 1;
                        self.current = Some(Results::open(spec)?);
                        continue;
                    }
                },
                Some(Current::Plain(r)) => r.next_line()?.is_some(),
                Some(Current::Peer { lines, line, .. }) => match lines.next() {
                    Some(next) => {
                        *line = next;
                        true
                    }
                    None => false,
                },
            };
            if ready {
                break;
            }
            self.current = None;
        }
        match self.current.as_ref() {
            Some(Current::Plain(r)) => Ok(Some((r.location(), r.last_line()))),
            Some(Current::Peer { source, line, .. }) => Ok(Some((
                Location::new(source.clone(), line.0),
                line.1.as_str(),
            ))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_content() {
        assert_eq!(
            sniff(br#"{"metadata":{"request_start_ns":1},"metrics":{}}"#),
            Some(Peer::Aiperf)
        );
        assert_eq!(sniff(br#"{"date":"x","ttfts":[0.1]}"#), Some(Peer::Vllm));
        assert_eq!(
            sniff(b"{\n  \"metadata\": {},\n  \"benchmarks\": []\n}"),
            Some(Peer::Guidellm)
        );
        assert_eq!(
            sniff(br#"{"index":0,"sent_ms":0,"status":"ok","metadata":1,"metrics":2}"#),
            None
        );
        assert_eq!(sniff(b"  \n"), None);
        assert_eq!(sniff(b"[1]"), None);
    }
}
