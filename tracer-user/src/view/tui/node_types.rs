//! The node-type panel (issue 31): which node blocks the node reads hit (inodes, direct,
//! indirect, double indirect and xattr nodes), since the start and in the newest window, when
//! the model can tell them apart (the simulator's image, or `--image`).
use ratatui::{
    layout::Rect,
    text::Line,
    widgets::{Block, Paragraph},
    Frame,
};

use crate::schema::protocol::NodeTypesShown;

/// The panel's lines: a header, then one line per node type (and one for nids the image has
/// no block for, once there are some).
pub(super) fn lines(shown: &NodeTypesShown) -> Vec<String> {
    let all = shown.total.counts.total();
    let mut lines = vec![format!(
        "{:<16}{:>9} {:>6} {:>7}",
        "", "reads", "share", "last w"
    )];
    let windows = shown.window.rows().map(|(_, reads)| reads.total());
    for ((of_type, reads), in_window) in shown.total.counts.rows().zip(windows) {
        if of_type.is_none() && reads.total() == 0 {
            continue;
        }
        let name = crate::model::node_types::shown_name(of_type);
        let share = match all {
            0 => "-".to_string(),
            _ => format!("{:.1}%", reads.total() as f64 * 100.0 / all as f64),
        };
        lines.push(format!(
            "{name:<16}{:>9} {share:>6} {in_window:>7}",
            reads.total()
        ));
    }
    lines
}

pub(super) fn draw(frame: &mut Frame, area: Rect, shown: &NodeTypesShown) {
    let text: Vec<Line> = lines(shown).into_iter().map(Line::from).collect();
    let title = format!("node reads by type ({})", shown.total.image);
    let pane = Paragraph::new(text).block(Block::bordered().title(title));
    frame.render_widget(pane, area);
}
