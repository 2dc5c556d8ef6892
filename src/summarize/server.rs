//! `--metrics FILE`: the server section, from trace-replay's scrape file
//! (`--metrics-out`). Only the metrics [`crate::server_metrics::KNOWN`]
//! names are summarized; the others stay in the file.

use serde_json::Value;

use super::plot;
use crate::error::Result;
use crate::report::{ServerFigure, ServerSection, ServerWindow, Style, columns};
use crate::server_metrics::{self, Figures, Scrape};

/// Every scrape of the file, in order.
pub fn read(path: &std::path::Path) -> Result<Vec<Scrape>> {
    server_metrics::read_file(path)
}

/// A number as the report prints it.
fn num(x: f64) -> String {
    crate::report::number(Some(x), 3)
}

/// The server section of the table and Markdown reports.
pub fn to_text(server: &ServerSection, markdown: bool) -> String {
    let style = if markdown {
        Style::Markdown
    } else {
        Style::Plain
    };
    let mut s = String::from("\n");
    let title = format!("server ({} scrapes)", server.scrapes);
    if markdown {
        s.push_str(&format!("**{title}**\n\n"));
    } else {
        s.push_str(&format!("{title}\n"));
    }
    let mut gauges = Vec::new();
    let mut counters = Vec::new();
    for (figure, f) in server.figures.iter() {
        let Some(metric) = f.metric else {
            continue;
        };
        let mut row = vec![figure.to_string(), metric.to_string()];
        match &f.figures {
            Figures::Gauge(g) => {
                row.extend([num(g.mean), num(g.p99), num(g.max)]);
                gauges.push(row);
            }
            Figures::Counter(c) => {
                row.extend([num(c.increase), num(c.per_s)]);
                counters.push(row);
            }
        }
    }
    if gauges.is_empty() && counters.is_empty() {
        s.push_str("no metric of vLLM, SGLang or llama.cpp in the scrapes\n");
        return s;
    }
    let h = |cols: &[&str]| cols.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    if !gauges.is_empty() {
        s.push_str(&columns(
            style,
            &h(&["gauge", "metric", "mean", "p99", "max"]),
            &gauges,
            2,
        ));
    }
    if !counters.is_empty() {
        if !gauges.is_empty() {
            s.push('\n');
        }
        s.push_str(&columns(
            style,
            &h(&["counter", "metric", "increase", "per s"]),
            &counters,
            2,
        ));
    }
    if let Some(series) = &server.windows {
        // One column per figure any window has; gauges by their mean.
        let mut cols: Vec<&str> = Vec::new();
        for w in series {
            for (k, _) in w.figures.iter() {
                if !cols.contains(&k) {
                    cols.push(k);
                }
            }
        }
        let is_counter = |w: &ServerWindow, c: &str| {
            matches!(
                w.figures.get(c).map(|f| &f.figures),
                Some(Figures::Counter(_))
            )
        };
        let mut header = vec!["start_s".to_string()];
        header.extend(cols.iter().map(|c| {
            if series.iter().any(|w| is_counter(w, c)) {
                format!("{c}/s")
            } else {
                format!("{c} mean")
            }
        }));
        let rows: Vec<Vec<String>> = series
            .iter()
            .map(|w| {
                let mut r = vec![num(w.start_s)];
                r.extend(cols.iter().map(|c| {
                    crate::report::number(w.figures.get(c).map(ServerFigure::headline), 3)
                }));
                r
            })
            .collect();
        s.push('\n');
        s.push_str(&columns(style, &header, &rows, 0));
    }
    s
}

/// The value of `figure` in a scrape: its first recognised name, as in
/// the table.
fn value_of(s: &Scrape, figure: &str) -> Option<f64> {
    s.values
        .iter()
        .find(|(i, _)| server_metrics::KNOWN[*i].figure == figure)
        .map(|(_, v)| *v)
}

/// The points of `figure` over time: (seconds since the run's start,
/// value × `scale`); scrapes before the start at 0.
fn points(scrapes: &[Scrape], figure: &str, scale: f64) -> Vec<(f64, f64)> {
    scrapes
        .iter()
        .filter_map(|s| value_of(s, figure).map(|v| (s.t_ms.max(0.0) / 1000.0, v * scale)))
        .collect()
}

