//! One request: send, read the answer chunk by chunk, measure.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::Value;

use super::conversation::Transcript;
use super::plain::{BodyReader, Failure, Plain, reset_or_broken};
use super::request::Prepared;
use super::sse::SseParser;
use crate::api::{Answer, Endpoint};
use crate::result::{Measure, ResultRecord, Status, round_us};
use crate::text::one_line;

/// Everything a request needs besides its body.
#[derive(Debug)]
pub struct Target {
    pub client: reqwest::Client,
    pub url: reqwest::Url,
    pub headers: reqwest::header::HeaderMap,
    pub timeout: Option<Duration>,
    /// `--idle-timeout`: a streamed answer awaited, or any answer's body
    /// read, with no byte for this long ends as a timeout.
    pub idle_timeout: Option<Duration>,
    /// The most bytes one answer may hold in memory (--max-answer-bytes).
    pub max_answer_bytes: usize,
    /// Plain `http://` without --http2 goes this leaner way.
    pub plain: Option<Plain>,
    /// Whose answers these are: how they read.
    pub endpoint: Endpoint,
    /// The process's limit on open files, which caps connections in flight.
    pub open_files_limit: Option<u64>,
    /// `--session-header`: the header each request's session id goes in.
    pub session_header: Option<reqwest::header::HeaderName>,
    /// A connection failed for lack of a free file: 0 no, 1 yes, 2 reported.
    pub out_of_files: AtomicU8,
}

