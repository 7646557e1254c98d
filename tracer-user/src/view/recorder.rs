//! The recorder view: the events the pipeline took and the knob changes it saw, written to a
//! recording (format: `crate::record`).
use std::{fs::File, io::BufWriter, path::Path};

use anyhow::{Context as _, Result};
use tracer_common::Event;

use crate::{
    pipeline::{KnobChange, Pipeline},
    record::{writer::Writer, Footer, Header, Note},
    source::knobs::describe,
};

pub struct Recorder {
    writer: Writer<BufWriter<File>>,
}

impl Recorder {
    /// Create `path` and write the header: what the pipeline's source says about itself, its
    /// knob values, the window origin and length.
    pub fn create(path: &Path, pipeline: &Pipeline) -> Result<Recorder> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let writer = Writer::new(BufWriter::new(file), &header(pipeline))?;
        Ok(Recorder { writer })
    }

    pub fn events(&mut self, events: &[Event]) -> Result<()> {
        events.iter().try_for_each(|event| self.writer.event(event))
    }

    pub fn knob_change(&mut self, change: &KnobChange) -> Result<()> {
        self.writer.note(&Note {
            ts_ns: change.at_ns,
            kind: "knobs".into(),
            text: format!("{} -> {}", describe(change.before), describe(change.after)),
        })
    }

    /// The footer; returns it with the bytes written before it.
    pub fn finish(self, end_ns: u64) -> Result<(u64, Footer)> {
        let bytes = self.writer.bytes_written();
        let (_, footer) = self.writer.finish(end_ns)?;
        Ok((bytes, footer))
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
        threshold: knobs.map(|k| k.threshold),
        interval_ms: knobs.map(|k| k.interval_ms),
        clock_origin_ns: pipeline.origin_ns(),
        window_ns: pipeline.model().config().window_ns,
        packages_list: pipeline.source().packages_list(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}
