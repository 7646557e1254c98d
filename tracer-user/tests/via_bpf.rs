//! The RFC probe programs, proven end to end without a patched kernel: the vm-replay scenario
//! observed only through uprobes on the simulator's hooks must count exactly what the
//! simulator emitted, for every event kind, with nothing lost.
mod common;

use std::process::Command;

use common::{is_root, NODESCOPE};

use serde_json::Value;

#[test]
fn vm_replay_seen_through_ebpf_matches_the_simulator_for_every_kind() {
    if !is_root() {
        test_skip::skip("uprobes need root");
        return;
    }
    let output = Command::new(NODESCOPE)
        .args(["sim", "--scenario", "vm-replay", "--via-bpf", "--json"])
        .output()
        .expect("run nodescope sim --via-bpf");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["drops"], 0);
    assert_eq!(
        report["probes"]["failed"].as_array().unwrap().len(),
        0,
        "{report:#}"
    );
    let via_bpf = report["via_bpf"].as_object().unwrap();
    assert_eq!(via_bpf.len(), 11, "every probed kind is reported");
    for (kind, counts) in via_bpf {
        assert_eq!(counts["bpf"], counts["sim"], "{kind}: {counts}");
        assert_eq!(counts["kernel"], counts["sim"], "{kind}: {counts}");
    }
    // The scenario itself: the RFC's equal-memory restores went through the restore probe.
    let restores = report["equal_memory"]["on"]["restores"].as_u64().unwrap();
    assert!(via_bpf["restore"]["bpf"].as_u64().unwrap() >= restores);
    for busy in [
        "node_read",
        "convert",
        "reclaim",
        "second_chance",
        "restore",
        "insert",
    ] {
        assert!(
            via_bpf[busy]["bpf"].as_u64().unwrap() > 1000,
            "{busy} barely exercised"
        );
    }
}
