//! trace-sweep's rows: one per run, as a table, JSON, CSV, Markdown or a
//! spreadsheet.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::search::Answer;
use super::{Args, Row, speed_label};
use crate::error::Result;
use crate::report::{self, Format, Report, Style};
use crate::server_metrics::{self, RUN_COLUMNS, RunFigures};
use crate::xlsx::{Cell, Workbook};

/// The rows as a `sweep` sheet, and each run's report as a sheet of
/// figures.
pub(super) fn write_xlsx(path: &Path, rows: &[Row], with_server: bool) -> Result<()> {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| a.speed.total_cmp(&b.speed));
    let mut book = Workbook::new(path);
    if let Some(first) = sorted.first() {
        let headers: Vec<String> = flat_columns(first, with_server)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let cells: Vec<Vec<Cell>> = sorted
            .iter()
            .map(|r| {
                flat_columns(r, with_server)
                    .iter()
                    .map(|(_, v)| Cell::from_json(v))
                    .collect()
            })
            .collect();
        book.add_table("sweep", &headers, &cells)?;
    }
    for r in &sorted {
        let mut figures: Vec<Vec<Cell>> = report::flatten(&r.report.to_value())
            .into_iter()
            .map(|(k, v)| {
                let value = match v.parse::<f64>() {
                    Ok(n) => Cell::Number(n),
                    Err(_) if v.is_empty() => Cell::Empty,
                    Err(_) => Cell::Text(v),
                };
                vec![Cell::Text(k), value]
            })
            .collect();
        if let Some(server) = &r.server {
            for (name, v) in RUN_COLUMNS.iter().zip(server.columns()) {
                figures.push(vec![
                    Cell::Text(format!("server.{name}")),
                    Cell::from_json(&v),
                ]);
            }
        }
        let name = format!("speed-{}", speed_label(r.speed));
        book.add_table(&name, &["figure".into(), "value".into()], &figures)?;
    }
    book.close()
}

pub(super) const PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

/// The percentiles of each distribution in the table (the other forms
/// have [`PERCENTILES`]).
const TABLE_PERCENTILES: [u8; 2] = [50, 99];

pub(super) fn percent(f: f64) -> String {
    let text = format!("{:.1}", f * 100.0);
    format!("{}%", text.trim_end_matches(".0"))
}

pub(super) fn slo_text(args: &Args) -> String {
    let bounds: Vec<String> = args
        .slo
        .bounds
        .iter()
        .map(|(m, b)| format!("{} ≤ {}", m.name(), crate::duration::human(*b)))
        .collect();
    format!(
        "{} for {} of requests, errors ≤ {}",
        bounds.join(", "),
        percent(args.attainment),
        percent(args.max_error_rate)
    )
}

/// Results meeting every SLO per second.
fn goodput(r: &Report) -> Option<f64> {
    r.slo.as_ref().and_then(|s| s.goodput_per_s)
}

/// The columns of a row, with their values: (name, value).
fn columns(row: &Row) -> Vec<(String, Value)> {
    let r = &row.report;
    let mut c: Vec<(String, Value)> = vec![
        ("speed".into(), json!(row.speed)),
        ("requests".into(), json!(row.requests)),
        ("offered_rps".into(), json!(row.offered_rps)),
        ("achieved_rps".into(), json!(r.throughput.requests_per_s)),
        (
            "output_tokens_per_s".into(),
            json!(r.throughput.output_tokens_per_s),
        ),
        ("ok".into(), json!(r.requests.ok)),
        ("attainment".into(), json!(row.attainment)),
        ("goodput_per_s".into(), json!(goodput(r))),
        ("error_rate".into(), json!(row.error_rate)),
        ("not_sent".into(), json!(row.not_sent)),
    ];
    // The distributions the report marks for a sweep, by percentile:
    // `ttft_p50_ms`.
    let value = r.to_value();
    for f in report::FIGURES.iter().filter(|f| f.sweep) {
        let unit = f.unit.name();
        for p in PERCENTILES {
            let key = report::percentile_key(p);
            let path = format!("{}.{key}", f.path);
            c.push((
                format!("{}_{key}_{unit}", f.path),
                json!(report::lookup(&value, &path)),
            ));
        }
    }
    c.push(("server".into(), json!(row.server)));
    c.push(("passed".into(), json!(row.passed)));
    c.push(("note".into(), json!(row.note)));
    c.push(("file".into(), json!(row.file)));
    c
}

/// The columns of a row for CSV and spreadsheets: the server's figures
/// flattened to `server.running.mean`, ..., with --metrics, and left out
/// without.
fn flat_columns(row: &Row, with_server: bool) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (k, v) in columns(row) {
        if k != "server" {
            out.push((k, v));
            continue;
        }
        if !with_server {
            continue;
        }
        let values = row.server.as_ref().map(RunFigures::columns);
        for (i, name) in RUN_COLUMNS.iter().enumerate() {
            let v = values.as_ref().map_or(Value::Null, |vs| vs[i].clone());
            out.push((format!("server.{name}"), v));
        }
    }
    out
}

