//! `trace-summarize --requests`: one row per result, with the per-request
//! figures the summary is made of, for spreadsheets and scripts.

use serde_json::{Map, Value, json};

use crate::cli::Skipper;
use crate::error::{FieldError, Result};
use crate::io::Output;
use crate::metrics::Convention;
use crate::peers::Results;
use crate::result::{ResultView, round_us};
use crate::xlsx::Cell;

/// Per-request export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestsFormat {
    /// CSV with a header row.
    Csv,
    /// The result lines with the derived figures added (NDJSON).
    Json,
}

/// The CSV columns, in order.
pub const COLUMNS: &[&str] = &[
    "index",
    "id",
    "session_id",
    "model",
    "shard",
    "warmup",
    "status",
    "http_status",
    "error",
    "scheduled_ms",
    "sent_ms",
    "lag_ms",
    "ttft_ms",
    "first_chunk_ms",
    "tpot_ms",
    "e2e_ms",
    "itl_count",
    "itl_mean_ms",
    "itl_max_ms",
    "input_length",
    "prompt_tokens",
    "output_length",
    "completion_tokens",
    "cached_tokens",
    "finish_reason",
];

/// What `--requests` adds to each result.
struct Derived {
    lag_ms: Option<f64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    itl_count: usize,
    itl_mean_ms: Option<f64>,
    itl_max_ms: Option<f64>,
}

fn derive(view: &ResultView, itl: &[f64], convention: Convention) -> Derived {
    Derived {
        lag_ms: view.scheduled_ms.map(|s| round_us(view.sent_ms - s)),
        ttft_ms: convention.ttft(view),
        tpot_ms: convention.tpot(view, itl).map(round_us),
        itl_count: itl.len(),
        itl_mean_ms: (!itl.is_empty())
            .then(|| round_us(itl.iter().sum::<f64>() / itl.len() as f64)),
        itl_max_ms: itl.iter().copied().reduce(f64::max),
    }
}

/// The labels of a result that the per-request row shows and the summary
/// does not read. A peer's result (crate::peers) may have no schedule.
#[derive(serde::Deserialize)]
struct Labels {
    index: u64,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    shard: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// The row of [`COLUMNS`] for one result line, whose gaps are `itl`.
pub fn row(
    line: &str,
    view: &ResultView,
    itl: &[f64],
    convention: Convention,
) -> std::result::Result<Vec<Cell>, FieldError> {
    let r: Labels = serde_json::from_str(line)
        .map_err(|e| FieldError::record(format!("is not a result record: {e}")))?;
    let d = derive(view, itl, convention);
    Ok(vec![
        Cell::Number(r.index as f64),
        Cell::text(r.id.as_deref()),
        Cell::text(r.session_id.as_deref()),
        Cell::text(r.model.as_deref()),
        Cell::text(r.shard.as_deref()),
        Cell::Text(view.warmup.to_string()),
        Cell::Text(view.status.as_str().to_string()),
        Cell::count(view.http_status.map(u64::from)),
        Cell::text(r.error.as_deref()),
        Cell::num(view.scheduled_ms),
        Cell::Number(view.sent_ms),
        Cell::num(d.lag_ms),
        Cell::num(d.ttft_ms),
        Cell::num(view.first_chunk_ms),
        Cell::num(d.tpot_ms),
        Cell::num(view.e2e_ms),
        Cell::Number(d.itl_count as f64),
        Cell::num(d.itl_mean_ms),
        Cell::num(d.itl_max_ms),
        Cell::count(view.input_length),
        Cell::count(view.prompt_tokens),
        Cell::count(view.output_length),
        Cell::count(view.completion_tokens),
        Cell::count(view.cached_tokens),
        Cell::text(r.finish_reason.as_deref()),
    ])
}

/// Write one row per result of `lines`.
pub fn export(
    lines: &mut Results,
    out: &mut Output,
    format: RequestsFormat,
    convention: Convention,
    skipper: &mut Skipper,
) -> Result<()> {
    let mut csv_out = match format {
        RequestsFormat::Csv => Some(csv::Writer::from_writer(Vec::new())),
        RequestsFormat::Json => None,
    };
    if let Some(w) = &mut csv_out {
        w.write_record(COLUMNS).map_err(csv_error)?;
        flush_csv(w, out)?;
    }
    let mut itl = Vec::new();
    while let Some((loc, line)) = lines.next_line()? {
        let view = match ResultView::read(line, &mut itl) {
            Ok(v) => v,
            Err(e) => {
                skipper.skip(e.at(&loc))?;
                continue;
            }
        };
        // The row is made in either form: a line it refuses is skipped.
        let cells = match row(line, &view, &itl, convention) {
            Ok(c) => c,
            Err(e) => {
                skipper.skip(e.at(&loc))?;
                continue;
            }
        };
        match &mut csv_out {
            Some(w) => {
                w.write_record(cells.iter().map(Cell::to_csv))
                    .map_err(csv_error)?;
                flush_csv(w, out)?;
            }
            None => {
                let d = derive(&view, &itl, convention);
                let mut obj: Map<String, Value> = serde_json::from_str(line).map_err(|e| {
                    FieldError::record(format!("is not a JSON object: {e}")).at(&loc)
                })?;
                obj.insert("lag_ms".into(), json!(d.lag_ms));
                obj.insert("tpot_ms".into(), json!(d.tpot_ms));
                obj.insert("itl_count".into(), json!(d.itl_count));
                obj.insert("itl_mean_ms".into(), json!(d.itl_mean_ms));
                obj.insert("itl_max_ms".into(), json!(d.itl_max_ms));
                out.write_line(Value::Object(obj).to_string().as_bytes())?;
            }
        }
    }
    Ok(())
}

/// Move the rows written so far to the output (a closed pipe then ends
/// the export at once).
fn flush_csv(w: &mut csv::Writer<Vec<u8>>, out: &mut Output) -> Result<()> {
    let full = std::mem::replace(w, csv::Writer::from_writer(Vec::new()));
    let bytes = full
        .into_inner()
        .map_err(|e| crate::error::Error::msg(format!("cannot write CSV: {}", e.error())))?;
    out.write_all(&bytes)
}

fn csv_error(e: csv::Error) -> crate::error::Error {
    crate::error::Error::msg(format!("cannot write CSV: {e}"))
}
