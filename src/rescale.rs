//! trace-rescale: change a trace's time (speed, target rate, duration) and
//! its token lengths, keeping `hash_ids` consistent with the new lengths.

use clap::Parser;

use crate::cli::{self, InputArgs, Outcome, OutputArgs, SkipArgs, Skipper};
use crate::error::{Error, FieldError, Result};
use crate::io::{self, Lines, Output, Rereadable};
use crate::record::{self, DEFAULT_BLOCK_SIZE, Edit, Record, blocks_for};
use crate::text::plural;

const EXAMPLES: &str = "\
Exit status: 0 on success, 2 on trouble (bad usage, unreadable input, a
malformed record without --skip-invalid, a zero span for --rate/--duration/--loop).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  Replay the traffic twice as fast:
    trace-rescale --speed 2 trace.jsonl | trace-replay --url http://127.0.0.1:8000

  The same arrival pattern at 20 requests/s on average:
    trace-rescale --rate 20 trace.jsonl > rate20.jsonl

  Squeeze an hour into five minutes, and cap prompts at 8k tokens:
    trace-rescale --duration 5m --max-input 8192 trace.jsonl

  Prompts twice as long (prefix sharing kept), answers of 64 to 256 tokens:
    trace-rescale --input-scale 2 --output-scale 0.5 --min-output 64 --max-output 256 trace.jsonl

  Coding-agent sessions ten times as fast, idle stretches and think time capped:
    trace-convert --from kv-cache-tester traces/ | trace-rescale --speed 10 --max-gap 30s --max-delay 5s

  A 57-record log as a ten-minute test:
    trace-rescale --loop 10m small.jsonl | trace-replay --url http://127.0.0.1:8000";

/// Change the time and token lengths of a trace.
///
/// Time: --speed divides every offset from the first record's timestamp (and
/// every session `delay`) by F; --rate and --duration choose that factor so
/// that the mean rate, (records − 1) / span, becomes R, or the span becomes
/// D. A record without a timestamp (a later turn of a session, or any record
/// of a trace without timestamps) keeps none; its `delay` is scaled. Tokens: --input-scale and --output-scale multiply lengths (rounded to
/// the nearest integer), then --max-input, --min-output and --max-output
/// clamp them; `output_length` stays ≥ 1.
///
/// `hash_ids` follow `input_length`: a shorter prompt keeps its leading
/// blocks; a longer one gets new blocks whose ids never occur in the input,
/// chosen so that records that shared their whole prompt still share it.
///
/// --loop D repeats the trace (after those changes) until it spans D; see
/// the flag. Memory does not grow with the trace, except with --loop.
/// --rate, --duration and
/// --input-scale above 1 need a first pass over the whole trace (the span,
/// the largest block id): files are read twice, and standard input is first
/// copied to a temporary file.
///
/// A changed `input_length` drops `observed.prompt_tokens` and
/// `observed.ttft_ms`, a changed `output_length` drops
/// `observed.completion_tokens`, either drops `observed.e2e_ms`: production
/// never saw the rescaled request. Time options leave `observed` alone (its
/// latencies were the production server's).
///
/// Records whose prompt is fixed (`text_input`, `messages`, `payload`,
/// `prompt_token_ids`) keep their lengths; one warning gives their count.
#[derive(Parser, Debug)]
#[command(name = "trace-rescale", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Play the trace F times as fast (0.5 = half speed).
    #[arg(long, value_name = "F", value_parser = positive, group = "time")]
    pub speed: Option<f64>,

    /// Set the mean request rate to R per second, keeping relative spacing.
    #[arg(long, value_name = "R", value_parser = positive, group = "time")]
    pub rate: Option<f64>,

    /// Make the trace span exactly D (from the first to the last record).
    #[arg(long, value_name = "D", value_parser = positive_duration, group = "time")]
    pub duration: Option<f64>,

    /// Cap the idle time between consecutive arrivals at D: a gap longer
    /// than D (after --speed, --rate or --duration) becomes D and every
    /// later record moves earlier by the difference, so a sparse trace
    /// replays without dead air (AIPerf's --max-idle-gap-cap-seconds).
    #[arg(long, value_name = "D", value_parser = positive_duration)]
    pub max_gap: Option<f64>,

    /// Cap every `delay` (think and tool time after what a record waits
    /// for) at D, after the time change (AIPerf's
    /// --inter-turn-delay-cap-seconds, GuideLLM's max_wait).
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_ms)]
    pub max_delay: Option<f64>,

    /// Multiply every `input_length` by F.
    #[arg(long, value_name = "F", value_parser = positive)]
    pub input_scale: Option<f64>,

    /// Multiply every `output_length` by F.
    #[arg(long, value_name = "F", value_parser = positive)]
    pub output_scale: Option<f64>,

    /// Cap `input_length` at N tokens.
    #[arg(long, value_name = "N")]
    pub max_input: Option<u64>,

    /// Cap `output_length` at N tokens.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub max_output: Option<u64>,

    /// Raise `output_length` to at least N tokens.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub min_output: Option<u64>,

    /// Tokens per `hash_ids` block, for traces that are not canonical.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE,
          value_parser = cli::positive_u64)]
    pub block_size: u64,

    /// Repeat the trace until it spans D: each copy starts one span plus
    /// one mean gap after the previous; records due at D or later are left
    /// out. Copies after the first get `#2`, `#3`… on `id`, `after` and
    /// `session_id`; `hash_ids` are kept. Holds the trace in memory.
    #[arg(long = "loop", value_name = "D", value_parser = positive_duration)]
    pub loop_ms: Option<f64>,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

