//! The report for people: the table and Markdown forms, drawn from the
//! typed [`Report`]'s fields through the one table writer.

use super::json::WINDOW_COLUMNS;
use super::keyed::{Keyed, percentile_key};
use super::table::{Style, columns, number, table};
use super::{ErrorCount, Report, Stats, WindowFigures};
use crate::metrics::{Convention, PercentileRule, SummaryOptions};

fn stats_row(name: &str, s: &Stats, ps: &[f64]) -> Vec<String> {
    let mut row = vec![
        name.to_string(),
        s.count.to_string(),
        number(s.mean, 2),
        number(s.std, 2),
        number(s.min, 2),
    ];
    for p in ps {
        row.push(number(s.percentile(*p), 2));
    }
    row.push(number(s.max, 2));
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
pub fn to_text(title: &str, j: &Report, o: &SummaryOptions, style: Style) -> String {
    let ps = &o.percentiles;
    let r = &j.requests;
    let mut out = String::new();
    let http: Vec<String> = j
        .http_status
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let heading = format!(
        "{title}: {} request{}: {} ok, {} error, {} timeout, {} cancelled (HTTP {})",
        r.total,
        crate::text::plural(r.total),
        r.ok,
        r.error,
        r.timeout,
        r.cancelled,
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
    let rule = match o.conventions.primary.percentile_rule() {
        PercentileRule::NearestRank => "nearest rank",
        PercentileRule::Linear => "the latencies interpolated linearly, the others by nearest rank",
        PercentileRule::CumulativeShare => {
            "the latencies by cumulative weight, the others by nearest rank"
        }
    };
    let precision = if j.precision == "exact" {
        format!("percentiles exact ({rule})")
    } else {
        "percentiles within 0.1 % (HDR histogram, 3 significant digits); mean, std, min, max exact"
            .to_string()
    };
    let notes = [
        format!(
            "convention {}: {}",
            o.conventions.primary.name(),
            convention_note(o.conventions.primary)
        ),
        format!(
            "{precision}; warmup results excluded ({})",
            r.warmup_excluded
        ),
    ];
    for n in &notes {
        match style {
            Style::Plain => out.push_str(&format!("{n}\n")),
            Style::Markdown => out.push_str(&format!("_{n}_\n\n")),
        }
    }
    out.push('\n');

    let t = &j.throughput;
    let mut facts: Vec<Vec<String>> = vec![
        vec!["duration".into(), format!("{} s", number(j.duration_s, 3))],
        vec![
            "request throughput".into(),
            format!("{} requests/s", number(t.requests_per_s, 3)),
        ],
        vec![
            "output token throughput".into(),
            format!(
                "{} tokens/s ({} tokens)",
                number(t.output_tokens_per_s, 2),
                j.output_tokens
            ),
        ],
        vec![
            "total token throughput".into(),
            format!(
                "{} tokens/s ({} prompt + {} output tokens: {} prompt)",
                number(t.total_tokens_per_s, 2),
                j.prompt_tokens,
                j.output_tokens,
                prompt_share(j.prompt_tokens, j.output_tokens)
            ),
        ],
        vec![
            "peak output tokens/s".into(),
            format!("{} (1 s buckets)", number(j.peak.output_tokens_per_s, 1)),
        ],
        vec![
            "peak requests in flight".into(),
            j.peak.in_flight.to_string(),
        ],
    ];
    if let Some(s) = &j.sessions {
        facts.push(vec![
            "sessions".into(),
            format!(
                "{} ({} with every turn ok); turns per session mean {}, max {}; duration p50 {} ms, max {} ms",
                s.count,
                s.completed,
                number(s.turns.mean, 2),
                number(s.turns.max, 0),
                number(s.duration_ms.percentile(50.0), 1),
                number(s.duration_ms.max, 1),
            ),
        ]);
        facts.push(vec![
            "session tokens".into(),
            format!(
                "mean {}, max {}; prefix cache hit rate per session mean {}, min {}",
                number(s.tokens.mean, 1),
                number(s.tokens.max, 0),
                number(s.cache_hit_rate.mean, 3),
                number(s.cache_hit_rate.min, 3),
            ),
        ]);
        let ttft = |st: &Stats| {
            format!(
                "p50 {} ms, p90 {} ms ({})",
                number(st.percentile(50.0), 1),
                number(st.percentile(90.0), 1),
                st.count
            )
        };
        if s.ttft_first_turn_ms.count + s.ttft_later_turns_ms.count > 0 {
            facts.push(vec![
                "TTFT by turn".into(),
                format!(
                    "first {}; later {}",
                    ttft(&s.ttft_first_turn_ms),
                    ttft(&s.ttft_later_turns_ms)
                ),
            ]);
        }
        if !s.ttft_by_model_ms.is_empty() {
            let models: Vec<String> = s
                .ttft_by_model_ms
                .iter()
                .map(|(m, st)| format!("{m} {}", ttft(st)))
                .collect();
            facts.push(vec!["TTFT by model".into(), models.join("; ")]);
        }
        if !s.cache_hit_rate_by_turn.is_empty() {
            let rates: Vec<String> = s
                .cache_hit_rate_by_turn
                .iter()
                .map(|(t, r)| format!("{t}: {}", number(*r, 3)))
                .collect();
            facts.push(vec![
                "prefix cache hit rate by turn".into(),
                rates.join(", "),
            ]);
        }
        recorded_rows(s, &mut facts);
    }
    let cache = &j.prefix_cache;
    if cache.results > 0 {
        facts.push(vec![
            "prefix cache hit rate".into(),
            format!(
                "{} ({} of {} prompt tokens cached)",
                number(cache.hit_rate, 4),
                cache.cached_tokens,
                cache.prompt_tokens
            ),
        ]);
    }
    for (f, name) in [
        (&j.input_length_error, "prompt tokens - input_length"),
        (&j.output_length_error, "completion tokens - output_length"),
    ] {
        if let (true, Some(min), Some(max)) = (f.count > 0, f.min, f.max) {
            facts.push(vec![
                name.into(),
                format!(
                    "mean {}, min {min}, max {max} ({} of {} exact)",
                    number(f.mean, 2),
                    f.exact,
                    f.count
                ),
            ]);
        }
    }
    if r.ok_without_usage > 0 {
        let how = match j.output_tokens_from_chunks {
            None => "their tokens are not counted".to_string(),
            Some(n) => format!("{n} of them counted one token per content chunk"),
        };
        facts.push(vec![
            "ok without usage".into(),
            format!("{} ({how})", r.ok_without_usage),
        ]);
    }
    if let Some(slo) = &j.slo {
        let met = &slo.met;
        let parts: Vec<String> = o
            .slo
            .bounds
            .iter()
            .map(|(m, b)| {
                format!(
                    "{} <= {} ms: {}",
                    m.name(),
                    crate::text::format_ms(*b),
                    number(met.each.get(m.name()).copied().flatten(), 4)
                )
            })
            .collect();
        facts.push(vec![
            "goodput".into(),
            format!(
                "{} requests/s meet every SLO (share {}; {})",
                number(slo.goodput_per_s, 3),
                number(met.all, 4),
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
    if !j.errors.is_empty() {
        out.push_str(&errors_table(&j.errors, style));
        out.push('\n');
    }

    let names = o.conventions.primary.names();
    let mut rows = vec![
        stats_row(names.ttft, &j.ttft, ps),
        stats_row(names.tpot, &j.tpot, ps),
        stats_row(names.itl, &j.itl, ps),
        stats_row(names.e2e, &j.e2e, ps),
        stats_row("dispatch lag", &j.dispatch_lag, ps),
    ];
    if let Some(fs) = &j.from_scheduled {
        rows.push(stats_row("TTFT from scheduled", &fs.ttft, ps));
        rows.push(stats_row("E2E from scheduled", &fs.e2e, ps));
    }
    out.push_str(&table(
        style,
        &stats_header("latency (ms)", ps),
        &rows,
        true,
    ));
    let tps = vec![stats_row(
        "per request",
        &j.output_tokens_per_s_per_request,
        ps,
    )];
    out.push('\n');
    out.push_str(&table(
        style,
        &stats_header("output tokens/s", ps),
        &tps,
        true,
    ));

    for (name, v) in j.conventions.iter().flat_map(Keyed::iter) {
        out.push('\n');
        let note = format!("convention {name}: {}", convention_note(v.convention));
        match style {
            Style::Plain => out.push_str(&format!("{note}\n")),
            Style::Markdown => out.push_str(&format!("_{note}_\n\n")),
        }
        let names = v.convention.names();
        let rows = vec![
            stats_row(names.ttft, &v.ttft, ps),
            stats_row(names.tpot, &v.tpot, ps),
            stats_row(names.itl, &v.itl, ps),
            stats_row(names.e2e, &v.e2e, ps),
        ];
        out.push_str(&table(
            style,
            &stats_header(&format!("{name} (ms)"), ps),
            &rows,
            true,
        ));
    }
    if let Some(series) = &j.windows {
        out.push('\n');
        out.push_str(&windows_table(series, style));
    }
    out
}

/// The most errors a table lists; the JSON report lists every kind.
const ERROR_ROWS: usize = 10;

/// The results not ok by message, the most frequent first.
fn errors_table(errors: &[ErrorCount], style: Style) -> String {
    let header: Vec<String> = ["not ok", "status", "HTTP", "error"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut rows: Vec<Vec<String>> = errors
        .iter()
        .take(ERROR_ROWS)
        .map(|e| {
            vec![
                e.count.to_string(),
                e.status.to_string(),
                e.http_status.map_or("-".into(), |h| h.to_string()),
                if e.message.is_empty() {
                    "-".into()
                } else {
                    e.message.clone()
                },
            ]
        })
        .collect();
    if errors.len() > ERROR_ROWS {
        let rest = &errors[ERROR_ROWS..];
        let n: u64 = rest.iter().map(|e| e.count).sum();
        rows.push(vec![
            n.to_string(),
            "-".into(),
            "-".into(),
            format!("{} more kinds (--format json lists them)", rest.len()),
        ]);
    }
    columns(style, &header, &rows, usize::MAX)
}

fn windows_table(series: &[WindowFigures], style: Style) -> String {
    let header: Vec<String> = WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect();
    let rows: Vec<Vec<String>> = series
        .iter()
        .map(|w| w.cells().iter().map(|x| number(*x, 3)).collect())
        .collect();
    table(style, &header, &rows, true)
}

/// The prompt's share of all tokens, as a percentage for the text report
/// (total token throughput is mostly prompt tokens in most workloads).
fn prompt_share(prompt: u64, output: u64) -> String {
    let all = prompt + output;
    if all == 0 {
        return "-".into();
    }
    format!("{}%", number(Some(100.0 * prompt as f64 / all as f64), 1))
}

/// The cache hit rate the recorded sessions had, beside this run's, and
/// the main agents' calls against the subagents'.
fn recorded_rows(s: &crate::report::SessionsFigures, facts: &mut Vec<Vec<String>>) {
    if let Some(r) = &s.recorded_cache_hit_rate {
        facts.push(vec![
            "recorded prefix cache hit rate".into(),
            format!(
                "per session mean {}, min {} (this run: mean {}, min {})",
                number(r.mean, 3),
                number(r.min, 3),
                number(s.cache_hit_rate.mean, 3),
                number(s.cache_hit_rate.min, 3),
            ),
        ]);
    }
    if let Some(by_turn) = &s.recorded_cache_hit_rate_by_turn {
        let rates: Vec<String> = by_turn
            .iter()
            .map(|(t, r)| {
                let now = s.cache_hit_rate_by_turn.get(t).copied().flatten();
                format!("{t}: {} ({})", number(*r, 3), number(now, 3))
            })
            .collect();
        facts.push(vec![
            "recorded hit rate by turn (this run's)".into(),
            rates.join(", "),
        ]);
    }
    if let Some(a) = &s.agents {
        let side = |name: &str, x: &crate::report::AgentSide| {
            format!(
                "{name} {} calls ({} ok), hit rate {} (recorded {}), TTFT p50 {} ms",
                x.calls,
                x.ok,
                number(x.cache_hit_rate, 3),
                number(x.recorded_cache_hit_rate, 3),
                number(x.ttft_ms.percentile(50.0), 1),
            )
        };
        facts.push(vec![
            "main agents and subagents".into(),
            format!(
                "{}; {}",
                side("main", &a.main),
                side("subagents", &a.subagents)
            ),
        ]);
    }
}
