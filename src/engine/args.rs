//! trace-replay's flags, and what they build: request body options, the
//! headers (the API key), the request URL and TLS roots.

use std::time::{Duration, SystemTime};

use clap::Parser;
use serde_json::{Map, Value};

use super::request::{BodyOptions, Endpoint};
use crate::cli::{self, InputArgs, OutputArgs, SkipArgs};
use crate::error::{Error, Result};
use crate::prompts::DEFAULT_SEED;
use crate::record::DEFAULT_BLOCK_SIZE;

pub(super) const EXAMPLES: &str = "\
Exit status: 0 when the run ended (even if requests failed: their results
say so; gate on them with trace-summarize --fail-if), 2 on trouble (bad
usage, unreadable input, a malformed record, a server that cannot be
reached, an output closed before every result was written: --keep FILE
keeps them), 3 when the run stopped early because its first --abort-after
requests all failed (after a result was written for every record), 130
when interrupted by Ctrl-C (143 by SIGTERM, 129 by SIGHUP) after every
result was written.

Examples:
  A demo with the built-in simulated server:
    trace-replay --sim trace.jsonl | trace-summarize

  A vLLM server, exact output lengths, results kept (whatever becomes of
  trace-summarize: a Ctrl-C, a closed pipe):
    trace-replay --url http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B \\
        --ignore-eos --keep results.ndjson trace.jsonl | trace-summarize

  Ten minutes of production logs at twice the speed, at most 64 in flight:
    trace-convert --from litellm logs.json | trace-slice --to 10m \\
      | trace-rescale --speed 2 \\
      | trace-replay --url http://gpu-1:8000 --max-concurrency 64 > results.ndjson

  A capacity test: 32 closed-loop workers, 5 minutes:
    trace-replay --url http://127.0.0.1:8000 --concurrency 32 --duration 5m trace.jsonl

  Check what would be sent, without sending:
    trace-replay --dry-run trace.jsonl | head";

