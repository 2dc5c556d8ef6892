//! trace-sim: the simulated server (see [`crate::simulator`]) as a
//! program of its own.

use clap::Parser;

use crate::cli::Outcome;
use crate::error::{Error, Result};
use crate::simulator::{SimOptions, start};

const EXAMPLES: &str = "\
Exit status: 0 when stopped by Ctrl-C, 2 on trouble (bad usage, the
address cannot be bound).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  A server for a replay, in another terminal:
    trace-sim --port 8000
    trace-replay --url http://127.0.0.1:8000 --model sim trace.jsonl | trace-summarize

  A slow, unreliable server, to test a pipeline's error handling:
    trace-sim --ttft-ms 500 --error-rate 0.05 --disconnect-rate 0.05 --seed 3

  The same, in-process, with no second terminal:
    trace-replay --sim trace.jsonl | trace-summarize";

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

    #[command(flatten)]
    pub model: SimOptions,
}

/// Run trace-sim until Ctrl-C.
pub fn run(args: &Args) -> Result<Outcome> {
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
