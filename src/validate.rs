//! trace-validate: check canonical trace records, pass valid ones through
//! byte-identical, and describe the trace.

use std::collections::{HashMap, HashSet};

use clap::{Parser, ValueEnum};
use serde_json::json;

use crate::cli::{self, InputArgs, Outcome, OutputArgs};
use crate::error::{Error, Location, Result};
use crate::io::{self, Output};
use crate::record::{self, DEFAULT_BLOCK_SIZE, Record};
use crate::stats::IntDistribution;
use crate::text::plural;
use crate::timestamps::UnitEvidence;

const EXAMPLES: &str = "\
Exit status: 0 when every record is valid, 1 when any is invalid (or, with
--strict, anything was warned about or there was no record), 2 on trouble
(bad usage, unreadable input). (3 is trace-replay's early stop; never from
this tool.)

Examples:
  Check a trace and keep only its valid records:
    trace-validate trace.jsonl > clean.jsonl

  Describe a trace (rates, lengths, sessions, prefix reuse):
    trace-validate --report trace.jsonl

  Check in CI, failing on warnings too:
    trace-validate --check --strict trace.jsonl.gz

  Check what a converter wrote, and see the shape of the traffic:
    trace-convert --from litellm logs/ | trace-validate --report --cache-blocks 20000";

/// Check canonical trace records (JSONL) against the tracekit record
/// format; pass every valid record through unchanged.
///
/// Each valid record is written to standard output byte for byte as read;
/// each problem is reported on standard error as `FILE:LINE: error: …`
/// naming the field and quoting the value. Exit status 1 when any record is
/// invalid (or, with --strict, when anything was warned about or there is
/// no record at all).
///
/// Errors: bad JSON; a known field of the wrong type or range; not exactly
/// one input mode (`input_length`, `text_input`, `messages`, `payload`,
/// `prompt_token_ids`); `hash_ids` without `input_length`, with ids that are
/// not integers ≥ 0, or with a length other than
/// ceil(input_length / block size); `tools` without `messages`; `messages`
/// not an array of objects with a string `role`; `message_mode` other than
/// "history" or "delta"; an `after` id that no earlier record has;
/// `timestamp` on some records but not others (later turns of a session
/// and records with `after` may go without: AIPerf's multi-turn layout).
///
/// Warnings: timestamps that decrease; timestamps that look like seconds
/// rather than milliseconds (100 records or more at a mean rate over
/// 10,000 requests/s), or like epoch seconds (100 records or more, the
/// first from 1e9 to 1e11, under 1,000 apart on average); never when every
/// gap is a whole number of seconds (milliseconds from a source that counts
/// seconds). These two weigh only the records sent at their timestamp: not
/// those with `after`, nor later turns of a session with a `delay` (sent
/// after what they follow). Each says what it saw. A note when timestamps
/// are absolute epoch milliseconds.
#[derive(Parser, Debug)]
#[command(name = "trace-validate", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Tokens per `hash_ids` block, for traces that are not canonical
    /// (Bailian's raw traces use 16).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE,
          value_parser = cli::positive_u64)]
    pub block_size: u64,

    /// Treat warnings as errors: exit 1 if anything was warned about, and
    /// leave out records that drew a warning. An input with no records at
    /// all is an error too.
    #[arg(long)]
    pub strict: bool,

    /// Print at most N errors and warnings; the rest are counted. 0 prints
    /// none.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_errors: u64,

    /// Write nothing to standard output: only the exit status and the
    /// messages on standard error.
    #[arg(long)]
    pub check: bool,

    /// Print a report of the valid records on standard output instead of
    /// the records: counts, duration, mean and peak request rate, input and
    /// output length statistics, sessions, prefix reuse.
    #[arg(long)]
    pub report: bool,

    /// Format of the report (implies --report).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub report_format: Option<ReportFormat>,

    /// Also report the hit rate of an LRU prefix cache holding N blocks
    /// (implies --report).
    /// N is at most 2^32.
    #[arg(long, value_name = "N", value_parser = cache_blocks)]
    pub cache_blocks: Option<u64>,
}

/// How the report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Aligned lines for people.
    Text,
    /// One JSON object with stable keys, for jq.
    Json,
}

/// Prints diagnostics up to a limit and counts the rest.
struct Diagnostics {
    max: u64,
    printed: u64,
    errors: u64,
    warnings: u64,
    /// Errors counted without a line of their own (a count says them).
    summarized: u64,
}

