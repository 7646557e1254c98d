//! `nodescope tune`'s polls between windows, as a real process on a directory of knob files:
//! a budget crossed or a PSI total that grows steps at once; a PSI trigger replaces the polls
//! while memory is calm; the live simulator steered through its knob directory and stats.
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

mod common;

use common::{
    send_signal,
    tune::{
        assert_success, events, finish, stderr_of, stop_and_expect, Fixture, INTERVAL, PATIENCE,
        THRESHOLD,
    },
    KillOnDrop, NODESCOPE,
};

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