impl Target {
    /// True once, the first time after a connection failed for lack of a
    /// free file, so that the run can say why on standard error.
    pub fn take_out_of_files(&self) -> bool {
        self.out_of_files
            .compare_exchange(1, 2, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// What a response has shown so far; kept outside the request's future so
/// that a timeout keeps the partial timings. The figures go straight into
/// the result's own [`Measure`].
#[derive(Debug)]
pub struct Reading {
    /// Whose answer it is: how it reads.
    endpoint: Endpoint,
    /// The data of the event that ends a stream.
    stream_end: &'static [u8],
    /// The event a typed stream opens with, if the endpoint's streams are
    /// typed events ([`crate::api::About::start_event`]).
    start_event: Option<&'static str>,
    /// The opening event came.
    started: bool,
    /// A typed stream's first event that said something before the
    /// opening one (shown): an error if the opening one comes after it.
    early: Option<String>,
    /// A typed stream said something (content, results, usage).
    said: bool,
    pub measure: Measure,
    pub last_content_ms: Option<f64>,
    pub done: bool,
    /// `--timeout` or `--idle-timeout` ended the request.
    ran_out: Option<Limit>,
    /// The answer's text and tool calls, for requests a later turn may
    /// continue.
    pub transcript: Option<Transcript>,
}

/// The start of an event's data, on one line, as an error shows it.
fn shown(data: &[u8]) -> String {
    one_line(&String::from_utf8_lossy(&data[..data.len().min(80)]))
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

impl Reading {
    pub fn new(endpoint: Endpoint) -> Reading {
        Reading {
            endpoint,
            stream_end: endpoint.api().stream_end(),
            start_event: endpoint.api().start_event(),
            started: false,
            early: None,
            said: false,
            measure: Measure::default(),
            last_content_ms: None,
            done: false,
            ran_out: None,
            transcript: None,
        }
    }

    /// A limit ended the request: an idle one says for how long nothing
    /// came, and when it gave up.
    fn ran_out(&mut self, limit: Limit, sent: Instant) {
        self.ran_out = Some(limit);
        if let Limit::Idle(d) = limit {
            self.measure.e2e_ms = Some(ms_since(sent));
            let d = crate::duration::human(d.as_secs_f64() * 1000.0);
            self.measure.error = Some(format!("no byte from the server for {d} (--idle-timeout)"));
        }
    }

    /// Take the figures of one answer object (a chunk or a whole body).
    fn take_answer(&mut self, a: Answer, at_ms: f64, whole_body: bool) {
        if let Some(err) = a.error {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            self.measure.error.get_or_insert(one_line(&msg));
        }
        // A whole body has no first token to time: its arrival is its
        // first chunk, and TTFT stays null.
        if whole_body && self.measure.first_chunk_ms.is_none() {
            self.measure.first_chunk_ms = Some(at_ms);
        }
        // A chunk carrying the results (`choices`), even empty, is vLLM's
        // first chunk.
        if a.results.is_some() && self.measure.first_chunk_ms.is_none() {
            self.measure.first_chunk_ms = Some(at_ms);
        }
        if whole_body && a.results.unwrap_or(0) == 0 {
            let missing = self.endpoint.api().no_results();
            self.measure.error.get_or_insert(missing.into());
        }
        if let Some(f) = a.finish_reason {
            self.measure.finish_reason = Some(f.into_owned());
        }
        if a.content && !whole_body {
            match self.last_content_ms {
                None => self.measure.ttft_ms = Some(at_ms),
                Some(last) => self.measure.itl_ms.push(at_ms - last),
            }
            self.last_content_ms = Some(at_ms);
        }
        // Field by field: a stream may give the prompt's count in one
        // event and the answer's in a later one (Anthropic's).
        if let Some(u) = a.usage {
            let m = &mut self.measure;
            m.prompt_tokens = u.prompt_tokens.or(m.prompt_tokens);
            m.completion_tokens = u.completion_tokens.or(m.completion_tokens);
            m.cached_tokens = u.cached_tokens.or(m.cached_tokens);
        }
        if a.end {
            self.done = true;
        }
    }

    /// One SSE event's data. The answer ends where its protocol says:
    /// what comes after its end event is not read.
    fn take_event(&mut self, data: &[u8], at_ms: f64) {
        if self.done {
            return;
        }
        let data = data.trim_ascii();
        if data.is_empty() {
            return;
        }
        let Some(start) = self.start_event else {
            if data == self.stream_end {
                self.done = true;
                return;
            }
            if let Some(t) = &mut self.transcript {
                t.take(data);
            }
            match self.endpoint.read(data) {
                Ok(a) => self.take_answer(a, at_ms, false),
                Err(_) => self.malformed(data),
            }
            return;
        };
        // A typed stream: each event has a `type`, the opening one first.
        let a = match self.endpoint.read(data) {
            Ok(a) if a.untyped => {
                return self.foreign(&format!("an event without a type: {}", shown(data)));
            }
            Ok(a) => a,
            Err(_) if data == b"[DONE]" => return self.foreign("[DONE], the end of a chat stream"),
            Err(_) => return self.malformed(data),
        };
        // An opening event after one that said something (a ping says
        // nothing): the figures came out of order.
        if a.start && !self.started {
            if let Some(early) = self.early.take() {
                self.started = true;
                return self.foreign(&format!("an event before {start}: {early}"));
            }
        }
        self.started |= a.start;
        let says =
            a.results.is_some() || a.content || a.finish_reason.is_some() || a.usage.is_some();
        // The end with nothing said at all: not an answer. (A server may
        // leave the opening event out and still answer: llama.cpp sends it
        // with the first token, and holds a token that is part of a
        // character back, so such a stream starts with what follows.)
        if a.end && !self.started && !says && !self.said {
            let end = self.endpoint.api().end_event();
            self.foreign(&format!("{end} before {start}"));
            self.done = true;
            return;
        }
        if says && !self.started && self.early.is_none() {
            self.early = Some(shown(data));
        }
        self.said |= says;
        if let Some(t) = &mut self.transcript {
            t.take(data);
        }
        self.take_answer(a, at_ms, false);
    }

    fn malformed(&mut self, data: &[u8]) {
        self.measure
            .error
            .get_or_insert(format!("malformed SSE event: {}", shown(data)));
    }

    /// A stream that is not of the endpoint's protocol: `what` came.
    fn foreign(&mut self, what: &str) {
        let path = self.endpoint.path();
        self.measure
            .error
            .get_or_insert(format!("not a {path} stream: {what}"));
    }
}

/// The failure of a request that never got a response, described without
/// the URL's credentials (reqwest's text may hold the URL).
fn describe(e: &reqwest::Error, target: &Target) -> String {
    let kind = if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "response cut off"
    } else {
        "request failed"
    };
    describe_cause(kind, std::error::Error::source(e), target)
}

/// `kind: innermost cause`, on one line; running out of files says which
/// limit (and is noted for the run's warning).
fn describe_cause(
    kind: &str,
    cause: Option<&(dyn std::error::Error + 'static)>,
    target: &Target,
) -> String {
    let mut root = None;
    let mut source = cause;
    while let Some(s) = source {
        if out_of_files(s) {
            let _ =
                target
                    .out_of_files
                    .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
            let limit = target
                .open_files_limit
                .map_or_else(String::new, |n| format!(" ({n})"));
            return format!(
                "connection failed: too many open files: the open-file limit{limit} \
                 caps the connections in flight"
            );
        }
        root = Some(s);
        source = s.source();
    }
    match root {
        Some(root) => one_line(&format!("{kind}: {root}")),
        None => kind.to_string(),
    }
}

/// The process has no free file for another connection (EMFILE).
fn out_of_files(e: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(unix)]
    {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::EMFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// How many stale pooled connections the general client may meet in a row
/// before the request counts as failed.
const STALE_RETRIES: u32 = 16;

/// A pooled connection the server had closed: nothing of the request
/// reached it, so sending again is safe.
fn stale_connection(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() {
        return false;
    }
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if text.contains("connection closed before message completed")
            || text.contains("operation was canceled")
            || text.contains("connection was not ready")
        {
            return true;
        }
        source = s.source();
    }
    reset_or_broken(std::error::Error::source(e))
}

/// An answer's body, read piece by piece, from either transport.
enum Body<'a> {
    /// The response, and the last piece read from it.
    Reqwest(reqwest::Response, Bytes),
    Plain(BodyReader<'a>),
}

impl Body<'_> {
    async fn next(&mut self, target: &Target) -> Option<Result<&[u8], String>> {
        match self {
            Body::Reqwest(r, piece) => match r.chunk().await {
                Ok(Some(bytes)) => {
                    *piece = bytes;
                    Some(Ok(&piece[..]))
                }
                Ok(None) => None,
                Err(e) => Some(Err(describe(&e, target))),
            },
            Body::Plain(reader) => reader
                .next()
                .await
                .map(|r| r.map_err(|e| describe_cause("response cut off", Some(&e), target))),
        }
    }
}

/// Send the request; its status, whether the answer is an event stream,
/// and the body to read.
async fn request<'a>(
    target: &'a Target,
    req: &Prepared,
) -> Result<(StatusCode, bool, Body<'a>), String> {
    let event_stream = |h: &HeaderMap| {
        h.get(header::CONTENT_TYPE)
            .is_some_and(|v| super::sse::is_event_stream(v.as_bytes()))
    };
    if let Some(plain) = &target.plain {
        let header = target
            .session_header
            .as_ref()
            .zip(req.session_header.as_ref());
        return match plain.send(req.wire(), header).await {
            Ok(answer) => match StatusCode::from_u16(answer.status) {
                Ok(status) => Ok((status, answer.event_stream, Body::Plain(answer.body))),
                Err(_) => Err(format!(
                    "request failed: invalid HTTP status {}",
                    answer.status
                )),
            },
            Err(Failure::Connect(e)) => Err(describe_cause("connection failed", Some(&e), target)),
            Err(Failure::Request(e)) => Err(describe_cause("request failed", Some(&e), target)),
        };
    }
    let mut attempt = 0;
    loop {
        let mut post = target
            .client
            .post(target.url.clone())
            .headers(target.headers.clone());
        if let (Some(name), Some(value)) = (&target.session_header, &req.session_header) {
            post = post.header(name, value);
        }
        let r = post.body(req.wire().clone()).send().await;
        match r {
            Ok(resp) => {
                return Ok((
                    resp.status(),
                    event_stream(resp.headers()),
                    Body::Reqwest(resp, Bytes::new()),
                ));
            }
            // reqwest cannot be asked for a new connection, and the next
            // pooled one may be just as stale: each try uses one up.
            Err(e) if attempt < STALE_RETRIES && stale_connection(&e) => attempt += 1,
            Err(e) => return Err(describe(&e, target)),
        }
    }
}

/// `--timeout` and `--idle-timeout` watched by one timer per request, set
/// when a wait first has to wait, due at whichever limit comes first, and
/// moved on only when it fires before then. (A timer per chunk cost 24 %
/// more instructions per streamed request; a timer per limit, 4 %.)
struct Watch {
    /// `--timeout`: when the request gives up, however bytes come.
    deadline: Option<Instant>,
    /// `--idle-timeout`, while it applies.
    idle: Option<Duration>,
    /// When the last byte (or the request) came.
    last: Instant,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Which limit ended a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    Timeout,
    Idle(Duration),
}

impl Watch {
    fn new(timeout: Option<Duration>, idle: Option<Duration>, sent: Instant) -> Watch {
        Watch {
            deadline: timeout.map(|d| sent + d),
            idle,
            last: sent,
            timer: None,
        }
    }

    /// A byte came at `at`.
    fn saw_byte(&mut self, at: Instant) {
        self.last = at;
    }

    /// When the first limit runs out, and which it is (`--timeout` where
    /// both fall together).
    fn due(&self) -> Option<(Instant, Limit)> {
        let idle = self.idle.map(|d| (self.last + d, Limit::Idle(d)));
        match (self.deadline.map(|t| (t, Limit::Timeout)), idle) {
            (Some(t), Some(i)) => Some(if i.0 < t.0 { i } else { t }),
            (t, i) => t.or(i),
        }
    }

    /// `wait`, unless a limit runs out first (`Err`: which one).
    async fn within<T>(&mut self, wait: impl Future<Output = T>) -> Result<T, Limit> {
        let mut wait = std::pin::pin!(wait);
        let Some((first, _)) = self.due() else {
            return Ok(wait.await);
        };
        // The wait is polled first: most reads are ready at once (the
        // bytes are in the socket's buffer) and need no timer.
        poll_fn(|cx| {
            if let Poll::Ready(v) = wait.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            let due = self.due();
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(first.into())));
            // A limit that came in since the timer was set (--idle-timeout
            // once a whole answer's head came) may fall before it.
            if let Some((at, _)) = due
                && timer.deadline() > at.into()
            {
                timer.as_mut().reset(at.into());
            }
            while timer.as_mut().poll(cx).is_ready() {
                let Some((at, limit)) = due else {
                    break;
                };
                if Instant::now() >= at {
                    return Poll::Ready(Err(limit));
                }
                timer.as_mut().reset(at.into());
            }
            Poll::Pending
        })
        .await
    }
}

