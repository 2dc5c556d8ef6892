//! A server's own metrics: the Prometheus text exposition format a serving
//! engine publishes on `/metrics`, the scrape file trace-replay writes
//! (`--metrics-out`, one JSON object per scrape), and the server figures
//! trace-summarize draws from it.
//!
//! The parser is strict (a line it cannot read is an error naming it): a
//! scrape that is half understood would make figures that look right and
//! are not. It reads the text format 0.0.4, and the OpenMetrics lines
//! that share its shape (`# EOF`, `# UNIT`).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};

/// One sample of a scrape: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order the server wrote them.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The series' key in the scrape file: `name{k="v",...}`, or the bare
    /// name without labels, with label values escaped as the text format
    /// escapes them.
    pub fn key(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A line of an exposition that is not the text format.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Every sample of an exposition, in order.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let err = |message: String| ParseError {
            line: i + 1,
            message,
        };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            match words.next() {
                Some("EOF") => break,
                Some("TYPE") => {
                    let name = words.next().unwrap_or_default();
                    let kind = words.next().unwrap_or_default();
                    if !is_name(name) {
                        return Err(err(format!("# TYPE names no metric: `{}`", clip(line))));
                    }
                    if !matches!(
                        kind,
                        "counter"
                            | "gauge"
                            | "histogram"
                            | "summary"
                            | "untyped"
                            | "unknown"
                            | "info"
                            | "stateset"
                            | "gaugehistogram"
                    ) {
                        return Err(err(format!("`{kind}` is not a metric type")));
                    }
                }
                // HELP, UNIT and free comments say nothing a figure needs.
                _ => {}
            }
            continue;
        }
        let sample = parse_sample(line).map_err(err)?;
        if !seen.insert(sample.key()) {
            return Err(err(format!("series `{}` appears twice", sample.key())));
        }
        out.push(sample);
    }
    Ok(out)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A line quoted in a message, cut to a readable length.
fn clip(s: &str) -> String {
    if s.chars().count() <= 80 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..end];
    if !is_name(name) {
        return Err(format!(
            "`{}` does not start with a metric name",
            clip(line)
        ));
    }
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels).map_err(|e| format!("{name}: {e}"))?;
    }
    let mut fields = rest.split_whitespace();
    if !rest.starts_with([' ', '\t']) {
        return Err(format!(
            "{name}: expected a space and a value after the series, found `{}`",
            clip(rest)
        ));
    }
    let value = fields
        .next()
        .ok_or_else(|| format!("{name}: the sample has no value"))?;
    let value = parse_value(value).ok_or_else(|| format!("{name}: `{value}` is not a number"))?;
    if let Some(ts) = fields.next()
        && ts.parse::<i64>().is_err()
    {
        return Err(format!("{name}: `{ts}` is not a timestamp in ms"));
    }
    if let Some(extra) = fields.next() {
        return Err(format!("{name}: unexpected `{extra}` after the value"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Go's ParseFloat as Prometheus writes values: decimals, exponents,
/// `NaN`, `+Inf`, `-Inf`.
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ if s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) =>
        {
            s.parse().ok()
        }
        _ => None,
    }
}

/// Labels after the `{`; returns what follows the `}`.
fn parse_labels<'a>(mut s: &'a str, out: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let key = &s[..end];
        if key.is_empty() || key.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("bad label name at `{}`", clip(s)));
        }
        s = s[end..].trim_start_matches([' ', '\t']);
        s = s
            .strip_prefix("=\"")
            .ok_or_else(|| format!("label `{key}` has no `=\"value\"`"))?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next() {
                None => return Err(format!("label `{key}`: the value is not closed")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => {
                        let c = other.map(|(_, c)| c.to_string()).unwrap_or_default();
                        return Err(format!("label `{key}`: unknown escape `\\{c}`"));
                    }
                },
                Some((_, c)) => value.push(c),
            }
        };
        if out.iter().any(|(k, _)| k == key) {
            return Err(format!("label `{key}` is given twice"));
        }
        out.push((key.to_string(), value));
        s = s[close + 1..].trim_start_matches([' ', '\t']);
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err(format!(
                "expected `,` or `}}` after label `{key}`, found `{}`",
                clip(s)
            ));
        }
    }
}