/// The server's series over time for the plot: requests running and
/// waiting; KV-cache usage and prefix-cache hit rate in percent. The hit
/// rate is the engine's gauge where it has one, else (vLLM's counters)
/// hits over queries between successive scrapes, at the later one.
/// Figures the scrapes lack are left out.
pub fn plot_series(scrapes: &[Scrape]) -> plot::ServerSeries {
    let named = |name: &str, points: Vec<(f64, f64)>| {
        (!points.is_empty()).then(|| (format!("server {name}"), points))
    };
    let requests = ["running", "waiting"]
        .iter()
        .filter_map(|f| named(f, points(scrapes, f, 1.0)))
        .collect();
    let mut hit_rate = points(scrapes, "prefix_cache_hit_rate", 100.0);
    if hit_rate.is_empty() {
        let counts: Vec<(f64, f64, f64)> = scrapes
            .iter()
            .filter_map(|s| {
                let hits = value_of(s, "prefix_cache_hits")?;
                let queries = value_of(s, "prefix_cache_queries")?;
                Some((s.t_ms.max(0.0) / 1000.0, hits, queries))
            })
            .collect();
        hit_rate = counts
            .windows(2)
            .filter_map(|w| {
                let (hits, queries) = (w[1].1 - w[0].1, w[1].2 - w[0].2);
                // No query in the interval (or a restart): no rate.
                (queries > 0.0 && hits >= 0.0).then(|| (w[1].0, 100.0 * hits / queries))
            })
            .collect();
    }
    let shares = [
        named("KV-cache usage", points(scrapes, "kv_cache_usage", 100.0)),
        named("prefix-cache hit rate", hit_rate),
    ]
    .into_iter()
    .flatten()
    .collect();
    plot::ServerSeries { requests, shares }
}