async fn exchange(target: &Target, req: &Prepared, sent: Instant, m: &mut Reading) {
    super::internal::fail_point(super::internal::Stage::Exchange, req.index);
    // A whole answer's head comes only once it is generated: its wait is
    // --timeout's alone.
    let idle = target.idle_timeout;
    let mut watch = Watch::new(target.timeout, idle.filter(|_| req.stream), sent);
    let answer = match watch.within(request(target, req)).await {
        Ok(answer) => answer,
        Err(limit) => return m.ran_out(limit, sent),
    };
    watch.idle = idle;
    watch.saw_byte(Instant::now());
    let (status, sse, mut body) = match answer {
        Ok(answer) => answer,
        Err(e) => {
            m.measure.error = Some(e);
            return;
        }
    };
    m.measure.http_status = Some(status.as_u16());
    let mut parser = SseParser::default();
    let mut whole = Vec::new();
    loop {
        let next = match watch.within(body.next(target)).await {
            Ok(next) => next,
            Err(limit) => return m.ran_out(limit, sent),
        };
        let Some(chunk) = next else {
            break;
        };
        match chunk {
            Ok(bytes) => {
                let now = Instant::now();
                watch.saw_byte(now);
                let at = super::dispatch::ms_between(sent, now);
                let max = target.max_answer_bytes;
                // A server that never ends a line or a body must not take
                // the run's memory: the request fails, the run goes on.
                if sse && status.is_success() {
                    parser.feed(bytes, |d| m.take_event(d, at));
                    if parser.pending() > max {
                        m.measure.e2e_ms = Some(ms_since(sent));
                        m.measure.error = Some(format!(
                            "an event of the answer is over --max-answer-bytes {max} bytes"
                        ));
                        return;
                    }
                } else {
                    if whole.len().saturating_add(bytes.len()) > max {
                        m.measure.e2e_ms = Some(ms_since(sent));
                        m.measure.error = Some(format!(
                            "the answer{} is over --max-answer-bytes {max} bytes",
                            if status.is_success() {
                                String::new()
                            } else {
                                format!(" (HTTP {})", status.as_u16())
                            }
                        ));
                        return;
                    }
                    whole.extend_from_slice(bytes);
                }
            }
            Err(e) => {
                m.measure.e2e_ms = Some(ms_since(sent));
                m.measure.error = Some(e);
                return;
            }
        }
    }
    let end = ms_since(sent);
    m.measure.e2e_ms = Some(end);
    if sse && status.is_success() {
        parser.finish(|d| m.take_event(d, end));
        if !m.done && m.measure.error.is_none() {
            let end = m.endpoint.api().end_event();
            m.measure.error = Some(format!("stream ended without {end}"));
        }
        return;
    }
    if let Some(t) = m.transcript.as_mut().filter(|_| status.is_success()) {
        t.take(&whole);
    }
    match m.endpoint.read(&whole) {
        Ok(a) => m.take_answer(a, end, status.is_success()),
        Err(_) if status.is_success() => {
            m.measure.error = Some("the response body is not JSON".into());
        }
        Err(_) => {}
    }
    if !status.is_success() {
        let detail = m.measure.error.take().unwrap_or_else(|| {
            // Redacted before the cut, so that no credential the server
            // echoes is left half shown.
            let near = &whole[..whole.len().min(200 + crate::cli::longest_secret())];
            let text = crate::cli::redact(&String::from_utf8_lossy(near)).into_owned();
            one_line(&String::from_utf8_lossy(
                &text.as_bytes()[..text.len().min(200)],
            ))
        });
        m.measure.error = Some(if detail.is_empty() {
            format!("HTTP {}", status.as_u16())
        } else {
            format!("HTTP {}: {detail}", status.as_u16())
        });
    }
}

