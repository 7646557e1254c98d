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

/// Issue 52, item 3: `--audit FILE` is opened under the file policy. A FIFO without a reader
/// blocked the open forever (deaf to SIGTERM, holding the device's lock), in `tune` and in
/// `daemon --tune`; a planted symlink made root append to its target. Both are refused before
/// any device is claimed.
#[test]
fn an_audit_log_that_is_a_fifo_or_a_symlink_is_refused_before_anything_is_claimed() {
    let knobs = Fixture::new("fifo-audit", "10\n", "1000\n");
    let audit = knobs.audit_path();
    mkfifo(&audit);
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    assert_refused(&output, &audit, "a FIFO");
    assert!(knobs.state_files().is_empty(), "{}", stderr(&output));
    assert_eq!(knobs.knob(THRESHOLD), "10\n");

    let mut daemon = Command::new(NODESCOPE);
    daemon
        .args(["daemon", "--source", "sim", "--tune", "--audit"])
        .arg(&audit)
        .arg("--state-dir")
        .arg(knobs.state_dir())
        .arg("--socket")
        .arg(knobs.root.path().join("daemon/daemon.sock"));
    let output = output_within(&mut daemon, PROMPTLY);
    assert_refused(&output, &audit, "a FIFO");

    fs::remove_file(&audit).unwrap();
    let target = knobs.root.path().join("precious");
    fs::write(&target, "precious\n").unwrap();
    std::os::unix::fs::symlink(&target, &audit).unwrap();
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    let text = stderr(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains(&format!("opening the audit log {}", audit.display())),
        "{text}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
    assert!(knobs.state_files().is_empty(), "{text}");
    assert_eq!(knobs.knob(THRESHOLD), "10\n");
}

/// Make a character device node `major:minor` at `path` (root only).
fn mknod_char(path: &Path, major: u32, minor: u32) {
    use std::os::unix::ffi::OsStrExt as _;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
    let made = unsafe {
        libc::mknod(
            name.as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(major, minor),
        )
    };
    assert_eq!(made, 0, "mknod {}", path.display());
}

/// `--audit /dev/null` was refused as not a regular file; operators use it to keep no log.
/// The null device is told by its number, not its path: a node 1:3 under another name is
/// taken (and the run tunes and restores as usual), a node 1:5 (`/dev/zero`) where the log
/// should be is refused with an error that names `/dev/null` as the alternative.
#[test]
fn the_null_device_is_an_audit_log_and_other_devices_are_refused() {
    if !common::is_root() {
        test_skip::skip("making device nodes needs root");
        return;
    }
    let knobs = Fixture::new("null-audit", "10\n", "1000\n");
    let audit = knobs.audit_path();
    mknod_char(&audit, 1, 3);
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(knobs.knob(THRESHOLD), "10\n", "the originals are back");

    fs::remove_file(&audit).unwrap();
    mknod_char(&audit, 1, 5);
    let output = output_within(&mut knobs.command(&["--duration", "1"]), PROMPTLY);
    assert_refused(&output, &audit, "a character device");
    assert!(
        stderr(&output).contains("/dev/null itself"),
        "{}",
        stderr(&output)
    );
    assert!(knobs.state_files().is_empty(), "{}", stderr(&output));
}

/// A pipe with room for about one page more, its read end kept (and never read).
fn nearly_full_pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own.
    let capacity = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
    assert!(capacity >= 8192, "pipe capacity {capacity}");
    let page = [b'x'; 4096];
    for _ in 0..(capacity as usize / 4096 - 1) {
        // SAFETY: `page` is valid for reads of its length; the pipe has room (never read,
        // filled one page short of its capacity).
        let n = unsafe { libc::write(write.as_raw_fd(), page.as_ptr().cast(), page.len()) };
        assert_eq!(n, 4096);
    }
    (read, write)
}

