//! `nodescope export --perfetto RECORDING -o FILE`: a recording as a Perfetto trace
//! (docs/PERFETTO.md). The recording is replayed through the model the way `report` reads it:
//! the same windows, the same per-app attribution.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::{output::OutputFile, view::perfetto::write_trace};

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The recording (from `nodescope record`) to write as a Perfetto protobuf trace.
    #[arg(long, value_name = "RECORDING")]
    perfetto: PathBuf,
    /// The trace file to write (open it in ui.perfetto.dev).
    #[arg(short = 'o', long = "output", value_name = "FILE.perfetto-trace")]
    output: PathBuf,
    /// Android packages.list for uid -> app names (else the one the recording carries).
    #[arg(long, value_name = "FILE")]
    packages: Option<PathBuf>,
    /// Replace the trace file when it exists (without it, an existing file is refused).
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(args: ExportArgs) -> Result<()> {
    let output = OutputFile::new(args.force);
    output.check(&args.output)?;
    write_trace(
        &args.perfetto,
        args.packages.as_deref(),
        &args.output,
        output,
    )
}