/// Send each trace record to an OpenAI-compatible server at its timestamp.
///
/// Record i is sent at run start + (timestamp_i − timestamp_0), whatever
/// earlier requests are doing (open loop: no coordinated omission). A later
/// turn of a session with `delay` is sent `delay` ms after the previous turn
/// of its session completed. Timestamps that look like seconds (judged from
/// the first 1024 records, as trace-validate judges) get a warning before
/// the clock starts. Each response is read chunk by chunk and one
/// result line (JSON) per request is written and flushed as it completes:
/// times of the first chunk and first content, the gaps between chunks, the
/// server's token counts, the status. Records without a prompt get one
/// synthesized from `input_length` and `hash_ids` before they are due.
///
/// Every record taken on yields exactly one result, whatever the server
/// does. Ctrl-C stops sending, waits --grace for requests in flight, writes
/// `cancelled` results for the rest (and for the records left in an input
/// file; a pipe is read on to its end, --grace at most), and exits
/// 130; a second Ctrl-C cancels at once. SIGTERM and SIGHUP do the same,
/// and exit 143 and 129.
#[derive(Parser, Debug)]
#[command(name = "trace-replay", version, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Also write each result to FILE, flushed line by line as the output
    /// is (a tee of the results): piped into another tool, the run keeps
    /// every result on disk whatever becomes of that tool (a Ctrl-C, a
    /// closed pipe), and goes on to its end when the output closes. `.gz`
    /// and `.zst` names are compressed.
    #[arg(long, value_name = "FILE")]
    pub keep: Option<std::path::PathBuf>,

    /// Base URL of the server (`http://host:port`; a trailing `/v1` is
    /// fine; a URL ending in `/completions` is used as it is).
    #[arg(long, value_name = "URL", required_unless_present_any = ["sim", "dry_run"])]
    pub url: Option<String>,

    #[command(flatten)]
    pub simulated: crate::simulator::SimFlags,

    #[command(flatten)]
    pub twin: crate::simulator::ProfileFlag,

    /// API to call: `/v1/chat/completions`, `/v1/completions`,
    /// `/v1/embeddings`, `/v1/messages` (Anthropic's Messages API) or
    /// `/v1/responses` (OpenAI's Responses API). Records are in chat's form
    /// whatever the endpoint; each translates them and reads its own
    /// answers and usage.
    #[arg(long, value_enum, default_value = "chat")]
    pub endpoint: Endpoint,

    /// Model to name in every request, over the records' own `model`
    /// (which is sent only when this is not given).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// Rename a record's `model` FROM to TO (without --model); repeatable.
    #[arg(long = "model-map", value_name = "FROM=TO", value_parser = parse_model_map)]
    pub model_map: Vec<(String, String)>,

    /// Environment variable holding the API key, sent as a bearer token.
    /// The key is never printed nor written to results.
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,

    /// Extra HTTP header, `Name: value`; repeatable. Credential values
    /// (names with auth, key, token, secret, cookie...) are redacted from
    /// every output.
    #[arg(long = "header", value_name = "'K: V'")]
    pub headers: Vec<String>,

    /// Send each record's `session_id` in HTTP header NAME, so that a
    /// gateway or router (llm-d, a sticky load balancer) sends every turn
    /// of a session to the same replica.
    #[arg(long, value_name = "NAME")]
    pub session_header: Option<String>,

    /// Later turns of sessions whose prompts are synthesized (from
    /// `input_length` and `hash_ids`) carry the answers the server really
    /// gave: the conversation of the turn named first in `after` (else the
    /// session's previous turn), its answer, then synthesized tokens for the
    /// rest of `input_length` (on completions: the previous prompt, the
    /// answer's text, then the new text); a turn shorter than that turn's
    /// prompt starts a conversation of its own. Every endpoint that generates;
    /// refused on embeddings.
    #[arg(long)]
    pub live_answers: bool,

    /// JSON object merged into every request body; a record's `extra` wins.
    #[arg(long, value_name = "JSON")]
    pub extra: Option<String>,

    /// Ask for whole answers instead of streams (no TTFT nor ITL then).
    #[arg(long)]
    pub no_stream: bool,

    /// Give up on a request after this long (status `timeout`).
    #[arg(long, value_name = "D", default_value = "10m", value_parser = crate::duration::parse_ms_arg)]
    pub timeout: f64,

    /// Give up on a request (status `timeout`) when the server sends no
    /// byte for this long: a stream gone silent (a dying server holds it
    /// open). It bounds the wait for a stream's first token, so it must
    /// outlast the longest prefill and queueing; a whole answer (--no-stream)
    /// is bounded by --timeout alone until its body starts. 0 turns it off.
    #[arg(long, value_name = "D", default_value = "2m", value_parser = crate::duration::parse_ms_arg)]
    pub idle_timeout: f64,

    /// Fail a request (status `error`) whose answer would hold more than N
    /// bytes in memory: a whole body, or one line or event of a stream.
    /// K, M and G multiply by 1024, 1024^2 and 1024^3. An answer near N
    /// takes up to about twice N while it is read.
    #[arg(long, value_name = "N", default_value = "64M", value_parser = cli::byte_size)]
    pub max_answer_bytes: u64,

    /// Send `ignore_eos: true` (vLLM, SGLang) so answers have exactly
    /// `output_length` tokens.
    #[arg(long)]
    pub ignore_eos: bool,

    /// Send `min_tokens` = `output_length` (vLLM).
    #[arg(long)]
    pub min_tokens: bool,

    /// At most N requests in flight; a due request waits for a free slot
    /// and the wait shows as dispatch lag.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64, conflicts_with = "concurrency")]
    pub max_concurrency: Option<u64>,

    /// Ignore timestamps: N closed-loop workers, each sending its next
    /// request when the previous one completed.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub concurrency: Option<u64>,

    /// Replay only the first N records (after the warmup ones).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,

    /// Stop sending after this long; records due later are left out.
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_ms_arg)]
    pub duration: Option<f64>,

    /// Send the first N records first, wait for their answers, then start
    /// the run; their results are marked `"warmup": true`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,

    /// Start the run at this wall-clock time (RFC 3339), so that shards on
    /// several machines start together. A time already past is an error.
    #[arg(long, value_name = "TIME", value_parser = crate::time::parse_rfc3339)]
    pub start_at: Option<SystemTime>,

    /// Replay shard K of N (as trace-slice --shard deals them: by session,
    /// else by position), scheduled from the whole trace's first timestamp
    /// so that shards run together; results carry `"shard": "K/N"` and
    /// their position in the whole trace as `index`.
    #[arg(long, value_name = "K/N", value_parser = crate::shard::parse_shard)]
    pub shard: Option<(u64, u64)>,

    /// Print the schedule (one JSON line per request) and send nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Stop the run (exit 3) when the first N completed requests all
    /// failed (error or timeout): a wrong key, model or URL. Requests not
    /// sent are written as cancelled. 0 never stops.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub abort_after: u64,

    /// After the first Ctrl-C, wait this long for requests in flight.
    #[arg(long, value_name = "D", default_value = "5s", value_parser = crate::duration::parse_ms_arg)]
    pub grace: f64,

    /// Use HTTP/2 without TLS (h2c prior knowledge). Over https, HTTP/2 is
    /// used whenever the server offers it.
    #[arg(long)]
    pub http2: bool,

    /// Over https, also trust the CA certificates in this PEM file (besides
    /// the system's and the built-in roots): for a server whose certificate
    /// a private CA signed. The --metrics-url scrape trusts them too.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<String>,

    /// Over https, accept any certificate: self-signed, expired, or for
    /// another name. For test servers only: the server is then not
    /// authenticated. The --metrics-url scrape does the same.
    #[arg(long)]
    pub insecure: bool,

    /// Scrape the server's Prometheus metrics at URL during the run
    /// (`http://host:port` alone means its /metrics; it may be another
    /// host than --url, and gets none of the replay's headers). Needs
    /// --metrics-out.
    #[arg(long, value_name = "URL", requires = "metrics_out")]
    pub metrics_url: Option<String>,

    /// Time between two scrapes of --metrics-url, from the run's start.
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_every)]
    pub metrics_every: f64,

    /// Write one JSON line per scrape to FILE: `t_ms` (since the run's
    /// start, the clock of the results' `sent_ms`) and `samples`. With
    /// --sim and no --metrics-url, the simulated server is scraped.
    #[arg(long, value_name = "FILE")]
    pub metrics_out: Option<std::path::PathBuf>,

    /// Keep only the samples whose `name{labels}` matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex, requires = "metrics_out")]
    pub metrics_match: Option<regex::Regex>,

    /// No progress nor notes on standard error (the final line is still
    /// printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Tokenizer for synthesized prompts (see trace-synth).
    #[arg(long, value_name = "NAME|FILE", default_value = crate::tokenizer::DEFAULT)]
    pub tokenizer: String,

    /// Seed of synthesized prompts (see trace-synth).
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Tokens per `hash_ids` block, for traces that are not canonical.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE, value_parser = cli::positive_u64)]
    pub block_size: u64,

    #[command(flatten)]
    pub skip_invalid: SkipArgs,
}

