//! The simulated server behind trace-sim and `trace-replay --sim`: a small
//! OpenAI-compatible server with a latency model users can reason about,
//! for demos, tests and dry runs.
//!
//! Tokens are whitespace-separated words of the prompt (or the ids of a
//! token-id prompt). TTFT = base + prefill per uncached prompt token, with
//! a prefix cache of 512-token blocks; then one chunk per output token, at
//! an ITL that grows with the number of requests in flight.
//!
//! `/metrics` reports the model's own state under vLLM's metric names, so
//! that a demo shows the server's side beside the client's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub mod batch;
pub mod cache;
pub mod profile;
mod served;

use self::cache::BlockCache;
use self::profile::Profile;
use crate::api::{Api, Endpoint, Piece, Reply};
use crate::error::{Error, Result};
use crate::hash::{mix, stable_hash, unit_interval};

/// Tokens per prefix-cache block.
const CACHE_BLOCK: usize = 512;

/// `--sim` and `--sim-arg`: a simulated server in place of `--url`, as
/// trace-replay and trace-sweep take it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SimFlags {
    /// Replay against a simulated server (see trace-sim), started
    /// in-process on a free loopback port, instead of --url.
    #[arg(long, conflicts_with = "url")]
    pub sim: bool,

    /// A flag of trace-sim's model for --sim (`--sim-arg=--ttft-ms=500`);
    /// repeatable.
    #[arg(long = "sim-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sim_args: Vec<String>,
}

/// `--profile FILE`, as every tool that runs the twin takes it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ProfileFlag {
    /// The iteration-level model of this profile (a JSON file `trace-sim
    /// --fit` writes) rather than the per-request flags: steps that serve
    /// every running request's next token and a budget of prefill tokens,
    /// at most `slots` requests running. trace-sim serves it (or runs it
    /// in virtual time, --offline); trace-replay --sim and trace-sweep
    /// --sim serve it in process; trace-sweep --offline runs each speed
    /// through it.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
}

/// The latency model and fault injection.
#[derive(clap::Args, Debug, Clone)]
pub struct SimOptions {
    /// Model name reported by /v1/models.
    #[arg(long = "model", default_value = "sim")]
    pub model_name: String,

    /// Base time to first token, ms.
    #[arg(long, value_name = "MS", default_value_t = 20.0, value_parser = sim_ms)]
    pub ttft_ms: f64,

    /// Prefill time per uncached prompt token, µs.
    #[arg(long, value_name = "US", default_value_t = 20.0, value_parser = sim_ms)]
    pub prefill_us: f64,

    /// Time between output tokens with one request in flight, ms.
    #[arg(long, value_name = "MS", default_value_t = 5.0, value_parser = sim_ms)]
    pub itl_ms: f64,

    /// Growth of the ITL per extra request in flight (0.01 = 1 % each).
    #[arg(long, value_name = "F", default_value_t = 0.01, value_parser = slope)]
    pub batch_slope: f64,

    /// Serve at most N requests at once, as a server's batch does: the
    /// others wait in a queue, and the wait adds to their TTFT. 0 (the
    /// default): no limit. With --profile: its slots, unless given.
    #[arg(long, value_name = "N", value_parser = max_batch)]
    pub max_batch: Option<usize>,

    /// Prefix cache size, in 512-token blocks (0 disables it; 10000 by
    /// default). With --profile: the profile's, unless given.
    #[arg(long, value_name = "N", value_parser = cache_blocks)]
    pub cache_blocks: Option<usize>,

    #[command(flatten)]
    pub twin: ProfileFlag,

    /// Share of requests answered with HTTP 500.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = share)]
    pub error_rate: f64,

    /// Share of streamed answers cut off half-way (connection closed).
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = share)]
    pub disconnect_rate: f64,

    /// Wait this long before the first byte of every response, ms.
    #[arg(long, value_name = "MS", default_value_t = 0.0, value_parser = sim_ms)]
    pub stall_ms: f64,

    /// Seed of the fault draws, and of the draws of a profile's step
    /// spread (--profile, --offline): the same seed, the same times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Log each request's arrival to FILE: microseconds since the Unix
    /// epoch, one line per request, for checking a client's timing.
    #[arg(long, value_name = "FILE")]
    pub arrivals: Option<std::path::PathBuf>,
}

/// A number of the model's flags: finite, 0 or more, at most `max`.
fn bounded(text: &str, max: f64, what: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(x),
        Ok(_) => Err(format!("`{text}` is not {what}")),
        Err(_) => Err(format!("`{text}` is not a number")),
    }
}

