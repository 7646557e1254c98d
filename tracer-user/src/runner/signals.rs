//! The signals a run stops (or reopens its log) on, installed in one place for every loop:
//! the runner's, and the two clients of a daemon (`top --connect`, `stream --connect`).
use std::os::fd::OwnedFd;

use anyhow::{Context as _, Result};
use controller::safety::StopSignals;
use tokio::io::{unix::AsyncFd, Interest};

/// Which signal arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Received {
    Terminate,
    Interrupt,
    Hangup,
}

impl Received {
    fn from_signal(signal: i32) -> Option<Received> {
        match signal {
            libc::SIGTERM => Some(Received::Terminate),
            libc::SIGINT => Some(Received::Interrupt),
            libc::SIGHUP => Some(Received::Hangup),
            _ => None,
        }
    }

    /// The signal's name, as logs and the daemon's end message say it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Received::Terminate => "SIGTERM",
            Received::Interrupt => "SIGINT",
            Received::Hangup => "SIGHUP",
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP, caught by the controller's [`StopSignals`] (the one place that
/// installs their handlers: `tune`'s loop polls it), waited for here in an async loop. Caught,
/// so that a run always unwinds: files get their footers, knobs their original values, the
/// terminal its mode.
pub(crate) struct SignalWaiter {
    caught: StopSignals,
    /// A copy of the handlers' wake-up pipe, registered with tokio.
    wake: AsyncFd<OwnedFd>,
}

impl SignalWaiter {
    /// Install the handlers (once per process) and wait on them from this runtime.
    pub(crate) fn install() -> Result<SignalWaiter> {
        let caught = StopSignals::install()?;
        let pipe = caught
            .wake_fd()
            .try_clone_to_owned()
            .context("copying the stop signals' pipe")?;
        // SAFETY: `pipe` is an open descriptor the AsyncFd owns: it stays open, and the same
        // file description, until the AsyncFd drops it.
        let wake = unsafe { AsyncFd::register_with_interest(pipe, Interest::READABLE) }
            .map_err(|err| err.into_parts().1)
            .context("waiting on the stop signals' pipe")?;
        Ok(SignalWaiter { caught, wake })
    }

    /// The next signal (cancel-safe: a signal that arrived while nobody waited is kept).
    pub(crate) async fn next(&mut self) -> Received {
        loop {
            if let Some(received) = self.caught.take().and_then(Received::from_signal) {
                return received;
            }
            match self.wake.readable().await {
                Ok(mut ready) => ready.clear_ready(),
                // The pipe cannot fail to poll once registered; if it did, no signal could be
                // told apart from any other wake-up, so none is.
                Err(_) => std::future::pending::<()>().await,
            }
        }
    }

    /// `work`, unless a signal comes first (None then).
    pub(crate) async fn until_signal<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            done = work => Some(done),
            _ = self.next() => None,
        }
    }
}