/// The server's figures by speed, under the rows (with --metrics).
fn server_table(style: Style, rows: &[&Row]) -> String {
    let header: Vec<String> = [
        "speed",
        "running mean",
        "running max",
        "waiting mean",
        "waiting max",
        "KV cache mean",
        "KV cache max",
        "prefix hits",
        "preempted",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let count =
        |x: Option<f64>, decimals| x.map_or("-".into(), |x| report::number(Some(x), decimals));
    let share = |x: Option<f64>| x.map_or("-".into(), percent);
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let f = r.server.clone().unwrap_or_else(|| RunFigures::of(&[]));
            let mean = |l: Option<server_metrics::Level>| l.map(|l| l.mean);
            let max = |l: Option<server_metrics::Level>| l.map(|l| l.max);
            vec![
                format!("{}×", speed_label(r.speed)),
                count(mean(f.running), 1),
                count(max(f.running), 1),
                count(mean(f.waiting), 1),
                count(max(f.waiting), 1),
                share(mean(f.kv_cache_usage)),
                share(max(f.kv_cache_usage)),
                share(f.prefix_cache_hit_rate),
                count(f.preemptions, 0),
            ]
        })
        .collect();
    let mut text = String::from("server during each run (from its scrape):\n\n");
    text.push_str(&report::table(style, &header, &table_rows, true));
    text
}

