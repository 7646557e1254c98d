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
