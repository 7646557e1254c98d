//! Small helpers for running commands with clear errors (xtask uses them too).
use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};

/// The workspace root (this crate lives two levels below it, in test/vm).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("test/vm has a workspace two levels up")
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

/// Where cargo puts build output: $CARGO_TARGET_DIR, else target/ in the workspace.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Build nodescope in release mode; the path of the binary.
pub fn build_nodescope() -> Result<PathBuf> {
    run(cargo().args([
        "build",
        "--locked",
        "--release",
        "--package",
        "tracer-user",
        "--bin",
        "nodescope",
    ]))?;
    let binary = target_dir().join("release/nodescope");
    if !binary.exists() {
        bail!("{} missing after the build", binary.display());
    }
    Ok(binary)
}

/// Create (or truncate) `path` for writing, refusing a symlink in its place: xtask runs as
/// root under target/, and a link planted there must not send its output elsewhere.
pub fn create_no_follow(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_symlink_in_a_files_place_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let link = dir.path().join("log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = super::create_no_follow(&link).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "old contents").unwrap();
        use std::io::Write as _;
        super::create_no_follow(&plain)
            .unwrap()
            .write_all(b"new")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "new");
    }
}