/// Issue 52, item 3: the audit log on stdout (`--audit -`), a pipe whose reader stopped
/// reading. The write blocked for ever: past --duration, deaf to SIGTERM, the knobs left at
/// the controller's values until SIGKILL. Now no line waits past --duration, a stop signal
/// ends the wait, and the originals go back either way.
#[test]
fn an_audit_pipe_nobody_reads_holds_tune_past_neither_its_duration_nor_sigterm() {
    for by_signal in [false, true] {
        let knobs = Fixture::new("stalled-audit", "10\n", "1000\n");
        let (_read, write) = nearly_full_pipe();
        let mut command = Command::new(NODESCOPE);
        command
            .arg("tune")
            .arg("--sysfs-root")
            .arg(knobs.knobs_root())
            .arg("--psi")
            .arg(knobs.psi())
            .args(["--audit", "-", "--state-dir"])
            .arg(knobs.state_dir())
            .args(["--decision-period", "0.1", "--min-write-gap", "0"])
            .args(if by_signal {
                &[][..]
            } else {
                &["--duration", "3"][..]
            })
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::from(write))
            .stderr(std::process::Stdio::piped());
        let started = Instant::now();
        let mut child = KillOnDrop(command.spawn().unwrap());
        let mut moved = false;
        let mut signalled = None;
        while child.0.try_wait().unwrap().is_none() {
            moved |= common::tune::knobs_moved(&knobs);
            if by_signal && moved && signalled.is_none() {
                // The page of room fills within a few decisions; then the writes wait.
                thread::sleep(Duration::from_millis(1000));
                send_signal(&child.0, libc::SIGTERM);
                signalled = Some(Instant::now());
            }
            match signalled {
                Some(at) => assert!(at.elapsed() < Duration::from_secs(5), "deaf to SIGTERM"),
                None => assert!(
                    started.elapsed() < Duration::from_secs(3 + 7),
                    "tune still running past --duration 3 (moved: {moved})"
                ),
            }
            thread::sleep(Duration::from_millis(10));
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut text).unwrap();
        assert!(moved, "the knobs never moved: {text}");
        assert!(text.contains("writing the audit log stdout"), "{text}");
        assert_eq!(knobs.knob(THRESHOLD), "10\n", "{text}");
        assert_eq!(knobs.knob(INTERVAL), "1000\n", "{text}");
        assert!(knobs.state_files().is_empty(), "{text}");
    }
}

/// Issue 52, item 6: every input goes through the one reader (a regular file, size-capped). A
/// recording, `--packages`, `--probes`, `--btf` or `--btf-base` that is a FIFO blocked at
/// open, past --duration.
#[test]
fn inputs_that_are_fifos_are_refused() {
    let scratch = scratch("fifo-inputs");
    let fifo = scratch.path().join("input");
    mkfifo(&fifo);
    // The base is read first: the module's file is never reached.
    let module = scratch.path().join("module.btf");
    fs::write(&module, "not BTF").unwrap();
    let module_text = module.to_str().unwrap();
    let fifo_text = fifo.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["report", fifo_text],
        vec![
            "stream", "--json", "--source", "replay", "--speed", "0", fifo_text,
        ],
        vec![
            "stream",
            "--json",
            "--source",
            "sim",
            "--duration",
            "1",
            "--packages",
            fifo_text,
        ],
        vec!["probe", "--probes", fifo_text],
        vec!["probe", "--discover", "--btf", fifo_text],
        vec![
            "probe",
            "--discover",
            "--btf",
            module_text,
            "--btf-base",
            fifo_text,
        ],
    ];
    for args in cases {
        let mut command = Command::new(NODESCOPE);
        command.args(&args);
        let output = output_within(&mut command, PROMPTLY);
        let text = stderr(&output);
        assert!(!output.status.success(), "{args:?}: {text}");
        assert!(text.contains(fifo_text), "{args:?}: {text}");
        assert!(
            text.contains("not a regular file (a FIFO)"),
            "{args:?}: {text}"
        );
    }
}
