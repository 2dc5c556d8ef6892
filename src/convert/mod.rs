//! trace-convert: source logs and public traces → canonical trace records.
//!
//! Each format module turns its rows into [`Request`]s, the one shape every
//! source maps onto (times in epoch or relative nanoseconds, token counts,
//! session, observed figures, the prompt where the log has it). This module
//! does what is common to all of them: finding the inputs (directories are
//! walked), recognising the format, dropping failures and cache hits,
//! sorting by arrival, rebasing time to the first record, deriving session
//! delays, content hashing, writing the records and the summary.
//!
//! Sorting needs every request: beyond the memory budget (`--memory`)
//! they are sorted in runs on disk and merged (see [`held`]).

pub mod agents;
pub mod azure;
pub mod bailian;
pub mod burstgpt;
pub mod chat;
pub mod claude_code;
pub mod codex;
pub mod container;
pub mod copilot;
mod ctx;
mod destination;
pub mod dynamo;
pub mod fields;
pub mod gemini_cli;
pub mod graph;
pub mod hashing;
mod held;
pub mod kv_cache_tester;
pub mod langfuse;
pub mod litellm;
pub mod mooncake;
pub mod openai_batch;
pub mod otel;
pub mod parquet;
pub mod prefix;
pub mod servegen;
pub mod sharegpt;
pub mod sql_dump;
pub mod tracelab;

pub use ctx::Ctx;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use serde_json::Value;

use crate::cli::{self, InputArgs, OutputArgs, SkipArgs};
use crate::error::{Error, Location, Result};
use crate::io::{self, InputSpec};
use crate::record::Record;
use crate::text::plural;
use crate::tokenizer;

