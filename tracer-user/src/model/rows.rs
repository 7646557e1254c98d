//! What the model hands out: processes, their per-window rows, closed windows, the
//! per-app rows, and what the system said about itself (`Observed`).
use super::*;

/// One process (tgid) as the model tracks it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Process {
    pub tgid: u32,
    pub comm: String,
    pub uid: u32,
    pub app: AppKey,
    pub total: Counters,
    #[serde(skip)]
    pub(super) window: WindowCounts,
    /// Its app's slot in the per-app table.
    #[serde(skip)]
    pub(super) app_slot: usize,
}

/// The counters of the latest window something was counted in, and of the window before it
/// (for rates in the tables).
#[derive(Clone, Debug, Default)]
pub(super) struct WindowCounts {
    latest: Counters,
    index: u64,
    previous: Counters,
}

impl WindowCounts {
    pub(super) fn new(index: u64) -> WindowCounts {
        WindowCounts {
            index,
            ..WindowCounts::default()
        }
    }

    /// Count `decoded` in window `index` (the open one).
    pub(super) fn record(&mut self, decoded: &Decoded, index: u64) {
        if self.index != index {
            self.previous = if self.index + 1 == index {
                self.latest
            } else {
                Counters::default()
            };
            self.latest = Counters::default();
            self.index = index;
        }
        self.latest.record(decoded);
    }

    /// The latest window anything was counted in.
    pub(super) fn index(&self) -> u64 {
        self.index
    }

    /// The counters of the latest window.
    pub(super) fn latest(&self) -> &Counters {
        &self.latest
    }

    /// The counters of window `index`, if they are still known (else zero).
    pub(super) fn at(&self, index: u64) -> Counters {
        self.at_ref(index).copied().unwrap_or_default()
    }

    /// [`Self::at`] without a copy; None for a window with nothing counted. A scrape of
    /// thousands of apps reads every app's last window: a `Counters` is over a KiB.
    pub(super) fn at_ref(&self, index: u64) -> Option<&Counters> {
        if self.index == index {
            Some(&self.latest)
        } else if self.index == index + 1 {
            Some(&self.previous)
        } else {
            None
        }
    }
}

/// One process's activity in one window.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    pub uid: u32,
    pub app: String,
    #[serde(flatten)]
    pub counters: Counters,
}

/// A closed window.
#[derive(Clone, Debug, Serialize)]
pub struct WindowReport {
    pub index: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// This window's activity; the processes' counters add up to it.
    pub activity: Counters,
    /// Everything since the model started, up to the end of this window.
    pub totals: Counters,
    pub processes: Vec<ProcessRow>,
    /// This window's node reads, node writes and checkpoints per device, from the events.
    pub devices: BTreeMap<u32, DeviceNodeCounts>,
    /// Events received in this window (lost-event markers aside).
    pub events: u64,
    pub cache: CacheGauges,
    /// Restores in this window of entries converted less than the eager time before.
    pub eager_restores: u64,
    /// Eager restores since the model started, up to the end of this window.
    pub eager_restores_total: u64,
    /// The kernel's own exact counts over this window, when the source keeps them.
    pub exact: Option<ExactWindow>,
    /// Checkpoints completed in this window and the blocks written in it, from the events.
    pub checkpoint: CheckpointSummary,
    /// The same since the model started, up to the end of this window.
    pub checkpoint_total: CheckpointSummary,
    /// This window's node reads by node type, when the model has an image to tell them by
    /// (from the node-read events: on a kernel, `--image` turns those on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_types: Option<super::node_types::TypeCounts>,
    /// What the mechanism's own counters counted since the start (per kind) and its entries
    /// per queue now, when the source reads them; their counts are also in `activity` and
    /// `totals`, in place of the events'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<super::cache_counters::CounterTotals>,
}

/// What the system said about itself, besides events: the knob values in force and the
/// source's gauges. The pipeline observes them; views and the controller read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Observed {
    /// The knob values in their files (None: not readable, or no knob files).
    pub knobs: Option<Knobs>,
    pub budget_bytes: Option<u64>,
    /// The source's own memory pressure, percent (the simulator's); `None` on a real kernel.
    pub memory_pressure: Option<f64>,
}

/// One row of the per-app table.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct AppRow {
    pub app: AppKey,
    pub processes: u32,
    pub total: Counters,
    pub last_window: Counters,
}

/// The apps a bounded table leaves out (`Model::top_apps`), summed: how many, their live
/// processes, their totals and their counters of the last closed window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct OtherApps {
    pub apps: u64,
    pub processes: u64,
    pub total: Counters,
    pub last_window: Counters,
}

impl OtherApps {
    pub(super) fn lump(
        &mut self,
        processes: u32,
        total: &Counters,
        last_window: Option<&Counters>,
    ) {
        self.apps += 1;
        self.processes += u64::from(processes);
        self.total.add(total);
        if let Some(last_window) = last_window {
            self.last_window.add(last_window);
        }
    }
}
