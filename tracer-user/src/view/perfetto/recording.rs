//! A recording replayed through the model into the trace, window by window as they close
//! (`TraceBuilder`), and the trace written to a file: `export --perfetto` and `record
//! --perfetto` both end here.
use std::path::Path;

use anyhow::Result;

use super::{is_mark, TraceBuilder};
use crate::{
    model::{Model, Packages},
    output::OutputFile,
    record::reader::{self, Item, Reader},
};

/// The Perfetto trace of the recording at `recording`, written to `output` (also what
/// `record --perfetto` does once its recording is finished).
pub(crate) fn write_trace(
    recording: &Path,
    packages: Option<&Path>,
    output: &Path,
    policy: OutputFile,
) -> Result<()> {
    let reader = reader::open(recording)?;
    let (trace, windows) = replay(reader, packages, recording)?;
    policy.write(output, &trace)?;
    say!(
        "{}: {windows} windows, {} bytes",
        output.display(),
        trace.len()
    );
    Ok(())
}

/// Replay a recording through the model, one record at a time, into the trace: every window
/// as it closes (none is kept), the notes and the instant-worthy events. Damage ends the
/// replay with a warning; what comes before it is exported. Returns the trace and how many
/// windows it lays out.
pub(crate) fn replay<R: std::io::Read>(
    mut reader: Reader<R>,
    packages_file: Option<&Path>,
    path: &Path,
) -> Result<(Vec<u8>, u64)> {
    let header = reader.header.clone();
    let packages = Packages::from_file_or(packages_file, header.packages_list.clone())?;
    let mut model = Model::for_recording(&header, packages.clone());
    let mut trace = TraceBuilder::new(&header, packages);
    let mut notes = Vec::new();
    let mut marks = Vec::new();
    let mut end_ns = None;
    while let Some(item) = reader.next_item() {
        match item {
            Ok(Item::Events(events)) => {
                for event in &events {
                    model.ingest(event);
                    if is_mark(event) {
                        marks.push(*event);
                    }
                    // Laid out at once: an events block must not hold its windows.
                    for window in model.take_closed() {
                        trace.window(&window);
                    }
                }
                end_ns = events.last().map(|event| event.ts_ns).max(end_ns);
            }
            Ok(Item::Note(note)) => notes.push(note),
            Ok(Item::Footer(footer)) => end_ns = end_ns.max(Some(footer.end_ns)),
            Err(damage) => say!(
                "warning: {}: {damage}; the trace covers what comes before it",
                path.display()
            ),
        }
    }
    // Close the last window on its grid end, so its counts are in the trace like all others.
    model.advance_to(end_ns.unwrap_or(0));
    model.advance_to(model.open_window_end_ns());
    for window in model.take_closed() {
        trace.window(&window);
    }
    let windows = trace.windows;
    Ok((trace.finish(&notes, &marks), windows))
}
