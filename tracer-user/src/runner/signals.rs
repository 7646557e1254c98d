//! The signals a run stops (or reopens its log) on, installed in one place for every loop:
//! the runner's, and the two clients of a daemon (`top --connect`, `stream --connect`).
use anyhow::{Context as _, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Which signal arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Received {
    Terminate,
    Interrupt,
    Hangup,
}

impl Received {
    /// The signal's name, as logs and the daemon's end message say it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Received::Terminate => "SIGTERM",
            Received::Interrupt => "SIGINT",
            Received::Hangup => "SIGHUP",
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP, caught (so that a run always unwinds: files get their footers,
/// knobs their original values, the terminal its mode).
pub(crate) struct StopSignals {
    terminate: Signal,
    interrupt: Signal,
    hangup: Signal,
}

impl StopSignals {
    pub(crate) fn install() -> Result<StopSignals> {
        let install = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("installing the {name} handler"))
        };
        Ok(StopSignals {
            terminate: install(SignalKind::terminate(), "SIGTERM")?,
            interrupt: install(SignalKind::interrupt(), "SIGINT")?,
            hangup: install(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next signal (cancel-safe: a signal that arrived while nobody waited is kept).
    pub(crate) async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.terminate.recv() => Received::Terminate,
            _ = self.interrupt.recv() => Received::Interrupt,
            _ = self.hangup.recv() => Received::Hangup,
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
