//! `cargo xtask test`: the one test command, for developers and CI alike.
use std::{
    io::{BufRead as _, BufReader},
    process::Stdio,
};

use anyhow::{bail, Context as _, Result};

use crate::{setup, util};

mod clock;
mod fuzz;
use clock::PhaseClock;

/// What a run from a clean clone writes under target/ (measured: see the README's disk note).
const CLEAN_RUN_BYTES: u64 = (7 << 30) / 2;

pub fn run() -> Result<()> {
    report_disk_space();
    let mut clock = PhaseClock::start();
    setup::run()?;
    clock.lap("setup");
    if !util::is_root() {
        eprintln!(
            "note: not root: the tests that load eBPF programs into the kernel will be SKIPPED \
             (each prints why); run as root for the full suite"
        );
    }
    let tree_before = work_tree_state();
    util::run(util::cargo().args(["fmt", "--all", "--check"]))?;
    // --locked everywhere: the committed lock files are what is built and tested; a stale one
    // is an error here, not a silent re-resolution on every fresh machine.
    util::run(util::cargo().args([
        "clippy",
        "--locked",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    clock.lap("fmt and clippy");
    // --no-fail-fast: one failing test binary must not keep the others from running (a CI
    // run once counted 342 tests instead of 489 after one failure).
    let mut totals = cargo_test(&[
        "--locked",
        "--no-fail-fast",
        "--workspace",
        "--exclude",
        "tracer-ebpf",
    ])?;
    clock.lap("cargo test");
    // cargo-fuzz has no --locked: the fuzz crate's lock file is checked before its build.
    let fuzz_lock = fuzz::lock_is_current();
    let fuzz_build = fuzz_lock.is_ok().then(fuzz::start_build).flatten();
    android_image_test(&mut totals);
    clock.lap("android-image");
    vm_tests(&mut totals);
    clock.lap("vm-test");
    kmod_test(&mut totals);
    clock.lap("vm-kmod");
    variants_test(&mut totals);
    clock.lap("vm-variants");
    foreign_test(&mut totals);
    clock.lap("vm-foreign");
    fuzz::targets(&mut totals, fuzz_lock, fuzz_build);
    clock.lap("fuzz");
    work_tree_unchanged(tree_before.as_ref(), &mut totals);
    clock.print();
    for (name, output) in &totals.failure_output {
        println!("why {name} failed (its output, at most {FAILURE_LINES} lines):");
        for line in output {
            println!("  | {line}");
        }
    }
    for name in &totals.skipped_names {
        println!("SKIPPED: {name}");
    }
    for name in &totals.failed_names {
        println!("FAILED: {name}");
    }
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

/// The Android image (built in QEMU, or the cached one) checked from its own bytes: one test,
/// its line `android-image ... PASS`.
fn android_image_test(totals: &mut Totals) {
    if !util::is_root() {
        let why = "android-image: not root: the kernel packages come through apt, which needs root";
        println!("SKIPPED {why}");
        totals.skip(why.to_string());
        return;
    }
    match vm_harness::android_image::run() {
        Ok(_) => totals.passed += 1,
        Err(err) => {
            println!("android-image FAILED: {err:#}");
            totals.fail(format!("android-image: {err:#}"));
        }
    }
}

/// The end-to-end test: nodescope on a real F2FS in QEMU (6.1 and 6.12), one test in the tally.
fn vm_tests(totals: &mut Totals) {
    if !util::is_root() {
        let why = "vm-test: not root: finding Debian's kernel packages may need `apt-get update`, \
                   which needs root (`cargo xtask vm-test` runs it anyway)";
        println!("SKIPPED {why}");
        totals.skip(why.to_string());
        return;
    }
    match vm_harness::run("all") {
        Ok(()) => totals.passed += 1,
        Err(err) => {
            println!("vm-test FAILED: {err:#}");
            totals.fail(format!("vm-test: {err:#}"));
        }
    }
}

/// The reference module (kmod/) built out of tree and run in Debian's 6.12 under QEMU: one
/// test in the tally, its verdict lines `kmod 6.12 ... PASS` and `rfc-kernel 6.12 ... PASS`.
fn kmod_test(totals: &mut Totals) {
    if !util::is_root() {
        let why = "vm-kmod: not root: the kernel packages come through apt, which needs root";
        println!("SKIPPED {why}");
        totals.skip(why.to_string());
        return;
    }
    // With the phone trial (issue 50): 3 + 3 trials (`cargo xtask vm-kmod`'s default) and the
    // static and controller trials, its own boot. A fresh clone's run took 3,187 s on
    // 2026-12-06 (2,912 s with 2 + 2), once the eBPF object was built once and the next
    // phases' modules beside this one (3,638 s before). Until the what-if replayed F2FS's
    // shrinker calls (kmod/README.md, "F2FS's shrinker, replayed") its 5 % check failed most
    // runs.
    let options = vm_harness::kmod_phase::Options::default();
    // The variant and foreign phases' modules build beside this phase's VM (about 2 minutes
    // of builds off the run's length); a build that fails here fails again in its phase, which
    // says so.
    let beside = || {
        if let Err(err) = vm_harness::kmod::build_phase_modules() {
            println!("vm-kmod: building the next phases' modules beside it: {err:#}");
        }
    };
    match vm_harness::kmod_phase::build_and_run_beside("6.12", options, beside) {
        Ok(()) => totals.passed += 1,
        Err(err) => {
            println!("vm-kmod FAILED: {err:#}");
            totals.fail(format!("vm-kmod: {err:#}"));
        }
    }
}

/// The variant modules in Debian's 6.12 under QEMU, one boot: one test per variant in the
/// tally, each its verdict line `variant <name> ... PASS`; a phase that could not run (build,
/// boot) fails all four.
fn variants_test(totals: &mut Totals) {
    let names = vm_harness::kmod::variants::VARIANTS.map(|v| v.name);
    let run = || {
        vm_harness::variants_phase::build_and_run(false)
            .map(|outcomes| outcomes.into_iter().map(|o| (o.pass, o.line)).collect())
    };
    modules_phase_test(totals, "vm-variants", &names, run);
}

/// The foreign variants in Debian's 6.12 under QEMU, one boot: one test per variant, each its
/// verdict line `rfc-foreign 6.12 variant=<name> ... PASS`; a phase that could not run fails
/// both.
fn foreign_test(totals: &mut Totals) {
    let names = vm_harness::kmod::foreign::FOREIGN.map(|v| v.name);
    let run = || {
        vm_harness::foreign_phase::build_and_run()
            .map(|outcomes| outcomes.into_iter().map(|o| (o.pass, o.line)).collect())
    };
    modules_phase_test(totals, "vm-foreign", &names, run);
}

/// A phase that loads several modules in one boot: a test per module (`names`), each passed or
/// failed by its verdict line (`run` gives (passed, line) per module); skipped without root,
/// all failed when the phase could not run.
fn modules_phase_test(
    totals: &mut Totals,
    phase: &str,
    names: &[&str],
    run: impl FnOnce() -> Result<Vec<(bool, String)>>,
) {
    if !util::is_root() {
        for name in names {
            let why = format!("{phase} {name}: not root: the kernel packages come through apt");
            println!("SKIPPED {why}");
            totals.skip(why);
        }
        return;
    }
    match run() {
        Ok(outcomes) => {
            for (pass, line) in outcomes {
                if pass {
                    totals.passed += 1;
                } else {
                    println!("{phase} FAILED: {line}");
                    totals.fail(format!("{phase}: {line}"));
                }
            }
        }
        Err(err) => {
            println!("{phase} FAILED: {err:#}");
            for name in names {
                totals.fail(format!("{phase} {name}: {err:#}"));
            }
        }
    }
}

/// `git status --porcelain` (untracked files under target/ left out) and `git diff HEAD`,
/// or None outside a git work tree (a source tarball).
fn work_tree_state() -> Option<(Vec<String>, String)> {
    let root = util::workspace_root();
    let root = root.to_str()?;
    let status = util::output("git", &["-C", root, "status", "--porcelain"])?;
    let diff = util::output("git", &["-C", root, "diff", "HEAD"])?;
    Some((porcelain_lines(&status), diff))
}

/// The lines of `git status --porcelain` that count: untracked files under target/ do not.
fn porcelain_lines(status: &str) -> Vec<String> {
    status
        .lines()
        .filter(|line| !line.starts_with("?? target/"))
        .map(str::to_string)
        .collect()
}

/// The test run must not change the work tree (a stale lock file rewritten by a build, a file
/// a test forgot to remove): what changed since the start fails the run, named.
fn work_tree_unchanged(before: Option<&(Vec<String>, String)>, totals: &mut Totals) {
    let (Some(before), Some(after)) = (before, work_tree_state()) else {
        let why = "work tree check: not a git work tree (or git is missing)";
        println!("SKIPPED {why}");
        totals.skip(why.to_string());
        return;
    };
    if *before == after {
        totals.passed += 1;
        return;
    }
    let changed: Vec<&String> = after
        .0
        .iter()
        .filter(|line| !before.0.contains(line))
        .collect();
    println!("work tree check FAILED: the test run changed the work tree:");
    for line in &changed {
        println!("  {line}");
    }
    if changed.is_empty() {
        println!("  (files already changed before the run were changed again; see git diff)");
    }
    totals.fail("work tree check: the test run changed the work tree".to_string());
}

#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
    /// What failed, repeated just above the closing line so that the tail of a long CI log
    /// names it.
    failed_names: Vec<String>,
    /// What was skipped and why, listed with the failures.
    skipped_names: Vec<String>,
    /// Each failed libtest test's captured output (its panic message first), cut to
    /// [`FAILURE_LINES`], repeated at the end: the tail of a CI log must say why, not only
    /// what.
    failure_output: Vec<(String, Vec<String>)>,
    /// Whether the lines now arriving belong to the last entry of `failure_output`.
    capturing: bool,
}

/// The most lines of one failed test's output repeated at the end of the run.
const FAILURE_LINES: usize = 40;

impl Totals {
    /// Tests that called `test_skip::skip` returned early, so libtest counted them as passed:
    /// move each to the skipped, and keep why.
    fn count_skips(&mut self, log: &str) {
        for (test, reason) in test_skip::parse_log(log) {
            self.passed = self.passed.saturating_sub(1);
            self.skip(format!("{test}: {reason}"));
        }
    }

    /// One test that did not run its assertions here, and why.
    fn skip(&mut self, why: String) {
        self.ignored += 1;
        self.skipped_names.push(why);
    }

    /// One failure outside libtest (a VM phase, a fuzz target).
    fn fail(&mut self, name: String) {
        self.failed += 1;
        self.failed_names.push(name);
    }

    /// libtest's "test some::name ... FAILED": remember the name (the count comes from the
    /// summary line).
    fn note_failure(&mut self, line: &str) {
        if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.strip_suffix(" ... FAILED"))
        {
            self.failed_names.push(name.to_string());
        }
    }

    /// libtest's report of a failure ("---- name stdout ----", the test's output, up to the
    /// next report or the "failures:" list): keep its first lines.
    fn note_output(&mut self, line: &str) {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|rest| rest.strip_suffix(" stdout ----"))
        {
            self.failure_output.push((name.to_string(), Vec::new()));
            self.capturing = true;
            return;
        }
        if line == "failures:" || line.starts_with("test result: ") {
            self.capturing = false;
        }
        if let (true, Some((_, output))) = (self.capturing, self.failure_output.last_mut()) {
            if output.len() < FAILURE_LINES && !(output.is_empty() && line.is_empty()) {
                output.push(line.to_string());
            }
        }
    }

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
    let skip_log = util::target_dir().join("test-skips.log");
    match std::fs::remove_file(&skip_log) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            return Err(err).with_context(|| format!("removing {}", skip_log.display()));
        }
        _ => {}
    }
    let mut child = util::cargo()
        .arg("test")
        .args(args)
        .env(test_skip::LOG_ENV, &skip_log)
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
        totals.note_failure(line.trim());
        totals.note_output(&line);
    }
    let status = child.wait().context("waiting for cargo test")?;
    if !status.success() && totals.failed == 0 {
        bail!("cargo test failed: {status}");
    }
    match std::fs::read_to_string(&skip_log) {
        Ok(text) => totals.count_skips(&text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err).with_context(|| format!("reading {}", skip_log.display())),
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a libtest run with one failure, as cargo test prints it.
    #[test]
    fn a_failed_tests_output_is_kept_for_the_closing_lines() {
        let mut totals = Totals::default();
        for line in [
            "test daemon::a_log_path ... FAILED",
            "",
            "failures:",
            "",
            "---- daemon::a_log_path stdout ----",
            "",
            "thread 'daemon::a_log_path' panicked at tracer-user/tests/daemon.rs:360:5:",
            "the refused FIFO, in the old log never came; log:",
            "",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
            "",
            "",
            "failures:",
            "    daemon::a_log_path",
            "",
            "test result: FAILED. 4 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
        ] {
            totals.add_summary(line.trim());
            totals.note_failure(line.trim());
            totals.note_output(line);
        }
        assert_eq!(totals.failed_names, ["daemon::a_log_path"]);
        let (name, output) = &totals.failure_output[0];
        assert_eq!(name, "daemon::a_log_path");
        assert_eq!(
            output[..2],
            [
                "thread 'daemon::a_log_path' panicked at tracer-user/tests/daemon.rs:360:5:",
                "the refused FIFO, in the old log never came; log:",
            ]
        );
        assert_eq!(output.len(), 6, "{output:?}");
        assert_eq!(totals.failure_output.len(), 1);
    }

    #[test]
    fn failures_are_named_and_summaries_summed() {
        let mut totals = Totals::default();
        for line in [
            "test record::a_recording_killed_early ... FAILED",
            "test model::ok_one ... ok",
            "test result: FAILED. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out",
        ] {
            totals.add_summary(line);
            totals.note_failure(line);
        }
        totals.fail("vm-kmod: no kernel".to_string());
        assert_eq!(
            totals.failed_names,
            ["record::a_recording_killed_early", "vm-kmod: no kernel"]
        );
        assert_eq!(
            totals.closing_line(),
            "tests: 3 passed, 2 failed, 2 skipped"
        );
    }

    /// A test that returned after `test_skip::skip` passed in libtest's eyes: it is counted
    /// as skipped, named with its reason (issue 34: skips were counted as passed).
    #[test]
    fn logged_skips_move_from_passed_to_skipped() {
        let mut totals = Totals::default();
        totals.add_summary("test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured");
        totals.count_skips("probe::loads\tneeds root\nmain\tno PSI\n");
        assert_eq!(
            totals.closing_line(),
            "tests: 3 passed, 0 failed, 3 skipped"
        );
        assert_eq!(
            totals.skipped_names,
            ["probe::loads: needs root", "main: no PSI"]
        );
    }

    /// A stale fuzz lock file made every clean-clone test run rewrite it (issue 33, finding
    /// 11): `--locked` refuses to update it, so this fails while it is stale.
    #[test]
    fn the_fuzz_crates_lock_file_is_current() {
        let manifest = util::workspace_root().join("tracer-user/fuzz/Cargo.toml");
        let output = util::cargo()
            .args([
                "metadata",
                "--locked",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(&manifest)
            .stdout(Stdio::null())
            .output()
            .expect("run cargo metadata");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    #[test]
    fn only_untracked_files_under_target_are_ignored_by_the_work_tree_check() {
        let status = "?? target/fuzz-seed/x.nsr\n M tracer-user/fuzz/Cargo.lock\n?? stray.txt\n";
        assert_eq!(
            porcelain_lines(status),
            [" M tracer-user/fuzz/Cargo.lock", "?? stray.txt"]
        );
    }
}
