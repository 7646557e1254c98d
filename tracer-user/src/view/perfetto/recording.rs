//! A recording replayed through the pipeline into the trace, window by window as they close
//! (`TraceBuilder`), each written to the trace file at once: `export --perfetto` and `record
//! --perfetto` both end here.
use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

use super::{is_mark, Finished, TraceBuilder};
use crate::{
    model::{ModelConfig, Packages},
    output::OutputFile,
    pipeline::{Drained, Pipeline},
    record::Note,
    source::{replay::ReplaySource, Source as _},
};

/// The Perfetto trace of the recording at `recording`, written to `output` as the replay goes
/// (also what `record --perfetto` does once its recording is finished). `output` is created
/// as every output file is ([`OutputFile`]); when the export fails after that, the partial
/// file is removed (or, if that fails too, the error says it is there).
pub(crate) fn write_trace(
    recording: &Path,
    packages: Option<&Path>,
    output: &Path,
    policy: OutputFile,
) -> Result<()> {
    let notes = notes_of(recording)?;
    let source = ReplaySource::offline(recording)?;
    let mut trace_file = None;
    let result = replay(source, packages, recording, &notes, || {
        let file = policy.create(output)?;
        trace_file = Some(PartialFile(output.to_path_buf()));
        Ok(BufWriter::new(file))
    })
    .with_context(|| format!("writing {}", output.display()));
    let finished = match result {
        Ok(finished) => finished,
        Err(err) => {
            return Err(match trace_file {
                Some(partial) => partial.remove(err),
                None => err,
            })
        }
    };
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
    say!(
        "{}: {} windows, {} bytes",
        output.display(),
        finished.windows,
        finished.bytes
    );
    Ok(())
}

/// A trace file being written: removed if the export fails.
struct PartialFile(PathBuf);

impl PartialFile {
    fn remove(self, err: anyhow::Error) -> anyhow::Error {
        match std::fs::remove_file(&self.0) {
            Ok(()) => err.context(format!("{} removed, incomplete", self.0.display())),
            Err(remove) => err.context(format!(
                "{} is incomplete and could not be removed: {remove}",
                self.0.display()
            )),
        }
    }
}

/// The recording's notes (bounded by the replay: `MAX_NOTES_BYTES`), read in a first pass
/// over its events: the clock snapshots among them go before any event in the trace.
fn notes_of(recording: &Path) -> Result<Vec<Note>> {
    let mut source = ReplaySource::offline(recording)?;
    // Damage is said by the replay that follows.
    source.each_event_to_damage(|_| Ok(()))?;
    Ok(source
        .recording_tail()
        .map(|tail| tail.notes.clone())
        .unwrap_or_default())
}

/// Replay a recording through the pipeline at speed 0, one block at a time, into the trace
/// `create` makes (once the replay is ready): every window as it closes, with the notes and
/// the marks in it (none is kept past its window). Damage ends the replay with a warning;
/// what comes before it is exported. Returns what was written.
fn replay(
    source: ReplaySource,
    packages_file: Option<&Path>,
    path: &Path,
    notes: &[Note],
    create: impl FnOnce() -> Result<BufWriter<File>>,
) -> Result<Finished> {
    let header = source.header().clone();
    let packages = Packages::from_file_or(packages_file, header.packages_list.clone())?;
    let config = ModelConfig::for_recording(&header, packages.clone());
    let mut pipeline = Pipeline::offline(Box::new(source), config)?;
    let mut trace = TraceBuilder::new(&header, packages, notes, create()?)?;
    let mut end_ns = None;
    let mut failed = None;
    pipeline.drain(|drained| match drained {
        // Laid out and written at once: no window is held.
        Drained::Window(window) => {
            if failed.is_none() {
                failed = trace.window(window).err();
            }
        }
        Drained::Event(event) => {
            if is_mark(event) {
                trace.mark(event);
            }
            end_ns = end_ns.max(Some(event.ts_ns));
        }
    })?;
    if let Some(err) = failed {
        return Err(err.into());
    }
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
    // Close the last window on its grid end, so its counts are in the trace like all others.
    for window in pipeline.close_through(end_ns.unwrap_or(0)) {
        trace.window(&window)?;
    }
    // Flushed by finish: dropping the writer loses nothing.
    let (_out, finished) = trace.finish()?;
    Ok(finished)
}
