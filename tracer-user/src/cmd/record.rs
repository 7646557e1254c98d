//! `nodescope record -o FILE`: capture events to a recording (format: src/record/mod.rs).
//! Ctrl-C and SIGTERM finish the file cleanly; `--duration` counts in the source's own clock,
//! so a simulator recording of 60 s holds exactly the simulator's first 60 s.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result};
use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

use crate::{
    cmd::WindowArg,
    model::{ModelConfig, Packages, WindowReport},
    pipeline::Pipeline,
    source::open::{open, SourceArgs, SourceChoice},
    view::{
        jsonline::window_line,
        output::OutputFile,
        recorder::Recorder,
        stdout::{self, closed_is_success, print_line},
    },
};

#[derive(Args)]
pub struct RecordArgs {
    /// The file to write (never stdout: the format needs a file).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Replace FILE when it exists (without it, an existing file is refused).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    source: SourceArgs,
    /// Stop after this many seconds of the source's time (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "S", allow_negative_numbers = true,
          value_parser = crate::cmd::parse_duration)]
    duration: Option<f64>,
    #[command(flatten)]
    window: WindowArg,
    /// Also write the recording as a Perfetto trace to this file when it is finished (what
    /// `nodescope export --perfetto` writes from it).
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
    /// While recording, print the live model's per-window JSON lines (those `stream --json`
    /// prints), then a last line with the totals (what `report --json` must match).
    #[arg(long)]
    json: bool,
}

pub fn run(args: RecordArgs) -> Result<()> {
    anyhow::ensure!(args.window.seconds > 0.0, "--window must be positive");
    anyhow::ensure!(
        args.output != Path::new("-"),
        "-o -: a recording is written to a file, not to standard output; name a file \
         (`--json` prints the windows on standard output)"
    );
    // Refused before the source starts; created (and refused again, atomically) later.
    OutputFile::new(args.force).check(&args.output)?;
    if let Some(trace) = &args.perfetto {
        OutputFile::new(args.force).check(trace)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(record(args))
}

async fn record(args: RecordArgs) -> Result<()> {
    // A recording is its events: every node read must be one.
    let source_args = SourceArgs {
        node_read_events: true,
        ..args.source.clone()
    };
    let opened = open(&source_args, SourceChoice::Auto)?;
    if let Some(banner) = &opened.banner {
        eprintln!("{banner}");
    }
    let packages = Packages::from_file_or(None, opened.source.packages_list())?;
    let pipeline = Pipeline::new(
        opened.source,
        ModelConfig {
            window_ns: (args.window.seconds * 1e9) as u64,
            packages,
            ..ModelConfig::default()
        },
    )?;
    let origin = pipeline.origin_ns();
    let end_ns = args.duration.map(|d| origin + (d * 1e9) as u64);
    let mut pipeline = pipeline.until(end_ns);
    let mut recorder = Recorder::create(&args.output, &pipeline, OutputFile::new(args.force))?;
    let lines = args.json.then_some(origin);
    let stop = capture(&mut pipeline, &mut recorder, lines).await?;
    if matches!(stop, "SIGTERM" | "interrupted") {
        drain(&mut pipeline, &mut recorder).await?;
    }
    let finished_at = end_ns.unwrap_or_else(|| pipeline.now_ns());
    // After a closed stdout the file is still finished; only the lines are left out.
    closed_is_success(print_closed(&pipeline.refresh()?.closed, lines))?;
    let (bytes, footer) = recorder.finish(finished_at)?;
    eprintln!(
        "recorded {} events in {} blocks to {} ({} bytes, {:.1} bytes/event; {stop})",
        footer.events,
        footer.blocks,
        args.output.display(),
        bytes,
        bytes as f64 / footer.events.max(1) as f64
    );
    if let Some(note) = pipeline.closing_note() {
        eprintln!("nodescope record: {note}");
    }
    if let Some(trace) = &args.perfetto {
        crate::cmd::export::write_trace(&args.output, None, trace, OutputFile::new(args.force))?;
    }
    if args.json {
        let totals =
            serde_json::json!({ "totals": pipeline.model().totals(), "events": footer.events });
        closed_is_success(print_line(totals))?;
    }
    Ok(())
}

/// Copy events into the file until the duration, a signal or the source's end. Returns why it
/// stopped.
async fn capture(
    pipeline: &mut Pipeline,
    recorder: &mut Recorder,
    lines: Option<u64>,
) -> Result<&'static str> {
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            more = pipeline.next_batch(&mut batch) => {
                let open = more?;
                let ended = pipeline.ingest(&mut batch)?;
                recorder.events(&batch)?;
                batch.clear();
                if ended {
                    return Ok("duration reached");
                }
                if !open {
                    pipeline.source_ended();
                    return Ok("source ended");
                }
            }
            _ = tick.tick() => {
                let refreshed = pipeline.refresh()?;
                if let Some(change) = &refreshed.knob_change {
                    recorder.knob_change(change)?;
                }
                recorder.flush_if_due()?;
                match print_closed(&refreshed.closed, lines) {
                    Err(err) if stdout::is_closed(&err) => return Ok("standard output closed"),
                    printed => printed?,
                }
                if pipeline.is_past_end() {
                    return Ok("duration reached");
                }
            }
            _ = sigterm.recv() => return Ok("SIGTERM"),
            _ = sigint.recv() => return Ok("interrupted"),
        }
    }
}

/// After a signal, take what the source already holds (events still in the kernel's ring
/// buffer), so that a stop right after a burst loses none of it; a quiet source ends it.
async fn drain(pipeline: &mut Pipeline, recorder: &mut Recorder) -> Result<()> {
    let mut batch = Vec::new();
    loop {
        let waited = tokio::time::timeout(DRAIN_QUIET, pipeline.next_batch(&mut batch)).await;
        let open = match waited {
            Ok(more) => more?,
            Err(_quiet) => return Ok(()),
        };
        if batch.is_empty() && !open {
            return Ok(());
        }
        let ended = pipeline.ingest(&mut batch)?;
        recorder.events(&batch)?;
        if batch.is_empty() || ended || !open {
            return Ok(());
        }
        batch.clear();
    }
}

/// How long `drain` waits for more events before it takes the source as empty: longer than
/// the kernel source's own drain period, since its F2FS programs wake the reader only per
/// batch.
const DRAIN_QUIET: Duration = Duration::from_millis(250);

/// Print the windows the model closed, when lines were asked for (`lines` = window origin).
fn print_closed(closed: &[WindowReport], lines: Option<u64>) -> Result<()> {
    if let Some(origin) = lines {
        for window in closed {
            print_line(window_line(window, origin))?;
        }
    }
    Ok(())
}
