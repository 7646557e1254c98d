//! `nodescope whatif`'s grid axes on the vm-replay recording (compression off, its access
//! trace written with the project's recorder) and the scenario's real image: slot sets, reclaim
//! weights, compressors, the tables' Pareto marks against the JSON, and `--device` on a
//! read-only loop device over the same image.
use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};

use nodescope::record::{writer::Writer, Header};
use serde_json::Value;
use sim::cache::PayloadSizes;

mod common;

use common::{is_root, scratch, NODESCOPE};

struct Fixture {
    _dir: tempfile::TempDir,
    recording: PathBuf,
    image: PathBuf,
    scenario_on: sim::whatif::BudgetCounts,
}

/// The vm-replay recording (made once per test binary) and the scenario's image.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let check = sim::whatif::vm_replay_check(1).unwrap();
        let dir = scratch("whatif-axes");
        let recording = dir.path().join("off.nsrec");
        let header = Header {
            source: "sim".into(),
            window_ns: 1_000_000_000,
            ..Header::default()
        };
        let file = BufWriter::new(File::create(&recording).unwrap());
        let mut writer = Writer::new(file, &header).unwrap();
        for event in &check.events {
            writer.event(event).unwrap();
        }
        writer.finish(check.events.last().unwrap().ts_ns).unwrap();
        let nodes = sim::scenario::vm_replay::rfc_nodes().unwrap();
        Fixture {
            _dir: dir,
            recording,
            image: nodes.image_path.clone(),
            scenario_on: check.scenario_on,
        }
    })
}

fn whatif(source: &[&str], args: &[&str]) -> Output {
    let f = fixture();
    Command::new(NODESCOPE)
        .arg("whatif")
        .arg(&f.recording)
        .args(source)
        .args(args)
        .output()
        .unwrap()
}

fn image_arg() -> [&'static str; 2] {
    ["--image", fixture().image.to_str().unwrap()]
}