const EXAMPLES: &str = "\
Exit status: 0 on success, 2 on trouble (bad usage, unreadable input, an
unrecognised format, a malformed record without --skip-invalid).
(3 is trace-replay's early stop; never from this tool.)

Examples:
  LiteLLM callback logs (a directory of S3 objects), checked and described:
    trace-convert --from litellm logs/ | trace-validate --report

  A public trace, ten minutes of it, twice as fast:
    trace-convert AzureLLMInferenceTrace_conv.csv | trace-slice --to 10m | trace-rescale --speed 2

  Public coding-agent sessions with their subagents, checked:
    trace-convert --from kv-cache-tester traces/ | trace-validate --report

  Keep the conversations themselves, for an exact replay:
    trace-convert --from litellm --keep-messages spend_logs.csv -o trace.jsonl.gz";

/// Convert LiteLLM and Langfuse logs, OpenTelemetry spans, OpenAI batches,
/// public traces (Mooncake, Azure, BurstGPT, Bailian, ServeGen) and
/// coding-agent sessions (kv-cache-tester, Dynamo, TraceLab) to canonical
/// trace records (JSONL).
///
/// Records are sorted by arrival time and the first is written at
/// timestamp 0 (--absolute keeps epoch milliseconds). Sorting holds the
/// records in memory up to --memory, then sorts them in runs in temporary
/// files (in TMPDIR) and merges them.
///
/// Failed requests and LiteLLM response-cache hits are left out and counted
/// unless --keep-failed / --keep-cache-hits. A session id the log gives is
/// written, even on a session's only call (LiteLLM's trace ids, random per
/// call, only where they repeat); a later turn of a session gets `delay`,
/// its start minus the previous turn's end. Without --keep-messages no prompt text is
/// written: where the log has the prompt, `hash_ids` are computed from its
/// tokens in 512-token blocks, so shared prefixes stay visible.
///
/// A FILE that is a directory stands for every file under it (recursively,
/// in name order), as LiteLLM's S3 and GCS loggers leave them. A summary
/// goes to standard error: records read, written, dropped by reason,
/// sessions, time span.
#[derive(Parser, Debug)]
#[command(name = "trace-convert", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Format of the input; `auto` recognises it from the content of the
    /// first input and says which it chose.
    #[arg(long, value_name = "FORMAT", default_value = AUTO, value_parser = from_values())]
    pub from: String,

    /// Keep absolute times (epoch milliseconds, or the source's own origin)
    /// instead of starting at 0.
    #[arg(long)]
    pub absolute: bool,

    /// Keep failed requests, with `observed.status` "error" and
    /// `output_length` from the request's max_tokens, else 1.
    #[arg(long)]
    pub keep_failed: bool,

    /// Keep LiteLLM response-cache hits (they never reached a model), with
    /// `observed.status` "cache_hit".
    #[arg(long)]
    pub keep_cache_hits: bool,

    /// Write the conversation (`messages`, `tools`) where the log has it,
    /// instead of `input_length` and `hash_ids`; the prompt size then goes
    /// in `observed.prompt_tokens`. Prompt text leaves the converter only
    /// with this flag.
    #[arg(long)]
    pub keep_messages: bool,

    /// Write each session's (else trace's) calls as their dependency
    /// graph, `after` and `delay`, where the log has call ids and end times
    /// (otel, Langfuse observations, LiteLLM sessions). The default.
    #[arg(long, overrides_with = "no_graph")]
    pub graph: bool,

    /// Write sessions as a chain of turns instead (`session_id`, and
    /// `delay` after the previous turn), without `after`: the output of
    /// earlier releases, for replayers that do not follow `after`.
    #[arg(long, overrides_with = "graph")]
    pub no_graph: bool,

    /// Tokenizer for content hashing, and for counting the tokens of a
    /// call whose log has its text but no count: o200k_base, cl100k_base,
    /// r50k_base, built in, a Hugging Face tokenizer.json file, or a model
    /// (ORG/NAME) in the local Hugging Face cache.
    #[arg(long, value_name = "NAME|FILE", default_value = tokenizer::DEFAULT)]
    pub tokenizer: String,

    /// openai-batch and servegen only: space the records R per second, in
    /// the batch's input order (a batch has no arrival times; without this
    /// flag every record is at 0).
    #[arg(long, value_name = "R", value_parser = positive_rate)]
    pub rate: Option<f64>,

    /// claude-code, codex and gemini-cli only: leave out the calls that
    /// started before this time: a date (2026-03-01, midnight UTC) or a
    /// date-time with its zone (2026-03-01T09:30:00Z).
    #[arg(long, value_name = "TIME", value_parser = agents::when)]
    pub since: Option<agents::When>,

    /// claude-code, codex and gemini-cli only: leave out the calls that
    /// started at or after this time (as --since).
    #[arg(long, value_name = "TIME", value_parser = agents::when)]
    pub until: Option<agents::When>,

    /// Memory for the records being sorted: beyond it they are sorted in
    /// runs written to temporary files (in TMPDIR, about the output's size
    /// in all) and merged; the output is the same. K, M and G multiply by
    /// 1024, 1024^2 and 1024^3. What still grows with the input is about
    /// 40 bytes per distinct session or trace, and content hashes' ids.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = cli::byte_size)]
    pub memory: u64,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

fn positive_rate(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("`{text}` is not a rate > 0 (requests per second)")),
    }
}

/// A source's reader: one input into the context.
pub type ReadFn = fn(Box<dyn BufRead + Send>, Arc<str>, &mut Ctx) -> Result<()>;

/// A source's last step, given `--rate`.
pub type FinishFn = fn(&mut Ctx, Option<f64>) -> Result<()>;

/// One source format: everything the rest of trace-convert knows of it.
pub struct Source {
    /// The name `--from` takes.
    pub name: &'static str,
    /// One line for `--help`.
    pub help: &'static str,
    /// Whether the start of an input is this format's ("is it mine").
    pub sniff: fn(&Head) -> bool,
    /// Read one input into the context.
    pub read: ReadFn,
    /// Run once after every input was read (openai-batch joins its files
    /// here, Bailian resolves sessions); it is given `--rate`.
    pub finish: Option<FinishFn>,
    /// Whether `--rate` applies (a source without arrival times).
    pub takes_rate: bool,
}