/// One line of the scrape file: `{"t_ms": T, "samples": {"key": value}}`;
/// a value JSON cannot hold (NaN, ±Inf) is written as null.
pub fn scrape_line(t_ms: f64, samples: &[Sample], keep: impl Fn(&str) -> bool) -> String {
    let mut map = Map::new();
    for s in samples {
        let key = s.key();
        if !keep(&key) {
            continue;
        }
        let value = serde_json::Number::from_f64(s.value).map_or(Value::Null, Value::Number);
        map.insert(key, value);
    }
    let t = (t_ms * 1000.0).round() / 1000.0;
    let mut line = Map::new();
    line.insert("t_ms".into(), Value::from(t));
    line.insert("samples".into(), Value::Object(map));
    Value::Object(line).to_string()
}

/// The metric name of a key (`name{labels}` → `name`).
pub fn key_name(key: &str) -> &str {
    key.split_once('{').map_or(key, |(name, _)| name)
}

/// What a recognised metric measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A level: mean, p99 and max over the scrapes.
    Gauge,
    /// A running total: its rate per second.
    Counter,
}

/// How the series of one metric (engines, label values) add up in a scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Combine {
    Sum,
    /// For shares (cache usage, hit rates): a mean of the series.
    Mean,
}

/// A metric trace-summarize knows by name.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub name: &'static str,
    pub kind: Kind,
    pub combine: Combine,
    /// Its key in the report (`running`, `kv_cache_usage`, ...): the same
    /// for every engine's name of the same thing.
    pub figure: &'static str,
}

/// A level, its series added up (requests running, waiting).
const fn level(name: &'static str, figure: &'static str) -> Known {
    Known {
        name,
        kind: Gauge,
        combine: Sum,
        figure,
    }
}

/// A share, 0 to 1, the mean of its series (cache usage, hit rates).
const fn share(name: &'static str, figure: &'static str) -> Known {
    Known {
        name,
        kind: Gauge,
        combine: Mean,
        figure,
    }
}

/// A running total, its series added up.
const fn total(name: &'static str, figure: &'static str) -> Known {
    Known {
        name,
        kind: Counter,
        combine: Sum,
        figure,
    }
}

use Combine::{Mean, Sum};
use Kind::{Counter, Gauge};

/// The serving engines' metrics the server section reports: vLLM's
/// (vllm/v1/metrics/loggers.py; `gpu_*` names are older releases'),
/// SGLang's (python/sglang/srt/metrics/collector.py) and llama.cpp's
/// (tools/server/server.cpp, with `--metrics`). The order is the report's
/// (and a [`Scrape`]'s indexes point into it).
pub const KNOWN: &[Known] = &[
    level("vllm:num_requests_running", "running"),
    level("vllm:num_requests_waiting", "waiting"),
    share("vllm:kv_cache_usage_perc", "kv_cache_usage"),
    share("vllm:gpu_cache_usage_perc", "kv_cache_usage"),
    share("vllm:gpu_prefix_cache_hit_rate", "prefix_cache_hit_rate"),
    total("vllm:num_preemptions_total", "preemptions"),
    total("vllm:prompt_tokens_total", "prompt_tokens"),
    total("vllm:generation_tokens_total", "generation_tokens"),
    total("vllm:prefix_cache_queries_total", "prefix_cache_queries"),
    total("vllm:prefix_cache_hits_total", "prefix_cache_hits"),
    total("vllm:request_success_total", "requests"),
    level("sglang:num_running_reqs", "running"),
    level("sglang:num_queue_reqs", "waiting"),
    share("sglang:token_usage", "kv_cache_usage"),
    share("sglang:cache_hit_rate", "prefix_cache_hit_rate"),
    total("sglang:prompt_tokens_total", "prompt_tokens"),
    total("sglang:generation_tokens_total", "generation_tokens"),
    total("sglang:cached_tokens_total", "prefix_cache_hits"),
    total("sglang:num_requests_total", "requests"),
    level("llamacpp:requests_processing", "running"),
    level("llamacpp:requests_deferred", "waiting"),
    share("llamacpp:kv_cache_usage_ratio", "kv_cache_usage"),
    total("llamacpp:prompt_tokens_total", "prompt_tokens"),
    total("llamacpp:tokens_predicted_total", "generation_tokens"),
];

/// The recognised metric of this name.
pub fn lookup(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name == name)
}

/// The most requests a server is taken to run or hold waiting.
const MAX_REQUESTS: f64 = 1e9;