use crate::cli::positive_number as positive;
use crate::duration::parse_positive_ms as positive_duration;

impl Args {
    fn touches_tokens(&self) -> bool {
        self.input_scale.is_some()
            || self.output_scale.is_some()
            || self.max_input.is_some()
            || self.max_output.is_some()
            || self.min_output.is_some()
    }

    fn may_grow_prompts(&self) -> bool {
        self.input_scale.is_some_and(|f| f > 1.0)
    }
}

/// What the first pass learns about the whole trace.
#[derive(Debug, Default)]
struct Scan {
    records: u64,
    first_ts: Option<f64>,
    min_ts: f64,
    max_ts: f64,
    max_id: Option<u64>,
    max_added_blocks: u64,
}

/// The transformation, fixed before the first record is written.
#[derive(Debug)]
struct Plan {
    /// Time's scaling (its origin is `None` until seen in a single pass).
    speed: record::Speedup,
    /// Ids of added blocks start above every id of the input.
    id_base: u64,
    /// Most blocks added to one prompt: the stride between prompts' new ids.
    id_stride: u64,
    /// Sessions seen, so that later turns may go without a timestamp.
    turns: record::Turns,
    /// --max-gap's state.
    gaps: GapCap,
}

/// --max-gap: arrivals walked in the order given; each gap from the
/// latest arrival so far that is longer than the cap shortens to it, and
/// what it cut moves every later record earlier.
#[derive(Debug, Default)]
struct GapCap {
    latest: Option<f64>,
    cut: f64,
}

impl GapCap {
    /// The new time of an arrival at `t`.
    fn apply(&mut self, t: f64, cap: f64) -> f64 {
        if let Some(latest) = self.latest {
            if t - latest > cap {
                self.cut += t - latest - cap;
            }
        }
        self.latest = Some(self.latest.map_or(t, |l| l.max(t)));
        t - self.cut
    }
}

