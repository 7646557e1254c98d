//! `cargo xtask test`: the one test command, for developers and CI alike.
use std::{
    io::{BufRead as _, BufReader},
    process::Stdio,
};

use anyhow::{bail, Context as _, Result};

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
    let totals = cargo_test(&["--workspace", "--exclude", "tracer-ebpf"])?;
    println!("{}", totals.closing_line());
    if totals.failed > 0 {
        bail!("{} tests failed", totals.failed);
    }
    Ok(())
}

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Totals {
    /// Sum one libtest summary: "test result: ok. 4 passed; 0 failed; 1 ignored; ...".
    fn add_summary(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let count: u64 = count.parse().unwrap_or(0);
            match label {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }

    fn closing_line(&self) -> String {
        format!(
            "tests: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.ignored
        )
    }
}

/// Run `cargo test`, echo its output, and add up the per-binary summaries.
fn cargo_test(args: &[&str]) -> Result<Totals> {
    let mut child = util::cargo()
        .arg("test")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut totals = Totals::default();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        println!("{line}");
        totals.add_summary(line.trim());
    }
    let status = child.wait().context("waiting for cargo test")?;
    if !status.success() && totals.failed == 0 {
        bail!("cargo test failed: {status}");
    }
    Ok(totals)
}
