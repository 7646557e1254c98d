//! The report's JSON (`report --json`, built by `model::recording::build`; its text is
//! `view::report_text`) and the totals line `record --json` ends with.
use std::collections::BTreeMap;

use serde::Serialize;

use super::stream::CounterSet;
use crate::{
    model::{
        checkpoints::CheckpointReport, node_types::NodeTypeReads, AppRow, CacheGauges, Counters,
        PerQueue,
    },
    record::{Header, Note},
};

/// `record --json`'s one line, after the recording is written: the run's counts (as the
/// stream's `cumulative`) and the events recorded.
#[derive(Debug, Serialize)]
pub(crate) struct RecordTotals {
    pub events: u64,
    pub totals: CounterSet,
}

/// Per device: checkpoints and the node writes between them.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct DeviceReport {
    pub node_writes: u64,
    pub checkpoints: u64,
    pub node_writes_per_checkpoint: Option<f64>,
    /// Node lookups and node-page evictions (recordings made with `--accesses`).
    #[serde(skip_serializing_if = "is_zero")]
    pub node_accesses: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub node_evictions: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub header: Header,
    pub time_range: TimeRange,
    /// As the stream prints its counts (reasons by name, the latency histogram's quantiles).
    #[serde(serialize_with = "totals_json")]
    pub totals: Counters,
    pub hit_ratio: Option<f64>,
    pub apps: Vec<AppRow>,
    /// Conversions by the slot they went into.
    pub slot_mix: PerQueue,
    /// The cache as the events left it at the end (entries per queue, attributed bytes).
    pub cache: CacheGauges,
    pub devices: BTreeMap<String, DeviceReport>,
    /// Checkpoint anatomy (issue 19): seed 002's table.
    pub checkpoints: CheckpointReport,
    /// Node reads by node type, when an image of the device was given (`report --image`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_types: Option<NodeTypeReads>,
    pub notes: Vec<Note>,
    /// Notes past the first 32 MiB of them, counted only.
    pub notes_omitted: u64,
    /// Events lost before they were recorded.
    pub drops: u64,
    pub complete: bool,
    /// Where the file stopped being readable, if it did.
    pub damage: Option<String>,
    /// Each timed lookup's time (issue 51), for `report --compare`.
    #[serde(skip)]
    pub lookup_times: crate::model::lookup_times::LookupTimes,
}

fn totals_json<S: serde::Serializer>(totals: &Counters, serializer: S) -> Result<S::Ok, S::Error> {
    super::sorted_keys(&CounterSet::from(totals), serializer)
}

#[derive(Debug, Serialize)]
pub(crate) struct TimeRange {
    pub start_ns: u64,
    pub end_ns: u64,
    pub seconds: f64,
}
