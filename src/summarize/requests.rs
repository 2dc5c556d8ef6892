//! `trace-summarize --requests`: one row per result, with the per-request
//! figures the summary is made of, for spreadsheets and scripts.

use serde_json::{Map, Value, json};

use super::kept;
use crate::cli::Skipper;
use crate::error::{FieldError, Result};
use crate::io::Output;
use crate::metrics::Convention;
use crate::peers::Results;
use crate::result::{Key, ResultRecord, ResultView, Role, round_us};
use crate::xlsx::Cell;

/// Per-request export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestsFormat {
    /// CSV with a header row.
    Csv,
    /// The result lines with the derived figures added (NDJSON).
    Json,
    /// One OTLP JSON document of GenAI client spans, one per result.
    Otlp,
}

/// A column of `--requests`: a field of the result, or a figure made of
/// its fields.
#[derive(Clone, Copy)]
enum Column {
    Field(Key),
    Lag,
    /// The convention's TTFT (`--convention`), in the field's place.
    Ttft,
    Tpot,
    ItlCount,
    ItlMean,
    ItlMax,
}

const COLUMN_LIST: [Column; 25] = {
    use Column::*;
    [
        Field(Key::index),
        Field(Key::id),
        Field(Key::session_id),
        Field(Key::model),
        Field(Key::shard),
        Field(Key::warmup),
        Field(Key::status),
        Field(Key::http_status),
        Field(Key::error),
        Field(Key::scheduled_ms),
        Field(Key::sent_ms),
        Lag,
        Ttft,
        Field(Key::first_chunk_ms),
        Tpot,
        Field(Key::e2e_ms),
        ItlCount,
        ItlMean,
        ItlMax,
        Field(Key::input_length),
        Field(Key::prompt_tokens),
        Field(Key::output_length),
        Field(Key::completion_tokens),
        Field(Key::cached_tokens),
        Field(Key::finish_reason),
    ]
};

/// The CSV columns, in order.
pub const COLUMNS: &[&str] = &names(COLUMN_LIST);

const fn names<const N: usize>(columns: [Column; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = match columns[i] {
            Column::Field(k) => k.field().name,
            Column::Lag => "lag_ms",
            Column::Ttft => "ttft_ms",
            Column::Tpot => "tpot_ms",
            Column::ItlCount => "itl_count",
            Column::ItlMean => "itl_mean_ms",
            Column::ItlMax => "itl_max_ms",
        };
        i += 1;
    }
    out
}

/// What `--requests` adds to each result.
struct Derived {
    lag_ms: Option<f64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    itl_count: usize,
    itl_mean_ms: Option<f64>,
    itl_max_ms: Option<f64>,
}

