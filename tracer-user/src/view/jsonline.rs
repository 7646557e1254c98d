//! The per-window JSON line that `stream --json` and `record --json` print, for every source
//! (docs/STREAM.md). The same window gives the same line, so a replay of a recording prints
//! exactly what the live run printed; with the kernel source, node reads, node writes and
//! checkpoints are the kernel's exact counts (`model::exact`).
use serde_json::{json, Value};
use tracer_common::text::escape_controls;

use crate::model::{counters, CheckpointSummary, DeviceNodeCounts, ProcessRow, WindowReport};

/// The schema's version, the line's first field. Version 1 was two schemas (kernel and model
/// sources); version 2 is one for all; version 3 names the window's length `window_s` (it was
/// `interval_s`, a word that belongs to the knob `node_compress_interval`); version 4 adds node
/// retrieval latency (issue 51): `retrievals` in `totals` and `cumulative`, and each process's
/// `lookups`, `wait_ns`, `lookup_p50_ns` and `lookup_p99_ns`.
pub(crate) const STREAM_VERSION: u32 = 4;

fn process(row: &ProcessRow) -> Value {
    let c = &row.counters;
    json!({
        "pid": row.pid,
        "comm": row.comm,
        "uid": row.uid,
        "app": row.app,
        "node_reads_demand": c.node_reads_demand,
        "node_reads_readahead": c.node_reads_readahead,
        "node_writes": c.node_writes,
        "checkpoints": c.checkpoints,
        "restores": c.restores,
        "conversions": c.conversions,
        "reclaims": c.reclaims.total(),
        "second_chances": c.second_chances.total(),
        "lookups": c.retrievals.count(),
        "wait_ns": c.retrievals.wait_ns(),
        "lookup_p50_ns": c.retrievals.all().quantile_bound_ns(0.5),
        "lookup_p99_ns": c.retrievals.all().quantile_bound_ns(0.99),
    })
}

fn device(dev: u32, counts: &DeviceNodeCounts) -> Value {
    json!({
        "dev": crate::system::major_minor(dev),
        "name": counts.name,
        "node_reads": counts.node_reads,
        "node_writes": counts.node_writes,
        "checkpoints": counts.checkpoints,
        "node_writes_per_checkpoint": (counts.checkpoints > 0)
            .then(|| counts.node_writes as f64 / counts.checkpoints as f64),
    })
}

/// Checkpoint anatomy over the window (docs/STREAM.md, `checkpoint`): from the events, for
/// every source.
fn checkpoint(summary: &CheckpointSummary) -> Value {
    let w = &summary.written;
    json!({
        "count": summary.count,
        "node_blocks": w.node_blocks,
        "nodes_per_checkpoint": summary.nodes_per_checkpoint(),
        "cp_blocks": w.cp_blocks,
        "sit_blocks": w.sit_blocks,
        "nat_blocks": w.nat_blocks,
        "ssa_blocks": w.ssa_blocks,
        "other_meta_blocks": w.other_meta_blocks,
        "nat_journal": w.nat_journal,
        "sit_journal": w.sit_journal,
        "block_ops_ms": round_ms(summary.block_ops_ns as f64 / 1e6),
        "write_ms": round_ms(summary.write_ns as f64 / 1e6),
    })
}

/// One line for one closed window. `origin_ns` is the model's window origin.
pub fn window_line(window: &WindowReport, origin_ns: u64) -> Value {
    window_line_top(window, origin_ns, usize::MAX)
}

