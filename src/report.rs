//! Turning an [`Aggregate`] into the report: one JSON value with stable keys,
//! from which the table, Markdown and CSV forms and `--fail-if` all read.

use serde_json::{Map, Value, json};

use crate::metrics::{
    Aggregate, Convention, ConventionDists, Dist, Fidelity, PercentileRule, SessionFigures, Slo,
    Summary, Window,
};
use crate::result::Status;

/// What the report shows besides the aggregate itself.
pub struct ReportOptions<'a> {
    /// Conventions; the first is the report's own.
    pub conventions: &'a [Convention],
    /// Percentiles to print.
    pub percentiles: &'a [f64],
    /// SLOs tested.
    pub slo: &'a Slo,
    /// Add latencies measured from the scheduled instant.
    pub from_scheduled: bool,
    /// Window width, ms, for the time series.
    pub window_ms: Option<f64>,
}

/// The JSON key of a percentile: `p50`, `p99.9`.
pub fn percentile_key(p: f64) -> String {
    format!("p{}", crate::text::format_ms(p))
}

/// A distribution's figures; without values, the same keys with nulls, so
/// that every report has the same shape (CSV columns, `--fail-if` paths).
fn stats_json(d: &Dist, ps: &[f64]) -> Value {
    stats_json_by(d, ps, PercentileRule::NearestRank)
}

fn stats_json_by(d: &Dist, ps: &[f64], rule: PercentileRule) -> Value {
    match d.summary_by(ps, rule) {
        Some(s) => summary_json(&s),
        None => {
            let mut m = Map::new();
            m.insert("count".into(), json!(0));
            for key in ["mean", "std", "min"] {
                m.insert(key.into(), Value::Null);
            }
            for p in ps {
                m.insert(percentile_key(*p), Value::Null);
            }
            m.insert("max".into(), Value::Null);
            Value::Object(m)
        }
    }
}

fn summary_json(s: &Summary) -> Value {
    let mut m = Map::new();
    m.insert("count".into(), json!(s.count));
    m.insert("mean".into(), json!(s.mean));
    m.insert("std".into(), json!(s.std));
    m.insert("min".into(), json!(s.min));
    for (p, v) in &s.percentiles {
        m.insert(percentile_key(*p), json!(v));
    }
    m.insert("max".into(), json!(s.max));
    Value::Object(m)
}

fn fidelity_json(f: &Fidelity) -> Value {
    let range = f.range();
    json!({
        "count": f.count,
        "exact": f.exact,
        "mean": f.mean(),
        "min": range.map(|r| r.0),
        "max": range.map(|r| r.1),
    })
}

fn per_s(n: f64, duration: Option<f64>) -> Value {
    match duration {
        Some(d) => json!(n / d),
        None => Value::Null,
    }
}

