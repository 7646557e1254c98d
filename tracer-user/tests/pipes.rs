//! A reader that goes away (`nodescope stream --json | head -1`) ends the run quietly with
//! status 0, as for any Unix tool: no panic, and what the run owes is still done (the
//! recording is finished).
use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

mod common;

use common::{nodescope, scratch, NODESCOPE};

/// Run nodescope with stdout a pipe, read its first line, close the pipe; its exit.
fn read_one_line_then_close(args: &[&str], knob_root: &Path) -> Output {
    let child = Command::new(NODESCOPE)
        .args(args)
        .args(["--source", "sim", "--speed", "20", "--json"])
        .arg("--sysfs-root")
        .arg(knob_root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodescope");
    let mut child = child;
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The BufReader, and with it our end of the pipe, is gone here.
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nodescope kept running after its reader went away");
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(first.starts_with('{'), "a JSON line: {first:?}");
    child.wait_with_output().unwrap()
}

fn assert_quiet_success(output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[test]
fn stream_json_into_a_closed_pipe_ends_quietly() {
    let scratch = scratch("pipe-stream");
    let output = read_one_line_then_close(&["stream"], &scratch.path().join("knobs"));
    assert_quiet_success(&output);
}

#[test]
fn record_json_into_a_closed_pipe_ends_quietly_and_finishes_the_file() {
    let scratch = scratch("pipe-record");
    let file = scratch.path().join("run.nsr");
    let output = read_one_line_then_close(
        &["record", "-o", file.to_str().unwrap()],
        &scratch.path().join("knobs"),
    );
    assert_quiet_success(&output);
    let report = nodescope(&["report", file.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["complete"], true, "the recording has its footer");
}
