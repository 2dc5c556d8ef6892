//! `trace-sim --fit`: the model's parameters from a run's own results.
//!
//! Every token a request received marks the end of one of the server's
//! steps. Each step is rebuilt from the results' timestamps: the tokens
//! given within a small tolerance of one another end the same step; a
//! request's first token ends the step that prefilled its prompt, the
//! others one that decoded. A gap between two tokens of a request is then
//! one step's time, and a request's first token comes one step after its
//! send or the step before, whichever is later. The step times are fitted
//! to α + β·(prefill tokens) + γ·(decoding requests) + δ·(context
//! tokens) + ε·(requests prefilling) + ζ·(tokens before each prefill
//! token: the prompt's uncached part read against all before it, as if in
//! one chunk) by robust regression
//! ([`super::regress`]), α then taking the mean residual.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, FieldError, Result};
use crate::hash::stable_hash;
use crate::io::{self, Lines};
use crate::result::{ResultView, Status};
use crate::server_metrics::{KvCapacity, RunFigures};
use crate::simulator::batch::attended;
use crate::simulator::profile::{Profile, Quality, Source};
use crate::text::plural;

use super::check;

/// The most slots a profile may have (its reader's limit).
const MAX_SLOTS: usize = 1_000_000;

use super::regress;

/// Fewer requests or step times than these make no profile.
pub const MIN_REQUESTS: usize = 10;
pub const MIN_STEPS: usize = 50;

/// A run's first requests meet a cold server (buffers allocated, caches
/// empty): the steps before the first token of its request of this rank
/// (by send time) are left out of the fit.
const WARMUP_REQUESTS: usize = 3;

/// The time of a decoding request (γ) is known when its uncertainty moves
/// a decode step, over the batch's range, by at most this share of its
/// median time (or is at most a quarter of γ itself).
const BATCH_TERM_UNCERTAINTY: f64 = 0.05;

/// The terms, in the regression's column order.
const TERMS: [&str; 7] = [
    "alpha_ms",
    "beta_ms",
    "gamma_ms",
    "delta_ms",
    "epsilon_ms",
    "zeta_ms",
    "eta_ms",
];

/// One request as the results show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub sent: f64,
    /// Prompt tokens, and those the server found cached.
    pub prompt: u64,
    pub cached: u64,
    /// When each token came, ms from the run's start (the first at
    /// `sent + ttft`).
    pub tokens: Vec<f64>,
    /// The result's E2E, ms.
    pub e2e: f64,
}

/// A step's time and what it did.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// 1, prefill tokens, decoding requests, context tokens, requests
    /// prefilling, tokens before each prefill token, and the prompt tokens
    /// of a request that found the server idle (its time before the step,
    /// η: 0 in every other sighting): the regression's row.
    pub row: [f64; 7],
    pub ms: f64,
    /// Whether it gave the request its first token.
    pub first: bool,
    /// When it ended, ms from the run's start.
    pub at: f64,
}

/// What the flags fixed: the fit leaves it as they say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Given {
    pub slots: bool,
    pub cache: bool,
}

/// What the server's scrapes tell the fit.
#[derive(Debug, Default)]
pub struct Scraped {
    pub figures: Option<RunFigures>,
    pub kv: Option<KvCapacity>,
}

/// What a fit gives: the profile, a report for people, and why the
/// profile is not to be trusted (empty when it is): trace-sim refuses to
/// write it then, unless `--force`.
#[derive(Debug)]
pub struct Fitted {
    pub profile: Profile,
    pub report: String,
    pub problems: Vec<String>,
}

