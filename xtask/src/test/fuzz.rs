//! The cargo-fuzz targets' part of the test run: the lock check, the build beside the VM
//! phases, and a short run of each target.
use std::process::Stdio;

use anyhow::{Context as _, Result};

use super::Totals;
use crate::util;

/// The cargo-fuzz targets (tracer-user/fuzz) and where their seeds are: the recording reader
/// is seeded by a recording the record tests leave in target/fuzz-seed, the others by files
/// committed under tracer-user/fuzz/seeds/<target>.
const FUZZ_TARGETS: [&str; 4] = ["recording", "manifest", "packages", "f2fs_image"];
/// Seconds each target runs: four short runs keep the test command a minute longer only (20 s
/// each took 86 to 88 s of the fresh-clone runs' 55 minutes; the targets' corpora and the
/// regressions run first all the same).
const FUZZ_SECONDS: u32 = 10;
/// No input may make a target allocate more than this (libFuzzer's -rss_limit_mb and
/// -malloc_limit_mb) ...
const FUZZ_RSS_MB: u32 = 256;
/// ... or take longer than this on one input (-timeout), however the machine is loaded.
const FUZZ_TIMEOUT_S: u32 = 10;
/// AddressSanitizer holds freed memory back (256 MB by default) to catch uses after free; it
/// counts in the RSS limit, so a target that frees a lot (the F2FS reader's blocks) would hit
/// the limit on ASan's memory, not its own. Safe Rust needs little of it.
const ASAN_OPTIONS: &str = "quarantine_size_mb=32";

/// Short cargo-fuzz runs of every target, each counted as one test; a crash, a leak of memory
/// past the limit or a hang fails it. Inputs that once crashed a target are kept under
/// tracer-user/fuzz/regressions/<target> and run first, as seeds.
pub(super) fn targets(totals: &mut Totals, lock: Result<()>, build: Option<std::process::Child>) {
    if let Err(err) = lock {
        println!("fuzz FAILED: {err:#}");
        totals.failed += 1;
        return;
    }
    if let Some(mut build) = build {
        match build.wait() {
            Ok(status) if status.success() => {}
            // The runs below build what is missing themselves, in the foreground.
            other => println!(
                "fuzz: the build beside the VMs ended {other:?} (its output: {}); building \
                 again",
                build_log().display()
            ),
        }
    }
    for target in FUZZ_TARGETS {
        match run(target) {
            Ok(()) => {
                println!("fuzz {target}: {FUZZ_SECONDS} s without a crash");
                totals.passed += 1;
            }
            Err(err) => {
                println!("fuzz {target} FAILED: {err:#}");
                totals.fail(format!("fuzz {target}: {err:#}"));
            }
        }
    }
}

fn build_log() -> std::path::PathBuf {
    util::target_dir().join("fuzz-build.log")
}

/// The fuzz targets' build, started beside the VM phases at nice 19: the VMs leave much of a
/// core idle (`cargo xtask vm-kmod`: 14 min 12 s user + 48 s system over 12 min 46 s on 2
/// cores), the build takes 4 min 39 s of CPU, and at nice 19 it yields to QEMU's threads
/// whenever they want the CPU. Its output goes to target/fuzz-build.log; None (the runs then
/// build in the foreground) when it cannot start.
pub(super) fn start_build() -> Option<std::process::Child> {
    let log = crate::util::create_no_follow(&build_log()).ok()?;
    let mut command = std::process::Command::new("nice");
    command.args(["-n", "19", "rustup"]);
    command_for(&mut command, &["build", "--dev"]);
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().ok()?)
        .stderr(log);
    command.spawn().ok()
}

/// `cargo fetch --locked` on the fuzz crate: fails when its Cargo.lock would change.
pub(super) fn lock_is_current() -> Result<()> {
    let manifest = util::workspace_root().join("tracer-user/fuzz/Cargo.toml");
    util::run(
        std::process::Command::new("rustup")
            .args(["run", "nightly", "cargo", "fetch", "--locked", "--manifest-path"])
            .arg(&manifest),
    )
    .context("tracer-user/fuzz/Cargo.lock is not current: run `cargo metadata` in tracer-user/fuzz and commit it")
}

fn run(target: &str) -> Result<()> {
    let root = util::workspace_root();
    let fuzz_dir = root.join("tracer-user/fuzz");
    let corpus = root.join("target/fuzz-corpus").join(target);
    std::fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let seeds = match target {
        "recording" => root.join("target/fuzz-seed"),
        _ => fuzz_dir.join("seeds").join(target),
    };
    let regressions = fuzz_dir.join("regressions").join(target);
    let mut command = std::process::Command::new("rustup");
    command_for(&mut command, &["run", "--dev", target]);
    command.arg(&corpus).arg(&seeds);
    if regressions.is_dir() {
        command.arg(&regressions);
    }
    command
        .arg("--")
        .arg(format!("-max_total_time={FUZZ_SECONDS}"))
        .arg(format!("-rss_limit_mb={FUZZ_RSS_MB}"))
        .arg(format!("-malloc_limit_mb={FUZZ_RSS_MB}"))
        .arg(format!("-timeout={FUZZ_TIMEOUT_S}"))
        .env("ASAN_OPTIONS", ASAN_OPTIONS);
    util::run(&mut command)
}

/// `rustup run nightly cargo fuzz ARGS` (after what `command` already holds) as the build and
/// the runs share it: the fuzz crate's directory, target/fuzz, the dev profile's settings.
fn command_for(command: &mut std::process::Command, args: &[&str]) {
    let root = util::workspace_root();
    // --dev: these are smoke runs (the regressions, then 20 s each), and the unoptimised build
    // takes 2 min 49 s where cargo fuzz's release build (one codegen unit per crate) took 7 min
    // 45 s on a 2-core machine, at a tenth of the executions per second (628 against 6,287
    // runs of f2fs_image in 20 s). Fuzzing for long: `cargo fuzz run TARGET` in tracer-user.
    command
        .args(["run", "nightly", "cargo", "fuzz"])
        .args(args)
        .current_dir(root.join("tracer-user"))
        .env("CARGO_TARGET_DIR", root.join("target/fuzz"))
        // Line tables are enough for a crash's backtrace; no incremental state (0.3 GB).
        .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")
        .env("CARGO_INCREMENTAL", "0");
}
