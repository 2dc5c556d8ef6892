//! The run's clock: where scheduling and dispatch take the time from.
//!
//! The dispatcher reads "now" and waits for a request's due instant only
//! through a [`Clock`]. A replay is given the [`WallClock`]: the monotonic
//! clock, and a microsecond timer to wait on. A run in virtual time (a
//! simulator that computes each answer's times instead of waiting for a
//! server: the twin, [`super::twin`]) gives another clock, whose
//! `sleep_until` jumps to the instant instead of waiting for it; the
//! schedule ([`super::schedule`]) takes time as an argument and needs no
//! change. What a request's exchange
//! measures (TTFT, gaps, E2E) is timed on the wall clock, since it times
//! a real server.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use super::timer::Timer;

/// Where a run takes the time from.
pub trait Clock {
    /// Now, on this clock.
    fn now(&self) -> Instant;

    /// Return at `at` (at once when it is past). Safe to cancel. A
    /// virtual clock may return earlier, at an event of its own (a
    /// request its server completed): the caller asks again.
    fn sleep_until(&mut self, at: Instant) -> impl Future<Output = ()>;

    /// Now on the calendar, for the results' `start_time`.
    fn system_time(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Time moves only when the run waits on it (the twin's clock): the
    /// run reads its input up to each instant before going there.
    fn is_virtual(&self) -> bool {
        false
    }
}

/// The wall clock sleeps until this long before an instant, then spins:
/// a sleeping thread wakes some microseconds late.
pub(super) const SPIN: Duration = Duration::from_micros(20);

/// The monotonic clock, waited on with a microsecond timer (see
/// [`Timer`]) and, for the last [`SPIN`], a spin, so that a request leaves
/// within a microsecond of its due instant. Create it inside the runtime
/// that waits on it.
pub struct WallClock {
    timer: Timer,
}

impl WallClock {
    pub fn new() -> std::io::Result<WallClock> {
        Ok(WallClock {
            timer: Timer::new()?,
        })
    }
}

impl Clock for WallClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    async fn sleep_until(&mut self, at: Instant) {
        if at > Instant::now() + SPIN {
            self.timer.sleep_until(at).await;
        } else {
            while Instant::now() < at {
                std::hint::spin_loop();
            }
        }
    }
}