/// Fit a profile to results files, each one run (on a timeline of its
/// own); `base` gives what the fit does not (the prefill chunk, and the
/// slots and the cache where `given` says). A result line met twice (a
/// file given twice) is refused: its requests would count twice.
pub fn fit_files(
    results: &[String],
    metrics: &[String],
    base: &Profile,
    given: Given,
) -> Result<Fitted> {
    let mut runs = Vec::new();
    let mut read = 0u64;
    let mut itl = Vec::new();
    // Each line's hash: the file (its index in `results`) and line it was
    // first met at.
    let mut met: HashMap<u64, (usize, u64)> = HashMap::new();
    for (file, path) in results.iter().enumerate() {
        let specs = io::input_specs(std::slice::from_ref(path))?;
        let mut lines = Lines::new(&specs);
        let mut seen = Vec::new();
        while let Some((loc, line)) = lines.next_line()? {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            read += 1;
            let v = ResultView::read(line, &mut itl).map_err(|e| e.at(&loc))?;
            if let Some((f, l)) = met.insert(stable_hash(0, line.as_bytes()), (file, loc.line)) {
                return Err(FieldError::record(format!(
                    "this result is also {}:{l}: a run's results given twice would count \
                     its requests twice; give each run once",
                    results[f]
                ))
                .at(&loc));
            }
            if let Some(s) = seen_of(&v, &itl) {
                seen.push(s);
            }
        }
        runs.push(seen);
    }
    let mut scrapes = Vec::new();
    let mut kv: Option<KvCapacity> = None;
    for m in metrics {
        let (read, stated) = crate::server_metrics::read_file_and_capacity(Path::new(m))?;
        scrapes.extend(read);
        if let Some(c) = stated
            && kv.as_ref().is_none_or(|k| c.tokens > k.tokens)
        {
            kv = Some(c);
        }
    }
    let scraped = Scraped {
        figures: (!scrapes.is_empty()).then(|| RunFigures::of(&scrapes)),
        kv,
    };
    let mut fitted = fit(&runs, base, given, &scraped)?;
    let source = fitted
        .profile
        .fitted_from
        .get_or_insert_with(Source::default);
    source.results = results.to_vec();
    source.metrics = metrics.to_vec();
    source.requests = read;
    let used: usize = runs.iter().map(Vec::len).sum();
    fitted.report = format!(
        "fitted from {} ({read} results, {used} used)\n{}",
        results.join(", "),
        fitted.report
    );
    Ok(fitted)
}

/// An ok result with its first token, as the fit sees it.
fn seen_of(v: &ResultView<'_>, itl: &[f64]) -> Option<Seen> {
    if v.status != Status::Ok || v.warmup {
        return None;
    }
    let ttft = v.ttft_ms?;
    let first = v.sent_ms + ttft;
    let mut tokens = Vec::with_capacity(itl.len() + 1);
    tokens.push(first);
    let mut t = first;
    for g in itl {
        t += g;
        tokens.push(t);
    }
    let prompt = v.prompt_tokens.or(v.input_length)?;
    Some(Seen {
        sent: v.sent_ms,
        prompt,
        cached: v.cached_tokens.unwrap_or(0).min(prompt),
        e2e: v.e2e_ms.unwrap_or(t - v.sent_ms).max(t - v.sent_ms),
        tokens,
    })
}