/// Run trace-rescale.
pub fn run(args: &Args) -> Result<Outcome> {
    if let (Some(lo), Some(hi)) = (args.min_output, args.max_output) {
        if lo > hi {
            return Err(Error::usage(format!(
                "--min-output {lo} is above --max-output {hi}"
            )));
        }
    }
    let inputs = io::input_specs(&args.input.files)?;
    let two_pass = args.rate.is_some() || args.duration.is_some() || args.may_grow_prompts();
    let rereadable = if two_pass {
        Some(Rereadable::new(&inputs)?)
    } else {
        None
    };
    let mut plan = Plan {
        speed: record::Speedup::new(args.speed.unwrap_or(1.0)),
        id_base: 0,
        id_stride: 0,
        turns: record::Turns::default(),
        gaps: GapCap::default(),
    };
    if let Some(r) = &rereadable {
        let scan = scan(&mut r.lines(), args)?;
        plan.speed.origin = scan.first_ts;
        plan.id_base = scan.max_id.map_or(0, |m| m + 1);
        plan.id_stride = scan.max_added_blocks;
        if let Some(speed) = target_speed(args, &scan)? {
            plan.speed.speed = speed;
        }
        check_id_range(&plan)?;
    }
    let mut lines = match &rereadable {
        Some(r) => r.lines(),
        None => Lines::new(&inputs),
    };
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut skipper = Skipper::new(&args.skip_invalid);
    let mut fixed_prompts = 0u64;
    let read = match args.loop_ms {
        Some(until) => {
            let (read, records) = read_all(&mut lines, &mut skipper, |rec, _| {
                fixed_prompts += u64::from(transform(rec, args, &mut plan)?);
                Ok(Edit::Changed)
            })?;
            tile(&records, until, &mut out)?;
            read
        }
        None => crate::filter::rewrite_each(&mut lines, &mut out, &mut skipper, |rec, _| {
            fixed_prompts += u64::from(transform(rec, args, &mut plan)?);
            Ok(Edit::Changed)
        })?,
    };
    if fixed_prompts > 0 && args.touches_tokens() {
        cli::warn(format!(
            "{fixed_prompts} record{} with a fixed prompt (`text_input`, `messages`, `payload` or `prompt_token_ids`) passed through with {} lengths unchanged",
            plural(fixed_prompts),
            if fixed_prompts == 1 { "its" } else { "their" }
        ));
    }
    skipper.finish();
    if read == 0 {
        cli::warn_empty_input();
    }
    out.finish()?;
    Ok(Outcome::Success)
}

/// First pass: span, record count, largest block id, most blocks added.
fn scan(lines: &mut Lines, args: &Args) -> Result<Scan> {
    let mut s = Scan {
        min_ts: f64::INFINITY,
        max_ts: f64::NEG_INFINITY,
        ..Scan::default()
    };
    // Bad records are left for the second pass to report, in order.
    while let Some((_, line)) = lines.next_line()? {
        let Ok(rec) = Record::parse(line) else {
            continue;
        };
        s.records += 1;
        if let Ok(Some(t)) = rec.timestamp() {
            s.first_ts.get_or_insert(t);
            s.min_ts = s.min_ts.min(t);
            s.max_ts = s.max_ts.max(t);
        }
        if let (Ok(Some(ids)), Ok(Some(len))) = (rec.hash_ids(), rec.input_length()) {
            if let Some(&m) = ids.iter().max() {
                s.max_id = Some(s.max_id.map_or(m, |x| x.max(m)));
            }
            let new_len = scale_input(len, args);
            let added = blocks_for(new_len, args.block_size).saturating_sub(ids.len() as u64);
            s.max_added_blocks = s.max_added_blocks.max(added);
        }
    }
    Ok(s)
}

fn target_speed(args: &Args, scan: &Scan) -> Result<Option<f64>> {
    if args.rate.is_none() && args.duration.is_none() {
        return Ok(None);
    }
    let flag = if args.rate.is_some() {
        "--rate"
    } else {
        "--duration"
    };
    if scan.first_ts.is_none() {
        return Err(Error::msg(format!(
            "{flag} needs timestamps, and no record has one"
        )));
    }
    let span = scan.max_ts - scan.min_ts;
    if span <= 0.0 || scan.records < 2 {
        return Err(Error::msg(format!(
            "{flag} needs records at different times; this trace spans 0 ms"
        )));
    }
    if let Some(rate) = args.rate {
        let current = (scan.records - 1) as f64 / (span / 1000.0);
        Ok(Some(rate / current))
    } else {
        Ok(args.duration.map(|d| span / d))
    }
}

