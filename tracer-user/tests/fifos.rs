//! A FIFO (or a device node) where nodescope expects a regular file (issue 33, finding 2):
//! opening a FIFO for reading blocks until a writer comes, past --duration and past SIGTERM.
//! Every command here must end within its deadline, with a clear error naming the file, and
//! leave the knobs and state files as they should be. Each runs under `output_within`, so a
//! regression fails the test instead of hanging it.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

mod common;

use common::{mkfifo, output_within, scratch, send_signal, KillOnDrop, NODESCOPE};

const THRESHOLD: &str = "node_compress_threshold";
const INTERVAL: &str = "node_compress_interval";
/// A one-shot command that refuses at once: generous for a loaded debug build.
const PROMPTLY: Duration = Duration::from_secs(15);

/// `<dir>/knobs/sim0` with the RFC's defaults, a PSI file, and where the state goes.
struct Knobs {
    dir: PathBuf,
}

impl Knobs {
    fn new(dir: &Path) -> Knobs {
        let knobs = Knobs {
            dir: dir.to_path_buf(),
        };
        fs::create_dir_all(knobs.device()).unwrap();
        fs::write(knobs.device().join(THRESHOLD), "10\n").unwrap();
        fs::write(knobs.device().join(INTERVAL), "1000\n").unwrap();
        fs::write(
            knobs.psi(),
            "some avg10=20.00 avg60=0.00 avg300=0.00 total=1\n",
        )
        .unwrap();
        knobs
    }

    fn device(&self) -> PathBuf {
        self.dir.join("knobs/sim0")
    }

    fn psi(&self) -> PathBuf {
        self.dir.join("psi")
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn knob(&self, name: &str) -> String {
        fs::read_to_string(self.device().join(name)).unwrap()
    }

    fn state_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.state_dir()) else {
            return Vec::new();
        };
        entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "state"))
            .collect()
    }

    fn tune(&self, psi: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(NODESCOPE);
        command
            .arg("tune")
            .arg("--sysfs-root")
            .arg(self.dir.join("knobs"))
            .arg("--psi")
            .arg(psi)
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(["--decision-period", "0.1", "--min-write-gap", "0"])
            .arg("--audit")
            .arg(self.dir.join("audit.jsonl"))
            .args(extra);
        command
    }
}

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
    let scratch = scratch("fifo-knob");
    let knobs = Knobs::new(scratch.path());
    let knob = knobs.device().join(THRESHOLD);
    fs::remove_file(&knob).unwrap();
    mkfifo(&knob);
    let output = output_within(
        &mut knobs.tune(&knobs.psi(), &["--duration", "1"]),
        PROMPTLY,
    );
    assert_refused(&output, &knob, "a FIFO");
    assert!(knobs.state_files().is_empty(), "nothing was claimed");
    assert_eq!(knobs.knob(INTERVAL), "1000\n");
}

#[test]
fn a_knob_replaced_by_a_fifo_while_tuning_ends_the_run_by_its_duration() {
    let scratch = scratch("fifo-knob-later");
    let knobs = Knobs::new(scratch.path());
    let mut command = knobs.tune(&knobs.psi(), &["--duration", "3"]);
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
    let knob = knobs.device().join(THRESHOLD);
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
    let scratch = scratch("fifo-psi");
    let knobs = Knobs::new(scratch.path());
    let psi = scratch.path().join("psi-fifo");
    mkfifo(&psi);
    let output = output_within(&mut knobs.tune(&psi, &["--duration", "1"]), PROMPTLY);
    assert_refused(&output, &psi, "a FIFO");
    assert_eq!(knobs.knob(THRESHOLD), "10\n");
    assert_eq!(knobs.knob(INTERVAL), "1000\n");
    assert!(knobs.state_files().is_empty(), "{}", stderr(&output));
}

#[test]
fn a_fifo_named_like_the_stats_file_ends_tuning_by_sigterm_with_the_knobs_back() {
    let scratch = scratch("fifo-stats");
    let knobs = Knobs::new(scratch.path());
    let stats = knobs.device().join("nodescope_stats");
    mkfifo(&stats);
    let mut command = knobs.tune(&knobs.psi(), &[]);
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
    let scratch = scratch("fifo-state");
    let knobs = Knobs::new(scratch.path());
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