/// One scrape as read back from the file: the recognised metrics only,
/// their series combined.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    pub t_ms: f64,
    /// (index in [`KNOWN`], value), in [`KNOWN`]'s order.
    pub values: Vec<(usize, f64)>,
}

/// Read one line of a scrape file; the error names the field at fault.
pub fn read_scrape(line: &str) -> Result<Scrape, String> {
    read_scrape_seeing(line, |_| {})
}

/// [`read_scrape`], showing `see` the line's samples, all of them (the
/// scrape keeps the recognised ones only).
fn read_scrape_seeing(line: &str, see: impl FnOnce(&Map<String, Value>)) -> Result<Scrape, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let t_ms = match v.get("t_ms") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => return Err(format!("field `t_ms`: `{other}` is not a number")),
        None => return Err("field `t_ms` is missing: is this a --metrics-out file?".into()),
    };
    let samples = match v.get("samples") {
        Some(Value::Object(m)) => m,
        Some(other) => {
            let shown: String = other.to_string().chars().take(60).collect();
            return Err(format!("field `samples`: `{shown}` is not an object"));
        }
        None => return Err("field `samples` is missing: is this a --metrics-out file?".into()),
    };
    see(samples);
    // (sum, series) per recognised metric.
    let mut acc = vec![(0.0, 0u32); KNOWN.len()];
    for (key, value) in samples {
        let Some(i) = KNOWN.iter().position(|k| k.name == key_name(key)) else {
            continue;
        };
        let x = match value {
            Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            // NaN or ±Inf at the server: no figure from it.
            Value::Null => continue,
            other => return Err(format!("sample `{key}`: `{other}` is not a number")),
        };
        // Requests running or waiting are a count a server can have: a
        // scrape of 1e308 would make a profile of 2^64 − 1 slots.
        if KNOWN[i].kind == Gauge && KNOWN[i].combine == Sum && !(0.0..=MAX_REQUESTS).contains(&x) {
            // 1e308 as written, not as 309 digits.
            let shown = if x.abs() < 1e15 {
                format!("{x}")
            } else {
                format!("{x:e}")
            };
            return Err(format!(
                "sample `{key}`: {shown} is not a count of requests (0 to {MAX_REQUESTS})"
            ));
        }
        acc[i].0 += x;
        acc[i].1 += 1;
    }
    let values = acc
        .into_iter()
        .enumerate()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(i, (sum, n))| match KNOWN[i].combine {
            Sum => (i, sum),
            Mean => (i, sum / f64::from(n)),
        })
        .collect();
    Ok(Scrape { t_ms, values })
}

/// Mean, p99 and max of a gauge over scrapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GaugeFigures {
    pub mean: f64,
    pub p99: f64,
    pub max: f64,
    #[serde(skip)]
    pub scrapes: usize,
}

/// A counter's increase and rate between its first and last scrape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterFigures {
    pub increase: f64,
    pub per_s: f64,
}

/// The figures of one metric (in the report, the fields of either).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Figures {
    Gauge(GaugeFigures),
    Counter(CounterFigures),
}

/// The figures of every recognised metric present in `scrapes` taken at
/// or after `from_ms` and before `to_ms`, keyed by metric name, in
/// [`KNOWN`]'s order. A counter needs two scrapes; a fall in a counter is
/// a restart, counted as Prometheus' `increase` counts it.
pub fn figures(scrapes: &[Scrape], from_ms: f64, to_ms: f64) -> Vec<(&'static Known, Figures)> {
    let inside: Vec<&Scrape> = scrapes
        .iter()
        .filter(|s| s.t_ms >= from_ms && s.t_ms < to_ms)
        .collect();
    let mut out = Vec::new();
    for (i, k) in KNOWN.iter().enumerate() {
        let points: Vec<(f64, f64)> = inside
            .iter()
            .filter_map(|s| {
                s.values
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, v)| (s.t_ms, *v))
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        match k.kind {
            Gauge => {
                let mut values: Vec<f64> = points.iter().map(|p| p.1).collect();
                values.sort_by(f64::total_cmp);
                let n = values.len();
                // Nearest rank, as the client's percentiles are taken.
                let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
                out.push((
                    k,
                    Figures::Gauge(GaugeFigures {
                        mean: values.iter().sum::<f64>() / n as f64,
                        p99: values[rank - 1],
                        max: values[n - 1],
                        scrapes: n,
                    }),
                ));
            }
            Counter => {
                if points.len() < 2 {
                    continue;
                }
                let increase: f64 = points
                    .windows(2)
                    .map(|w| {
                        if w[1].1 >= w[0].1 {
                            w[1].1 - w[0].1
                        } else {
                            w[1].1
                        }
                    })
                    .sum();
                let span_s = (points[points.len() - 1].0 - points[0].0) / 1000.0;
                if span_s <= 0.0 {
                    continue;
                }
                out.push((
                    k,
                    Figures::Counter(CounterFigures {
                        increase,
                        per_s: increase / span_s,
                    }),
                ));
            }
        }
    }
    out
}