/// The credentials a run knows: the API key, and the value of every
/// header whose name says it carries one (with and without its scheme,
/// `Bearer`), and the URL's user and password.
pub fn secrets(
    headers: &HeaderMap,
    url: Option<&reqwest::Url>,
    api_key: Option<String>,
) -> Vec<String> {
    const NAMES: [&str; 8] = [
        "auth",
        "key",
        "token",
        "secret",
        "cookie",
        "password",
        "session",
        "credential",
    ];
    let mut out: Vec<String> = api_key.into_iter().collect();
    for (name, value) in headers {
        let name = name.as_str();
        if !NAMES.iter().any(|n| name.contains(n)) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if let Some((_, token)) = value.split_once(' ') {
            out.push(token.trim().to_string());
        }
        out.push(value);
    }
    if let Some(p) = url.and_then(reqwest::Url::password) {
        out.push(p.to_string());
    }
    out
}

/// The skeleton of a request's result: everything known before sending.
pub fn skeleton(
    req: &Prepared,
    scheduled_ms: f64,
    sent_ms: f64,
    start_time: String,
) -> ResultRecord {
    ResultRecord {
        index: req.index,
        id: req.id.clone(),
        session_id: req.session_id.clone(),
        turn: req.turn,
        after: req.after.clone(),
        model: req.model.clone(),
        scheduled_ms,
        sent_ms,
        start_time,
        input_length: req.input_length,
        output_length: req.output_length,
        observed_cached_tokens: req.observed_cached_tokens,
        measure: Measure {
            status: Status::Cancelled,
            ..Measure::default()
        },
        ..ResultRecord::default()
    }
}

