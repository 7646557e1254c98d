//! `nodescope-bench model [--events N]` (`cargo xtask bench model`): the model's ingest rate
//! and the TUI's frame time. Prints figures; never passes or fails.
use std::time::Instant;

use anyhow::Result;
use nodescope::{
    model::{Model, ModelConfig, Packages},
    schema::protocol::Snapshot,
    source::{SourceInfo, SourceKind},
    view::tui::{self, UiState},
};
use ratatui::{backend::TestBackend, Terminal};
use tracer_common::Event;

use crate::synthetic;

pub fn main(count: u64) -> Result<()> {
    let events: Vec<Event> = synthetic::events(count).collect();
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    for event in &events {
        model.ingest(event);
    }
    let elapsed = started.elapsed();
    println!(
        "model ingest: {count} events in {:.3} s = {:.2} M events/s on one core ({} windows, {} processes)",
        elapsed.as_secs_f64(),
        synthetic::rate(count, elapsed) / 1e6,
        model.history().len(),
        model.process_count()
    );
    frames()
}

/// Frame time with 10,000 live processes in 3,000 apps: snapshot + draw into a 160x50 buffer.
fn frames() -> Result<()> {
    let packages: String = (0..3000)
        .map(|i| format!("com.example.app{i} {} 0 /data x 3003\n", 10_000 + i))
        .collect();
    let mut model = Model::new(ModelConfig {
        packages: Packages::parse(&packages),
        ..ModelConfig::default()
    });
    for (i, event) in synthetic::events(400_000).enumerate() {
        let tgid = 20_000 + (i % 10_000) as u32;
        model.ingest(&event.task(tgid).uid(10_000 + tgid % 3000));
    }
    let info = SourceInfo {
        kind: SourceKind::Sim,
        kernel: "bench".into(),
        devices: vec!["vdb".into()],
        detail: String::new(),
    };
    let mut terminal = Terminal::new(TestBackend::new(160, 50))?;
    let ui = UiState::default();
    let frames = 50;
    let started = Instant::now();
    for _ in 0..frames {
        let snapshot = Snapshot::capture(&model, &info);
        tui::render(&mut terminal, &snapshot, &ui)?;
    }
    let per_frame = started.elapsed() / frames;
    println!(
        "TUI frame with {} processes in {} apps: {:.2} ms (snapshot + draw, 160x50)",
        model.process_count(),
        model.apps().len(),
        per_frame.as_secs_f64() * 1e3
    );
    Ok(())
}