/// A time of the model (ms, or µs per token): at most a day.
fn sim_ms(text: &str) -> Result<f64, String> {
    bounded(
        text,
        86_400_000.0,
        "a time from 0 to 86400000 (a day in ms)",
    )
}

fn slope(text: &str) -> Result<f64, String> {
    bounded(text, 1000.0, "a growth from 0 to 1000")
}

fn share(text: &str) -> Result<f64, String> {
    bounded(text, 1.0, "a share from 0 to 1")
}

/// Counts no server reaches: a batch of a million requests, a prefix
/// cache of 2^32 blocks (2 Ti tokens).
fn count(text: &str, max: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("`{text}` is not a whole number from 0 to {max}")),
    }
}

fn max_batch(text: &str) -> Result<usize, String> {
    count(text, 1_000_000)
}

fn cache_blocks(text: &str) -> Result<usize, String> {
    count(text, 1 << 32)
}

/// [`SimOptions`] alone, to read trace-sim's model flags from elsewhere
/// (trace-replay's `--sim-arg`).
#[derive(clap::Parser, Debug)]
#[command(name = "--sim-arg", no_binary_name = true, disable_help_flag = true)]
struct OptionsOnly {
    #[command(flatten)]
    options: SimOptions,
}

impl SimOptions {
    /// The options given as trace-sim flags (`--ttft-ms=500`, `--seed`,
    /// `3`); the error is clap's first line.
    pub fn from_flags(flags: &[String]) -> Result<SimOptions, String> {
        use clap::Parser;
        match OptionsOnly::try_parse_from(flags) {
            Ok(o) => Ok(o.options),
            Err(e) => {
                let text = e.render().to_string();
                let first = text.lines().next().unwrap_or_default();
                Err(first.strip_prefix("error: ").unwrap_or(first).to_string())
            }
        }
    }
}

impl SimOptions {
    /// Requests served at once at most; 0: no limit.
    pub fn max_batch(&self) -> usize {
        self.max_batch.unwrap_or(0)
    }

    /// The prefix cache's size in blocks.
    pub fn cache_blocks(&self) -> usize {
        self.cache_blocks.unwrap_or(DEFAULT_CACHE_BLOCKS)
    }

    /// The iteration-level model these options give: the profile file's,
    /// or the one the per-request flags describe; `--max-batch` and
    /// `--cache-blocks` given override it.
    pub fn model_profile(&self) -> Result<Profile> {
        let mut p = match &self.twin.profile {
            Some(path) => Profile::read(&path.to_string_lossy())?,
            None => {
                let mut p = Profile::from_flags(
                    self.ttft_ms,
                    self.prefill_us,
                    self.itl_ms,
                    self.batch_slope,
                );
                p.cache_blocks = DEFAULT_CACHE_BLOCKS;
                p.block_size = CACHE_BLOCK as u64;
                p
            }
        };
        if let Some(n) = self.max_batch {
            p.slots = n;
        }
        // `--seed` draws the step spread too.
        p.seed = self.seed;
        if let Some(n) = self.cache_blocks {
            p.cache_blocks = n;
        }
        Ok(p)
    }
}

/// The prefix cache's size when not given, in blocks.
const DEFAULT_CACHE_BLOCKS: usize = 10_000;

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            model_name: "sim".into(),
            ttft_ms: 20.0,
            prefill_us: 20.0,
            itl_ms: 5.0,
            batch_slope: 0.01,
            max_batch: None,
            cache_blocks: None,
            twin: ProfileFlag::default(),
            error_rate: 0.0,
            disconnect_rate: 0.0,
            stall_ms: 0.0,
            seed: 1,
            arrivals: None,
        }
    }
}

struct Sim {
    opts: SimOptions,
    /// The prefix cache's blocks, and its size.
    cache: Mutex<BlockCache>,
    cache_blocks: usize,
    /// Requests being served (the batch).
    in_flight: AtomicUsize,
    /// Places in the batch, when it is limited (per-request model).
    batch: Option<Arc<tokio::sync::Semaphore>>,
    /// The iteration-level model, with --profile.
    steps: Option<served::Driver>,
    requests: AtomicU64,
    arrivals: Option<Mutex<std::io::LineWriter<std::fs::File>>>,
    counts: Counts,
}

/// What `/metrics` reports beyond the requests in flight.
#[derive(Default)]
struct Counts {
    /// Requests not yet started: held by `--stall-ms`, or waiting for a
    /// place in a full batch (`--max-batch`): the model's queue.
    waiting: AtomicUsize,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    /// Prompt tokens looked up in the prefix cache, and those found.
    cache_queries: AtomicU64,
    cache_hits: AtomicU64,
    /// Answers that ran to their last token (all end at max_tokens).
    finished: AtomicU64,
}

