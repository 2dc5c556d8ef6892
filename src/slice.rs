//! trace-slice: select records by time window, position, sample, session or
//! shard, streaming, in memory independent of the trace's size.

use std::collections::{HashMap, HashSet};

use clap::Parser;

use crate::cli::{self, InputArgs, Outcome, OutputArgs, SkipArgs, Skipper};
use crate::duration;
use crate::error::{Error, FieldError, Result};
use crate::hash;
use crate::io::{self, Lines, Output};
use crate::json;
use crate::record::{self, Record};
use crate::shard::{Dealer, parse_shard};
use serde_json::value::RawValue;

const EXAMPLES: &str = "\
Exit status: 0 on success, 2 on trouble (bad usage, unreadable input, a
malformed record without --skip-invalid).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  The ten minutes after the first ten, starting at 0:
    trace-slice --from 10m --to 20m --rebase trace.jsonl > window.jsonl

  A 10 % sample that keeps conversations whole, reproducibly:
    trace-slice --sample 0.1 --seed 7 trace.jsonl | trace-validate --report

  The first 100 records, for a smoke test:
    trace-slice --head 100 trace.jsonl | trace-replay --sim

  Shard 2 of 4 as a file (trace-replay --shard replays a shard directly,
  timed from the whole trace's start so that shards line up):
    trace-slice --shard 2/4 trace.jsonl > shard2.jsonl";

/// Select records of a trace: a time window, a range of positions, a
/// sample, sessions, or one shard of N.
///
/// Records are tested in this order: the time window (--from, --to), then
/// --session, --sample and --shard; of the records that pass, --skip drops
/// the first N and --head stops after N. Kept records are written unchanged
/// (byte for byte) unless --rebase moves their timestamps. A record without
/// a timestamp is a later turn of its session (AIPerf's multi-turn layout)
/// and stays with that session's latest timed turn, or, in a trace without
/// timestamps, is at offset 0. Memory does not grow with the size of the
/// trace, only with the number of sessions a time window sees.
#[derive(Parser, Debug)]
#[command(name = "trace-slice", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Keep records at or after this offset from the first record's
    /// timestamp (250ms, 90s, 10m, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_ms_arg)]
    pub from: Option<f64>,

    /// Keep records before this offset from the first record's timestamp
    /// (the window is half-open: a record exactly at --to is left out).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_ms_arg)]
    pub to: Option<f64>,

    /// Stop after writing N records.
    #[arg(long, value_name = "N")]
    pub head: Option<u64>,

    /// Drop the first N records that pass the other tests.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub skip: u64,

    /// Keep a random fraction P (0 < P ≤ 1) of the records; with
    /// `session_id`, whole sessions are kept or dropped together.
    #[arg(long, value_name = "P", value_parser = parse_fraction)]
    pub sample: Option<f64>,

    /// Seed of --sample: the same seed keeps the same records, on every
    /// machine and run.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,

    /// Keep only records of this session (repeatable).
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,

    /// Keep shard K of N (1 ≤ K ≤ N): records are dealt by a hash of their
    /// `session_id` when they have one (a session stays on one shard), else
    /// by position. The N shards are disjoint and together make the input.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,

    /// Move timestamps so that the first kept record is at 0.
    #[arg(long)]
    pub rebase: bool,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

fn parse_fraction(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 1.0 => Ok(p),
        _ => Err(format!(
            "`{text}` is not a fraction in (0, 1]: for 10 %, give 0.1"
        )),
    }
}

/// The session a record names, if it names one well.
fn session_name(raw: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    raw.and_then(|r| record::string("session_id", r).ok())
}