/// Every source, in the order `--help` lists them and auto-detection tries
/// them: a sniff whose markers can also occur in a source listed after it
/// leaves that source's inputs alone. The coding agents' logs come first:
/// their markers are their own, while a tool call's arguments in them may
/// hold any key another source looks for (`projectId`, `traceId`).
pub const SOURCES: &[Source] = &[
    Source {
        name: "claude-code",
        help: "Claude Code sessions (~/.claude/projects/PROJECT/: SESSION.jsonl and its \
               subagents' files): one record per API request, subagents as `after` fan-out \
               and join",
        sniff: claude_code::sniff,
        read: claude_code::read,
        finish: Some(agents::finish),
        takes_rate: false,
    },
    Source {
        name: "codex",
        help: "Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl): one record \
               per model call (`token_count`)",
        sniff: codex::sniff,
        read: codex::read,
        finish: Some(agents::finish),
        takes_rate: false,
    },
    Source {
        name: "gemini-cli",
        help: "Gemini CLI chats (~/.gemini/tmp/HASH/chats/session-*.json, .jsonl): one record \
               per answer with `tokens`",
        sniff: gemini_cli::sniff,
        read: gemini_cli::read,
        finish: Some(agents::finish),
        takes_rate: false,
    },
    Source {
        name: "litellm",
        help: "LiteLLM StandardLoggingPayload objects or LiteLLM_SpendLogs rows \
               (CSV export, PostgreSQL dump, `/spend/logs` JSON)",
        sniff: litellm::sniff,
        read: litellm::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "otel",
        help: "OpenTelemetry spans of model calls (GenAI conventions, OpenInference, Vercel AI SDK): OTLP JSON, Jaeger JSON, flat span lists",
        sniff: otel::sniff,
        read: otel::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "langfuse",
        help: "Langfuse observations: API responses, UI download and batch export, \
               blob-storage export (with its traces table for sessions)",
        sniff: langfuse::sniff,
        read: langfuse::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "kv-cache-tester",
        help: "Agentic coding sessions in the kv-cache-tester format (Weka / SemiAnalysis \
               traces): subagents as `after` fan-out and join, 64-token blocks re-blocked \
               to 512",
        sniff: kv_cache_tester::sniff,
        read: kv_cache_tester::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "dynamo",
        help: "Dynamo agentic Mooncake traces: `wait_for` as `after`, `delay` + \
               `tool_wait_ms` as `delay`, hash_ids re-blocked to 512",
        sniff: dynamo::sniff,
        read: dynamo::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "tracelab",
        help: "TraceLab Claude Code / Codex rounds: sessions as `after` chains, prefix chains \
               from `prefix_tokens`",
        sniff: tracelab::sniff,
        read: tracelab::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "copilot",
        help: "GitHub Copilot coding agent sessions (AzurePublicDataset 2026): calls as their \
               session's graph, prefix chains from `tokens.cached`",
        sniff: copilot::sniff,
        read: copilot::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "servegen",
        help: "ServeGen offline batch traces (content-hash and stat traces; no arrival \
               times: see --rate)",
        sniff: servegen::sniff,
        read: servegen::read,
        finish: None,
        takes_rate: true,
    },
    Source {
        name: "mooncake",
        help: "Mooncake FAST'25 JSONL traces (normalised: sorted, rebased, checked)",
        sniff: mooncake::sniff,
        read: mooncake::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "azure",
        help: "Azure LLM inference traces, 2023 and 2024 CSVs",
        sniff: azure::sniff,
        read: azure::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "burstgpt",
        help: "BurstGPT CSVs, 6 and 8 columns",
        sniff: burstgpt::sniff,
        read: burstgpt::read,
        finish: None,
        takes_rate: false,
    },
    Source {
        name: "bailian",
        help: "Alibaba Bailian (Qwen) usage traces: chat_id/parent_chat_id sessions, \
               16-token blocks re-blocked to 512",
        sniff: bailian::sniff,
        read: bailian::read,
        finish: Some(bailian::finish),
        takes_rate: false,
    },
    Source {
        name: "openai-batch",
        help: "OpenAI Batch API input file joined with its output and error files on \
               `custom_id` (no arrival times: see --rate)",
        sniff: openai_batch::sniff,
        read: openai_batch::read,
        finish: Some(openai_batch::finish),
        takes_rate: true,
    },
    Source {
        name: "sharegpt",
        help: "ShareGPT conversations (ShareGPT_V3 JSON, as vLLM's benchmark loads it): \
               each conversation a session, each answer a request (no arrival times: see --rate)",
        sniff: sharegpt::sniff,
        read: sharegpt::read,
        finish: None,
        takes_rate: true,
    },
];

