//! `nodescope sim` (issue #4).
use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> Result<()> {
    bail!("`nodescope sim` is not built yet (tracked in issue #4)")
}