/// New ids must stay exact in every JSON reader, JavaScript's included.
fn check_id_range(plan: &Plan) -> Result<()> {
    const MAX_SAFE: u64 = (1 << 53) - 1;
    let top = plan
        .id_base
        .checked_add(1)
        .and_then(|roots| roots.checked_mul(plan.id_stride))
        .and_then(|n| n.checked_add(plan.id_base));
    match top {
        Some(t) if t <= MAX_SAFE => Ok(()),
        _ => Err(Error::msg(
            "the input's block ids are too large to add new blocks that stay below 2^53; \
             renumber the ids densely first (trace-convert --from mooncake does)",
        )),
    }
}

fn scale_input(len: u64, args: &Args) -> u64 {
    let scaled = match args.input_scale {
        Some(f) => (len as f64 * f).round() as u64,
        None => len,
    };
    args.max_input.map_or(scaled, |m| scaled.min(m))
}

fn scale_output(len: u64, args: &Args) -> u64 {
    let mut scaled = match args.output_scale {
        Some(f) => (len as f64 * f).round() as u64,
        None => len,
    };
    if let Some(m) = args.max_output {
        scaled = scaled.min(m);
    }
    if let Some(m) = args.min_output {
        scaled = scaled.max(m);
    }
    scaled.max(1)
}

/// Rescale one record in place. Returns true when the record has a fixed
/// prompt whose lengths were left alone.
fn transform(rec: &mut Record, args: &Args, plan: &mut Plan) -> Result<bool, FieldError> {
    let timestamp = rec.timestamp()?;
    // Later turns (AIPerf's multi-turn layout) and records of a trace
    // without timestamps are timed by their `delay` alone.
    let follows = plan.turns.follows(
        rec.session_id().ok().flatten().as_deref(),
        rec.contains("after"),
    );
    if plan.speed.speed != 1.0 {
        let timed = plan.speed.apply(rec, timestamp)?;
        if !timed
            && !follows
            && plan.speed.origin.is_some()
            && (args.speed.is_some() || args.rate.is_some() || args.duration.is_some())
        {
            return Err(FieldError::new(
                "timestamp",
                "missing: changing time needs a timestamp on every record",
            ));
        }
    }
    cap_times(rec, args, plan)?;
    if !args.touches_tokens() {
        return Ok(false);
    }
    let Some(input_length) = rec.input_length()? else {
        return Ok(true);
    };
    let hash_ids = rec.hash_ids()?;
    let new_input = scale_input(input_length, args);
    record::at_most("input_length", new_input, record::MAX_TOKENS, "tokens")?;
    let mut stale: Vec<&str> = Vec::new();
    if new_input != input_length {
        stale.extend(["prompt_tokens", "ttft_ms", "e2e_ms"]);
        rec.set("input_length", &new_input);
        if let Some(mut ids) = hash_ids {
            record::check_block_count(ids.len(), input_length, args.block_size)?;
            resize_blocks(&mut ids, blocks_for(new_input, args.block_size), plan);
            rec.set("hash_ids", &ids);
        }
    }
    if let Some(out_len) = rec.output_length()? {
        let new_out = scale_output(out_len, args);
        record::at_most("output_length", new_out, record::MAX_TOKENS, "tokens")?;
        if new_out != out_len {
            stale.extend(["completion_tokens", "e2e_ms"]);
            rec.set("output_length", &new_out);
        }
    }
    forget_observed(rec, &stale)?;
    Ok(false)
}

/// --max-gap and --max-delay, on the record's times as rescaled.
fn cap_times(rec: &mut Record, args: &Args, plan: &mut Plan) -> Result<(), FieldError> {
    if let Some(cap) = args.max_gap {
        if let Some(t) = rec.timestamp()? {
            let new = plan.gaps.apply(t, cap);
            if new != t {
                rec.set_ms("timestamp", new);
            }
        }
    }
    if let Some(cap) = args.max_delay {
        if rec.delay()?.is_some_and(|d| d > cap) {
            rec.set_ms("delay", cap);
        }
    }
    Ok(())
}