/// The `--from` value that asks for detection.
const AUTO: &str = "auto";

/// `--from`: `auto` or a name from [`SOURCES`].
fn from_values() -> clap::builder::PossibleValuesParser {
    let auto =
        clap::builder::PossibleValue::new(AUTO).help("Recognise the format from the content");
    clap::builder::PossibleValuesParser::new(
        std::iter::once(auto).chain(
            SOURCES
                .iter()
                .map(|s| clap::builder::PossibleValue::new(s.name).help(s.help)),
        ),
    )
}

fn source_named(name: &str) -> Option<&'static Source> {
    SOURCES.iter().find(|s| s.name == name)
}

/// The start of an input (up to 64 KiB, byte-order mark and leading white
/// space removed), for the sniffs.
pub struct Head<'a> {
    text: &'a str,
}

impl Head<'_> {
    /// The input starts as JSON (an object or an array).
    pub fn is_json(&self) -> bool {
        self.text.starts_with('{') || self.text.starts_with('[')
    }

    /// The input starts with `prefix` (after any blank space).
    pub fn starts_with(&self, prefix: &str) -> bool {
        self.text.starts_with(prefix)
    }

    /// The text holds `needle` anywhere.
    pub fn contains(&self, needle: &str) -> bool {
        self.text.contains(needle)
    }

    /// The text holds one of `needles`.
    pub fn contains_any(&self, needles: &[&str]) -> bool {
        needles.iter().any(|n| self.text.contains(n))
    }

    /// Not JSON, and the first line, split on commas, has this column.
    pub fn has_column(&self, name: &str) -> bool {
        !self.is_json()
            && self
                .text
                .lines()
                .next()
                .unwrap_or("")
                .split(',')
                .any(|c| c.trim() == name)
    }

    /// Not JSON, and the first line has every one of these columns.
    pub fn has_columns(&self, names: &[&str]) -> bool {
        names.iter().all(|n| self.has_column(n))
    }
}

/// What became of a request in the source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fate {
    /// It was served.
    #[default]
    Ok,
    /// It failed (status failure, zero output tokens).
    Failed,
    /// A LiteLLM response-cache hit: it never reached a model.
    CacheHit,
    /// Not a model call (a Langfuse span, event, tool, agent).
    NotGeneration,
    /// Its messages have no OpenAI form (--keep-messages): a replay of
    /// them would be refused.
    Unreplayable,
}

/// What production saw, written as `observed`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Prompt tokens the log reported.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens the log reported.
    pub completion_tokens: Option<u64>,
    /// Time to first token, ms; only for calls that streamed.
    pub ttft_ms: Option<f64>,
    /// Start to end, ms.
    pub e2e_ms: Option<f64>,
    /// Prompt tokens read from a cache (part of `prompt_tokens`).
    pub cached_tokens: Option<u64>,
    /// The record's token counts that are tracekit's own count of the
    /// logged text (the log had none), by field: written as
    /// `observed.counted`.
    pub counted: Vec<&'static str>,
}

/// The prompt as the log gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prompt {
    /// Chat messages (an array of objects with `role`).
    pub messages: Option<Value>,
    /// A plain text prompt (text completions).
    pub text: Option<String>,
    /// Tool definitions.
    pub tools: Option<Value>,
}

