//! Sources of node-cache events: the kernel (eBPF), the simulator, a recording.
//!
//! Every source produces the same `tracer_common::Event`s; everything downstream (model, views,
//! recorder, controller) sees only this trait. Lost events are reported in-band as
//! `EventKind::Lost` events (`len` = how many), so recordings and views count them the same way.
pub mod bpf;
mod exact;
pub(crate) mod knobs;
pub(crate) mod open;
pub(crate) mod replay;
pub(crate) mod sim;

use std::{future::Future, pin::Pin};

use anyhow::Result;
use tracer_common::Event;

use crate::model::KernelCounts;

/// Which kind of source, for headers and recordings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Bpf,
    Sim,
    Replay,
}

/// What a source says about itself (shown in headers, written into recordings).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SourceInfo {
    pub kind: SourceKind,
    /// Kernel release, or "simulator", or the recording's kernel.
    pub kernel: String,
    /// Device name(s) observed, e.g. "vdb" or "sim0".
    pub devices: Vec<String>,
    /// Free text: what attached, the scenario, the file.
    pub detail: String,
}

/// A boxed future, so that `Source` stays object-safe (`Box<dyn Source>`).
pub type BatchFuture<'a> = Pin<Box<dyn Future<Output = Result<bool>> + Send + 'a>>;

/// A batch from a source that never waits (a recording at speed 0), taken without a runtime:
/// the future is polled once. A source that would wait is an error.
pub(crate) fn batch_now(batch: BatchFuture<'_>) -> Result<bool> {
    let mut batch = batch;
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match batch.as_mut().poll(&mut context) {
        std::task::Poll::Ready(more) => more,
        std::task::Poll::Pending => {
            anyhow::bail!("the source waited: only a source that never waits is read at once")
        }
    }
}

pub trait Source: Send {
    fn info(&self) -> SourceInfo;

    /// Wait for the next events and append them to `out`, in time order (the kernel's node
    /// lookups come in per-CPU batches: a batch the read before missed may be one refresh
    /// older than what that read brought; `whatif` sorts its trace). Resolves to
    /// `Ok(false)` when the source has ended (a recording's end, a finished scenario).
    /// Must be cancel-safe: views race it against timers and key presses and drop it when
    /// they fire, so it may only take events off its input after its last `.await`.
    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a>;

    /// Append what the source already holds, without waiting: the kernel source's ring
    /// buffer between its wake-ups (once per batch). The run loop calls it at every refresh
    /// and at the stop, so nothing waits longer than a refresh and a stop loses nothing.
    /// Other sources hand over everything in `next_batch`.
    fn take_waiting(&mut self, _out: &mut Vec<Event>) -> Result<()> {
        Ok(())
    }

    /// The current time in the clock of this source's `Event::ts_ns` (CLOCK_MONOTONIC for
    /// eBPF, the virtual clock for the simulator, the last event read for a replay). The model
    /// closes its windows by this clock, so live runs and replays cut the same windows.
    fn now_ns(&self) -> u64;

    /// The memory budget the cache is held to, when the source knows it (the simulator).
    fn budget_bytes(&self) -> Option<u64> {
        None
    }

    /// The source's own memory pressure, percent, when it has one (the simulator's stand-in
    /// for PSI `some` over the last second); `None`: the machine's PSI speaks.
    fn memory_pressure(&self) -> Option<f64> {
        None
    }

    /// The Android packages.list that names this source's apps, when it brings one (the
    /// simulated phone, a recording of it).
    fn packages_list(&self) -> Option<String> {
        None
    }

    /// The node blocks this source's node reads read, when it has them (the simulator's
    /// disk): the model then tells its node reads apart by node type.
    fn node_image(&self) -> Option<crate::model::NodeImage> {
        None
    }

    /// Where this source's knob files live (`<root>/<dev>/node_compress_*`), when it has any.
    fn knob_root(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// The exact counters the source keeps besides its events (the kernel's per-task and
    /// per-kind counters, cumulative), when it keeps any.
    fn kernel_counts(&mut self) -> Result<Option<KernelCounts>> {
        Ok(None)
    }

    /// One line on how the source's own bookkeeping went (the kernel's counter map: its peak
    /// population, the exited processes folded), said when a run ends.
    fn closing_note(&self) -> Option<String> {
        None
    }

    /// A recording's notes, footer and damage, as far as it has been read (a replay).
    fn recording_tail(&self) -> Option<&replay::RecordingTail> {
        None
    }
}
