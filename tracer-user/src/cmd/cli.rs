//! The command line: one subcommand per module of cmd/.
use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "nodescope", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What this kernel and this process can do: BPF, BTF, tracefs, kprobes, uprobes, F2FS.
    Probe(super::probe::ProbeArgs),
    /// Live terminal view of the node cache.
    Top(super::top::TopArgs),
    /// Stream node-cache activity as JSON lines, one object per window.
    Stream(super::stream::StreamArgs),
    /// Record events to a file (lz4 blocks with checksums) for report and replay.
    Record(super::record::RecordArgs),
    /// Summarise a recording: per app, per device, knob changes, drops.
    Report(super::report::ReportArgs),
    /// Export a recording for other tools: `--perfetto` writes a Perfetto trace.
    Export(super::export::ExportArgs),
    /// Tune node_compress_threshold and node_compress_interval with a feedback controller.
    Tune(super::tune::TuneArgs),
    /// Run the compressed node cache simulator.
    Sim(super::sim::SimArgs),
    /// One headless process: source, model, controller (--tune), OpenMetrics, a rolling
    /// recording, and a socket for `top --connect` and `stream --connect`.
    Daemon(super::daemon::DaemonArgs),
    /// What if: replay a recording's node accesses (record with --accesses) through the
    /// simulator's cache on a grid of settings; or measure compressors on an image.
    Whatif(super::whatif::WhatifArgs),
    /// A seeded fsstress-like workload (fsstress's default mix, or the metadata mix).
    Fsstress(super::fsstress::FsstressArgs),
}

/// The `nodescope` binary: parse the command line, run the subcommand, print an error as
/// its message and causes.
pub fn main() {
    // Log lines wait for a stalled stderr a bounded time, then are dropped (issue 52).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .target(env_logger::Target::Pipe(Box::new(
            controller::audit::BoundedStderr::new(),
        )))
        .init();
    // Errors are for people: the message and its causes, never a backtrace.
    if let Err(err) = run(Cli::parse()) {
        say!("nodescope: {err:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Probe(args) => super::probe::run(args),
        Command::Top(args) => super::top::run(args),
        Command::Stream(args) => super::stream::run(args),
        Command::Record(args) => super::record::run(args),
        Command::Report(args) => super::report::run(args),
        Command::Export(args) => super::export::run(args),
        Command::Tune(args) => super::tune::run(args),
        Command::Sim(args) => super::sim::run(args),
        Command::Daemon(args) => super::daemon::run(args),
        Command::Whatif(args) => super::whatif::run(args),
        Command::Fsstress(args) => super::fsstress::run(args),
    }
}
