//! tracekit: Unix filters for LLM-serving traffic traces.
//!
//! The crate is built in floors; a module uses only modules of its own
//! floor's lower neighbours, never a tool beside it:
//!
//! - **Tools**, one module each, side by side: [`convert`], [`validate`],
//!   [`slice`], [`rescale`], [`synth`], [`replay`], [`summarize`], [`sim`],
//!   [`sweep`], [`generate`].
//!   Each has an `Args` (its flags) and a `run` function; the binaries in
//!   `src/bin/` only call [`cli::main`]. No tool imports another
//!   (`tests/cli/layers.rs` checks it): what two tools share lives below.
//! - **Engines**, what more than one tool runs: the replay engine
//!   ([`engine`]: trace-replay's flags and work, which trace-sweep runs
//!   once per speed), the metrics over results ([`metrics`]) and the report
//!   made of them ([`report`]: trace-summarize's figures, trace-sweep's
//!   rows), and the twin ([`twin`]: the simulated server's model fitted to
//!   a run and run in virtual time).
//! - **The shared model**: the endpoints, each described once for requests
//!   and answers ([`api`]), the trace record ([`record`]), the result record
//!   ([`result`]) and the run's settings beside it ([`run_info`]), the peers'
//!   result files read as results ([`peers`]),
//!   sharding ([`shard`]), statistics ([`stats`]), prompt synthesis
//!   ([`prompts`], [`tokenizer`]), the unit of timestamps ([`timestamps`]),
//!   the simulated server as a library ([`simulator`]), and a server's own
//!   metrics ([`server_metrics`]).
//! - **The ground**: input and output ([`io`]), the CLI spine and
//!   diagnostics ([`cli`], [`error`], [`panics`]), a filter's record loop
//!   ([`filter`]), JSON scanning ([`json`]), time and numbers ([`time`],
//!   [`duration`], [`text`], [`hash`]), table cells ([`cell`]) and
//!   spreadsheets ([`xlsx`]).
//!
//! The record formats and conventions are described in `man/tracekit.7`.

// Tools.
pub mod convert;
pub mod generate;
pub mod replay;
pub mod rescale;
pub mod sim;
pub mod slice;
pub mod summarize;
pub mod sweep;
pub mod synth;
pub mod validate;

// Engines.
pub mod engine;
pub mod metrics;
pub mod report;
pub mod twin;

// The shared model.
pub mod api;
pub mod peers;
pub mod prompts;
pub mod record;
pub mod result;
pub mod run_info;
pub mod server_metrics;
pub mod shard;
pub mod simulator;
pub mod stats;
pub mod timestamps;
pub mod tokenizer;

// The ground.
pub mod cell;
pub mod cli;
pub mod duration;
pub mod error;
pub mod filter;
pub mod hash;
pub mod io;
pub mod json;
pub mod panics;
pub mod text;
pub mod time;
pub mod xlsx;

/// Every binary's name with its flags, for what documents them all (shell
/// completions, the man pages' drift test).
pub fn commands() -> Vec<(&'static str, clap::Command)> {
    use clap::CommandFactory;
    vec![
        ("trace-convert", convert::Args::command()),
        ("trace-validate", validate::Args::command()),
        ("trace-slice", slice::Args::command()),
        ("trace-rescale", rescale::Args::command()),
        ("trace-summarize", summarize::Args::command()),
        ("trace-synth", synth::Args::command()),
        ("trace-replay", replay::Args::command()),
        ("trace-sim", sim::Args::command()),
        ("trace-sweep", sweep::Args::command()),
        ("trace-gen", generate::Args::command()),
    ]
}
