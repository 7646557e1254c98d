//! Small helpers for running commands with clear errors: the VM harness's (vm_harness::util),
//! and the two only xtask's tasks use.
use std::process::Command;

use anyhow::{bail, Context as _, Result};
pub use vm_harness::util::{
    build_nodescope, cargo, create_no_follow, is_root, output, run, target_dir, workspace_root,
};

/// Bytes free to unprivileged users on the file system holding `path` (df's "avail").
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let text = output("df", &["-B1", "--output=avail", path.to_str()?])?;
    text.lines().nth(1)?.trim().parse().ok()
}

/// Build nodescope in release mode and run one of its subcommands.
pub fn run_nodescope(subcommand: &str, args: &[String]) -> Result<()> {
    let binary = build_nodescope()?;
    let status = Command::new(&binary)
        .arg(subcommand)
        .args(args)
        .status()
        .with_context(|| format!("starting {}", binary.display()))?;
    if !status.success() {
        bail!("nodescope {subcommand} failed: {status}");
    }
    Ok(())
}
