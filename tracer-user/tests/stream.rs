//! `nodescope stream` on the machine running the tests. Its real work is checked end to end in
//! QEMU (`cargo xtask vm-test`); here: what it says on a kernel that cannot do it.
use std::process::Command;

mod common;

use common::NODESCOPE;

#[test]
fn stream_without_f2fs_names_what_is_missing_without_a_backtrace() {
    // The binary's own check: it refuses with "has no F2FS" exactly when this is false.
    if nodescope::system::has_f2fs() {
        test_skip::skip("this kernel has F2FS");
        return;
    }
    let output = Command::new(NODESCOPE)
        .args(["stream", "--json", "--duration", "1"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run nodescope stream");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "no JSON line without a source");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no F2FS"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}

#[test]
fn stream_plan_says_what_each_part_would_use() {
    let output = Command::new(NODESCOPE)
        .args(["stream", "--plan"])
        .output()
        .expect("run nodescope stream --plan");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for part in ["node_reads", "node_writes", "checkpoints"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(part)),
            "{part} missing:\n{stdout}"
        );
    }
    if !nodescope::system::has_f2fs() {
        assert!(stdout.contains("node_reads   not available"), "{stdout}");
    }
}

/// Issue 52, item 10: `--duration` counted windows, so `--window 10 --duration 2` ran 10 s and
/// printed a 10 s window. It ends the run in the source's clock now, whatever the window: the
/// window it cuts short is the last line, 2 s long; in real time the run takes about 2 s.
#[test]
fn stream_duration_bounds_the_run_whatever_the_window() {
    let lines = |speed: &str| {
        let started = std::time::Instant::now();
        let output = Command::new(NODESCOPE)
            .args(["stream", "--json", "--source", "sim", "--speed", speed])
            .args(["--window", "10", "--duration", "2"])
            .env("XDG_RUNTIME_DIR", common::scratch("duration").path())
            .output()
            .expect("run nodescope stream");
        assert!(output.status.success(), "{output:?}");
        (common::json_lines(&output), started.elapsed())
    };
    let (fast, _) = lines("0");
    assert_eq!(fast.len(), 1, "{fast:?}");
    assert_eq!(fast[0]["t"], 2.0);
    assert_eq!(fast[0]["window_s"], 2.0);
    assert!(fast[0]["totals"]["node_reads"].as_u64().unwrap() > 0);
    // In real time: --duration + 1 s of start-up and finishing, far below the window's 10 s.
    let (real, wall) = lines("1");
    assert!(wall < std::time::Duration::from_secs(2 + 4), "{wall:?}");
    assert_eq!(real.last().unwrap()["t"], 2.0, "{real:?}");
}
