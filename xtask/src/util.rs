//! Small helpers for running commands with clear errors.
use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}

pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Run a command, inheriting stdio; fail with the command line when it fails.
pub fn run(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    let status = command
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("starting {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

/// Run a command and capture its stdout; None when it cannot start or fails.
pub fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn is_root() -> bool {
    output("id", &["-u"]).is_some_and(|uid| uid.trim() == "0")
}

/// Build nodescope in release mode and run one of its subcommands.
pub fn run_nodescope(subcommand: &str, args: &[String]) -> Result<()> {
    run(cargo().args([
        "build",
        "--release",
        "--package",
        "tracer-user",
        "--bin",
        "nodescope",
    ]))?;
    let binary = workspace_root().join("target/release/nodescope");
    let mut command = Command::new(&binary);
    command.arg(subcommand).args(args);
    let status = command
        .status()
        .with_context(|| format!("starting {}", binary.display()))?;
    if !status.success() {
        bail!("nodescope {subcommand} failed: {status}");
    }
    Ok(())
}
