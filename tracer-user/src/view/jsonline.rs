//! The per-window line that `stream` and `record --json` print, for every source: its JSON
//! (`schema::stream::StreamLine`, docs/STREAM.md) or its short text form.
use tracer_common::text::escape_name;

use crate::{model::WindowReport, schema::stream::StreamLine};

/// One line for one closed window. `origin_ns` is the model's window origin.
pub fn window_line(window: &WindowReport, origin_ns: u64) -> StreamLine {
    StreamLine::from_window(window, origin_ns, usize::MAX)
}

/// [`window_line`] with the `max_processes` busiest processes only, and `processes_more`:
/// how many were left out, when any were.
pub fn window_line_top(window: &WindowReport, origin_ns: u64, max_processes: usize) -> StreamLine {
    StreamLine::from_window(window, origin_ns, max_processes)
}

/// The short text form of a window (`stream` without `--json`).
pub(crate) fn window_text(window: &WindowReport, origin_ns: u64) -> String {
    line_text(&window_line(window, origin_ns))
}

/// The short text form of a window's line: what `stream` prints, and what `stream --connect`
/// prints from the lines a daemon sends. The comms are escaped here, for every caller: they are
/// whatever a process named itself (`\e]52;c;...\a` writes a terminal's clipboard, a newline
/// forges a line of its own), and a daemon's line is its text, not ours. The rest of the line
/// is numbers.
pub(crate) fn line_text(line: &StreamLine) -> String {
    let t = &line.totals;
    let top: Vec<String> = line
        .processes
        .iter()
        .take(3)
        .map(|p| {
            let reads = p.node_reads_demand.saturating_add(p.node_reads_readahead);
            format!(
                "{}[{}] r={reads} w={}",
                escape_name(&p.comm),
                p.pid,
                p.node_writes
            )
        })
        .collect();
    // Reclaims are per queue in the line: the text shows their sum.
    let reclaims = t.reclaims.total();
    format!(
        "{:8.3}s reads={} (ra {}) writes={} checkpoints={} restores={} conversions={} \
         reclaims={reclaims} drops={}  {}",
        line.t,
        t.node_reads,
        t.node_reads_readahead,
        t.node_writes,
        t.checkpoints,
        t.restores,
        t.conversions,
        line.drops,
        top.join("  ")
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tracer_common::{Event, EventKind, TaskCounts, TaskKey};

    use serde_json::Value;

    use super::*;
    use crate::model::{KernelCounts, Model, ModelConfig};

    /// The line as a reader sees it.
    fn json(line: StreamLine) -> Value {
        serde_json::from_str(&line.to_json()).unwrap()
    }

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
        let cut = json(window_line_top(window, 0, 3));
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
        let whole = json(window_line_top(window, 0, 6));
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
        let line = json(window_line(&model.take_closed()[0], 0));
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
        let line = json(window_line(&model.take_closed()[0], 0));
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