/// A running server.
pub struct Server {
    /// `http://ADDR`, without a trailing slash.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
}

/// Bind and serve on the current tokio runtime, in the background.
pub async fn start(host: &str, port: u16, opts: SimOptions) -> Result<Server> {
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(|e| {
            Error::msg(format!(
                "cannot bind {host}:{port}: {}",
                crate::error::io_message(&e)
            ))
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::msg(format!("cannot read the bound address: {e}")))?;
    // With a profile, its slots and cache size (flags given override them).
    let profile = match &opts.twin.profile {
        Some(_) => Some(opts.model_profile()?),
        None => None,
    };
    let cache_blocks = profile
        .as_ref()
        .map_or(opts.cache_blocks(), |p| p.cache_blocks);
    let cache = Mutex::new(BlockCache::new(cache_blocks));
    let arrivals = match &opts.arrivals {
        Some(path) => Some(Mutex::new(std::io::LineWriter::new(
            std::fs::File::create(path).map_err(|e| Error::io(path.display().to_string(), e))?,
        ))),
        None => None,
    };
    let batch = (opts.max_batch() > 0 && profile.is_none())
        .then(|| Arc::new(tokio::sync::Semaphore::new(opts.max_batch())));
    let steps = profile.map(served::Driver::start);
    let sim = Arc::new(Sim {
        opts,
        cache,
        cache_blocks,
        in_flight: AtomicUsize::new(0),
        batch,
        steps,
        requests: AtomicU64::new(0),
        arrivals,
        counts: Counts::default(),
    });
    let mut app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics));
    // Every endpoint tracekit speaks is served.
    for endpoint in <Endpoint as clap::ValueEnum>::value_variants() {
        let api = endpoint.api();
        app = app.route(
            api.path(),
            post(move |State(sim): State<Arc<Sim>>, body: Bytes| answer(sim, body, api)),
        );
    }
    let app = app.with_state(sim);
    // Small chunks must leave at once: with Nagle's algorithm a token
    // could wait for the client's delayed ACK (40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Server {
        url: format!("http://{addr}"),
        addr,
    })
}

async fn models(State(sim): State<Arc<Sim>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": sim.opts.model_name, "object": "model", "owned_by": "tracekit"}]
    }))
    .into_response()
}

/// The Prometheus text exposition of the model's state, named as vLLM
/// names its metrics (vllm/v1/metrics/loggers.py), with its `model_name`
/// and `engine` labels. The KV cache is the prefix cache: its usage is the
/// share of its blocks held, its size in `vllm:cache_config_info`'s labels
/// (what `trace-sim --fit` reads it from). Nothing is ever preempted.
async fn metrics(State(sim): State<Arc<Sim>>) -> Response {
    let c = &sim.counts;
    let usage = sim.cache.lock().unwrap_or_else(|e| e.into_inner()).usage();
    let labels = format!(
        "engine=\"0\",model_name=\"{}\"",
        label_value(&sim.opts.model_name)
    );
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let families: [(&str, &str, &str, String); 9] = [
        (
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            sim.in_flight.load(Ordering::Relaxed).to_string(),
        ),
        (
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            (c.waiting.load(Ordering::Relaxed)
                + sim
                    .steps
                    .as_ref()
                    .map_or(0, |d| d.waiting.load(Ordering::Relaxed)))
            .to_string(),
        ),
        (
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            usage.to_string(),
        ),
        (
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            load(&c.cache_queries).to_string(),
        ),
        (
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            load(&c.cache_hits).to_string(),
        ),
        (
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemption from the engine.",
            "0".into(),
        ),
        (
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            load(&c.prompt_tokens).to_string(),
        ),
        (
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            load(&c.generation_tokens).to_string(),
        ),
        (
            "vllm:request_success_total",
            "counter",
            "Count of successfully processed requests.",
            load(&c.finished).to_string(),
        ),
    ];
    let mut text = String::new();
    for (name, kind, help, value) in families {
        let extra = if name == "vllm:request_success_total" {
            ",finished_reason=\"length\""
        } else {
            ""
        };
        text.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}{extra}}} {value}\n"
        ));
    }
    text.push_str(&format!(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"{CACHE_BLOCK}\",engine=\"0\",num_gpu_blocks=\"{}\"}} 1\n",
        sim.cache_blocks
    ));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// A label value escaped as the text format wants it.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

