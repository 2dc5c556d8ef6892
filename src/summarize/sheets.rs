//! `trace-summarize --format xlsx`: the report as a spreadsheet. A
//! `summary` sheet (one row per figure of the JSON report, its unit, and
//! one column for the run and one per `--by` group), a `requests` sheet
//! (the `--requests csv` columns) and, with `--window`, a `windows` sheet
//! (with `--metrics`, the server's figures of each window beside).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::report::{self, unit};
use crate::xlsx::{Cell, Workbook};

use super::requests::COLUMNS;

/// Refuse `--format xlsx` unless it goes to a file named `.xlsx`: a
/// workbook is binary, and a terminal or a pipe has no use for it.
pub fn check_output(output: Option<&Path>) -> Result<()> {
    match output {
        Some(p)
            if p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("xlsx")) =>
        {
            Ok(())
        }
        Some(p) => Err(Error::usage(format!(
            "--format xlsx writes a spreadsheet: name it FILE.xlsx (-o {} is not)",
            p.display()
        ))),
        None => Err(Error::usage(
            "--format xlsx writes a spreadsheet, not text for a terminal or a pipe: give -o FILE.xlsx",
        )),
    }
}

/// A flattened report value as a cell: numbers as numbers.
fn cell(text: &str) -> Cell {
    if text.is_empty() {
        return Cell::Empty;
    }
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && !text.starts_with('+') => Cell::Number(x),
        _ => Cell::Text(text.to_string()),
    }
}

/// Write the workbook.
pub fn write(
    path: &Path,
    overall: &Value,
    groups: &[(String, Value)],
    by: Option<&str>,
    requests: &[Vec<Cell>],
) -> Result<()> {
    let mut book = Workbook::new(path);

    let mut headers = vec!["figure".to_string(), "unit".to_string(), "all".to_string()];
    headers.extend(groups.iter().map(|(k, _)| match by {
        Some(field) => format!("{field} = {k}"),
        None => k.clone(),
    }));
    let group_values: Vec<HashMap<String, String>> = groups
        .iter()
        .map(|(_, j)| report::flatten(j).into_iter().collect())
        .collect();
    let rows: Vec<Vec<Cell>> = report::flatten(overall)
        .into_iter()
        // The server's windows are the windows sheet's, not one cell of text.
        .filter(|(key, _)| key != "server.windows")
        .map(|(key, value)| {
            let mut row = vec![
                Cell::Text(key.clone()),
                Cell::Text(unit(&key).to_string()),
                cell(&value),
            ];
            row.extend(
                group_values
                    .iter()
                    .map(|g| g.get(&key).map_or(Cell::Empty, |v| cell(v))),
            );
            row
        })
        .collect();
    book.add_table("summary", &headers, &rows)?;

    let headers: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    book.add_table("requests", &headers, requests)?;

    // The results not ok by message, as the report lists them (a list:
    // not rows of the summary sheet).
    let errors = overall.get("errors").and_then(Value::as_array);
    if let Some(errors) = errors.filter(|e| !e.is_empty()) {
        let keys = ["count", "status", "http_status", "message"];
        let headers: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let rows: Vec<Vec<Cell>> = errors
            .iter()
            .map(|e| keys.iter().map(|k| Cell::from_json(&e[*k])).collect())
            .collect();
        book.add_table("errors", &headers, &rows)?;
    }

    if overall.pointer("/server/windows").is_some() {
        // With --metrics, the requests' and the server's figures of each
        // window, as the CSV series has them.
        let mut lines = super::server::windows_csv(overall, true).into_iter();
        let keys = lines.next().unwrap_or_default();
        let headers = window_headers(&keys);
        let rows: Vec<Vec<Cell>> = lines.map(|r| r.iter().map(|v| cell(v)).collect()).collect();
        book.add_table("windows", &headers, &rows)?;
    } else if let Some(series) = overall.get("windows").and_then(Value::as_array) {
        // The keys as the report gives them, so that a new column of the
        // series reaches the sheet too.
        let keys: Vec<String> = series
            .first()
            .and_then(Value::as_object)
            .map(|w| w.keys().cloned().collect())
            .unwrap_or_default();
        let headers = window_headers(&keys);
        let rows: Vec<Vec<Cell>> = series
            .iter()
            .map(|w| {
                keys.iter()
                    .map(|k| Cell::from_json(&w[k.as_str()]))
                    .collect()
            })
            .collect();
        book.add_table("windows", &headers, &rows)?;
    }
    book.close()
}

/// A window table's column names, each with its unit.
fn window_headers(keys: &[String]) -> Vec<String> {
    keys.iter()
        .map(|k| match window_unit(k) {
            "" => k.clone(),
            u => format!("{k} ({u})"),
        })
        .collect()
}

/// The unit of a column of the time series.
fn window_unit(key: &str) -> &'static str {
    if key.starts_with("server.") {
        // The server's columns are named as its figures in the summary.
        return unit(key);
    }
    if key.ends_with("_per_s") {
        "tokens/s"
    } else if key.ends_with("_s") {
        "s"
    } else if key.starts_with("ttft")
        || key.starts_with("e2e")
        || key.starts_with("tpot")
        || key.starts_with("itl")
    {
        "ms"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_of_figures() {
        for (path, want) in [
            ("ttft.p99", "ms"),
            ("ttft.count", ""),
            ("duration_s", "s"),
            ("throughput.requests_per_s", "requests/s"),
            ("throughput.output_tokens_per_s", "tokens/s"),
            ("peak.in_flight", ""),
            ("peak.in_flight_resolution_ms", "ms"),
            ("output_tokens", "tokens"),
            ("output_tokens_per_s_per_request.p50", "tokens/s"),
            ("slo.bounds.ttft_ms", "ms"),
            ("slo.met.ttft", ""),
            ("slo.goodput_per_s", "requests/s"),
            ("prefix_cache.hit_rate", ""),
            ("requests.ok", ""),
            ("input_length_error.mean", "tokens"),
            ("sessions.duration_ms.p50", "ms"),
            ("conventions.aiperf.e2e.p50", "ms"),
        ] {
            assert_eq!(unit(path), want, "{path}");
        }
    }

    #[test]
    fn a_server_counter_has_its_unit_in_the_summary_as_in_the_windows() {
        // The summary sheet called every counter's rate `s` and its
        // increase nothing.
        for (path, want) in [
            ("server.prompt_tokens.per_s", "tokens/s"),
            ("server.prompt_tokens.increase", "tokens"),
            ("server.prefix_cache_hits.per_s", "tokens/s"),
            ("server.requests.per_s", "requests/s"),
            ("server.preemptions.increase", "requests"),
            ("server.running.mean", ""),
            ("server.running.metric", ""),
            ("server.scrapes", ""),
        ] {
            assert_eq!(unit(path), want, "{path}");
            assert_eq!(window_unit(path), want, "{path}");
        }
    }

    #[test]
    fn units_of_window_columns() {
        for (key, want) in [
            ("start_s", "s"),
            ("output_tokens_per_s", "tokens/s"),
            ("ttft_p99", "ms"),
            ("started", ""),
            ("server.running.mean", ""),
            ("server.kv_cache_usage.max", ""),
            ("server.prompt_tokens.increase", "tokens"),
            ("server.prefix_cache_hits.per_s", "tokens/s"),
            ("server.requests.per_s", "requests/s"),
            ("server.preemptions.increase", "requests"),
        ] {
            assert_eq!(window_unit(key), want, "{key}");
        }
    }
}
