//! `nodescope record -o FILE`: capture events to a recording (format: src/record/mod.rs).
//! Ctrl-C and SIGTERM finish the file cleanly; `--duration` counts in the source's own clock,
//! so a simulator recording of 60 s holds exactly the simulator's first 60 s.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;

use crate::{
    cmd::WindowArg,
    output::OutputFile,
    runner::{signals::Received, RunOptions, Runner, Stopped},
    source::open::{open, SourceArgs, SourceChoice},
    view::{
        lines::WindowLines,
        recorder::Recorder,
        stdout::{closed_is_success, print_line},
    },
};

#[derive(Args)]
pub(crate) struct RecordArgs {
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

pub(crate) fn run(args: RecordArgs) -> Result<()> {
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
    anyhow::ensure!(
        args.source.image.is_none(),
        "a recording keeps the node reads' nids, not their types: give the image to \
         `nodescope report --image` instead"
    );
    // A recording is its events: every node read must be one.
    let source_args = SourceArgs {
        node_read_events: true,
        ..args.source.clone()
    };
    let opened = open(&source_args, SourceChoice::Auto)?;
    if let Some(banner) = &opened.banner {
        say!("nodescope record: {banner}");
    }
    let pipeline = crate::cmd::live_pipeline(opened.source, &args.window, None, None)?;
    let end_ns = args
        .duration
        .map(|d| pipeline.origin_ns() + (d * 1e9) as u64);
    let pipeline = pipeline.until(end_ns);
    let mut recorder = Recorder::create(&args.output, &pipeline, OutputFile::new(args.force))?;
    // Said once the source is attached: a script may start its workload then.
    say!(
        "nodescope record: ready ({}), writing {}",
        pipeline.info().detail,
        args.output.display()
    );
    let mut runner = Runner::new(pipeline, None, RunOptions::stopping());
    // The lines, when asked for, are those `stream --json` prints; a closed stdout stops the
    // run, and the file is still finished.
    let mut lines = WindowLines::new(true, None, false);
    let stop = if args.json {
        runner.run(&mut [&mut recorder, &mut lines]).await?
    } else {
        runner.run(&mut [&mut recorder]).await?
    };
    let pipeline = runner.pipeline();
    let finished_at = end_ns.unwrap_or_else(|| pipeline.now_ns());
    let (bytes, footer) = recorder.finish(finished_at)?;
    say!(
        "recorded {} events in {} blocks to {} ({} bytes, {:.1} bytes/event; {})",
        footer.events,
        footer.blocks,
        args.output.display(),
        bytes,
        bytes as f64 / footer.events.max(1) as f64,
        stop_reason(&stop)
    );
    if let Some(note) = pipeline.closing_note() {
        say!("nodescope record: {note}");
    }
    if let Some(trace) = &args.perfetto {
        crate::view::perfetto::write_trace(&args.output, None, trace, OutputFile::new(args.force))?;
    }
    if args.json {
        let totals = crate::schema::report::RecordTotals {
            totals: (&pipeline.model().totals()).into(),
            events: footer.events,
        };
        closed_is_success(print_line(crate::schema::to_sorted_json(&totals)?))?;
    }
    Ok(())
}

/// Why the recording ended, in its last line's words.
fn stop_reason(stop: &Stopped) -> String {
    match stop {
        Stopped::Signal(Received::Interrupt) => "interrupted".into(),
        other => other.describe(),
    }
}
