//! `trace-summarize --plot FILE.html`: the run as one self-contained web
//! page: the summary tables (the Markdown report, drawn as HTML), the
//! plots drawn by a small inline script from one JSON blob (values on
//! hover, zoom on the time axis), and the run's command line and inputs.
//!
//! Nothing is fetched: the page's Content-Security-Policy forbids every
//! source but its own inline style and script. Every text from the inputs
//! (file names, model names) is escaped: HTML text with [`escape`], the
//! JSON blob with [`script_json`], and the script writes it with
//! `textContent` and `setAttribute` only.

use std::path::Path;

use serde_json::{Value, json};

use super::plot::{self, Figure};
use crate::error::{Error, Result};

/// What the page says besides the plots.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// The command line, quoted as a shell would need it.
    pub command: String,
    /// The input files, as given.
    pub inputs: Vec<String>,
    /// Settings worth reading beside the figures: (name, value).
    pub settings: Vec<(String, String)>,
    /// The summary in the Markdown the tool prints with `--format
    /// markdown`, drawn as HTML tables.
    pub summary: String,
}

/// This process's command line, each argument quoted where a shell would
/// need it, credentials redacted.
pub fn command_line() -> String {
    crate::run_info::command_line(std::env::args())
}

/// Text made safe for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON that cannot end the `<script>` element holding it: `<`, `>` and
/// `&` appear only inside JSON strings, where `\u003c` means the same.
pub fn script_json(value: &Value) -> String {
    serde_json::to_string(value)
        .expect("figures serialize")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// A coordinate with 6 significant digits: the page's points need no more,
/// and f32 times would otherwise print as 0.10000000149011612.
fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 6 - v.abs().log10().ceil() as i32;
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

fn points(points: &[(f64, f64)]) -> Value {
    points
        .iter()
        .map(|&(x, y)| json!([round(x), round(y)]))
        .collect()
}

fn named(series: &[(String, Vec<(f64, f64)>)]) -> Value {
    series
        .iter()
        .map(|(name, p)| json!({"name": name, "points": points(p)}))
        .collect()
}

/// The figure as the page's script reads it.
pub fn figure_json(fig: &Figure) -> Value {
    let runs: Vec<Value> = fig
        .runs
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "ttft": points(&r.ttft),
                "e2e": points(&r.e2e),
                "errors": points(&r.errors),
                "flight": points(&r.flight),
                "tokens": points(&r.tokens),
                "ttft_by_percentile": points(&r.ttft_by_percentile),
                "e2e_by_percentile": points(&r.e2e_by_percentile),
            })
        })
        .collect();
    json!({
        "t_end": fig.t_end,
        "clip": fig.clip.map(|(p, end)| json!({"p": p, "end_s": end})),
        "lat": [fig.lat.0, fig.lat.1],
        "x_max": fig.x_max,
        "percentile_ticks": super::plot::percentile_ticks(fig.x_max),
        "slo": fig.slo_lines.iter().map(|(label, ms)| json!({"label": label, "ms": ms})).collect::<Vec<_>>(),
        "runs": runs,
        "server": {
            "requests": named(&fig.server.requests),
            "shares": named(&fig.server.shares),
        },
    })
}

/// The cells of a Markdown table row whose columns are `widths` wide (as
/// `report::table` pads them): cut by position, so that a `|` inside a
/// cell (a file name) stays in its cell.
fn cells(line: &str, widths: &[usize]) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut pos = 2;
    widths
        .iter()
        .map(|w| {
            let from = pos.min(chars.len());
            let to = (pos + w).min(chars.len());
            pos += w + 3;
            chars[from..to]
                .iter()
                .collect::<String>()
                .trim()
                .to_string()
        })
        .collect()
}

/// A Markdown table's rule row (`| --- | --: |`): each column's width and
/// whether it holds numbers (right-aligned).
fn rule(line: &str) -> Option<Vec<(usize, bool)>> {
    let inner = line.strip_prefix("| ")?.strip_suffix(" |")?;
    let columns: Vec<(usize, bool)> = inner
        .split(" | ")
        .map(|c| (c.chars().count(), c.ends_with(':')))
        .collect();
    let is_rule = inner.chars().all(|c| "-: |".contains(c)) && !columns.is_empty();
    is_rule.then_some(columns)
}

