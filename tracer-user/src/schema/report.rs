//! The report's JSON (`report --json`, built by `model::recording::build`; its text is
//! `view::report_text`), the comparison's (`report --compare --json`, built by
//! `model::comparison::compare`; its text is `view::compare_text`) and the totals line
//! `record --json` ends with.
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
    /// Node lookups, node-page evictions and inode evictions (recordings made with
    /// `--accesses`).
    #[serde(skip_serializing_if = "is_zero")]
    pub node_accesses: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub node_evictions: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub inode_evictions: u64,
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

/// One figure in both runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Pair {
    pub off: u64,
    pub on: u64,
    /// (on - off) / off in percent; None when off is 0.
    pub change_percent: Option<f64>,
}

impl Pair {
    pub(crate) fn new(off: u64, on: u64) -> Pair {
        Pair {
            off,
            on,
            change_percent: (off > 0).then(|| (on as f64 - off as f64) / off as f64 * 100.0),
        }
    }
}

/// A figure of the timed lookups (issue 51), which a run has only when it was recorded with
/// `--lookup-latency`: compared only when both runs have it. Otherwise the side without it is
/// null, the change too, and `not_compared` says why (a run without timed lookups is not a
/// run whose lookups took no time: a change of -100 % would be a lie).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct TimedPair {
    pub off: Option<u64>,
    pub on: Option<u64>,
    /// (on - off) / off in percent; None when either side is missing or off is 0.
    pub change_percent: Option<f64>,
    pub not_compared: Option<String>,
}

impl TimedPair {
    /// `off` and `on` where each run has timed lookups (`timed`: off, on).
    pub(crate) fn new(off: u64, on: u64, timed: (bool, bool)) -> TimedPair {
        let why = match timed {
            (true, true) => None,
            (false, true) => Some("the off run has no timed lookups (--lookup-latency)"),
            (true, false) => Some("the on run has no timed lookups (--lookup-latency)"),
            (false, false) => Some("neither run has timed lookups (--lookup-latency)"),
        };
        let (off, on) = (timed.0.then_some(off), timed.1.then_some(on));
        TimedPair {
            off,
            on,
            change_percent: off
                .zip(on)
                .and_then(|(off, on)| Pair::new(off, on).change_percent),
            not_compared: why.map(String::from),
        }
    }
}

/// The cover letter's rows, from the cache as the events left it and the counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct OffOnTotals {
    /// Entries in the cache at the end (raw and compressed).
    pub retained_nodes: Pair,
    pub compressed_entries: Pair,
    /// Entries' bookkeeping, raw buffers and compressed slots at the end.
    pub attributed_bytes: Pair,
    pub node_reads: Pair,
    pub node_read_bytes: Pair,
    pub restores: Pair,
    /// The events the cache figures are derived from; without conversions and reclaims (a
    /// kernel whose probes see neither) the cache figures are not the kernel's.
    pub conversions: Pair,
    pub reclaims: Pair,
}

impl OffOnTotals {
    /// Whether the cache figures can be trusted: compressed entries came from somewhere.
    pub(crate) fn cache_is_derived(&self) -> bool {
        self.restores.on == 0 || self.conversions.on > 0
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct AppComparison {
    pub app: String,
    pub node_reads: Pair,
    pub node_read_bytes: Pair,
    pub restores: Pair,
    /// Timed lookups and their times summed (issue 51): what the app waited.
    pub lookups: TimedPair,
    pub wait_ns: TimedPair,
}

/// The cover letter's latency rows (issue 51) from the timed lookups of both recordings: the
/// median lookup, the median node's retrieval time (a node's lookups summed; in a replay of
/// small files, per file), and paired medians: per node and per app, the change from off to
/// on of the same node's (app's) retrieval time, the median of those changes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LatencyComparison {
    pub lookups: TimedPair,
    pub wait_ns: TimedPair,
    pub median_lookup_ns: TimedPair,
    pub median_node_ns: TimedPair,
    pub paired_node_change_percent: Option<f64>,
    /// Nodes timed in both runs (with a non-zero time off).
    pub node_pairs: u64,
    pub paired_app_change_percent: Option<f64>,
    pub app_pairs: u64,
    /// Lookups past the bounds kept one by one (`lookup_times`), either run: the medians then
    /// cover the first ones.
    pub left_out: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Comparison {
    pub off_seconds: f64,
    pub on_seconds: f64,
    pub totals: OffOnTotals,
    /// Apps of either run, the off run's busiest (node reads) first.
    pub apps: Vec<AppComparison>,
    /// Where either recording has timed lookups (`--lookup-latency`).
    pub latency: Option<LatencyComparison>,
    /// Events lost in either recording: the figures then undercount.
    pub drops: Pair,
    /// Both recordings were read to their end.
    pub complete: bool,
    /// A recording began with entries in the cache it never saw arrive: its retained nodes and
    /// attributed bytes count only what its events saw (`CacheGauges::partial`).
    pub cache_partial: bool,
}
