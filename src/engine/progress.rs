//! What a run says on standard error while it runs and at its end: the
//! progress bar or status lines, the lateness warning, the final line.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::plan::Plan;
use super::schedule::Pace;
use super::shared::Shared;
use crate::cli;
use crate::result::round_us;
use crate::stats::Dist;

/// The progress thread. On a terminal, an indicatif bar measuring the
/// schedule (see [`bar_view`]), else a spinner. Otherwise a status line
/// every ten seconds. Both show sent, in flight, done, errors, the last lag
/// and, once the schedule's end is known, the time left.
pub(super) fn progress(
    shared: &Shared,
    done: &AtomicBool,
    run_start: &OnceLock<Instant>,
    duration_ms: Option<f64>,
) {
    let every = Duration::from_secs(10);
    let mut last = Instant::now();
    let mut with_length = false;
    let mut stopped_ms = None;
    while !done.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(100));
        let Some(start) = run_start.get() else {
            continue;
        };
        let elapsed_ms = start.elapsed().as_secs_f64() * 1000.0;
        if stopped_ms.is_none() && shared.stopping.load(Ordering::SeqCst) {
            stopped_ms = Some(elapsed_ms);
        }
        let c = &shared.counters;
        let view = bar_view(&Snapshot {
            elapsed_ms,
            stopped_ms,
            schedule_ms: c
                .schedule_ms
                .get()
                .or(c.schedule_estimate_ms.get())
                .copied(),
            duration_ms,
            total: c.total.load(Ordering::Relaxed),
            sent: c.sent.load(Ordering::Relaxed),
            done: c.done.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed) + c.timeouts.load(Ordering::Relaxed),
            cancelled: c.cancelled.load(Ordering::Relaxed),
            lag_ms: c.lag_us.load(Ordering::Relaxed) as f64 / 1000.0,
        });
        match &shared.bar {
            Some(bar) => {
                if let Some(length) = view.length {
                    if !with_length {
                        with_length = true;
                        bar.set_style(bar_style(BAR));
                    }
                    bar.set_length(length);
                }
                bar.set_position(view.position);
                bar.set_message(view.message);
            }
            None if last.elapsed() >= every => {
                last = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                eprintln!("{}: {secs:.0}s: {}", cli::tool(), view.message);
            }
            None => {}
        }
    }
    if let Some(bar) = &shared.bar {
        bar.finish_and_clear();
    }
}

/// What the progress thread knows at one instant.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Snapshot {
    /// Since the clock started, ms.
    pub elapsed_ms: f64,
    /// When sending stopped (Ctrl-C, an early stop), if it did.
    pub stopped_ms: Option<f64>,
    /// When the last timed request is due, once the reader has seen the
    /// end of the input (open loop only).
    pub schedule_ms: Option<f64>,
    /// --duration.
    pub duration_ms: Option<f64>,
    /// Requests to send, once known (0 until then).
    pub total: u64,
    pub sent: u64,
    pub done: u64,
    /// Errors and timeouts.
    pub errors: u64,
    pub cancelled: u64,
    pub lag_ms: f64,
}

/// The trace's span (last timestamp − first, ms) as the first and last
/// lines of one plain file say, for the bar's length before the reader has
/// seen the whole input (it reads about a thousand records ahead). Only a
/// single uncompressed file whose two lines have timestamps; the span the
/// reader finds replaces it when the input ends.
pub(super) fn estimate_span(inputs: &[crate::io::InputSpec]) -> Option<f64> {
    use std::io::{Read, Seek, SeekFrom};
    let [crate::io::InputSpec::Path(path)] = inputs else {
        return None;
    };
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok().filter(|m| m.is_file())?.len();
    const EDGE: u64 = 64 * 1024;
    let mut head = vec![0; EDGE.min(len) as usize];
    file.read_exact(&mut head).ok()?;
    let mut tail = vec![0; EDGE.min(len) as usize];
    file.seek(SeekFrom::Start(len - tail.len() as u64)).ok()?;
    file.read_exact(&mut tail).ok()?;
    span_of(&head, &tail)
}

/// The span between the first line of `head` and the last whole line of
/// `tail` (`None` for compressed or binary data, or lines without a
/// numeric `timestamp`).
fn span_of(head: &[u8], tail: &[u8]) -> Option<f64> {
    let timestamp = |line: &[u8]| -> Option<f64> {
        let line = std::str::from_utf8(line).ok()?.trim();
        let [ts] = crate::json::peek(line, ["timestamp"])?;
        ts?.parse::<f64>().ok().filter(|t| t.is_finite())
    };
    let first = head
        .split(|&b| b == b'\n')
        .find(|l| !l.trim_ascii().is_empty())?;
    let last = tail
        .rsplit(|&b| b == b'\n')
        .find(|l| !l.trim_ascii().is_empty())?;
    let span = timestamp(last)? - timestamp(first)?;
    (span >= 0.0).then_some(span)
}

