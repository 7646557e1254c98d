//! The stream line: one JSON object per closed window, what `stream --json` and `record --json`
//! print and what the daemon's `window` messages carry (docs/STREAM.md), for every source. The
//! same window gives the same line, so a replay of a recording prints exactly what the live
//! run printed; with the kernel source, node reads, node writes and checkpoints are the
//! kernel's exact counts (`model::exact`).
//!
//! [`StreamLine::from_window`] is the one projection of the model into it; `view::jsonline`
//! prints it and its text form, the daemon sends it, its clients read it back as a
//! [`StreamLine`]. The counter set's JSON ([`CounterSet`]) is also `report --json`'s and
//! `record --json`'s `totals`.
//!
//! The fields are declared in the order the line prints them: its keys sorted, at every depth
//! (`super::to_sorted_json`; the line was a `serde_json::Value`, whose maps sort their keys).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tracer_common::{
    activity::{Counters, LatencyHistogram, PerQueue, PerReason, Retrievals},
    Outcome, RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS,
};

use crate::model::{
    cache_counters::CounterTotals, node_types::TypeCounts, CacheGauges, CheckpointSummary,
    DeviceNodeCounts, ProcessRow, WindowReport,
};

/// The schema's version, the line's first field. Version 1 was two schemas (kernel and model
/// sources); version 2 is one for all; version 3 names the window's length `window_s` (it was
/// `interval_s`, a word that belongs to the knob `node_compress_interval`); version 4 adds node
/// retrieval latency (issue 51): `retrievals` in `totals` and `cumulative`, and each process's
/// `lookups`, `wait_ns`, `lookup_p50_ns` and `lookup_p99_ns`.
pub const STREAM_VERSION: u32 = 4;

/// One closed window (docs/STREAM.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamLine {
    pub cache: CacheGauges,
    pub checkpoint: CheckpointLine,
    pub counter_drops: u64,
    /// What the mechanism's own counters counted, where the source reads them (issue 49).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<MechanismCounters>,
    pub counts: Counts,
    pub cumulative: CounterSet,
    pub devices: Vec<DeviceLine>,
    pub drops: u64,
    pub eager_restores: u64,
    pub events: u64,
    /// Only where the model tells node types apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_types: Option<TypeCounts>,
    /// Busiest first.
    pub processes: Vec<ProcessLine>,
    /// How many processes were left out of `processes`, when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_more: Option<u64>,
    pub rfc: Option<BTreeMap<String, u64>>,
    /// The window's end, seconds since window 0 began (to the millisecond).
    pub t: f64,
    pub totals: CounterSet,
    pub version: u32,
    /// The window's length in seconds (to the millisecond).
    pub window_s: f64,
}

/// Where the line's node reads, node writes and checkpoints come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Counts {
    /// The kernel's exact counters.
    Kernel,
    /// The events.
    #[default]
    Events,
}

/// One process of the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessLine {
    pub app: String,
    pub checkpoints: u64,
    pub comm: String,
    pub conversions: u64,
    pub lookup_p50_ns: Option<u64>,
    pub lookup_p99_ns: Option<u64>,
    pub lookups: u64,
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub pid: u32,
    pub reclaims: u64,
    pub restores: u64,
    pub second_chances: u64,
    pub uid: u32,
    pub wait_ns: u64,
}

/// One device's counts over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceLine {
    pub checkpoints: u64,
    /// "major:minor".
    pub dev: String,
    pub name: Option<String>,
    pub node_reads: u64,
    pub node_writes: u64,
    pub node_writes_per_checkpoint: Option<f64>,
}

/// Checkpoint anatomy over the window, from the events, for every source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointLine {
    pub block_ops_ms: f64,
    pub count: u64,
    pub cp_blocks: u64,
    pub nat_blocks: u64,
    pub nat_journal: u64,
    pub node_blocks: u64,
    pub nodes_per_checkpoint: Option<f64>,
    pub other_meta_blocks: u64,
    pub sit_blocks: u64,
    pub sit_journal: u64,
    pub ssa_blocks: u64,
    pub write_ms: f64,
}

/// The mechanism's own counters (`model::cache_counters`): events per kind since the start,
/// entries per queue now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MechanismCounters {
    pub entries: Option<PerQueue>,
    pub kinds: BTreeMap<String, u64>,
}

