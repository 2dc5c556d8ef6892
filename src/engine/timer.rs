//! A sleep that ends within microseconds of its deadline. tokio's own timer
//! counts in whole milliseconds; on Linux this one is a `timerfd` watched by
//! the runtime's event loop, so the thread that waits for a request's send
//! time is also the one that reads responses, with one wakeup for both.

pub use imp::Timer;

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;

    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// One deadline at a time; re-arming with the same deadline is free.
    pub struct Timer {
        fd: AsyncFd<OwnedFd>,
        armed: Option<Instant>,
    }

    impl Timer {
        /// A timer for the current tokio runtime (call from inside it).
        pub fn new() -> io::Result<Timer> {
            // SAFETY: timerfd_create takes a clock id and flags and returns
            // a new descriptor or -1.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fd is a descriptor just created and owned by no one else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: the OwnedFd moves into the AsyncFd, which closes it
            // only when dropped, so it stays open and the same file.
            let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                .map_err(io::Error::from)?;
            Ok(Timer { fd, armed: None })
        }

        /// Return at `deadline` (at once when it is past). Safe to cancel.
        pub async fn sleep_until(&mut self, deadline: Instant) {
            loop {
                let now = Instant::now();
                if now >= deadline {
                    return;
                }
                if self.armed != Some(deadline) {
                    if self.arm(deadline - now).is_err() {
                        return tokio::time::sleep_until(deadline.into()).await;
                    }
                    self.armed = Some(deadline);
                }
                let Ok(mut ready) = self.fd.readable().await else {
                    return tokio::time::sleep_until(deadline.into()).await;
                };
                // The expiry count is never read: arming resets it, and the
                // event loop is edge-triggered, so each expiry wakes once.
                // A stale readiness (an earlier deadline's) just loops.
                ready.clear_ready();
            }
        }

        fn arm(&self, after: std::time::Duration) -> io::Result<()> {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    // A zero value would disarm the timer.
                    tv_nsec: (after.subsec_nanos().max(1)) as libc::c_long,
                },
            };
            // SAFETY: the descriptor is a timerfd we own; spec is a valid
            // itimerspec and the old value is not asked for.
            let rc = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::time::Instant;

    /// tokio's own timer, to the millisecond.
    pub struct Timer;

    impl Timer {
        pub fn new() -> std::io::Result<Timer> {
            Ok(Timer)
        }

        pub async fn sleep_until(&mut self, deadline: Instant) {
            tokio::time::sleep_until(deadline.into()).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn never_returns_before_the_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut timer = Timer::new().unwrap();
            let start = Instant::now();
            for k in 1..=20u64 {
                let deadline = start + Duration::from_micros(150 * k);
                timer.sleep_until(deadline).await;
                assert!(Instant::now() >= deadline);
            }
            // Cancelled, then the same deadline again, then an earlier one.
            let later = Instant::now() + Duration::from_millis(2);
            let _ =
                tokio::time::timeout(Duration::from_micros(100), timer.sleep_until(later)).await;
            timer.sleep_until(later).await;
            assert!(Instant::now() >= later);
            let past = later - Duration::from_millis(1);
            timer.sleep_until(past).await;
        });
    }
}