/// How a request's exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The answer completed, or failed on its own.
    Finished,
    /// `--timeout` ran out first.
    TimedOut,
    /// No byte came for `--idle-timeout`.
    Idle,
    /// The run was stopped first.
    Cancelled,
}

/// Send one request and measure it; never fails: every outcome is a result.
/// `cancel` completes when the run stops; the partial timings are kept.
/// For a request a later turn may continue, the answer's transcript too.
pub async fn send(
    target: &Target,
    req: &Prepared,
    mut result: ResultRecord,
    sent: Instant,
    cancel: impl std::future::Future<Output = ()>,
) -> (ResultRecord, Option<Transcript>) {
    let mut m = Reading {
        transcript: req.keep.then(|| Transcript::new(target.endpoint)),
        ..Reading::new(target.endpoint)
    };
    let ending = tokio::select! {
        () = exchange(target, req, sent, &mut m) => match m.ran_out {
            None => Ending::Finished,
            Some(Limit::Timeout) => Ending::TimedOut,
            Some(Limit::Idle(_)) => Ending::Idle,
        },
        () = cancel => Ending::Cancelled,
    };
    let transcript = m.transcript.take().filter(|_| ending == Ending::Finished);
    result.measure = m.measure;
    settle(&mut result.measure, ending);
    (result, transcript)
}

