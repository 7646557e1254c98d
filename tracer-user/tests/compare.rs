//! `nodescope report --compare OFF ON`: two recordings of the simulator's android-launch
//! workload, compression off (threshold 0) and on (the default 25 %), compared; every figure
//! must be the two reports' own, and the changes their arithmetic.
mod common;

use std::path::Path;

use common::{nodescope, scratch};
use serde_json::Value;

/// Record 40 simulated seconds with the knob files under `knobs` (threshold `threshold`).
fn record(dir: &Path, name: &str, threshold: &str) -> String {
    record_with(dir, name, threshold, &[])
}

/// [`record`] with `extra` arguments.
fn record_with(dir: &Path, name: &str, threshold: &str, extra: &[&str]) -> String {
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
    let mut args = vec![
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
    ];
    args.extend_from_slice(extra);
    nodescope(&args);
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

/// Issue 51: recordings with timed lookups get the cover letter's latency rows: the lookups and
/// their wait (the reports' own), the median lookup (off: a simulated raw hit or disk read,
/// `sim::costs`), the median node, and the paired medians, per app recomputed here from the
/// apps' rows.
#[test]
fn compare_has_latency_rows_from_timed_lookups() {
    let dir = scratch("compare-latency");
    let timed = ["--lookup-latency"];
    let off = record_with(dir.path(), "off", "0", &timed);
    let on = record_with(dir.path(), "on", "25", &timed);
    let off_report = json(&["report", &off, "--json"]);
    let on_report = json(&["report", &on, "--json"]);
    let comparison = json(&["report", "--compare", &off, &on, "--json"]);
    let latency = &comparison["latency"];
    let retrievals = |r: &Value, key: &str| r["totals"]["retrievals"][key].as_u64().unwrap();
    let (lookups_off, lookups_on, _) = pair(&latency["lookups"]);
    assert_eq!(
        (lookups_off, lookups_on),
        (
            retrievals(&off_report, "count"),
            retrievals(&on_report, "count")
        )
    );
    assert!(lookups_off > 0 && lookups_on > 0, "{latency}");
    let (wait_off, wait_on, wait_change) = pair(&latency["wait_ns"]);
    assert_eq!(
        (wait_off, wait_on),
        (
            retrievals(&off_report, "wait_ns"),
            retrievals(&on_report, "wait_ns")
        )
    );
    let expected = (wait_on as f64 - wait_off as f64) / wait_off as f64 * 100.0;
    assert!((wait_change.unwrap() - expected).abs() < 1e-9);
    let median_off = pair(&latency["median_lookup_ns"]).0;
    assert!(
        [sim::costs::RAW_HIT_NS, sim::costs::NODE_READ_NS].contains(&median_off),
        "compression off: every lookup a raw hit or a disk read: {latency}"
    );
    assert!(latency["node_pairs"].as_u64().unwrap() > 0, "{latency}");
    assert!(latency["paired_node_change_percent"].as_f64().is_some());
    // Per app: the rows' waits are the reports', and their paired median is the latency's.
    let apps = comparison["apps"].as_array().unwrap();
    let mut changes: Vec<f64> = apps
        .iter()
        .filter_map(|a| {
            let (off, on, _) = pair(&a["wait_ns"]);
            let in_both = off > 0 && pair(&a["lookups"]).1 > 0;
            in_both.then(|| (on as f64 - off as f64) / off as f64 * 100.0)
        })
        .collect();
    changes.sort_by(f64::total_cmp);
    let n = changes.len();
    assert!(n > 0);
    let median = if n % 2 == 1 {
        changes[n / 2]
    } else {
        (changes[n / 2 - 1] + changes[n / 2]) / 2.0
    };
    assert_eq!(latency["app_pairs"].as_u64().unwrap(), n as u64);
    let got = latency["paired_app_change_percent"].as_f64().unwrap();
    assert!((got - median).abs() < 1e-9, "{got} vs {median}");
    let sum = |side: &str| -> u64 {
        apps.iter()
            .map(|a| a["wait_ns"][side].as_u64().unwrap())
            .sum()
    };
    assert_eq!((sum("off"), sum("on")), (wait_off, wait_on));
    let text = String::from_utf8(nodescope(&["report", "--compare", &off, &on]).stdout).unwrap();
    for needle in [
        "node retrieval time (timed lookups)",
        "median lookup ns",
        "paired median change     per node ",
        "WAIT MS OFF",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    // Without timed lookups: no latency rows.
    let plain = record(dir.path(), "plain", "0");
    let untimed = json(&["report", "--compare", &plain, &plain, "--json"]);
    assert_eq!(untimed["latency"], Value::Null);
}

/// Timed lookups in one run only: no figure of them is compared. The untimed side is null
/// (n/a in the text), so is every change, and the reason is given; no app's wait is paired
/// with an untimed app's 0 (which read as -100 %).
#[test]
fn compare_with_timed_lookups_on_one_side_compares_no_latency() {
    let dir = scratch("compare-one-timed");
    let timed = record_with(dir.path(), "timed", "0", &["--lookup-latency"]);
    let plain = record(dir.path(), "plain", "25");
    for (off, on, side, missing) in [(&timed, &plain, "on", "off"), (&plain, &timed, "off", "on")] {
        let comparison = json(&["report", "--compare", off, on, "--json"]);
        let latency = &comparison["latency"];
        for figure in ["lookups", "wait_ns", "median_lookup_ns", "median_node_ns"] {
            let pair = &latency[figure];
            assert_eq!(pair[side], Value::Null, "{figure}: {latency}");
            assert!(pair[missing].as_u64().unwrap() > 0, "{figure}: {latency}");
            assert_eq!(pair["change_percent"], Value::Null, "{figure}: {latency}");
            let why = pair["not_compared"].as_str().unwrap();
            assert!(
                why.contains(&format!("the {side} run has no timed lookups")),
                "{why}"
            );
        }
        assert_eq!(latency["app_pairs"], 0, "{latency}");
        assert_eq!(latency["paired_app_change_percent"], Value::Null);
        assert_eq!(latency["node_pairs"], 0, "{latency}");
        for app in comparison["apps"].as_array().unwrap() {
            assert_eq!(app["wait_ns"][side], Value::Null, "{app}");
            assert_eq!(app["wait_ns"]["change_percent"], Value::Null, "{app}");
        }
        let text = String::from_utf8(nodescope(&["report", "--compare", off, on]).stdout).unwrap();
        let latency_text = &text[text.find("node retrieval time").unwrap()..];
        assert!(!latency_text.contains("-100.00%"), "{latency_text}");
        let median = text
            .lines()
            .find(|line| line.starts_with("median lookup ns"))
            .unwrap();
        assert!(median.trim_end().ends_with("n/a"), "{median}");
        assert!(
            text.contains(&format!("the {side} run has no timed lookups")),
            "{text}"
        );
    }
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
