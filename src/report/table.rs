//! The forms reports are printed in, and the one table writer every
//! tool's tables are drawn with.

use serde_json::Value;

/// A number for people: up to `decimals` places, trailing zeros trimmed;
/// `-` for none (a JSON null: not a finite number).
pub fn number(x: Option<f64>, decimals: usize) -> String {
    match x.filter(|x| x.is_finite()) {
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

/// [`number`] of a JSON value.
pub fn num(v: &Value, decimals: usize) -> String {
    number(v.as_f64(), decimals)
}

/// The forms the reports of trace-summarize and trace-sweep are printed
/// in (`--format`). Each tool offers those it writes ([`Format::parser`]);
/// what a form holds for that tool its flag's own help says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON object.
    Json,
    /// A header and rows.
    Csv,
    /// GitHub Markdown tables.
    Markdown,
    /// A spreadsheet, to the -o file.
    Xlsx,
}

impl Format {
    /// Every form, in the order `--help` lists them.
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Json,
        Format::Csv,
        Format::Markdown,
        Format::Xlsx,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Markdown => "markdown",
            Format::Xlsx => "xlsx",
        }
    }

    /// What `--help` says of it, beside its name.
    fn help(self) -> &'static str {
        match self {
            Format::Table => "Aligned columns for people",
            Format::Json => "One JSON object",
            Format::Csv => "A header and rows",
            Format::Markdown => "GitHub Markdown tables",
            Format::Xlsx => "A spreadsheet, to the -o file",
        }
    }

    /// How a table of this form is drawn: Markdown's, or aligned columns
    /// (the forms that are not text have no tables).
    pub fn style(self) -> Style {
        match self {
            Format::Markdown => Style::Markdown,
            _ => Style::Plain,
        }
    }

    /// The `--format` parser of a tool that writes `forms`.
    pub fn parser(
        forms: &'static [Format],
    ) -> impl clap::builder::TypedValueParser<Value = Format> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
        PossibleValuesParser::new(
            forms
                .iter()
                .map(|f| PossibleValue::new(f.name()).help(f.help())),
        )
        .map(move |name| {
            *forms
                .iter()
                .find(|f| f.name() == name)
                .expect("the parser accepts only these names")
        })
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
    if numbers {
        columns(style, header, rows, 1)
    } else if style == Style::Plain {
        columns_under(None, style, header, rows, usize::MAX)
    } else {
        columns(style, header, rows, usize::MAX)
    }
}

/// Draw rows under a header: the columns before `left` are text, aligned
/// left; the others numbers, aligned right. Every table of every tool is
/// drawn here.
pub fn columns(style: Style, header: &[String], rows: &[Vec<String>], left: usize) -> String {
    columns_under(Some(header), style, header, rows, left)
}

/// [`columns`], the header line drawn only when `shown` is given (the
/// widths count the header all the same).
fn columns_under(
    shown: Option<&[String]>,
    style: Style,
    header: &[String],
    rows: &[Vec<String>],
    left: usize,
) -> String {
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
                if i < left {
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
    let mut out = shown.map(line).unwrap_or_default();
    if style == Style::Markdown {
        let rule: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i < left {
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