impl Diagnostics {
    /// An error that a summary line reports rather than one of its own.
    fn summarized(&mut self) {
        self.errors += 1;
        self.summarized += 1;
    }

    fn error(&mut self, err: &Error) {
        self.errors += 1;
        if self.printed < self.max {
            self.printed += 1;
            cli::report_error(err);
        }
    }

    fn warning(&mut self, loc: Option<&Location>, msg: &str) {
        self.warnings += 1;
        if self.printed < self.max {
            self.printed += 1;
            match loc {
                Some(loc) => cli::warn_at(loc, msg),
                None => cli::warn(msg),
            }
        }
    }

    fn finish(&self) {
        let hidden = self.errors + self.warnings - self.printed - self.summarized;
        if hidden > 0 {
            cli::note(format!(
                "{hidden} more error{} and warning{} not shown (--max-errors {})",
                plural(hidden),
                plural(hidden),
                self.max
            ));
        }
    }
}

/// Run trace-validate.
pub fn run(args: &Args) -> Result<Outcome> {
    let inputs = io::input_specs(&args.input.files)?;
    let report_format = args
        .report_format
        .or(if args.report || args.cache_blocks.is_some() {
            Some(ReportFormat::Text)
        } else {
            None
        });
    let write_records = !args.check && report_format.is_none();
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut diag = Diagnostics {
        max: args.max_errors,
        printed: 0,
        errors: 0,
        warnings: 0,
        summarized: 0,
    };
    let mut stats = TraceStats::new(args.block_size, args.cache_blocks, report_format.is_some());
    let mut state = OrderState::default();
    let mut field_errors = Vec::new();
    let mut invalid = 0u64;
    let mut total = 0u64;

    // Results given for a trace: the hint once per input, then a count.
    let mut results_in: Vec<(std::sync::Arc<str>, u64)> = Vec::new();
    io::for_each_line(&inputs, |loc, line| {
        total += 1;
        let rec = match Record::parse(line) {
            Ok(rec) => rec,
            Err(e) => {
                invalid += 1;
                diag.error(&e.at(loc));
                return Ok(());
            }
        };
        if let Some(e) = rec.results_not_trace() {
            invalid += 1;
            match results_in.iter_mut().find(|(s, _)| *s == loc.source) {
                Some((_, n)) => {
                    *n += 1;
                    diag.summarized();
                }
                None => {
                    results_in.push((loc.source.clone(), 1));
                    diag.error(&e.at(loc));
                }
            }
            return Ok(());
        }
        field_errors.clear();
        let checked = record::check(&rec, args.block_size, &mut field_errors);
        let later_turn = checked
            .session_id
            .as_deref()
            .is_some_and(|s| state.turns.has_seen(s));
        let own_time = crate::timestamps::sent_at_timestamp(
            checked.after.as_ref().is_some_and(|a| !a.is_empty()),
            later_turn,
            rec.contains("delay"),
        );
        let follows = state
            .turns
            .follows(checked.session_id.as_deref(), rec.contains("after"));
        // A later turn takes its time from the turn it follows; only the
        // records that start something need the trace's timestamps.
        if !follows || rec.contains("timestamp") {
            if let Some(e) = state.presence.check(loc.line, rec.contains("timestamp")) {
                field_errors.push(e);
            }
        }
        record::check_place(
            &rec,
            checked.after.as_deref(),
            follows,
            |id| state.ids.contains(id),
            &mut field_errors,
        );
        if let Some(id) = &checked.id {
            state.ids.insert(id.clone());
        }
        if !field_errors.is_empty() {
            invalid += 1;
            for e in field_errors.drain(..) {
                diag.error(&e.at(loc));
            }
            return Ok(());
        }
        let mut warned = false;
        if let Some(msg) = state.order_warning(checked.timestamp) {
            diag.warning(Some(loc), &msg);
            warned = true;
        }
        if warned && args.strict {
            invalid += 1;
            return Ok(());
        }
        stats.add(&checked, own_time);
        if write_records {
            out.write_line(line.as_bytes())?;
        }
        Ok(())
    })?;

    // Under --strict, the error below says it.
    if total == 0 && !args.strict {
        cli::warn_empty_input();
    }
    for (source, n) in &results_in {
        if *n > 1 {
            cli::note(format!(
                "{source}: {n} result records in all, each an error (not a trace)"
            ));
        }
    }
    for msg in stats.time_warnings() {
        diag.warning(None, &msg);
    }
    if let Some(note) = stats.unit.note() {
        cli::note(note);
    }
    if let Some(note) = stats.epoch_note() {
        cli::note(note);
    }
    if total == 0 && args.strict {
        // In a pipeline, no records at all usually means an earlier stage
        // failed: a strict check must not pass it.
        diag.error(&Error::msg(
            "no records: the input holds no trace record (did an earlier stage of the pipeline fail?)",
        ));
    }
    diag.finish();
    if let Some(format) = report_format {
        let valid = total - invalid;
        let text = match format {
            ReportFormat::Text => stats.text_report(total, valid, diag.errors, diag.warnings),
            ReportFormat::Json => {
                let mut s = serde_json::to_string_pretty(&stats.json_report(total, valid, &diag))
                    .expect("report serializes");
                s.push('\n');
                s
            }
        };
        out.write_all(text.as_bytes())?;
    }
    out.finish()?;
    if invalid > 0 || (args.strict && (diag.warnings > 0 || total == 0)) {
        Ok(Outcome::Negative)
    } else {
        Ok(Outcome::Success)
    }
}