/// The counter set (`tracer_common::activity::Counters`) as the line's `totals` and
/// `cumulative`, and `report --json`'s and `record --json`'s `totals`: reasons by name, the
/// latency histograms with their quantiles, the sums a reader wants (`node_reads`,
/// `hit_ratio`). The model's own serde form of `Counters` (the daemon's snapshot) is its state,
/// lossless; this one is for reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterSet {
    pub checkpoints: u64,
    pub conversions: u64,
    pub convert_aborts: u64,
    pub convert_rejects: u64,
    pub forgets: u64,
    pub hit_ratio: Option<f64>,
    pub inserts: u64,
    pub node_reads: u64,
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub reclaims: PerQueue,
    /// `{"<reason>": count, ..., "unknown": count}`.
    pub restore_fail_reasons: BTreeMap<String, u64>,
    pub restore_fails: u64,
    pub restore_latency: Latency,
    pub restore_nomem: u64,
    pub restores: u64,
    pub retrievals: RetrievalsLine,
    /// `{"<reason>": count, ..., "unknown": count}`.
    pub second_chance_reasons: BTreeMap<String, u64>,
    pub second_chances: PerQueue,
}

/// Timed node lookups (issue 51): every lookup is in one outcome (`hit`, `restore`,
/// `disk_read`, `waited`, `error`, the names of `tracer_common::Outcome`): the outcomes'
/// counts sum to `count`, their `total_ns` to `wait_ns`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalsLine {
    pub count: u64,
    /// The reads' device time, block layer issue to completion, where measured.
    pub device: Latency,
    pub disk_read: Latency,
    pub error: Latency,
    pub hit: Latency,
    /// All lookups.
    pub latency: Latency,
    /// The demand node reads the lookups submitted themselves.
    pub node_reads: u64,
    pub restore: Latency,
    pub wait_ns: u64,
    pub waited: Latency,
}

/// A latency histogram: the quantiles are their bucket's upper bound; only non-empty buckets
/// are listed in `log2_ns`, by their lower bound in ns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub log2_ns: BTreeMap<String, u64>,
    pub mean_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub total_ns: u64,
}

impl StreamLine {
    /// The line of `window` with the `max_processes` busiest processes only (`usize::MAX`: all
    /// of them), and `processes_more`: how many were left out, when any were. Only the rows
    /// kept are projected (a daemon's window can hold thousands). `origin_ns` is the model's
    /// window origin.
    pub fn from_window(window: &WindowReport, origin_ns: u64, max_processes: usize) -> Self {
        let busy = |row: &&ProcessRow| row.counters.node_reads() + row.counters.restores;
        let order =
            |a: &&ProcessRow, b: &&ProcessRow| busy(b).cmp(&busy(a)).then(a.pid.cmp(&b.pid));
        let mut rows: Vec<&ProcessRow> = window.processes.iter().collect();
        let more = rows.len().saturating_sub(max_processes);
        if more > 0 {
            rows.select_nth_unstable_by(max_processes, order);
            rows.truncate(max_processes);
        }
        rows.sort_by(order);
        let exact = window.exact.as_ref();
        StreamLine {
            version: STREAM_VERSION,
            t: round_ms(window.end_ns.saturating_sub(origin_ns) as f64 / 1e9),
            window_s: round_ms(window.end_ns.saturating_sub(window.start_ns) as f64 / 1e9),
            counts: if exact.is_some() {
                Counts::Kernel
            } else {
                Counts::Events
            },
            totals: CounterSet::from(&window.activity),
            processes: rows.into_iter().map(ProcessLine::from).collect(),
            processes_more: (more > 0).then_some(more as u64),
            devices: window
                .devices
                .iter()
                .map(|(dev, c)| DeviceLine::new(*dev, c))
                .collect(),
            cache: window.cache,
            cumulative: CounterSet::from(&window.totals),
            eager_restores: window.eager_restores,
            events: window.events,
            drops: window.activity.lost,
            counter_drops: exact.map_or(0, |e| e.counter_drops),
            rfc: exact.and_then(|e| e.rfc.as_ref()).map(|rfc| {
                rfc.iter()
                    .map(|(name, n)| ((*name).to_string(), *n))
                    .collect()
            }),
            checkpoint: CheckpointLine::from(&window.checkpoint),
            node_types: window.node_types,
            counters: window.counters.as_ref().map(MechanismCounters::from),
        }
    }

