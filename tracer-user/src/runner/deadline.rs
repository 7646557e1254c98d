//! The run loop's next refresh, as a timerfd the runtime polls with everything else.
//!
//! Why not `tokio::time::sleep`: tokio's timer wheel files a deadline 64 ms or more away in a
//! coarse slot, wakes when that slot begins to move it to a finer one, and wakes again at the
//! deadline. Every one-second sleep of an idle daemon was two wakeups (seen with strace: an
//! `epoll_wait` of ~970 ms, then one of the remaining ~30 ms). A timerfd wakes the process
//! once, when the kernel's own timer expires.
use std::{
    io,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    time::Duration,
};

use anyhow::{Context as _, Result};
use tokio::io::{unix::AsyncFd, Interest};

pub(super) struct Deadline {
    timer: AsyncFd<OwnedFd>,
}

impl Deadline {
    pub(super) fn new() -> Result<Deadline> {
        // SAFETY: timerfd_create takes no pointers; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("creating the run loop's timerfd");
        }
        // SAFETY: fd is a descriptor we just created and nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
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
                libc::timespec {
                    tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                    tv_nsec: after.subsec_nanos() as libc::c_long,
                }
            }
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: the descriptor is a timerfd we own; `spec` lives across the call and the
        // old value is not asked for (null).
        let status = unsafe {
            libc::timerfd_settime(
                self.timer.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if status < 0 {
            return Err(io::Error::last_os_error()).context("arming the run loop's timerfd");
        }
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

    /// Take an expiry if one is there.
    fn drain(&self) -> bool {
        let mut expirations = 0u64;
        // SAFETY: reads 8 bytes into a u64 that lives across the call; the fd is non-blocking.
        let read = unsafe {
            libc::read(
                self.timer.get_ref().as_raw_fd(),
                std::ptr::addr_of_mut!(expirations).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        read == std::mem::size_of::<u64>() as isize
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