/// Every scrape of a scrape file (`--metrics-out`), in order; a line that
/// is not one is an error naming the file, the line and the field.
pub fn read_file(path: &std::path::Path) -> crate::error::Result<Vec<Scrape>> {
    read_file_seeing(path, |_| {})
}

/// [`read_file`], and the KV cache size its scrapes state: the largest
/// scrape's ([`kv_capacity_of`]); `None` when none states it.
pub fn read_file_and_capacity(
    path: &std::path::Path,
) -> crate::error::Result<(Vec<Scrape>, Option<KvCapacity>)> {
    let mut best: Option<KvCapacity> = None;
    let scrapes = read_file_seeing(path, |samples| {
        if let Some(c) = kv_capacity_of(samples)
            && best.as_ref().is_none_or(|b| c.tokens > b.tokens)
        {
            best = Some(c);
        }
    })?;
    Ok((scrapes, best))
}

/// [`read_file`], showing `see` each line's samples as it is read.
fn read_file_seeing(
    path: &std::path::Path,
    mut see: impl FnMut(&Map<String, Value>),
) -> crate::error::Result<Vec<Scrape>> {
    use crate::io::{self, Lines};
    let specs = io::input_specs(&[path.to_string_lossy().into_owned()])?;
    let mut lines = Lines::new(&specs);
    let mut out = Vec::new();
    while let Some((loc, line)) = lines.next_line()? {
        let scrape = read_scrape_seeing(line, &mut see)
            .map_err(|msg| crate::error::FieldError::record(msg).at(&loc))?;
        out.push(scrape);
    }
    Ok(out)
}

/// The server's KV cache size, as its scrapes state it.
#[derive(Debug, Clone, PartialEq)]
pub struct KvCapacity {
    pub tokens: u64,
    /// Where it was read, for people.
    pub from: String,
}

/// The KV cache size one scrape's samples state, engines added up:
/// vLLM's `vllm:cache_config_info`, whose labels give `num_gpu_blocks`
/// blocks of `block_size` tokens, or SGLang's `sglang:max_total_num_tokens`
/// (llama.cpp states none).
pub fn kv_capacity_of(samples: &Map<String, Value>) -> Option<KvCapacity> {
    let (mut vllm, mut blocks, mut sglang) = (0u64, Vec::new(), 0u64);
    for (key, value) in samples {
        match key_name(key) {
            "vllm:cache_config_info" => {
                let (Some(n), Some(size)) =
                    (label(key, "num_gpu_blocks"), label(key, "block_size"))
                else {
                    continue;
                };
                vllm = vllm.saturating_add(n.saturating_mul(size));
                blocks.push(format!("{n} blocks of {size} tokens"));
            }
            "sglang:max_total_num_tokens" => {
                let n = value.as_f64().filter(|x| x.is_finite() && *x >= 0.0);
                sglang = sglang.saturating_add(n.unwrap_or(0.0) as u64);
            }
            _ => {}
        }
    }
    if vllm > 0 {
        Some(KvCapacity {
            tokens: vllm,
            from: format!("vllm:cache_config_info, {}", blocks.join(" + ")),
        })
    } else {
        (sglang > 0).then(|| KvCapacity {
            tokens: sglang,
            from: format!("sglang:max_total_num_tokens {sglang}"),
        })
    }
}

/// The value of label `name` in a sample's key, as a whole number.
fn label(key: &str, name: &str) -> Option<u64> {
    let (_, rest) = key.split_once('{')?;
    let mut labels = Vec::new();
    parse_labels(rest, &mut labels).ok()?;
    labels
        .into_iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// A gauge's mean and max over a run's scrapes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    pub mean: f64,
    pub max: f64,
}

