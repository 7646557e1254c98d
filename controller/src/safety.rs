//! Putting the original knob values back, whatever way the process ends.
//!
//! * Normal return and panics that unwind: [`RestoreGuard`]'s `Drop`.
//! * Panics on any thread (and `panic = "abort"`): a panic hook installed by
//!   [`RestoreGuard::arm`] restores before the process goes.
//! * SIGINT (Ctrl-C), SIGTERM, SIGHUP: [`StopSignals`] turns them into a flag the run loop
//!   checks, and a byte on a pipe that wakes a loop blocked in `poll()`
//!   ([`StopSignals::wake_fd`]); the loop then returns and the guard restores before `main`
//!   ends. The handler itself only stores an integer and writes one byte: restoring means file
//!   I/O, which is not allowed in a signal handler.
//!
//! SIGKILL cannot be caught: after `kill -9` the knobs keep the controller's last values.
use std::{
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
    panic,
    sync::{
        atomic::{AtomicBool, AtomicI32, Ordering},
        Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError, Weak,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

/// Something that can put back what it changed. `restore` must be idempotent and must not
/// panic: it may run inside a panic hook.
pub trait Restore: Send + 'static {
    fn restore(&mut self);
}

/// Owns a [`Restore`] value and restores it exactly once: on `restore_now`, on drop, or from
/// the panic hook, whichever comes first.
pub struct RestoreGuard<T: Restore> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    value: Mutex<T>,
    armed: AtomicBool,
}

/// How long the panic hook waits for another thread to release the value. When the panicking
/// thread holds it itself, the wait times out and `Drop` restores during unwinding instead.
const PANIC_LOCK_WAIT: Duration = Duration::from_millis(200);

impl<T: Restore> RestoreGuard<T> {
    /// Take ownership of `value` and install the panic hook (it chains to the previous hook,
    /// which still prints the panic message first).
    pub fn arm(value: T) -> Self {
        let shared = Arc::new(Shared {
            value: Mutex::new(value),
            armed: AtomicBool::new(true),
        });
        install_panic_hook(Arc::downgrade(&shared));
        RestoreGuard { shared }
    }

    /// The value, even after a panic poisoned the lock (restoring must still be possible).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.shared
            .value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Restore now (once); later calls, the drop and the panic hook then do nothing.
    pub fn restore_now(&self) {
        self.shared.restore_blocking();
    }

    /// False once the value has been restored.
    pub fn is_armed(&self) -> bool {
        self.shared.armed.load(Ordering::SeqCst)
    }
}

impl<T: Restore> Drop for RestoreGuard<T> {
    fn drop(&mut self) {
        self.shared.restore_blocking();
    }
}

impl<T: Restore> Shared<T> {
    fn restore_blocking(&self) {
        // Lock first, then disarm: a restore running in the panic hook on another thread
        // finishes before we return, so `main` cannot exit halfway through it.
        let mut value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        if self.armed.swap(false, Ordering::SeqCst) {
            value.restore();
        }
    }

    fn restore_from_panic(&self) {
        let deadline = Instant::now() + PANIC_LOCK_WAIT;
        while self.armed.load(Ordering::SeqCst) {
            let mut value = match self.value.try_lock() {
                Ok(value) => value,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(TryLockError::WouldBlock) => return,
            };
            if self.armed.swap(false, Ordering::SeqCst) {
                value.restore();
            }
        }
    }
}

fn install_panic_hook<T: Restore>(shared: Weak<Shared<T>>) {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        previous(info);
        if let Some(shared) = shared.upgrade() {
            shared.restore_from_panic();
        }
    }));
}

/// The signal that asked us to stop (0: none yet). Process-wide, like signal dispositions.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The write end of the wake-up pipe, for the handler (-1 until installed).
static WAKE_WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// The wake-up pipe, made once per process: (read end, write end).
static WAKE_PIPE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();

fn wake_pipe() -> Result<&'static (OwnedFd, OwnedFd)> {
    if let Some(pipe) = WAKE_PIPE.get() {
        return Ok(pipe);
    }
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own; nothing else is touched.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating the stop signals' pipe");
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let pipe = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Two threads racing here each made a pipe; the loser's is closed on drop.
    Ok(WAKE_PIPE.get_or_init(|| pipe))
}

/// The wake-up pipe's read end once [`StopSignals::install`] ran: a write that could wait
/// (the audit log's) gives up when it becomes readable.
pub(crate) fn stop_wake_fd() -> Option<std::os::fd::RawFd> {
    if WAKE_WRITE_FD.load(Ordering::SeqCst) < 0 {
        return None;
    }
    WAKE_PIPE.get().map(|(read, _)| read.as_raw_fd())
}

/// SIGINT, SIGTERM and SIGHUP, turned into a flag for the run loop to poll.
pub struct StopSignals {
    _private: (),
}

impl StopSignals {
    pub const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    /// Install the handlers. After this those signals no longer end the process by
    /// themselves: the loop must poll [`StopSignals::received`].
    pub fn install() -> Result<Self> {
        let (_, write_end) = wake_pipe()?;
        WAKE_WRITE_FD.store(write_end.as_raw_fd(), Ordering::SeqCst);
        for signal in Self::SIGNALS {
            // SAFETY: the action runs inside a signal handler; it stores into a static atomic
            // integer and write()s one byte to a non-blocking pipe, both async-signal-safe (no
            // allocation, no lock). A full pipe only means a wake-up is already pending.
            unsafe {
                signal_hook_registry::register(signal, move || {
                    STOP_SIGNAL.store(signal, Ordering::SeqCst);
                    let fd = WAKE_WRITE_FD.load(Ordering::SeqCst);
                    if fd >= 0 {
                        libc::write(fd, [1u8].as_ptr().cast(), 1);
                    }
                })
            }
            .with_context(|| format!("installing a handler for {}", signal_name(signal)))?;
        }
        Ok(StopSignals { _private: () })
    }

    /// A descriptor that becomes readable when a stop signal arrives: `poll()` it with the
    /// other things a loop waits for, instead of waking up to look at [`Self::received`].
    pub fn wake_fd(&self) -> BorrowedFd<'static> {
        WAKE_PIPE.get().expect("install() made the pipe").0.as_fd()
    }

    /// The last stop signal received, cleared, and the wake-up pipe drained: for a loop that
    /// goes on after some signals (SIGHUP reopens a log). A signal that lands between the
    /// drain and the clear is returned now and leaves a spurious wake-up (then `None`).
    pub fn take(&self) -> Option<i32> {
        if let Some((read, _)) = WAKE_PIPE.get() {
            let mut sink = [0u8; 64];
            // SAFETY: read() into a buffer we own, of its length; the pipe is non-blocking, so
            // the loop ends at EAGAIN (or 0, or any error).
            while unsafe { libc::read(read.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0
            {
            }
        }
        match STOP_SIGNAL.swap(0, Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }

    /// The last stop signal received, if any.
    pub fn received(&self) -> Option<i32> {
        match STOP_SIGNAL.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(Arc<AtomicI32>);

    impl Restore for Counter {
        fn restore(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn restores_exactly_once_whether_asked_or_dropped() {
        let count = Arc::new(AtomicI32::new(0));
        let guard = RestoreGuard::arm(Counter(count.clone()));
        assert!(guard.is_armed());
        guard.restore_now();
        guard.restore_now();
        assert!(!guard.is_armed());
        drop(guard);
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let guard = RestoreGuard::arm(Counter(count.clone()));
        drop(guard);
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}
