//! The readers' shared state: the requests so far, the skip policy,
//! warnings given once and the content hasher.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

use super::hashing::{self, Hasher};
use super::{Args, Fate, Request, chat, held, openai_batch};
use crate::cli::{self, Skipper};
use crate::error::{Error, Location, Result};
use crate::{record, tokenizer};

/// What the readers share: the requests so far, the skip policy, warnings
/// given once, and the content hasher.
pub struct Ctx {
    /// The requests kept so far (see [`held`]).
    pub(super) kept: held::Kept,
    /// Requests back from the hashing workers, to be kept.
    hashed: Vec<Request>,
    /// Requests waiting for their prompts to be hashed.
    pending: Vec<Request>,
    pub(super) skipper: Skipper,
    pub(super) read: u64,
    warned_naive: bool,
    keep_messages: bool,
    tokenizer: String,
    hashers: Option<hashing::Workers<Request>>,
    /// The tokenizer that counts what a log did not (loaded when needed).
    counter: Option<Hasher>,
    /// Bailian chat ids to their parent's (-1 for a first turn).
    pub(super) bailian_parents: HashMap<i64, i64>,
    /// OpenAI batch lines, joined on `custom_id` across inputs.
    pub(super) batch: openai_batch::Batch,
    /// Sessions of traces, by trace id, from trace records read.
    pub trace_sessions: HashMap<String, String>,
    /// Langfuse trace records read (they are not requests).
    pub traces_read: u64,
    /// `--rate`, for sources without arrival times that read it as they go.
    pub rate: Option<f64>,
    /// ShareGPT conversations read, across inputs (their order sets their start).
    pub(super) conversations: u64,
    /// Mooncake records read, across inputs (the rules across records).
    pub(super) mooncake: super::mooncake::Seen,
    /// The start of each record kept that has an id (by the id's hash), for
    /// the rule on a source's own `after` (see [`Ctx::check_after`]).
    starts: HashMap<u64, i64>,
    /// --no-graph: no `after` is written.
    no_graph: bool,
    /// Coding agents' calls, across inputs (a session's subagents are
    /// files of their own).
    pub(super) agents: super::agents::Store,
}

impl Ctx {
    pub(super) fn new(args: &Args) -> Ctx {
        Ctx {
            kept: held::Kept::new(args),
            hashed: Vec::new(),
            pending: Vec::new(),
            skipper: Skipper::new(&args.skip_invalid),
            read: 0,
            warned_naive: false,
            keep_messages: args.keep_messages,
            tokenizer: args.tokenizer.clone(),
            hashers: None,
            counter: None,
            batch: openai_batch::Batch::default(),
            bailian_parents: HashMap::new(),
            trace_sessions: HashMap::new(),
            traces_read: 0,
            rate: args.rate,
            conversations: 0,
            mooncake: super::mooncake::Seen::default(),
            starts: HashMap::new(),
            no_graph: args.no_graph,
            agents: super::agents::Store::new(args),
        }
    }

    /// Whether the prompts' text is written (--keep-messages).
    pub fn keep_messages(&self) -> bool {
        self.keep_messages
    }

    /// The `--tokenizer` given.
    pub fn tokenizer_name(&self) -> &str {
        &self.tokenizer
    }

    /// A request read from the source. Without --keep-messages its prompt
    /// is hashed (in batches, on every core) and the text dropped.
    pub fn push(&mut self, mut req: Request) -> Result<()> {
        if let Err(e) = within_limits(&req) {
            return self.bad(e.at(&req.loc));
        }
        self.read += 1;
        if self.keep_messages {
            openai_form(&mut req);
        }
        self.count_missing(&mut req)?;
        if self.kept.keeps(&req) {
            if let Err(e) = self.check_after(&req) {
                self.read -= 1;
                return self.bad(e.at(&req.loc));
            }
            if let Some(id) = &req.id {
                self.starts.insert(xxh3_64(id.as_bytes()), req.start_ns);
            }
        }
        let queue_empty =
            self.pending.is_empty() && self.hashers.as_ref().is_none_or(hashing::Workers::idle);
        if self.keep_messages || (req.prompt.is_none() && queue_empty) {
            return self.kept.push(req);
        }
        // Requests without a prompt queue too, so that the order of reading
        // (which breaks ties in the sort) is kept.
        self.pending.push(req);
        if self.pending.len() >= HASH_BATCH {
            self.hash_pending()?;
        }
        Ok(())
    }