/// [`window_line`] with the `max_processes` busiest processes only, and `processes_more`:
/// how many were left out, when any were. Only the rows kept are encoded (a daemon's window
/// can hold thousands).
pub fn window_line_top(window: &WindowReport, origin_ns: u64, max_processes: usize) -> Value {
    let busy = |row: &&ProcessRow| row.counters.node_reads() + row.counters.restores;
    let order = |a: &&ProcessRow, b: &&ProcessRow| busy(b).cmp(&busy(a)).then(a.pid.cmp(&b.pid));
    let mut rows: Vec<&ProcessRow> = window.processes.iter().collect();
    let more = rows.len().saturating_sub(max_processes);
    if more > 0 {
        rows.select_nth_unstable_by(max_processes, order);
        rows.truncate(max_processes);
    }
    rows.sort_by(order);
    let exact = window.exact.as_ref();
    let mut line = json!({
        "version": STREAM_VERSION,
        "t": round_ms(window.end_ns.saturating_sub(origin_ns) as f64 / 1e9),
        "window_s": round_ms(window.end_ns.saturating_sub(window.start_ns) as f64 / 1e9),
        "counts": if exact.is_some() { "kernel" } else { "events" },
        "totals": counters::json(&window.activity),
        "processes": rows.into_iter().map(process).collect::<Vec<_>>(),
        "devices": window.devices.iter().map(|(dev, c)| device(*dev, c)).collect::<Vec<_>>(),
        "cache": window.cache,
        "cumulative": counters::json(&window.totals),
        "eager_restores": window.eager_restores,
        "events": window.events,
        "drops": window.activity.lost,
        "counter_drops": exact.map_or(0, |e| e.counter_drops),
        "rfc": exact.and_then(|e| e.rfc.as_ref()),
        "checkpoint": checkpoint(&window.checkpoint),
    });
    if more > 0 {
        line["processes_more"] = more.into();
    }
    // Only where the model tells node types apart: other lines are as they were.
    if let Some(types) = &window.node_types {
        line["node_types"] = json!(types);
    }
    // Only where the source reads the mechanism's own counters (issue 49).
    if let Some(counters) = &window.counters {
        line["counters"] = json!(counters);
    }
    line
}

/// The short text form of a window (`stream` without `--json`).
pub(crate) fn window_text(window: &WindowReport, origin_ns: u64) -> String {
    line_text(&window_line(window, origin_ns))
}

/// The short text form of a window's line: what `stream` prints, and what `stream --connect`
/// prints from the lines a daemon sends. Escaped here, for every caller: comms are whatever a
/// process named itself (`\e]52;c;...\a` writes a terminal's clipboard), and a daemon's line
/// is its text, not ours.
pub(crate) fn line_text(line: &Value) -> String {
    escape_controls(&raw_line_text(line))
}

