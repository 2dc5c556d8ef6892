//! The server's own metrics during a run (`--metrics-url`): a thread of
//! its own, with its own runtime and HTTP client (trusting what the
//! requests' client trusts: `--cacert`, `--insecure`), scrapes the Prometheus
//! endpoint once before the first request, every `--metrics-every` from
//! the run's start, and once after the last result, and writes one line
//! per scrape (see [`crate::server_metrics::scrape_line`]).
//!
//! Nothing here can hold up a request: the dispatcher never waits for the
//! scraper, a scrape that fails or is slow is a warning and a count, and
//! the endpoint gets none of the replay's headers (a metrics URL on
//! another host must not receive the API key).

use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use regex::Regex;

use super::shared::Shared;
use crate::cli;
use crate::error::{Error, Result};
use crate::io::Output;
use crate::server_metrics::{self, Sample};

/// Warnings printed for failed scrapes; the rest are counted.
const MAX_FAILURE_WARNINGS: u64 = 3;

/// An exposition larger than this is not a metrics page.
const MAX_BODY: usize = 16 << 20;

/// The scraper thread and the means to stop it.
pub(super) struct Scraper {
    stop: tokio::sync::watch::Sender<bool>,
    first: mpsc::Receiver<()>,
    thread: thread::JoinHandle<()>,
}

/// What the scraper is given.
pub(super) struct Job {
    pub url: String,
    pub every_ms: f64,
    pub out: Output,
    pub keep: Option<Regex>,
    pub quiet: bool,
    /// The requests' TLS settings (`--cacert`, `--insecure`): an https
    /// endpoint on the server is trusted as the server is.
    pub tls: Tls,
}

/// The certificates an https scrape trusts besides the system's, and
/// whether it accepts any.
#[derive(Default)]
pub(super) struct Tls {
    pub cacert: Vec<reqwest::Certificate>,
    pub insecure: bool,
}

/// Why a scrape failed: reqwest's words and, when they say less, the
/// innermost cause (an untrusted certificate, a refused connection, a
/// timeout), without the URL.
fn failure(e: reqwest::Error) -> String {
    let e = e.without_url();
    let text = e.to_string();
    let mut cause: &dyn std::error::Error = &e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    let root = cause.to_string();
    if root == text {
        text
    } else {
        format!("{text}: {root}")
    }
}

/// The scraper's HTTP client: its own timeouts, the requests' TLS
/// settings, none of their headers.
fn client(timeout: Duration, tls: &Tls) -> Result<reqwest::Client> {
    let mut client = reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(timeout)
        .timeout(timeout);
    for cert in &tls.cacert {
        client = client.add_root_certificate(cert.clone());
    }
    if tls.insecure {
        client = client.danger_accept_invalid_certs(true);
    }
    client
        .build()
        .map_err(|e| Error::msg(format!("cannot build the HTTP client: {e}")))
}

/// The metrics URL: `http://host:port` alone means its `/metrics`.
pub(super) fn metrics_url(text: &str) -> Result<reqwest::Url> {
    let mut url = reqwest::Url::parse(text)
        .map_err(|e| Error::usage(format!("--metrics-url `{}`: {e}", shown(text))))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::usage(format!(
            "--metrics-url `{}`: give an http:// or https:// URL",
            shown(text)
        )));
    }
    if url.path() == "/" || url.path().is_empty() {
        url.set_path("/metrics");
    }
    Ok(url)
}

/// A URL for messages, without the credentials it may carry.
fn shown(text: &str) -> String {
    match reqwest::Url::parse(text) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => text
            .rsplit_once('@')
            .map_or(text, |(_, host)| host)
            .to_string(),
    }
}

impl Scraper {
    /// Start scraping; the first scrape begins at once. `origin` is the
    /// run's start, once the dispatcher has set it: every `t_ms` is
    /// measured from it, as the results' `sent_ms` are.
    pub(super) fn start(
        plan: Job,
        origin: Arc<OnceLock<Instant>>,
        shared: Arc<Shared>,
    ) -> Result<Scraper> {
        let url = metrics_url(&plan.url)?;
        // A scrape may take as long as the period, and at least a second:
        // a busy server answers /metrics late, not never.
        let timeout = Duration::from_secs_f64((plan.every_ms / 1000.0).max(1.0));
        let client = client(timeout, &plan.tls)?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (first_tx, first) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = first_tx.send(());
                        cli::warn(format!(
                            "--metrics-url: no scrape: cannot start a runtime: {e}"
                        ));
                        return;
                    }
                };
                let warn_to = shared.clone();
                let mut run = Run {
                    client,
                    url,
                    plan,
                    shared,
                    scrapes: 0,
                    failed: 0,
                    written: 0,
                    write_failed: false,
                };
                // A bug here loses no result (the scraper holds none): the
                // scrapes stop with one line, those taken are kept, and
                // the run goes on.
                let _caught = super::internal::caught_here();
                let scraped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    runtime.block_on(run.run(&origin, stopped, first_tx));
                }));
                if let Err(panic) = scraped {
                    let what = super::internal::describe(&*panic);
                    warn_to.print(|| {
                        cli::warn(format!(
                            "--metrics-url: the scrapes stopped: {what} (a bug: please report it)"
                        ))
                    });
                }
                run.end();
            })
            .map_err(|e| Error::msg(format!("cannot start a thread: {e}")))?;
        Ok(Scraper {
            stop,
            first,
            thread,
        })
    }

    /// Wait, at most `bound`, for the scrape taken before the first
    /// request. The run's clock has not started: this wait moves no
    /// request's schedule.
    pub(super) fn wait_first(&self, bound: Duration) {
        let _ = self.first.recv_timeout(bound);
    }

    /// Take the last scrape, write the file to its end, and report.
    pub(super) fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.thread.join();
    }
}

