//! Hostile recordings and careless flags (issue 21, findings 2, 3, 6 and 10): one clear line,
//! a finite run, and memory bounded by the data, never by what a length or a timestamp claims.
//! Each nodescope run is measured: its peak RSS, from wait4.
use std::{
    fs,
    io::{BufRead as _, BufReader, Read as _},
    path::Path,
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use nodescope::record::{writer::Writer, Header, TAG_EVENTS};
use tracer_common::{Event, EventKind};

mod common;

use common::{recording_header, scratch, NODESCOPE};

/// The most any subcommand may hold, whatever its input (issue 21).
const RSS_LIMIT_KB: i64 = 256 * 1024;

struct Run {
    success: bool,
    stdout: String,
    stderr: String,
    max_rss_kb: i64,
    wall: Duration,
    /// From SIGTERM to the exit, when one was sent.
    after_signal: Option<Duration>,
}

/// How long a run waits for the output it should stop at: far above any healthy run's time on
/// a loaded machine, so that only a run that never gets there fails.
const OUTPUT_WAIT: Duration = Duration::from_secs(60);

/// Run nodescope with `args` to its end; `term_after_lines` sends SIGTERM once stdout has that
/// many lines (or after OUTPUT_WAIT without them): a state to wait for, not a time, so that a
/// busy machine makes the test slower, never wrong.
fn run(args: &[&str], env_dir: &Path, term_after_lines: Option<usize>) -> Run {
    let started = Instant::now();
    let mut child = Command::new(NODESCOPE)
        .args(args)
        .env("XDG_RUNTIME_DIR", env_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodescope");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let lines = Arc::new(AtomicUsize::new(0));
    let lines_seen = Arc::clone(&lines);
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let mut reader = BufReader::new(&mut stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            text.push_str(&line);
            line.clear();
            lines_seen.fetch_add(1, Ordering::SeqCst);
        }
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut signalled = None;
    if let Some(wanted) = term_after_lines {
        while lines.load(Ordering::SeqCst) < wanted && started.elapsed() < OUTPUT_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        signalled = Some(Instant::now());
        common::send_signal(&child, libc::SIGTERM);
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage (plain integers) for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing through two valid pointers; std's Child is not
    // waited afterwards (it is forgotten below), so the pid is reaped exactly once.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    std::mem::forget(child);
    Run {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        max_rss_kb: usage.ru_maxrss,
        wall: started.elapsed(),
        after_signal: signalled.map(|at| at.elapsed()),
    }
}

impl Run {
    fn assert_bounded(&self, what: &str) {
        assert!(
            self.max_rss_kb < RSS_LIMIT_KB,
            "{what}: peak RSS {} KiB\n{}",
            self.max_rss_kb,
            self.stderr
        );
    }
}

/// A valid recording of `events` NodeReads one millisecond apart, with its footer.
fn recording(path: &Path, events: u64) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    for i in 0..events {
        let event = Event::new(EventKind::NodeRead, i * 1_000_000)
            .task(7)
            .nid(i as u32);
        writer.event(&event).unwrap();
    }
    let (bytes, _) = writer.finish(events * 1_000_000).unwrap();
    fs::write(path, &bytes).unwrap();
    bytes
}

/// A recording's header only (a writer that wrote nothing else).
fn header_bytes(header: &Header) -> Vec<u8> {
    let mut bytes = Vec::new();
    Writer::new(&mut bytes, header).unwrap();
    bytes
}

/// One record in the file format: tag, length, checksum, payload.
fn record_bytes(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn report(path: &Path, dir: &Path) -> Run {
    run(&["report", "--json", path.to_str().unwrap()], dir, None)
}

#[test]
fn report_of_dev_zero_is_one_clear_error_in_bounded_memory() {
    let dir = scratch("zero");
    let run = report(Path::new("/dev/zero"), dir.path());
    assert!(!run.success);
    assert!(
        run.stderr.contains("not a nodescope recording"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    run.assert_bounded("report /dev/zero");
}

#[test]
fn a_header_window_of_0_1_or_2_64_ns_is_refused_in_words() {
    let dir = scratch("window");
    for window_ns in [0, 1, u64::MAX] {
        let path = dir.path().join(format!("window-{window_ns}.nsr"));
        let mut bytes = header_bytes(&recording_header(window_ns));
        bytes.extend(record_bytes(
            b'F',
            br#"{"events":0,"blocks":0,"notes":0,"lost":0,"end_ns":5000000000}"#,
        ));
        fs::write(&path, bytes).unwrap();
        for args in [
            vec!["report", path.to_str().unwrap()],
            vec![
                "stream",
                "--source",
                "replay",
                "--speed",
                "0",
                path.to_str().unwrap(),
            ],
        ] {
            let run = run(&args, dir.path(), None);
            assert!(!run.success, "{args:?}");
            assert!(
                run.stderr
                    .contains(&format!("window of {window_ns} ns is implausible")),
                "{args:?}: {}",
                run.stderr
            );
            run.assert_bounded(&format!("{args:?}"));
        }
    }
}

/// An events block of 2 MiB of LZ4 that decodes to 512 MiB, and one of 128 KiB whose count
/// claims 8 Mi events: refused before anything that size is allocated (before: the first took
/// its 512 MiB, and twice that for the events).
#[test]
fn an_events_block_claiming_a_huge_payload_is_refused_before_allocating() {
    let dir = scratch("lz4");
    let count: u32 = 8 << 20;
    for (decoded_mib, says) in [
        (
            512,
            "record length 2105392 is implausible (at most 288382 for this kind)",
        ),
        (32, "claims 8388608 events, a block holds at most 4096"),
    ] {
        let zeros = vec![0u8; decoded_mib << 20];
        let mut payload = count.to_le_bytes().to_vec();
        payload.extend(lz4_flex::block::compress(&zeros));
        drop(zeros);
        let mut bytes = header_bytes(&recording_header(1_000_000_000));
        bytes.extend(record_bytes(TAG_EVENTS, &payload));
        let path = dir.path().join(format!("claims-{decoded_mib}.nsr"));
        fs::write(&path, &bytes).unwrap();
        let run = report(&path, dir.path());
        assert!(run.stderr.contains(says), "{}", run.stderr);
        run.assert_bounded(says);
    }
}

/// One event stamped 2^63 ns, or a footer ending at 2^64-1: damage, named, the rest reported
/// in bounded memory (before: one window per second up to there).
#[test]
fn implausible_timestamps_are_damage_not_billions_of_windows() {
    let dir = scratch("stamps");
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    writer
        .event(&Event::new(EventKind::NodeRead, 1_000).task(7))
        .unwrap();
    writer.flush_block().unwrap();
    writer
        .event(&Event::new(EventKind::NodeRead, 1 << 63).task(7))
        .unwrap();
    let (bytes, _) = writer.finish(0).unwrap();
    let late_event = dir.path().join("late-event.nsr");
    fs::write(&late_event, bytes).unwrap();

    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    writer
        .event(&Event::new(EventKind::NodeRead, 1_000).task(7))
        .unwrap();
    let (bytes, _) = writer.finish(u64::MAX).unwrap();
    let late_footer = dir.path().join("late-footer.nsr");
    fs::write(&late_footer, bytes).unwrap();

    for (path, what) in [
        (&late_event, "an event"),
        (&late_footer, "the footer's end"),
    ] {
        let run = report(path, dir.path());
        assert!(run.success, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!("{what} is stamped"))
                && run.stderr.contains("implausible"),
            "{}",
            run.stderr
        );
        let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(json["totals"]["node_reads_demand"], 1, "{}", run.stdout);
        assert_eq!(json["complete"], false);
        run.assert_bounded(what);
        let replay = self::run(
            &[
                "stream",
                "--json",
                "--source",
                "replay",
                "--speed",
                "0",
                path.to_str().unwrap(),
            ],
            dir.path(),
            None,
        );
        assert!(replay.success, "{}", replay.stderr);
        replay.assert_bounded(what);
    }
}

#[test]
fn a_recording_cut_between_records_or_followed_by_data_is_not_complete() {
    let dir = scratch("ends");
    let whole = dir.path().join("whole.nsr");
    let bytes = recording(&whole, 5000);
    let run = report(&whole, dir.path());
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["complete"], true, "{}", run.stderr);
    assert_eq!(json["totals"]["node_reads_demand"], 5000);

    // Cut just before the footer record: every block is intact, the footer is missing.
    let footer_at = bytes.len() - 9 - footer_len(&bytes);
    let cut = dir.path().join("cut.nsr");
    fs::write(&cut, &bytes[..footer_at]).unwrap();
    let run = report(&cut, dir.path());
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["complete"], false);
    assert_eq!(json["totals"]["node_reads_demand"], 5000);
    assert!(
        run.stderr.contains("ends without its footer"),
        "{}",
        run.stderr
    );

    let doubled = dir.path().join("doubled.nsr");
    fs::write(&doubled, [bytes.clone(), bytes].concat()).unwrap();
    let run = report(&doubled, dir.path());
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["complete"], false);
    assert_eq!(json["totals"]["node_reads_demand"], 5000);
    assert!(
        run.stderr.contains("data after the footer"),
        "{}",
        run.stderr
    );
}

/// The footer's JSON length, found from the end: the footer is the last record.
fn footer_len(bytes: &[u8]) -> usize {
    (1..bytes.len())
        .find(|&len| {
            let head = bytes.len() - len - 9;
            bytes[head] == b'F'
                && u32::from_le_bytes(bytes[head + 1..head + 5].try_into().unwrap()) as usize == len
        })
        .expect("a footer")
}

#[test]
fn an_unreadable_packages_file_is_named_not_the_recording() {
    let dir = scratch("packages");
    let path = dir.path().join("ok.nsr");
    recording(&path, 10);
    let missing = dir.path().join("no-such-packages.list");
    let run = run(
        &[
            "report",
            path.to_str().unwrap(),
            "--packages",
            missing.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(!run.success);
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains("no-such-packages.list") && !first.contains("ok.nsr"),
        "{}",
        run.stderr
    );
}

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
    assert_eq!(symbols.len(), 9, "{probes}");
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
    let cap = nodescope::cmd::report::MAX_NID_PAIRS;
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

/// whatif (issue 33, finding 6) on a trace one step over its limit: refused in words, in
/// bounded memory (an 11.7 MB crafted recording read whole reached 3.2 GB).
#[test]
fn whatif_refuses_a_trace_over_its_step_limit_in_bounded_memory() {
    let dir = scratch("whatif-steps");
    let path = dir.path().join("accesses.nsr");
    let steps = sim::whatif::MAX_TRACE_STEPS as u64 + 1;
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    for i in 0..steps {
        let event = Event::new(EventKind::NodeAccess, i * 1_000)
            .task(7)
            .nid((i % 4096) as u32);
        writer.event(&event).unwrap();
    }
    let (bytes, _) = writer.finish(steps * 1_000).unwrap();
    fs::write(&path, &bytes).unwrap();
    // The trace is refused before the image is opened: none is needed.
    let image = dir.path().join("no-image");
    let run = run(
        &[
            "whatif",
            path.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "has more than {} steps",
            sim::whatif::MAX_TRACE_STEPS
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("record a shorter span"),
        "{}",
        run.stderr
    );
    run.assert_bounded("whatif over the step limit");
}

/// A grid of 3,000 thresholds x 3,000 intervals (it reached 2.6 GB, then aborted on a 5 GB
/// allocation) is refused at once, naming its size; one at the cap is not refused for it.
#[test]
fn whatif_refuses_a_grid_over_its_cap_naming_the_product() {
    let dir = scratch("whatif-grid");
    let path = dir.path().join("empty.nsr");
    recording(&path, 1);
    let image = dir.path().join("no-image");
    let values = |from: u32, n: u32| {
        (from..from + n)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let run = run_whatif_grid(
        &path,
        &image,
        &values(1, 100),
        &values(100, 3_000),
        dir.path(),
    );
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("the grid has 300001 points (1 budgets x (off + 1 slot sets x 1 weights x 1 compressors x 100 thresholds x 3000 intervals)), more than the 10000"),
        "{}",
        run.stderr
    );
    run.assert_bounded("whatif grid");
    // 100 x 99 + off = 9,901 points: past the grid check, refused for the recording instead.
    let run = run_whatif_grid(&path, &image, &values(1, 100), &values(100, 99), dir.path());
    assert!(run.stderr.contains("no node accesses"), "{}", run.stderr);
}

fn run_whatif_grid(rec: &Path, image: &Path, thresholds: &str, intervals: &str, dir: &Path) -> Run {
    run(
        &[
            "whatif",
            rec.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
            "--threshold",
            thresholds,
            "--interval",
            intervals,
            "--budget",
            "3MiB",
        ],
        dir,
        None,
    )
}

/// A server on a Unix socket in `dir` that says hello as the daemon does, then writes `then`
/// and holds the connection open for `hold` (a silent daemon).
fn fake_daemon(dir: &Path, then: Vec<u8>, hold: Duration) -> std::path::PathBuf {
    use nodescope::{
        protocol::{Hello, Message, PROTOCOL_VERSION},
        source::{SourceInfo, SourceKind},
    };
    let path = dir.join("fake.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let hello = Message::Hello(Hello {
        v: PROTOCOL_VERSION,
        source: SourceInfo {
            kind: SourceKind::Sim,
            kernel: "simulator".into(),
            devices: vec!["sim0".into()],
            detail: "a fake daemon \u{1b}[2J".into(),
        },
        banner: None,
        origin_ns: 0,
        window_ns: 1_000_000_000,
        tuning: false,
    })
    .encode()
    .unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        use std::io::Write as _;
        // The client may stop reading (a refused line): errors here are its business.
        let _ = stream
            .write_all(&hello)
            .and_then(|()| stream.write_all(&then));
        std::thread::sleep(hold);
    });
    path
}

