//! `nodescope tune` as a real process on a directory of knob files (what the simulator
//! writes; no kernel support needed): signals put the originals back, an external write stops
//! the tuning of that device, bad contents are refused by name, dry-run writes nothing. The
//! polls between windows are tune_polls.rs; the state files after a SIGKILL, tune_state.rs.
use std::{fs, os::unix::fs::PermissionsExt as _, path::Path, process::Command, time::SystemTime};

mod common;

use common::{
    is_root, send_signal,
    tune::{
        assert_success, events, finish, knobs_moved, stderr_of, stop_and_expect, Fixture, INTERVAL,
        THRESHOLD,
    },
    NODESCOPE,
};

fn restores_originals_on(signal: i32, name: &str) {
    let fixture = Fixture::new(name, "10\n", "1000\n");
    let mut child = fixture.spawn(&[]);
    fixture.wait_for(&mut child, "the first write", knobs_moved);
    send_signal(&child, signal);
    let output = finish(child);
    assert_success(output.status, &output);

    assert_eq!(fixture.knob(THRESHOLD), "10\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    let audit = fixture.audit();
    assert_eq!(events(&audit, "start").len(), 1);
    assert!(!events(&audit, "decision").is_empty());
    let applied: Vec<_> = events(&audit, "decision")
        .into_iter()
        .filter(|line| line["outcome"] == "applied")
        .collect();
    let first = applied.first().expect("at least one applied decision");
    assert_eq!(first["old"]["threshold"], 10);
    assert_eq!(first["new"]["threshold"], 20);
    assert_eq!(first["new"]["interval_ms"], 250);
    assert_eq!(first["signals"]["memory_pressure"], 20.0);
    assert_eq!(first["dry_run"], false);
    assert!(first["time"].is_string() && first["reason"].is_string());
    let restore = events(&audit, "restore");
    assert_eq!(restore.len(), 1);
    assert_eq!(restore[0]["outcome"], "restored");
    assert_eq!(restore[0]["written"]["threshold"], 10);
    assert!(stderr_of(&output).contains(&format!("received {name}")));
}

#[test]
fn sigterm_puts_the_original_values_back() {
    restores_originals_on(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_puts_the_original_values_back() {
    restores_originals_on(libc::SIGINT, "SIGINT");
}

#[test]
fn a_failed_restore_is_reported_audited_and_exits_non_zero() {
    let fixture = Fixture::new("failed-restore", "10\n", "1000\n");
    // One decision a second: the knob is gone before the next window could notice it.
    let mut child = fixture
        .command_every("1", &[])
        .spawn()
        .expect("start nodescope tune");
    fixture.wait_for(&mut child, "the first write", knobs_moved);
    fs::remove_file(fixture.knob_path(THRESHOLD)).unwrap();
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);

    let stderr = stderr_of(&output);
    assert!(!output.status.success(), "{stderr}");
    assert!(!stderr.contains("original values put back"), "{stderr}");
    assert!(
        stderr.contains("putting the original values back FAILED"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("FAILED to put back {THRESHOLD} 10")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let audit = fixture.audit();
    let restore = events(&audit, "restore");
    assert_eq!(restore.len(), 1, "{audit:?}");
    assert_eq!(restore[0]["outcome"], "failed", "{audit:?}");
    assert_eq!(
        fixture.knob(INTERVAL),
        "1000\n",
        "the other knob still went back"
    );
}

#[test]
fn an_external_write_stops_tuning_that_device() {
    let fixture = Fixture::new("external", "10\n", "1000\n");
    let mut child = fixture.spawn(&[]);
    // Let the law reach its most compression (25, 100 ms): after that it holds, so the only
    // writer left is "someone else".
    fixture.wait_for(&mut child, "the most compression", |f| {
        f.knob(THRESHOLD) == "25\n" && f.knob(INTERVAL) == "100\n"
    });
    fixture.write_knob(THRESHOLD, "77\n");
    fixture.wait_for(&mut child, "the external-change audit line", |f| {
        !events(&f.audit(), "external-change").is_empty()
    });
    // With its only device stopped the tuner ends by itself, without touching 77.
    let output = finish(child);
    assert_success(output.status, &output);

    let audit = fixture.audit();
    let change = events(&audit, "external-change");
    assert_eq!(change.len(), 1);
    assert_eq!(change[0]["outcome"], "stopped");
    assert_eq!(change[0]["written"]["threshold"], 77);
    let reason = change[0]["reason"].as_str().unwrap();
    let path = fixture.knob_path(THRESHOLD);
    assert!(
        reason.starts_with(&format!(
            "{} is 77 but we last wrote or read 25",
            path.display()
        )),
        "{reason}"
    );
    assert!(reason.contains("stopped tuning sim0"));
    let after: Vec<_> = audit
        .iter()
        .skip_while(|line| line["event"] != "external-change")
        .skip(1)
        .collect();
    assert!(
        after.iter().all(|line| line["event"] == "restore"),
        "no decision after the external change: {after:?}"
    );
    // The changed knob is left alone; the other one goes back.
    assert_eq!(fixture.knob(THRESHOLD), "77\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    assert!(stderr_of(&output).contains("someone else changed it"));
}

fn refused(fixture: &Fixture, extra: &[&str]) -> String {
    let output = fixture.command(extra).output().expect("run nodescope tune");
    assert!(!output.status.success(), "must refuse to start");
    stderr_of(&output)
}

#[test]
fn bad_knob_contents_are_refused_naming_the_file() {
    let fixture = Fixture::new("out-of-range", "150\n", "1000\n");
    let stderr = refused(&fixture, &[]);
    let path = fixture.knob_path(THRESHOLD);
    assert!(
        stderr.contains(&format!(
            "{} contains \"150\", outside the valid range 0..=100",
            path.display()
        )),
        "{stderr}"
    );

    let fixture = Fixture::new("unparsable", "10\n", "soon\n");
    let stderr = refused(&fixture, &["--dry-run"]);
    let path = fixture.knob_path(INTERVAL);
    assert!(
        stderr.contains(&format!(
            "{} contains \"soon\\n\", which is not a whole number",
            path.display()
        )),
        "{stderr}"
    );

    let fixture = Fixture::new("interval-too-short", "10\n", "50\n");
    let stderr = refused(&fixture, &["--device", "sim0"]);
    assert!(stderr.contains("contains \"50\", outside the valid range 100..=30000"));
    // Nothing was touched.
    assert_eq!(fixture.knob(INTERVAL), "50\n");
}

#[test]
fn missing_knobs_are_refused_as_a_missing_patch() {
    let fixture = Fixture::new("missing", "10\n", "1000\n");
    fs::remove_file(fixture.knob_path(INTERVAL)).unwrap();
    let stderr = refused(&fixture, &[]);
    assert!(stderr.contains("RFC patch"), "{stderr}");
    assert!(stderr.contains("not applied?"), "{stderr}");
    let stderr = refused(&fixture, &["--device", "sim0"]);
    assert!(
        stderr.contains(&format!(
            "{} is missing",
            fixture.knob_path(INTERVAL).display()
        )),
        "{stderr}"
    );
}

#[test]
fn unwritable_knobs_are_refused() {
    let fixture = Fixture::new("unwritable", "10\n", "1000\n");
    let Some(mut command) = command_without_root() else {
        test_skip::skip("cannot run nodescope as nobody here");
        return;
    };
    for path in [
        fixture.root.path().to_path_buf(),
        fixture.knobs_root(),
        fixture.knobs_root().join("sim0"),
    ] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }
    for name in [THRESHOLD, INTERVAL] {
        fs::set_permissions(fixture.knob_path(name), fs::Permissions::from_mode(0o444)).unwrap();
    }
    let output = command
        .arg("tune")
        .arg("--sysfs-root")
        .arg(fixture.knobs_root())
        .args(["--audit", "-"])
        .output()
        .expect("run nodescope tune");
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!(
            "{} is not writable",
            fixture.knob_path(THRESHOLD).display()
        )),
        "{stderr}"
    );
}

/// nodescope as a user that may not write root's files: ourselves when not root, else nobody
/// through setpriv (util-linux). `None` when nobody cannot even start the binary here.
fn command_without_root() -> Option<Command> {
    if !is_root() {
        return Some(Command::new(NODESCOPE));
    }
    let as_nobody = || {
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            NODESCOPE,
        ]);
        command
    };
    let works = as_nobody()
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    works.then(as_nobody)
}