pub(super) fn render(args: &Args, rows: &[Row], found: Answer) -> String {
    let answer = found.speed;
    // By speed, whatever order the search ran them in.
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| a.speed.total_cmp(&b.speed));
    let best = answer.and_then(|a| rows.iter().find(|r| r.speed == a).copied());
    match args.format {
        Format::Json => {
            let runs: Vec<Value> = rows
                .iter()
                .map(|r| Value::Object(columns(r).into_iter().collect::<Map<_, _>>()))
                .collect();
            let mut slo = Map::new();
            for (m, b) in &args.slo.bounds {
                slo.insert(format!("{}_ms", m.name()), json!(b));
            }
            let j = json!({
                "slo": slo,
                "attainment": args.attainment,
                "max_error_rate": args.max_error_rate,
                "runs": runs,
                "max_speed": answer,
                "beyond_search": found.beyond,
                "max_speed_requests_per_s": best.map(|b| b.report.throughput.requests_per_s),
                "max_speed_output_tokens_per_s": best.map(|b| b.report.throughput.output_tokens_per_s),
            });
            let mut text = serde_json::to_string_pretty(&j).unwrap_or_default();
            text.push('\n');
            text
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let with_server = args.metrics.is_some();
            if let Some(first) = rows.first() {
                let _ = w.write_record(
                    flat_columns(first, with_server)
                        .iter()
                        .map(|(k, _)| k.as_str()),
                );
            }
            for r in rows {
                let _ = w.write_record(flat_columns(r, with_server).iter().map(|(_, v)| match v {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }));
            }
            String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
        }
        // Not a --format of trace-sweep (see FORMATS).
        Format::Xlsx => String::new(),
        Format::Table | Format::Markdown => {
            let style = args.format.style();
            let mut header: Vec<String> = [
                "speed",
                "offered/s",
                "ok/s",
                "out tok/s",
                "attained",
                "goodput/s",
                "errors",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            // The distributions the report marks for a sweep: `TTFT p50 ms`.
            let figures = || report::FIGURES.iter().filter(|f| f.sweep);
            for f in figures() {
                for p in TABLE_PERCENTILES {
                    let name = f.path.to_uppercase();
                    header.push(format!("{name} p{p} {}", f.unit.name()));
                }
            }
            header.push("SLO".into());
            let table_rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let j = &r.report;
                    let mut cells = vec![
                        format!("{}×", speed_label(r.speed)),
                        r.offered_rps
                            .map_or("-".into(), |v| report::number(Some(v), 2)),
                        report::number(j.throughput.requests_per_s, 2),
                        report::number(j.throughput.output_tokens_per_s, 1),
                        r.attainment.map_or("-".into(), percent),
                        report::number(goodput(j), 2),
                        r.error_rate.map_or("-".into(), percent),
                    ];
                    let value = j.to_value();
                    for f in figures() {
                        for p in TABLE_PERCENTILES {
                            let path = format!("{}.{}", f.path, report::percentile_key(p.into()));
                            let v = report::lookup(&value, &path).and_then(Value::as_f64);
                            cells.push(report::number(v, 1));
                        }
                    }
                    cells.push(if r.passed { "met" } else { "missed" }.to_string());
                    cells
                })
                .collect();
            let mut text = format!("trace-sweep: SLO {}\n\n", slo_text(args));
            text.push_str(&report::table(style, &header, &table_rows, true));
            text.push('\n');
            if args.metrics.is_some() {
                text.push_str(&server_table(style, &rows));
                text.push('\n');
            }
            for r in rows.iter().filter(|r| !r.passed) {
                text.push_str(&format!("{}×: {}\n", speed_label(r.speed), r.note));
            }
            text.push_str(&match best {
                Some(b) => format!(
                    "max speed: {}{}× met the SLO: {} requests/s offered, {} ok/s, {} output tokens/s{}\n",
                    if found.beyond { "at least " } else { "" },
                    speed_label(b.speed),
                    b.offered_rps.map_or("-".into(), |v| report::number(Some(v), 2)),
                    report::number(b.report.throughput.requests_per_s, 2),
                    report::number(b.report.throughput.output_tokens_per_s, 1),
                    if found.beyond {
                        " (the highest speed tried: search higher to find where it stops)"
                    } else {
                        ""
                    },
                ),
                None => "max speed: none (no run met the SLO)\n".to_string(),
            });
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::metrics::{Aggregate, SummaryOptions};

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["trace-sweep", "--sim", "--slo", "ttft=1s", "-o", "d"];
        argv.extend(extra);
        argv.extend(["--", "t.jsonl"]);
        Args::try_parse_from(argv).unwrap()
    }

    fn row(speed: f64, server: Option<RunFigures>) -> Row {
        Row {
            speed,
            file: format!("d/speed-{speed}.ndjson"),
            requests: 10,
            offered_rps: Some(10.0 * speed),
            report: report(),
            attainment: Some(1.0),
            error_rate: Some(0.0),
            passed: true,
            note: "passed".into(),
            server,
            not_sent: 0,
        }
    }

    fn report() -> Report {
        let mut r = Report::of(
            &Aggregate::default(),
            &SummaryOptions {
                percentiles: PERCENTILES.to_vec(),
                ..SummaryOptions::default()
            },
        );
        r.throughput.requests_per_s = Some(10.0);
        r.requests.ok = 10;
        r
    }

    fn busy() -> RunFigures {
        RunFigures {
            scrapes: 12,
            running: Some(server_metrics::Level {
                mean: 7.3,
                max: 8.0,
            }),
            waiting: Some(server_metrics::Level {
                mean: 10.5,
                max: 24.0,
            }),
            kv_cache_usage: Some(server_metrics::Level {
                mean: 0.413,
                max: 0.9,
            }),
            prefix_cache_hit_rate: Some(0.25),
            preemptions: Some(3.0),
        }
    }

    #[test]
    fn the_server_figures_of_each_run_in_every_format() {
        let rows = [row(1.0, Some(RunFigures::of(&[]))), row(2.0, Some(busy()))];
        let table = render(
            &args(&["--metrics"]),
            &rows,
            Answer {
                speed: Some(2.0),
                beyond: false,
            },
        );
        let at = table.find("server during").unwrap();
        assert_eq!(
            &table[at..table.find("max speed").unwrap()],
            "server during each run (from its scrape):\n\n\
             speed  running mean  running max  waiting mean  waiting max  KV cache mean  KV cache max  prefix hits  preempted\n\
             1×                -            -             -            -              -             -            -          -\n\
             2×              7.3            8          10.5           24          41.3%           90%          25%          3\n\n"
        );
        let md = render(
            &args(&["--metrics", "--format", "markdown"]),
            &rows,
            Answer::default(),
        );
        assert!(
            md.contains("| 2×    |          7.3 |           8 |         10.5 |          24 |         41.3% |          90% |         25% |         3 |"),
            "{md}"
        );
        let csv = render(
            &args(&["--metrics", "--format", "csv"]),
            &rows,
            Answer::default(),
        );
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].ends_with(
                ",server.scrapes,server.running.mean,server.running.max,server.waiting.mean,\
                 server.waiting.max,server.kv_cache_usage.mean,server.kv_cache_usage.max,\
                 server.prefix_cache_hit_rate,server.preemptions,passed,note,file"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(",0,,,,,,,,,true,passed,d/speed-1.ndjson"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2]
                .ends_with(",12,7.3,8.0,10.5,24.0,0.413,0.9,0.25,3.0,true,passed,d/speed-2.ndjson"),
            "{}",
            lines[2]
        );
        let j: Value = serde_json::from_str(&render(
            &args(&["--metrics", "--format", "json"]),
            &rows,
            Answer::default(),
        ))
        .unwrap();
        assert_eq!(
            j["runs"][1]["server"],
            serde_json::to_value(busy()).unwrap()
        );
        assert_eq!(j["runs"][0]["server"]["waiting"], Value::Null);

        // Without --metrics: null in JSON, no column elsewhere.
        let rows = [row(1.0, None)];
        let j: Value = serde_json::from_str(&render(
            &args(&["--format", "json"]),
            &rows,
            Answer::default(),
        ))
        .unwrap();
        assert_eq!(j["runs"][0]["server"], Value::Null);
        let csv = render(&args(&["--format", "csv"]), &rows, Answer::default());
        assert!(!csv.contains("server"), "{csv}");
        let table = render(&args(&[]), &rows, Answer::default());
        assert!(!table.contains("server"), "{table}");
    }
}