/// One request from any source: the common shape the format modules produce.
#[derive(Clone, Debug)]
pub struct Request {
    /// Where it was read.
    pub loc: Location,
    /// Arrival: epoch nanoseconds, or the source's own origin.
    pub start_ns: i64,
    /// Completion, same clock, where known.
    pub end_ns: Option<i64>,
    /// Prompt tokens.
    pub input_length: Option<u64>,
    /// Generated tokens; 0 when the request produced none.
    pub output_length: u64,
    /// The request's max_tokens, for failures kept with --keep-failed.
    pub max_tokens: Option<u64>,
    /// Session id as the log gives it.
    pub session: Option<String>,
    /// The session is an id the logger gives every call it is not told
    /// one for (LiteLLM's trace id): a session only where it repeats.
    pub session_if_repeated: bool,
    /// Model the client asked for.
    pub model: Option<String>,
    /// The log's request id.
    pub id: Option<String>,
    /// The trace it belongs to, to find its session in trace records.
    pub trace_id: Option<String>,
    /// Calls of one group (trace or session) with ids and end times get
    /// `after` and `delay` from [`graph`].
    pub group: Option<String>,
    /// Observed figures.
    pub observed: Observed,
    /// Served, failed or cache hit.
    pub fate: Fate,
    /// The prompt, where the log has it (boxed: most requests hold none
    /// by the time they are stored, and every byte counts for the sort).
    pub prompt: Option<Box<Prompt>>,
    /// Chained block hashes of the prompt (before renumbering).
    pub hashes: Option<Vec<u64>>,
    /// A source record passed through (Mooncake): only its timestamp changes.
    pub passthrough: Option<Record<'static>>,
    /// An embedding: no output tokens is its success, not a failure.
    pub embedding: bool,
    /// The text the call generated, where the log has it and no output
    /// count: counted with the tokenizer (see [`Ctx::push`]).
    pub output_text: Option<String>,
    /// Mark the token counts tracekit makes in `observed.counted`
    /// (LiteLLM and Langfuse; the otel source's page says how it fills
    /// its own).
    pub mark_counts: bool,
    /// Why the request has no output tokens, when the source can say more
    /// than that it has none (the summary's reason for leaving it out).
    pub no_output: Option<&'static str>,
    /// The ids of the calls it waits for, where the source says so
    /// (agentic traces): written as `after`, the conversation parent first.
    /// Such a call has no `end_ns`, so the derived graph leaves it alone.
    pub after: Vec<String>,
    /// Think or tool time after what it waits for completed, ms: written
    /// as `delay`.
    pub delay_ms: Option<f64>,
    /// Its messages are what it adds to the conversation of the call it
    /// waits for first: written as `message_mode` `"delta"`.
    pub delta: bool,
}

impl Request {
    /// A request read at `loc` that arrived at `start_ns`.
    pub fn new(loc: Location, start_ns: i64) -> Request {
        Request {
            loc,
            start_ns,
            end_ns: None,
            input_length: None,
            output_length: 0,
            max_tokens: None,
            session: None,
            session_if_repeated: false,
            model: None,
            id: None,
            trace_id: None,
            group: None,
            observed: Observed::default(),
            fate: Fate::Ok,
            prompt: None,
            hashes: None,
            passthrough: None,
            embedding: false,
            output_text: None,
            mark_counts: false,
            no_output: None,
            after: Vec::new(),
            delay_ms: None,
            delta: false,
        }
    }
}

