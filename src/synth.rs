//! trace-synth: the command over the prompt synthesizer ([`crate::prompts`]).

use clap::Parser;

use crate::cli::{self, InputArgs, Outcome, OutputArgs, SkipArgs, Skipper};
use crate::error::Result;
use crate::io::{self, Lines, Output};
use crate::prompts::{DEFAULT_SEED, PromptForm, add_prompt, synthesizer};
use crate::record::{DEFAULT_BLOCK_SIZE, Edit};
use crate::tokenizer::{self};

const EXAMPLES: &str = "\
Exit status: 0 on success, 2 on trouble (bad usage, unreadable input, a
missing tokenizer file, a malformed record without --skip-invalid).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  Prompts for a Mooncake trace, then replay it:
    trace-synth mooncake.jsonl | trace-replay --url http://127.0.0.1:8000 --model m

  Token ids for vLLM's completions API (no re-tokenization on the server):
    trace-synth --token-ids --tokenizer tokenizer.json trace.jsonl > ids.jsonl

  Chat messages, exact for GPT-2's tokenizer, with another seed:
    trace-synth --format messages --tokenizer r50k_base --seed 7 trace.jsonl";

/// Add prompts synthesized from `input_length` and `hash_ids`.
///
/// Each record with `input_length` and no prompt gets one of exactly
/// `input_length` tokens under --tokenizer; every other record passes
/// through unchanged. Block k of a prompt is a function of the seed, the
/// tokenizer and `hash_ids[k]` only: records that share their first k ids
/// share their first k × block-size tokens, in every run; the last block is
/// the prefix of its id's full block. Records without `hash_ids` get
/// prompts that share no block with any other.
///
/// The prompt replaces `input_length` and `hash_ids` (a record has one
/// input mode); the length moves to `observed.prompt_tokens`, replacing a
/// figure there that says otherwise (replay reads it as the length asked
/// for); the other `observed` figures stay. Chat templates add tokens on the
/// server: replay reports them as `prompt_tokens` − `input_length`.
///
/// Prompts are strings of words that are each one token with a leading
/// space. Memory does not grow with the trace.
#[derive(Parser, Debug)]
#[command(name = "trace-synth", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Tokenizer the prompts are exact for: o200k_base, cl100k_base,
    /// r50k_base (GPT-2), built in, a Hugging Face tokenizer.json file, or
    /// a model (ORG/NAME) in the local Hugging Face cache.
    #[arg(long, value_name = "NAME|FILE", default_value = tokenizer::DEFAULT)]
    pub tokenizer: String,

    /// Write the prompt as `text_input` or as `messages` (one user message).
    #[arg(long, value_enum, default_value = "text", conflicts_with = "token_ids")]
    pub format: TextForm,

    /// Write `prompt_token_ids` (the token id list) instead of text.
    #[arg(long)]
    pub token_ids: bool,

    /// Tokens per `hash_ids` block, for traces that are not canonical.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE,
          value_parser = cli::positive_u64)]
    pub block_size: u64,

    /// Seed of the blocks' content: another seed gives other prompts.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Draw words from this text file instead of the tokenizer's
    /// vocabulary (its words that are one token each).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

/// Text forms of `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TextForm {
    /// `text_input`.
    Text,
    /// `messages`, one user message.
    Messages,
}

/// Run trace-synth.
pub fn run(args: &Args) -> Result<Outcome> {
    let inputs = io::input_specs(&args.input.files)?;
    let synth = synthesizer(
        &args.tokenizer,
        args.seed,
        args.block_size,
        args.corpus.as_deref(),
    )?;
    let form = match (args.token_ids, args.format) {
        (true, _) => PromptForm::TokenIds,
        (false, TextForm::Text) => PromptForm::Text,
        (false, TextForm::Messages) => PromptForm::Messages,
    };
    let mut lines = Lines::new(&inputs);
    let mut out = Output::open(args.output.output.as_deref())?;
    let mut skipper = Skipper::new(&args.skip_invalid);
    let read = crate::filter::rewrite_each(&mut lines, &mut out, &mut skipper, |rec, key| {
        Ok(match add_prompt(rec, &synth, form, key)? {
            true => Edit::Changed,
            false => Edit::Unchanged,
        })
    })?;
    skipper.finish();
    if read == 0 {
        cli::warn_empty_input();
    }
    out.finish()?;
    Ok(Outcome::Success)
}