    /// trace-validate's rule on `after`, for every source that writes its
    /// own (Dynamo's `wait_for`, kv-cache-tester's subagents, TraceLab's
    /// rounds, …): each id names a record kept before this one that starts
    /// no later, so that, written in start order (ties in the order read),
    /// it comes first. A cycle, an id of no record, or one that starts
    /// later is refused here rather than written.
    fn check_after(&self, req: &Request) -> std::result::Result<(), crate::error::FieldError> {
        if self.no_graph {
            return Ok(());
        }
        for id in &req.after {
            let name = crate::error::quote_value(&serde_json::Value::from(id.as_str()).to_string());
            match self.starts.get(&xxh3_64(id.as_bytes())) {
                None => {
                    return Err(crate::error::FieldError::new(
                        "after",
                        format!(
                            "{name} is the id of no record before this one: a record waits only \
                             for earlier ones (a cycle, or a record not in the trace)"
                        ),
                    ));
                }
                Some(&at) if at > req.start_ns => {
                    return Err(crate::error::FieldError::new(
                        "after",
                        format!(
                            "{name} starts {} ms after this record: written in order of \
                             arrival, this record would come before what it waits for",
                            crate::text::format_ms((at - req.start_ns) as f64 / 1e6)
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Count with the tokenizer what the log has as text but not as a
    /// count: the output of a served call, and (under --keep-messages,
    /// where no hashing counts it) the prompt. Each count is marked as
    /// ours in `observed.counted`.
    fn count_missing(&mut self, req: &mut Request) -> Result<()> {
        let output = req.fate == Fate::Ok
            && req.output_length == 0
            // LiteLLM logs 0 where the provider gave no usage.
            && req.observed.completion_tokens.is_none_or(|n| n == 0)
            && !req.embedding
            && req.passthrough.is_none();
        let text = req.output_text.take().filter(|t| output && !t.is_empty());
        let prompt = self.keep_messages
            && req.mark_counts
            && req.input_length.is_none_or(|n| n == 0)
            && req.observed.prompt_tokens.is_none()
            && req.prompt.is_some();
        if text.is_none() && !prompt {
            return Ok(());
        }
        if self.counter.is_none() {
            self.counter = Some(Hasher::new(tokenizer::Tokenizer::load(&self.tokenizer)?));
        }
        let counter = self.counter.as_ref().expect("loaded above");
        if let Some(text) = text {
            let n = counter.tokenizer().count(&text)? as u64;
            if n > 0 {
                req.output_length = n;
                req.observed.counted.push("output_length");
            }
        }
        if prompt {
            let n = counter
                .tokenize(req.prompt.as_ref().expect("checked"))?
                .len() as u64;
            req.input_length = Some(n);
            req.observed.counted.push("observed.prompt_tokens");
        }
        Ok(())
    }

    /// Send the queued requests to the hashing workers (started with the
    /// first batch), and store those already hashed.
    fn hash_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.hashers.is_none() {
            let hasher = Hasher::new(tokenizer::Tokenizer::load(&self.tokenizer)?);
            self.hashers = Some(hashing::Workers::start(hasher, hash_prompt));
        }
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(HASH_BATCH));
        let workers = self.hashers.as_mut().expect("started above");
        workers.submit(batch, &mut self.hashed)?;
        self.keep_hashed()
    }

    fn keep_hashed(&mut self) -> Result<()> {
        for req in self.hashed.drain(..) {
            self.kept.push(req)?;
        }
        Ok(())
    }

    /// Room for `n` more requests (a reader that knows how many it hands
    /// on).
    pub fn reserve(&mut self, n: usize) {
        self.kept.reserve(n);
    }

    /// Hash what is queued and wait for every batch.
    pub(super) fn finish_hashing(&mut self) -> Result<()> {
        self.hash_pending()?;
        if let Some(workers) = &mut self.hashers {
            workers.finish(&mut self.hashed)?;
            self.keep_hashed()?;
        }
        Ok(())
    }

    /// A row read at `loc`: the request, or the error that makes it bad.
    pub fn row(
        &mut self,
        row: std::result::Result<Request, crate::error::FieldError>,
        loc: &Location,
    ) -> Result<()> {
        match row {
            Ok(req) => self.push(req),
            Err(e) => self.bad(e.at(loc)),
        }
    }

    /// A record that cannot be converted: stop, or skip and count it.
    pub fn bad(&mut self, err: Error) -> Result<()> {
        self.read += 1;
        self.skipper.skip(err)
    }

    /// Say once that naive date-times are taken as UTC.
    pub fn naive_time(&mut self, loc: &Location, field: &str, value: &str) {
        if !self.warned_naive {
            self.warned_naive = true;
            cli::warn_at(
                loc,
                format!(
                    "field `{field}`: \"{value}\" has no time zone; naive date-times are taken as UTC"
                ),
            );
        }
    }
}

/// Under --keep-messages, the request's messages in OpenAI's form (see
/// [`chat`]), or the request marked to be left out, with a warning that
/// says why.
fn openai_form(req: &mut Request) {
    let Some(prompt) = req.prompt.as_mut() else {
        return;
    };
    let Some(messages) = &prompt.messages else {
        return;
    };
    match chat::to_openai(messages, prompt.tools.as_ref()) {
        Ok(None) => {}
        Ok(Some((messages, tools))) => {
            prompt.messages = Some(messages);
            prompt.tools = tools;
        }
        Err(why) => {
            cli::warn_at(
                &req.loc,
                format!(
                    "{why}; record left out (--keep-messages writes only messages an \
                     OpenAI-compatible server takes)"
                ),
            );
            req.fate = Fate::Unreplayable;
        }
    }
}

/// Requests queued for hashing at once.
const HASH_BATCH: usize = 512;

/// Replace a request's prompt by its block hashes, fitted to its length.
fn hash_prompt(hasher: &Hasher, req: &mut Request) -> Result<()> {
    let Some(prompt) = req.prompt.take() else {
        return Ok(());
    };
    let tokens = hasher.tokenize(&prompt)?;
    let length = match req.input_length.filter(|&n| n > 0) {
        Some(n) => n,
        None => {
            if req.mark_counts {
                req.observed.counted.insert(0, "input_length");
            }
            tokens.len() as u64
        }
    };
    req.input_length = Some(length);
    req.hashes = Some(hashing::fit(
        hashing::chain(&tokens, hashing::BLOCK),
        record::blocks_for(length, record::DEFAULT_BLOCK_SIZE) as usize,
    ));
    Ok(())
}

/// The figures a request would write stay within the record's limits
/// (crate::record), so that every tool can read the trace written.
fn within_limits(req: &Request) -> std::result::Result<(), crate::error::FieldError> {
    use crate::record::{MAX_SPAN_MS, MAX_TOKENS, at_most};
    for (field, n) in [
        ("input_length", req.input_length),
        ("output_length", Some(req.output_length)),
        ("max_tokens", req.max_tokens),
    ] {
        if let Some(n) = n {
            at_most(field, n, MAX_TOKENS, "tokens")?;
        }
    }
    for (field, ms) in [
        ("observed.ttft_ms", req.observed.ttft_ms),
        ("observed.e2e_ms", req.observed.e2e_ms),
        ("delay", req.delay_ms),
    ] {
        match ms {
            Some(ms) if ms.is_nan() || ms.abs() > MAX_SPAN_MS => {
                return Err(crate::error::FieldError::new(
                    field,
                    format!(
                        "{ms:e} ms is over the limit of {} ms",
                        crate::text::format_ms(MAX_SPAN_MS)
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