/// Drop the `observed` figures that described the record's old lengths:
/// production never saw the rescaled request, and replay reads
/// `observed.prompt_tokens` as the prompt's length once trace-synth has
/// replaced `input_length` with a prompt. An `observed` left empty goes.
fn forget_observed(rec: &mut Record, keys: &[&str]) -> Result<(), FieldError> {
    if keys.is_empty() {
        return Ok(());
    }
    let Some(raw) = rec.get("observed") else {
        return Ok(());
    };
    let mut observed = Record::parse(raw.get())
        .map_err(|_| FieldError::new("observed", "is not an object"))?
        .into_owned();
    let mut changed = false;
    for key in keys {
        changed |= observed.remove(key);
    }
    if !changed {
        return Ok(());
    }
    if observed.is_empty() {
        rec.remove("observed");
    } else {
        rec.set_raw("observed", record::raw(observed.to_json_string()));
    }
    Ok(())
}

/// Every record, edited, in memory (for --loop).
fn read_all(
    lines: &mut Lines,
    skipper: &mut Skipper,
    mut edit: impl FnMut(&mut Record, u64) -> Result<Edit, FieldError>,
) -> Result<(u64, Vec<Record<'static>>)> {
    let mut records = Vec::new();
    let read = crate::filter::for_each(lines, skipper, |skipper, mut rec, _, loc, index| {
        let checked = edit(&mut rec, index).and_then(|_| {
            // Checked here, where the line is known, not when copied.
            rec.timestamp()?;
            strings(&rec, "after")?;
            rec.id()?;
            rec.session_id()?;
            Ok(())
        });
        match checked {
            Ok(()) => {
                records.push(rec.into_owned());
                Ok(())
            }
            Err(e) => skipper.skip(e.at(loc)),
        }
    })?;
    Ok((read, records))
}

/// `after`'s ids, if any.
fn strings(rec: &Record, field: &str) -> Result<Option<Vec<String>>, FieldError> {
    rec.get(field)
        .map(|raw| {
            serde_json::from_str::<Vec<String>>(raw.get()).map_err(|_| {
                FieldError::new(
                    field,
                    format!(
                        "expected an array of record ids (strings), found {}",
                        crate::error::quote_value(raw.get())
                    ),
                )
            })
        })
        .transpose()
}

