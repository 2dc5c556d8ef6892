//! The settings of the runs summarized (see [`crate::run_info`]), as each
//! report shows them: lines of the text and Markdown reports, the JSON
//! report's `run` (and so the CSV's and the spreadsheet's `run.*`), the
//! web page's settings.

use serde_json::Value;

use crate::report::Style;
use crate::run_info::RunInfo;

/// The settings kept beside each input (standard input when none is
/// named), with the input's name, where there are any.
pub fn of_inputs(files: &[String]) -> Vec<(String, RunInfo)> {
    let stdin = ["-".to_string()];
    let files = if files.is_empty() { &stdin[..] } else { files };
    files
        .iter()
        .filter_map(|f| RunInfo::read_beside(f).map(|r| (f.clone(), r)))
        .collect()
}

/// The report's lines on the runs: one per run, the command, then where
/// it went and when.
pub fn text(runs: &[(String, RunInfo)], style: Style) -> String {
    let mut out = String::new();
    for (file, r) in runs {
        let name = if runs.len() > 1 {
            format!("run ({file})")
        } else {
            "run".to_string()
        };
        let target = format!(
            "{} {}; {}endpoint {}{}; started {}",
            r.tool,
            r.version,
            r.url
                .as_deref()
                .map(|u| format!("{u}, "))
                .unwrap_or_default(),
            r.endpoint,
            r.model
                .as_deref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default(),
            r.start_time
        );
        match style {
            Style::Plain => out.push_str(&format!("{name}: {}\n  {target}\n", r.command)),
            Style::Markdown => out.push_str(&format!("_{name}: `{}` ({target})_\n\n", r.command)),
        }
    }
    out
}

/// `report` with the first run's settings as its `run`.
pub fn insert_json(report: &mut Value, runs: &[(String, RunInfo)]) {
    if let (Value::Object(m), Some((_, r))) = (report, runs.first()) {
        m.insert("run".into(), r.to_value());
    }
}

/// The web page's rows: each run's settings, named by its input when
/// there are several.
pub fn page_rows(runs: &[(String, RunInfo)]) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for (file, r) in runs {
        for (name, value) in r.rows() {
            let name = if runs.len() > 1 {
                format!("run {name} ({file})")
            } else {
                format!("run {name}")
            };
            rows.push((name, value));
        }
    }
    rows
}

/// `text` placed after the report's first paragraph (its heading line in
/// a table, its first note in Markdown).
pub fn after_heading(report: String, runs: &[(String, RunInfo)], style: Style) -> String {
    let lines = text(runs, style);
    if lines.is_empty() {
        return report;
    }
    let cut = match style {
        Style::Plain => report.find('\n').map(|i| i + 1),
        Style::Markdown => report.find("\n\n").map(|i| i + 2),
    };
    match cut {
        Some(i) => format!("{}{lines}{}", &report[..i], &report[i..]),
        None => format!("{report}{lines}"),
    }
}
