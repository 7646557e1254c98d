//! `nodescope tune` (issue #7).
use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub struct TuneArgs {}

pub fn run(_args: TuneArgs) -> Result<()> {
    bail!("`nodescope tune` is not built yet (tracked in issue #7)")
}