/// How the `error` of a result starts when a bug (a panic) made it.
pub const INTERNAL_ERROR: &str = "internal error";

/// The result `exchange` gives, or, if it panics, the result `fallback`
/// makes with status `error` and the panic's message: every request taken
/// on leaves its line, whatever goes wrong inside.
pub async fn or_error_result(
    exchange: impl std::future::Future<Output = (ResultRecord, Option<Transcript>)>,
    fallback: impl FnOnce() -> ResultRecord,
) -> (ResultRecord, Option<Transcript>) {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(exchange).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let mut r = fallback();
            r.measure.status = crate::result::Status::Error;
            r.measure.error = Some(super::internal::describe(&*panic));
            (r, None)
        }
    }
}

/// Round the measurements to the precision results are written with, and
/// decide the status.
pub fn settle(m: &mut Measure, ending: Ending) {
    for t in [&mut m.first_chunk_ms, &mut m.ttft_ms, &mut m.e2e_ms] {
        *t = t.map(round_us);
    }
    for gap in &mut m.itl_ms {
        *gap = round_us(*gap);
    }
    let http_ok = m.http_status.is_some_and(|s| (200..300).contains(&s));
    (m.status, m.error) = if ending == Ending::Cancelled {
        (
            Status::Cancelled,
            Some("the run stopped before the answer completed".into()),
        )
    } else if ending == Ending::TimedOut {
        (
            Status::Timeout,
            Some("no complete answer within --timeout".into()),
        )
    } else if ending == Ending::Idle {
        let said = m.error.take();
        (
            Status::Timeout,
            said.or_else(|| Some("no byte from the server for --idle-timeout".into())),
        )
    } else if let Some(e) = m.error.take() {
        (Status::Error, Some(e))
    } else if !http_ok {
        (Status::Error, Some("no response".into()))
    } else {
        (Status::Ok, None)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_exchange_still_gives_an_error_result() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r = rt.block_on(or_error_result(
            async {
                if "x".len() == 1 {
                    panic!("index out of bounds");
                }
                (ResultRecord::default(), None)
            },
            || ResultRecord {
                index: 7,
                ..ResultRecord::default()
            },
        ));
        let (r, transcript) = r;
        assert!(transcript.is_none());
        assert_eq!(r.index, 7);
        assert_eq!(r.measure.status, crate::result::Status::Error);
        assert_eq!(
            r.measure.error.as_deref(),
            Some("internal error: index out of bounds")
        );
    }

    fn feed_all(stream: &[u8]) -> Reading {
        feed_to(Endpoint::Chat, stream)
    }

    fn feed_to(endpoint: Endpoint, stream: &[u8]) -> Reading {
        let mut m = Reading::new(endpoint);
        let mut p = SseParser::default();
        let mut t = 0.0;
        for chunk in stream.chunks(7) {
            t += 1.0;
            p.feed(chunk, |d| m.take_event(d, t));
        }
        p.finish(|d| m.take_event(d, t));
        m
    }

    #[test]
    fn chat_stream_timings_usage_and_finish() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"1\"}]}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n\
data: [DONE]\n\n";
        let m = feed_all(stream);
        assert!(m.measure.first_chunk_ms.unwrap() < m.measure.ttft_ms.unwrap());
        assert_eq!(m.measure.itl_ms.len(), 2);
        assert_eq!(
            (
                m.measure.prompt_tokens,
                m.measure.completion_tokens,
                m.measure.cached_tokens
            ),
            (Some(5), Some(3), Some(2))
        );
        assert_eq!(m.measure.finish_reason.as_deref(), Some("stop"));
        assert!(m.done && m.measure.error.is_none());
    }

    #[test]
    fn error_events_and_malformed_data_become_errors() {
        let m =
            feed_all(b"data: {\"error\":{\"message\":\"out of\\nmemory\"}}\n\ndata: [DONE]\n\n");
        assert_eq!(m.measure.error.as_deref(), Some("out of memory"));
        let m = feed_all(b"data: {not json\n\n");
        assert_eq!(
            m.measure.error.as_deref(),
            Some("malformed SSE event: {not json")
        );
    }

    #[test]
    fn a_typed_stream_ends_where_its_protocol_says_and_is_of_its_protocol() {
        let start =
            b"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n";
        let stop = b"data: {\"type\":\"message_stop\"}\n\n";
        let late =
            b"data: {not json\n\ndata: {\"type\":\"error\",\"error\":{\"message\":\"late\"}}\n\n";
        let m = feed_to(Endpoint::Messages, &[&start[..], stop, late].concat());
        assert!(m.done);
        assert_eq!(m.measure.error, None);
        assert_eq!(m.measure.prompt_tokens, Some(3));
        let delta =
            b"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n";
        let m = feed_to(Endpoint::Messages, &[&delta[..], start, stop].concat());
        assert_eq!(
            m.measure.error.as_deref(),
            Some(
                "not a /v1/messages stream: an event before message_start: \
                 {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}"
            )
        );
        let ping = b"data: {\"type\":\"ping\"}\n\n";
        let m = feed_to(Endpoint::Messages, &[&ping[..], start, stop].concat());
        assert_eq!(m.measure.error, None);
        let m = feed_to(Endpoint::Messages, stop);
        assert_eq!(
            m.measure.error.as_deref(),
            Some("not a /v1/messages stream: message_stop before message_start")
        );
        let m = feed_to(
            Endpoint::Messages,
            b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
        );
        assert_eq!(
            m.measure.error.as_deref(),
            Some("not a /v1/messages stream: an event without a type: {\"choices\":[]}")
        );
        assert!(!m.done);
        let m = feed_to(Endpoint::Responses, b"data: [DONE]\n\n");
        assert_eq!(
            m.measure.error.as_deref(),
            Some("not a /v1/responses stream: [DONE], the end of a chat stream")
        );
        // Chat: what follows [DONE] is not read either.
        let m = feed_all(
            b"data: {\"choices\":[]}\n\ndata: [DONE]\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n",
        );
        assert!(m.done && m.measure.error.is_none());
    }

    #[test]
    fn one_timer_is_due_at_whichever_limit_comes_first() {
        let sent = Instant::now();
        let s = Duration::from_secs;
        let mut w = Watch::new(Some(s(600)), Some(s(120)), sent);
        assert_eq!(w.due(), Some((sent + s(120), Limit::Idle(s(120)))));
        // Bytes keep coming: idleness moves on, the timeout does not.
        w.saw_byte(sent + s(500));
        assert_eq!(w.due(), Some((sent + s(600), Limit::Timeout)));
        // Both at once: --timeout's.
        w.saw_byte(sent + s(480));
        assert_eq!(w.due(), Some((sent + s(600), Limit::Timeout)));
        w.idle = None;
        w.saw_byte(sent);
        assert_eq!(w.due(), Some((sent + s(600), Limit::Timeout)));
        let w = Watch::new(None, Some(s(2)), sent);
        assert_eq!(w.due(), Some((sent + s(2), Limit::Idle(s(2)))));
        assert_eq!(Watch::new(None, None, sent).due(), None);
    }

    #[test]
    fn an_idle_ending_is_a_timeout_with_its_own_message() {
        let mut m = Measure {
            error: Some("no byte from the server for 2m (--idle-timeout)".into()),
            http_status: Some(200),
            ..Measure::default()
        };
        settle(&mut m, Ending::Idle);
        assert_eq!(m.status, Status::Timeout);
        assert_eq!(
            m.error.as_deref(),
            Some("no byte from the server for 2m (--idle-timeout)")
        );
    }
}
