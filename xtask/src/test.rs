//! `cargo xtask test`: the one test command, for developers and CI alike.
use anyhow::Result;

use crate::{setup, util};

pub fn run() -> Result<()> {
    setup::run()?;
    if !util::is_root() {
        eprintln!(
            "note: not root: the tests that load eBPF programs into the kernel will be SKIPPED \
             (each prints why); run as root for the full suite"
        );
    }
    util::run(util::cargo().args(["fmt", "--all", "--check"]))?;
    util::run(util::cargo().args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;
    util::run(util::cargo().args(["test", "--workspace", "--exclude", "tracer-ebpf"]))?;
    Ok(())
}