/// The report's Markdown (headings, notes in `_…_`, tables) as HTML.
pub fn markdown_html(md: &str) -> String {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(columns) = lines.get(i + 1).and_then(|l| rule(l)) {
            let widths: Vec<usize> = columns.iter().map(|c| c.0).collect();
            let row = |line: &str, tag: &str| {
                let mut s = String::from("<tr>");
                for (cell, (_, number)) in cells(line, &widths).iter().zip(&columns) {
                    let class = if *number { " class=\"n\"" } else { "" };
                    s.push_str(&format!("<{tag}{class}>{}</{tag}>", escape(cell)));
                }
                s.push_str("</tr>\n");
                s
            };
            out.push_str("<table>\n<thead>");
            out.push_str(&row(line, "th"));
            out.push_str("</thead>\n<tbody>\n");
            i += 2;
            while let Some(l) = lines.get(i).filter(|l| l.starts_with("| ")) {
                out.push_str(&row(l, "td"));
                i += 1;
            }
            out.push_str("</tbody>\n</table>\n");
            continue;
        }
        // Headings: `### run` (the report's), `**server**` (the server's).
        let bold = line.strip_prefix("**").and_then(|l| l.strip_suffix("**"));
        if let Some(h) = line.strip_prefix("### ").or(bold) {
            out.push_str(&format!("<h3>{}</h3>\n", escape(h)));
        } else if let Some(note) = line
            .strip_prefix('_')
            .and_then(|l| l.strip_suffix('_'))
            .filter(|n| !n.is_empty())
        {
            out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(note)));
        } else if !line.trim().is_empty() {
            out.push_str(&format!("<p>{}</p>\n", escape(line)));
        }
        i += 1;
    }
    out
}

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The whole page.
pub fn render(fig: &Figure, page: &Page) -> String {
    let names: Vec<&str> = fig.runs.iter().map(|r| r.name.as_str()).collect();
    let title = escape(&names.join(", "));
    let mut run = String::new();
    run.push_str(&format!(
        "<dt>command</dt><dd><code>{}</code></dd>\n",
        escape(&page.command)
    ));
    let inputs = if page.inputs.is_empty() {
        "standard input".to_string()
    } else {
        page.inputs
            .iter()
            .map(|f| format!("<code>{}</code>", escape(f)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    run.push_str(&format!("<dt>inputs</dt><dd>{inputs}</dd>\n"));
    for (name, value) in &page.settings {
        run.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>\n",
            escape(name),
            escape(value)
        ));
    }
    format!(
        "<!DOCTYPE html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">
<title>tracekit: {title}</title>
<style>
{STYLE}</style>
</head>
<body>
<h1>trace-summarize: {title}</h1>
<ul id=\"errors\" hidden></ul>
<section id=\"summary\">
<h2>Summary</h2>
{summary}</section>
<section id=\"plots\">
<h2>Plots</h2>
<p class=\"help\">Hover a plot to read its values. On the time plots, drag across a range or turn the wheel to zoom the time axis. <button id=\"reset\" type=\"button\">Reset zoom</button> <span id=\"range\"></span></p>
<div id=\"panels\"></div>
</section>
<section id=\"run\">
<h2>The run</h2>
<dl>
{run}</dl>
</section>
<div id=\"tip\" hidden></div>
<script type=\"application/json\" id=\"data\">{data}</script>
<script>
{SCRIPT}</script>
</body>
</html>
",
        summary = markdown_html(&page.summary),
        data = script_json(&figure_json(fig)),
    )
}

/// Draw `runs` to `path`: SVG, or with a `.html` name the web page of
/// `page`.
pub fn write_plot(
    path: &Path,
    runs: &[plot::Series],
    opts: &plot::PlotOptions,
    server: &plot::ServerSeries,
    page: &Page,
) -> Result<()> {
    let text = if plot::is_html(path) {
        render(&plot::figure(runs, opts, server, plot::PAGE_COLUMNS), page)
    } else {
        plot::svg(runs, opts, server)?
    };
    std::fs::write(path, text).map_err(|e| Error::io(path.display().to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_from_the_inputs_ends_the_script_or_the_markup() {
        let v = json!({"name": "a</script><script>alert(1)</script>&"});
        let s = script_json(&v);
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
        assert_eq!(
            escape("<b a=\"x\">&'"),
            "&lt;b a=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(crate::run_info::shell_quote("run.ndjson"), "run.ndjson");
        assert_eq!(crate::run_info::shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn markdown_tables_become_html_tables_cut_by_column() {
        assert_eq!(
            markdown_html("**server (3 scrapes)**\n"),
            "<h3>server (3 scrapes)</h3>\n"
        );
        let md = "### run: 2 requests\n\n_convention tracekit_\n\n\
                  | figure | a|b.ndjson |\n\
                  | ------ | ---------: |\n\
                  | ttft   |        700 |\n";
        assert_eq!(
            markdown_html(md),
            "<h3>run: 2 requests</h3>\n<p class=\"note\">convention tracekit</p>\n\
             <table>\n<thead><tr><th>figure</th><th class=\"n\">a|b.ndjson</th></tr>\n</thead>\n\
             <tbody>\n<tr><td>ttft</td><td class=\"n\">700</td></tr>\n</tbody>\n</table>\n"
        );
    }

    #[test]
    fn coordinates_keep_six_digits() {
        assert_eq!(round(0.1f32 as f64), 0.1);
        assert_eq!(round(1234.56789), 1234.57);
        assert_eq!(round(0.0), 0.0);
    }
}
