//! `nodescope-bench record [--events N]` (`cargo xtask bench record`): what the recorder
//! costs on top of the model. Prints figures; never passes or fails.
use std::{
    fs::File,
    io::BufWriter,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use nodescope::{
    model::{Model, ModelConfig},
    record::{writer::Writer, Header},
};
use tracer_common::Event;

use crate::synthetic;

pub fn main(count: u64) -> Result<()> {
    let events: Vec<Event> = synthetic::events(count).collect();
    // Without recording: the model alone, as a live run without `record` would do.
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    events.iter().for_each(|e| model.ingest(e));
    let without = started.elapsed();
    // With recording: the same, plus the writer into a file (removed with its directory).
    let dir = tempfile::TempDir::new().context("creating a directory for the recording")?;
    let path = dir.path().join("bench.nsr");
    let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = Writer::new(BufWriter::new(file), &Header::default())?;
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    for event in &events {
        model.ingest(event);
        writer.event(event)?;
    }
    let (_, footer) = writer.finish(0)?;
    let with = started.elapsed();
    let bytes = std::fs::metadata(&path)
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len();
    let writing_only = with.saturating_sub(without);
    println!(
        "recorder: {} events, {:.2} M events/s written (writer alone), {:.1} bytes/event on disk, {} blocks",
        footer.events,
        synthetic::rate(count, writing_only.max(Duration::from_nanos(1))) / 1e6,
        bytes as f64 / count as f64,
        footer.blocks
    );
    println!(
        "cost: model alone {:.3} s, model + recorder {:.3} s, ratio {:.2}",
        without.as_secs_f64(),
        with.as_secs_f64(),
        with.as_secs_f64() / without.as_secs_f64()
    );
    Ok(())
}
