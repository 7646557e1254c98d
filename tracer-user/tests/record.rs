//! Record 60 s of the simulator, then report and replay it: the same totals and the same
//! per-interval lines as the live run (given the simulator's image, its node-type split too);
//! damage keeps the intact prefix.
mod common;

use common::{json_lines, nodescope, scratch, send_signal, NODESCOPE};
use serde_json::Value;

fn record(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Value>) {
    let file = dir.join("run.nsr");
    let root = dir.join("knobs");
    let output = nodescope(&[
        "record",
        "-o",
        file.to_str().unwrap(),
        "--source",
        "sim",
        "--scenario",
        "android-launch",
        "--sysfs-root",
        root.to_str().unwrap(),
        "--duration",
        "60",
        "--speed",
        "20",
        "--json",
    ]);
    (file, json_lines(&output))
}

#[test]
fn report_and_replay_reproduce_the_live_run_and_damage_keeps_the_prefix() {
    let scratch_dir = scratch("record");
    let dir = scratch_dir.path();
    let (file, live) = record(dir);
    assert_eq!(live.len(), 61, "60 one-second windows and the totals");
    let live_totals = &live[60]["totals"];
    assert!(
        live_totals["node_reads_demand"].as_u64().unwrap() > 1000,
        "{live_totals}"
    );
    assert!(live_totals["conversions"].as_u64().unwrap() > 100);

    let report: Value =
        serde_json::from_slice(&nodescope(&["report", file.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert_eq!(
        &report["totals"], live_totals,
        "report totals = live model totals"
    );
    assert_eq!(report["complete"], true);
    assert!(report["time_range"]["seconds"].as_f64().unwrap() >= 60.0);
    let apps = report["apps"].as_array().unwrap();
    assert!(
        apps.iter().any(|a| a["app"]["name"] == "com.tencent.mm"),
        "apps named from packages.list"
    );

    // The simulator splits its node reads by node type from its own disk's blocks: the replay
    // is given that disk's image to do the same.
    let (_, nodes) = sim::scenario::android::nodes(&Default::default()).unwrap();
    let replay = json_lines(&nodescope(&[
        "stream",
        "--source",
        "replay",
        file.to_str().unwrap(),
        "--speed",
        "0",
        "--json",
        "--image",
        nodes.image_path.to_str().unwrap(),
    ]));
    assert!(live[0].get("node_types").is_some(), "{}", live[0]);
    assert_eq!(replay, live[..60], "replay prints the live run's lines");

    // Cut the file in half: report still reads the first half, says it is incomplete.
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.join("cut.nsr");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let output = std::process::Command::new(NODESCOPE)
        .args(["report", cut.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let partial: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(partial["complete"], false);
    let damage = partial["damage"].as_str().unwrap();
    assert!(
        damage.contains("record") && damage.contains("byte offset"),
        "{damage}"
    );
    let partial_reads = partial["totals"]["node_reads_demand"].as_u64().unwrap();
    assert!(
        partial_reads > 0 && partial_reads < live_totals["node_reads_demand"].as_u64().unwrap()
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("the report covers what comes before it")
    );

    // A flipped byte in the middle: the same, never a panic.
    let mut flipped = bytes.clone();
    let middle = bytes.len() / 2;
    flipped[middle] ^= 0xff;
    std::fs::write(&cut, &flipped).unwrap();
    let output = std::process::Command::new(NODESCOPE)
        .args(["report", cut.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Not a recording at all: a clear error, non-zero.
    std::fs::write(&cut, b"hello").unwrap();
    let output = std::process::Command::new(NODESCOPE)
        .args(["report", cut.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a nodescope recording"));
}

/// SIGTERM (and Ctrl-C) end a recording with a complete file: footer written, nothing lost.
#[test]
fn sigterm_finishes_the_recording_cleanly() {
    let scratch_dir = scratch("record-sigterm");
    let dir = scratch_dir.path();
    let file = dir.join("run.nsr");
    let child = std::process::Command::new(NODESCOPE)
        .args([
            "record",
            "-o",
            file.to_str().unwrap(),
            "--source",
            "sim",
            "--speed",
            "10",
        ])
        .args(["--sysfs-root", dir.join("knobs").to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_flushed_node_reads(&file);
    send_signal(&child, libc::SIGTERM);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("SIGTERM"));
    let report: Value =
        serde_json::from_slice(&nodescope(&["report", file.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert_eq!(report["complete"], true, "{report}");
    assert!(report["totals"]["node_reads_demand"].as_u64().unwrap() > 0);
}

#[test]
fn stream_from_the_simulator_prints_one_line_per_window_with_totals_that_add_up() {
    let scratch_dir = scratch("stream-sim");
    let dir = scratch_dir.path();
    let root = dir.join("knobs");
    let lines = json_lines(&nodescope(&[
        "stream",
        "--source",
        "sim",
        "--sysfs-root",
        root.to_str().unwrap(),
        "--json",
        "--window",
        "1",
        "--duration",
        "3",
    ]));
    assert_eq!(lines.len(), 3);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["t"], (i + 1) as f64);
        let processes = line["processes"].as_array().unwrap();
        let sum = |field: &str| {
            processes
                .iter()
                .map(|p| p[field].as_u64().unwrap())
                .sum::<u64>()
        };
        let totals = &line["totals"];
        assert_eq!(
            sum("node_reads_demand"),
            totals["node_reads_demand"].as_u64().unwrap()
        );
        assert_eq!(
            sum("node_reads_readahead"),
            totals["node_reads_readahead"].as_u64().unwrap()
        );
        assert_eq!(sum("restores"), totals["restores"].as_u64().unwrap());
        assert_eq!(sum("conversions"), totals["conversions"].as_u64().unwrap());
    }
    assert!(
        lines[0]["totals"]["node_reads"].as_u64().unwrap() > 0,
        "the simulated phone boots"
    );
}

/// `nodescope record -o <file>` on the phone simulator in `dir`, with `extra` arguments.
/// Wait until the recording being written holds node reads, as `report` reads it: the recorder
/// flushes while it runs (every 2 s), so this comes soon; waiting for it instead of sleeping a
/// fixed time keeps the tests right on a loaded machine, where the simulator may start late.
fn wait_for_flushed_node_reads(file: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // Not `nodescope()`: until the header is on disk, report fails, and that is no error.
        let output = std::process::Command::new(NODESCOPE)
            .args(["report", file.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        let reads = serde_json::from_slice::<Value>(&output.stdout)
            .ok()
            .and_then(|report| report["totals"]["node_reads_demand"].as_u64())
            .unwrap_or(0);
        if reads > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no node reads flushed to {} in 60 s",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

fn record_command(dir: &std::path::Path, file: &str, extra: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(NODESCOPE);
    command
        .current_dir(dir)
        .args(["record", "-o", file, "--source", "sim"])
        .args(["--sysfs-root", dir.join("knobs").to_str().unwrap()])
        .args(extra)
        .stderr(std::process::Stdio::piped());
    command
}

#[test]
fn record_refuses_to_clobber_a_file_or_to_create_one_named_dash() {
    let scratch_dir = scratch("record-clobber");
    let dir = scratch_dir.path();
    let file = dir.join("kept.nsr");
    std::fs::write(&file, "another recording").unwrap();
    let output = record_command(dir, file.to_str().unwrap(), &["--duration", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "another recording");

    let output = record_command(dir, "-", &["--duration", "1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(!dir.join("-").exists(), "no file named \"-\"");

    let output = record_command(dir, file.to_str().unwrap(), &["--duration", "1", "--force"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(
        stderr.contains(&format!("({size} bytes")),
        "the summary gives the file's size, {size}: {stderr}"
    );
}

#[test]
fn a_recording_killed_early_keeps_its_header_and_first_events() {
    let scratch_dir = scratch("record-sigkill");
    let dir = scratch_dir.path();
    let file = dir.join("killed.nsr");
    let mut child = record_command(dir, file.to_str().unwrap(), &[])
        .spawn()
        .unwrap();
    wait_for_flushed_node_reads(&file);
    child.kill().unwrap();
    child.wait().unwrap();
    let report: Value =
        serde_json::from_slice(&nodescope(&["report", file.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert_eq!(report["complete"], false, "no footer after SIGKILL");
    assert!(
        report["totals"]["node_reads"].as_u64().unwrap_or(0) > 0
            || report["totals"]["node_reads_demand"].as_u64().unwrap_or(0) > 0,
        "the flushed events survive SIGKILL: {report}"
    );
}

/// Issue 51: a recording keeps each timed lookup's outcome and time, so its report gives the
/// live run's retrievals back exactly, in `totals` and per app: the apps' lookups and waits
/// add up to the totals, each app's disk reads are its demand node reads, and the text shows
/// the outcome lines and the per-app table.
#[test]
fn report_gives_back_the_live_runs_timed_lookups() {
    let scratch_dir = scratch("lookups");
    let file = scratch_dir.path().join("lookups.nsr");
    let output = nodescope(&[
        "record",
        "-o",
        file.to_str().unwrap(),
        "--source",
        "sim",
        "--lookup-latency",
        "--duration",
        "3",
        "--speed",
        "0",
        "--json",
    ]);
    let live = json_lines(&output);
    let live_totals = &live.last().unwrap()["totals"]["retrievals"];
    assert!(live_totals["count"].as_u64().unwrap() > 0, "{live_totals}");
    let report = nodescope(&["report", "--json", file.to_str().unwrap()]);
    assert!(report.status.success(), "{report:?}");
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["totals"]["retrievals"], *live_totals);
    let (mut lookups, mut wait_ns, mut disk_reads) = (0, 0, 0);
    for app in report["apps"].as_array().unwrap() {
        let total = &app["total"];
        // An app without timed lookups (the simulator's writeback thread) has none listed.
        let Some(outcomes) = total["retrievals"]["by_outcome"].as_array() else {
            assert_eq!(total["node_reads_demand"], 0, "{app}");
            continue;
        };
        let app_disk = outcomes[2]["count"].as_u64().unwrap();
        assert_eq!(
            app_disk,
            total["node_reads_demand"].as_u64().unwrap(),
            "{app}"
        );
        disk_reads += app_disk;
        for h in outcomes {
            lookups += h["count"].as_u64().unwrap();
            wait_ns += h["total_ns"].as_u64().unwrap();
        }
    }
    assert_eq!(lookups, live_totals["count"].as_u64().unwrap());
    assert_eq!(wait_ns, live_totals["wait_ns"].as_u64().unwrap());
    assert_eq!(
        disk_reads,
        live_totals["disk_read"]["count"].as_u64().unwrap()
    );
    let text = nodescope(&["report", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    let header = format!(
        "node lookups timed {}, waited {:.3} ms in all:",
        lookups,
        wait_ns as f64 / 1e6
    );
    assert!(text.contains(&header), "{header} in {text}");
    let disk = format!(
        "  disk_read  {} mean 90.0 us p50 <= 131.1 us p99 <= 131.1 us\n",
        disk_reads
    );
    assert!(text.contains(&disk), "{disk} in {text}");
    assert!(text.contains("  waited     0 mean - us"), "{text}");
    assert!(
        text.contains("APP                               LOOKUPS    WAIT_MS"),
        "{text}"
    );
}
