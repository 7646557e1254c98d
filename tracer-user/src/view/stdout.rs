//! Standard output for every subcommand. A reader that goes away (`nodescope stream --json |
//! head -1`) is the end of the run, as for any Unix tool: writes report it as [`StdoutClosed`]
//! instead of panicking like `println!`, so the caller can still finish its file and put back
//! a tuned knob, then end with status 0.
use std::{
    fmt,
    io::{self, Write as _},
};

use anyhow::{Context as _, Result};

/// Nobody reads our standard output any more (EPIPE).
#[derive(Debug)]
pub(crate) struct StdoutClosed;

impl fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Write `text` to stdout and flush it (lines reach a pipe at once, as `println!` did).
pub(crate) fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        written => written.context("writing to standard output"),
    }
}

/// [`print`] with a newline.
pub(crate) fn print_line(line: impl fmt::Display) -> Result<()> {
    print(&format!("{line}\n"))
}

/// Whether `err` is (or was caused by) a closed stdout.
pub(crate) fn is_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.is::<StdoutClosed>())
}

/// A closed stdout is a normal end: `Ok`; any other error stays one.
pub(crate) fn closed_is_success(result: Result<()>) -> Result<()> {
    match result {
        Err(err) if is_closed(&err) => Ok(()),
        other => other,
    }
}