/// Run trace-slice.
pub fn run(args: &Args) -> Result<Outcome> {
    if let (Some(from), Some(to)) = (args.from, args.to) {
        if from >= to {
            return Err(Error::usage(format!(
                "--from {} is not before --to {}: the window would be empty",
                duration::human(from),
                duration::human(to)
            )));
        }
    }
    let inputs = io::input_specs(&args.input.files)?;
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut skipper = Skipper::new(&args.skip_invalid);
    let sessions: HashSet<&str> = args.sessions.iter().map(String::as_str).collect();
    let needs_time = args.from.is_some() || args.to.is_some() || args.rebase;
    let needs_session = !sessions.is_empty() || args.sample.is_some() || args.shard.is_some();

    let mut lines = Lines::new(&inputs);
    let mut index: u64 = 0;
    let mut dealer: Option<Dealer> = None;
    let mut origin: Option<f64> = None;
    // Sessions to whether their latest timed turn was inside the window.
    let mut in_window: HashMap<String, bool> = HashMap::new();
    let mut rebase_origin: Option<f64> = None;
    let mut passed: u64 = 0;
    let mut written: u64 = 0;
    let mut buf = Vec::with_capacity(1024);

    if args.head == Some(0) {
        out.finish()?;
        return Ok(Outcome::Success);
    }
    while let Some((loc, line)) = lines.next_line()? {
        let this_index = index;
        index += 1;
        // The fast scanner reads the two fields a test may need without
        // building a record; rebasing rewrites the record, so it parses.
        let peeked = if args.rebase {
            None
        } else {
            json::peek(
                line,
                [
                    "timestamp",
                    "session_id",
                    "scheduled_ms",
                    "status",
                    "id",
                    "after",
                ],
            )
        };
        let mut parsed: Option<Record> = None;
        let (timestamp_raw, session_raw, id_raw, after_raw) = match peeked {
            Some([_, _, Some(_), Some(_), _, _]) => {
                skipper.skip(record::results_not_trace().at(&loc))?;
                continue;
            }
            Some([t, s, _, _, i, a]) => (t, s, i, a),
            None => match Record::parse_at(line, &loc) {
                Ok(rec) => {
                    let rec = parsed.insert(rec);
                    (
                        rec.get("timestamp").map(RawValue::get),
                        rec.get("session_id").map(RawValue::get),
                        rec.get("id").map(RawValue::get),
                        rec.get("after").map(RawValue::get),
                    )
                }
                Err(e) => {
                    skipper.skip(e)?;
                    continue;
                }
            },
        };
        // The verdict of the turn this untimed record follows.
        let mut follows: Option<bool> = None;
        let timestamp = if needs_time {
            match timestamp_raw.map(|raw| record::timestamp("timestamp", raw)) {
                Some(Ok(t)) => Some(t),
                // A later turn without a timestamp (AIPerf's multi-turn
                // layout) goes with its session; in a trace without
                // timestamps every record is at the start.
                None => match session_name(session_raw)
                    .and_then(|s| in_window.get(s.as_ref()).copied())
                {
                    Some(verdict) => {
                        follows = Some(verdict);
                        None
                    }
                    None if origin.is_none() => {
                        follows = Some(args.from.is_none_or(|from| from <= 0.0));
                        None
                    }
                    None => {
                        let what = if args.rebase {
                            "--rebase needs"
                        } else {
                            "--from and --to need"
                        };
                        skipper.skip(
                            FieldError::new(
                                "timestamp",
                                format!("missing: {what} a timestamp on every record"),
                            )
                            .at(&loc),
                        )?;
                        continue;
                    }
                },
                Some(Err(e)) => {
                    skipper.skip(e.at(&loc))?;
                    continue;
                }
            }
        } else {
            None
        };
        let session = if needs_session {
            match session_raw
                .map(|raw| record::string("session_id", raw))
                .transpose()
            {
                Ok(s) => s,
                Err(e) => {
                    skipper.skip(e.at(&loc))?;
                    continue;
                }
            }
        } else {
            None
        };

        let inside = match (timestamp, follows) {
            (Some(t), _) => {
                let origin = *origin.get_or_insert(t);
                let offset = t - origin;
                let inside = !(args.from.is_some_and(|from| offset < from)
                    || args.to.is_some_and(|to| offset >= to));
                if let Some(s) = session_name(session_raw) {
                    in_window.insert(s.into_owned(), inside);
                }
                inside
            }
            (None, Some(verdict)) => verdict,
            (None, None) => true,
        };
        if !inside {
            continue;
        }
        if !sessions.is_empty() && !session.as_deref().is_some_and(|s| sessions.contains(s)) {
            continue;
        }
        if let Some(p) = args.sample {
            let h = match session.as_deref() {
                Some(s) => hash::stable_hash(args.seed, s.as_bytes()),
                None => hash::stable_hash(args.seed, &this_index.to_le_bytes()),
            };
            if hash::unit_interval(h) >= p {
                continue;
            }
        }
        if let Some((k, n)) = args.shard {
            // A record's `id` and `after` keep its dependency graph whole.
            let id = id_raw.and_then(|raw| record::string("id", raw).ok());
            let after: Vec<String> = after_raw
                .and_then(|raw| serde_json::from_str(raw).ok())
                .unwrap_or_default();
            let dealer = dealer.get_or_insert_with(|| Dealer::new(n));
            if dealer.deal(id.as_deref(), session.as_deref(), &after, this_index) != k - 1 {
                continue;
            }
        }
        passed += 1;
        if passed <= args.skip {
            continue;
        }
        if args.rebase {
            // A record without a timestamp is written as read.
            if let Some(t) = timestamp {
                let base = *rebase_origin.get_or_insert(t);
                let mut rec = parsed.expect("rebasing parses every record");
                rec.set_ms("timestamp", t - base);
                buf.clear();
                rec.write_json(&mut buf);
                out.write_line(&buf)?;
            } else {
                out.write_line(line.as_bytes())?;
            }
        } else {
            out.write_line(line.as_bytes())?;
        }
        written += 1;
        if args.head.is_some_and(|h| written >= h) {
            break;
        }
    }
    skipper.finish();
    if index == 0 {
        cli::warn_empty_input();
    } else if written == 0 && skipper.skipped() < index {
        cli::warn(format!(
            "0 records written of {index} read: none was selected; check the selection \
             against the trace (trace-validate --report shows its span and sessions)"
        ));
    }
    out.finish()?;
    Ok(Outcome::Success)
}
