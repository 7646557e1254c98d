//! `nodescope stream` (issue #3).
use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub struct StreamArgs {}

pub fn run(_args: StreamArgs) -> Result<()> {
    bail!("`nodescope stream` is not built yet (tracked in issue #3)")
}
