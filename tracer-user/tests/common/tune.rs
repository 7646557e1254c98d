//! `nodescope tune`'s fixture for the tests that run it as a process on a directory of knob
//! files (tune.rs, tune_polls.rs, tune_state.rs, fifos.rs): the knobs, a PSI file, the audit log and the
//! state directory, and the helpers that start, wait for and stop it.
use std::{
    fs,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;
use tempfile::TempDir;

use super::{send_signal, NODESCOPE};

pub const THRESHOLD: &str = "node_compress_threshold";
pub const INTERVAL: &str = "node_compress_interval";
/// Generous: the machines are shared and slow at times.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A knob directory `<root>/sim0/` plus a PSI file and an audit log path, removed on drop
/// (also when the test fails).
pub struct Fixture {
    pub root: TempDir,
}

impl Fixture {
    pub fn new(test: &str, threshold: &str, interval: &str) -> Self {
        let root = tempfile::Builder::new()
            .prefix(&format!("nodescope-tune-{test}-"))
            .tempdir()
            .unwrap();
        fs::create_dir_all(root.path().join("knobs/sim0")).unwrap();
        let fixture = Fixture { root };
        fixture.write_knob(THRESHOLD, threshold);
        fixture.write_knob(INTERVAL, interval);
        // PSI 20 % against the default 5 % goal: the law compresses more at once.
        fixture.set_pressure(20.0);
        fixture
    }

    pub fn knobs_root(&self) -> PathBuf {
        self.root.path().join("knobs")
    }

    pub fn knob_path(&self, name: &str) -> PathBuf {
        self.root.path().join("knobs/sim0").join(name)
    }

    /// The PSI file the command reads.
    pub fn psi(&self) -> PathBuf {
        self.root.path().join("psi")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.root.path().join("state")
    }

    /// The state files the controllers left (one per tuned device while it is tuned).
    pub fn state_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.state_dir()) else {
            return Vec::new();
        };
        entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "state"))
            .collect()
    }

    /// A second device, `sim1`, with the same knob values as `sim0`.
    pub fn add_device(&self) {
        let dir = self.root.path().join("knobs/sim1");
        fs::create_dir_all(&dir).unwrap();
        for name in [THRESHOLD, INTERVAL] {
            fs::write(dir.join(name), self.knob(name)).unwrap();
        }
    }

    pub fn audit_path(&self) -> PathBuf {
        self.root.path().join("audit.jsonl")
    }

    pub fn write_knob(&self, name: &str, value: &str) {
        fs::write(self.knob_path(name), value).unwrap();
    }

    pub fn knob(&self, name: &str) -> String {
        fs::read_to_string(self.knob_path(name)).unwrap()
    }

    pub fn set_pressure(&self, some_avg10: f64) {
        let text = format!(
            "some avg10={some_avg10:.2} avg60=0.00 avg300=0.00 total=1\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        );
        fs::write(self.psi(), text).unwrap();
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        self.command_every("0.1", extra)
    }

    /// `nodescope tune` deciding every `period` seconds.
    pub fn command_every(&self, period: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(NODESCOPE);
        command
            .arg("tune")
            .arg("--sysfs-root")
            .arg(self.knobs_root())
            .arg("--psi")
            .arg(self.psi())
            .arg("--audit")
            .arg(self.audit_path())
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(["--decision-period", period, "--min-write-gap", "0"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    pub fn spawn(&self, extra: &[&str]) -> Child {
        self.command(extra).spawn().expect("start nodescope tune")
    }

    pub fn set_attributed_bytes(&self, bytes: u64) {
        let stats = self.root.path().join("knobs/sim0/nodescope_stats");
        let temporary = stats.with_extension("new");
        fs::write(&temporary, format!("attributed_bytes {bytes}\n")).unwrap();
        fs::rename(temporary, stats).unwrap();
    }

    pub fn audit(&self) -> Vec<Value> {
        fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("every audit line is JSON"))
            .collect()
    }

    /// Wait until `done` holds, failing the test (and killing `child`) after PATIENCE.
    pub fn wait_for(&self, child: &mut Child, what: &str, done: impl Fn(&Fixture) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "nodescope exited ({status}) before {what}; audit: {:?}",
                    self.audit()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("timed out waiting for {what}; audit: {:?}", self.audit());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn finish(child: Child) -> Output {
    let deadline = Instant::now() + PATIENCE;
    let mut child = child;
    loop {
        if child.try_wait().expect("wait for nodescope").is_some() {
            return child.wait_with_output().expect("collect nodescope output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nodescope did not exit within {PATIENCE:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn assert_success(status: ExitStatus, output: &Output) {
    assert!(status.success(), "{status}\n{}", stderr_of(output));
}

pub fn events<'a>(audit: &'a [Value], event: &str) -> Vec<&'a Value> {
    audit.iter().filter(|line| line["event"] == event).collect()
}

pub fn knobs_moved(fixture: &Fixture) -> bool {
    fixture.knob(THRESHOLD) != "10\n" && fixture.knob(INTERVAL) != "1000\n"
}

/// SIGTERM; a clean exit with the knobs back at `threshold` and `interval`.
pub fn stop_and_expect(fixture: &Fixture, child: Child, threshold: &str, interval: &str) {
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(THRESHOLD), threshold);
    assert_eq!(fixture.knob(INTERVAL), interval);
}