fn points(args: &[&str]) -> Vec<Value> {
    let mut all = args.to_vec();
    all.push("--json");
    let out = whatif(&image_arg(), &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn on_points(points: &[Value]) -> Vec<&Value> {
    points.iter().filter(|p| p["compression"] == true).collect()
}

fn counts(p: &Value) -> (u64, u64, u64) {
    let o = &p["outcome"];
    (
        o["node_reads"].as_u64().unwrap(),
        o["restores"].as_u64().unwrap(),
        o["retained_nodes"].as_u64().unwrap(),
    )
}

#[test]
fn the_rfcs_slots_weights_and_lz4_spelled_out_give_the_on_scenario_exactly() {
    let want = fixture().scenario_on;
    let want = (want.node_reads, want.restores, want.retained_nodes);
    let explicit = points(&[
        "--budget",
        "3MiB",
        "--slots",
        "256/512/1024",
        "--weights",
        "16:1:2:4",
        "--compressor",
        "lz4",
    ]);
    let on = on_points(&explicit);
    assert_eq!(on.len(), 1);
    assert_eq!(counts(on[0]), want);
    let settings = &on[0]["settings"];
    assert_eq!(settings["cache"]["slots"], "256/512/1024");
    assert_eq!(settings["cache"]["weights"], "16:1:2:4");
    assert_eq!(on[0]["compressor"], "lz4");
    // The memory rule is 16:1:2:4 for the RFC's set: the default run is the same point.
    let default = points(&["--budget", "3MiB"]);
    assert_eq!(default, explicit);
}

#[test]
fn a_slot_set_smaller_than_every_compressed_node_retains_no_compressed_node() {
    let nodes = sim::scenario::vm_replay::rfc_nodes().unwrap();
    let sizes = PayloadSizes::lz4(&nodes);
    let smallest = nodes
        .nids()
        .iter()
        .map(|nid| sizes.get(*nid).unwrap())
        .min()
        .unwrap();
    let slot = (smallest - 1) / 64 * 64;
    assert!(slot >= 64, "a node compresses to {smallest} bytes");
    let slot_arg = slot.to_string();
    let points = points(&["--budget", "3MiB", "--slots", &slot_arg]);
    let on = on_points(&points);
    assert_eq!(on.len(), 1);
    let o = &on[0]["outcome"];
    assert_eq!(o["conversions"], 0);
    assert_eq!(o["total_restores"], 0);
    assert_eq!(o["reclaimed_compressed"], 0);
    assert_eq!(
        on[0]["settings"]["cache"]["weights"],
        format!("64:{}", slot / 64)
    );
}

#[test]
fn raw_only_and_slot_only_weights_reclaim_different_queues() {
    let points = points(&["--budget", "3MiB", "--weights", "1:0:0:0,0:1:1:1"]);
    let on = on_points(&points);
    assert_eq!(on.len(), 2);
    let by = |w: &str| {
        on.iter()
            .find(|p| p["settings"]["cache"]["weights"] == w)
            .unwrap()["outcome"]
            .clone()
    };
    let raw_only = by("1:0:0:0");
    assert_eq!(raw_only["reclaimed_compressed"], 0);
    assert!(raw_only["reclaimed_raw"].as_u64().unwrap() > 0);
    let slot_only = by("0:1:1:1");
    assert_eq!(slot_only["reclaimed_raw"], 0);
    assert!(slot_only["reclaimed_compressed"].as_u64().unwrap() > 0);
}

/// Starred rows of each table in the text: (title, budget cell, node reads, retained bytes).
fn starred(text: &str) -> Vec<(String, String, u64, u64)> {
    let mut title = String::new();
    let mut out = Vec::new();
    // The columns by their header (a table may end with `wait ms`, issue 51).
    let (mut reads_at, mut bytes_at) = (0, 0);
    for line in text.lines() {
        if line.starts_with('(') || line.starts_with("compressor:") {
            title = line.to_string();
        }
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if let Some(at) = cells.iter().position(|c| *c == "node reads") {
            reads_at = at;
            bytes_at = cells.iter().position(|c| *c == "retained bytes").unwrap();
        }
        if cells.last() == Some(&"*") {
            out.push((
                title.clone(),
                cells[0].to_string(),
                cells[reads_at].parse().unwrap(),
                cells[bytes_at].parse().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn each_table_stars_the_points_the_json_puts_on_its_front() {
    let args = [
        "--budget",
        "1MiB,3MiB",
        "--threshold",
        "10,25",
        "--slots",
        "256/512/1024,128/256/512/1024,512/1024/2048",
        "--weights",
        "memory,1:1:1:1",
        "--compressor",
        "lz4,zstd1",
    ];
    let out = whatif(&image_arg(), &args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for title in [
        "(a) are 256/512/1024",
        "(b) are fixed reclaim",
        "(c) are threshold",
        "compressor:",
    ] {
        assert!(text.contains(title), "{title} missing:\n{text}");
    }
    let points = points(&args);
    // 2 budgets x (off + 3 slot sets (1:1:1:1 fits only the 3-slot ones: 2 weights for two of
    // them, 1 for the 4-slot set) x 2 compressors x 2 thresholds).
    assert_eq!(points.len(), 2 * (1 + (2 + 1 + 2) * 2 * 2));
    for (question, title) in [
        ("slots", "(a)"),
        ("weights", "(b)"),
        ("threshold_interval", "(c)"),
        ("compressor", "compressor:"),
    ] {
        let mut from_json: Vec<(String, u64, u64)> = points
            .iter()
            .filter(|p| {
                p["pareto"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|q| q == question)
            })
            .map(|p| {
                let budget = p["settings"]["budget_bytes"].as_u64().unwrap() >> 20;
                (
                    format!("{budget} MiB"),
                    p["outcome"]["node_reads"].as_u64().unwrap(),
                    p["outcome"]["retained_bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        let mut from_text: Vec<(String, u64, u64)> = starred(&text)
            .into_iter()
            .filter(|(t, ..)| t.starts_with(title))
            .map(|(_, budget, reads, bytes)| (budget, reads, bytes))
            .collect();
        from_json.sort();
        from_text.sort();
        assert!(!from_json.is_empty(), "{question}: no Pareto point");
        assert_eq!(from_json, from_text, "{question}");
    }
}

#[test]
fn bad_axis_values_are_one_clear_line() {
    for (args, expect) in [
        (vec!["--slots", "512/256"], "slot sizes must increase"),
        (vec!["--weights", "1:1"], "fit no slot set"),
        (vec!["--weights", "0:0:0:0"], "all 0"),
        (vec!["--compressor", "gzip"], "not a compressor"),
        (vec!["--threshold", "0"], "1 to 100 percent"),
        (vec!["--device", "/dev/null"], "not both"),
    ] {
        let out = whatif(&image_arg(), &args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// A read-only loop device over `file`, detached when dropped.
struct Loop(String);

impl Loop {
    fn attach(file: &Path) -> Loop {
        let out = Command::new("losetup")
            .args(["--find", "--show", "--read-only"])
            .arg(file)
            .output()
            .expect("losetup runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn a_device_gives_exactly_the_images_output_and_a_non_f2fs_one_is_one_line() {
    if !is_root() {
        test_skip::skip("loop devices need root");
        return;
    }
    let f = fixture();
    let args = ["--budget", "1MiB,3MiB", "--threshold", "10,25"];
    let from_image = whatif(&image_arg(), &args);
    assert!(from_image.status.success());
    let device = Loop::attach(&f.image);
    let from_device = whatif(&["--device", &device.0], &args);
    assert!(
        from_device.status.success(),
        "{}",
        String::from_utf8_lossy(&from_device.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&from_device.stdout),
        String::from_utf8_lossy(&from_image.stdout)
    );

    let dir = scratch("whatif-zeros");
    let zeros = dir.path().join("zeros.img");
    File::create(&zeros).unwrap().set_len(16 << 20).unwrap();
    let not_f2fs = Loop::attach(&zeros);
    let out = whatif(&["--device", &not_f2fs.0], &args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a readable F2FS device"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    let out = whatif(&["--device", "/dev/nodescope-no-such-device"], &args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/dev/nodescope-no-such-device"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}
