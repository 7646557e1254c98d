//! `nodescope tune` as a real process on a directory of knob files (what the simulator
//! writes; no kernel support needed): signals put the originals back, an external write stops
//! the tuning of that device, bad contents are refused by name, dry-run writes nothing.
use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant, SystemTime},
};

use serde_json::Value;
use tempfile::TempDir;

mod common;

use common::{is_root, send_signal, KillOnDrop, NODESCOPE};

const THRESHOLD: &str = "node_compress_threshold";
const INTERVAL: &str = "node_compress_interval";
/// Generous: the machines are shared and slow at times.
const PATIENCE: Duration = Duration::from_secs(20);

/// A knob directory `<root>/sim0/` plus a PSI file and an audit log path, removed on drop
/// (also when the test fails).
struct Fixture {
    root: TempDir,
}

impl Fixture {
    fn new(test: &str, threshold: &str, interval: &str) -> Self {
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

    fn knobs_root(&self) -> PathBuf {
        self.root.path().join("knobs")
    }

    fn knob_path(&self, name: &str) -> PathBuf {
        self.root.path().join("knobs/sim0").join(name)
    }

    fn state_dir(&self) -> PathBuf {
        self.root.path().join("state")
    }

    /// The state files the controllers left (one per tuned device while it is tuned).
    fn state_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.state_dir()) else {
            return Vec::new();
        };
        entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "state"))
            .collect()
    }

    /// A second device, `sim1`, with the same knob values as `sim0`.
    fn add_device(&self) {
        let dir = self.root.path().join("knobs/sim1");
        fs::create_dir_all(&dir).unwrap();
        for name in [THRESHOLD, INTERVAL] {
            fs::write(dir.join(name), self.knob(name)).unwrap();
        }
    }

    fn audit_path(&self) -> PathBuf {
        self.root.path().join("audit.jsonl")
    }

    fn write_knob(&self, name: &str, value: &str) {
        fs::write(self.knob_path(name), value).unwrap();
    }

    fn knob(&self, name: &str) -> String {
        fs::read_to_string(self.knob_path(name)).unwrap()
    }

    fn set_pressure(&self, some_avg10: f64) {
        let text = format!(
            "some avg10={some_avg10:.2} avg60=0.00 avg300=0.00 total=1\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        );
        fs::write(self.root.path().join("psi"), text).unwrap();
    }

    fn command(&self, extra: &[&str]) -> Command {
        self.command_every("0.1", extra)
    }

    /// `nodescope tune` deciding every `period` seconds.
    fn command_every(&self, period: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(NODESCOPE);
        command
            .arg("tune")
            .arg("--sysfs-root")
            .arg(self.knobs_root())
            .arg("--psi")
            .arg(self.root.path().join("psi"))
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

    fn spawn(&self, extra: &[&str]) -> Child {
        self.command(extra).spawn().expect("start nodescope tune")
    }

    fn set_attributed_bytes(&self, bytes: u64) {
        let stats = self.root.path().join("knobs/sim0/nodescope_stats");
        let temporary = stats.with_extension("new");
        fs::write(&temporary, format!("attributed_bytes {bytes}\n")).unwrap();
        fs::rename(temporary, stats).unwrap();
    }

    fn audit(&self) -> Vec<Value> {
        fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("every audit line is JSON"))
            .collect()
    }

    /// Wait until `done` holds, failing the test (and killing `child`) after PATIENCE.
    fn wait_for(&self, child: &mut Child, what: &str, done: impl Fn(&Fixture) -> bool) {
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

fn finish(child: Child) -> Output {
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

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_success(status: ExitStatus, output: &Output) {
    assert!(status.success(), "{status}\n{}", stderr_of(output));
}

fn events<'a>(audit: &'a [Value], event: &str) -> Vec<&'a Value> {
    audit.iter().filter(|line| line["event"] == event).collect()
}

fn knobs_moved(fixture: &Fixture) -> bool {
    fixture.knob(THRESHOLD) != "10\n" && fixture.knob(INTERVAL) != "1000\n"
}

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

#[test]
fn polls_compress_more_between_windows_when_memory_crosses_the_budget_or_grows() {
    // Windows every 30 s (none happens in this test), polls every 0.1 s, budget 1 MiB (goal
    // 0.95 MiB), no pressure from PSI: only the budget speaks.
    let fixture = Fixture::new("poll", "12\n", "1000\n");
    fixture.set_pressure(0.0);
    fixture.set_attributed_bytes(512 << 10);
    // Half the budget: calm, nothing to do. 8 MiB: score 8.42, into tight at once: interval
    // 1000 / 8.42 = 119 ms, threshold 12 + 10 (the most per step) = 22.
    let mut child = spawn_polling(&fixture, &["--budget", "1M"]);
    fixture.set_attributed_bytes(8 << 20);
    fixture.wait_for(&mut child, "the crossing", |f| f.knob(INTERVAL) == "119\n");
    assert_eq!(fixture.knob(THRESHOLD), "22\n");
    // 8.5 MiB is not 1.1 x the score answered: no step. 16 MiB is (16.84): interval 119 / 10
    // (the most per step) at its 100 ms floor, threshold at its ceiling of 25.
    fixture.set_attributed_bytes(17 << 19);
    thread::sleep(Duration::from_millis(500));
    fixture.set_attributed_bytes(16 << 20);
    fixture.wait_for(&mut child, "the escalation", |f| {
        f.knob(INTERVAL) == "100\n"
    });
    assert_eq!(fixture.knob(THRESHOLD), "25\n");
    stop_and_expect(&fixture, child, "12\n", "1000\n");
    let audit = fixture.audit();
    let decisions = events(&audit, "decision");
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    for line in &decisions {
        assert_eq!(line["outcome"], "applied");
        let reason = line["reason"].as_str().unwrap();
        assert!(reason.starts_with("urgent (between windows): "), "{reason}");
    }
}

/// `nodescope tune` with windows 30 s apart (none falls in a test) and polls every 0.1 s,
/// seen calm for half a second: started, and no decision yet.
fn spawn_polling(fixture: &Fixture, extra: &[&str]) -> Child {
    let mut args = vec!["--poll", "0.1", "--duration", "20"];
    args.extend_from_slice(extra);
    let mut child = fixture
        .command_every("30", &args)
        .spawn()
        .expect("start nodescope tune");
    fixture.wait_for(&mut child, "the start line", |f| {
        !events(&f.audit(), "start").is_empty()
    });
    thread::sleep(Duration::from_millis(500));
    assert!(events(&fixture.audit(), "decision").is_empty());
    child
}

/// SIGTERM; a clean exit with the knobs back at `threshold` and `interval`.
fn stop_and_expect(fixture: &Fixture, child: Child, threshold: &str, interval: &str) {
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(THRESHOLD), threshold);
    assert_eq!(fixture.knob(INTERVAL), interval);
}

