//! `trace-summarize --requests`: one row per result, with the per-request
//! figures the summary is made of, for spreadsheets and scripts.

use serde_json::{Map, Value, json};

use crate::cli::Skipper;
use crate::error::{FieldError, Result};
use crate::io::{Lines, Output};
use crate::metrics::Convention;
use crate::result::{ResultRecord, ResultView, round_us};

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

/// Write one row per result of `lines`.
pub fn export(
    lines: &mut Lines,
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
        let parsed = ResultView::read(line, &mut itl).and_then(|view| {
            let record: ResultRecord = serde_json::from_str(line)
                .map_err(|e| FieldError::record(format!("is not a result record: {e}")))?;
            Ok((view, record))
        });
        let (view, r) = match parsed {
            Ok(x) => x,
            Err(e) => {
                skipper.skip(e.at(&loc))?;
                continue;
            }
        };
        let d = derive(&view, &itl, convention);
        match &mut csv_out {
            Some(w) => {
                let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
                let int = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
                let text = |v: &Option<String>| v.clone().unwrap_or_default();
                w.write_record([
                    r.index.to_string(),
                    text(&r.id),
                    text(&r.session_id),
                    text(&r.model),
                    text(&r.shard),
                    r.warmup.to_string(),
                    r.status.as_str().to_string(),
                    int(r.http_status.map(u64::from)),
                    text(&r.error),
                    r.scheduled_ms.to_string(),
                    r.sent_ms.to_string(),
                    opt(d.lag_ms),
                    opt(d.ttft_ms),
                    opt(r.first_chunk_ms),
                    opt(d.tpot_ms),
                    opt(r.e2e_ms),
                    d.itl_count.to_string(),
                    opt(d.itl_mean_ms),
                    opt(d.itl_max_ms),
                    int(r.input_length),
                    int(r.prompt_tokens),
                    int(r.output_length),
                    int(r.completion_tokens),
                    int(r.cached_tokens),
                    text(&r.finish_reason),
                ])
                .map_err(csv_error)?;
                flush_csv(w, out)?;
            }
            None => {
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
