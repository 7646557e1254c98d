//! A FIFO (or a device node) where nodescope expects a regular file (issue 33, finding 2):
//! opening a FIFO for reading blocks until a writer comes, past --duration and past SIGTERM.
//! Every command here must end within its deadline, with a clear error naming the file, and
//! leave the knobs and state files as they should be. Each runs under `output_within`, so a
//! regression fails the test instead of hanging it.
use std::{
    fs,
    path::Path,
    process::Command,
    thread,
    time::{Duration, Instant},
};

mod common;

use common::{
    mkfifo, output_within, scratch, send_signal,
    tune::{Fixture, INTERVAL, THRESHOLD},
    KillOnDrop, NODESCOPE,
};

/// A one-shot command that refuses at once: generous for a loaded debug build.
const PROMPTLY: Duration = Duration::from_secs(15);

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_refused(output: &std::process::Output, path: &Path, what: &str) {
    let stderr = stderr(output);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(
        stderr.contains(&format!("not a regular file ({what})")),
        "{stderr}"
    );
}

#[test]
fn a_knob_that_is_a_fifo_is_refused_at_start() {
    let knobs = Fixture::new("fifo-knob", "10\n", "1000\n");
    let knob = knobs.knob_path(THRESHOLD);
    fs::remove_file(&knob).unwrap();
    mkfifo(&knob);
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    assert_refused(&output, &knob, "a FIFO");
    assert!(knobs.state_files().is_empty(), "nothing was claimed");
    assert_eq!(knobs.knob(INTERVAL), "1000\n");
}

#[test]
fn a_knob_replaced_by_a_fifo_while_tuning_ends_the_run_by_its_duration() {
    let knobs = Fixture::new("fifo-knob-later", "10\n", "1000\n");
    let mut command = knobs.command(&["--duration", "3"]);
    let started = Instant::now();
    let child = KillOnDrop(
        command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait for the first write (the state file is on disk before it).
    while knobs.knob(THRESHOLD) == "10\n" {
        assert!(started.elapsed() < PROMPTLY, "no write");
        thread::sleep(Duration::from_millis(20));
    }
    let knob = knobs.knob_path(THRESHOLD);
    fs::remove_file(&knob).unwrap();
    mkfifo(&knob);
    let mut child = child;
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(3 + 5),
            "tune still running past --duration 3"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut text).unwrap();
    assert!(text.contains("not a regular file (a FIFO)"), "{text}");
    assert!(!child.0.wait().unwrap().success(), "{text}");
    // The other knob went back; the FIFO could not, so the originals stay on disk for
    // `tune --restore`.
    assert_eq!(knobs.knob(INTERVAL), "1000\n", "{text}");
    assert_eq!(knobs.state_files().len(), 1, "{text}");
}

#[test]
fn a_psi_fifo_is_refused() {
    let knobs = Fixture::new("fifo-psi", "10\n", "1000\n");
    let psi = knobs.psi();
    fs::remove_file(&psi).unwrap();
    mkfifo(&psi);
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    assert_refused(&output, &psi, "a FIFO");
    assert_eq!(knobs.knob(THRESHOLD), "10\n");
    assert_eq!(knobs.knob(INTERVAL), "1000\n");
    assert!(knobs.state_files().is_empty(), "{}", stderr(&output));
}

#[test]
fn a_fifo_named_like_the_stats_file_ends_tuning_by_sigterm_with_the_knobs_back() {
    let knobs = Fixture::new("fifo-stats", "10\n", "1000\n");
    let stats = knobs.knob_path("nodescope_stats");
    mkfifo(&stats);
    let mut command = knobs.command(&[]);
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    // SIGTERM once tune has met the FIFO (not after a fixed time: a loaded machine may start
    // it late, and a signal before the first step would test nothing).
    let stderr = child.0.stderr.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let line = line.unwrap();
            if line.contains("not a regular file") {
                let _ = lines.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    seen.recv_timeout(PROMPTLY * 4)
        .expect("tune never reported the FIFO");
    send_signal(&child.0, libc::SIGTERM);
    let started = Instant::now();
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "tune ignores SIGTERM"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().unwrap();
    assert!(text.contains(&stats.display().to_string()), "{text}");
    assert!(text.contains("not a regular file (a FIFO)"), "{text}");
    assert_eq!(knobs.knob(THRESHOLD), "10\n", "{text}");
    assert_eq!(knobs.knob(INTERVAL), "1000\n", "{text}");
    assert!(knobs.state_files().is_empty(), "{text}");
}

#[test]
fn a_fifo_named_like_a_state_file_is_reported_by_tune_restore() {
    let knobs = Fixture::new("fifo-state", "10\n", "1000\n");
    fs::create_dir(knobs.state_dir()).unwrap();
    fs::set_permissions(
        knobs.state_dir(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let fifo = knobs.state_dir().join("sys-fs-f2fs-vdq.state");
    mkfifo(&fifo);
    let mut command = Command::new(NODESCOPE);
    command
        .args(["tune", "--restore", "--state-dir"])
        .arg(knobs.state_dir());
    let output = output_within(&mut command, PROMPTLY);
    assert_refused(&output, &fifo, "a FIFO");
}

#[test]
fn an_image_that_is_a_fifo_is_refused() {
    let scratch = scratch("fifo-image");
    let image = scratch.path().join("image");
    mkfifo(&image);
    let mut command = Command::new(NODESCOPE);
    command
        .args(["whatif", "--compressors", "--image"])
        .arg(&image);
    let output = output_within(&mut command, PROMPTLY);
    assert_refused(&output, &image, "a FIFO");
}

#[test]
fn kallsyms_that_are_a_fifo_or_a_device_are_refused() {
    let scratch = scratch("fifo-kallsyms");
    let fifo = scratch.path().join("kallsyms");
    mkfifo(&fifo);
    for (path, what) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
    ] {
        let mut command = Command::new(NODESCOPE);
        command
            .args(["probe", "--discover", "--no-btf", "--kallsyms"])
            .arg(path);
        let output = output_within(&mut command, PROMPTLY);
        assert_refused(&output, path, what);
    }
}
