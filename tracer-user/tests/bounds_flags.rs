//! Careless flags and inputs (issue 21; issue 33, findings 7 and 10): windows, durations and
//! speeds out of range, the simulator at any speed, probe's symbol look-ups and kallsyms,
//! `report --nids`: one clear line, a finite run, memory bounded (common/bounded.rs).
use std::{fs, path::Path, time::Duration};

mod common;

use common::{
    bounded::{recording, run, OUTPUT_WAIT},
    scratch, NODESCOPE,
};

#[test]
fn windows_durations_and_speeds_out_of_range_are_one_clear_error() {
    let dir = scratch("flags");
    for (flag, value, says) in [
        ("--window", "1e-9", "a window is 0.001 to 86400 seconds"),
        ("--window", "0", "a window is 0.001 to 86400 seconds"),
        // The window's old name is refused, naming the new one ("interval" is the knob).
        ("--interval", "1", "--interval is now --window"),
        ("--duration", "-1", "a duration must be positive"),
        ("--speed", "NaN", "not a number"),
        (
            "--speed",
            "-2",
            "the speed is 0 (as fast as possible) or a positive factor",
        ),
        (
            "--speed",
            "inf",
            "the speed is 0 (as fast as possible) or a positive factor",
        ),
    ] {
        for command in ["stream", "record"] {
            let mut args = vec![command, "--source", "sim", flag, value];
            if command == "record" {
                args.extend(["-o", "never-written.nsr"]);
            }
            let run = run(&args, dir.path(), None);
            assert!(!run.success, "{args:?}");
            assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
            assert!(
                !run.stderr.contains("unexpected argument"),
                "{}",
                run.stderr
            );
        }
    }
    assert!(!Path::new("never-written.nsr").exists());
}

/// `--speed 10000` and `--speed 0` (as fast as possible) run in steps: two windows come out
/// and the run ends, in bounded memory. Before: 1000 s of virtual time per poll in one batch
/// (14 s and 1 GB), and speed 0 never advanced.
#[test]
fn the_simulator_at_high_or_unbounded_speed_ends_in_bounded_memory() {
    let dir = scratch("speed");
    for speed in ["10000", "0"] {
        let run = run(
            &[
                "stream",
                "--source",
                "sim",
                "--json",
                "--speed",
                speed,
                "--duration",
                "2",
            ],
            dir.path(),
            None,
        );
        assert!(run.success, "{}", run.stderr);
        assert_eq!(
            run.stdout.lines().count(),
            2,
            "speed {speed}: {}",
            run.stdout
        );
        run.assert_bounded(&format!("--speed {speed}"));
        assert!(
            run.wall < Duration::from_secs(60),
            "speed {speed}: {:?}",
            run.wall
        );
        eprintln!(
            "stream --speed {speed} --duration 2: {:?}, {} KiB",
            run.wall, run.max_rss_kb
        );
    }
    let file = dir.path().join("fast.nsr");
    let run = run(
        &[
            "record",
            "--source",
            "sim",
            "--speed",
            "10000",
            "--duration",
            "2",
            "-o",
            file.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(
        run.success && run.stderr.contains("duration reached"),
        "{}",
        run.stderr
    );
    run.assert_bounded("record --speed 10000");
}

/// `--speed 1e300` with no end: windows are printed on the way, memory stays bounded, and
/// SIGTERM ends it at once.
#[test]
fn the_simulator_at_1e300_honours_sigterm() {
    let dir = scratch("sigterm");
    let run = run(
        &["stream", "--source", "sim", "--json", "--speed", "1e300"],
        dir.path(),
        Some(3),
    );
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stdout.lines().count() >= 3,
        "no windows in {OUTPUT_WAIT:?}:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let after_signal = run.after_signal.unwrap();
    assert!(after_signal < Duration::from_secs(3), "{after_signal:?}");
    run.assert_bounded("--speed 1e300");
}

/// `probe --probes sim.toml` (uprobes on this binary) looks its symbols up in the binary,
/// not in /proc/kallsyms: every hook is found there.
#[test]
fn probe_looks_uprobe_symbols_up_in_the_target_binary() {
    let dir = scratch("probe-sim");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/probes/sim.toml");
    let run = run(&["probe", "--json", "--probes", manifest], dir.path(), None);
    assert!(run.success, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let probes = &report["rfc_probes"];
    assert_eq!(probes["looked_up_in"], NODESCOPE, "{probes}");
    let symbols = probes["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 11, "{probes}");
    assert!(symbols.iter().all(|s| s["in_kallsyms"] == true), "{probes}");
}

/// `probe --discover --kallsyms FILE` (issue 33, finding 10): /dev/zero is refused as a device,
/// and a 1 GiB (sparse) regular file as longer than any kallsyms, both in bounded memory.
#[test]
fn kallsyms_from_dev_zero_or_a_huge_file_are_refused_in_bounded_memory() {
    let dir = scratch("kallsyms-huge");
    let huge = dir.path().join("kallsyms");
    fs::File::create(&huge).unwrap().set_len(1 << 30).unwrap();
    for (path, says) in [
        ("/dev/zero", "not a regular file (a character device)"),
        (huge.to_str().unwrap(), "longer than 67108864 bytes"),
    ] {
        let run = run(
            &["probe", "--discover", "--no-btf", "--kallsyms", path],
            dir.path(),
            None,
        );
        assert!(!run.success, "{}", run.stderr);
        assert!(run.stderr.contains(says), "{}", run.stderr);
        run.assert_bounded(path);
    }
}

/// `report --nids` (issue 33, finding 7) on more distinct (kind, nid) pairs than it keeps:
/// the first pairs met are listed, the rest said on stderr with a non-zero exit, in bounded
/// memory (10 M distinct nids used 888 MB when the map and the output were unbounded).
#[test]
fn report_nids_keeps_a_bounded_map_and_says_what_it_left_out() {
    let dir = scratch("nids");
    let path = dir.path().join("nids.nsr");
    let cap = nodescope::model::MAX_NID_PAIRS;
    recording(&path, cap as u64 + 200_000);
    let run = run(
        &["report", "--nids", path.to_str().unwrap()],
        dir.path(),
        None,
    );
    assert!(!run.success, "an incomplete list is a failure");
    assert_eq!(run.stdout.lines().count(), cap, "{}", run.stderr);
    assert!(run.stdout.starts_with("node_read 0 1\n"));
    assert!(
        run.stderr
            .contains("200000 events of further (kind, nid) pairs are not listed"),
        "{}",
        run.stderr
    );
    run.assert_bounded("report --nids");
}