/// The time series as CSV rows (header first, with `header`): the
/// client's window columns, then the server's per-window figures
/// (`server.running.mean`, `.p99`, `.max` for a gauge, `.increase` and
/// `.per_s` for a counter), one row per window either side has. A window
/// only the scrapes cover (the last scrape comes after the last result)
/// has empty request columns, and one without a scrape of a figure empty
/// server columns. Without server windows, the client's rows alone.
pub fn windows_csv(overall: &Value, header: bool) -> Vec<Vec<String>> {
    let client = crate::report::windows_csv(overall, true);
    let Some(series) = overall.pointer("/server/windows").and_then(Value::as_array) else {
        return client.into_iter().skip(usize::from(!header)).collect();
    };
    // (figure, its statistics), in the order the windows name them.
    let mut cols: Vec<(String, &[&str])> = Vec::new();
    for w in series {
        for (k, v) in w.as_object().into_iter().flatten() {
            if !v.is_object() || cols.iter().any(|(c, _)| c == k) {
                continue;
            }
            let stats: &[&str] = if v.get("mean").is_some() {
                &["mean", "p99", "max"]
            } else {
                &["increase", "per_s"]
            };
            cols.push((k.clone(), stats));
        }
    }
    let cell = |v: Option<&Value>| match v {
        None | Some(Value::Null) => String::new(),
        Some(v) => v.to_string(),
    };
    // Both sides' windows start at i × width from the run's start, computed
    // alike: equal starts are equal numbers.
    let start = |w: &Value| w["start_s"].as_f64().unwrap_or(0.0);
    let key = |s: f64| (s * 1e6).round() as i64;
    // By start: a request row, the server's window, and the start.
    type Joined<'a> = (Option<&'a Vec<String>>, Option<&'a Value>, f64);
    let mut rows: std::collections::BTreeMap<i64, Joined> = std::collections::BTreeMap::new();
    let client_windows = overall["windows"].as_array().map_or(&[][..], Vec::as_slice);
    for (w, row) in client_windows.iter().zip(client.iter().skip(1)) {
        rows.entry(key(start(w)))
            .or_insert((None, None, start(w)))
            .0 = Some(row);
    }
    for w in series {
        rows.entry(key(start(w)))
            .or_insert((None, None, start(w)))
            .1 = Some(w);
    }
    let width = client.first().map_or(0, Vec::len);
    let mut out = Vec::new();
    if header {
        let mut h = client.first().cloned().unwrap_or_default();
        for (figure, stats) in &cols {
            h.extend(stats.iter().map(|s| format!("server.{figure}.{s}")));
        }
        out.push(h);
    }
    for (client_row, server, s) in rows.into_values() {
        let mut r = match client_row {
            Some(r) => r.clone(),
            None => {
                let mut r = vec![Value::from(s).to_string()];
                r.resize(width, String::new());
                r
            }
        };
        for (figure, stats) in &cols {
            let f = server.and_then(|w| w.get(figure.as_str()));
            r.extend(stats.iter().map(|st| cell(f.and_then(|f| f.get(*st)))));
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(t_ms: f64, values: &[(&str, f64)]) -> Scrape {
        Scrape {
            t_ms,
            values: values
                .iter()
                .map(|(name, v)| {
                    let i = server_metrics::KNOWN
                        .iter()
                        .position(|k| k.name == *name)
                        .unwrap();
                    (i, *v)
                })
                .collect(),
        }
    }

    #[test]
    fn the_panel_shows_cache_usage_and_hit_rate_in_percent() {
        // vLLM: the hit rate from its counters, between scrapes.
        let scrapes = [
            scrape(
                -500.0,
                &[
                    ("vllm:num_requests_running", 0.0),
                    ("vllm:kv_cache_usage_perc", 0.0),
                    ("vllm:prefix_cache_queries_total", 100.0),
                    ("vllm:prefix_cache_hits_total", 0.0),
                ],
            ),
            scrape(
                1000.0,
                &[
                    ("vllm:num_requests_running", 3.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:prefix_cache_queries_total", 300.0),
                    ("vllm:prefix_cache_hits_total", 50.0),
                ],
            ),
            // No query in this interval: no rate.
            scrape(
                2000.0,
                &[
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:prefix_cache_queries_total", 300.0),
                    ("vllm:prefix_cache_hits_total", 50.0),
                ],
            ),
        ];
        let s = plot_series(&scrapes);
        assert_eq!(
            s.requests,
            [("server running".to_string(), vec![(0.0, 0.0), (1.0, 3.0)])]
        );
        assert_eq!(
            s.shares,
            [
                (
                    "server KV-cache usage".to_string(),
                    vec![(0.0, 0.0), (1.0, 25.0), (2.0, 50.0)]
                ),
                (
                    "server prefix-cache hit rate".to_string(),
                    vec![(1.0, 25.0)]
                ),
            ]
        );
        // SGLang's gauge, as it is.
        let s = plot_series(&[scrape(0.0, &[("sglang:cache_hit_rate", 0.5)])]);
        assert!(s.requests.is_empty());
        assert_eq!(
            s.shares,
            [(
                "server prefix-cache hit rate".to_string(),
                vec![(0.0, 50.0)]
            )]
        );
    }

    #[test]
    fn the_section_in_text_reads_the_figures() {
        let scrapes = [
            scrape(
                0.0,
                &[
                    ("vllm:num_requests_running", 1.0),
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:prompt_tokens_total", 100.0),
                ],
            ),
            scrape(
                1500.0,
                &[
                    ("vllm:num_requests_running", 3.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:prompt_tokens_total", 400.0),
                ],
            ),
        ];
        // Windows of 1 s: the counter has a rate in the second only; a
        // figure a window lacks is `-`.
        let text = to_text(&ServerSection::of(&scrapes, Some(1000.0)), false);
        assert_eq!(
            text,
            "\nserver (2 scrapes)\n\
             gauge           metric                      mean  p99  max\n\
             running         vllm:num_requests_running      2    3    3\n\
             kv_cache_usage  vllm:kv_cache_usage_perc   0.375  0.5  0.5\n\
             \n\
             counter        metric                    increase  per s\n\
             prompt_tokens  vllm:prompt_tokens_total       300    200\n\
             \n\
             start_s  running mean  kv_cache_usage mean  prompt_tokens/s\n      \
                   0             1                  0.5                -\n      \
                   1             3                 0.25              200\n"
        );
        let md = to_text(&ServerSection::of(&scrapes[..1], None), true);
        assert_eq!(
            md,
            "\n**server (1 scrapes)**\n\n\
             | gauge          | metric                    | mean | p99 | max |\n\
             | -------------- | ------------------------- | ---: | --: | --: |\n\
             | running        | vllm:num_requests_running |    1 |   1 |   1 |\n\
             | kv_cache_usage | vllm:kv_cache_usage_perc  |  0.5 | 0.5 | 0.5 |\n"
        );
        let none = to_text(&ServerSection::of(&[], None), false);
        assert_eq!(
            none,
            "\nserver (0 scrapes)\nno metric of vLLM, SGLang or llama.cpp in the scrapes\n"
        );
    }
}
