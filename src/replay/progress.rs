//! What a run says on standard error while it runs and at its end: the
//! progress bar or status lines, the lateness warning, the final line.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::Shared;
use super::args::Args;
use crate::cli;
use crate::result::round_us;
use crate::stats::Dist;

/// The progress thread. On a terminal, an indicatif bar: requests done
/// out of the total once it is known (--limit, or the reader reached the
/// end of the input), else a spinner. Otherwise a status line every ten
/// seconds. Both show sent, in flight, done, errors and the last lag.
pub(super) fn progress(shared: &Shared, done: &AtomicBool, run_start: &OnceLock<Instant>) {
    let every = Duration::from_secs(10);
    let mut last = Instant::now();
    let mut with_length = false;
    while !done.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(100));
        let Some(start) = run_start.get() else {
            continue;
        };
        let c = &shared.counters;
        let sent = c.sent.load(Ordering::Relaxed);
        let finished = c.done.load(Ordering::Relaxed);
        let status = format!(
            "sent {sent}, in flight {}, done {finished}, errors {}, lag {:.2}ms",
            sent.saturating_sub(finished),
            c.errors.load(Ordering::Relaxed) + c.timeouts.load(Ordering::Relaxed),
            c.lag_us.load(Ordering::Relaxed) as f64 / 1000.0,
        );
        match &shared.bar {
            Some(bar) => {
                let total = c.total.load(Ordering::Relaxed);
                if total > 0 {
                    if !with_length {
                        with_length = true;
                        bar.set_style(bar_style(BAR));
                    }
                    bar.set_length(total);
                }
                bar.set_position(finished);
                bar.set_message(status);
            }
            None if last.elapsed() >= every => {
                last = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                eprintln!("{}: {secs:.0}s: {status}", cli::tool());
            }
            None => {}
        }
    }
    if let Some(bar) = &shared.bar {
        bar.finish_and_clear();
    }
}

/// The progress bar's layouts: with a known total, and without.
pub(super) const BAR: &str = "{elapsed_precise} [{bar:30}] {percent:>3}% {wide_msg}";
pub(super) const SPINNER: &str = "{spinner} {elapsed_precise} {wide_msg}";

pub(super) fn bar_style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

/// A progress bar on standard error when it is a terminal.
pub(super) fn progress_bar(args: &Args) -> Option<indicatif::ProgressBar> {
    if args.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner().with_style(bar_style(SPINNER));
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// A warning when the schedule was not kept: more than 1% of the requests,
/// and at least 10, sent over 5 ms late with no --max-concurrency to explain
/// it. A user would otherwise blame the server for the client's limits.
pub(super) fn lateness_warning(args: &Args, sent: u64, late: u64) -> Option<String> {
    if args.max_concurrency.is_some() || late < 10 || late * 100 <= sent {
        return None;
    }
    Some(format!(
        "{late} of {sent} requests left more than 5ms late: this process could not keep \
         the schedule, so the results say as much about it as about the server; split \
         the trace over several processes with --shard"
    ))
}

/// The end-of-run line on stderr, after the lateness warning if any.
pub(super) fn final_line(
    args: &Args,
    shared: &Shared,
    lag: &Dist,
    late: u64,
    elapsed_ms: Option<f64>,
) {
    if args.quiet && shared.output_closed.load(Ordering::SeqCst) {
        return;
    }
    let c = &shared.counters;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut line = format!(
        "sent {}, ok {}, errors {}, timeouts {}, cancelled {}",
        load(&c.sent),
        load(&c.ok),
        load(&c.errors),
        load(&c.timeouts),
        load(&c.cancelled),
    );
    if let Some(ms) = elapsed_ms {
        line.push_str(&format!(" in {}", crate::duration::human(round_us(ms))));
    }
    if let Some(w) = lateness_warning(args, load(&c.sent), late) {
        cli::warn(w);
    }
    if let Some(s) = lag.summary(&[50.0, 99.0]) {
        line.push_str(&format!(
            "; dispatch lag p50 {:.3}ms, p99 {:.3}ms, max {:.3}ms, {late} late by more than 5ms",
            s.percentiles[0].1, s.percentiles[1].1, s.max
        ));
    }
    eprintln!("{}: {line}", cli::tool());
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    pub(super) fn lateness_is_warned_of_past_one_percent_unless_concurrency_is_capped() {
        let open = Args::parse_from(["trace-replay", "--sim"]);
        let capped = Args::parse_from(["trace-replay", "--sim", "--max-concurrency", "4"]);
        assert_eq!(lateness_warning(&open, 1000, 10), None);
        assert_eq!(lateness_warning(&open, 500, 9), None);
        assert_eq!(lateness_warning(&capped, 1000, 500), None);
        assert_eq!(
            lateness_warning(&open, 1000, 11).as_deref(),
            Some(
                "11 of 1000 requests left more than 5ms late: this process could not keep the \
                 schedule, so the results say as much about it as about the server; split the \
                 trace over several processes with --shard"
            )
        );
    }
}