/// Prompt tokens: words of the text, or the ids of a token-id prompt.
fn prompt_tokens(req: &Value, api: &dyn Api) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for piece in api.read_prompt(req)? {
        match piece {
            Piece::Text(text) => out.extend(
                text.split_whitespace()
                    .map(|w| stable_hash(0, w.as_bytes())),
            ),
            Piece::Token(id) => out.push(id),
        }
    }
    Some(out)
}

/// The prompt's full blocks, each keyed by its whole prefix.
fn block_keys(tokens: &[u64]) -> Vec<u64> {
    let mut key = 0u64;
    tokens
        .chunks_exact(CACHE_BLOCK)
        .map(|block| {
            for &t in block {
                key = mix(key ^ t);
            }
            key
        })
        .collect()
}

impl Sim {
    /// Look up and insert the prompt's blocks; returns cached tokens.
    fn cached_tokens(&self, tokens: &[u64]) -> u64 {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if !cache.is_on() {
            return 0;
        }
        cache.admit(&block_keys(tokens), CACHE_BLOCK as u64, tokens.len() as u64)
    }

    fn draw(&self, n: u64, what: u64) -> f64 {
        unit_interval(mix(self.opts.seed ^ mix(n) ^ mix(what)))
    }
}

/// A request in the batch: leaves it (and gives its place back) when
/// dropped.
struct InFlight {
    sim: Arc<Sim>,
    _place: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A request in the queue (held by `--stall-ms`, or waiting for a place
/// in the batch) until dropped: served, or its client went away.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.sim.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn answer(sim: Arc<Sim>, body: Bytes, api: &'static dyn Api) -> Response {
    if let Some(log) = &sim.arrivals {
        use std::io::Write;
        let us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let _ = writeln!(log.lock().unwrap_or_else(|e| e.into_inner()), "{us}");
    }
    let n = sim.requests.fetch_add(1, Ordering::Relaxed);
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return error_response(StatusCode::BAD_REQUEST, "the body is not a JSON object"),
    };
    let Some(tokens) = prompt_tokens(&req, api) else {
        let what = api.prompt_key();
        return error_response(StatusCode::BAD_REQUEST, &format!("missing or bad `{what}`"));
    };
    let generation = api.generation();
    // An endpoint that generates nothing answers after the prefill.
    let max_tokens = match generation {
        Some(_) => req
            .get("max_completion_tokens")
            .or_else(|| req.get("max_tokens"))
            .or_else(|| req.get("max_output_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(16)
            .max(1),
        None => 0,
    };
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let generation = generation.filter(|_| stream);
    let usage_in_stream = req
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&sim.opts.model_name)
        .to_string();

    if sim.opts.stall_ms > 0.0 {
        let _waiting = Waiting::new(&sim.counts.waiting);
        tokio::time::sleep(Duration::from_secs_f64(sim.opts.stall_ms / 1000.0)).await;
    }
    if sim.draw(n, 1) < sim.opts.error_rate {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(
                json!({"error": {"message": "simulated server error", "type": "server_error"}}),
            ),
        )
            .into_response();
    }
    // A full batch: wait for a place, before prefill starts.
    let place = match &sim.batch {
        Some(batch) => {
            let _waiting = Waiting::new(&sim.counts.waiting);
            batch.clone().acquire_owned().await.ok()
        }
        None => None,
    };
    let cached = sim.cached_tokens(&tokens);
    let prompt = tokens.len() as u64;
    let counts = &sim.counts;
    counts.prompt_tokens.fetch_add(prompt, Ordering::Relaxed);
    if sim.cache_blocks > 0 {
        counts.cache_queries.fetch_add(prompt, Ordering::Relaxed);
        counts.cache_hits.fetch_add(cached, Ordering::Relaxed);
    }
    // The answer is a function of the seed and the prompt (a model at
    // temperature 0), and its blocks join the prefix cache with the
    // prompt's, as a server's KV cache keeps what it generated: a next
    // turn that carries this answer finds it cached.
    let voice = mix(sim.opts.seed ^ stable_hash(ANSWER_SEED, &tokens_bytes(&tokens)));
    let mut sequence = tokens;
    sequence.extend((0..max_tokens).map(|k| stable_hash(0, word(voice, k).as_bytes())));
    sim.cached_tokens(&sequence);
    let ttft = sim.opts.ttft_ms + sim.opts.prefill_us * (prompt - cached) as f64 / 1000.0;
    let counted = Counted {
        n,
        seed: voice,
        prompt,
        completion: max_tokens,
        cached,
    };
    sim.in_flight.fetch_add(1, Ordering::Relaxed);
    let guard = InFlight {
        sim: sim.clone(),
        _place: place,
    };
    let cut_at = (sim.draw(n, 2) < sim.opts.disconnect_rate).then_some(max_tokens / 2);

