//! The server's own figures beside the report, from trace-replay's scrape
//! file (`--metrics-out`).

use serde::Serialize;

use super::keyed::Keyed;
use crate::server_metrics::{self, Figures, Kind, Known, Scrape};

/// The server's own figures, from trace-replay's scrape file
/// (`--metrics-out`): `scrapes`, then one entry per recognised figure the
/// scrapes have, in [`server_metrics::KNOWN`]'s order, and with a window
/// width, `windows`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerSection {
    pub scrapes: usize,
    /// By figure (`running`, `kv_cache_usage`, ...), with the metric each
    /// was read from.
    #[serde(flatten)]
    pub figures: Keyed<ServerFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<ServerWindow>>,
}

/// The server's figures of one window (without the metrics' names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerWindow {
    pub start_s: f64,
    #[serde(flatten)]
    pub figures: Keyed<ServerFigure>,
}

/// One figure: a gauge's mean, p99 and max, or a counter's increase and
/// rate; in the whole run's figures, the metric it was read from too.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerFigure {
    #[serde(flatten)]
    pub figures: Figures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<&'static str>,
}

impl ServerFigure {
    /// What a window's table shows of it: a counter's rate, a gauge's mean.
    pub fn headline(&self) -> f64 {
        match &self.figures {
            Figures::Gauge(g) => g.mean,
            Figures::Counter(c) => c.per_s,
        }
    }
}

impl ServerSection {
    /// The section of a run's scrapes; with a window width, its windows,
    /// from 0 to the last scrape.
    pub fn of(scrapes: &[Scrape], window_ms: Option<f64>) -> ServerSection {
        let all = server_metrics::figures(scrapes, f64::NEG_INFINITY, f64::INFINITY);
        ServerSection {
            scrapes: scrapes.len(),
            figures: by_figure(all, true),
            windows: window_ms.map(|w| server_windows(scrapes, w)),
        }
    }
}

/// Figures by their report key; with `with_metric`, each names the metric
/// it was read from.
fn by_figure(figures: Vec<(&'static Known, Figures)>, with_metric: bool) -> Keyed<ServerFigure> {
    let mut out = Keyed::default();
    for (k, figures) in figures {
        // Two names of one figure (an engine's older name beside its new
        // one): the first recognised wins.
        if out.get(k.figure).is_none() {
            let metric = with_metric.then_some(k.name);
            out.insert(k.figure.to_string(), ServerFigure { figures, metric });
        }
    }
    out
}

fn server_windows(scrapes: &[Scrape], w: f64) -> Vec<ServerWindow> {
    let last = scrapes.iter().map(|s| s.t_ms).fold(0.0, f64::max);
    let count = (last / w).floor() as usize + 1;
    (0..count)
        .map(|i| {
            let from = i as f64 * w;
            // A counter's rate in a window runs from the last scrape
            // before it to its last scrape inside, so that no increase
            // falls between windows.
            let before = scrapes.iter().rposition(|s| s.t_ms < from);
            let first = if i == 0 { f64::NEG_INFINITY } else { from };
            let mut win: Vec<Scrape> = Vec::new();
            if i > 0
                && let Some(b) = before
            {
                let mut opening = scrapes[b].clone();
                // A gauge's level before the window is not in it.
                opening
                    .values
                    .retain(|(j, _)| server_metrics::KNOWN[*j].kind == Kind::Counter);
                win.push(opening);
            }
            win.extend(
                scrapes
                    .iter()
                    .filter(|s| s.t_ms >= first && s.t_ms < from + w)
                    .cloned(),
            );
            let figures = server_metrics::figures(&win, f64::NEG_INFINITY, f64::INFINITY);
            ServerWindow {
                start_s: from / 1000.0,
                figures: by_figure(figures, false),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrape of named metrics.
    fn scrape(t_ms: f64, values: &[(&str, f64)]) -> Scrape {
        let index = |name: &str| server_metrics::KNOWN.iter().position(|k| k.name == name);
        Scrape {
            t_ms,
            values: values
                .iter()
                .map(|(name, v)| (index(name).unwrap(), *v))
                .collect(),
        }
    }

    /// vLLM at 0 and 1.5 s, with its current and older names of the KV
    /// cache usage.
    fn two_scrapes() -> [Scrape; 2] {
        [
            scrape(
                0.0,
                &[
                    ("vllm:num_requests_running", 1.0),
                    ("vllm:kv_cache_usage_perc", 0.5),
                    ("vllm:gpu_cache_usage_perc", 0.9),
                    ("vllm:prompt_tokens_total", 100.0),
                ],
            ),
            scrape(
                1500.0,
                &[
                    ("vllm:num_requests_running", 3.0),
                    ("vllm:kv_cache_usage_perc", 0.25),
                    ("vllm:gpu_cache_usage_perc", 0.9),
                    ("vllm:prompt_tokens_total", 400.0),
                ],
            ),
        ]
    }

    #[test]
    fn the_server_section_serializes_as_the_report_has_it() {
        // The first name of a figure wins (kv_cache_usage_perc); a gauge
        // has mean, p99 and max, a counter its increase over 1.5 s; the
        // windows name no metric, and the second opens with the counter's
        // value before it (100 at 0 s) but not the gauges'.
        let section = ServerSection::of(&two_scrapes(), Some(1000.0));
        assert_eq!(
            serde_json::to_value(&section).unwrap().to_string(),
            concat!(
                r#"{"scrapes":2,"#,
                r#""running":{"mean":2.0,"p99":3.0,"max":3.0,"metric":"vllm:num_requests_running"},"#,
                r#""kv_cache_usage":{"mean":0.375,"p99":0.5,"max":0.5,"metric":"vllm:kv_cache_usage_perc"},"#,
                r#""prompt_tokens":{"increase":300.0,"per_s":200.0,"metric":"vllm:prompt_tokens_total"},"#,
                r#""windows":[{"start_s":0.0,"running":{"mean":1.0,"p99":1.0,"max":1.0},"#,
                r#""kv_cache_usage":{"mean":0.5,"p99":0.5,"max":0.5}},"#,
                r#"{"start_s":1.0,"running":{"mean":3.0,"p99":3.0,"max":3.0},"#,
                r#""kv_cache_usage":{"mean":0.25,"p99":0.25,"max":0.25},"#,
                r#""prompt_tokens":{"increase":300.0,"per_s":200.0}}]}"#
            )
        );
        // Without a window width, no windows key; no scrape, no figure.
        let section = ServerSection::of(&[], None);
        assert_eq!(
            serde_json::to_value(&section).unwrap().to_string(),
            r#"{"scrapes":0}"#
        );
    }
}