fn raw_line_text(line: &Value) -> String {
    let t = &line["totals"];
    let top: Vec<String> = line["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .take(3)
        .map(|p| {
            let reads = p["node_reads_demand"].as_u64().unwrap_or(0)
                + p["node_reads_readahead"].as_u64().unwrap_or(0);
            format!(
                "{}[{}] r={reads} w={}",
                p["comm"].as_str().unwrap_or(""),
                p["pid"],
                p["node_writes"]
            )
        })
        .collect();
    // Reclaims are per queue in the line: the text shows their sum.
    let reclaims: u64 = t["reclaims"]
        .as_object()
        .into_iter()
        .flat_map(|queues| queues.values())
        .filter_map(Value::as_u64)
        .sum();
    format!(
        "{:8.3}s reads={} (ra {}) writes={} checkpoints={} restores={} conversions={} \
         reclaims={reclaims} drops={}  {}",
        line["t"].as_f64().unwrap_or(0.0),
        t["node_reads"],
        t["node_reads_readahead"],
        t["node_writes"],
        t["checkpoints"],
        t["restores"],
        t["conversions"],
        line["drops"],
        top.join("  ")
    )
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

    #[test]
    fn a_cut_line_keeps_the_busiest_in_order_and_counts_the_rest() {
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        // Process p reads p times: 1..=6, so the busiest are 6, 5, 4.
        for tgid in 1..=6u32 {
            for _ in 0..tgid {
                model.ingest(&Event::new(EventKind::NodeRead, 5).task(tgid));
            }
        }
        model.advance_to(1_000_000_000);
        let window = &model.take_closed()[0];
        let cut = window_line_top(window, 0, 3);
        let pids: Vec<u64> = cut["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(pids, [6, 5, 4]);
        assert_eq!(cut["processes_more"], 3);
        assert_eq!(
            cut["totals"]["node_reads"], 21,
            "the totals count every process"
        );
        let whole = window_line_top(window, 0, 6);
        assert_eq!(whole["processes"].as_array().unwrap().len(), 6);
        assert!(whole.get("processes_more").is_none());
    }

    #[test]
    fn processes_add_up_to_the_totals() {
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        for (tgid, kind) in [
            (1, EventKind::NodeRead),
            (2, EventKind::NodeRead),
            (2, EventKind::Restore),
        ] {
            model.ingest(&Event::new(kind, 5).task(tgid));
        }
        model.advance_to(1_000_000_000);
        let line = window_line(&model.take_closed()[0], 0);
        assert_eq!(line["version"], 4);
        assert_eq!(line["counts"], "events");
        assert_eq!(line["t"], 1.0);
        assert_eq!(line["totals"]["node_reads"], 2);
        assert_eq!(line["totals"]["restores"], 1);
        assert_eq!(line["totals"]["hit_ratio"].as_f64(), Some(1.0 / 3.0));
        assert_eq!(line["events"], 3);
        assert_eq!(line["devices"][0]["dev"], "0:0");
        assert_eq!(line["devices"][0]["node_reads"], 2);
        assert_eq!(line["rfc"], Value::Null);
        let processes = line["processes"].as_array().unwrap();
        assert_eq!(processes[0]["pid"], 2, "busiest first");
        let reads: u64 = processes
            .iter()
            .map(|p| {
                p["node_reads_demand"].as_u64().unwrap()
                    + p["node_reads_readahead"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(reads, 2);
    }

    /// The kernel's counters win over the events for node reads, writes and checkpoints: one
    /// read event of three reached userspace, the counters saw all three and a checkpoint.
    #[test]
    fn kernel_counts_are_what_the_line_reports() {
        const VDA: u32 = 254 << 20;
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        model.ingest(&Event::new(EventKind::NodeRead, 5).task(7).dev(VDA));
        model.ingest(&Event::new(EventKind::Restore, 6).task(7).dev(VDA));
        let key = |tgid| TaskKey {
            dev: VDA,
            tgid,
            uid: 0,
            _pad: 0,
        };
        let mut cat = TaskCounts {
            node_reads_demand: 3,
            ..TaskCounts::default()
        };
        cat.comm[..3].copy_from_slice(b"cat");
        let mut ckpt = TaskCounts {
            node_writes: 12,
            checkpoints: 1,
            ..TaskCounts::default()
        };
        ckpt.comm[..4].copy_from_slice(b"ckpt");
        model.observe_kernel(&KernelCounts {
            tasks: vec![(key(7), cat), (key(9), ckpt)],
            retired: Vec::new(),
            counter_failures: 0,
            rfc: Some(BTreeMap::from([("restore", 1)])),
            device_names: BTreeMap::from([(VDA, "vda".to_string())]),
        });
        model.advance_to(1_000_000_000);
        let line = window_line(&model.take_closed()[0], 0);
        assert_eq!(line["counts"], "kernel");
        assert_eq!(line["totals"]["node_reads"], 3);
        assert_eq!(line["totals"]["node_writes"], 12);
        assert_eq!(
            line["totals"]["restores"], 1,
            "the events still count restores"
        );
        assert_eq!(line["cumulative"]["node_reads"], 3);
        let processes = line["processes"].as_array().unwrap();
        assert_eq!(processes.len(), 2);
        assert_eq!(processes[0]["pid"], 7);
        assert_eq!(processes[0]["node_reads_demand"], 3);
        assert_eq!(processes[0]["restores"], 1);
        assert_eq!(processes[1]["comm"], "ckpt");
        assert_eq!(line["devices"][0]["name"], "vda");
        assert_eq!(line["devices"][0]["node_writes_per_checkpoint"], 12.0);
        assert_eq!(line["rfc"]["restore"], 1);
    }
}