/// How long opening a connection may take before the request fails.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The body options from the flags.
pub(super) fn body_options(args: &Args) -> Result<BodyOptions> {
    let extra = match &args.extra {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(Error::usage(format!(
                    "--extra: `{text}` is not a JSON object such as '{{\"temperature\": 0}}'"
                )));
            }
        },
    };
    if args.live_answers && args.endpoint.api().generation().is_none() {
        let name = clap::ValueEnum::to_possible_value(&args.endpoint)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        return Err(Error::usage(format!(
            "--live-answers: --endpoint {name} generates no answers to carry"
        )));
    }
    Ok(BodyOptions {
        endpoint: args.endpoint,
        model: args.model.clone(),
        model_map: args.model_map.clone(),
        stream: !args.no_stream,
        ignore_eos: args.ignore_eos,
        min_tokens: args.min_tokens,
        extra,
        live_answers: args.live_answers,
        session_header: match &args.session_header {
            None => None,
            Some(name) => Some(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    Error::usage(format!(
                        "--session-header: `{name}` is not an HTTP header name"
                    ))
                })?,
            ),
        },
    })
}

/// `--metrics-every D`: longer than 0.
pub fn parse_every(text: &str) -> std::result::Result<f64, String> {
    match crate::duration::parse_ms(text)? {
        ms if ms > 0.0 => Ok(ms),
        _ => Err(format!(
            "`{text}`: the time between scrapes must be longer than 0"
        )),
    }
}

