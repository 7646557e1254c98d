//! nodescope: see, and tune, F2FS compressed node caching.
//!
//! Data flows one way: a source (bpf | sim | replay) produces `tracer_common::Event`s, the
//! model aggregates them, views show the model, the controller reads the model and writes
//! knobs. See docs/ARCHITECTURE.md.
use anyhow::Result;
use clap::{Parser, Subcommand};
use nodescope::cmd;

#[derive(Parser)]
#[command(name = "nodescope", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What this kernel and this process can do: BPF, BTF, tracefs, kprobes, uprobes, F2FS.
    Probe(cmd::probe::ProbeArgs),
    /// Live terminal view of the node cache.
    Top(cmd::top::TopArgs),
    /// Stream node-cache activity as JSON lines, one object per window.
    Stream(cmd::stream::StreamArgs),
    /// Record events to a file (lz4 blocks with checksums) for report and replay.
    Record(cmd::record::RecordArgs),
    /// Summarise a recording: per app, per device, knob changes, drops.
    Report(cmd::report::ReportArgs),
    /// Export a recording for other tools: `--perfetto` writes a Perfetto trace.
    Export(cmd::export::ExportArgs),
    /// Tune node_compress_threshold and node_compress_interval with a feedback controller.
    Tune(cmd::tune::TuneArgs),
    /// Run the compressed node cache simulator.
    Sim(cmd::sim::SimArgs),
    /// One headless process: source, model, controller (--tune), OpenMetrics, a rolling
    /// recording, and a socket for `top --connect` and `stream --connect`.
    Daemon(cmd::daemon::DaemonArgs),
    /// What if: replay a recording's node accesses (record with --accesses) through the
    /// simulator's cache on a grid of settings; or measure compressors on an image.
    Whatif(cmd::whatif::WhatifArgs),
    /// A seeded fsstress-like workload (fsstress's default mix, or the metadata mix).
    Fsstress(cmd::fsstress::FsstressArgs),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    // Errors are for people: the message and its causes, never a backtrace.
    if let Err(err) = run(Cli::parse()) {
        eprintln!("nodescope: {err:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Probe(args) => cmd::probe::run(args),
        Command::Top(args) => cmd::top::run(args),
        Command::Stream(args) => cmd::stream::run(args),
        Command::Record(args) => cmd::record::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Export(args) => cmd::export::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Daemon(args) => cmd::daemon::run(args),
        Command::Whatif(args) => cmd::whatif::run(args),
        Command::Fsstress(args) => cmd::fsstress::run(args),
    }
}
