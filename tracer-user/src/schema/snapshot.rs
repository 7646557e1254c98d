//! The model's state, copied out of it at a refresh: a view draws it without touching the model
//! (a paused screen simply keeps its snapshot), and the daemon sends it to its clients.
use std::collections::VecDeque;

use tracer_common::knobs::Knobs;

use crate::{
    model::{
        checkpoints::CheckpointReport,
        node_types::{NodeTypeReads, TypeCounts},
        AppRow, CacheGauges, Counters, Model, OtherApps,
    },
    source::SourceInfo,
};

/// How many windows the sparklines show (the widest terminal rarely has more columns).
const SPARK_WINDOWS: usize = 240;

/// Apps a daemon's snapshot names: the most active, about a kilobyte each on the wire; the
/// rest are summed in `apps_other`. Any local user can make apps (a process with no package
/// is one, up to 10,000), and the full table was 11.4 MB four times a second (issue 52). A
/// screen shows a few dozen rows; the full table is the rolling recording's (`report`).
pub(crate) const SNAPSHOT_APPS: usize = 200;

/// The model's state at a refresh: what `top` draws, locally or from a daemon's
/// `snapshot` messages (docs/DAEMON.md).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub source: SourceInfo,
    /// The model's window length, as the hello's `window_ns` (protocol version 4; it was
    /// `window_secs`, seconds as a float).
    pub window_ns: u64,
    pub knobs: Option<Knobs>,
    pub budget_bytes: Option<u64>,
    pub memory_pressure: Option<f64>,
    pub controller: Option<String>,
    pub node_reads: Vec<u64>,
    pub restores: Vec<u64>,
    pub conversions: Vec<u64>,
    pub reclaims: Vec<u64>,
    pub cache: CacheGauges,
    pub apps: Vec<AppRow>,
    pub live_processes: usize,
    pub exited_processes: u64,
    pub exited: Counters,
    pub totals: Counters,
    pub decisions: Vec<String>,
    pub checkpoints: CheckpointReport,
    /// Node reads by node type, when the model tells them apart (the simulator; `--image`).
    /// Absent from an older daemon's snapshots.
    #[serde(default)]
    pub node_types: Option<NodeTypesShown>,
    /// The apps left out of `apps` by the daemon's bound ([`SNAPSHOT_APPS`]), summed, with
    /// their count; `None` when `apps` is the whole table. Absent from an older daemon's
    /// snapshots.
    #[serde(default)]
    pub apps_other: Option<OtherApps>,
}

/// The node-type panel's figures: since the start, and in the newest closed window.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeTypesShown {
    pub total: NodeTypeReads,
    pub window: TypeCounts,
}

impl Snapshot {
    pub fn capture(model: &Model, source: &SourceInfo) -> Snapshot {
        Snapshot {
            apps: model.apps(),
            ..Snapshot::capture_without_apps(model, source)
        }
    }

    fn capture_without_apps(model: &Model, source: &SourceInfo) -> Snapshot {
        let history = model.history();
        let skip = history.len().saturating_sub(SPARK_WINDOWS);
        let series = |f: fn(&Counters) -> u64| -> Vec<u64> {
            history.iter().skip(skip).map(|w| f(&w.activity)).collect()
        };
        let (exited_processes, exited) = model.exited();
        Snapshot {
            source: source.clone(),
            window_ns: model.config().window_ns,
            knobs: model.observed().knobs,
            budget_bytes: model.observed().budget_bytes,
            memory_pressure: model.observed().memory_pressure,
            controller: None,
            node_reads: series(Counters::node_reads),
            restores: series(|c| c.restores),
            conversions: series(|c| c.conversions),
            reclaims: series(|c| c.reclaims.total()),
            cache: model.cache(),
            apps: Vec::new(),
            apps_other: None,
            live_processes: model.process_count(),
            exited_processes,
            exited: *exited,
            totals: model.totals(),
            decisions: Vec::new(),
            checkpoints: CheckpointReport::from_tracker(model.checkpoints()),
            node_types: model.node_types().map(|total| NodeTypesShown {
                total: total.clone(),
                window: history
                    .back()
                    .and_then(|w| w.node_types)
                    .unwrap_or_default(),
            }),
        }
    }

    /// [`Snapshot::capture`] for the daemon's clients: the [`SNAPSHOT_APPS`] most active
    /// apps (by node reads in the last closed window, then since the start), the rest summed
    /// in `apps_other`, so a snapshot's size does not grow with the number of apps.
    pub fn capture_bounded(model: &Model, source: &SourceInfo) -> Snapshot {
        let mut snapshot = Snapshot::capture_without_apps(model, source);
        let (apps, other) = model.top_apps(SNAPSHOT_APPS, |total, last| {
            (last.node_reads(), total.node_reads())
        });
        snapshot.apps = apps;
        snapshot.apps_other = other;
        snapshot
    }

    /// The controller's part, which lives outside the model: its mode for the header and the
    /// decisions pane's lines (newest last; the newest 50 are shown, newest first).
    pub fn with_control(mut self, mode: Option<String>, pane: &VecDeque<String>) -> Snapshot {
        self.controller = mode;
        self.decisions = pane.iter().rev().take(50).cloned().collect();
        self
    }
}
