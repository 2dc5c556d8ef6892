//! trace-replay: send each record to an OpenAI-compatible server on
//! schedule, and write one result line per request. The work is the replay
//! engine's ([`crate::engine`]), which trace-sweep runs too; this tool is
//! its flags and nothing else.

use crate::cli::Outcome;
use crate::error::Result;

pub use crate::engine::Args;

/// Run trace-replay.
pub fn run(args: &Args) -> Result<Outcome> {
    crate::engine::run(args)
}
