//! `nodescope tune`'s state files, as a real process on a directory of knob files: after a
//! SIGKILL `tune --restore` or the next `tune` puts the true originals back; a second
//! controller on a tuned device is refused; a device that goes away ends its tuning alone; a
//! bad state file is reported while every other device is restored.
use std::{
    fs,
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;

mod common;

use common::{
    send_signal,
    tune::{
        assert_success, events, finish, knobs_moved, stderr_of, Fixture, INTERVAL, PATIENCE,
        THRESHOLD,
    },
    NODESCOPE,
};

/// SIGKILL cannot be caught: the tuned values stay, and so does the state file with the true
/// originals, which the next `tune` (or `tune --restore`) puts back.
fn killed_after_a_write(fixture: &Fixture) {
    let mut child = fixture.spawn(&["--device", "sim0"]);
    fixture.wait_for(&mut child, "the first write", knobs_moved);
    assert_eq!(fixture.state_files().len(), 1, "the originals are on disk");
    send_signal(&child, libc::SIGKILL);
    let status = finish(child).status;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    assert!(knobs_moved(fixture), "SIGKILL left the tuned values");
}

fn assert_recovered(audit: &[Value]) {
    let recover = events(audit, "recover");
    assert_eq!(recover.len(), 1, "{audit:?}");
    assert_eq!(recover[0]["outcome"], "restored");
    assert_eq!(recover[0]["new"]["threshold"], 10);
    assert_eq!(recover[0]["new"]["interval_ms"], 1000);
    assert_eq!(recover[0]["written"]["threshold"], 10);
    assert_eq!(recover[0]["written"]["interval_ms"], 1000);
    assert_ne!(
        recover[0]["old"]["interval_ms"], 1000,
        "it held a tuned value"
    );
    let reason = recover[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("recovered after an unclean stop"),
        "{reason}"
    );
}

#[test]
fn after_sigkill_tune_restore_puts_the_true_originals_back() {
    let fixture = Fixture::new("sigkill-restore", "10\n", "1000\n");
    killed_after_a_write(&fixture);
    fs::remove_file(fixture.audit_path()).unwrap();

    let output = Command::new(NODESCOPE)
        .args(["tune", "--restore", "--state-dir"])
        .arg(fixture.state_dir())
        .arg("--audit")
        .arg(fixture.audit_path())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(THRESHOLD), "10\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    let audit = fixture.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_recovered(&audit);
    assert!(fixture.state_files().is_empty(), "the state file is gone");

    // Nothing left: a second --restore has nothing to do and says so.
    let again = Command::new(NODESCOPE)
        .args(["tune", "--restore", "--state-dir"])
        .arg(fixture.state_dir())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_success(again.status, &again);
    assert!(stderr_of(&again).contains("nothing to restore"));
}

#[test]
fn after_sigkill_the_next_tune_puts_the_true_originals_back_and_keeps_them() {
    let fixture = Fixture::new("sigkill-next", "10\n", "1000\n");
    killed_after_a_write(&fixture);

    let mut child = fixture.spawn(&["--device", "sim0"]);
    fixture.wait_for(&mut child, "the second run's first write", |f| {
        events(&f.audit(), "start").len() == 2 && knobs_moved(f)
    });
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);
    assert_success(output.status, &output);

    assert_eq!(fixture.knob(THRESHOLD), "10\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    let audit = fixture.audit();
    assert_recovered(&audit);
    let starts = events(&audit, "start");
    assert_eq!(starts[1]["old"]["threshold"], 10, "the true originals");
    assert_eq!(starts[1]["old"]["interval_ms"], 1000);
    assert!(fixture.state_files().is_empty(), "a clean exit removes it");
}

#[test]
fn a_second_controller_on_a_tuned_device_is_refused_naming_the_pid() {
    let fixture = Fixture::new("second", "10\n", "1000\n");
    fixture.add_device();
    let mut first = fixture.spawn(&["--device", "sim0"]);
    fixture.wait_for(&mut first, "the first controller's start", |f| {
        !events(&f.audit(), "start").is_empty()
    });

    let second = fixture
        .command(&["--device", "sim0", "--duration", "5"])
        .output()
        .unwrap();
    let stderr = stderr_of(&second);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("sim0 is already tuned by pid {}", first.id())),
        "{stderr}"
    );
    let other = fixture
        .command(&["--device", "sim1", "--duration", "0.3"])
        .output()
        .unwrap();
    assert_success(other.status, &other);

    send_signal(&first, libc::SIGTERM);
    let output = finish(first);
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
}