/// What the bar shows: its length and position (no length: a spinner),
/// and the message beside it.
#[derive(Debug, PartialEq)]
pub(super) struct BarView {
    pub length: Option<u64>,
    pub position: u64,
    pub message: String,
}

/// The bar at one instant. An open-loop run, or one with --duration, is
/// measured in the schedule's time, ms: elapsed out of the time the last
/// request is due (answers come after) or --duration, frozen where sending
/// stopped, so that a run stopped early never looks nearly done. A
/// closed-loop run without --duration is measured in requests answered,
/// the cancelled left out. The ETA is the schedule's time left (the rate
/// so far, for requests), in whole seconds.
pub(super) fn bar_view(s: &Snapshot) -> BarView {
    let in_flight = s.sent.saturating_sub(s.done);
    let mut message = format!(
        "sent {}, in flight {in_flight}, done {}, errors {}",
        s.sent, s.done, s.errors
    );
    if s.cancelled > 0 {
        message.push_str(&format!(", cancelled {}", s.cancelled));
    }
    message.push_str(&format!(", lag {:.2}ms", s.lag_ms));
    let at = s.stopped_ms.unwrap_or(s.elapsed_ms).max(0.0);
    let end = match (s.schedule_ms, s.duration_ms) {
        (Some(span), Some(d)) => Some(span.min(d)),
        (span, d) => span.or(d),
    };
    let (length, position, left_ms) = match end {
        Some(end) => {
            let end = end.max(0.0);
            (
                Some(end.round() as u64),
                at.min(end).round() as u64,
                end - at,
            )
        }
        None if s.total > 0 => {
            let answered = s.done.saturating_sub(s.cancelled);
            // The rate so far, carried to the rest.
            let left = if answered > 0 && s.total > answered {
                at * (s.total - answered) as f64 / answered as f64
            } else {
                0.0
            };
            (Some(s.total), answered.min(s.total), left)
        }
        None => (None, 0, f64::NAN),
    };
    // First, so that a narrow terminal cuts the counts rather than it.
    if s.stopped_ms.is_some() {
        message.insert_str(0, "stopped; ");
    } else if left_ms > 0.0 {
        let whole_s = (left_ms / 1000.0).ceil() * 1000.0;
        message.insert_str(0, &format!("ETA {}; ", crate::duration::human(whole_s)));
    } else if length.is_some() && in_flight > 0 {
        message.insert_str(0, "waiting for answers; ");
    }
    BarView {
        length,
        position,
        message,
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
pub(super) fn progress_bar(plan: &Plan) -> Option<indicatif::ProgressBar> {
    if plan.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    // Drawn from the start of the run (`start_bar`), under the messages
    // before it.
    Some(indicatif::ProgressBar::new_spinner().with_style(bar_style(SPINNER)))
}

/// Draw the progress bar, if there is one, from now on.
pub(super) fn start_bar(shared: &super::shared::Shared) {
    if let Some(bar) = &shared.bar {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
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
    plan: &Plan,
    sent: u64,
    late: u64,
    busy: Option<Busy>,
) -> Option<String> {
    let capped = matches!(
        plan.pacing.pace,
        Pace::Open {
            max_in_flight: Some(_)
        }
    );
    if capped || late < 10 || late * 100 <= sent {
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
/// How long a run took.
pub(super) struct Took {
    /// On the wall clock, ms.
    pub(super) elapsed_ms: Option<f64>,
    /// The sending thread's CPU, ms.
    pub(super) cpu_ms: Option<f64>,
    /// In virtual time (the twin's run), ms.
    pub(super) virtual_ms: Option<f64>,
}

pub(super) fn final_line(
    plan: &Plan,
    shared: &Shared,
    lag: &Dist,
    late: u64,
    took: Took,
    aborted: Option<&str>,
) {
    let Took {
        elapsed_ms,
        cpu_ms,
        virtual_ms,
    } = took;
    if plan.quiet && shared.output_closed.load(Ordering::SeqCst) {
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
    if let Some(ms) = virtual_ms {
        // The twin's run: its own time, and what computing it took.
        line.push_str(&format!(
            " in {} of virtual time ({})",
            crate::duration::human(round_us(ms)),
            crate::duration::human(round_us(elapsed_ms.unwrap_or(0.0)))
        ));
        eprintln!("{}: {line}", cli::tool());
        return;
    }
    if let Some(ms) = elapsed_ms {
        line.push_str(&format!(" in {}", crate::duration::human(round_us(ms))));
    }
    let busy = match (cpu_ms, elapsed_ms) {
        (Some(cpu_ms), Some(wall_ms)) => Some(Busy { cpu_ms, wall_ms }),
        _ => None,
    };
    if let Some(w) = lateness_warning(plan, load(&c.sent), late, busy) {
        cli::warn(w);
    }
    if let Some(w) = c.lengths.warning() {
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

    /// The plan of trace-replay's flags `argv`.
    fn plan_of<const N: usize>(argv: [&str; N]) -> Plan {
        Plan::try_from(&crate::engine::Args::parse_from(argv)).unwrap()
    }

    #[test]
    fn the_span_is_estimated_from_the_first_and_last_lines() {
        let head = b"{\"timestamp\":1000,\"input_length\":1}\n{\"timestamp\":1500}\n";
        let tail = b"500}\n{\"timestamp\":61000.5,\"output_length\":2}\n\n";
        assert_eq!(span_of(head, tail), Some(60000.5));
        // No timestamp, a cut line, compressed bytes: no estimate.
        assert_eq!(span_of(b"{\"input_length\":1}\n", tail), None);
        assert_eq!(span_of(head, b"{\"timestamp\":6"), None);
        assert_eq!(span_of(&[0x1f, 0x8b, 8, 0], tail), None);
        // Out of order: no negative length.
        assert_eq!(span_of(tail, head), None);
    }

    #[test]
    pub(super) fn lateness_is_warned_of_past_one_percent_unless_concurrency_is_capped() {
        let open = plan_of(["trace-replay", "--sim"]);
        let capped = plan_of(["trace-replay", "--sim", "--max-concurrency", "4"]);
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

    fn view(s: Snapshot) -> (Option<u64>, u64, String) {
        let v = bar_view(&s);
        (v.length, v.position, v.message)
    }

    #[test]
    fn the_bar_measures_the_schedules_time() {
        let open = Snapshot {
            elapsed_ms: 15_000.0,
            schedule_ms: Some(60_000.0),
            sent: 10,
            done: 8,
            errors: 1,
            lag_ms: 0.25,
            total: 40,
            ..Snapshot::default()
        };
        assert_eq!(
            view(open),
            (
                Some(60_000),
                15_000,
                "ETA 45s; sent 10, in flight 2, done 8, errors 1, lag 0.25ms".into()
            )
        );
        // Ctrl-C at 6 s: the bar stays at 10% while the rest is cancelled.
        let stopped = Snapshot {
            elapsed_ms: 9_000.0,
            stopped_ms: Some(6_000.0),
            sent: 12,
            done: 100,
            cancelled: 90,
            ..open
        };
        assert_eq!(
            view(stopped),
            (
                Some(60_000),
                6_000,
                "stopped; sent 12, in flight 0, done 100, errors 1, cancelled 90, lag 0.25ms"
                    .into()
            )
        );
        // Every request due, answers still coming.
        let tail = Snapshot {
            elapsed_ms: 61_500.0,
            sent: 40,
            done: 37,
            ..open
        };
        assert_eq!(
            view(tail),
            (
                Some(60_000),
                60_000,
                "waiting for answers; sent 40, in flight 3, done 37, errors 1, lag 0.25ms".into()
            )
        );
        // --duration: its length, or the span when shorter; 89.4995 s left
        // is an ETA of 90 s.
        let timed = Snapshot {
            elapsed_ms: 30_500.5,
            schedule_ms: None,
            duration_ms: Some(120_000.0),
            ..open
        };
        assert_eq!(view(timed).0, Some(120_000));
        assert_eq!(view(timed).1, 30_501);
        assert!(view(timed).2.starts_with("ETA 1m30s; sent 10,"));
        let longer = Snapshot {
            schedule_ms: Some(300_000.0),
            ..timed
        };
        assert_eq!(view(longer).0, Some(120_000));
        // The end not known yet: a spinner.
        let unknown = Snapshot {
            schedule_ms: None,
            total: 0,
            ..open
        };
        assert_eq!(
            view(unknown),
            (
                None,
                0,
                "sent 10, in flight 2, done 8, errors 1, lag 0.25ms".into()
            )
        );
    }

    #[test]
    fn a_closed_loop_bar_counts_answers_not_cancellations() {
        let closed = Snapshot {
            elapsed_ms: 5_000.0,
            total: 40,
            sent: 12,
            done: 10,
            ..Snapshot::default()
        };
        // 10 answers in 5 s: 30 more take 15 s.
        assert_eq!(
            view(closed),
            (
                Some(40),
                10,
                "ETA 15s; sent 12, in flight 2, done 10, errors 0, lag 0.00ms".into()
            )
        );
        let stopped = Snapshot {
            stopped_ms: Some(5_000.0),
            done: 40,
            cancelled: 30,
            ..closed
        };
        assert_eq!(view(stopped).1, 10);
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
        let open = plan_of(["trace-replay", "--sim"]);
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
