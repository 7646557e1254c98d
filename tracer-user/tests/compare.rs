//! `nodescope report --compare OFF ON`: two recordings of the simulator's android-launch
//! workload, compression off (threshold 0) and on (the default 25 %), compared; every figure
//! must be the two reports' own, and the changes their arithmetic.
mod common;

use std::path::Path;

use common::{nodescope, scratch};
use serde_json::Value;

/// Record 40 simulated seconds with the knob files under `knobs` (threshold `threshold`).
fn record(dir: &Path, name: &str, threshold: &str) -> String {
    let knobs = dir.join(format!("knobs-{name}"));
    let device = knobs.join("vdb");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::write(device.join("node_compress_threshold"), threshold).unwrap();
    std::fs::write(device.join("node_compress_interval"), "1000").unwrap();
    let file = dir
        .join(format!("{name}.nsr"))
        .to_str()
        .unwrap()
        .to_string();
    nodescope(&[
        "record",
        "-o",
        &file,
        "--source",
        "sim",
        "--scenario",
        "android-launch",
        "--sysfs-root",
        knobs.to_str().unwrap(),
        "--duration",
        "40",
        "--speed",
        "40",
    ]);
    file
}

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&nodescope(args).stdout).unwrap()
}

fn pair(value: &Value) -> (u64, u64, Option<f64>) {
    (
        value["off"].as_u64().unwrap(),
        value["on"].as_u64().unwrap(),
        value["change_percent"].as_f64(),
    )
}

#[test]
fn compare_prints_the_two_reports_figures_and_their_changes() {
    let dir = scratch("compare");
    let off = record(dir.path(), "off", "0");
    let on = record(dir.path(), "on", "25");
    let off_report = json(&["report", &off, "--json"]);
    let on_report = json(&["report", &on, "--json"]);
    let comparison = json(&["report", "--compare", &off, &on, "--json"]);
    let totals = &comparison["totals"];
    assert_eq!(
        comparison["cache_partial"], false,
        "the simulator starts empty"
    );
    let reads = |r: &Value| {
        r["totals"]["node_reads_demand"].as_u64().unwrap()
            + r["totals"]["node_reads_readahead"].as_u64().unwrap()
    };
    let (reads_off, reads_on, change) = pair(&totals["node_reads"]);
    assert_eq!(
        (reads_off, reads_on),
        (reads(&off_report), reads(&on_report))
    );
    assert!(reads_off > 0, "{comparison}");
    let expected = (reads_on as f64 - reads_off as f64) / reads_off as f64 * 100.0;
    assert!((change.unwrap() - expected).abs() < 1e-9);
    assert_eq!(
        pair(&totals["node_read_bytes"]).0,
        reads_off * 4096,
        "a node read is one 4 KiB block"
    );
    let (restores_off, restores_on, restores_change) = pair(&totals["restores"]);
    assert_eq!(restores_off, 0, "no restores with compression off");
    assert_eq!(
        restores_on,
        on_report["totals"]["restores"].as_u64().unwrap()
    );
    assert!(restores_on > 0, "{comparison}");
    assert_eq!(restores_change, None, "no change from zero");
    let (compressed_off, compressed_on, _) = pair(&totals["compressed_entries"]);
    assert_eq!(compressed_off, 0);
    assert!(compressed_on > 0);
    let cache = |r: &Value, key: &str| r["cache"][key].as_u64().unwrap();
    assert_eq!(
        pair(&totals["attributed_bytes"]).0,
        cache(&off_report, "attributed_bytes")
    );
    assert!(
        pair(&totals["attributed_bytes"]).1 < pair(&totals["attributed_bytes"]).0,
        "compressed entries take less memory: {comparison}"
    );
    assert_eq!(
        pair(&totals["retained_nodes"]).0,
        cache(&off_report, "raw_entries"),
        "with compression off every retained node is raw"
    );
    // Per app: the rows add up to the totals in both runs.
    let apps = comparison["apps"].as_array().unwrap();
    assert!(apps.len() >= 10, "{comparison}");
    let sum = |side: &str, key: &str| -> u64 {
        apps.iter().map(|a| a[key][side].as_u64().unwrap()).sum()
    };
    assert_eq!(sum("off", "node_reads"), reads_off);
    assert_eq!(sum("on", "node_reads"), reads_on);
    assert_eq!(sum("on", "restores"), restores_on);

    let text = String::from_utf8(nodescope(&["report", "--compare", &off, &on]).stdout).unwrap();
    assert!(text.contains("retained nodes"), "{text}");
    assert!(text.contains("com.tencent.mm"), "{text}");
}

#[test]
fn compare_wants_two_recordings_and_names_a_bad_one() {
    let dir = scratch("compare-bad");
    let missing = dir.path().join("missing.nsr");
    let output = std::process::Command::new(common::NODESCOPE)
        .args(["report", "--compare", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let output = std::process::Command::new(common::NODESCOPE)
        .args([
            "report",
            "--compare",
            missing.to_str().unwrap(),
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("missing.nsr"), "{stderr}");
}