    /// The line as it is printed: one line of JSON, keys sorted (no newline).
    pub fn to_json(&self) -> String {
        super::to_sorted_json(self).expect("a stream line is plain data")
    }
}

impl From<&ProcessRow> for ProcessLine {
    fn from(row: &ProcessRow) -> Self {
        let c = &row.counters;
        ProcessLine {
            pid: row.pid,
            comm: row.comm.clone(),
            uid: row.uid,
            app: row.app.clone(),
            node_reads_demand: c.node_reads_demand,
            node_reads_readahead: c.node_reads_readahead,
            node_writes: c.node_writes,
            checkpoints: c.checkpoints,
            restores: c.restores,
            conversions: c.conversions,
            reclaims: c.reclaims.total(),
            second_chances: c.second_chances.total(),
            lookups: c.retrievals.count(),
            wait_ns: c.retrievals.wait_ns(),
            lookup_p50_ns: c.retrievals.all().quantile_bound_ns(0.5),
            lookup_p99_ns: c.retrievals.all().quantile_bound_ns(0.99),
        }
    }
}

impl DeviceLine {
    fn new(dev: u32, counts: &DeviceNodeCounts) -> Self {
        DeviceLine {
            dev: crate::system::major_minor(dev),
            name: counts.name.clone(),
            node_reads: counts.node_reads,
            node_writes: counts.node_writes,
            checkpoints: counts.checkpoints,
            node_writes_per_checkpoint: (counts.checkpoints > 0)
                .then(|| counts.node_writes as f64 / counts.checkpoints as f64),
        }
    }
}

impl From<&CheckpointSummary> for CheckpointLine {
    fn from(summary: &CheckpointSummary) -> Self {
        let w = &summary.written;
        CheckpointLine {
            count: summary.count,
            node_blocks: w.node_blocks,
            nodes_per_checkpoint: summary.nodes_per_checkpoint(),
            cp_blocks: w.cp_blocks,
            sit_blocks: w.sit_blocks,
            nat_blocks: w.nat_blocks,
            ssa_blocks: w.ssa_blocks,
            other_meta_blocks: w.other_meta_blocks,
            nat_journal: w.nat_journal,
            sit_journal: w.sit_journal,
            block_ops_ms: round_ms(summary.block_ops_ns as f64 / 1e6),
            write_ms: round_ms(summary.write_ns as f64 / 1e6),
        }
    }
}

impl From<&CounterTotals> for MechanismCounters {
    fn from(totals: &CounterTotals) -> Self {
        MechanismCounters {
            kinds: totals
                .kinds
                .iter()
                .map(|(kind, n)| ((*kind).to_string(), *n))
                .collect(),
            entries: totals.entries,
        }
    }
}

impl From<&Counters> for CounterSet {
    fn from(c: &Counters) -> Self {
        CounterSet {
            node_reads: c.node_reads(),
            node_reads_demand: c.node_reads_demand,
            node_reads_readahead: c.node_reads_readahead,
            node_writes: c.node_writes,
            checkpoints: c.checkpoints,
            restores: c.restores,
            restore_latency: Latency::from(&c.restore_latency),
            restore_fails: c.restore_fails,
            restore_fail_reasons: reasons(&c.restore_fail_reasons, &RESTORE_FAIL_REASONS),
            restore_nomem: c.restore_nomem,
            hit_ratio: c.hit_ratio(),
            conversions: c.conversions,
            convert_rejects: c.convert_rejects,
            convert_aborts: c.convert_aborts,
            reclaims: c.reclaims,
            second_chances: c.second_chances,
            second_chance_reasons: reasons(&c.second_chance_reasons, &SECOND_CHANCE_REASONS),
            inserts: c.inserts,
            forgets: c.forgets,
            retrievals: RetrievalsLine::from(&c.retrievals),
        }
    }
}

impl From<&Retrievals> for RetrievalsLine {
    fn from(r: &Retrievals) -> Self {
        let outcome = |o: Outcome| Latency::from(&r.get(o));
        RetrievalsLine {
            count: r.count(),
            wait_ns: r.wait_ns(),
            node_reads: r.node_reads,
            latency: Latency::from(&r.all()),
            device: Latency::from(&r.device()),
            hit: outcome(Outcome::Hit),
            restore: outcome(Outcome::Restore),
            disk_read: outcome(Outcome::DiskRead),
            waited: outcome(Outcome::Waited),
            error: outcome(Outcome::Error),
        }
    }
}

