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

/// How busy the sending thread was over the run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Busy {
    /// CPU time the thread that sends used during the run, ms.
    pub cpu_ms: f64,
    /// The run's wall-clock time, ms.
    pub wall_ms: f64,
}

/// Below this share of the wall time on the CPU, the sending thread was
/// mostly idle: lateness then came from the machine, not from it.
const IDLE_SHARE: f64 = 0.25;

/// Below this rate one thread keeps any schedule (it sends tens of
/// thousands of requests per second).
const LOW_RATE_PER_S: f64 = 500.0;

/// A warning when the schedule was not kept: more than 1% of the requests,
/// and at least 10, sent over 5 ms late with no --max-concurrency to explain
/// it. A user would otherwise blame the server for the client's limits.
/// The advice fits the cause: a sending thread that worked hard needs
/// help (--shard); one that mostly waited at a low rate was kept from the
/// CPU by other processes.
pub(super) fn lateness_warning(
    args: &Args,
    sent: u64,
    late: u64,
    busy: Option<Busy>,
) -> Option<String> {
    if args.max_concurrency.is_some() || late < 10 || late * 100 <= sent {
        return None;
    }
    let head = format!("{late} of {sent} requests left more than 5ms late");
    if let Some(b) = busy.filter(|b| machine_was_busy(*b, sent)) {
        return Some(format!(
            "{head} while this process used the CPU {:.0}% of the run at {:.0} requests/s: \
             the machine was busy (other processes, a server or the --sim simulator on the \
             same cores), so the results say as much about it as about the server; give the \
             replay a core of its own",
            b.cpu_ms / b.wall_ms * 100.0,
            sent as f64 / (b.wall_ms / 1000.0)
        ));
    }
    Some(format!(
        "{head}: this process could not keep the schedule, so the results say as much \
         about it as about the server; split the trace over several processes with --shard"
    ))
}

/// The sending thread was mostly idle and the rate low: not its fault.
pub(super) fn machine_was_busy(b: Busy, sent: u64) -> bool {
    if b.wall_ms <= 0.0 {
        return false;
    }
    let rate = sent as f64 / (b.wall_ms / 1000.0);
    b.cpu_ms < IDLE_SHARE * b.wall_ms && rate < LOW_RATE_PER_S
}

/// CPU time the calling thread has used, ms (the whole process's where a
/// thread's own is not available).
pub(super) fn thread_cpu_ms() -> Option<f64> {
    #[cfg(target_os = "linux")]
    let who = libc::RUSAGE_THREAD;
    #[cfg(not(target_os = "linux"))]
    let who = libc::RUSAGE_SELF;
    // SAFETY: getrusage only writes the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        (libc::getrusage(who, &mut u) == 0).then_some(u)
    }?;
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    Some(ms(usage.ru_utime) + ms(usage.ru_stime))
}

/// The end-of-run line on stderr, after the lateness warning if any.
pub(super) fn final_line(
    args: &Args,
    shared: &Shared,
    lag: &Dist,
    late: u64,
    elapsed_ms: Option<f64>,
    cpu_ms: Option<f64>,
    aborted: Option<&str>,
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
    let busy = match (cpu_ms, elapsed_ms) {
        (Some(cpu_ms), Some(wall_ms)) => Some(Busy { cpu_ms, wall_ms }),
        _ => None,
    };
    if let Some(w) = lateness_warning(args, load(&c.sent), late, busy) {
        cli::warn(w);
    }
    if let Some(s) = lag.summary(&[50.0, 99.0]) {
        line.push_str(&format!(
            "; dispatch lag p50 {:.3}ms, p99 {:.3}ms, max {:.3}ms, {late} late by more than 5ms",
            s.percentiles[0].1, s.percentiles[1].1, s.max
        ));
    }
    if let Some(advice) = aborted {
        line.push_str(&format!("; stopped early: {advice}"));
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
        assert_eq!(lateness_warning(&open, 1000, 10, None), None);
        assert_eq!(lateness_warning(&open, 500, 9, None), None);
        assert_eq!(lateness_warning(&capped, 1000, 500, None), None);
        assert_eq!(
            lateness_warning(&open, 1000, 11, None).as_deref(),
            Some(
                "11 of 1000 requests left more than 5ms late: this process could not keep the \
                 schedule, so the results say as much about it as about the server; split the \
                 trace over several processes with --shard"
            )
        );
    }

    #[test]
    pub(super) fn a_busy_machine_is_told_from_a_busy_replay() {
        let busy = |cpu_ms, wall_ms| Busy { cpu_ms, wall_ms };
        // 1000 requests in 10 s (100/s), 1 s on the CPU: the machine.
        assert!(machine_was_busy(busy(1000.0, 10_000.0), 1000));
        // The same with 3 s on the CPU: this process.
        assert!(!machine_was_busy(busy(3000.0, 10_000.0), 1000));
        // 1 s on the CPU but 10,000 requests in 10 s: the rate.
        assert!(!machine_was_busy(busy(1000.0, 10_000.0), 10_000));
        // At the edges: 24.9% and 499/s are busy, 25% and 500/s are not.
        assert!(machine_was_busy(busy(2490.0, 10_000.0), 4990));
        assert!(!machine_was_busy(busy(2500.0, 10_000.0), 4990));
        assert!(!machine_was_busy(busy(2490.0, 10_000.0), 5000));
        assert!(!machine_was_busy(busy(0.0, 0.0), 10));
        let open = Args::parse_from(["trace-replay", "--sim"]);
        assert_eq!(
            lateness_warning(&open, 1000, 50, Some(busy(1000.0, 10_000.0))).as_deref(),
            Some(
                "50 of 1000 requests left more than 5ms late while this process used the CPU \
                 10% of the run at 100 requests/s: the machine was busy (other processes, a \
                 server or the --sim simulator on the same cores), so the results say as much \
                 about it as about the server; give the replay a core of its own"
            )
        );
        assert!(
            lateness_warning(&open, 1000, 50, Some(busy(5000.0, 10_000.0)))
                .unwrap()
                .ends_with("split the trace over several processes with --shard")
        );
    }
}
