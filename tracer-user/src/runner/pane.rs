//! The decisions pane: the knob changes a run saw, its controller's decisions and what its
//! sinks had to say (a recording that stopped), newest last.
use std::collections::VecDeque;

/// Lines kept.
const PANE_LINES: usize = 200;

/// Where a pane line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineKind {
    /// The knob values changed between two refreshes (by anyone).
    KnobChange,
    /// The controller decided.
    Decision,
    /// A sink's word (a recording that stopped, and why).
    Notice,
}

#[derive(Clone, Debug)]
pub(crate) struct PaneLine {
    pub kind: LineKind,
    pub text: String,
}

#[derive(Debug, Default)]
pub(crate) struct DecisionsPane {
    lines: VecDeque<String>,
}

impl DecisionsPane {
    pub(crate) fn push(&mut self, line: String) {
        self.lines.push_back(line);
        while self.lines.len() > PANE_LINES {
            self.lines.pop_front();
        }
    }

    pub(crate) fn lines(&self) -> &VecDeque<String> {
        &self.lines
    }
}
