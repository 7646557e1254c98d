//! The recorder view: the events the pipeline took and the knob changes it saw, written to a
//! recording (format: `crate::record`).
use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use tracer_common::Event;

use crate::{
    output::OutputFile,
    pipeline::{KnobChange, Pipeline},
    record::{writer::Writer, ClockPair, Footer, Header, Note},
    runner::{Flow, Refresh, Sink},
};

/// The longest a recorded event waits in memory: a SIGKILL loses at most this much.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

pub struct Recorder {
    writer: Writer<BufWriter<File>>,
    path: PathBuf,
    last_flush: Instant,
    /// The kernel source's events are stamped with CLOCK_MONOTONIC: the BOOTTIME pair last
    /// noted (None for a source with a clock of its own: the simulator, a replay).
    clock: Option<ClockPair>,
}

/// The two clocks moved apart by more than this: a suspend (or its like) is noted.
const CLOCK_STEP_NS: i128 = 1_000_000;

impl Recorder {
    /// Create `path` as `output` says and write the header: what the pipeline's source says
    /// about itself, its knob values, the window origin and length.
    pub fn create(path: &Path, pipeline: &Pipeline, output: OutputFile) -> Result<Recorder> {
        let file = output.create(path)?;
        Recorder::from_file(file, path, pipeline)
    }

    /// A recorder writing to `file`, already open for writing (the daemon's rolling recording
    /// creates its files relative to its directory's descriptor); `path` names it in messages.
    pub(crate) fn from_file(file: File, path: &Path, pipeline: &Pipeline) -> Result<Recorder> {
        let header = header(pipeline);
        let mut writer = Writer::new(BufWriter::new(file), &header)?;
        let clock = (header.source == "bpf").then(ClockPair::now);
        if let Some(pair) = clock {
            writer.note(&pair.note())?;
        }
        Ok(Recorder {
            writer,
            path: path.to_path_buf(),
            last_flush: Instant::now(),
            clock,
        })
    }

    /// A clock note when BOOTTIME and MONOTONIC moved apart since the last one.
    fn note_clock_step(&mut self) -> Result<()> {
        let Some(last) = self.clock else {
            return Ok(());
        };
        let now = ClockPair::now();
        if (now.offset_ns() - last.offset_ns()).abs() > CLOCK_STEP_NS {
            self.writer.note(&now.note())?;
            self.clock = Some(now);
        }
        Ok(())
    }

    /// Flush the events so far when the last flush is [`FLUSH_EVERY`] old: a quiet source
    /// still reaches the file on a time bound, not only every full block.
    /// A clock note first when a suspend moved the clocks apart (see [`ClockPair`]).
    pub fn flush_if_due(&mut self) -> Result<()> {
        self.note_clock_step()?;
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.writer.flush()?;
            self.last_flush = Instant::now();
        }
        Ok(())
    }

    pub fn events(&mut self, events: &[Event]) -> Result<()> {
        self.writer.events(events)
    }

    pub fn knob_change(&mut self, change: &KnobChange) -> Result<()> {
        self.writer.note(&Note {
            ts_ns: change.at_ns,
            kind: "knobs".into(),
            text: change.describe(),
        })
    }

    /// Bytes written to the file so far (the open block and buffers aside).
    pub(crate) fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    /// The footer; returns it with the size of the finished file.
    pub fn finish(self, end_ns: u64) -> Result<(u64, Footer)> {
        let (out, footer) = self.writer.finish(end_ns)?;
        // The file written, not whatever its path names now.
        let size = out
            .get_ref()
            .metadata()
            .with_context(|| format!("reading the size of {}", self.path.display()))?
            .len();
        Ok((size, footer))
    }
}

fn header(pipeline: &Pipeline) -> Header {
    let info = pipeline.info().clone();
    let knobs = pipeline.knobs();
    Header {
        host: crate::system::hostname(),
        kernel: info.kernel,
        source: format!("{:?}", info.kind).to_lowercase(),
        probe_plan: info.detail.split(", ").map(str::to_string).collect(),
        detail: info.detail,
        devices: info.devices,
        knobs,
        clock_origin_ns: pipeline.origin_ns(),
        window_ns: pipeline.model().config().window_ns,
        packages_list: pipeline.source().packages_list(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// `record`'s sink: every event the pipeline took, the knob changes, a flush on the time bound.
/// The command finishes the file after the run ([`Recorder::finish`]).
impl Sink for Recorder {
    fn events(&mut self, batch: &[Event], _pipeline: &Pipeline) -> Result<()> {
        Recorder::events(self, batch)
    }

    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        if let Some(change) = at.knob_change {
            self.knob_change(change)?;
        }
        self.flush_if_due()?;
        Ok(Flow::Continue)
    }
}
