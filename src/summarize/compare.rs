//! `trace-summarize --compare`: setups side by side, each with the
//! difference to the first; repeated runs of one setup as mean ± standard
//! deviation (min … max), as hyperfine prints them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Args, Format, fold_inputs, nothing_measured, plot};
use crate::cli::{self, Outcome, Skipper};
use crate::error::Result;
use crate::io::{self, Output};
use crate::metrics::SummaryOptions;
use crate::report::{self, Style};
use crate::run_info::RunInfo;

/// One column: a setup (or one `--by` group of it) and the report of each
/// of its runs.
struct Column {
    name: String,
    files: Vec<String>,
    reports: Vec<Value>,
    /// The settings kept beside its files.
    settings: Vec<(String, RunInfo)>,
}

/// A figure over the runs of one column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Runs that have the figure.
    pub runs: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1), as hyperfine's σ; none for one run.
    pub std: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; none when there is no value.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = (n > 1).then(|| {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        });
        Some(Spread {
            runs: n,
            mean,
            std,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// The setups named on the command line: each argument one setup, its
/// comma-separated files the repeated runs.
fn setups(args: &Args) -> Vec<Vec<String>> {
    args.input
        .files
        .iter()
        .map(|a| a.split(',').map(str::to_string).collect())
        .collect()
}

/// Run `trace-summarize --compare`.
pub fn run(args: &Args, o: &SummaryOptions) -> Result<Outcome> {
    let setups = setups(args);
    if setups.is_empty() {
        return Err(crate::error::Error::usage(
            "--compare needs the setups to compare: FILE... (a1.ndjson,a2.ndjson for repeated runs of one setup)",
        ));
    }
    let mut skipper = Skipper::new(&args.skip_invalid);
    let mut plot_runs: Vec<plot::Series> = Vec::new();
    // Column name → its runs' reports, in the order first seen.
    let mut columns: Vec<Column> = Vec::new();
    let mut negative = false;
    for (s, files) in setups.iter().enumerate() {
        let setup_name = args.input.files[s].clone();
        let mut by_group: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut whole: Vec<Value> = Vec::new();
        for file in files {
            let inputs = io::input_specs(std::slice::from_ref(file))?;
            let plot_into = args.plot.is_some().then_some(&mut plot_runs);
            let (mut overall, groups) =
                fold_inputs(args, &inputs, o, &mut skipper, plot_into, None)?;
            for g in groups.values() {
                overall.merge(g);
            }
            if let Some(reason) = nothing_measured(&overall) {
                cli::warn(format!("{file}: {reason}"));
                negative = true;
            }
            whole.push(report::to_json(&overall, o));
            for (k, g) in &groups {
                by_group
                    .entry(k.clone())
                    .or_default()
                    .push(report::to_json(g, o));
            }
        }
        if args.by.is_none() {
            columns.push(Column {
                name: setup_name,
                files: files.clone(),
                reports: whole,
                settings: super::runs::of_inputs(files),
            });
        } else {
            for (k, reports) in by_group {
                let name = if setups.len() == 1 {
                    k
                } else {
                    format!("{setup_name} / {k}")
                };
                columns.push(Column {
                    name,
                    files: files.clone(),
                    reports,
                    settings: super::runs::of_inputs(files),
                });
            }
        }
    }
    skipper.finish();

    let paths = report::compared(o);
    // spreads[column][figure]
    let spreads: Vec<Vec<Option<Spread>>> = columns
        .iter()
        .map(|c| {
            paths
                .iter()
                .map(|p| {
                    let values: Vec<f64> = c
                        .reports
                        .iter()
                        .filter_map(|r| report::lookup(r, p).and_then(Value::as_f64))
                        .collect();
                    Spread::of(&values)
                })
                .collect()
        })
        .collect();
    let settings: Vec<(String, RunInfo)> =
        columns.iter().flat_map(|c| c.settings.clone()).collect();
    if let Some(path) = &args.plot {
        let summary = if plot::is_html(path) {
            to_text(&columns, &paths, &spreads, Style::Markdown)
        } else {
            String::new()
        };
        super::html::write_plot(
            path,
            &plot_runs,
            &super::plot_options(args),
            &plot::ServerSeries::default(),
            &super::page(args, summary, &settings),
        )?;
    }
    let text = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&to_json(&columns, &paths, &spreads))
                .expect("reports serialize");
            s.push('\n');
            s
        }
        Format::Csv => to_csv(&columns, &paths, &spreads, !args.no_header),
        Format::Table => to_text(&columns, &paths, &spreads, Style::Plain),
        Format::Markdown => to_text(&columns, &paths, &spreads, Style::Markdown),
        Format::Xlsx => {
            return Err(crate::error::Error::usage(
                "--compare prints a table, JSON, CSV or Markdown, not xlsx",
            ));
        }
    };
    let mut out = Output::open(args.output.output.as_deref())?;
    out.write_all(text.as_bytes())?;
    out.finish()?;
    Ok(if negative {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// The difference of `s` to the first column's `base`, absolute and in %
/// of the base (none when the base is 0).
fn diff(base: Option<Spread>, s: Option<Spread>) -> (Option<f64>, Option<f64>) {
    match (base, s) {
        (Some(b), Some(s)) => {
            let d = s.mean - b.mean;
            (Some(d), (b.mean != 0.0).then(|| d / b.mean * 100.0))
        }
        _ => (None, None),
    }
}

fn to_json(columns: &[Column], paths: &[String], spreads: &[Vec<Option<Spread>>]) -> Value {
    let setups: Vec<Value> = columns
        .iter()
        .zip(spreads)
        .map(|(c, row)| {
            let mut figures = Map::new();
            for (i, p) in paths.iter().enumerate() {
                let (d, pct) = diff(spreads[0][i], row[i]);
                let v = match row[i] {
                    None => json!({"runs": 0, "mean": null, "std": null, "min": null, "max": null,
                                   "diff": null, "diff_pct": null}),
                    Some(s) => json!({"runs": s.runs, "mean": s.mean, "std": s.std, "min": s.min,
                                      "max": s.max, "diff": d, "diff_pct": pct}),
                };
                figures.insert(p.clone(), v);
            }
            let settings: Vec<Value> = c.settings.iter().map(|(_, r)| r.to_value()).collect();
            json!({
                "name": c.name,
                "files": c.files,
                "runs": c.reports.len(),
                "run_settings": settings,
                "figures": figures,
                "reports": c.reports,
            })
        })
        .collect();
    json!({
        "baseline": columns[0].name,
        "setups": setups,
    })
}

fn to_csv(
    columns: &[Column],
    paths: &[String],
    spreads: &[Vec<Option<Spread>>],
    header: bool,
) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    if header {
        w.write_record([
            "setup", "figure", "runs", "mean", "std", "min", "max", "diff", "diff_pct",
        ])
        .expect("writing CSV to memory");
    }
    let cell = |v: Option<f64>| v.map_or_else(String::new, |v| v.to_string());
    for (c, row) in columns.iter().zip(spreads) {
        for (i, p) in paths.iter().enumerate() {
            let s = row[i];
            let (d, pct) = diff(spreads[0][i], s);
            w.write_record([
                c.name.clone(),
                p.clone(),
                s.map_or(0, |s| s.runs).to_string(),
                cell(s.map(|s| s.mean)),
                cell(s.and_then(|s| s.std)),
                cell(s.map(|s| s.min)),
                cell(s.map(|s| s.max)),
                cell(d),
                cell(pct),
            ])
            .expect("writing CSV to memory");
        }
    }
    String::from_utf8(w.into_inner().expect("CSV in memory")).expect("CSV is UTF-8")
}

fn n(v: f64) -> String {
    report::number(Some(v), 2)
}

/// `12.5`, or `12.5 ± 0.71 (12 … 13)` over several runs, as hyperfine.
fn spread_cell(s: Option<Spread>) -> String {
    match s {
        None => "-".into(),
        Some(s) => match s.std {
            None => n(s.mean),
            Some(std) => format!("{} ± {} ({} … {})", n(s.mean), n(std), n(s.min), n(s.max)),
        },
    }
}

fn signed(v: f64, decimals: usize) -> String {
    let text = report::number(Some(v), decimals);
    if v > 0.0 { format!("+{text}") } else { text }
}

fn diff_cell(base: Option<Spread>, s: Option<Spread>) -> String {
    match diff(base, s) {
        (None, _) => "-".into(),
        (Some(d), None) => signed(d, 2),
        (Some(d), Some(pct)) => format!("{} ({}%)", signed(d, 2), signed(pct, 1)),
    }
}

fn to_text(
    columns: &[Column],
    paths: &[String],
    spreads: &[Vec<Option<Spread>>],
    style: Style,
) -> String {
    let mut out = String::new();
    let heading = format!(
        "trace-summarize --compare: {} setups; the difference is to the first ({})",
        columns.len(),
        columns[0].name
    );
    let mut notes = vec![heading];
    if columns.iter().any(|c| c.reports.len() > 1) {
        notes.push(
            "several runs of one setup: mean ± standard deviation (min … max) over the runs; the difference is between means"
                .into(),
        );
    }
    for c in columns {
        notes.push(format!(
            "{}: {} run{}",
            c.name,
            c.reports.len(),
            crate::text::plural(c.reports.len() as u64)
        ));
    }
    for n in &notes {
        match style {
            Style::Plain => out.push_str(&format!("{n}\n")),
            Style::Markdown => out.push_str(&format!("_{n}_\n\n")),
        }
    }
    for c in columns {
        out.push_str(&super::runs::text(&c.files, &c.settings, style));
    }
    out.push('\n');
    let mut header = vec!["figure".to_string(), columns[0].name.clone()];
    for c in &columns[1..] {
        header.push(c.name.clone());
        header.push(format!("{} - {}", c.name, columns[0].name));
    }
    let rows: Vec<Vec<String>> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row = vec![p.clone(), spread_cell(spreads[0][i])];
            for col in &spreads[1..] {
                row.push(spread_cell(col[i]));
                row.push(diff_cell(spreads[0][i], col[i]));
            }
            row
        })
        .collect();
    out.push_str(&report::table(style, &header, &rows, true));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_hyperfines() {
        // Mean 2, sample variance ((1 + 0 + 1) / 2) = 1.
        let s = Spread::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(
            s,
            Spread {
                runs: 3,
                mean: 2.0,
                std: Some(1.0),
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(Spread::of(&[5.0]).unwrap().std, None);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(spread_cell(Some(s)), "2 ± 1 (1 … 3)");
        let b = Spread::of(&[4.0]);
        assert_eq!(diff_cell(b, Some(s)), "-2 (-50%)");
        assert_eq!(diff_cell(Spread::of(&[0.0]), Some(s)), "+2");
    }
}
