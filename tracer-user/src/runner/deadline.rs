//! The run loop's next refresh, as a timerfd the runtime polls with everything else.
//!
//! Why not `tokio::time::sleep`: tokio's timer wheel files a deadline 64 ms or more away in a
//! coarse slot, wakes when that slot begins to move it to a finer one, and wakes again at the
//! deadline. Every one-second sleep of an idle daemon was two wakeups (seen with strace: an
//! `epoll_wait` of ~970 ms, then one of the remaining ~30 ms). A timerfd wakes the process
//! once, when the kernel's own timer expires.
use std::{os::fd::OwnedFd, time::Duration};

use anyhow::{Context as _, Result};
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::{unix::AsyncFd, Interest};

pub(super) struct Deadline {
    timer: AsyncFd<OwnedFd>,
}

impl Deadline {
    pub(super) fn new() -> Result<Deadline> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .context("creating the run loop's timerfd")?;
        // SAFETY: the OwnedFd moves into the AsyncFd, which owns it until it is dropped:
        // the descriptor stays open and the same for the registration's whole life.
        let timer = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|err| err.into_parts().1)
            .context("registering the run loop's timerfd")?;
        Ok(Deadline { timer })
    }

    /// Expire `after` from now (a zero wait becomes 1 ns: a zero timerfd value disarms it);
    /// None disarms it, and the loop waits for its other wakers only.
    pub(super) fn set(&mut self, after: Option<Duration>) -> Result<()> {
        let value = match after {
            Some(after) => {
                let after = after.max(Duration::from_nanos(1));
                Timespec {
                    tv_sec: after.as_secs().min(i64::MAX as u64) as i64,
                    tv_nsec: i64::from(after.subsec_nanos()),
                }
            }
            None => Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        timerfd_settime(self.timer.get_ref(), TimerfdTimerFlags::empty(), &spec)
            .context("arming the run loop's timerfd")?;
        // Setting a timerfd also zeroes its count of expiries: an expiry nobody took is gone
        // with the old deadline (fs/timerfd.c, timerfd_setup). A stale readiness is cleared
        // by the next `expired`, which finds nothing to read.
        Ok(())
    }

    /// Until the deadline passes (cancel-safe: an expiry that came while nobody waited is
    /// kept until taken or replaced by [`Deadline::set`]).
    pub(super) async fn expired(&self) -> Result<()> {
        loop {
            let mut guard = self
                .timer
                .readable()
                .await
                .context("waiting on the run loop's timerfd")?;
            if self.drain() {
                return Ok(());
            }
            guard.clear_ready();
        }
    }

    /// Take an expiry if one is there: the count of expiries, 8 bytes (the fd is non-blocking).
    fn drain(&self) -> bool {
        let mut expirations = [0u8; 8];
        rustix::io::read(self.timer.get_ref(), &mut expirations) == Ok(expirations.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expires_once_after_its_wait_and_never_when_disarmed() {
        let mut deadline = Deadline::new().unwrap();
        let start = std::time::Instant::now();
        deadline.set(Some(Duration::from_millis(30))).unwrap();
        deadline.expired().await.unwrap();
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(30), "woke after {waited:?}");
        // Taken: it does not fire again until set again.
        let again = tokio::time::timeout(Duration::from_millis(60), deadline.expired()).await;
        assert!(again.is_err(), "a one-shot deadline expired twice");
        deadline.set(Some(Duration::from_millis(10))).unwrap();
        deadline.set(None).unwrap();
        let disarmed = tokio::time::timeout(Duration::from_millis(60), deadline.expired()).await;
        assert!(disarmed.is_err(), "a disarmed deadline expired");
        // A deadline that has passed before anyone waits is still taken.
        deadline.set(Some(Duration::ZERO)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        deadline.expired().await.unwrap();
        // And one replaced before it expired is gone.
        deadline.set(Some(Duration::from_millis(1))).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        deadline.set(Some(Duration::from_secs(60))).unwrap();
        let replaced = tokio::time::timeout(Duration::from_millis(60), deadline.expired()).await;
        assert!(replaced.is_err(), "a replaced deadline expired");
    }
}
