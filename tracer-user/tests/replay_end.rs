//! A replay ends on its recording's end time (the footer's), as a live run ends on its stop:
//! the last partial window is closed and shown, by `stream --source replay` and by a daemon
//! replaying to its clients. A 0.5 s recording once replayed as no window at all, and a 2.5 s
//! one stopped at 2.0 s, losing the reads, conversions and restores after it.
mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{json_lines, nodescope, scratch, KillOnDrop, NODESCOPE};
use serde_json::Value;

/// The counts compared: every one of them must add up over the windows.
const COUNTS: [&str; 3] = ["node_reads", "conversions", "restores"];

/// `seconds` of the simulator recorded by `nodescope record` into `dir`.
fn record(dir: &Path, seconds: &str) -> PathBuf {
    let file = dir.join(format!("run-{seconds}.nsr"));
    nodescope(&[
        "record",
        "-o",
        file.to_str().unwrap(),
        "--source",
        "sim",
        "--scenario",
        "android-launch",
        "--sysfs-root",
        dir.join("knobs").to_str().unwrap(),
        "--duration",
        seconds,
        "--speed",
        "5",
    ]);
    file
}

/// What `report` counts in the whole recording.
fn report_totals(file: &Path) -> Value {
    let report: Value =
        serde_json::from_slice(&nodescope(&["report", file.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert_eq!(report["complete"], true, "{report}");
    report["totals"].clone()
}

/// The sum of `count` over the window lines.
fn summed(lines: &[Value], count: &str) -> u64 {
    lines
        .iter()
        .map(|line| line["totals"][count].as_u64().unwrap())
        .sum()
}

fn assert_every_event_counted(lines: &[Value], totals: &Value, seconds: f64, what: &str) {
    assert!(
        totals["node_reads"].as_u64().unwrap() > 0,
        "{what}: the simulated phone reads nodes: {totals}"
    );
    for count in COUNTS {
        assert_eq!(
            summed(lines, count),
            totals[count].as_u64().unwrap(),
            "{what}: {count} over the windows {lines:?}"
        );
    }
    let last = lines.last().unwrap_or_else(|| panic!("{what}: no window"));
    assert!(
        (last["t"].as_f64().unwrap() - seconds).abs() < 0.05,
        "{what}: the last window ends at the recording's end: {last}"
    );
}

#[test]
fn stream_replays_end_on_the_recordings_end_with_every_event_counted() {
    let dir = scratch("replay-end");
    for (seconds, windows) in [("0.5", 1), ("2.5", 3)] {
        let file = record(dir.path(), seconds);
        let totals = report_totals(&file);
        let lines = json_lines(&nodescope(&common::replay_json_args(&file)));
        let what = format!("stream, {seconds} s");
        assert_eq!(lines.len(), windows, "{what}: {lines:?}");
        assert_every_event_counted(&lines, &totals, seconds.parse().unwrap(), &what);
    }
}

#[test]
fn a_daemon_replaying_sends_its_clients_the_last_partial_window() {
    let dir = scratch("replay-end-daemon");
    let file = record(dir.path(), "2.5");
    let totals = report_totals(&file);
    // In a directory of its own, which the daemon makes private.
    let socket = dir.path().join("sock/daemon.sock");
    // Replayed at half speed: the client connects well before the first window closes (2 s).
    let _daemon = KillOnDrop(
        Command::new(NODESCOPE)
            .args(["daemon", "--source", "replay", "--speed", "0.5"])
            .arg(&file)
            .arg("--socket")
            .arg(&socket)
            .arg("--log")
            .arg(dir.path().join("daemon.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start the daemon"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "no daemon socket in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The replay takes 5 s; the client's --duration (8 s, and 1 s of grace) outlasts it, and
    // the daemon serves on after it: whatever windows the replay made have come by then.
    let output = common::output_within(
        Command::new(NODESCOPE)
            .args(["stream", "--json", "--duration", "8", "--connect"])
            .arg(&socket),
        Duration::from_secs(60),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_every_event_counted(&lines, &totals, 2.5, "daemon");
}