/// Run trace-convert.
pub fn run(args: &Args) -> Result<cli::Outcome> {
    let specs = expand_inputs(&io::input_specs(&args.input.files)?)?;
    let (mut out, destination) = destination::open(args.output.output.as_deref())?;
    let mut ctx = Ctx::new(args);
    let mut format = source_named(&args.from);
    for (i, (spec, in_dir)) in specs.iter().enumerate() {
        let name = spec.display_name();
        let mut reader = io::open_input(spec)?;
        let source = match format {
            Some(source) => source,
            None => {
                if is_empty(&mut reader, &name)? {
                    // Nothing to recognise, and nothing to convert.
                    continue;
                }
                let source = match detect(&mut reader, &name) {
                    Ok(source) => source,
                    // A folder an agent keeps holds more than its sessions
                    // (an index, tool outputs): recognise by the next file.
                    Err(_) if *in_dir && specs[i + 1..].iter().any(|(_, d)| *d) => {
                        cli::note(format!("{name}: not a format read here; left out"));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                cli::note(format!(
                    "{name}: recognised as {} input (choose with --from)",
                    source.name
                ));
                format = Some(source);
                source
            }
        };
        if args.rate.is_some() && !source.takes_rate {
            let takers: Vec<&str> = SOURCES
                .iter()
                .filter(|s| s.takes_rate)
                .map(|s| s.name)
                .collect();
            let takers = match takers.split_last() {
                Some((last, [])) => last.to_string(),
                Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
                None => String::new(),
            };
            return Err(Error::usage(format!(
                "--rate applies to {} input only; {} input has its own arrival times",
                takers, source.name
            )));
        }
        if (args.since.is_some() || args.until.is_some()) && !agents::SOURCES.contains(&source.name)
        {
            return Err(Error::usage(format!(
                "--since and --until apply to {} input only, not {}",
                agents::SOURCES.join(", "),
                source.name
            )));
        }
        (source.read)(reader, name, &mut ctx)?;
    }
    if let Some(finish) = format.and_then(|s| s.finish) {
        finish(&mut ctx, args.rate)?;
    }
    ctx.finish_hashing()?;
    let kept = std::mem::replace(&mut ctx.kept, held::Kept::new(args));
    let summary = held::write(args, kept, &ctx.trace_sessions, &mut out)?;
    out.finish()?;
    destination.finish()?;
    ctx.skipper.finish();
    summary.print(ctx.read, ctx.skipper.skipped());
    if summary.written == 0 {
        cli::warn(nothing_written(format, ctx.read, ctx.traces_read));
    }
    Ok(cli::Outcome::Success)
}

/// Why a conversion wrote no record, and what to give it instead.
fn nothing_written(source: Option<&Source>, read: u64, traces: u64) -> String {
    if read == 0 && traces > 0 {
        return format!(
            "0 records written: the input holds {traces} Langfuse trace{} but no observations; \
             give the observations too (their GENERATION observations are the requests)",
            plural(traces)
        );
    }
    let Some(source) = source.filter(|_| read == 0) else {
        if read == 0 {
            return "0 records written: the input is empty; give the logs to convert".to_string();
        }
        return format!(
            "0 records written of {read} read: every one was dropped or invalid (see the counts \
             above)"
        );
    };
    format!(
        "0 records written: nothing in the input reads as {} records; check --from \
         (without it the format is recognised from the content)",
        source.name
    )
}

/// Directories become the files under them (recursively, sorted by path,
/// hidden files left out), each marked as found in a directory.
fn expand_inputs(specs: &[InputSpec]) -> Result<Vec<(InputSpec, bool)>> {
    let mut out = Vec::new();
    for spec in specs {
        match spec {
            InputSpec::Path(p) if p.is_dir() => {
                let mut files = Vec::new();
                walk(p, &mut files)?;
                files.sort();
                if files.is_empty() {
                    return Err(Error::msg(format!(
                        "{}: directory holds no files",
                        p.display()
                    )));
                }
                out.extend(files.into_iter().map(|f| (InputSpec::Path(f), true)));
            }
            other => out.push((other.clone(), false)),
        }
    }
    Ok(out)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let name = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(&name, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&name, e))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// True when the input holds nothing but white space. Nothing is consumed
/// unless a whole buffer is white space (line numbers stay right for any
/// input whose first 256 KiB hold a record).
fn is_empty(reader: &mut Box<dyn BufRead + Send>, source: &str) -> Result<bool> {
    loop {
        let buf = reader.fill_buf().map_err(|e| Error::io(source, e))?;
        if buf.is_empty() {
            return Ok(true);
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(_) => return Ok(false),
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// Recognise the format from the start of the input, without consuming it:
/// the first source in [`SOURCES`] whose sniff says it is its own.
fn detect(reader: &mut Box<dyn BufRead + Send>, source: &str) -> Result<&'static Source> {
    let head = reader.fill_buf().map_err(|e| Error::io(source, e))?;
    let head = String::from_utf8_lossy(&head[..head.len().min(64 * 1024)]);
    let head = Head {
        text: head.trim_start_matches('\u{feff}').trim_start(),
    };
    SOURCES.iter().find(|s| (s.sniff)(&head)).ok_or_else(|| {
        let names: Vec<&str> = SOURCES.iter().map(|s| s.name).collect();
        Error::msg(format!(
            "{source}: cannot recognise the format; give --from with one of: {} \
             (what each reads: `trace-convert --help`, or trace-convert(1))",
            names.join(", ")
        ))
    })
}

/// What the run did, for the summary on standard error.
#[derive(Debug, Default)]
struct Summary {
    written: u64,
    dropped: BTreeMap<&'static str, u64>,
    sessions: u64,
    span_ms: f64,
}

impl Summary {
    fn print(&self, read: u64, skipped: u64) {
        let dropped: u64 = self.dropped.values().sum();
        let mut msg = format!(
            "{read} record{} read, {} written",
            plural(read),
            self.written
        );
        if dropped > 0 {
            let reasons: Vec<String> = self
                .dropped
                .iter()
                .map(|(why, &n)| match *why {
                    "cache hit" => format!("{n} cache hit{}", plural(n)),
                    other => format!("{n} {other}"),
                })
                .collect();
            msg.push_str(&format!(", {dropped} dropped ({})", reasons.join(", ")));
        }
        if skipped > 0 {
            msg.push_str(&format!(", {skipped} invalid"));
        }
        msg.push_str(&format!(
            "; {} session{}; time span {} s",
            self.sessions,
            plural(self.sessions),
            crate::text::format_ms(self.span_ms / 1000.0)
        ));
        cli::note(msg);
    }
}

/// Sort by start time, ties in the order read, in place: a stable sort
/// takes scratch room for half of what it sorts. The order is found on
/// (start, position) pairs, then each cycle of the permutation is followed
/// with swaps.
fn sort_by_start<T>(kept: &mut [T], start: impl Fn(&T) -> i64) {
    if kept.windows(2).all(|w| start(&w[0]) <= start(&w[1])) {
        return;
    }
    let mut keys: Vec<(i64, usize)> = kept
        .iter()
        .enumerate()
        .map(|(i, r)| (start(r), i))
        .collect();
    keys.sort_unstable();
    // Position k takes the request now at order[k].
    let mut order: Vec<usize> = keys.into_iter().map(|(_, i)| i).collect();
    for start in 0..order.len() {
        let mut k = start;
        while order[k] != start && order[k] != k {
            let from = order[k];
            kept.swap(k, from);
            order[k] = k;
            k = from;
        }
        order[k] = k;
    }
}

fn ns_to_ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// Milliseconds as a JSON number, rounded to the microsecond like
/// [`crate::text::format_ms`]: the number its text reads as, without the
/// text (an integer where it writes one; else the rounded double, which is
/// what its shortest text reads back as).
fn ms_value(ms: f64) -> Value {
    let rounded = (ms * 1000.0).round() / 1000.0;
    if rounded == 0.0 {
        return Value::from(0u64);
    }
    if rounded.fract() == 0.0 && rounded.abs() < 9.0e15 {
        return Value::from(rounded as i64);
    }
    match serde_json::Number::from_f64(rounded) {
        Some(n) => Value::Number(n),
        // Not finite: what the text would read as (the limits keep these out).
        None => serde_json::from_str(&crate::text::format_ms(ms)).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_sort_by_start_keeping_the_order_read_for_ties() {
        // Starts 3, 1, 2, 1, 0, 3 (ids: their place in the input): two
        // cycles of the permutation and ties on 1 and 3.
        let starts = [3, 1, 2, 1, 0, 3];
        let mut kept: Vec<Request> = starts
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let mut r = Request::new(Location::new("t".into(), i as u64 + 1), s);
                r.id = Some(i.to_string());
                r
            })
            .collect();
        sort_by_start(&mut kept, |r| r.start_ns);
        let ids: Vec<&str> = kept.iter().map(|r| r.id.as_deref().unwrap()).collect();
        assert_eq!(ids, ["4", "1", "3", "2", "0", "5"]);
    }
}
