//! The checkpoint panel (issue 19): seed 002's figures over the run (checkpoints, node writes,
//! nodes per checkpoint, NAT blocks, NAT entries journalled) and the latest checkpoints, one
//! line each, newest first.
use ratatui::{
    layout::Rect,
    text::Line,
    widgets::{Block, Paragraph},
    Frame,
};

use crate::view::checkpoint_table::CheckpointReport;

fn millis(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e6))
}

/// The panel's lines: the run's summary, then the newest checkpoints.
pub(super) fn lines(report: &CheckpointReport) -> Vec<String> {
    let s = &report.summary;
    let w = &s.written;
    let per = report
        .nodes_per_checkpoint
        .map_or_else(|| "-".into(), |v| format!("{v:.2}"));
    let mut lines = vec![format!(
        "cps {}  nodes {}  nodes/cp {per}  nat blocks {}  journal {}  sit {} ssa {} cp pack {}",
        s.count,
        w.node_blocks,
        w.nat_blocks,
        w.nat_journal,
        w.sit_blocks,
        w.ssa_blocks,
        w.cp_blocks
    )];
    lines.extend(report.latest.iter().rev().map(|r| {
        let w = &r.written;
        format!(
            "#{} nodes {} nat {} journal {} sit {} ssa {} cp {} | {}+{} ms",
            r.seq,
            w.node_blocks,
            w.nat_blocks,
            w.nat_journal,
            w.sit_blocks,
            w.ssa_blocks,
            w.cp_blocks,
            millis(r.block_ops_ns),
            millis(r.write_ns)
        )
    }));
    lines
}

pub(super) fn draw(frame: &mut Frame, area: Rect, report: &CheckpointReport) {
    let text: Vec<Line> = lines(report).into_iter().map(Line::from).collect();
    let pane = Paragraph::new(text)
        .block(Block::bordered().title("checkpoints (newest first; block_ops+write ms)"));
    frame.render_widget(pane, area);
}