impl RetrievalsLine {
    /// The histogram of one outcome.
    pub fn outcome(&self, outcome: Outcome) -> &Latency {
        match outcome {
            Outcome::Hit => &self.hit,
            Outcome::Restore => &self.restore,
            Outcome::DiskRead => &self.disk_read,
            Outcome::Waited => &self.waited,
            Outcome::Error => &self.error,
        }
    }
}

impl From<&LatencyHistogram> for Latency {
    fn from(h: &LatencyHistogram) -> Self {
        Latency {
            count: h.count,
            total_ns: h.total_ns,
            mean_ns: h.mean_ns(),
            p50_ns: h.quantile_bound_ns(0.5),
            p99_ns: h.quantile_bound_ns(0.99),
            log2_ns: h
                .log2_ns
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| ((1u64 << i).to_string(), *n))
                .collect(),
        }
    }
}

/// `{"<reason>": count, ..., "unknown": count}`.
fn reasons(counts: &PerReason, names: &[(u8, &str)]) -> BTreeMap<String, u64> {
    let mut map: BTreeMap<String, u64> = names
        .iter()
        .map(|&(code, name)| (name.to_string(), counts.get(code)))
        .collect();
    map.insert("unknown".to_string(), counts.get(0));
    map
}

fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tracer_common::{Event, EventKind, TaskCounts, TaskKey};

    use super::*;
    use crate::model::{KernelCounts, Model, ModelConfig};

    /// A window with the kernel's counts (`counts`, `rfc`, devices by name) and the events'
    /// (restores, a hit ratio of 1/3, several processes).
    fn window() -> WindowReport {
        const VDA: u32 = 254 << 20;
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        for (tgid, kind) in [
            (7, EventKind::NodeRead),
            (7, EventKind::Restore),
            (9, EventKind::NodeRead),
            (9, EventKind::NodeRead),
        ] {
            model.ingest(&Event::new(kind, 5).task(tgid).dev(VDA));
        }
        let mut cat = TaskCounts {
            node_reads_demand: 2,
            node_writes: 3,
            checkpoints: 1,
            ..TaskCounts::default()
        };
        cat.comm[..3].copy_from_slice(b"cat");
        let mut ckpt = TaskCounts {
            node_reads_readahead: 5,
            ..TaskCounts::default()
        };
        ckpt.comm[..4].copy_from_slice(b"ckpt");
        let key = |tgid| TaskKey {
            dev: VDA,
            tgid,
            uid: 10_001,
            _pad: 0,
        };
        model.observe_kernel(&KernelCounts {
            tasks: vec![(key(7), cat), (key(9), ckpt)],
            retired: Vec::new(),
            counter_failures: 2,
            rfc: Some(BTreeMap::from([("restore", 1), ("convert", 4)])),
            device_names: BTreeMap::from([(VDA, "vda".to_string())]),
        });
        model.advance_to(1_234_567_890);
        model.take_closed().remove(0)
    }

    #[test]
    fn a_line_round_trips_through_its_json() {
        let line = StreamLine::from_window(&window(), 0, usize::MAX);
        assert_eq!(line.counts, Counts::Kernel);
        assert!(line.rfc.is_some() && !line.devices.is_empty() && line.processes.len() > 1);
        let json = line.to_json();
        let back: StreamLine = serde_json::from_str(&json).unwrap();
        assert_eq!(back, line);
        assert_eq!(back.to_json(), json, "the same line, byte for byte");
        // A cut line keeps its `processes_more` through the round trip.
        let cut = StreamLine::from_window(&window(), 0, 1);
        assert_eq!(cut.processes_more, Some(1));
        let back: StreamLine = serde_json::from_str(&cut.to_json()).unwrap();
        assert_eq!(back, cut);
    }

    /// The retrievals' outcome fields are `tracer_common::Outcome`'s names.
    #[test]
    fn the_outcomes_are_named_as_the_model_names_them() {
        let r = RetrievalsLine::default();
        let value = serde_json::to_value(&r).unwrap();
        for outcome in Outcome::ALL {
            assert!(value.get(outcome.name()).is_some(), "{}", outcome.name());
            assert_eq!(
                serde_json::to_value(r.outcome(outcome)).unwrap(),
                value[outcome.name()]
            );
        }
    }
}