#[test]
fn a_device_that_goes_away_ends_its_tuning_alone() {
    let fixture = Fixture::new("gone", "10\n", "1000\n");
    fixture.add_device();
    let mut child = fixture.spawn(&[]);
    fixture.wait_for(&mut child, "both devices tuned", |f| {
        let audit = f.audit();
        let applied = |dev: &str| {
            events(&audit, "decision")
                .iter()
                .any(|l| l["device"] == dev && l["outcome"] == "applied")
        };
        applied("sim0") && applied("sim1")
    });
    fs::remove_dir_all(fixture.root.path().join("knobs/sim1")).unwrap();
    fixture.wait_for(&mut child, "the device-gone line", |f| {
        !events(&f.audit(), "device-gone").is_empty()
    });
    // sim0 goes on: a decision for it after sim1 went.
    let decided_after = |f: &Fixture| {
        f.audit()
            .iter()
            .skip_while(|line| line["event"] != "device-gone")
            .any(|line| line["event"] == "decision" && line["device"] == "sim0")
    };
    fixture.wait_for(&mut child, "a decision on sim0 afterwards", decided_after);
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);
    assert_success(output.status, &output);

    let audit = fixture.audit();
    let gone = events(&audit, "device-gone");
    assert_eq!(gone.len(), 1, "{audit:?}");
    assert_eq!(gone[0]["device"], "sim1");
    let sim1_after: Vec<_> = audit
        .iter()
        .skip_while(|line| line["event"] != "device-gone")
        .skip(1)
        .filter(|line| line["device"] == "sim1")
        .collect();
    assert!(
        sim1_after.is_empty(),
        "one line for the gone device: {audit:?}"
    );
    assert_eq!(fixture.knob(THRESHOLD), "10\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    assert!(fixture.state_files().is_empty());
    assert!(!stderr_of(&output).contains("panicked"));
}

/// `tune --restore` on the fixture's state directory, with a deadline.
fn restore_within(fixture: &Fixture, deadline: Duration) -> Output {
    let mut command = Command::new(NODESCOPE);
    command
        .args(["tune", "--restore", "--state-dir"])
        .arg(fixture.state_dir())
        .arg("--audit")
        .arg(fixture.audit_path())
        .env("RUST_LOG", "info");
    common::output_within(&mut command, deadline)
}

/// One bad state file (issue 33, finding 3) is reported by name while every other device is
/// restored, and the run exits non-zero.
#[test]
fn a_bad_state_file_is_reported_and_every_other_device_restored() {
    let fixture = Fixture::new("bad-state", "10\n", "1000\n");
    killed_after_a_write(&fixture);
    let malformed = fixture.state_dir().join("a-malformed.state");
    fs::write(&malformed, "pid 12\ndevice vdz\n").unwrap();
    let directory = fixture.state_dir().join("b-directory.state");
    fs::create_dir(&directory).unwrap();

    let output = restore_within(&fixture, PATIENCE);
    let stderr = stderr_of(&output);
    assert!(!output.status.success(), "{stderr}");
    for bad in [&malformed, &directory] {
        assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
    }
    assert_eq!(fixture.knob(THRESHOLD), "10\n", "{stderr}");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    assert_recovered(&fixture.audit());
    let left: Vec<_> = fixture.state_files();
    assert_eq!(left.len(), 2, "only the bad ones stay: {left:?}");
}