/// Rewrites the fixture's PSI file every 20 ms as a kernel would show `stall_share` of stall
/// from now on: `total` grows with the wall clock, `avg10` stays at 0.00 (the kernel's average
/// is two seconds behind at best). Stops on drop.
struct StallingPsi {
    stop: Arc<AtomicBool>,
    writer: Option<thread::JoinHandle<()>>,
}

impl StallingPsi {
    fn start(path: PathBuf, stall_share: f64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let writer = thread::spawn(move || {
            let began = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                let total_us = 1 + (began.elapsed().as_secs_f64() * 1e6 * stall_share) as u64;
                let text = format!(
                    "some avg10=0.00 avg60=0.00 avg300=0.00 total={total_us}\n\
                     full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                );
                let temporary = path.with_extension("new");
                fs::write(&temporary, text).unwrap();
                fs::rename(&temporary, &path).unwrap();
                thread::sleep(Duration::from_millis(20));
            }
        });
        StallingPsi {
            stop,
            writer: Some(writer),
        }
    }
}

impl Drop for StallingPsi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

#[test]
fn polls_see_stalls_in_the_psi_total_while_avg10_still_says_zero() {
    // Windows every 30 s (none happens here), polls every 0.1 s, no budget: only PSI speaks,
    // and only through its `total` counter.
    let fixture = Fixture::new("psi-total", "12\n", "1000\n");
    fixture.set_pressure(0.0);
    let mut child = spawn_polling(&fixture, &[]);
    // Half of all time stalled from now on: 50 % against the 5 % goal. The share over the
    // last second climbs with every poll: the first step comes once it passes 5.5 % (tight at
    // 1.1 x the goal), further ones each time it has grown 1.1-fold, until the most compression.
    let stalling = StallingPsi::start(fixture.root.path().join("psi"), 0.5);
    let onset = Instant::now();
    fixture.wait_for(&mut child, "the most compression", |f| {
        f.knob(INTERVAL) == "100\n"
    });
    println!(
        "most compression {:.2} s after the stalls began",
        onset.elapsed().as_secs_f64()
    );
    assert_eq!(fixture.knob(THRESHOLD), "25\n");
    drop(stalling);
    stop_and_expect(&fixture, child, "12\n", "1000\n");
    let audit = fixture.audit();
    let decisions = events(&audit, "decision");
    let pressures: Vec<f64> = decisions
        .iter()
        .map(|line| {
            assert_eq!(line["outcome"], "applied");
            let reason = line["reason"].as_str().unwrap();
            assert!(reason.starts_with("urgent (between windows): "), "{reason}");
            line["signals"]["memory_pressure"].as_f64().unwrap()
        })
        .collect();
    // avg10 said 0.00 throughout: every figure here is the share from `total`.
    assert!((5.5..50.0).contains(&pressures[0]), "{pressures:?}");
    assert!(
        pressures.windows(2).all(|pair| pair[1] >= pair[0] * 1.1),
        "{pressures:?}"
    );
    let first_threshold = decisions[0]["written"]["threshold"].as_u64().unwrap();
    assert!(first_threshold > 12, "{decisions:?}");
}

