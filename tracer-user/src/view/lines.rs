//! The window lines on standard output, as a sink of the run loop: `stream` (JSON or text)
//! and `record --json` print each window as it closes, up to the number asked for.
use anyhow::Result;

use crate::{
    model::WindowReport,
    runner::{End, Flow, Refresh, Sink, Stopped},
    view::{
        jsonline::{window_line, window_text},
        stdout::{self, print_line},
    },
};

pub(crate) struct WindowLines {
    json: bool,
    /// Stop after this many windows.
    wanted: Option<u64>,
    printed: u64,
    /// At the end, also the open window closed early, when it holds the kernel's exact counts
    /// (`stream`: what the kernel counted between the last window and the stop), or when
    /// `--duration` ended the run inside it.
    partial_last: bool,
    /// Nobody reads any more: print nothing else.
    closed: bool,
}

/// Why a run stops when its reader went away.
pub(crate) const STDOUT_CLOSED: &str = "standard output closed";

impl WindowLines {
    pub(crate) fn new(json: bool, wanted: Option<u64>, partial_last: bool) -> WindowLines {
        WindowLines {
            json,
            wanted,
            printed: 0,
            partial_last,
            closed: false,
        }
    }

    fn done(&self) -> bool {
        self.closed || self.wanted.is_some_and(|wanted| self.printed >= wanted)
    }

    /// Print windows up to the number wanted; a closed stdout ends the printing (and the run).
    fn print(&mut self, windows: &[WindowReport], origin: u64, counted: bool) -> Result<()> {
        for window in windows {
            if counted && self.done() || self.closed {
                break;
            }
            let line = if self.json {
                print_line(window_line(window, origin).to_json())
            } else {
                print_line(window_text(window, origin))
            };
            match line {
                Err(err) if stdout::is_closed(&err) => self.closed = true,
                other => other?,
            }
            if counted {
                self.printed += 1;
            }
        }
        Ok(())
    }
}

impl Sink for WindowLines {
    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        self.print(at.closed, at.pipeline.origin_ns(), true)?;
        if self.closed {
            return Ok(Flow::Stop(STDOUT_CLOSED.into()));
        }
        if self.done() {
            return Ok(Flow::Stop("windows printed".into()));
        }
        Ok(Flow::Continue)
    }

    fn finish(&mut self, end: &End) -> Result<()> {
        let origin = end.pipeline.origin_ns();
        self.print(&end.finished.closed, origin, true)?;
        if self.partial_last {
            // A window --duration cut short holds what was asked for, from any source.
            let cut = *end.stop == Stopped::DurationReached;
            if let Some(last) = end
                .finished
                .last
                .as_ref()
                .filter(|last| last.exact.is_some() || cut)
            {
                self.print(std::slice::from_ref(last), origin, false)?;
            }
        }
        Ok(())
    }
}