/// What the server was doing during one run, from its scrapes: the
/// figures a capacity sweep sets beside each run's row. `None` where the
/// server exposes no such metric (or, for a counter, fewer than two
/// scrapes had it). Serialized: `{"scrapes": N, "running": {"mean",
/// "max"}, "waiting": …, "kv_cache_usage": …, "prefix_cache_hit_rate": F,
/// "preemptions": N}`, null for a figure the scrapes do not have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigures {
    pub scrapes: usize,
    pub running: Option<Level>,
    pub waiting: Option<Level>,
    /// A share, 0 to 1.
    pub kv_cache_usage: Option<Level>,
    /// Cached prompt tokens over the prompt tokens looked up during the
    /// run (vLLM's counters), or else the mean of the engine's hit-rate
    /// gauge (SGLang's, vLLM's older one); a share, 0 to 1.
    pub prefix_cache_hit_rate: Option<f64>,
    /// Requests preempted during the run (the counter's increase).
    pub preemptions: Option<f64>,
}

/// The flat columns of [`RunFigures`], as CSV and spreadsheets name them:
/// paths into its serialization.
pub const RUN_COLUMNS: [&str; 9] = [
    "scrapes",
    "running.mean",
    "running.max",
    "waiting.mean",
    "waiting.max",
    "kv_cache_usage.mean",
    "kv_cache_usage.max",
    "prefix_cache_hit_rate",
    "preemptions",
];

impl RunFigures {
    /// The figures of a run's scrapes.
    pub fn of(scrapes: &[Scrape]) -> RunFigures {
        let all = figures(scrapes, f64::NEG_INFINITY, f64::INFINITY);
        // The first recognised name of a figure, as in the server section.
        let find = |figure: &str| all.iter().find(|(k, _)| k.figure == figure).map(|(_, f)| f);
        let level = |figure: &str| match find(figure) {
            Some(Figures::Gauge(g)) => Some(Level {
                mean: g.mean,
                max: g.max,
            }),
            _ => None,
        };
        let increase = |figure: &str| match find(figure) {
            Some(Figures::Counter(c)) => Some(c.increase),
            _ => None,
        };
        let from_counters = match (
            increase("prefix_cache_hits"),
            increase("prefix_cache_queries"),
        ) {
            (Some(hits), Some(queries)) if queries > 0.0 => Some(hits / queries),
            _ => None,
        };
        RunFigures {
            scrapes: scrapes.len(),
            running: level("running"),
            waiting: level("waiting"),
            kv_cache_usage: level("kv_cache_usage"),
            prefix_cache_hit_rate: from_counters
                .or_else(|| level("prefix_cache_hit_rate").map(|l| l.mean)),
            preemptions: increase("preemptions"),
        }
    }

