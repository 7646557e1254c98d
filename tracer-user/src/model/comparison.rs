//! Off against on, as the RFC's cover letter compares them: two reports of the same workload
//! (compression off, then on), their retained nodes, attributed memory, node reads and
//! restores, and the change of each, in total and per app (`nodescope report --compare`).
use std::collections::BTreeMap;

use super::{
    lookup_times::{median, paired_median_change},
    recording::Report,
    AppKey, Counters,
};
pub(crate) use crate::schema::report::{
    AppComparison, Comparison, LatencyComparison, OffOnTotals, Pair, TimedPair,
};

/// Bytes a node read brings in: one F2FS block.
const NODE_BLOCK_BYTES: u64 = 4096;

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
    let timed = (timed(off), timed(on));
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
                lookups: TimedPair::new(a.retrievals.count(), b.retrievals.count(), timed),
                wait_ns: TimedPair::new(a.retrievals.wait_ns(), b.retrievals.wait_ns(), timed),
            }
        })
        .filter(|row| {
            let lookups = row.lookups.off.unwrap_or(0) + row.lookups.on.unwrap_or(0);
            row.node_reads.off + row.node_reads.on + row.restores.on + lookups > 0
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.node_reads.off, b.node_reads.on)
            .cmp(&(a.node_reads.off, a.node_reads.on))
            .then(a.app.cmp(&b.app))
    });
    rows
}

/// Whether a run has timed lookups (`--lookup-latency`): its figures of them exist.
fn timed(report: &Report) -> bool {
    report.totals.retrievals.count() > 0
        || !report.lookup_times.latencies_ns.is_empty()
        || report.lookup_times.left_out > 0
}

fn latency(off: &Report, on: &Report) -> Option<LatencyComparison> {
    let (a, b) = (&off.lookup_times, &on.lookup_times);
    let timed = (timed(off), timed(on));
    if timed == (false, false) {
        return None;
    }
    let node_median = |r: &Report| {
        let mut sums: Vec<u64> = r.lookup_times.per_node_ns.values().copied().collect();
        median(&mut sums).unwrap_or(0)
    };
    let (node_change, node_pairs) = paired_median_change(&a.per_node_ns, &b.per_node_ns);
    // Only apps that were timed: an app without timed lookups has no wait to pair, not a
    // wait of 0 (which would pair as -100 %).
    let app_waits = |r: &Report| -> BTreeMap<String, u64> {
        r.apps
            .iter()
            .filter(|row| row.total.retrievals.count() > 0)
            .map(|row| (app_name(&row.app), row.total.retrievals.wait_ns()))
            .collect()
    };
    let (app_change, app_pairs) = paired_median_change(&app_waits(off), &app_waits(on));
    Some(LatencyComparison {
        lookups: TimedPair::new(
            off.totals.retrievals.count(),
            on.totals.retrievals.count(),
            timed,
        ),
        wait_ns: TimedPair::new(
            off.totals.retrievals.wait_ns(),
            on.totals.retrievals.wait_ns(),
            timed,
        ),
        median_lookup_ns: TimedPair::new(
            a.median_ns().unwrap_or(0),
            b.median_ns().unwrap_or(0),
            timed,
        ),
        median_node_ns: TimedPair::new(node_median(off), node_median(on), timed),
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
