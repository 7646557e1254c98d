//! `nodescope top`: the live view. Until a source lands it shows what this machine can do.
use anyhow::Result;
use clap::Args;

use super::probe;

#[derive(Args)]
pub struct TopArgs {}

pub fn run(_args: TopArgs) -> Result<()> {
    let report = probe::collect()?;
    print!("{}", probe::render_table(&report));
    println!();
    println!(
        "nodescope top: no source yet. The live view (issue #6) will use eBPF when the kernel"
    );
    println!("has F2FS and the patch's probe points, and the simulator (issue #4) otherwise.");
    Ok(())
}
