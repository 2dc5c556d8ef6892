//! What a run does, decided once: the plan. trace-replay's flags become a
//! [`Plan`] through `Plan::try_from(&Args)`, which raises every usage error
//! before anything runs; code can also build a plan without clap
//! (trace-sweep builds one per speed as `Plan { speed, warmup, ..base }`).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::args::{Args, body_options, ca_certificates, headers, request_url};
use super::request::BodyOptions;
use super::schedule::Pace;
use super::scrape;
use crate::error::{Error, Result};
use crate::simulator::SimOptions;
use crate::simulator::profile::Profile;

/// Everything a run needs besides its records and where its results go.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The server and how to reach it.
    pub target: Target,
    /// What every request body gets.
    pub body: BodyOptions,
    /// How requests are paced and which records are run.
    pub pacing: Pacing,
    /// Timestamps and delays are divided by this (1: the trace's own
    /// times), as `trace-rescale --speed` divides them.
    pub speed: f64,
    /// The first N records are sent first, all at once, and waited for;
    /// their results are marked warmup.
    pub warmup: u64,
    /// The server's Prometheus metrics, scraped during the run.
    pub scrape: Option<Scrape>,
    /// Limits of requests and of the run.
    pub limits: Limits,
    /// Synthesized prompts.
    pub prompts: Prompts,
    /// Records that cannot be read or prepared are skipped (with a
    /// warning) instead of stopping the run.
    pub skip_invalid: bool,
    /// No progress nor notes on standard error.
    pub quiet: bool,
}

/// The server of a run.
#[derive(Clone, Debug)]
pub struct Target {
    pub server: Server,
    /// The request headers, the API key among them.
    pub headers: HeaderMap,
    /// The variable the API key was read from (for advice when requests
    /// are refused).
    pub api_key_env: String,
    /// An Authorization header was given besides the API key variable.
    pub auth_given: bool,
    /// HTTP/2 without TLS (h2c prior knowledge).
    pub http2: bool,
    /// CA certificates trusted besides the system's (`--cacert`).
    pub cacert: Vec<reqwest::Certificate>,
    /// Any certificate accepted (`--insecure`).
    pub insecure: bool,
}

/// Where requests go.
#[derive(Clone, Debug)]
pub enum Server {
    /// A server at this base URL.
    Url(String),
    /// A simulated server started in process for the run.
    Sim(SimOptions),
    /// The twin: a fitted profile's model serves every request in
    /// virtual time, with no server and no wall clock (trace-sim
    /// --offline, trace-sweep --offline).
    Twin(Box<Profile>),
}

/// How requests are paced and which records are run.
#[derive(Clone, Debug)]
pub struct Pacing {
    pub pace: Pace,
    /// Only the first N records (after the warmup ones).
    pub limit: Option<u64>,
    /// Stop sending after this long, ms; records due later are left out.
    pub duration_ms: Option<f64>,
    /// Start at this wall-clock time.
    pub start_at: Option<SystemTime>,
    /// Shard K of N.
    pub shard: Option<(u64, u64)>,
}

/// Limits of requests and of the run.
#[derive(Clone, Debug)]
pub struct Limits {
    /// A request gives up after this long.
    pub timeout: Duration,
    /// A request gives up after this long without a byte from the server
    /// (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// An answer holding more than this in memory fails.
    pub max_answer_bytes: usize,
    /// Stop when the first N completed requests all failed; 0 never.
    pub abort_after: u64,
    /// After a first signal, requests in flight get this long.
    pub grace: Duration,
}

/// Synthesized prompts.
#[derive(Clone, Debug)]
pub struct Prompts {
    pub tokenizer: String,
    pub seed: u64,
    pub block_size: u64,
}

/// The scrape of the server's metrics.
#[derive(Clone, Debug)]
pub struct Scrape {
    /// The metrics URL; `None`: the simulated server's own.
    pub url: Option<String>,
    pub every_ms: f64,
    /// Where each scrape's line is written.
    pub out: PathBuf,
    /// Only samples matching this.
    pub keep: Option<regex::Regex>,
}

impl TryFrom<&Args> for Plan {
    type Error = Error;