    let mut ticks = match &sim.steps {
        Some(driver) => Ticks::Steps(driver.submit(batch::Job {
            key: n,
            prompt,
            output: max_tokens,
            blocks: Vec::new(),
            known_cached: cached,
        })),
        None => Ticks::Formula {
            due: tokio::time::Instant::now() + Duration::from_secs_f64(ttft / 1000.0),
            started: false,
        },
    };
    let Some(generation) = generation else {
        ticks.next(&sim).await;
        for _ in 1..max_tokens {
            ticks.next(&sim).await;
        }
        drop(guard);
        let counts = &sim.counts;
        counts
            .generation_tokens
            .fetch_add(max_tokens, Ordering::Relaxed);
        counts.finished.fetch_add(1, Ordering::Relaxed);
        let text = words(voice, max_tokens);
        let reply = counted.reply(&model, &text);
        return axum::Json(api.answer(&reply)).into_response();
    };

    let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let _guard = guard;
        let reply = counted.reply(&model, "");
        for event in generation.opening(&reply) {
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                return;
            }
        }
        ticks.next(&sim).await;
        for k in 0..max_tokens {
            if k > 0 {
                if cut_at == Some(k) {
                    // A cut comes a whole gap after the last token was
                    // sent (not at its due time, which may have passed),
                    // so that token reaches the client before the close.
                    ticks.gap(&sim).await;
                } else {
                    ticks.next(&sim).await;
                }
            }
            if cut_at == Some(k) {
                let _ = tx
                    .send(Err(std::io::Error::other("simulated disconnect")))
                    .await;
                return;
            }
            let word = format!("{} ", word(voice, k));
            let event = generation.token(&reply, &word, k + 1 == max_tokens);
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                return;
            }
            sim.counts.generation_tokens.fetch_add(1, Ordering::Relaxed);
        }
        sim.counts.finished.fetch_add(1, Ordering::Relaxed);
        for event in generation.closing(&reply, usage_in_stream) {
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// When each token of an answer is due.
enum Ticks {
    /// The per-request formulas: the first token after the TTFT, each
    /// later one a gap after the one before. Sleeping until its due time
    /// (not for the gap) keeps the timer's lateness from adding up over
    /// an answer, so service times are what the model says.
    Formula {
        due: tokio::time::Instant,
        started: bool,
    },
    /// The iteration-level model's steps.
    Steps(tokio::sync::mpsc::UnboundedReceiver<batch::Event>),
}

impl Ticks {
    /// Wait for the next token.
    async fn next(&mut self, sim: &Sim) {
        match self {
            Ticks::Formula { due, started } => {
                if *started {
                    *due += itl(sim);
                }
                *started = true;
                tokio::time::sleep_until(*due).await;
            }
            Ticks::Steps(rx) => {
                let _ = rx.recv().await;
            }
        }
    }

    /// Wait one gap from now.
    async fn gap(&mut self, sim: &Sim) {
        match self {
            Ticks::Formula { .. } => tokio::time::sleep(itl(sim)).await,
            Ticks::Steps(rx) => {
                let _ = rx.recv().await;
            }
        }
    }
}

/// What an answer counts, for its [`Reply`].
#[derive(Clone, Copy)]
struct Counted {
    n: u64,
    seed: u64,
    prompt: u64,
    completion: u64,
    cached: u64,
}

impl Counted {
    fn reply<'a>(self, model: &'a str, text: &'a str) -> Reply<'a> {
        Reply {
            n: self.n,
            model,
            text,
            seed: self.seed,
            prompt_tokens: self.prompt,
            completion_tokens: self.completion,
            cached_tokens: self.cached,
        }
    }
}

fn itl(sim: &Sim) -> Duration {
    let n = sim.in_flight.load(Ordering::Relaxed).max(1) as f64;
    Duration::from_secs_f64(sim.opts.itl_ms * (1.0 + sim.opts.batch_slope * (n - 1.0)) / 1000.0)
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "answers",
    "with",
    "simulated",
    "tokens",
    "at",
    "a",
    "steady",
    "pace",
];

/// Seeds the answers' words, apart from the fault draws.
const ANSWER_SEED: u64 = 0x616e_7377_6572;

fn tokens_bytes(tokens: &[u64]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

fn word(n: u64, k: u64) -> &'static str {
    WORDS[(n.wrapping_add(k) % WORDS.len() as u64) as usize]
}

fn words(n: u64, count: u64) -> String {
    (0..count).map(|k| word(n, k)).collect::<Vec<_>>().join(" ")
}