/// This process's wake-ups so far: its main thread's context switches, voluntary (sleeps that
/// ended) and not.
fn wakeups_of(child: &Child) -> u64 {
    let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Wake-ups of a `nodescope tune` on this kernel's PSI over two seconds of calm, and its log.
fn calm_wakeups(test: &str, extra: &[&str]) -> (u64, String) {
    let fixture = Fixture::new(test, "12\n", "1000\n");
    let mut child = Command::new(NODESCOPE)
        .arg("tune")
        .arg("--sysfs-root")
        .arg(fixture.knobs_root())
        .arg("--audit")
        .arg(fixture.audit_path())
        .args(["--psi", "/proc/pressure/memory", "--psi-goal", "50"])
        .args([
            "--decision-period",
            "30",
            "--poll",
            "0.05",
            "--duration",
            "20",
        ])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodescope tune");
    fixture.wait_for(&mut child, "the start line", |f| {
        !events(&f.audit(), "start").is_empty()
    });
    let before = wakeups_of(&child);
    thread::sleep(Duration::from_secs(2));
    let wakeups = wakeups_of(&child) - before;
    send_signal(&child, libc::SIGTERM);
    let output = finish(child);
    assert_success(output.status, &output);
    assert_eq!(fixture.knob(THRESHOLD), "12\n");
    assert_eq!(fixture.knob(INTERVAL), "1000\n");
    assert!(events(&fixture.audit(), "decision").is_empty());
    (wakeups, stderr_of(&output))
}

#[test]
fn a_psi_trigger_replaces_the_polls_while_memory_is_calm() {
    if !Path::new("/proc/pressure/memory").exists() {
        test_skip::skip("this kernel has no PSI (CONFIG_PSI)");
        return;
    }
    // A goal of 50 %: this machine's memory stays calm, so the trigger never fires.
    let (polling, polling_log) = calm_wakeups("wake-polls", &["--no-psi-trigger"]);
    let (waiting, waiting_log) = calm_wakeups("wake-trigger", &[]);
    println!("wake-ups in 2 s of calm: {polling} polling every 0.05 s, {waiting} on the trigger");
    assert!(
        polling_log.contains("polling the gauges every 0.05 s"),
        "{polling_log}"
    );
    assert!(
        waiting_log.contains("waiting on a PSI trigger (\"some "),
        "{waiting_log}"
    );
    // 40 polls in 2 s, each a sleep that ends; on the trigger, no window falls in 2 s and
    // nothing else wakes the loop (a few, for the kernel's own reasons, at most).
    assert!(polling >= 30, "{polling}");
    assert!(waiting <= 5, "{waiting}");
}

#[test]
fn tune_steers_the_live_simulator_through_its_knob_directory_and_stats() {
    // The simulator (here inside `nodescope stream`) publishes its counters and gauges in
    // <root>/vdb/nodescope_stats; `nodescope tune --sysfs-root <root>` reads them. The VM
    // replay creates 16,676 nodes (70 MB raw) at once: 3 MiB is crossed at the first poll.
    let fixture = Fixture::new("live-sim", "25\n", "1000\n");
    fixture.set_pressure(0.0);
    let sim_root = fixture.root.path().join("sim");
    let stream = Command::new(NODESCOPE)
        .args([
            "stream",
            "--source",
            "sim",
            "--scenario",
            "vm-replay",
            "--json",
        ])
        .arg("--sysfs-root")
        .arg(&sim_root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the simulator");
    let _stream = KillOnDrop(stream);
    let stats = sim_root.join("vdb/nodescope_stats");
    let deadline = Instant::now() + PATIENCE;
    let attributed = |text: String| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with("attributed_bytes "))?;
        line["attributed_bytes ".len()..].parse().ok()
    };
    while fs::read_to_string(&stats)
        .ok()
        .and_then(attributed)
        .is_none_or(|bytes| bytes <= 60 << 20)
    {
        assert!(Instant::now() < deadline, "no stats from the simulator");
        thread::sleep(Duration::from_millis(50));
    }
    let output = Command::new(NODESCOPE)
        .arg("tune")
        .arg("--sysfs-root")
        .arg(&sim_root)
        .args([
            "--device",
            "vdb",
            "--budget",
            "3M",
            "--decision-period",
            "1",
        ])
        .args(["--poll", "0.1", "--duration", "3.5"])
        .arg("--psi")
        .arg(fixture.root.path().join("psi"))
        .arg("--audit")
        .arg(fixture.audit_path())
        .output()
        .expect("run nodescope tune");
    assert_success(output.status, &output);
    let audit = fixture.audit();
    let decisions = events(&audit, "decision");
    let first = decisions.first().expect("a decision");
    assert_eq!(first["outcome"], "applied", "{first}");
    assert!(first["reason"]
        .as_str()
        .unwrap()
        .starts_with("urgent (between windows): memory score"));
    let attributed = first["signals"]["attributed_bytes"].as_u64().unwrap();
    assert!(attributed > 60 << 20, "{attributed}");
    assert_eq!(first["written"]["interval_ms"], 100);
    // The window after it has rates from the simulator's counters.
    let window = decisions
        .iter()
        .find(|line| line["signals"]["trailing_s"].as_f64() > Some(0.0))
        .expect("a whole window");
    assert!(window["signals"]["memory_pressure"].is_number());
    // Put back at the end, in the simulator's own knob files.
    let knob = |name: &str| fs::read_to_string(sim_root.join("vdb").join(name)).unwrap();
    assert_eq!(knob(INTERVAL).trim(), "1000");
    assert_eq!(knob(THRESHOLD).trim(), "25");
}

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