/// The whole report of one group as JSON.
pub fn to_json(a: &Aggregate, o: &ReportOptions) -> Value {
    let ps = o.percentiles;
    let primary = o.conventions[0];
    let duration = a.duration_s();
    let count = |s: Status| a.by_status.get(&s).copied().unwrap_or(0);
    let dists = a.conventions.get(&primary).cloned().unwrap_or_default();
    let all_exact =
        a.conventions.values().all(|c| {
            c.ttft.is_exact() && c.tpot.is_exact() && c.itl.is_exact() && c.e2e.is_exact()
        }) && a.e2e.is_exact()
            && a.lag.is_exact()
            && a.tokens_per_s.is_exact();

    let mut m = Map::new();
    m.insert("convention".into(), json!(primary.name()));
    if let Some(release) = primary.release() {
        m.insert("follows".into(), json!(release));
    }
    m.insert(
        "precision".into(),
        json!(if all_exact {
            "exact"
        } else {
            "3 significant digits"
        }),
    );
    m.insert(
        "requests".into(),
        json!({
            "total": a.total,
            "ok": count(Status::Ok),
            "error": count(Status::Error),
            "timeout": count(Status::Timeout),
            "cancelled": count(Status::Cancelled),
            "warmup_excluded": a.warmup,
            "ok_without_usage": a.ok_without_usage,
        }),
    );
    let http: Map<String, Value> = a
        .by_http
        .iter()
        .map(|(k, v)| {
            (
                k.map_or_else(|| "none".to_string(), |c| c.to_string()),
                json!(v),
            )
        })
        .collect();
    m.insert("http_status".into(), Value::Object(http));
    m.insert("duration_s".into(), json!(duration));
    // A peer counts the tokens of answers without usage (as content
    // chunks here); tracekit leaves them out.
    let output_tokens = if primary == Convention::Tracekit {
        a.output_tokens
    } else {
        m.insert(
            "output_tokens_from_chunks".into(),
            json!(dists.tokens_from_chunks),
        );
        dists.output_tokens
    };
    m.insert("output_tokens".into(), json!(output_tokens));
    m.insert("prompt_tokens".into(), json!(a.prompt_tokens));
    m.insert(
        "throughput".into(),
        json!({
            "requests_per_s": per_s(a.ok() as f64, duration),
            "output_tokens_per_s": per_s(output_tokens as f64, duration),
            "total_tokens_per_s": per_s((output_tokens + a.prompt_tokens) as f64, duration),
        }),
    );
    m.insert(
        "peak".into(),
        json!({
            "output_tokens_per_s": a.peak_tokens_per_s(),
            "in_flight": a.in_flight.peak(),
            "in_flight_resolution_ms": a.in_flight.resolution_ms,
        }),
    );
    let rule = primary.percentile_rule();
    m.insert("ttft".into(), stats_json_by(&dists.ttft, ps, rule));
    m.insert("tpot".into(), stats_json_by(&dists.tpot, ps, rule));
    m.insert("itl".into(), stats_json_by(&dists.itl, ps, rule));
    if primary == Convention::Tracekit {
        m.insert("e2e".into(), stats_json(&a.e2e, ps));
    } else {
        m.insert("e2e".into(), stats_json_by(&dists.e2e, ps, rule));
    }
    m.insert(
        "output_tokens_per_s_per_request".into(),
        stats_json(&a.tokens_per_s, ps),
    );
    m.insert("dispatch_lag".into(), stats_json(&a.lag, ps));
    if o.from_scheduled {
        m.insert(
            "from_scheduled".into(),
            json!({
                "ttft": stats_json(&a.ttft_from_scheduled, ps),
                "e2e": stats_json(&a.e2e_from_scheduled, ps),
            }),
        );
    }
    m.insert(
        "input_length_error".into(),
        fidelity_json(&a.input_fidelity),
    );
    m.insert(
        "output_length_error".into(),
        fidelity_json(&a.output_fidelity),
    );
    m.insert(
        "prefix_cache".into(),
        json!({
            "hit_rate": (a.cache_prompt_tokens > 0)
                .then(|| a.cached_tokens as f64 / a.cache_prompt_tokens as f64),
            "cached_tokens": a.cached_tokens,
            "prompt_tokens": a.cache_prompt_tokens,
            "results": a.cache_reports,
        }),
    );
    if !a.sessions.is_empty() {
        m.insert("sessions".into(), sessions_json(&a.sessions.figures(), ps));
    }
    if !o.slo.bounds.is_empty() {
        let mut bounds = Map::new();
        let mut met = Map::new();
        let share = |n: u64| (a.total > 0).then(|| n as f64 / a.total as f64);
        for (i, (metric, bound)) in o.slo.bounds.iter().enumerate() {
            bounds.insert(format!("{}_ms", metric.name()), json!(bound));
            met.insert(
                metric.name().into(),
                json!(share(a.slo_met.get(i).copied().unwrap_or(0))),
            );
        }
        met.insert("all".into(), json!(share(a.slo_met_all)));
        m.insert(
            "slo".into(),
            json!({
                "bounds": bounds,
                "met": met,
                "goodput_per_s": per_s(a.slo_met_all as f64, duration),
            }),
        );
    }
    if o.conventions.len() > 1 {
        let mut others = Map::new();
        for c in &o.conventions[1..] {
            let d = a.conventions.get(c).cloned().unwrap_or_default();
            others.insert(c.name().into(), convention_json(*c, &d, ps));
        }
        m.insert("conventions".into(), Value::Object(others));
    }
    if let Some(w) = o.window_ms {
        // Every window from the first to the last, empty ones too: a gap in
        // the series is a stretch of nothing, which the reader must see.
        let empty = Window::default();
        let first = a.windows.keys().next().copied().unwrap_or(0);
        let series: Vec<Value> = (0..a.window_count())
            .map(|k| first + k as i64)
            .map(|i| (i, a.windows.get(&i).unwrap_or(&empty)))
            .map(|(i, win)| {
                let q = |d: &Dist, p: f64| d.summary(&[p]).map(|s| s.percentiles[0].1);
                json!({
                    "start_s": i as f64 * w / 1000.0,
                    "started": win.started,
                    "completed": win.completed,
                    "errors": win.errors,
                    "output_tokens_per_s": win.output_tokens / (w / 1000.0),
                    "ttft_p50": q(&win.ttft, 50.0),
                    "ttft_p99": q(&win.ttft, 99.0),
                    "e2e_p50": q(&win.e2e, 50.0),
                    "e2e_p99": q(&win.e2e, 99.0),
                })
            })
            .collect();
        m.insert("windows".into(), Value::Array(series));
    }
    Value::Object(m)
}