/// Cross-record rules: all-or-none timestamps, non-decreasing order.
#[derive(Default)]
struct OrderState {
    presence: record::Presence,
    last_timestamp: Option<f64>,
    turns: record::Turns,
    /// Every `id` seen, for `after` (memory grows with the records).
    ids: std::collections::HashSet<String>,
}

impl OrderState {
    fn order_warning(&mut self, timestamp: Option<f64>) -> Option<String> {
        let t = timestamp?;
        let warning = match self.last_timestamp {
            Some(prev) if t < prev => Some(format!(
                "field `timestamp`: {} is earlier than the previous record's {}: records should be in arrival order",
                crate::text::format_ms(t),
                crate::text::format_ms(prev)
            )),
            _ => None,
        };
        self.last_timestamp = Some(self.last_timestamp.map_or(t, |p| p.max(t)));
        warning
    }
}

/// The largest --cache-blocks: 2^32 blocks (2 Ti tokens at 512 a block) is
/// more than any server's prefix cache holds.
const MAX_CACHE_BLOCKS: u64 = 1 << 32;

fn cache_blocks(text: &str) -> std::result::Result<u64, String> {
    match cli::positive_u64(text)? {
        n if n <= MAX_CACHE_BLOCKS => Ok(n),
        _ => Err(format!(
            "`{text}` is over the limit of {MAX_CACHE_BLOCKS} blocks"
        )),
    }
}

/// What the report says about the valid records.
pub struct TraceStats {
    /// Without a report, only the time figures the warnings need are kept.
    full: bool,
    block_size: u64,
    records: u64,
    /// The timestamps, for the report.
    time: UnitEvidence,
    /// The timestamps of the records sent at them (not turns sent after
    /// what they follow): what they say about their unit.
    unit: UnitEvidence,
    per_second: HashMap<i64, u64>,
    input: IntDistribution,
    output: IntDistribution,
    sessions: HashMap<String, u64>,
    /// Each `id`'s depth in its dependency graph (1 for a record that
    /// waits for none) and how many records wait for it.
    depth: HashMap<String, u64>,
    waiting_on: HashMap<String, u64>,
    with_after: u64,
    blocks: u64,
    seen_blocks: HashSet<u64>,
    reused_blocks: u64,
    lru: Option<(u64, lru::LruCache<u64, ()>)>,
    lru_hits: u64,
}

impl TraceStats {
    fn new(block_size: u64, cache_blocks: Option<u64>, full: bool) -> TraceStats {
        TraceStats {
            full,
            block_size,
            records: 0,
            time: UnitEvidence::default(),
            unit: UnitEvidence::default(),
            per_second: HashMap::new(),
            input: IntDistribution::default(),
            output: IntDistribution::default(),
            sessions: HashMap::new(),
            depth: HashMap::new(),
            waiting_on: HashMap::new(),
            with_after: 0,
            blocks: 0,
            seen_blocks: HashSet::new(),
            reused_blocks: 0,
            // Unbounded, trimmed by hand: the cache grows with the blocks
            // seen, not with the size asked for.
            lru: cache_blocks.map(|n| (n, lru::LruCache::unbounded())),
            lru_hits: 0,
        }
    }

