//! `nodescope record -o FILE`: capture events to a recording (format: src/record/mod.rs).
//! Ctrl-C and SIGTERM finish the file cleanly; `--duration` counts in the source's own clock,
//! so a simulator recording of 60 s holds exactly the simulator's first 60 s.
use std::{io::BufWriter, path::PathBuf, time::Duration};

use crate::record::{writer::Writer, Header, Note};
use anyhow::{Context as _, Result};
use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

use crate::{
    model::{Model, ModelConfig, Packages},
    source::knobs::{KnobFiles, KnobValues},
    source::{
        open::{open, SourceArgs, SourceChoice},
        Source,
    },
};

#[derive(Args)]
pub struct RecordArgs {
    /// The file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    source: SourceArgs,
    /// Stop after this many seconds of the source's time (default: until Ctrl-C or SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Window length the recording announces for replays, in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// While recording, print the live model's per-window JSON lines (those `stream --json`
    /// prints), then a last line with the totals (what `report --json` must match).
    #[arg(long)]
    json: bool,
}

pub fn run(args: RecordArgs) -> Result<()> {
    anyhow::ensure!(args.interval > 0.0, "--interval must be positive");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(record(args))
}

async fn record(args: RecordArgs) -> Result<()> {
    let opened = open(&args.source, SourceChoice::Auto)?;
    if let Some(banner) = &opened.banner {
        eprintln!("{banner}");
    }
    let mut source = opened.source;
    let window_ns = (args.interval * 1e9) as u64;
    let origin = source.now_ns();
    let knobs = knob_files(&args.source, &*source);
    let header = header(&*source, origin, window_ns, knobs.as_ref());
    let file = std::fs::File::create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut writer = Writer::new(BufWriter::new(file), &header)?;
    let packages = Packages::from_file_or(None, source.packages_list())?;
    let mut model = Model::new(ModelConfig {
        window_ns,
        packages,
        ..ModelConfig::default()
    });
    model.start_at(origin);
    let end_ns = args.duration.map(|d| origin + (d * 1e9) as u64);
    let lines = args.json.then_some(origin);
    let stop = capture(
        &mut *source,
        &mut writer,
        &mut model,
        knobs.as_ref(),
        end_ns,
        lines,
    )
    .await?;
    let finished_at = end_ns.unwrap_or_else(|| source.now_ns());
    model.advance_to(finished_at);
    print_closed(&mut model, lines);
    let bytes = writer.bytes_written();
    let (_, footer) = writer.finish(finished_at)?;
    eprintln!(
        "recorded {} events in {} blocks to {} ({} bytes, {:.1} bytes/event; {stop})",
        footer.events,
        footer.blocks,
        args.output.display(),
        bytes,
        bytes as f64 / footer.events.max(1) as f64
    );
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "totals": model.totals(), "events": footer.events })
        );
    }
    Ok(())
}

fn knob_files(args: &SourceArgs, source: &dyn Source) -> Option<KnobFiles> {
    let device = source.info().devices.first()?.clone();
    let root = args
        .sysfs_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/sys/fs/f2fs"));
    Some(KnobFiles::new(&root, &device))
}

fn header(source: &dyn Source, origin: u64, window_ns: u64, knobs: Option<&KnobFiles>) -> Header {
    let info = source.info();
    let values = knobs.map(KnobFiles::read).unwrap_or_default();
    Header {
        host: crate::system::hostname(),
        kernel: info.kernel,
        source: format!("{:?}", info.kind).to_lowercase(),
        probe_plan: info.detail.split(", ").map(str::to_string).collect(),
        detail: info.detail,
        devices: info.devices,
        threshold: values.threshold,
        interval_ms: values.interval_ms,
        clock_origin_ns: origin,
        window_ns,
        packages_list: source.packages_list(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// Copy events into the file until the duration, a signal or the source's end. Returns why it
/// stopped.
async fn capture<W: std::io::Write>(
    source: &mut dyn Source,
    writer: &mut Writer<W>,
    model: &mut Model,
    knobs: Option<&KnobFiles>,
    end_ns: Option<u64>,
    lines: Option<u64>,
) -> Result<&'static str> {
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_knobs = knobs.map(KnobFiles::read).unwrap_or_default();
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            more = source.next_batch(&mut batch) => {
                let open = more?;
                for event in batch.drain(..) {
                    if end_ns.is_some_and(|end| event.ts_ns >= end) {
                        return Ok("duration reached");
                    }
                    writer.event(&event)?;
                    model.ingest(&event);
                }
                if !open {
                    return Ok("source ended");
                }
            }
            _ = tick.tick() => {
                let now = source.now_ns();
                if end_ns.is_some_and(|end| now >= end) {
                    return Ok("duration reached");
                }
                note_knob_change(writer, knobs, &mut last_knobs, now)?;
                model.advance_to(now.min(end_ns.unwrap_or(u64::MAX)));
                print_closed(model, lines);
            }
            _ = sigterm.recv() => return Ok("SIGTERM"),
            _ = sigint.recv() => return Ok("interrupted"),
        }
    }
}

/// Print the windows the model closed, when lines were asked for (`lines` = window origin).
fn print_closed(model: &mut Model, lines: Option<u64>) {
    let closed = model.take_closed();
    if let Some(origin) = lines {
        for window in &closed {
            println!("{}", crate::view::jsonline::window_line(window, origin));
        }
    }
}

fn note_knob_change<W: std::io::Write>(
    writer: &mut Writer<W>,
    knobs: Option<&KnobFiles>,
    last: &mut KnobValues,
    now_ns: u64,
) -> Result<()> {
    let Some(knobs) = knobs else {
        return Ok(());
    };
    let values = knobs.read();
    if values != *last {
        let text = format!("{} -> {}", last.describe(), values.describe());
        writer.note(&Note {
            ts_ns: now_ns,
            kind: "knobs".into(),
            text,
        })?;
        *last = values;
    }
    Ok(())
}
