//! `nodescope sim --scenario vm-replay --json`: the real binary reproduces the RFC's VM figures
//! from the model's mechanisms: memory reduction, retained-node ratio and node reads each within
//! a tolerance of the RFC's published value, and the identities between counts exactly.
use std::process::Command;

use serde_json::Value;

mod common;

use common::NODESCOPE;

fn sim_json(args: &[&str]) -> Value {
    let output = Command::new(NODESCOPE)
        .arg("sim")
        .args(args)
        .output()
        .expect("run nodescope sim");
    assert!(
        output.status.success(),
        "nodescope sim {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints one JSON object")
}

fn u(value: &Value, path: &str) -> u64 {
    path.split('.')
        .fold(value, |v, key| &v[key])
        .as_u64()
        .unwrap_or_else(|| panic!("{path} is not an unsigned integer in {value:#}"))
}

fn f(value: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(value, |v, key| &v[key])
        .as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {value:#}"))
}

fn within(value: f64, target: f64, tolerance: f64, what: &str) {
    assert!(
        (value - target).abs() <= tolerance,
        "{what} = {value}, expected {target} +- {tolerance}"
    );
}

#[test]
fn vm_replay_reproduces_the_rfc_figures() {
    let r = sim_json(&["--scenario", "vm-replay", "--json"]);

    for side in ["off", "on"] {
        assert!(u(&r, &format!("equal_nodes.{side}.bytes")) > 0);
        assert_eq!(
            u(&r, &format!("equal_nodes.{side}.nodes")),
            16_676,
            "every created node is cached"
        );
        for key in ["bytes", "nodes", "node_reads", "restores", "retrievals"] {
            u(&r, &format!("equal_memory.{side}.{key}"));
        }
    }
    for key in ["b256", "b512", "b1024"] {
        u(&r, &format!("slots.{key}"));
    }

    within(
        f(&r, "equal_nodes.memory_reduction"),
        0.914,
        0.03,
        "memory reduction",
    );
    within(
        f(&r, "equal_memory.retained_ratio"),
        12.1,
        12.1 * 0.15,
        "retained-node ratio",
    );
    within(
        u(&r, "equal_memory.off.node_reads") as f64,
        15_668.0,
        15_668.0 * 0.03,
        "node reads off",
    );
    within(
        u(&r, "equal_memory.on.node_reads") as f64,
        7_209.0,
        7_209.0 * 0.10,
        "node reads on",
    );
    let reads = |side: &str| u(&r, &format!("equal_memory.{side}.node_reads")) as f64;
    within(
        f(&r, "equal_memory.read_reduction"),
        1.0 - reads("on") / reads("off"),
        1e-9,
        "read reduction",
    );

    for side in ["off", "on"] {
        let restores = u(&r, &format!("equal_memory.{side}.restores"));
        let node_reads = u(&r, &format!("equal_memory.{side}.node_reads"));
        let retrievals = u(&r, &format!("equal_memory.{side}.retrievals"));
        assert_eq!(
            restores + node_reads,
            retrievals,
            "{side}: restores + node reads == retrievals"
        );
    }
    assert_eq!(u(&r, "equal_memory.off.restores"), 0);
    // As in the RFC: with compression on no replay file was raw at replay time, so every one of
    // the 16,384 files was a restore or a read.
    assert_eq!(u(&r, "equal_memory.on.retrievals"), 16_384);
    assert!(
        u(&r, "equal_memory.on.bytes") <= 3 << 20 && u(&r, "equal_memory.off.bytes") <= 3 << 20
    );
}

#[test]
fn the_table_and_the_errors_are_readable() {
    let output = Command::new(NODESCOPE)
        .args(["sim", "--scenario", "vm-replay"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let table = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "Equal node count",
        "Equal memory",
        "retained-node ratio",
        "restores",
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }

    let output = Command::new(NODESCOPE)
        .args(["sim", "--scenario", "nope"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown scenario \"nope\"; known: vm-replay, android-launch"),
        "{stderr}"
    );

    let output = Command::new(NODESCOPE)
        .args(["sim", "--scenario", "vm-replay", "--threshold", "101"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--threshold \"101\": EINVAL: outside 0..=100"),
        "{stderr}"
    );
}

#[test]
fn static_knobs_give_per_phase_totals() {
    let r = sim_json(&[
        "--scenario",
        "vm-replay",
        "--threshold",
        "10",
        "--interval",
        "500",
        "--json",
    ]);
    assert_eq!(u(&r, "knobs.threshold"), 10);
    assert_eq!(u(&r, "knobs.interval_ms"), 500);
    let phases: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["populate", "settle", "pressure", "replay"]);
    assert_eq!(r["phases"][3]["totals"]["lookups"], 16_384);
    assert!(u(&r, "whole.conversions") > 0);
    assert!(!r["memory"].as_array().unwrap().is_empty());
}