/// --loop: copies of the trace, one after another, until `until` ms after
/// the first record. A copy starts one span plus one mean gap after the
/// previous one, so the gap between copies is a typical one. Records due
/// at `until` or later are left out, and so are the records that wait for
/// one left out (its `after` ids, or the earlier turns of its session), so
/// that no dependency is cut.
fn tile(records: &[Record<'static>], until: f64, out: &mut Output) -> Result<()> {
    let times: Vec<f64> = records
        .iter()
        .filter_map(|r| r.timestamp().ok().flatten())
        .collect();
    let (Some(&origin), Some(min), Some(max)) = (
        times.first(),
        times.iter().copied().reduce(f64::min),
        times.iter().copied().reduce(f64::max),
    ) else {
        return Err(Error::msg("--loop needs timestamps, and no record has one"));
    };
    let span = max - min;
    if span <= 0.0 || records.len() < 2 {
        return Err(Error::msg(
            "--loop needs records at different times; this trace spans 0 ms",
        ));
    }
    let period = span + span / (records.len() - 1) as f64;
    // The limit --speed keeps, checked before anything is written: every
    // tool reads what this writes. Only a trace near it needs the pass.
    if origin + until > record::MAX_TIMESTAMP_MS {
        let mut copy = 0u64;
        while copy as f64 * period < until {
            let shift = copy as f64 * period;
            for &t in times.iter().filter(|&&t| t + shift - origin < until) {
                record::within("timestamp", t, t + shift, record::MAX_TIMESTAMP_MS)
                    .map_err(|e| Error::msg(format!("--loop: copy {}: {e}", copy + 1)))?;
            }
            copy += 1;
        }
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut copy = 0u64;
    while copy as f64 * period < until {
        let shift = copy as f64 * period;
        let suffix = |s: &str| match copy {
            0 => s.to_string(),
            k => format!("{s}#{}", k + 1),
        };
        // Ids and sessions of this copy left out: what waits for them goes.
        let mut dropped_ids = std::collections::HashSet::new();
        let mut dropped_sessions = std::collections::HashSet::new();
        for rec in records {
            let mut rec = rec.clone();
            let ts = rec.timestamp().ok().flatten();
            let after = strings(&rec, "after").ok().flatten().unwrap_or_default();
            let id = rec.id().ok().flatten().map(|s| s.into_owned());
            let session = rec.session_id().ok().flatten().map(|s| s.into_owned());
            let late = ts.is_some_and(|t| t + shift - origin >= until);
            let orphan = after.iter().any(|a| dropped_ids.contains(a))
                || session
                    .as_ref()
                    .is_some_and(|s| dropped_sessions.contains(s));
            if late || orphan {
                dropped_ids.extend(id);
                dropped_sessions.extend(session);
                continue;
            }
            if copy > 0 {
                if let Some(t) = ts {
                    rec.set_ms("timestamp", t + shift);
                }
                if let Some(id) = &id {
                    rec.set("id", &suffix(id));
                }
                if let Some(s) = &session {
                    rec.set("session_id", &suffix(s));
                }
                if rec.contains("after") {
                    let renamed: Vec<String> = after.iter().map(|a| suffix(a)).collect();
                    rec.set("after", &renamed);
                }
            }
            buf.clear();
            rec.write_json(&mut buf);
            out.write_line(&buf)?;
        }
        copy += 1;
    }
    Ok(())
}

/// Shrink to the leading `want` blocks, or grow with ids that depend only on
/// the prompt's last block id (which stands for the whole prompt) and the
/// position: prompts that were identical stay identical.
fn resize_blocks(ids: &mut Vec<u64>, want: u64, plan: &Plan) {
    let have = ids.len() as u64;
    if want <= have {
        ids.truncate(want as usize);
        return;
    }
    // Prompts with no block at all share one root, numbered after every id.
    let root = ids.last().copied().unwrap_or(plan.id_base);
    for k in 0..(want - have) {
        ids.push(plan.id_base + root * plan.id_stride + k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(base: u64, stride: u64) -> Plan {
        Plan {
            speed: record::Speedup::new(1.0),
            id_base: base,
            id_stride: stride,
            turns: record::Turns::default(),
            gaps: GapCap::default(),
        }
    }

    #[test]
    fn growing_blocks_never_collides_and_keeps_sharing() {
        let p = plan(10, 3);
        let mut a = vec![0, 1];
        let mut b = vec![0, 1];
        let mut c = vec![0, 2];
        resize_blocks(&mut a, 4, &p);
        resize_blocks(&mut b, 5, &p);
        resize_blocks(&mut c, 4, &p);
        assert_eq!(a, vec![0, 1, 13, 14]);
        assert_eq!(&b[..4], &a[..]);
        assert!(c[2..].iter().all(|id| !a.contains(id) && *id >= 10));
    }

    #[test]
    fn gaps_over_the_cap_shorten_and_move_what_follows() {
        // Arrivals 0, 100, 1100, 1150, 5150, 5160 with a 300 ms cap: the
        // gap of 1000 loses 700, the gap of 4000 loses 3700 more.
        let mut g = GapCap::default();
        let got: Vec<f64> = [0.0, 100.0, 1100.0, 1150.0, 5150.0, 5160.0]
            .iter()
            .map(|&t| g.apply(t, 300.0))
            .collect();
        assert_eq!(got, [0.0, 100.0, 400.0, 450.0, 750.0, 760.0]);
        // Out of order: measured from the latest arrival, never cut again.
        assert_eq!(g.apply(5000.0, 300.0), 5000.0 - 4400.0);
    }

    #[test]
    fn shrinking_keeps_the_prefix() {
        let mut a = vec![5, 6, 7];
        resize_blocks(&mut a, 1, &plan(8, 0));
        assert_eq!(a, vec![5]);
    }
}
