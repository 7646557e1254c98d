//! `nodescope bench model|record` (hidden; `cargo xtask bench model|record` runs it in release):
//! figures for the model's ingest rate, the TUI's frame time and the recorder's cost. They
//! print numbers and never pass or fail.
use std::time::{Duration, Instant};

use crate::record::{writer::Writer, Header};
use anyhow::{bail, Result};
use clap::Args;
use ratatui::{backend::TestBackend, Terminal};
use tracer_common::{Event, EventKind, FLAG_READAHEAD, QUEUE_256, QUEUE_512};

use crate::{
    model::{Model, ModelConfig, Packages},
    source::{SourceInfo, SourceKind},
    view::tui::{self, Snapshot, UiState},
};

#[derive(Args)]
pub struct BenchArgs {
    /// model or record.
    name: String,
    /// Events to generate.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
}

pub fn run(args: BenchArgs) -> Result<()> {
    match args.name.as_str() {
        "model" => bench_model(args.events),
        "record" => bench_record(args.events),
        other => bail!("unknown benchmark {other:?}: model or record"),
    }
}

/// A deterministic mix like a busy phone's: reads from 2,000 processes, restores, conversions
/// by the cache thread, reclaims and second chances, 1 s windows every 200,000 events.
fn synthetic(count: u64) -> impl Iterator<Item = Event> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..count).map(move |i| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let tgid = 1000 + (state % 2000) as u32;
        let (kind, queue) = match state % 100 {
            0..=49 => (EventKind::NodeRead, 0),
            50..=64 => (EventKind::Restore, QUEUE_512),
            65..=84 => (EventKind::Convert, QUEUE_256),
            85..=92 => (EventKind::Reclaim, QUEUE_512),
            _ => (EventKind::SecondChance, 0),
        };
        let mut event = Event {
            ts_ns: i * 5_000,
            kind: kind as u8,
            tgid,
            pid: tgid,
            uid: 10_000 + tgid % 300,
            nid: (state >> 20) as u32,
            queue,
            flags: if state.is_multiple_of(7) {
                FLAG_READAHEAD
            } else {
                0
            },
            ..Event::ZERO
        };
        event.comm[..6].copy_from_slice(b"app.ex");
        event
    })
}

fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

fn bench_model(count: u64) -> Result<()> {
    let events: Vec<Event> = synthetic(count).collect();
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    for event in &events {
        model.ingest(event);
    }
    let elapsed = started.elapsed();
    println!(
        "model ingest: {count} events in {:.3} s = {:.2} M events/s on one core ({} windows, {} processes)",
        elapsed.as_secs_f64(),
        rate(count, elapsed) / 1e6,
        model.history().len(),
        model.process_count()
    );
    bench_frames()
}

/// Frame time with 10,000 live processes in 3,000 apps: snapshot + draw into a 160x50 buffer.
fn bench_frames() -> Result<()> {
    let packages: String = (0..3000)
        .map(|i| format!("com.example.app{i} {} 0 /data x 3003\n", 10_000 + i))
        .collect();
    let mut model = Model::new(ModelConfig {
        packages: Packages::parse(&packages),
        ..ModelConfig::default()
    });
    for (i, event) in synthetic(400_000).enumerate() {
        let tgid = 20_000 + (i % 10_000) as u32;
        model.ingest(&Event {
            tgid,
            pid: tgid,
            uid: 10_000 + tgid % 3000,
            ..event
        });
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

fn bench_record(count: u64) -> Result<()> {
    let events: Vec<Event> = synthetic(count).collect();
    // Without recording: the model alone, as a live run without `record` would do.
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    events.iter().for_each(|e| model.ingest(e));
    let without = started.elapsed();
    // With recording: the same, plus the writer into a file.
    let path = std::env::temp_dir().join(format!("nodescope-bench-{}.nsr", std::process::id()));
    let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut writer = Writer::new(file, &Header::default())?;
    let mut model = Model::new(ModelConfig::default());
    let started = Instant::now();
    for event in &events {
        model.ingest(event);
        writer.event(event)?;
    }
    let (_, footer) = writer.finish(0)?;
    let with = started.elapsed();
    let bytes = std::fs::metadata(&path)?.len();
    let _ = std::fs::remove_file(&path);
    let writing_only = with.saturating_sub(without);
    println!(
        "recorder: {} events, {:.2} M events/s written (writer alone), {:.1} bytes/event on disk, {} blocks",
        footer.events,
        rate(count, writing_only.max(Duration::from_nanos(1))) / 1e6,
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