struct Run {
    client: reqwest::Client,
    url: reqwest::Url,
    plan: Job,
    shared: Arc<Shared>,
    scrapes: u64,
    failed: u64,
    written: u64,
    write_failed: bool,
}

impl Run {
    async fn run(
        &mut self,
        origin: &OnceLock<Instant>,
        mut stopped: tokio::sync::watch::Receiver<bool>,
        first_done: mpsc::Sender<()>,
    ) {
        let started = Instant::now();
        let first = self.scrape().await;
        let _ = first_done.send(());
        // The first scrape's time is written once the run's start is known.
        let start = loop {
            if let Some(s) = origin.get() {
                break *s;
            }
            if *stopped.borrow() {
                break started;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(1)) => {}
                _ = stopped.changed() => {}
            }
        };
        self.write(start, started, first);
        let every = Duration::from_secs_f64(self.plan.every_ms / 1000.0);
        let mut k: u32 = 1;
        while !*stopped.borrow() {
            let due = start + every * k;
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                _ = stopped.changed() => break,
            }
            let at = Instant::now();
            let scraped = self.scrape().await;
            self.write(start, at, scraped);
            // A scrape that overran its period skips the periods it took.
            let elapsed = at.saturating_duration_since(start).as_secs_f64();
            k = k.max((elapsed / every.as_secs_f64()).floor() as u32 + 1);
            let next_due = start + every * k;
            if Instant::now() >= next_due {
                k += 1;
            }
        }
        let at = Instant::now();
        let last = self.scrape().await;
        self.write(start, at, last);
    }

    async fn scrape(&mut self) -> std::result::Result<Vec<Sample>, String> {
        self.scrapes += 1;
        let response = self
            .client
            .get(self.url.clone())
            .header("accept", "text/plain; version=0.0.4")
            .send()
            .await
            .map_err(failure)?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(failure)? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY {
                return Err(format!("the page is larger than {} MB", MAX_BODY >> 20));
            }
        }
        let text = String::from_utf8(body).map_err(|_| "the page is not UTF-8 text".to_string())?;
        server_metrics::parse(&text).map_err(|e| format!("not the Prometheus text format: {e}"))
    }

    /// Write one scrape taken `at`, or count its failure.
    fn write(
        &mut self,
        start: Instant,
        at: Instant,
        scraped: std::result::Result<Vec<Sample>, String>,
    ) {
        super::internal::fail_point(super::internal::Stage::Scrape, self.scrapes);
        let t_ms = if at >= start {
            at.duration_since(start).as_secs_f64() * 1000.0
        } else {
            -(start.duration_since(at).as_secs_f64() * 1000.0)
        };
        let samples = match scraped {
            Ok(s) => s,
            Err(reason) => {
                self.failed += 1;
                if self.failed <= MAX_FAILURE_WARNINGS {
                    let url = shown(self.url.as_str());
                    self.shared.print(|| {
                        cli::warn(format!(
                            "--metrics-url: the scrape of {url} at {} failed: {reason}",
                            crate::duration::human(t_ms.max(0.0))
                        ))
                    });
                }
                return;
            }
        };
        if self.write_failed {
            return;
        }
        let keep = |key: &str| self.plan.keep.as_ref().is_none_or(|r| r.is_match(key));
        let line = server_metrics::scrape_line(t_ms, &samples, keep);
        match self.plan.out.write_line(line.as_bytes()) {
            Ok(()) => self.written += 1,
            Err(e) => {
                self.write_failed = true;
                self.shared.print(|| {
                    cli::warn(format!("--metrics-out: {e}; no more scrapes are written"))
                });
            }
        }
    }

    /// Close the file and say what was done.
    fn end(self) {
        let Run {
            plan,
            shared,
            scrapes,
            failed,
            written,
            url,
            ..
        } = self;
        let name = plan.out.name().to_string();
        if let Err(e) = plan.out.finish() {
            shared.print(|| cli::warn(format!("--metrics-out: {e}")));
        }
        let url = shown(url.as_str());
        if failed > 0 {
            shared.print(|| {
                cli::warn(format!(
                    "--metrics-url: {failed} of {scrapes} scrape{} of {url} failed; {written} written to {name}",
                    crate::text::plural(scrapes)
                ))
            });
        } else if !plan.quiet {
            shared.print(|| {
                cli::note(format!(
                    "{written} scrape{} of {url} written to {name}",
                    crate::text::plural(written)
                ))
            });
        }
    }
}
