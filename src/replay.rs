//! trace-replay: send each record to an OpenAI-compatible server on
//! schedule, and write one result line per request. The work is the replay
//! engine's ([`crate::engine`]), which trace-sweep runs too; this tool is
//! its flags and nothing else: they become the run's plan, its records
//! are the trace's lines, its results are written as NDJSON.

use crate::cli::Outcome;
use crate::engine::{Engine, Ndjson, Plan, Tee, TraceLines, dry_run};
use crate::error::Result;

pub use crate::engine::Args;

/// Run trace-replay.
pub fn run(args: &Args) -> Result<Outcome> {
    let records = TraceLines::open(&args.input.files)?;
    let plan = Plan::try_from(args)?;
    let output = args.output.output.as_deref();
    if args.dry_run {
        dry_run(&plan, records, output)?;
        return Ok(Outcome::Success);
    }
    if let (Some(keep), Some(out)) = (&args.keep, output) {
        if keep.as_path() == out {
            return Err(crate::error::Error::usage(format!(
                "--keep {}: the same file as --output; give --keep another file",
                keep.display()
            )));
        }
    }
    let out = Ndjson::open(output)?;
    match &args.keep {
        Some(keep) => {
            let kept = Ndjson::open(Some(keep))?;
            Engine::run(plan, records, Tee::new(out, kept, keep)).outcome()
        }
        None => Engine::run(plan, records, out).outcome(),
    }
}
