//! trace-sim: the simulated server (see [`crate::simulator`]) as a
//! program of its own.

use clap::Parser;

use std::path::PathBuf;

use crate::cli::Outcome;
use crate::error::{Error, Result};
use crate::simulator::{SimOptions, start};
use crate::twin::fit;

const EXAMPLES: &str = "\
Exit status: 0 when stopped by Ctrl-C (serving) or done, 130 when an
--offline run was interrupted by Ctrl-C (after writing every result), 2 on
trouble (bad usage, bad input, a fit from too little or one that fails
its own check without --force, the address cannot be bound).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  A server for a replay, in another terminal:
    trace-sim --port 8000
    trace-replay --url http://127.0.0.1:8000 --model sim trace.jsonl | trace-summarize

  A slow, unreliable server, to test a pipeline's error handling:
    trace-sim --ttft-ms 500 --error-rate 0.05 --disconnect-rate 0.05 --seed 3

  The same, in-process, with no second terminal:
    trace-replay --sim trace.jsonl | trace-summarize

  The twin: fit a profile to a real run, then ask it about other loads in
  virtual time (no server, no GPU):
    trace-replay --url http://127.0.0.1:8080 trace.jsonl > a.ndjson
    trace-sim --fit a.ndjson -o server.profile.json
    trace-rescale --speed 1.7 trace.jsonl \\
      | trace-sim --offline --profile server.profile.json | trace-summarize";

/// Run an OpenAI-compatible simulated server.
///
/// Serves /v1/models, /v1/completions, /v1/chat/completions (streaming and
/// not, with usage), /v1/embeddings (a whole answer after the prefill
/// time), /metrics (vLLM's metric names) and /health. Prompt
/// tokens are the prompt's whitespace-separated words (or its token ids).
/// Latency model: TTFT = --ttft-ms + --prefill-us × uncached prompt
/// tokens, where a prefix cache of
/// 512-token blocks (LRU, --cache-blocks) makes shared prefixes cheaper and
/// reports them as cached_tokens; then one chunk per output token, each
/// after --itl-ms × (1 + --batch-slope × (requests in flight − 1)). Every
/// answer has max_tokens tokens (16 when absent): the simulated model never
/// stops early, as with ignore_eos.
#[derive(Parser, Debug, Clone)]
#[command(name = "trace-sim", version, after_long_help = EXAMPLES)]
pub struct Args {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Port to bind; 0 picks a free one. The URL is printed on stdout.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,

    /// Fit a profile to these results (trace-replay's output of a run
    /// against the server to model): the step time terms from the batch
    /// each token's timestamp shows, the slots from the most requests
    /// running at once. Writes the profile to -o; prints the fit, its
    /// residuals and what the run could not tell on standard error.
    #[arg(long, value_name = "RESULTS", num_args = 1.., conflicts_with = "offline")]
    pub fit: Vec<String>,

    /// With --fit: the server's scrapes taken during the run
    /// (trace-replay --metrics-out), which pin the slots when requests
    /// waited, and the cache's size where they state it.
    #[arg(long, value_name = "SCRAPES", num_args = 1.., requires = "fit")]
    pub metrics: Vec<String>,

    /// With --fit: write the profile even when the fit refuses it (its own
    /// run not predicted within 15 %, the batch terms unknown), with the
    /// warning kept in the profile's quality.
    #[arg(long, requires = "fit")]
    pub force: bool,

    /// Write the profile here: the one --fit makes, or else the one the
    /// model flags describe.
    #[arg(short = 'o', long, value_name = "PROFILE", conflicts_with = "offline")]
    pub output: Option<PathBuf>,

    /// Run the traces through the model in virtual time, with no server:
    /// one result line per record on standard output, as trace-replay
    /// writes them (sessions, `after` and `delay` honoured).
    #[arg(long)]
    pub offline: bool,

    /// With --offline: the traces (standard input when none or `-`).
    #[arg(value_name = "TRACE", requires = "offline")]
    pub traces: Vec<String>,

    #[command(flatten)]
    pub model: SimOptions,
}

/// Run trace-sim: fit, run offline, or serve until Ctrl-C.
pub fn run(args: &Args) -> Result<Outcome> {
    if !args.fit.is_empty() {
        return fit_profile(args);
    }
    if args.offline {
        return run_offline(args);
    }
    if let Some(path) = &args.output {
        let profile = args.model.model_profile()?;
        return write_profile(path, &profile.to_text());
    }
    serve(args)
}

fn fit_profile(args: &Args) -> Result<Outcome> {
    let Some(path) = &args.output else {
        return Err(Error::usage(
            "--fit needs -o PROFILE: where to write the profile",
        ));
    };
    // The flags give what the fit does not: the prefill chunk, and the
    // slots and the cache when given.
    let base = args.model.model_profile()?;
    let given = fit::Given {
        slots: args.model.max_batch.is_some(),
        cache: args.model.cache_blocks.is_some(),
    };
    let mut fitted = fit::fit_files(&args.fit, &args.metrics, &base, given)?;
    eprint!("{}", fitted.report);
    if !fitted.problems.is_empty() {
        if !args.force {
            return Err(Error::msg(format!(
                "{}; the profile is not written (--force writes it, with this warning in it)",
                fitted.problems.join("; ")
            )));
        }
        for p in &fitted.problems {
            crate::cli::warn(p);
        }
        if let Some(q) = fitted.profile.quality.as_mut() {
            q.warnings = std::mem::take(&mut fitted.problems);
        }
    }
    let text = fitted.profile.to_text();
    // The fit never writes what its reader would refuse.
    if let Err(e) = crate::simulator::profile::Profile::parse(&text, &path.to_string_lossy()) {
        return Err(Error::msg(format!(
            "the fitted profile would not be read back ({e}); not written"
        )));
    }
    write_profile(path, &text)
}

fn write_profile(path: &std::path::Path, text: &str) -> Result<Outcome> {
    let mut out = crate::io::Output::open(Some(path))?;
    out.write_all(text.as_bytes())?;
    out.finish()?;
    Ok(Outcome::Success)
}

fn run_offline(args: &Args) -> Result<Outcome> {
    use crate::engine::{Engine, Ndjson, Plan, RunEnd, TraceLines};
    let profile = args.model.model_profile()?;
    // `--model` is named in every result only when given: the default
    // is the served model's name.
    let model = (args.model.model_name != SimOptions::default().model_name)
        .then(|| args.model.model_name.clone());
    let plan = Plan::twin(profile, model)?;
    let records = TraceLines::open(&args.traces)?;
    match Engine::run(plan, records, Ndjson::open(None)?) {
        RunEnd::Failed(e) => Err(e),
        end => end.outcome(),
    }
}

/// Serve until Ctrl-C.
fn serve(args: &Args) -> Result<Outcome> {
    // Every client connection holds a file.
    crate::io::raise_open_files_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::msg(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async {
        let server = start(&args.host, args.port, args.model.clone()).await?;
        println!("{}", server.url);
        let _ = tokio::signal::ctrl_c().await;
        Ok(Outcome::Success)
    })
}
