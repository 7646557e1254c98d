//! The model's state, copied out of it at a refresh: a view draws it without touching the model
//! (a paused screen simply keeps its snapshot), and the daemon sends it to its clients.
use std::collections::VecDeque;

use tracer_common::knobs::Knobs;

use crate::{
    model::{
        checkpoints::CheckpointReport,
        node_types::{NodeTypeReads, TypeCounts},
        AppRow, CacheGauges, Counters, Model,
    },
    source::SourceInfo,
};

/// How many windows the sparklines show (the widest terminal rarely has more columns).
const SPARK_WINDOWS: usize = 240;

/// The model's state at a refresh: what `top` draws, locally or from a daemon's
/// `snapshot` messages (docs/DAEMON.md).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub source: SourceInfo,
    pub window_secs: f64,
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
}

/// The node-type panel's figures: since the start, and in the newest closed window.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeTypesShown {
    pub total: NodeTypeReads,
    pub window: TypeCounts,
}

impl Snapshot {
    pub fn capture(model: &Model, source: &SourceInfo) -> Snapshot {
        let history = model.history();
        let skip = history.len().saturating_sub(SPARK_WINDOWS);
        let series = |f: fn(&Counters) -> u64| -> Vec<u64> {
            history.iter().skip(skip).map(|w| f(&w.activity)).collect()
        };
        let (exited_processes, exited) = model.exited();
        Snapshot {
            source: source.clone(),
            window_secs: model.config().window_ns as f64 / 1e9,
            knobs: model.observed().knobs,
            budget_bytes: model.observed().budget_bytes,
            memory_pressure: model.observed().memory_pressure,
            controller: None,
            node_reads: series(Counters::node_reads),
            restores: series(|c| c.restores),
            conversions: series(|c| c.conversions),
            reclaims: series(|c| c.reclaims.total()),
            cache: model.cache(),
            apps: model.apps(),
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

    /// The controller's part, which lives outside the model: its mode for the header and the
    /// decisions pane's lines (newest last; the newest 50 are shown, newest first).
    pub fn with_control(mut self, mode: Option<String>, pane: &VecDeque<String>) -> Snapshot {
        self.controller = mode;
        self.decisions = pane.iter().rev().take(50).cloned().collect();
        self
    }
}