impl Derived {
    /// The cell of a column that is no field.
    fn cell(&self, c: Column) -> Cell {
        match c {
            Column::Field(_) => Cell::Empty,
            Column::Lag => Cell::num(self.lag_ms),
            Column::Ttft => Cell::num(self.ttft_ms),
            Column::Tpot => Cell::num(self.tpot_ms),
            Column::ItlCount => Cell::Number(self.itl_count as f64),
            Column::ItlMean => Cell::num(self.itl_mean_ms),
            Column::ItlMax => Cell::num(self.itl_max_ms),
        }
    }
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

/// The labels the row shows, as serde reads them: for a line whose labels
/// the one-pass reader left (read by serde, or a label given twice), so
/// that it is refused, or not, in the same words.
#[derive(serde::Deserialize)]
struct Shown {
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

impl Shown {
    fn cell(&self, key: Key) -> Option<Cell> {
        let text = |s: &Option<String>| Some(Cell::text(s.as_deref()));
        match key {
            Key::index => Some(Cell::Number(self.index as f64)),
            Key::id => text(&self.id),
            Key::session_id => text(&self.session_id),
            Key::model => text(&self.model),
            Key::shard => text(&self.shard),
            Key::error => text(&self.error),
            Key::finish_reason => text(&self.finish_reason),
            _ => None,
        }
    }
}

/// The row of [`COLUMNS`] for one result line, whose gaps are `itl`: from
/// the reader's view alone, the line is not read again (but when its labels
/// are unusual).
pub fn row(
    line: &str,
    view: &ResultView,
    itl: &[f64],
    convention: Convention,
) -> std::result::Result<Vec<Cell>, FieldError> {
    let d = derive(view, itl, convention);
    let fast = || -> Option<Vec<Cell>> {
        COLUMN_LIST
            .iter()
            .map(|&c| match c {
                Column::Field(k) => view.cell(k),
                _ => Some(d.cell(c)),
            })
            .collect()
    };
    if let Some(cells) = view.labels.read.then(fast).flatten() {
        return Ok(cells);
    }
    let shown: Shown = serde_json::from_str(line)
        .map_err(|e| FieldError::record(format!("is not a result record: {e}")))?;
    Ok(COLUMN_LIST
        .iter()
        .map(|&c| match c {
            Column::Field(k) if k.field().role == Role::Label => {
                shown.cell(k).unwrap_or(Cell::Empty)
            }
            Column::Field(k) => view.cell(k).unwrap_or(Cell::Empty),
            _ => d.cell(c),
        })
        .collect())
}

/// Write one row per result of `lines`.
pub fn export(
    lines: &mut Results,
    out: &mut Output,
    format: RequestsFormat,
    convention: Convention,
    skipper: &mut Skipper,
) -> Result<()> {
    if format == RequestsFormat::Otlp {
        return otlp::export(lines, out, convention, skipper);
    }
    let mut csv_out = match format {
        RequestsFormat::Csv => Some(csv::Writer::from_writer(Vec::new())),
        _ => None,
    };
    if let Some(w) = &mut csv_out {
        w.write_record(COLUMNS).map_err(csv_error)?;
        flush_csv(w, out)?;
    }
    let mut itl = Vec::new();
    while let Some((loc, line)) = lines.next_line()? {
        let Some(view) = kept(ResultView::read(line, &mut itl), &loc, skipper)? else {
            continue;
        };
        // The row is made in either form: a line it refuses is skipped.
        let Some(cells) = kept(row(line, &view, &itl, convention), &loc, skipper)? else {
            continue;
        };
        match &mut csv_out {
            Some(w) => {
                w.write_record(cells.iter().map(Cell::to_csv))
                    .map_err(csv_error)?;
                flush_csv(w, out)?;
            }
            None => {
                let d = derive(&view, &itl, convention);
                let text = json_row(line, &view, &itl, &d).map_err(|e| {
                    FieldError::record(format!("is not a JSON object: {e}")).at(&loc)
                })?;
                out.write_line(text.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// What `--requests json` adds to a line, in order.
fn added(d: &Derived) -> [(&'static str, Value); 5] {
    [
        ("lag_ms", json!(d.lag_ms)),
        ("tpot_ms", json!(d.tpot_ms)),
        ("itl_count", json!(d.itl_count)),
        ("itl_mean_ms", json!(d.itl_mean_ms)),
        ("itl_max_ms", json!(d.itl_max_ms)),
    ]
}

/// The result line with the figures `--requests json` adds, as serde_json
/// writes the line read into a map. A line as trace-replay writes it (the
/// text its record gives back) is that text already: the figures follow it,
/// and the line is not read again.
fn json_row(
    line: &str,
    view: &ResultView,
    itl: &[f64],
    d: &Derived,
) -> std::result::Result<String, serde_json::Error> {
    if let Some(mut text) = ResultRecord::from_view(view, itl)
        .map(|r| r.to_json_line())
        .filter(|text| text == line)
    {
        text.pop();
        for (key, value) in added(d) {
            text.push_str(",\"");
            text.push_str(key);
            text.push_str("\":");
            text.push_str(&value.to_string());
        }
        text.push('}');
        return Ok(text);
    }
    json_row_by_map(line, d)
}

/// [`json_row`] for any line: read into a map, the figures set in it.
fn json_row_by_map(line: &str, d: &Derived) -> std::result::Result<String, serde_json::Error> {
    let mut obj: Map<String, Value> = serde_json::from_str(line)?;
    for (key, value) in added(d) {
        obj.insert(key.into(), value);
    }
    Ok(Value::Object(obj).to_string())
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

/// `--requests otlp`: the results as OpenTelemetry spans (OTLP JSON, one
/// `{"resourceSpans": …}` document on one line, as the Collector's file
/// exporter writes it), with the GenAI semantic conventions' attribute
/// names, so that a replay can be looked at beside production traffic and
/// `trace-convert --from otel` gives the replayed trace back.
mod otlp {
    use std::collections::HashMap;
    use std::sync::Arc;

    use serde_json::{Value, json};

    use crate::cli::Skipper;
    use crate::error::{FieldError, Result};
    use crate::io::Output;
    use crate::metrics::Convention;
    use crate::result::{ResultRecord, ResultView, Status};

    /// OTLP's SpanKind CLIENT and StatusCode ERROR.
    const KIND_CLIENT: u64 = 3;
    const STATUS_ERROR: u64 = 2;

    /// One run: the wall-clock time its `sent_ms` count from.
    #[derive(Clone, Copy)]
    struct Run {
        /// Epoch microseconds at `sent_ms` 0.
        origin_us: i64,
    }

    /// Streams the document: one resource per input (a results file is a
    /// run), its spans written as they are read, so memory does not grow.
    pub fn export(
        lines: &mut crate::peers::Results,
        out: &mut Output,
        convention: Convention,
        skipper: &mut Skipper,
    ) -> Result<()> {
        out.write_all(b"{\"resourceSpans\":[")?;
        let mut source: Option<Arc<str>> = None;
        // Per shard of the input: the shards of a multi-machine replay have
        // clocks of their own.
        let mut runs: HashMap<Option<String>, Run> = HashMap::new();
        let mut first_span = true;
        let mut itl = Vec::new();
        let mut buf = Vec::with_capacity(2048);
        while let Some((loc, line)) = lines.next_line()? {
            let parsed = ResultView::read(line, &mut itl).and_then(|view| {
                // The line is read once: serde only where the view cannot
                // tell (and to say why a line is refused).
                let record = match ResultRecord::from_view(&view, &itl) {
                    Some(r) => r,
                    None => serde_json::from_str(line)
                        .map_err(|e| FieldError::record(format!("is not a result record: {e}")))?,
                };
                let sent_us = us(record.sent_ms);
                let start_us = crate::time::parse_datetime(&record.start_time)
                    .filter(|d| d.has_zone)
                    .map(|d| d.epoch_ns.div_euclid(1000))
                    .ok_or_else(|| {
                        FieldError::new(
                            "start_time",
                            format!(
                                "{} is not an RFC 3339 time",
                                crate::error::quote_value(&json!(record.start_time).to_string())
                            ),
                        )
                    })?;
                Ok((convention.ttft(&view), record, start_us - sent_us))
            });
            let (ttft_ms, r, origin_us) = match parsed {
                Ok(x) => x,
                Err(e) => {
                    skipper.skip(e.at(&loc))?;
                    continue;
                }
            };
            if source.as_ref() != Some(&loc.source) {
                if source.is_some() {
                    out.write_all(b"]}]},")?;
                }
                runs.clear();
                source = Some(loc.source.clone());
                first_span = true;
                let start = run_start(origin_us);
                let resource = json!({"resource": {"attributes": [
                    attr("service.name", "stringValue", json!("trace-replay")),
                    attr("tracekit.run.start", "stringValue", json!(start)),
                ]}});
                let mut head = resource.to_string();
                head.pop(); // reopened for scopeSpans
                head.push_str(",\"scopeSpans\":[{\"scope\":{\"name\":\"tracekit\",\"version\":");
                head.push_str(&json!(env!("CARGO_PKG_VERSION")).to_string());
                head.push_str("},\"spans\":[");
                out.write_all(head.as_bytes())?;
            }
            let run = *runs.entry(r.shard.clone()).or_insert(Run { origin_us });
            buf.clear();
            if !first_span {
                buf.push(b',');
            }
            first_span = false;
            serde_json::to_writer(&mut buf, &span(&r, run, ttft_ms))
                .map_err(|e| crate::error::Error::msg(format!("cannot write OTLP: {e}")))?;
            out.write_all(&buf)?;
        }
        if source.is_some() {
            out.write_all(b"]}]}")?;
        }
        out.write_all(b"]}\n")
    }

    /// Milliseconds (results carry microseconds) as whole microseconds.
    fn us(ms: f64) -> i64 {
        (ms * 1000.0).round() as i64
    }

    fn run_start(origin_us: i64) -> String {
        let t = std::time::UNIX_EPOCH
            + std::time::Duration::from_micros(u64::try_from(origin_us).unwrap_or(0));
        crate::time::rfc3339(t)
    }

    fn attr(key: &str, kind: &str, value: Value) -> Value {
        json!({"key": key, "value": {kind: value}})
    }

    /// A 64-bit OTLP integer: a decimal string in protojson.
    fn int(key: &str, n: u64) -> Value {
        attr(key, "intValue", json!(n.to_string()))
    }

    fn text(key: &str, s: &str) -> Value {
        attr(key, "stringValue", json!(s))
    }

    /// A span id (8 bytes) for the record with this id, else this index:
    /// a link to the record a request waited for is then found from its id
    /// alone, without keeping every id read.
    fn span_id(run: Run, r: &ResultRecord, id: Option<&str>) -> String {
        let key = match id {
            Some(id) => format!("{}/{}/{}/id:{id}", run.origin_us, shard(r), r.warmup),
            None => format!(
                "{}/{}/{}/index:{}",
                run.origin_us,
                shard(r),
                r.warmup,
                r.index
            ),
        };
        // All-zero ids are invalid in OTLP.
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(key.as_bytes()).max(1))
    }

    /// A trace id (16 bytes): one per session, so that its turns stay one
    /// trace; a request without a session is a trace of its own.
    fn trace_id(run: Run, r: &ResultRecord, span: &str) -> String {
        let key = match &r.session_id {
            Some(s) => format!("{}/{}/session:{s}", run.origin_us, shard(r)),
            None => format!("{}/{}/span:{span}", run.origin_us, shard(r)),
        };
        format!(
            "{:032x}",
            xxhash_rust::xxh3::xxh3_128(key.as_bytes()).max(1)
        )
    }

    fn shard(r: &ResultRecord) -> &str {
        r.shard.as_deref().unwrap_or("")
    }

    /// One result as a span. Start: the run's origin plus `sent_ms`, on the
    /// replay's own steady clock (the first result's `start_time` exactly,
    /// the others within the wall clock's drift of theirs), so that a turn
    /// never appears to start before the one it waited for ended; end:
    /// start plus `e2e_ms` (the start again when there is none).
    fn span(r: &ResultRecord, run: Run, ttft_ms: Option<f64>) -> Value {
        let span = span_id(run, r, r.id.as_deref());
        let trace = trace_id(run, r, &span);
        let start_ns = (run.origin_us + us(r.sent_ms)) * 1000;
        let end_ns = start_ns + r.measure.e2e_ms.map_or(0, us) * 1000;
        let mut attrs = vec![text("gen_ai.operation.name", "chat")];
        if let Some(m) = &r.model {
            attrs.push(text("gen_ai.request.model", m));
        }
        if let Some(n) = r.output_length {
            attrs.push(int("gen_ai.request.max_tokens", n));
        }
        if let Some(s) = &r.session_id {
            attrs.push(text("gen_ai.conversation.id", s));
        }
        if let Some(n) = r.measure.prompt_tokens {
            attrs.push(int("gen_ai.usage.input_tokens", n));
        }
        if let Some(n) = r.measure.completion_tokens {
            attrs.push(int("gen_ai.usage.output_tokens", n));
        }
        if let Some(n) = r.measure.cached_tokens {
            attrs.push(int("gen_ai.usage.cache_read.input_tokens", n));
        }
        if let Some(f) = &r.measure.finish_reason {
            attrs.push(attr(
                "gen_ai.response.finish_reasons",
                "arrayValue",
                json!({"values": [{"stringValue": f}]}),
            ));
        }
        if let Some(ms) = ttft_ms {
            attrs.push(attr(
                "gen_ai.response.time_to_first_chunk",
                "doubleValue",
                json!(ms / 1000.0),
            ));
        }
        if let Some(code) = r.measure.http_status {
            attrs.push(int("http.response.status_code", u64::from(code)));
        }
        let failed = r.measure.status != Status::Ok;
        if failed {
            // Semantic conventions: the HTTP status where there was one.
            let kind = match r.measure.http_status {
                Some(code) if code >= 400 => code.to_string(),
                _ => r.measure.status.as_str().to_string(),
            };
            attrs.push(text("error.type", &kind));
        }
        attrs.push(int("tracekit.index", r.index));
        if let Some(id) = &r.id {
            attrs.push(text("tracekit.record.id", id));
        }
        if let Some(s) = &r.shard {
            attrs.push(text("tracekit.shard", s));
        }
        if r.warmup {
            attrs.push(attr("tracekit.warmup", "boolValue", json!(true)));
        }
        // What it waited for; the records of one session share its trace.
        let links: Vec<Value> = r
            .after
            .iter()
            .map(|a| json!({"traceId": trace, "spanId": span_id(run, r, Some(a))}))
            .collect();
        let name = match &r.model {
            Some(m) => format!("chat {m}"),
            None => "chat".to_string(),
        };
        let mut obj = json!({
            "traceId": trace,
            "spanId": span,
            "name": name,
            "kind": KIND_CLIENT,
            "startTimeUnixNano": start_ns.to_string(),
            "endTimeUnixNano": end_ns.to_string(),
            "attributes": attrs,
        });
        if !links.is_empty() {
            obj["links"] = Value::Array(links);
        }
        obj["status"] = if failed {
            let message = r
                .measure
                .error
                .clone()
                .unwrap_or_else(|| r.measure.status.as_str().to_string());
            json!({"code": STATUS_ERROR, "message": message})
        } else {
            json!({})
        };
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as trace-replay writes it gets the figures without being
    /// read again, in the very text the map gives; other lines go by the
    /// map.
    #[test]
    fn json_rows_are_the_map_form() {
        let lines = [
            r#"{"index":0,"id":"a\"b","scheduled_ms":10.0,"sent_ms":10.5,"start_time":"2026-11-23T10:00:00Z","ttft_ms":100.0,"first_chunk_ms":null,"e2e_ms":400.25,"itl_ms":[100.0,200.5],"input_length":5,"output_length":null,"prompt_tokens":6,"completion_tokens":4,"cached_tokens":null,"finish_reason":"stop","status":"ok","http_status":200}"#,
            r#"{"index":1,"session_id":"s","turn":2,"after":["a"],"scheduled_ms":12.5,"sent_ms":0.0,"start_time":"t","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":null,"output_length":null,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":null,"error":"x","warmup":true,"shard":"1/2"}"#,
            // Not as trace-replay writes them: white space, a number
            // written otherwise, a key of its own, a figure already there.
            r#"{"index":2, "sent_ms":5,"status":"ok"}"#,
            r#"{"index":3,"scheduled_ms":1.50,"sent_ms":2.0,"start_time":"t","itl_ms":[],"status":"ok"}"#,
            r#"{"index":4,"scheduled_ms":1.0,"sent_ms":2.0,"start_time":"t","itl_ms":[1.0],"status":"ok","lag_ms":9}"#,
        ];
        for (i, line) in lines.into_iter().enumerate() {
            let mut itl = Vec::new();
            let view = ResultView::read(line, &mut itl).unwrap();
            let written = ResultRecord::from_view(&view, &itl).map(|r| r.to_json_line());
            assert_eq!(written.as_deref() == Some(line), i < 2, "{line}");
            let d = derive(&view, &itl, Convention::Tracekit);
            assert_eq!(
                json_row(line, &view, &itl, &d).unwrap(),
                json_row_by_map(line, &d).unwrap(),
                "{line}"
            );
        }
    }
}