fn modified(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn dry_run_writes_nothing() {
    let fixture = Fixture::new("dry-run", "10\n", "1000\n");
    let before = [THRESHOLD, INTERVAL].map(|name| modified(&fixture.knob_path(name)));
    let mut child = fixture.spawn(&["--dry-run"]);
    // Two windows in which the law wants changes (pressure 20 %: then it is at the most).
    fixture.wait_for(&mut child, "two dry-run decisions", |f| {
        events(&f.audit(), "decision")
            .iter()
            .filter(|line| line["outcome"] == "dry-run")
            .count()
            >= 2
    });
    stop_and_expect(&fixture, child, "10\n", "1000\n");
    let after = [THRESHOLD, INTERVAL].map(|name| modified(&fixture.knob_path(name)));
    assert_eq!(before, after, "mtimes unchanged");
    let audit = fixture.audit();
    let decisions = events(&audit, "decision");
    assert!(decisions.iter().all(|line| line["dry_run"] == true));
    assert_eq!(decisions[0]["new"]["interval_ms"], 250);
    assert_eq!(
        decisions[1]["new"]["interval_ms"], 100,
        "the shadow state moves on"
    );
    assert!(decisions.iter().all(|line| line.get("written").is_none()));
}

#[test]
fn duration_ends_the_run_and_restores() {
    let fixture = Fixture::new("duration", "10\n", "1000\n");
    let output = fixture
        .command(&["--duration", "0.5"])
        .output()
        .expect("run nodescope tune");
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(THRESHOLD), "10\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    let audit = fixture.audit();
    assert!(events(&audit, "decision")
        .iter()
        .any(|line| line["outcome"] == "applied"));
    assert_eq!(events(&audit, "restore")[0]["outcome"], "restored");
}
