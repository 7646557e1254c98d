//! Record 20 s of the simulator, export it as a Perfetto trace and check the trace with
//! Perfetto's own proto classes (tests/data/check_perfetto.py, the PyPI `perfetto` package that
//! `cargo xtask setup` installs): descriptors for every track, time never going backwards, and
//! per-app node reads and restores equal to `nodescope report --json`'s.
mod common;

use std::process::Command;

use common::{nodescope, scratch};

const CHECKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check_perfetto.py");

#[test]
fn perfetto_trace_parses_with_perfettos_protos_and_matches_the_report() {
    let scratch_dir = scratch("perfetto");
    let dir = scratch_dir.path();
    let recording = dir.join("run.nsr");
    let trace = dir.join("run.perfetto-trace");
    let live_trace = dir.join("live.perfetto-trace");
    let report = dir.join("report.json");
    let knobs = dir.join("knobs");
    nodescope(&[
        "record",
        "-o",
        recording.to_str().unwrap(),
        "--source",
        "sim",
        "--scenario",
        "android-launch",
        "--sysfs-root",
        knobs.to_str().unwrap(),
        "--duration",
        "20",
        "--speed",
        "20",
        "--lookup-latency",
        "--perfetto",
        live_trace.to_str().unwrap(),
    ]);
    nodescope(&[
        "export",
        "--perfetto",
        recording.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read(&live_trace).unwrap(),
        std::fs::read(&trace).unwrap(),
        "record --perfetto writes the trace export writes from the same recording"
    );
    let report_json = nodescope(&["report", recording.to_str().unwrap(), "--json"]).stdout;
    std::fs::write(&report, report_json).unwrap();

    let check = Command::new("python3")
        .args([CHECKER, trace.to_str().unwrap(), report.to_str().unwrap()])
        .output()
        .expect("run python3 (cargo xtask setup installs the perfetto package it needs)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        check.status.success(),
        "check_perfetto.py failed (is the perfetto Python package installed? cargo xtask \
         setup):\n{said}"
    );
    assert!(said.starts_with("ok: "), "{said}");
    let apps: u32 = said
        .trim()
        .split(", ")
        .find_map(|part| part.strip_suffix(" apps match the report"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(apps >= 5, "the simulator's apps are in the trace: {said}");
    // Issue 51: the recording's timed lookups are on the app tracks, summing to the report's.
    let lookups: u64 = said
        .split(", ")
        .find_map(|part| part.strip_suffix(" timed lookups"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(lookups > 0, "{said}");
}

#[test]
fn export_of_a_missing_recording_says_which_file() {
    let scratch_dir = scratch("perfetto-missing");
    let missing = scratch_dir.path().join("nope.nsr");
    let output = Command::new(common::NODESCOPE)
        .args(["export", "--perfetto", missing.to_str().unwrap(), "-o"])
        .arg(scratch_dir.path().join("out.perfetto-trace"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nope.nsr"), "{stderr}");
}
