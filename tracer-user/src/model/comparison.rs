//! Off against on, as the RFC's cover letter compares them: two reports of the same workload
//! (compression off, then on), their retained nodes, attributed memory, node reads and
//! restores, and the change of each, in total and per app (`nodescope report --compare`).
use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    lookup_times::{median, paired_median_change},
    recording::Report,
    AppKey, Counters,
};

/// Bytes a node read brings in: one F2FS block.
const NODE_BLOCK_BYTES: u64 = 4096;

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
    pub lookups: Pair,
    pub wait_ns: Pair,
}

/// The cover letter's latency rows (issue 51) from the timed lookups of both recordings: the
/// median lookup, the median node's retrieval time (a node's lookups summed; in a replay of
/// small files, per file), and paired medians: per node and per app, the change from off to
/// on of the same node's (app's) retrieval time, the median of those changes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LatencyComparison {
    pub lookups: Pair,
    pub wait_ns: Pair,
    pub median_lookup_ns: Pair,
    pub median_node_ns: Pair,
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

pub(crate) fn compare(off: &Report, on: &Report) -> Comparison {
    let cache = |r: &Report| r.cache;
    let totals = OffOnTotals {
        retained_nodes: Pair::new(
            cache(off).raw_entries + cache(off).slots.compressed(),
            cache(on).raw_entries + cache(on).slots.compressed(),
        ),
        compressed_entries: Pair::new(cache(off).slots.compressed(), cache(on).slots.compressed()),
        attributed_bytes: Pair::new(cache(off).attributed_bytes, cache(on).attributed_bytes),
        node_reads: Pair::new(off.totals.node_reads(), on.totals.node_reads()),
        node_read_bytes: Pair::new(
            off.totals.node_reads() * NODE_BLOCK_BYTES,
            on.totals.node_reads() * NODE_BLOCK_BYTES,
        ),
        restores: Pair::new(off.totals.restores, on.totals.restores),
        conversions: Pair::new(off.totals.conversions, on.totals.conversions),
        reclaims: Pair::new(off.totals.reclaims.total(), on.totals.reclaims.total()),
    };
    Comparison {
        off_seconds: off.time_range.seconds,
        on_seconds: on.time_range.seconds,
        totals,
        apps: apps(off, on),
        latency: latency(off, on),
        drops: Pair::new(off.drops, on.drops),
        complete: off.complete && on.complete,
        cache_partial: off.cache.partial || on.cache.partial,
    }
}

fn apps(off: &Report, on: &Report) -> Vec<AppComparison> {
    let totals = |r: &Report| -> BTreeMap<String, Counters> {
        r.apps.iter().map(|a| (app_name(&a.app), a.total)).collect()
    };
    let (off_apps, on_apps) = (totals(off), totals(on));
    let mut names: Vec<&String> = off_apps.keys().chain(on_apps.keys()).collect();
    names.sort();
    names.dedup();
    let zero = Counters::default();
    let mut rows: Vec<AppComparison> = names
        .into_iter()
        .map(|name| {
            let a = off_apps.get(name).unwrap_or(&zero);
            let b = on_apps.get(name).unwrap_or(&zero);
            AppComparison {
                app: name.clone(),
                node_reads: Pair::new(a.node_reads(), b.node_reads()),
                node_read_bytes: Pair::new(
                    a.node_reads() * NODE_BLOCK_BYTES,
                    b.node_reads() * NODE_BLOCK_BYTES,
                ),
                restores: Pair::new(a.restores, b.restores),
                lookups: Pair::new(a.retrievals.count(), b.retrievals.count()),
                wait_ns: Pair::new(a.retrievals.wait_ns(), b.retrievals.wait_ns()),
            }
        })
        .filter(|row| {
            row.node_reads.off + row.node_reads.on + row.restores.on + row.lookups.off > 0
                || row.lookups.on > 0
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.node_reads.off, b.node_reads.on)
            .cmp(&(a.node_reads.off, a.node_reads.on))
            .then(a.app.cmp(&b.app))
    });
    rows
}

fn latency(off: &Report, on: &Report) -> Option<LatencyComparison> {
    let (a, b) = (&off.lookup_times, &on.lookup_times);
    if a.latencies_ns.is_empty() && b.latencies_ns.is_empty() {
        return None;
    }
    let node_median = |r: &Report| {
        let mut sums: Vec<u64> = r.lookup_times.per_node_ns.values().copied().collect();
        median(&mut sums).unwrap_or(0)
    };
    let (node_change, node_pairs) = paired_median_change(&a.per_node_ns, &b.per_node_ns);
    let app_waits = |r: &Report| -> BTreeMap<String, u64> {
        r.apps
            .iter()
            .map(|row| (app_name(&row.app), row.total.retrievals.wait_ns()))
            .collect()
    };
    let (app_change, app_pairs) = paired_median_change(&app_waits(off), &app_waits(on));
    Some(LatencyComparison {
        lookups: Pair::new(off.totals.retrievals.count(), on.totals.retrievals.count()),
        wait_ns: Pair::new(
            off.totals.retrievals.wait_ns(),
            on.totals.retrievals.wait_ns(),
        ),
        median_lookup_ns: Pair::new(a.median_ns().unwrap_or(0), b.median_ns().unwrap_or(0)),
        median_node_ns: Pair::new(node_median(off), node_median(on)),
        paired_node_change_percent: node_change,
        node_pairs,
        paired_app_change_percent: app_change,
        app_pairs,
        left_out: a.left_out + b.left_out,
    })
}

/// An app as both runs name it: kernel threads in brackets, as the tables show them.
fn app_name(app: &AppKey) -> String {
    match app {
        AppKey::App(name) | AppKey::Program(name) => name.clone(),
        AppKey::Kernel(name) => format!("[{name}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_relative_to_off_and_none_from_zero() {
        // The cover letter's equal-memory rows: node reads 15,668 -> 7,209 is -53.99 %.
        let reads = Pair::new(15_668, 7_209);
        assert!((reads.change_percent.unwrap() + 53.989).abs() < 0.001);
        assert_eq!(Pair::new(0, 9_175).change_percent, None);
        assert_eq!(
            Pair::new(760, 9_208).change_percent.map(|p| p.round()),
            Some(1112.0)
        );
    }
}