/// The sessions' figures: counts, turns per session, session duration
/// (first send to last completion) and the prefix cache hit rate by turn
/// position, keyed by the turn (`--fail-if 'sessions.cache_hit_rate_by_turn.2<0.5'`).
fn sessions_json(f: &SessionFigures, ps: &[f64]) -> Value {
    let by_turn: Map<String, Value> = f
        .cache_by_turn
        .iter()
        .map(|(t, c, p)| {
            let rate = (*p > 0).then(|| *c as f64 / *p as f64);
            (t.to_string(), json!(rate))
        })
        .collect();
    json!({
        "count": f.count,
        "completed": f.completed,
        "turns": stats_json(&f.turns, ps),
        "duration_ms": stats_json(&f.duration_ms, ps),
        "cache_hit_rate_by_turn": by_turn,
    })
}

/// One convention's figures beside the report's own.
fn convention_json(c: Convention, d: &ConventionDists, ps: &[f64]) -> Value {
    let rule = c.percentile_rule();
    json!({
        "follows": c.release(),
        "ttft": stats_json_by(&d.ttft, ps, rule),
        "tpot": stats_json_by(&d.tpot, ps, rule),
        "itl": stats_json_by(&d.itl, ps, rule),
        "e2e": stats_json_by(&d.e2e, ps, rule),
        "output_tokens": d.output_tokens,
        "output_tokens_from_chunks": d.tokens_from_chunks,
    })
}

/// A number for people: up to `decimals` places, trailing zeros trimmed.
pub fn num(v: &Value, decimals: usize) -> String {
    match v.as_f64() {
        None => "-".into(),
        Some(x) => {
            let text = format!("{x:.decimals$}");
            if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                text
            }
        }
    }
}

/// How a table is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns.
    Plain,
    /// GitHub Markdown.
    Markdown,
}

