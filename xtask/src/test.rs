//! `cargo xtask test`: the one test command, for developers and CI alike.
use std::{
    io::{BufRead as _, BufReader},
    process::Stdio,
};

use anyhow::{bail, Context as _, Result};

use crate::{setup, util};

/// What a run from a clean clone writes under target/ (measured: see the README's disk note).
const CLEAN_RUN_BYTES: u64 = 3 << 30;

pub fn run() -> Result<()> {
    report_disk_space();
    setup::run()?;
    if !util::is_root() {
        eprintln!(
            "note: not root: the tests that load eBPF programs into the kernel will be SKIPPED \
             (each prints why); run as root for the full suite"
        );
    }
    util::run(util::cargo().args(["fmt", "--all", "--check"]))?;
    util::run(util::cargo().args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;
    let mut totals = cargo_test(&["--workspace", "--exclude", "tracer-ebpf"])?;
    vm_tests(&mut totals);
    fuzz_recording(&mut totals);
    println!("{}", totals.closing_line());
    if totals.failed > 0 {
        bail!("{} tests failed", totals.failed);
    }
    Ok(())
}

/// Say up front when the disk may be too small: a full disk otherwise shows up minutes later
/// as a linker "Bus error" or "No space left on device" in the middle of the build.
fn report_disk_space() {
    let target = util::target_dir();
    let probe = if target.exists() {
        target
    } else {
        util::workspace_root()
    };
    let Some(free) = util::free_bytes(&probe) else {
        return;
    };
    let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
    println!(
        "disk: {:.1} GiB free under {} (a run from a clean clone writes about {:.1} GiB)",
        gib(free),
        probe.display(),
        gib(CLEAN_RUN_BYTES)
    );
    if free < CLEAN_RUN_BYTES {
        println!(
            "warning: the disk may fill up during the build; if it stops with 'No space left on \
             device' or a linker 'Bus error', free space (or `cargo clean`) and run again"
        );
    }
}

/// The end-to-end test: nodescope on a real F2FS in QEMU (6.1 and 6.12), one test in the tally.
fn vm_tests(totals: &mut Totals) {
    if !util::is_root() {
        println!(
            "vm-test SKIPPED: not root: finding Debian's kernel packages may need `apt-get \
             update`, which needs root (`cargo xtask vm-test` runs it anyway)"
        );
        totals.ignored += 1;
        return;
    }
    match crate::vm::run("all") {
        Ok(()) => totals.passed += 1,
        Err(err) => {
            println!("vm-test FAILED: {err:#}");
            totals.failed += 1;
        }
    }
}

/// A short cargo-fuzz run of the recording reader, seeded by a recording the record tests
/// leave in target/fuzz-seed. Counted as one test; a crash fails it.
fn fuzz_recording(totals: &mut Totals) {
    let root = util::workspace_root();
    let corpus = root.join("target/fuzz-corpus/recording");
    let seeds = root.join("target/fuzz-seed");
    if let Err(err) = std::fs::create_dir_all(&corpus) {
        println!(
            "fuzz recording FAILED: creating {}: {err}",
            corpus.display()
        );
        totals.failed += 1;
        return;
    }
    let mut command = std::process::Command::new("rustup");
    command
        .args(["run", "nightly", "cargo", "fuzz", "run", "recording"])
        .arg(&corpus)
        .arg(&seeds)
        .args(["--", "-max_total_time=20"])
        .current_dir(root.join("tracer-user"))
        .env("CARGO_TARGET_DIR", root.join("target/fuzz"));
    match util::run(&mut command) {
        Ok(()) => {
            println!("fuzz recording: 20 s without a crash");
            totals.passed += 1;
        }
        Err(err) => {
            println!("fuzz recording FAILED: {err:#}");
            totals.failed += 1;
        }
    }
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
