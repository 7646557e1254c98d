//! A recording replayed through the pipeline into the trace, window by window as they close
//! (`TraceBuilder`), and the trace written to a file: `export --perfetto` and `record
//! --perfetto` both end here.
use std::path::Path;

use anyhow::{Context as _, Result};

use super::{is_mark, Finished, TraceBuilder};
use crate::{
    model::{ModelConfig, Packages},
    output::OutputFile,
    pipeline::Pipeline,
    source::replay::ReplaySource,
};

/// The Perfetto trace of the recording at `recording`, written to `output` (also what
/// `record --perfetto` does once its recording is finished).
pub(crate) fn write_trace(
    recording: &Path,
    packages: Option<&Path>,
    output: &Path,
    policy: OutputFile,
) -> Result<()> {
    let source = ReplaySource::offline(recording)?;
    let (finished, windows) = replay(source, packages, recording)?;
    let trace = finished.bytes;
    // Counted and the first named (a crafted recording may hold millions); each is also an
    // instant in the trace.
    if let Some(first) = finished.dropped_clocks.first() {
        say!(
            "warning: {}: {} clock notes left out of the trace, impossible as recorded; the \
             first: {first}",
            recording.display(),
            finished.dropped_clocks.len(),
        );
    }
    policy.write(output, &trace)?;
    say!(
        "{}: {windows} windows, {} bytes",
        output.display(),
        trace.len()
    );
    Ok(())
}

/// Replay a recording through the pipeline at speed 0, one block at a time, into the trace:
/// every window as it closes (none is kept), the notes and the instant-worthy events. Damage
/// ends the replay with a warning; what comes before it is exported. Returns the trace and
/// how many windows it lays out.
fn replay(
    source: ReplaySource,
    packages_file: Option<&Path>,
    path: &Path,
) -> Result<(Finished, u64)> {
    let header = source.header().clone();
    let packages = Packages::from_file_or(packages_file, header.packages_list.clone())?;
    let config = ModelConfig::for_recording(&header, packages.clone());
    let mut pipeline = Pipeline::offline(Box::new(source), config)?;
    let mut trace = TraceBuilder::new(&header, packages);
    let mut marks = Vec::new();
    let mut end_ns = None;
    pipeline.drain(
        |events| {
            marks.extend(events.iter().filter(|event| is_mark(event)).copied());
            end_ns = events.last().map(|event| event.ts_ns).max(end_ns);
        },
        // Laid out at once: no window is held.
        |window| trace.window(&window),
    )?;
    let tail = pipeline
        .source()
        .recording_tail()
        .context("a replay keeps its recording's tail")?;
    if let Some(damage) = &tail.damage {
        say!(
            "warning: {}: {damage}; the trace covers what comes before it",
            path.display()
        );
    }
    let end_ns = end_ns.max(tail.footer.as_ref().map(|footer| footer.end_ns));
    let notes = tail.notes.clone();
    // Close the last window on its grid end, so its counts are in the trace like all others.
    for window in pipeline.close_through(end_ns.unwrap_or(0)) {
        trace.window(&window);
    }
    let windows = trace.windows;
    Ok((trace.finish(&notes, &marks), windows))
}
