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
    inputs(files)
        .iter()
        .filter_map(|f| RunInfo::read_beside(f).map(|r| (f.clone(), r)))
        .collect()
}

/// The inputs named, `-` (standard input) when none is.
fn inputs(files: &[String]) -> Vec<String> {
    if files.is_empty() {
        vec!["-".to_string()]
    } else {
        files.to_vec()
    }
}

/// The report's lines on the runs of `files`: each run's settings (see
/// `settings_text`), and for each input with none beside it, that they
/// were not recorded, why and how to keep them: a report that shows
/// nothing would look like a run that had no settings. Results through a
/// pipe have none (trace-replay cannot know where a pipe ends, as with
/// `| tee FILE`); `-o FILE` or `> FILE` keeps them. Each line names its
/// input when there are several.
pub fn text(files: &[String], runs: &[(String, RunInfo)], style: Style) -> String {
    let files = inputs(files);
    let named = files.len() > 1 || runs.len() > 1;
    let mut out = settings_text(runs, named, style);
    for f in files.iter().filter(|f| RunInfo::read_beside(f).is_none()) {
        let name = if named {
            format!("settings ({f})")
        } else {
            "settings".to_string()
        };
        let why = match crate::run_info::expected_sidecar(f) {
            None => "the results came through a pipe".to_string(),
            Some(sidecar) => format!(
                "no {sidecar} beside the results: they went through a pipe, as to tee, or another tool wrote them"
            ),
        };
        let line = format!(
            "{name}: not recorded ({why}; trace-replay -o FILE keeps them in FILE{})",
            crate::run_info::SUFFIX
        );
        match style {
            Style::Plain => out.push_str(&format!("{line}\n")),
            Style::Markdown => out.push_str(&format!("_{line}_\n\n")),
        }
    }
    out
}

/// One run's lines each: the command, then where it went and when.
fn settings_text(runs: &[(String, RunInfo)], named: bool, style: Style) -> String {
    let mut out = String::new();
    for (file, r) in runs {
        let name = if named {
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
pub fn after_heading(
    report: String,
    files: &[String],
    runs: &[(String, RunInfo)],
    style: Style,
) -> String {
    let lines = text(files, runs, style);
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