    fn add(&mut self, c: &record::Checked, own_time: bool) {
        self.records += 1;
        self.time.add(c.timestamp);
        if own_time {
            self.unit.add(c.timestamp);
        }
        if let (true, Some(t), Some(first)) = (self.full, c.timestamp, self.time.first()) {
            let second = ((t - first) / 1000.0).floor() as i64;
            *self.per_second.entry(second).or_insert(0) += 1;
        }
        if !self.full {
            return;
        }
        if let Some(n) = c.input_length {
            self.input.add(n);
        }
        if let Some(n) = c.output_length {
            self.output.add(n);
        }
        if let Some(s) = &c.session_id {
            *self.sessions.entry(s.clone()).or_insert(0) += 1;
        }
        let after = c.after.as_deref().unwrap_or_default();
        self.with_after += u64::from(!after.is_empty());
        let mut depth = 1;
        for a in after {
            depth = depth.max(self.depth.get(a).map_or(1, |d| d + 1));
            *self.waiting_on.entry(a.clone()).or_insert(0) += 1;
        }
        if let Some(id) = &c.id {
            self.depth.insert(id.clone(), depth);
        }
        if let Some(ids) = &c.hash_ids {
            self.blocks += ids.len() as u64;
            for &id in ids {
                if !self.seen_blocks.insert(id) {
                    self.reused_blocks += 1;
                }
            }
            if let Some((cap, cache)) = &mut self.lru {
                // A prefix cache serves the leading blocks it holds, up to the
                // first miss; then the whole prompt is cached, most recent last.
                let hits = ids.iter().take_while(|id| cache.get(id).is_some()).count();
                self.lru_hits += hits as u64;
                for &id in ids {
                    cache.put(id, ());
                    if cache.len() as u64 > *cap {
                        cache.pop_lru();
                    }
                }
            }
        }
    }

    fn duration_ms(&self) -> Option<f64> {
        self.time.duration_ms()
    }

    fn mean_rate(&self) -> Option<f64> {
        self.time.mean_rate()
    }

    /// The most records in one second of the trace, and never below the
    /// mean: a trace shorter than a second (or a burst cut in two by the
    /// window's edge) has a mean above any one window's count, and its
    /// busiest second is then at least as busy as its mean.
    fn peak_rate(&self) -> Option<u64> {
        let busiest = self.per_second.values().copied().max()?;
        let mean = self.mean_rate().map_or(0, |r| (r - 1e-9).ceil() as u64);
        Some(busiest.max(mean))
    }

    fn time_warnings(&self) -> Vec<String> {
        self.unit.warnings()
    }

    fn epoch_note(&self) -> Option<String> {
        let (min, _) = self.time.range()?;
        (min >= 1.0e11).then(|| {
            format!(
                "timestamps are absolute epoch milliseconds (first {}); replay schedules by offset from the first record, and trace-slice --rebase makes them relative",
                crate::text::format_ms(min)
            )
        })
    }

    fn reuse_ratio(&self) -> Option<f64> {
        (self.blocks > 0).then(|| self.reused_blocks as f64 / self.blocks as f64)
    }

    fn lru_hit_rate(&self) -> Option<(u64, Option<f64>)> {
        self.lru.as_ref().map(|(n, _)| {
            (
                *n,
                (self.blocks > 0).then(|| self.lru_hits as f64 / self.blocks as f64),
            )
        })
    }

    fn session_turns(&self) -> IntDistribution {
        let mut d = IntDistribution::default();
        for &turns in self.sessions.values() {
            d.add(turns);
        }
        d
    }

    fn json_report(&self, total: u64, valid: u64, diag: &Diagnostics) -> serde_json::Value {
        let turns = self.session_turns();
        let mut report = json!({
            "records": { "total": total, "valid": valid, "invalid": total - valid },
            "errors": diag.errors,
            "warnings": diag.warnings,
            "time": {
                "first_ms": self.time.range().map(|r| r.0),
                "last_ms": self.time.range().map(|r| r.1),
                "duration_ms": self.duration_ms(),
                "mean_rate_per_s": self.mean_rate(),
                "peak_rate_per_s": self.peak_rate(),
            },
            "input_length": length_json(&self.input),
            "output_length": length_json(&self.output),
            "sessions": {
                "count": self.sessions.len(),
                "records": turns.total() as u64,
                "turns_min": turns.min(),
                "turns_mean": turns.mean(),
                "turns_max": turns.max(),
            },

            "prefix": {
                "block_size": self.block_size,
                "blocks": self.blocks,
                "unique_blocks": self.seen_blocks.len(),
                "reuse_ratio": self.reuse_ratio(),
                "lru": self.lru_hit_rate().map(|(n, rate)| json!({
                    "cache_blocks": n, "hit_rate": rate
                })),
            },
        });
        // Only for traces with dependencies: other reports keep their shape.
        if self.with_after > 0 {
            report["dependencies"] = json!({
                "records_with_after": self.with_after,
                "depth_max": self.depth.values().max(),
                "fan_out_max": self.waiting_on.values().max(),
            });
        }
        report
    }

