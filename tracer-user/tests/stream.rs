//! `nodescope stream` on the machine running the tests. Its real work is checked end to end in
//! QEMU (`cargo xtask vm-test`); here: what it says on a kernel that cannot do it.
use std::process::Command;

mod common;

use common::NODESCOPE;

#[test]
fn stream_without_f2fs_names_what_is_missing_without_a_backtrace() {
    // The binary's own check: it refuses with "has no F2FS" exactly when this is false.
    if nodescope::system::has_f2fs() {
        test_skip::skip("this kernel has F2FS");
        return;
    }
    let output = Command::new(NODESCOPE)
        .args(["stream", "--json", "--duration", "1"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run nodescope stream");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "no JSON line without a source");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no F2FS"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}

#[test]
fn stream_plan_says_what_each_part_would_use() {
    let output = Command::new(NODESCOPE)
        .args(["stream", "--plan"])
        .output()
        .expect("run nodescope stream --plan");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for part in ["node_reads", "node_writes", "checkpoints"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(part)),
            "{part} missing:\n{stdout}"
        );
    }
    if !nodescope::system::has_f2fs() {
        assert!(stdout.contains("node_reads   not available"), "{stdout}");
    }
}

/// Issue 52, item 10: `--duration` counted windows, so `--window 10 --duration 2` ran 10 s and
/// printed a 10 s window. It ends the run in the source's clock now, whatever the window: the
/// window it cuts short is the last line, 2 s long; in real time the run takes about 2 s.
#[test]
fn stream_duration_bounds_the_run_whatever_the_window() {
    let lines = |speed: &str| {
        let started = std::time::Instant::now();
        let output = Command::new(NODESCOPE)
            .args(["stream", "--json", "--source", "sim", "--speed", speed])
            .args(["--window", "10", "--duration", "2"])
            .env("XDG_RUNTIME_DIR", common::scratch("duration").path())
            .output()
            .expect("run nodescope stream");
        assert!(output.status.success(), "{output:?}");
        (common::json_lines(&output), started.elapsed())
    };
    let (fast, _) = lines("0");
    assert_eq!(fast.len(), 1, "{fast:?}");
    assert_eq!(fast[0]["t"], 2.0);
    assert_eq!(fast[0]["window_s"], 2.0);
    assert!(fast[0]["totals"]["node_reads"].as_u64().unwrap() > 0);
    // In real time: --duration + 1 s of start-up and finishing, far below the window's 10 s.
    let (real, wall) = lines("1");
    assert!(wall < std::time::Duration::from_secs(2 + 4), "{wall:?}");
    assert_eq!(real.last().unwrap()["t"], 2.0, "{real:?}");
}

/// Issue 51: the simulator's timed lookups. Every lookup is in exactly one outcome, its time
/// the simulator's virtual cost (`sim::costs`): a raw hit `RAW_HIT_NS`, a disk read
/// `NODE_READ_NS`, a restore the restore's own latency. Its lookups are one task at a time, so
/// none waits on another's read; none fails. The disk-read outcomes are the demand node reads,
/// the restore outcomes the restores; the processes' lookups add up to the totals, the windows'
/// to the cumulative count. The simulator times every lookup it traces (virtual time costs
/// nothing), so `--accesses` gives the same; with neither flag no lookup is traced.
#[test]
fn simulated_lookups_are_timed_once_each_in_one_outcome() {
    let run = |flag: Option<&str>| {
        let output = Command::new(NODESCOPE)
            .args(["stream", "--json", "--source", "sim", "--speed", "0"])
            .args(["--duration", "3"])
            .args(flag)
            .env("XDG_RUNTIME_DIR", common::scratch("latency").path())
            .output()
            .expect("run nodescope stream");
        assert!(output.status.success(), "{output:?}");
        common::json_lines(&output)
    };
    let lines = run(Some("--lookup-latency"));
    let last = lines.last().expect("a line");
    assert_eq!(last["version"], 4);
    let c = &last["cumulative"];
    let r = &c["retrievals"];
    let count = |outcome: &str| r[outcome]["count"].as_u64().unwrap();
    let total = |outcome: &str| r[outcome]["total_ns"].as_u64().unwrap();
    let lookups = r["count"].as_u64().unwrap();
    assert!(lookups > 0, "{r}");
    let outcomes = ["hit", "restore", "disk_read", "waited", "error"];
    assert_eq!(outcomes.iter().map(|o| count(o)).sum::<u64>(), lookups);
    assert_eq!(
        outcomes.iter().map(|o| total(o)).sum::<u64>(),
        r["wait_ns"].as_u64().unwrap()
    );
    assert_eq!(count("disk_read"), c["node_reads_demand"].as_u64().unwrap());
    assert_eq!(r["node_reads"], c["node_reads_demand"]);
    assert_eq!(count("restore"), c["restores"].as_u64().unwrap());
    assert_eq!((count("waited"), count("error")), (0, 0));
    assert_eq!(total("hit"), count("hit") * sim::costs::RAW_HIT_NS);
    assert_eq!(
        total("disk_read"),
        count("disk_read") * sim::costs::NODE_READ_NS
    );
    assert_eq!(
        total("restore"),
        c["restore_latency"]["total_ns"].as_u64().unwrap()
    );
    assert_eq!(r["disk_read"]["mean_ns"], sim::costs::NODE_READ_NS);
    // 90,000 ns lies in [65,536, 131,072): p50 and p99 are that bucket's upper bound.
    assert_eq!(r["disk_read"]["p50_ns"], 131_072);
    let windows: u64 = lines
        .iter()
        .map(|l| l["totals"]["retrievals"]["count"].as_u64().unwrap())
        .sum();
    let processes: u64 = lines
        .iter()
        .flat_map(|l| l["processes"].as_array().unwrap())
        .map(|p| p["lookups"].as_u64().unwrap())
        .sum();
    assert_eq!((windows, processes), (lookups, lookups));
    let accesses = run(Some("--accesses"));
    assert_eq!(
        accesses.last().expect("a line")["cumulative"]["retrievals"],
        *r
    );
    let untraced = run(None);
    let last = untraced.last().expect("a line");
    assert_eq!(last["cumulative"]["retrievals"]["count"], 0);
    assert_eq!(last["cumulative"]["retrievals"]["wait_ns"], 0);
}

/// Issue 53: the stream line is one typed value (`schema::stream::StreamLine`). Every line the
/// simulator's run prints, lookups timed (histograms, quantiles, ratios), reads back as that
/// value and prints again byte for byte; and equal values print equal lines.
#[test]
fn every_stream_line_round_trips_through_its_type() {
    use nodescope::schema::stream::{StreamLine, STREAM_VERSION};
    let output = Command::new(NODESCOPE)
        .args(["stream", "--json", "--source", "sim", "--speed", "0"])
        .args(["--duration", "3", "--lookup-latency"])
        .env("XDG_RUNTIME_DIR", common::scratch("round-trip").path())
        .output()
        .expect("run nodescope stream");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    for printed in lines {
        let line: StreamLine = serde_json::from_str(printed).expect(printed);
        assert_eq!(line.version, STREAM_VERSION);
        assert_eq!(line.to_json(), printed);
        let again: StreamLine = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(again, line);
    }
}
