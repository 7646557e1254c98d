//! The checkpoint table (issue 19) in seed 002's shape: node num, cp count, nodes/cp, plus
//! the NAT blocks written and NAT entries journalled per checkpoint, and the latest
//! checkpoints one per row. `report` prints it; its JSON carries the same numbers.
use std::fmt::Write as _;

pub(crate) use crate::model::checkpoints::CheckpointReport;

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

fn millis(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e6))
}

/// The table as text.
pub(crate) fn render(report: &CheckpointReport) -> String {
    let mut out = String::new();
    let s = &report.summary;
    let w = &s.written;
    let _ = writeln!(out, "checkpoints:");
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>10}",
        "node num", "cp count", "nodes/cp", "nat blocks", "nat/cp", "journal", "journal/cp"
    );
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>10} {:>11} {:>10} {:>10} {:>10}",
        w.node_blocks,
        s.count,
        ratio(report.nodes_per_checkpoint),
        w.nat_blocks,
        ratio(report.nat_blocks_per_checkpoint),
        w.nat_journal,
        ratio(report.nat_journal_per_checkpoint)
    );
    let _ = writeln!(
        out,
        "  meta blocks {}: cp pack {} sit {} nat {} ssa {} other {}; sit journal {}; \
         block_ops {:.1} ms, write {:.1} ms in all",
        w.meta_blocks(),
        w.cp_blocks,
        w.sit_blocks,
        w.nat_blocks,
        w.ssa_blocks,
        w.other_meta_blocks,
        w.sit_journal,
        s.block_ops_ns as f64 / 1e6,
        s.write_ns as f64 / 1e6
    );
    if report.latest.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:>6} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>8}",
        "CP", "NODES", "CPPACK", "SIT", "NAT", "SSA", "OTHER", "JOURNAL", "BLKOPS_MS", "WRITE_MS"
    );
    for r in &report.latest {
        let w = &r.written;
        let _ = writeln!(
            out,
            "  {:>6} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>8}",
            r.seq,
            w.node_blocks,
            w.cp_blocks,
            w.sit_blocks,
            w.nat_blocks,
            w.ssa_blocks,
            w.other_meta_blocks,
            w.nat_journal,
            millis(r.block_ops_ns),
            millis(r.write_ns)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use tracer_common::{
        Event, EventKind, CP_PHASE_FINISH_BLOCK_OPS, CP_PHASE_FINISH_CHECKPOINT,
        CP_PHASE_START_BLOCK_OPS, JOURNAL_NAT, META_AREA_NAT,
    };

    use super::*;
    use crate::model::CheckpointTracker;

    #[test]
    fn the_table_has_the_seeds_columns_and_one_row_per_checkpoint() {
        let mut tracker = CheckpointTracker::default();
        for cp in 0..2u64 {
            let t = cp * 1_000_000_000;
            for _ in 0..3 {
                tracker.ingest(&Event::new(EventKind::NodeWrite, t + 1));
            }
            tracker
                .ingest(&Event::new(EventKind::Checkpoint, t + 2).queue(CP_PHASE_START_BLOCK_OPS));
            tracker.ingest(
                &Event::new(EventKind::Checkpoint, t + 2_000_002).queue(CP_PHASE_FINISH_BLOCK_OPS),
            );
            tracker.ingest(&Event::new(EventKind::MetaWrite, t + 3_000_000).queue(META_AREA_NAT));
            tracker.ingest(&Event::new(EventKind::JournalEntry, t + 3_000_001).queue(JOURNAL_NAT));
            tracker.ingest(&Event::new(EventKind::JournalEntry, t + 3_000_002).queue(JOURNAL_NAT));
            tracker.ingest(
                &Event::new(EventKind::Checkpoint, t + 5_000_002).queue(CP_PHASE_FINISH_CHECKPOINT),
            );
        }
        let report = CheckpointReport::from_tracker(&tracker);
        assert_eq!(report.nodes_per_checkpoint, Some(3.0));
        assert_eq!(report.nat_journal_per_checkpoint, Some(2.0));
        let text = render(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("node num") && lines[1].contains("nodes/cp"),
            "{text}"
        );
        let figures: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(figures, ["6", "2", "3.000", "2", "1.000", "4", "2.000"]);
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[6]
            .split_whitespace()
            .eq(["2", "3", "0", "0", "1", "0", "0", "2", "2.0", "3.0"]));
    }
}