    fn text_report(&self, total: u64, valid: u64, errors: u64, warnings: u64) -> String {
        let mut lines: Vec<(String, String)> = Vec::new();
        let mut row = |k: &str, v: String| lines.push((k.to_string(), v));
        row(
            "records",
            format!("{total} ({valid} valid, {} invalid)", total - valid),
        );
        row(
            "problems",
            format!(
                "{errors} error{}, {warnings} warning{}",
                plural(errors),
                plural(warnings)
            ),
        );
        match self.time.range() {
            Some((min, max)) => {
                let d = max - min;
                row(
                    "time",
                    format!(
                        "{} to {} ms ({})",
                        crate::text::format_ms(min),
                        crate::text::format_ms(max),
                        crate::duration::human(d)
                    ),
                );
                row(
                    "request rate",
                    format!(
                        "{} mean, {}/s peak (1 s window)",
                        self.mean_rate()
                            .map_or("-".into(), |r| format!("{}/s", fixed(r, 3))),
                        self.peak_rate().unwrap_or(0)
                    ),
                );
            }
            None => row("time", "no timestamps".into()),
        }
        row("input_length", length_text(&self.input));
        row("output_length", length_text(&self.output));
        if self.sessions.is_empty() {
            row("sessions", "none".into());
        } else {
            let turns = self.session_turns();
            row(
                "sessions",
                format!(
                    "{} ({} record{}), turns per session min {} mean {} max {}",
                    self.sessions.len(),
                    turns.total(),
                    plural(turns.total() as u64),
                    turns.min().unwrap_or(0),
                    fixed(turns.mean().unwrap_or(0.0), 2),
                    turns.max().unwrap_or(0)
                ),
            );
        }
        if self.with_after > 0 {
            row(
                "dependencies",
                format!(
                    "{} record{} wait{} for others (`after`); deepest chain {}, widest fan-out {}",
                    self.with_after,
                    plural(self.with_after),
                    if self.with_after == 1 { "s" } else { "" },
                    self.depth.values().max().copied().unwrap_or(0),
                    self.waiting_on.values().max().copied().unwrap_or(0)
                ),
            );
        }
        if self.blocks == 0 {
            row("prefix blocks", "none".into());
        } else {
            row(
                "prefix blocks",
                format!(
                    "{} blocks of {} tokens, {} unique",
                    self.blocks,
                    self.block_size,
                    self.seen_blocks.len()
                ),
            );
            row(
                "prefix reuse",
                format!(
                    "{} (share of blocks seen earlier: an infinite prefix cache's hit rate)",
                    fixed(self.reuse_ratio().unwrap_or(0.0), 4)
                ),
            );
        }
        if let Some((n, rate)) = self.lru_hit_rate() {
            row(
                "lru cache",
                format!(
                    "{} hit rate with {n} blocks",
                    rate.map_or("-".into(), |r| fixed(r, 4))
                ),
            );
        }
        let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        lines
            .iter()
            .map(|(k, v)| format!("{k:<width$}  {v}\n"))
            .collect()
    }
}

fn length_json(d: &IntDistribution) -> serde_json::Value {
    let p = d.percentiles(&[50.0, 90.0, 99.0]);
    json!({
        "count": d.count(),
        "min": d.min(),
        "mean": d.mean(),
        "p50": p[0],
        "p90": p[1],
        "p99": p[2],
        "max": d.max(),
        "total": d.total() as u64,
    })
}

fn length_text(d: &IntDistribution) -> String {
    if d.count() == 0 {
        return "none".into();
    }
    let p = d.percentiles(&[50.0, 90.0, 99.0]);
    format!(
        "min {} mean {} p50 {} p90 {} p99 {} max {} total {} ({} record{})",
        d.min().unwrap_or(0),
        fixed(d.mean().unwrap_or(0.0), 1),
        p[0].unwrap_or(0),
        p[1].unwrap_or(0),
        p[2].unwrap_or(0),
        d.max().unwrap_or(0),
        d.total(),
        d.count(),
        plural(d.count())
    )
}

/// `v` with `decimals` places, trailing zeros trimmed.
fn fixed(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}