/// `--metrics-match REGEX`.
fn parse_regex(text: &str) -> std::result::Result<regex::Regex, String> {
    regex::Regex::new(text).map_err(|e| e.to_string())
}

/// `--model-map FROM=TO`.
fn parse_model_map(text: &str) -> std::result::Result<(String, String), String> {
    match text.split_once('=') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() => {
            Ok((from.to_string(), to.to_string()))
        }
        _ => Err(format!(
            "`{text}` is not FROM=TO (a model name, `=`, its new name)"
        )),
    }
}

/// The certificates of a `--cacert` PEM file.
pub(super) fn ca_certificates(path: &str) -> Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        let mut cause: &dyn std::error::Error = &e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        Error::usage(format!("--cacert {path}: not PEM certificates ({cause})"))
    })?;
    if certs.is_empty() {
        return Err(Error::usage(format!(
            "--cacert {path}: no certificate in it (a PEM file has \"-----BEGIN CERTIFICATE-----\" blocks)"
        )));
    }
    Ok(certs)
}

/// `--header` flags and the API key.
pub(super) fn headers(args: &Args) -> Result<reqwest::header::HeaderMap> {
    use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (i, h) in args.headers.iter().enumerate() {
        // Never quoted: a header may hold a credential.
        let bad = || {
            Error::usage(format!(
                "--header number {}: not `Name: value` (not shown: it may hold a credential)",
                i + 1
            ))
        };
        let (name, value) = h.split_once(':').ok_or_else(bad)?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value.trim()).map_err(|_| {
            Error::usage(format!(
                "--header `{name}`: its value is not a valid header value (not shown: it may hold a credential)"
            ))
        })?;
        map.append(name, value);
    }
    if let Ok(key) = std::env::var(&args.api_key_env) {
        if !key.is_empty() && !map.contains_key(AUTHORIZATION) {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                Error::usage(format!(
                    "the API key in ${} is not a valid header value",
                    args.api_key_env
                ))
            })?;
            value.set_sensitive(true);
            map.insert(AUTHORIZATION, value);
        }
    }
    if !map.contains_key(CONTENT_TYPE) {
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    Ok(map)
}

/// The request URL for a base URL and an endpoint.
pub fn endpoint_url(base: &str, endpoint: Endpoint) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/completions") {
        return base.to_string();
    }
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}{}", endpoint.path())
}

/// The parsed request URL; only http and https are spoken.
pub(super) fn request_url(base: &str, endpoint: Endpoint) -> Result<reqwest::Url> {
    let text = endpoint_url(base, endpoint);
    let url = reqwest::Url::parse(&text)
        .map_err(|e| Error::usage(format!("--url: `{base}` is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::usage(format!(
            "--url: `{base}` is not an http or https URL"
        )));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn endpoint_urls() {
        let chat = Endpoint::Chat;
        assert_eq!(
            endpoint_url("http://h:8000", chat),
            "http://h:8000/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url("http://h:8000/v1/", chat),
            "http://h:8000/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url("http://h/x/v1/completions", chat),
            "http://h/x/v1/completions"
        );
        assert_eq!(
            endpoint_url("http://h", Endpoint::Completions),
            "http://h/v1/completions"
        );
    }
}