    /// The values of [`RUN_COLUMNS`], in order, from its serialization:
    /// null where there is none.
    pub fn columns(&self) -> [Value; 9] {
        let v = serde_json::to_value(self).expect("figures serialize");
        RUN_COLUMNS.map(|path| {
            v.pointer(&format!("/{}", path.replace('.', "/")))
                .cloned()
                .unwrap_or(Value::Null)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_requests_no_server_has_is_refused() {
        let e = read_scrape(
            r#"{"t_ms":0,"samples":{"vllm:num_requests_waiting":1,"vllm:num_requests_running":1e308}}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "sample `vllm:num_requests_running`: 1e308 is not a count of requests (0 to 1000000000)"
        );
        assert!(read_scrape(r#"{"t_ms":0,"samples":{"sglang:num_queue_reqs":-1}}"#).is_err());
        // Shares and counters are not counts of requests.
        assert!(read_scrape(r#"{"t_ms":0,"samples":{"vllm:prompt_tokens_total":1e12}}"#).is_ok());
    }

    #[test]
    fn the_kv_cache_size_is_read_from_vllm_and_sglang_scrapes() {
        let samples = |v: Value| v.as_object().unwrap().clone();
        // Two engines of 2048 blocks of 16 tokens: 65,536 tokens.
        let vllm = samples(serde_json::json!({
            "vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"2048\"}": 1.0,
            "vllm:cache_config_info{block_size=\"16\",engine=\"1\",num_gpu_blocks=\"2048\"}": 1.0,
            "vllm:num_requests_running{engine=\"0\"}": 3.0,
        }));
        assert_eq!(
            kv_capacity_of(&vllm),
            Some(KvCapacity {
                tokens: 65_536,
                from: "vllm:cache_config_info, 2048 blocks of 16 tokens + 2048 blocks of 16 tokens"
                    .into()
            })
        );
        let sglang =
            samples(serde_json::json!({"sglang:max_total_num_tokens{model_name=\"m\"}": 471258.0}));
        assert_eq!(kv_capacity_of(&sglang).unwrap().tokens, 471_258);
        // llama.cpp states none; an info metric without the labels neither.
        let none = samples(serde_json::json!({
            "llamacpp:n_tokens_max": 288.0,
            "vllm:cache_config_info{block_size=\"16\"}": 1.0,
        }));
        assert_eq!(kv_capacity_of(&none), None);
    }

    #[test]
    fn parses_the_text_format() {
        let text = "# HELP vllm:num_requests_running Number of requests.\n\
                    # TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n\
                    plain 1.5e3 1712000000000\n\
                    esc{a=\"x\\\"y\\\\z\\n\",} NaN\n\
                    \n\
                    h_bucket{le=\"+Inf\"} -Inf\r\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(
            s[0].key(),
            "vllm:num_requests_running{engine=\"0\",model_name=\"m\"}"
        );
        assert_eq!(s[0].value, 3.0);
        assert_eq!(s[1].key(), "plain");
        assert_eq!(s[1].value, 1500.0);
        assert_eq!(
            s[2].labels,
            vec![("a".to_string(), "x\"y\\z\n".to_string())]
        );
        assert_eq!(s[2].key(), "esc{a=\"x\\\"y\\\\z\\n\"}");
        assert!(s[2].value.is_nan());
        assert_eq!(s[3].value, f64::NEG_INFINITY);
    }

    #[test]
    fn names_the_bad_line() {
        let cases = [
            (
                "a 1\nb{x=\"1\" 2\n",
                2,
                "b: expected `,` or `}` after label `x`, found `2`",
            ),
            ("a one\n", 1, "a: `one` is not a number"),
            (
                "a\n",
                1,
                "a: expected a space and a value after the series, found ``",
            ),
            ("a 1\na 2\n", 2, "series `a` appears twice"),
            ("a{x=\"1} 2\n", 1, "a: label `x`: the value is not closed"),
            ("a{x=\"\\t\"} 2\n", 1, "a: label `x`: unknown escape `\\t`"),
            (
                "<html> 1\n",
                1,
                "`<html> 1` does not start with a metric name",
            ),
            ("# TYPE a gauges\n", 1, "`gauges` is not a metric type"),
            ("a 1 2 3\n", 1, "a: unexpected `3` after the value"),
            ("a 1 soon\n", 1, "a: `soon` is not a timestamp in ms"),
        ];
        for (text, line, message) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.message.as_str()), (line, message), "{text:?}");
        }
        // OpenMetrics' end marker ends the exposition.
        assert_eq!(parse("a 1\n# EOF\n").unwrap().len(), 1);
    }

    #[test]
    fn writes_and_reads_a_scrape() {
        let s = parse("vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_running{engine=\"1\"} 3\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.25\nother NaN\n").unwrap();
        let line = scrape_line(12.34567, &s, |_| true);
        assert_eq!(
            line,
            r#"{"t_ms":12.346,"samples":{"vllm:num_requests_running{engine=\"0\"}":2.0,"vllm:num_requests_running{engine=\"1\"}":3.0,"vllm:kv_cache_usage_perc{engine=\"0\"}":0.5,"vllm:kv_cache_usage_perc{engine=\"1\"}":0.25,"other":null}}"#
        );
        let back = read_scrape(&line).unwrap();
        assert_eq!(back.t_ms, 12.346);
        // Running requests add up over engines; cache usage is their mean.
        assert_eq!(back.values, vec![(0, 5.0), (2, 0.375)]);
        let kept = scrape_line(0.0, &s, |k| k.starts_with("other"));
        assert_eq!(kept, r#"{"t_ms":0.0,"samples":{"other":null}}"#);
    }

    #[test]
    fn gauges_and_counters() {
        let scrapes: Vec<Scrape> = [(0.0, 1.0, 100.0), (1000.0, 3.0, 160.0), (2000.0, 2.0, 10.0)]
            .iter()
            .map(|&(t, running, tokens)| Scrape {
                t_ms: t,
                values: vec![(0, running), (6, tokens)],
            })
            .collect();
        let f = figures(&scrapes, f64::NEG_INFINITY, f64::INFINITY);
        assert_eq!(f[0].0.figure, "running");
        assert_eq!(
            f[0].1,
            Figures::Gauge(GaugeFigures {
                mean: 2.0,
                p99: 3.0,
                max: 3.0,
                scrapes: 3
            })
        );
        // 60 tokens, then a restart from 0 to 10: 70 over 2 s.
        assert_eq!(f[1].0.figure, "prompt_tokens");
        assert_eq!(
            f[1].1,
            Figures::Counter(CounterFigures {
                increase: 70.0,
                per_s: 35.0
            })
        );
        // One scrape gives no rate.
        let f = figures(&scrapes, 500.0, 1500.0);
        assert_eq!(f.len(), 1);
    }

    /// Scrapes of named metrics: (t_ms, [(name, value)]).
    fn scrapes_of(points: &[(f64, &[(&str, f64)])]) -> Vec<Scrape> {
        points
            .iter()
            .map(|(t, values)| Scrape {
                t_ms: *t,
                values: values
                    .iter()
                    .map(|(name, v)| (KNOWN.iter().position(|k| k.name == *name).unwrap(), *v))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn a_run_in_figures() {
        // vLLM: running 0, 4, 2; waiting 0, 3, 6; KV cache 0.25, 0.5,
        // 0.75; 2,000 prompt tokens looked up, 500 found (a quarter); 3
        // preemptions.
        let s = scrapes_of(&[
            (
                -2.0,
                &[
                    ("vllm:num_requests_running", 0.0),
                    ("vllm:num_requests_waiting", 0.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:prefix_cache_queries_total", 0.0),
                    ("vllm:prefix_cache_hits_total", 0.0),
                    ("vllm:num_preemptions_total", 0.0),
                ],
            ),
            (
                1000.0,
                &[
                    ("vllm:num_requests_running", 4.0),
                    ("vllm:num_requests_waiting", 3.0),
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:prefix_cache_queries_total", 1000.0),
                    ("vllm:prefix_cache_hits_total", 250.0),
                    ("vllm:num_preemptions_total", 1.0),
                ],
            ),
            (
                2000.0,
                &[
                    ("vllm:num_requests_running", 2.0),
                    ("vllm:num_requests_waiting", 6.0),
                    ("vllm:kv_cache_usage_perc", 0.75),
                    ("vllm:prefix_cache_queries_total", 2000.0),
                    ("vllm:prefix_cache_hits_total", 500.0),
                    ("vllm:num_preemptions_total", 3.0),
                ],
            ),
        ]);
        let f = RunFigures::of(&s);
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({
                "scrapes": 3,
                "running": {"mean": 2.0, "max": 4.0},
                "waiting": {"mean": 3.0, "max": 6.0},
                "kv_cache_usage": {"mean": 0.5, "max": 0.75},
                "prefix_cache_hit_rate": 0.25,
                "preemptions": 3.0,
            })
        );
        assert_eq!(
            f.columns(),
            [
                Value::from(3),
                Value::from(2.0),
                Value::from(4.0),
                Value::from(3.0),
                Value::from(6.0),
                Value::from(0.5),
                Value::from(0.75),
                Value::from(0.25),
                Value::from(3.0),
            ]
        );
        // SGLang: its hit-rate gauge (no lookup counter); no preemption
        // counter.
        let s = scrapes_of(&[
            (
                0.0,
                &[
                    ("sglang:num_queue_reqs", 1.0),
                    ("sglang:cache_hit_rate", 0.25),
                ],
            ),
            (
                1000.0,
                &[
                    ("sglang:num_queue_reqs", 2.0),
                    ("sglang:cache_hit_rate", 0.75),
                ],
            ),
        ]);
        let f = RunFigures::of(&s);
        assert_eq!(
            f.waiting,
            Some(Level {
                mean: 1.5,
                max: 2.0
            })
        );
        assert_eq!(f.prefix_cache_hit_rate, Some(0.5));
        assert_eq!((f.running, f.preemptions), (None, None));
        // No scrape: every figure null, in every column.
        let none = RunFigures::of(&[]);
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            serde_json::json!({"scrapes": 0, "running": null, "waiting": null,
                "kv_cache_usage": null, "prefix_cache_hit_rate": null, "preemptions": null})
        );
        assert!(none.columns()[1..].iter().all(Value::is_null));
    }
}
