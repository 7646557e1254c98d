//! Subcommands that exist in the interface but not yet in the code say so plainly.
use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub struct ComingArgs {
    /// Arguments for a later version; ignored.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

pub fn run(name: &str, issue: u32) -> Result<()> {
    bail!("`nodescope {name}` is not built yet (tracked in issue #{issue})")
}