    /// The plan of trace-replay's flags; every usage error is raised here.
    /// With --dry-run nothing is sent: the server's flags are not checked.
    fn try_from(args: &Args) -> Result<Plan> {
        let body = body_options(args)?;
        let headers = if args.dry_run {
            headers(args).unwrap_or_default()
        } else {
            headers(args)?
        };
        let server = if args.dry_run {
            Server::Url(args.url.clone().unwrap_or_default())
        } else {
            let simulated = &args.simulated;
            if !simulated.sim_args.is_empty() && !simulated.sim {
                return Err(Error::usage("--sim-arg applies to --sim only"));
            }
            if args.metrics_out.is_some() && args.metrics_url.is_none() && !simulated.sim {
                return Err(Error::usage(
                    "--metrics-out needs --metrics-url URL (the server's Prometheus endpoint)",
                ));
            }
            if let Some(url) = &args.metrics_url {
                scrape::metrics_url(url)?;
            }
            let mut sim = SimOptions::from_flags(&simulated.sim_args)
                .map_err(|e| Error::usage(format!("--sim-arg: {e} (give trace-sim's flags)")))?;
            if let Some(p) = &args.twin.profile {
                if !simulated.sim {
                    return Err(Error::usage(
                        "--profile applies to --sim (a server of your own serves itself)",
                    ));
                }
                sim.twin.profile = Some(p.clone());
            }
            let server = match (&args.url, simulated.sim) {
                (Some(url), _) => Server::Url(url.clone()),
                (None, true) => Server::Sim(sim),
                (None, false) => return Err(Error::usage("give --url URL, or --sim")),
            };
            if let Server::Url(base) = &server {
                request_url(base, body.endpoint)?;
            }
            server
        };
        let cacert = match (&args.cacert, args.dry_run) {
            (Some(path), false) => ca_certificates(path)?,
            _ => Vec::new(),
        };
        Ok(Plan {
            target: Target {
                server,
                headers,
                api_key_env: args.api_key_env.clone(),
                auth_given: args.headers.iter().any(|h| {
                    h.split_once(':')
                        .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
                }),
                http2: args.http2,
                cacert,
                insecure: args.insecure,
            },
            body,
            pacing: Pacing {
                pace: match (args.concurrency, args.max_concurrency) {
                    (Some(n), _) => Pace::Closed {
                        workers: n as usize,
                    },
                    (None, m) => Pace::Open {
                        max_in_flight: m.map(|m| m as usize),
                    },
                },
                limit: args.limit,
                duration_ms: args.duration,
                start_at: args.start_at,
                shard: args.shard,
            },
            speed: 1.0,
            warmup: args.warmup,
            scrape: args.metrics_out.as_ref().map(|out| Scrape {
                url: args.metrics_url.clone(),
                every_ms: args.metrics_every,
                out: out.clone(),
                keep: args.metrics_match.clone(),
            }),
            limits: Limits {
                timeout: Duration::from_secs_f64(args.timeout / 1000.0),
                idle_timeout: (args.idle_timeout > 0.0)
                    .then(|| Duration::from_secs_f64(args.idle_timeout / 1000.0)),
                max_answer_bytes: usize::try_from(args.max_answer_bytes).unwrap_or(usize::MAX),
                abort_after: args.abort_after,
                grace: Duration::from_secs_f64(args.grace / 1000.0),
            },
            prompts: Prompts {
                tokenizer: args.tokenizer.clone(),
                seed: args.seed,
                block_size: args.block_size,
            },
            skip_invalid: args.skip_invalid.skip_invalid,
            quiet: args.quiet,
        })
    }
}

impl Plan {
    /// Closed loop: timestamps are ignored.
    pub fn closed_loop(&self) -> bool {
        matches!(self.pacing.pace, Pace::Closed { .. })
    }

    /// The twin serves the run, in virtual time.
    pub fn offline(&self) -> bool {
        matches!(self.target.server, Server::Twin(_))
    }

    /// A run of the twin of `profile` in virtual time, with trace-replay's
    /// defaults for everything else (`--model` named in every request
    /// when given).
    pub fn twin(profile: Profile, model: Option<String>) -> Result<Plan> {
        use clap::Parser;
        let defaults = Args::try_parse_from(["trace-replay", "--sim"])
            .map_err(|e| Error::msg(format!("trace-replay's defaults: {e}")))?;
        let mut plan = Plan::try_from(&defaults)?;
        plan.target.server = Server::Twin(Box::new(profile));
        plan.body.model = model;
        Ok(plan)
    }
}