/// Every step time the requests show, with what the step did.
pub fn observe(seen: &[Seen]) -> Vec<Observed> {
    // Every token: (time, request, its place in the answer).
    let mut all: Vec<(f64, usize, usize)> = seen
        .iter()
        .enumerate()
        .flat_map(|(r, s)| s.tokens.iter().enumerate().map(move |(j, t)| (*t, r, j)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let times: Vec<f64> = all.iter().map(|e| e.0).collect();
    let tol = tolerance(seen);
    // What the step ending at `t` did.
    let step = |t: f64| {
        let lo = times.partition_point(|x| *x < t - tol);
        let hi = times.partition_point(|x| *x <= t + tol);
        let mut row = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        for &(_, r, j) in &all[lo..hi] {
            let s = &seen[r];
            if j == 0 {
                // At least the last prompt token is computed.
                let from = s.cached.min(s.prompt.saturating_sub(1));
                row[1] += (s.prompt - from).max(1) as f64;
                row[4] += 1.0;
                row[5] += attended(from, s.prompt - from) as f64;
            } else {
                row[2] += 1.0;
                row[3] += (s.prompt + j as u64) as f64;
            }
        }
        (row, lo)
    };
    let mut out = Vec::new();
    for s in seen {
        for (j, &t) in s.tokens.iter().enumerate() {
            let (mut row, lo) = step(t);
            let start = if j > 0 {
                s.tokens[j - 1]
            } else {
                // The step before ended at the latest token before this
                // step's; the request waited for it if it came earlier.
                let before = if lo > 0 {
                    times[lo - 1]
                } else {
                    f64::NEG_INFINITY
                };
                // Sent to an idle server, its time is its way to the
                // scheduler (η) and then the step; sent while steps ran,
                // it made that way beside them, and its time is the step's.
                if s.sent >= before {
                    row[6] = s.prompt as f64;
                }
                before.max(s.sent)
            };
            let ms = t - start;
            if ms > 0.0 {
                out.push(Observed {
                    row,
                    ms,
                    first: j == 0,
                    at: t,
                });
            }
        }
    }
    out
}

/// Tokens closer than this end the same step: a quarter of the median gap
/// between a request's tokens (client-side jitter is far less, a step far
/// more).
fn tolerance(seen: &[Seen]) -> f64 {
    let mut gaps: Vec<f64> = seen
        .iter()
        .flat_map(|s| s.tokens.windows(2).map(|w| w[1] - w[0]))
        .filter(|g| *g > 0.0)
        .collect();
    if gaps.is_empty() {
        return 1e-6;
    }
    gaps.sort_by(f64::total_cmp);
    (gaps[gaps.len() / 2] / 4.0).max(1e-6)
}

/// The most requests running at once, and whether any request waited for
/// a place while that many ran (then the slots are known).
fn slots_seen(seen: &[Seen]) -> (u64, bool) {
    // +1 at a request's first token, −1 after its last.
    let mut edges: Vec<(f64, i64)> = Vec::new();
    for s in seen {
        edges.push((s.tokens[0], 1));
        edges.push((*s.tokens.last().expect("a first token"), -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut now = 0i64;
    let mut max = 0i64;
    // (time, running) after each edge.
    let mut levels = Vec::with_capacity(edges.len());
    for (t, d) in &edges {
        now += d;
        max = max.max(now);
        levels.push((*t, now));
    }
    // A request waited for a place if, at some moment between its send and
    // its first token, the batch was full and a request left it just then.
    let full_at = |from: f64, to: f64| {
        let i = levels.partition_point(|(t, _)| *t <= from);
        levels[i.saturating_sub(1)..]
            .iter()
            .take_while(|(t, _)| *t < to)
            .any(|(_, n)| *n == max)
    };
    let waited = seen.iter().any(|s| {
        let tol = tolerance(std::slice::from_ref(s));
        s.tokens[0] - s.sent > 2.0 * tol && full_at(s.sent, s.tokens[0])
    });
    (max.max(0) as u64, waited && max > 0)
}

/// The steps of a run the fit uses: all but those of its warm-up (before
/// the first token of its [`WARMUP_REQUESTS`]th request, by send time).
fn observe_run(run: &[Seen]) -> Vec<Observed> {
    let mut sent: Vec<(f64, f64)> = run.iter().map(|s| (s.sent, s.tokens[0])).collect();
    sent.sort_by(|a, b| a.0.total_cmp(&b.0));
    let warm = sent
        .get(WARMUP_REQUESTS)
        .map_or(f64::NEG_INFINITY, |(_, first)| *first);
    let mut steps = observe(run);
    steps.retain(|o| o.at >= warm);
    steps
}

/// Why the time of a decoding request (γ) is not known, if it is not:
/// the decode steps show too few batch sizes to tell it from the step's
/// own (α). Known when its standard error, over the batch's range (1 to
/// `max_running`), moves a decode step by at most
/// [`BATCH_TERM_UNCERTAINTY`] of its median time.
fn batch_unknown(
    steps: &[Observed],
    x: &[Vec<f64>],
    y: &[f64],
    f: &regress::Fit,
    max_running: u64,
) -> Option<String> {
    let mut decode: Vec<f64> = steps
        .iter()
        .filter(|o| o.row[4] == 0.0)
        .map(|o| o.ms)
        .collect();
    if decode.is_empty() {
        return None;
    }
    decode.sort_by(f64::total_cmp);
    let median = decode[decode.len() / 2];
    // With γ fitted to 0 (it came out below 0), the error is γ's as if
    // it were in the fit.
    let mut coef = f.coef.clone();
    let mut on = vec![true; coef.len()];
    for j in f.singular.iter().chain(&f.negative) {
        on[*j] = false;
    }
    if coef[2] == 0.0 {
        coef[2] = f64::MIN_POSITIVE;
        on[2] = true;
    }
    let se = regress::std_errors(x, y, &coef, &on).map_or(f64::INFINITY, |se| se[2]);
    // Known well enough when it hardly moves a step over the batch's
    // range, or is itself fitted to within a quarter.
    let moved = se * (max_running - 1) as f64;
    if moved <= BATCH_TERM_UNCERTAINTY * median || se <= 0.25 * f.coef[2] {
        return None;
    }
    // The most common batch size of the decode steps, and its share.
    let mut count: HashMap<u64, usize> = HashMap::new();
    for o in steps.iter().filter(|o| o.row[4] == 0.0) {
        *count.entry(o.row[2] as u64).or_default() += 1;
    }
    let (top, c) = count
        .iter()
        .max_by_key(|(k, c)| (**c, std::cmp::Reverse(**k)))
        .map_or((0, 0), |(k, c)| (*k, *c));
    Some(format!(
        "gamma_ms: {:.0} % of the decode steps had {top} request{} decoding: the run cannot \
         tell a step's own time (alpha_ms) from a decoding request's (gamma_ms {:.4} ± {:.4} \
         ms); fit a run at a lighter load with it (give both results files)",
        c as f64 / decode.len() as f64 * 100.0,
        plural(top),
        f.coef[2],
        se
    ))
}

/// Fit a profile to the requests seen, one list per run.
pub fn fit(runs: &[Vec<Seen>], base: &Profile, given: Given, scraped: &Scraped) -> Result<Fitted> {
    let runs: Vec<&Vec<Seen>> = runs.iter().filter(|r| !r.is_empty()).collect();
    let steps: Vec<Observed> = runs.iter().flat_map(|r| observe_run(r)).collect();
    let requests: usize = runs.iter().map(|r| r.len()).sum();
    if requests < MIN_REQUESTS || steps.len() < MIN_STEPS {
        let (n, k) = (requests as u64, steps.len() as u64);
        return Err(Error::msg(format!(
            "too little to fit a profile: {n} request{} with a first token and {k} step \
             time{} (at least {MIN_REQUESTS} and {MIN_STEPS}): run more requests",
            plural(n),
            plural(k)
        )));
    }
    let mut unknown = Vec::new();
    let mut problems = Vec::new();
    let (mut max_running, mut waited) = (0, false);
    for r in &runs {
        let (m, w) = slots_seen(r);
        max_running = max_running.max(m);
        waited |= w;
    }
    let mut terms = [true; 7];
    if max_running <= 1 {
        terms[2] = false;
        let note = "gamma_ms: never more than one request in flight: the batch terms are \
                    unknown (0); fit a run where requests overlap";
        unknown.push(note.to_string());
        problems.push(note.to_string());
    }
    let x: Vec<Vec<f64>> = steps.iter().map(|o| o.row.to_vec()).collect();
    let y: Vec<f64> = steps.iter().map(|o| o.ms).collect();
    let f = regress::fit(&x, &y, &terms);
    for j in &f.singular {
        unknown.push(format!(
            "{}: the run cannot tell it from the other terms (0)",
            TERMS[*j]
        ));
    }
    for j in &f.negative {
        unknown.push(format!(
            "{}: the run shows no time of its own for it (fitted below 0, left at 0)",
            TERMS[*j]
        ));
    }
    if max_running > 1
        && let Some(note) = batch_unknown(&steps, &x, &y, &f, max_running)
    {
        // A saturated run: (nearly) every decode step ran the same batch,
        // and a step's own time is not told from its requests'. A lighter
        // load would be predicted from a guess.
        unknown.push(note.clone());
        problems.push(note);
    }
    let c = &f.coef;
    // The robust fit follows the usual step; stalls (a busy machine, a
    // server's housekeeping) and tokens the client got at once spread the
    // steps around it: the spread keeps them, as observed / model ratios,
    // so that the twin's steps vary as the run's did and their mean (what
    // throughput and queues follow) stays the run's.
    let mut profile = Profile {
        alpha_ms: c[0].max(0.0),
        beta_ms: c[1],
        gamma_ms: c[2],
        delta_ms: c[3],
        epsilon_ms: c[4],
        zeta_ms: c[5],
        eta_ms: c[6],
        fitted_from: None,
        quality: None,
        ..base.clone()
    };
    let queue = (scraped.figures.as_ref()).and_then(|s| Some((s.running?, s.waiting?)));
    let slots_note = if given.slots {
        format!("{} (given)", profile.slots)
    } else if let Some((running, waiting)) = queue.filter(|(_, w)| w.max > 0.0) {
        if !(1.0..=MAX_SLOTS as f64).contains(&running.max) {
            return Err(Error::msg(format!(
                "the scrapes show at most {} requests running while some waited: not a \
                 server's slots (1 to {MAX_SLOTS}); give --max-batch",
                running.max
            )));
        }
        profile.slots = running.max.round() as usize;
        format!(
            "{} (the scrapes: at most {} waiting beside them)",
            profile.slots, waiting.max
        )
    } else if waited {
        profile.slots = max_running as usize;
        format!("{max_running} (requests waited while {max_running} ran)")
    } else {
        profile.slots = max_running as usize;
        unknown.push(format!(
            "slots: no request waited for a place (at most {max_running} ran at once): \
             at least {max_running}; give --max-batch"
        ));
        format!("{max_running} (at least)")
    };
    let cache_note = cache(&mut profile, given, scraped.kv.as_ref(), &mut unknown);
    profile.step_spread = spread(&steps, &profile, false);
    profile.prefill_spread = spread(&steps, &profile, true);
    // Residuals, overall and by kind of step.
    let model = profile.clone();
    let errors = |first: Option<bool>| {
        let mut e: Vec<f64> = steps
            .iter()
            .filter(|o| first.is_none_or(|f| o.first == f))
            .map(|o| (o.ms - predict(&model, &o.row)).abs() / o.ms * 100.0)
            .collect();
        e.sort_by(f64::total_cmp);
        e
    };
    let pct = |e: &[f64], q: f64| {
        if e.is_empty() {
            f64::NAN
        } else {
            e[((e.len() - 1) as f64 * q).round() as usize]
        }
    };
    let all = errors(None);
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    let total: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    let resid: f64 = steps
        .iter()
        .map(|o| (o.ms - predict(&profile, &o.row)).powi(2))
        .sum();
    let r2 = if total > 0.0 {
        1.0 - resid / total
    } else {
        1.0
    };
    // The prefill steps' level, as the runs' TTFTs show it: a first token
    // the client got together with the step before's (tokens bunched on
    // the way) makes a prefill step look shorter or longer than it was,
    // and its spread with it. The prefill spread is scaled to give the
    // runs' own TTFT p50 best; a level not found within 0.5-2x means the
    // model does not explain the first tokens, and is refused.
    let owned: Vec<Vec<Seen>> = runs.iter().map(|r| r.to_vec()).collect();
    let real = check::real(&owned);
    let scaled = calibrate_prefill(&mut profile, &real, &owned);
    let scale_note = match scaled {
        Some(c) if (c - 1.0).abs() > 0.005 => {
            format!("  prefill steps scaled by {c:.3}, so that the fitted run's TTFT p50 holds\n")
        }
        Some(_) => String::new(),
        None => {
            let note = format!(
                "the prefill steps would take under {:.1} or over {:.1} times their observed \
                 time for the fitted run's TTFT p50 to hold: the model does not explain its \
                 first tokens",
                1.0 / MAX_PREFILL_SCALE,
                MAX_PREFILL_SCALE
            );
            problems.push(note.clone());
            format!("  {note}\n")
        }
    };
    // The runs' mean rate: their gaps between sends over their spans.
    let (mut gaps, mut span_ms) = (0usize, 0.0);
    for r in &runs {
        let (lo, hi) = r
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| {
                (a.min(s.sent), b.max(s.sent))
            });
        gaps += r.len() - 1;
        span_ms += hi - lo;
    }
    // The fitted run predicted: the profile as written, over the runs'
    // own arrivals.
    let figures = check::compare(&real, &check::twin(&profile, &owned));
    if let Some(v) = check::verdict(&figures) {
        problems.push(v);
    }
    profile.quality = Some(Quality {
        median_error_pct: round3(pct(&all, 0.5)),
        p90_error_pct: round3(pct(&all, 0.9)),
        r2: round3(r2),
        unknown: unknown.clone(),
        fitted_run: figures.clone(),
        warnings: Vec::new(),
    });
    profile.fitted_from = Some(Source {
        used: requests as u64,
        observations: steps.len() as u64,
        max_running,
        rate_per_s: if span_ms > 0.0 {
            round3(gaps as f64 / (span_ms / 1000.0))
        } else {
            0.0
        },
        ..Source::default()
    });
    let mut report = String::new();
    let _ = writeln!(
        report,
        "  alpha_ms    {:>12.6}  every step",
        profile.alpha_ms
    );
    let _ = writeln!(
        report,
        "  beta_ms     {:>12.6}  per prefill token",
        profile.beta_ms
    );
    let _ = writeln!(
        report,
        "  gamma_ms    {:>12.6}  per decoding request",
        profile.gamma_ms
    );
    let _ = writeln!(
        report,
        "  delta_ms    {:>12.6}  per context token",
        profile.delta_ms
    );
    let _ = writeln!(
        report,
        "  epsilon_ms  {:>12.6}  per request prefilling",
        profile.epsilon_ms
    );
    let _ = writeln!(
        report,
        "  zeta_ms     {:>12.9}  per prefill token per token before it",
        profile.zeta_ms
    );
    let _ = writeln!(
        report,
        "  eta_ms      {:>12.6}  per prompt token on its way to the scheduler",
        profile.eta_ms
    );
    let _ = writeln!(report, "  slots       {slots_note}");
    let _ = writeln!(report, "  cache       {cache_note}");
    for (name, q) in [
        ("decode steps", &profile.step_spread),
        ("prefill steps", &profile.prefill_spread),
    ] {
        if !q.is_empty() {
            let at = |u: f64| Profile::spread_at(q, u);
            let _ = writeln!(
                report,
                "  spread of {name} (observed / model, drawn each step): p10 {:.3}, \
                 p50 {:.3}, p90 {:.3}, p99 {:.3}",
                at(0.1),
                at(0.5),
                at(0.9),
                at(0.99)
            );
        }
    }
    report.push_str(&scale_note);
    let _ = writeln!(report, "residuals (|observed - model| / observed):");
    for (name, e) in [
        ("all steps", &all),
        ("decode steps", &errors(Some(false))),
        ("first-token steps", &errors(Some(true))),
    ] {
        let _ = writeln!(
            report,
            "  {name:<18} {:>7}  median {:>6.1}%  p90 {:>6.1}%",
            e.len(),
            pct(e, 0.5),
            pct(e, 0.9)
        );
    }
    let _ = writeln!(report, "  R² {:.3}", r2);
    if unknown.is_empty() {
        let _ = writeln!(report, "the run could tell every term");
    } else {
        let _ = writeln!(report, "what the run could not tell:");
        for u in &unknown {
            let _ = writeln!(report, "  {u}");
        }
    }
    report.push_str(&check::table(&figures));
    Ok(Fitted {
        profile,
        report,
        problems,
    })
}

/// The most the prefill spread is scaled by (or under its inverse).
const MAX_PREFILL_SCALE: f64 = 2.0;

/// Scales of the prefill spread tried, from 1 / [`MAX_PREFILL_SCALE`] to
/// [`MAX_PREFILL_SCALE`], evenly on a log scale.
const PREFILL_SCALES: i32 = 24;

/// Scale the profile's prefill spread so that the model gives the runs'
/// TTFT p50 best (of [`PREFILL_SCALES`] + 1 scales tried, 1 among them):
/// the scale, or `None` (the spread left as it was) when the best is at
/// either end of the range (the level is not found inside it).
fn calibrate_prefill(p: &mut Profile, real: &check::Dists, runs: &[Vec<Seen>]) -> Option<f64> {
    let base = if !p.prefill_spread.is_empty() {
        p.prefill_spread.clone()
    } else if !p.step_spread.is_empty() {
        p.step_spread.clone()
    } else {
        vec![1.0]
    };
    let at = |c: f64| -> Profile {
        let mut q = p.clone();
        if c != 1.0 {
            q.prefill_spread = base
                .iter()
                .map(|r| (r * c * 10_000.0).round() / 10_000.0)
                .collect();
        }
        q
    };
    let off = |q: &Profile| {
        check::compare(real, &check::twin(q, runs))
            .iter()
            .find(|f| f.name == "TTFT p50")
            .map_or(f64::INFINITY, |f| f.error_pct)
    };
    let half = PREFILL_SCALES / 2;
    let mut best = (off(p), 0);
    for k in -half..=half {
        if k == 0 {
            continue;
        }
        let c = MAX_PREFILL_SCALE.powf(f64::from(k) / f64::from(half));
        let e = off(&at(c));
        if e < best.0 {
            best = (e, k);
        }
    }
    if best.1.abs() == half {
        return None;
    }
    let c = MAX_PREFILL_SCALE.powf(f64::from(best.1) / f64::from(half));
    *p = at(c);
    Some(c)
}

/// The cache's size: as given, else as the scrapes state it, else the
/// flags' (said so); what the report says of it.
fn cache(
    p: &mut Profile,
    given: Given,
    kv: Option<&KvCapacity>,
    unknown: &mut Vec<String>,
) -> String {
    let how = match (given.cache, kv) {
        (true, _) => "given".to_string(),
        (false, Some(kv)) => {
            // The profile's limit on the blocks.
            p.cache_blocks = (kv.tokens / p.block_size).min(1 << 32) as usize;
            format!("the scrapes: {}", kv.from)
        }
        (false, None) => {
            unknown.push(format!(
                "cache_blocks: no scrape states the server's KV cache size (vLLM's \
                 cache_config_info, SGLang's max_total_num_tokens): {} blocks, the flags'; \
                 give --cache-blocks",
                p.cache_blocks
            ));
            "the flags'".to_string()
        }
    };
    format!(
        "{} blocks of {} tokens ({how})",
        p.cache_blocks, p.block_size
    )
}

/// Quantiles of the step spread: 0 % to 100 % by 1 %.
const SPREAD_QUANTILES: usize = 101;

/// The observed / model ratio of every step that prefills (or not) at
/// [`SPREAD_QUANTILES`] quantiles; empty when every such step fits within
/// 1 % (nothing to spread). A step of k requests is seen k times (once
/// per token it gave): each sighting weighs 1 / k, so that the quantiles
/// are the steps', as the twin draws them, one ratio a step.
fn spread(steps: &[Observed], p: &Profile, prefills: bool) -> Vec<f64> {
    let mut ratios: Vec<(f64, f64)> = steps
        .iter()
        .filter(|o| (o.row[4] > 0.0) == prefills)
        .filter_map(|o| {
            let model = predict(p, &o.row);
            let k = (o.row[2] + o.row[4]).max(1.0);
            (model > 0.0).then(|| (o.ms / model, 1.0 / k))
        })
        .collect();
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    if ratios.is_empty() || ratios.iter().all(|(r, _)| (r - 1.0).abs() <= 0.01) {
        return Vec::new();
    }
    // Each ratio at the middle of its weight, cumulated.
    let total: f64 = ratios.iter().map(|(_, w)| w).sum();
    let mut mids = Vec::with_capacity(ratios.len());
    let mut c = 0.0;
    for (_, w) in &ratios {
        mids.push((c + w / 2.0) / total);
        c += w;
    }
    let last = ratios.len() - 1;
    let mut q: Vec<f64> = (0..SPREAD_QUANTILES)
        .map(|k| {
            let q = k as f64 / (SPREAD_QUANTILES - 1) as f64;
            let i = match k {
                0 => 0,
                _ if k == SPREAD_QUANTILES - 1 => last,
                _ => mids.partition_point(|m| *m < q).min(last),
            };
            ratios[i].0
        })
        .collect();
    // The twin draws between neighbouring quantiles, so the outer 1 %
    // bands would reach out to the lone extremes (one stall 36 times the
    // model made every hundredth step 19 times it on average, and the
    // mean step 16 % long). Their ends are set so that each band's mean
    // is the mean of the steps it stands for.
    let band = 1.0 / (SPREAD_QUANTILES - 1) as f64;
    let mean_of = |keep: &dyn Fn(f64) -> bool| {
        let (sum, weight) = ratios
            .iter()
            .zip(&mids)
            .filter(|(_, m)| keep(**m))
            .fold((0.0, 0.0), |(s, t), ((r, w), _)| (s + r * w, t + w));
        (weight > 0.0).then(|| sum / weight)
    };
    let n = SPREAD_QUANTILES;
    if let Some(top) = mean_of(&|m| m > 1.0 - band) {
        q[n - 1] = (2.0 * top - q[n - 2]).clamp(q[n - 2], q[n - 1]);
    }
    if let Some(bottom) = mean_of(&|m| m < band) {
        q[0] = (2.0 * bottom - q[1]).clamp(q[0], q[1]);
    }
    q.iter()
        .map(|r| (r * 10_000.0).round() / 10_000.0)
        .collect()
}

fn predict(p: &Profile, row: &[f64; 7]) -> f64 {
    p.alpha_ms * row[0]
        + p.beta_ms * row[1]
        + p.gamma_ms * row[2]
        + p.delta_ms * row[3]
        + p.epsilon_ms * row[4]
        + p.zeta_ms * row[5]
        + p.eta_ms * row[6]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A request sent at `sent` with `prompt` tokens, none cached, whose
    /// tokens came at `tokens`.
    pub(crate) fn seen(sent: f64, prompt: u64, tokens: &[f64]) -> Seen {
        Seen {
            sent,
            prompt,
            cached: 0,
            tokens: tokens.to_vec(),
            e2e: tokens.last().unwrap() - sent,
        }
    }

    #[test]
    fn steps_are_rebuilt_from_the_tokens_timestamps() {
        // The batch test's second case: request 0 (200 tokens) sent at 0,
        // tokens at 12, 26, 38; request 1 (300) sent at 5, tokens at 26, 38.
        let s = [
            seen(0.0, 200, &[12.0, 26.0, 38.0]),
            seen(5.0, 300, &[26.0, 38.0]),
        ];
        let o = observe(&s);
        let rows: Vec<([f64; 7], f64, bool)> = o.iter().map(|o| (o.row, o.ms, o.first)).collect();
        // A prompt of n tokens read whole: n(n − 1)/2 tokens before its
        // tokens, 19,900 for 200 and 44,850 for 300.
        assert_eq!(
            rows,
            vec![
                // 0's prefill, sent to an idle server: its 200 tokens on
                // their way to the scheduler (η), then the step: 0 → 12.
                ([1.0, 200.0, 0.0, 0.0, 1.0, 19_900.0, 200.0], 12.0, true),
                // 0 decodes (context 201) while 1 prefills 300: 12 → 26.
                ([1.0, 300.0, 1.0, 201.0, 1.0, 44_850.0, 0.0], 14.0, false),
                // Both decode: contexts 202 and 301: 26 → 38.
                ([1.0, 0.0, 2.0, 503.0, 0.0, 0.0, 0.0], 12.0, false),
                // 1's first token: the step began at 12, after its send
                // (its way to the scheduler made beside 0's prefill).
                ([1.0, 300.0, 1.0, 201.0, 1.0, 44_850.0, 0.0], 14.0, true),
                ([1.0, 0.0, 2.0, 503.0, 0.0, 0.0, 0.0], 12.0, false),
            ]
        );
    }

    #[test]
    fn the_spread_s_outer_bands_keep_the_mean_of_their_steps() {
        // 1,000 decode steps the model puts at 1 ms: one took 0 (a token
        // got with the one before), one 41 ms (a stall), the rest 1 ms.
        let p = Profile {
            alpha_ms: 1.0,
            gamma_ms: 0.0,
            ..Profile::default()
        };
        let steps: Vec<Observed> = (0..1000)
            .map(|i| Observed {
                row: [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                ms: match i {
                    0 => 0.0,
                    999 => 41.0,
                    _ => 1.0,
                },
                first: false,
                at: i as f64,
            })
            .collect();
        let q = spread(&steps, &p, false);
        assert_eq!(q.len(), SPREAD_QUANTILES);
        // The top 1 % (ten steps) averages (9 + 41) / 10 = 5: its band
        // runs from 1 to 9, not to 41. The bottom 1 % averages 0.9: from
        // 0.8 to 1.
        assert_eq!(q[100], 9.0);
        assert_eq!(q[0], 0.8);
        assert!(q[1..100].iter().all(|r| *r == 1.0), "{q:?}");
        // So the draws' mean is the steps': 0.98 + 0.01 × 0.9 + 0.01 × 5.
        let mean: f64 = (0..100).map(|i| (q[i] + q[i + 1]) / 2.0).sum::<f64>() / 100.0;
        assert!((mean - 1.039).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn too_little_is_refused_by_name() {
        let s = [seen(0.0, 10, &[1.0, 2.0])];
        let e = fit(
            &[s.to_vec()],
            &Profile::default(),
            Given::default(),
            &Scraped::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "error: too little to fit a profile: 1 request with a first token and 2 step \
             times (at least 10 and 50): run more requests"
        );
    }
}