/// Issue 33, finding 8: the `--connect` client trusted its server. A 62 MB line (under the
/// 64 MiB cap then) cost 1.4-2.1 GB; now a line over 4 MiB is refused in bounded memory.
#[test]
fn a_connect_client_refuses_a_huge_line_in_bounded_memory() {
    let dir = scratch("connect-huge");
    let mut line = b"{\"type\":\"window\",\"text\":\"\",\"line\":[".to_vec();
    line.extend(std::iter::repeat_n(b"0,".as_slice(), 31_000_000).flatten());
    line.extend_from_slice(b"0]}\n");
    let socket = fake_daemon(dir.path(), line, Duration::from_secs(30));
    let run = run(
        &["stream", "--json", "--connect", socket.to_str().unwrap()],
        dir.path(),
        None,
    );
    run.assert_bounded("stream --connect, a 62 MB line");
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("a line longer than 4 MiB"),
        "{}",
        run.stderr
    );
}

/// Issue 33, finding 8: `--duration` counted windows only (against a silent daemon
/// `--duration 2` ran 10 s and 21 s), and the daemon's text reached the terminal raw. Now the
/// run ends by --duration + 1 s of wall time, and control characters arrive escaped.
#[test]
fn a_connect_client_ends_by_its_duration_and_escapes_the_daemons_text() {
    let dir = scratch("connect-silent");
    // The client prints the text form from the daemon's line: a hostile comm in it.
    let window = nodescope::protocol::Message::Window {
        line: serde_json::json!({"t": 1, "processes": [{"comm": "\u{1b}]0;pwned\u{7}", "pid": 3}]}),
    };
    let socket = fake_daemon(
        dir.path(),
        window.encode().unwrap().to_vec(),
        Duration::from_secs(30),
    );
    let run = run(
        &[
            "stream",
            "--duration",
            "2",
            "--connect",
            socket.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(run.success, "{}", run.stderr);
    assert!(run.wall < Duration::from_secs(2 + 1 + 3), "{:?}", run.wall);
    assert!(
        run.stdout.contains("\\x1b]0;pwned\\x07[3] r=0"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains('\u{1b}') && !run.stderr.contains('\u{1b}'));
    assert!(
        run.stderr.contains("a fake daemon \\x1b[2J"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("--duration passed with 1 of 2 windows"),
        "{}",
        run.stderr
    );
}
