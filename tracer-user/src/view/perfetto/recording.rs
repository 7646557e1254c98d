//! A recording replayed through the model into what the trace shows (`Recorded`), and the
//! trace written to a file: `export --perfetto` and `record --perfetto` both end here.
use std::path::Path;

use anyhow::Result;

use super::{encode, Recorded};
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
    let recorded = replay(reader, packages, recording)?;
    let trace = encode(&recorded);
    policy.write(output, &trace)?;
    eprintln!(
        "{}: {} windows, {} bytes",
        output.display(),
        recorded.windows.len(),
        trace.len()
    );
    Ok(())
}

/// Replay a recording through the model, one record at a time: every window, note and
/// instant-worthy event. Damage ends the replay with a warning; what comes before it is
/// exported.
pub(crate) fn replay<R: std::io::Read>(
    mut reader: Reader<R>,
    packages_file: Option<&Path>,
    path: &Path,
) -> Result<Recorded> {
    let header = reader.header.clone();
    let packages = Packages::from_file_or(packages_file, header.packages_list.clone())?;
    let mut model = Model::for_recording(&header, packages.clone());
    let mut recorded = Recorded {
        windows: Vec::new(),
        notes: Vec::new(),
        marks: Vec::new(),
        packages,
        header,
    };
    let mut end_ns = None;
    while let Some(item) = reader.next_item() {
        match item {
            Ok(Item::Events(events)) => {
                for event in &events {
                    model.ingest(event);
                    if Recorded::is_mark(event) {
                        recorded.marks.push(*event);
                    }
                }
                end_ns = events.last().map(|event| event.ts_ns).max(end_ns);
                recorded.windows.extend(model.take_closed());
            }
            Ok(Item::Note(note)) => recorded.notes.push(note),
            Ok(Item::Footer(footer)) => end_ns = end_ns.max(Some(footer.end_ns)),
            Err(damage) => eprintln!(
                "warning: {}: {damage}; the trace covers what comes before it",
                path.display()
            ),
        }
    }
    // Close the last window on its grid end, so its counts are in the trace like all others.
    model.advance_to(end_ns.unwrap_or(0));
    model.advance_to(model.open_window_end_ns());
    recorded.windows.extend(model.take_closed());
    Ok(recorded)
}