/// Draw rows under a header; numbers (every column but the first) are
/// right-aligned when `numbers` is set. A plain table of facts has no header.
pub fn table(style: Style, header: &[String], rows: &[Vec<String>], numbers: bool) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 || !numbers {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        match style {
            Style::Plain => padded.join("  ").trim_end().to_string() + "\n",
            Style::Markdown => format!("| {} |\n", padded.join(" | ")),
        }
    };
    let mut out = if style == Style::Plain && !numbers {
        String::new()
    } else {
        line(header)
    };
    if style == Style::Markdown {
        let rule: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 || !numbers {
                    "-".repeat(*w)
                } else {
                    format!("{}:", "-".repeat(w.saturating_sub(1)))
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
    }
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn stats_row(name: &str, v: &Value, ps: &[f64]) -> Vec<String> {
    let mut row = vec![
        name.to_string(),
        v["count"].as_u64().map_or("0".into(), |c| c.to_string()),
    ];
    for key in ["mean", "std", "min"] {
        row.push(num(&v[key], 2));
    }
    for p in ps {
        row.push(num(&v[percentile_key(*p)], 2));
    }
    row.push(num(&v["max"], 2));
    row
}

fn stats_header(first: &str, ps: &[f64]) -> Vec<String> {
    let mut h: Vec<String> = [first, "count", "mean", "std", "min"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    h.extend(ps.iter().map(|p| percentile_key(*p)));
    h.push("max".into());
    h
}

/// What a convention's figures mean, for the report's header.
pub fn convention_note(c: Convention) -> &'static str {
    match c {
        Convention::Tracekit => {
            "TTFT at the first content chunk; TPOT = (E2E - TTFT) / (output tokens - 1); ITL = gaps between content chunks"
        }
        Convention::Aiperf => {
            "as AIPerf 0.13.0: Time to First Token at the first content chunk; Request Latency to the last content chunk; Inter Token Latency = (Request Latency - TTFT) / (output tokens - 1) per request (tracekit's TPOT); Inter Chunk Latency = gaps between content chunks (tracekit's ITL); percentiles interpolated linearly"
        }
        Convention::Vllm => {
            "as vLLM 0.33.0 bench serve: TTFT at the first content, reasoning or tool-call chunk; E2EL to the last token chunk; TPOT = (E2EL - TTFT) / (output tokens - 1); ITL = gaps between content chunks; percentiles interpolated linearly"
        }
        Convention::Guidellm => {
            "as GuideLLM 0.8.1: time_per_output_token_ms = (last token - start) / output tokens, weighted by output tokens; inter_token_latency_ms = (last - first token) / (output tokens - 1), weighted by output tokens - 1; request_latency to the end; percentiles by cumulative weight"
        }
    }
}

/// The report for people (`table`) or for a pull request (`markdown`).
pub fn to_text(title: &str, j: &Value, o: &ReportOptions, style: Style) -> String {
    let ps = o.percentiles;
    let r = &j["requests"];
    let mut out = String::new();
    let http: Vec<String> = j["http_status"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}: {v}")).collect())
        .unwrap_or_default();
    let heading = format!(
        "{title}: {} requests: {} ok, {} error, {} timeout, {} cancelled (HTTP {})",
        r["total"],
        r["ok"],
        r["error"],
        r["timeout"],
        r["cancelled"],
        if http.is_empty() {
            "-".to_string()
        } else {
            http.join(", ")
        }
    );
    match style {
        Style::Plain => out.push_str(&format!("{heading}\n")),
        Style::Markdown => out.push_str(&format!("### {heading}\n\n")),
    }
    let rule = match o.conventions[0].percentile_rule() {
        PercentileRule::NearestRank => "nearest rank",
        PercentileRule::Linear => "the latencies interpolated linearly, the others by nearest rank",
        PercentileRule::CumulativeShare => {
            "the latencies by cumulative weight, the others by nearest rank"
        }
    };
    let precision = if j["precision"] == "exact" {
        format!("percentiles exact ({rule})")
    } else {
        "percentiles within 0.1 % (HDR histogram, 3 significant digits); mean, std, min, max exact"
            .to_string()
    };
    let notes = [
        format!(
            "convention {}: {}",
            o.conventions[0].name(),
            convention_note(o.conventions[0])
        ),
        format!(
            "{precision}; warmup results excluded ({})",
            r["warmup_excluded"]
        ),
    ];
    for n in &notes {
        match style {
            Style::Plain => out.push_str(&format!("{n}\n")),
            Style::Markdown => out.push_str(&format!("_{n}_\n\n")),
        }
    }
    out.push('\n');

    let t = &j["throughput"];
    let mut facts: Vec<Vec<String>> = vec![
        vec!["duration".into(), format!("{} s", num(&j["duration_s"], 3))],
        vec![
            "request throughput".into(),
            format!("{} requests/s", num(&t["requests_per_s"], 3)),
        ],
        vec![
            "output token throughput".into(),
            format!(
                "{} tokens/s ({} tokens)",
                num(&t["output_tokens_per_s"], 2),
                j["output_tokens"]
            ),
        ],
        vec![
            "total token throughput".into(),
            format!(
                "{} tokens/s ({} prompt tokens)",
                num(&t["total_tokens_per_s"], 2),
                j["prompt_tokens"]
            ),
        ],
        vec![
            "peak output tokens/s".into(),
            format!(
                "{} (1 s buckets)",
                num(&j["peak"]["output_tokens_per_s"], 1)
            ),
        ],
        vec![
            "peak requests in flight".into(),
            j["peak"]["in_flight"].to_string(),
        ],
    ];
    if let Some(s) = j.get("sessions") {
        let turns = &s["turns"];
        let duration = &s["duration_ms"];
        facts.push(vec![
            "sessions".into(),
            format!(
                "{} ({} with every turn ok); turns per session mean {}, max {}; duration p50 {} ms, max {} ms",
                s["count"],
                s["completed"],
                num(&turns["mean"], 2),
                num(&turns["max"], 0),
                num(&duration[percentile_key(50.0)], 1),
                num(&duration["max"], 1),
            ),
        ]);
        if let Some(by_turn) = s["cache_hit_rate_by_turn"]
            .as_object()
            .filter(|m| !m.is_empty())
        {
            let rates: Vec<String> = by_turn
                .iter()
                .map(|(t, r)| format!("{t}: {}", num(r, 3)))
                .collect();
            facts.push(vec![
                "prefix cache hit rate by turn".into(),
                rates.join(", "),
            ]);
        }
    }
    let cache = &j["prefix_cache"];
    if cache["results"].as_u64().unwrap_or(0) > 0 {
        facts.push(vec![
            "prefix cache hit rate".into(),
            format!(
                "{} ({} of {} prompt tokens cached)",
                num(&cache["hit_rate"], 4),
                cache["cached_tokens"],
                cache["prompt_tokens"]
            ),
        ]);
    }
    for (key, name) in [
        ("input_length_error", "prompt tokens - input_length"),
        ("output_length_error", "completion tokens - output_length"),
    ] {
        let f = &j[key];
        if f["count"].as_u64().unwrap_or(0) > 0 {
            facts.push(vec![
                name.into(),
                format!(
                    "mean {}, min {}, max {} ({} of {} exact)",
                    num(&f["mean"], 2),
                    f["min"],
                    f["max"],
                    f["exact"],
                    f["count"]
                ),
            ]);
        }
    }
    if r["ok_without_usage"].as_u64().unwrap_or(0) > 0 {
        let how = match j.get("output_tokens_from_chunks") {
            None => "their tokens are not counted".to_string(),
            Some(n) => format!("{n} of them counted one token per content chunk"),
        };
        facts.push(vec![
            "ok without usage".into(),
            format!("{} ({how})", r["ok_without_usage"]),
        ]);
    }
    if let Some(slo) = j.get("slo") {
        let met = &slo["met"];
        let parts: Vec<String> = o
            .slo
            .bounds
            .iter()
            .map(|(m, b)| {
                format!(
                    "{} <= {} ms: {}",
                    m.name(),
                    crate::text::format_ms(*b),
                    num(&met[m.name()], 4)
                )
            })
            .collect();
        facts.push(vec![
            "goodput".into(),
            format!(
                "{} requests/s meet every SLO (share {}; {})",
                num(&slo["goodput_per_s"], 3),
                num(&met["all"], 4),
                parts.join(", ")
            ),
        ]);
    }
    out.push_str(&table(
        style,
        &["figure".into(), "value".into()],
        &facts,
        false,
    ));
    out.push('\n');

    let names = o.conventions[0].names();
    let mut rows = vec![
        stats_row(names.ttft, &j["ttft"], ps),
        stats_row(names.tpot, &j["tpot"], ps),
        stats_row(names.itl, &j["itl"], ps),
        stats_row(names.e2e, &j["e2e"], ps),
        stats_row("dispatch lag", &j["dispatch_lag"], ps),
    ];
    if let Some(fs) = j.get("from_scheduled") {
        rows.push(stats_row("TTFT from scheduled", &fs["ttft"], ps));
        rows.push(stats_row("E2E from scheduled", &fs["e2e"], ps));
    }
    out.push_str(&table(
        style,
        &stats_header("latency (ms)", ps),
        &rows,
        true,
    ));
    let tps = vec![stats_row(
        "per request",
        &j["output_tokens_per_s_per_request"],
        ps,
    )];
    out.push('\n');
    out.push_str(&table(
        style,
        &stats_header("output tokens/s", ps),
        &tps,
        true,
    ));

    if let Some(others) = j.get("conventions").and_then(Value::as_object) {
        for (name, v) in others {
            out.push('\n');
            let c = o.conventions.iter().find(|c| c.name() == name);
            if let Some(c) = c {
                let note = format!("convention {name}: {}", convention_note(*c));
                match style {
                    Style::Plain => out.push_str(&format!("{note}\n")),
                    Style::Markdown => out.push_str(&format!("_{note}_\n\n")),
                }
            }
            let names = c.map_or(Convention::Tracekit, |c| *c).names();
            let rows = vec![
                stats_row(names.ttft, &v["ttft"], ps),
                stats_row(names.tpot, &v["tpot"], ps),
                stats_row(names.itl, &v["itl"], ps),
                stats_row(names.e2e, &v["e2e"], ps),
            ];
            out.push_str(&table(
                style,
                &stats_header(&format!("{name} (ms)"), ps),
                &rows,
                true,
            ));
        }
    }
    if let Some(series) = j.get("windows").and_then(Value::as_array) {
        out.push('\n');
        out.push_str(&windows_table(series, style));
    }
    out
}

const WINDOW_COLUMNS: [&str; 9] = [
    "start_s",
    "started",
    "completed",
    "errors",
    "output_tokens_per_s",
    "ttft_p50",
    "ttft_p99",
    "e2e_p50",
    "e2e_p99",
];

fn windows_table(series: &[Value], style: Style) -> String {
    let header: Vec<String> = WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect();
    let rows: Vec<Vec<String>> = series
        .iter()
        .map(|w| {
            WINDOW_COLUMNS
                .iter()
                .map(|k| match &w[*k] {
                    Value::Null => "-".into(),
                    v => num(v, 3),
                })
                .collect()
        })
        .collect();
    table(style, &header, &rows, true)
}

/// Flatten a report into (column, value) pairs for CSV: nested keys are
/// joined with dots; the per-status HTTP map and the windows are left out
/// so that every run of the same command has the same columns.
pub fn flatten(j: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if prefix.is_empty() && (k == "http_status" || k == "windows") {
                        continue;
                    }
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::Null => out.push((prefix.to_string(), String::new())),
            Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", j, &mut out);
    out
}

/// The time series as CSV rows (header first).
pub fn windows_csv(j: &Value, header: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if header {
        rows.push(WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect());
    }
    for w in j["windows"].as_array().into_iter().flatten() {
        rows.push(
            WINDOW_COLUMNS
                .iter()
                .map(|k| match &w[*k] {
                    Value::Null => String::new(),
                    v => v.to_string(),
                })
                .collect(),
        );
    }
    rows
}

/// Look up `a.b.c` in a report; a key may itself contain dots (`p99.9`).
pub fn lookup<'v>(j: &'v Value, path: &str) -> Option<&'v Value> {
    if let Some(v) = j.get(path) {
        return Some(v);
    }
    path.match_indices('.').find_map(|(i, _)| {
        let (head, rest) = (&path[..i], &path[i + 1..]);
        j.get(head).and_then(|v| lookup(v, rest))
    })
}
