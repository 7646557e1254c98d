//! `export --perfetto` in bounded memory, whatever the recording holds: the trace is written
//! as the replay goes, a window's instants are folded past a bound (the rest counted in one
//! instant), and process tracks are bounded (the rest summed on `other processes`). Each run's
//! peak RSS is from wait4 (common/bounded.rs). Before, 1 M checkpoints took ~155 MB, 1 M
//! lost-event markers ~186 MB and 200,000 short-lived processes ~590 MB.
use std::{path::Path, process::Command};

use tracer_common::{Event, EventKind};

mod common;

use common::{bounded::run, recording_header, scratch};
use nodescope::record::writer::Writer;

const SECOND: u64 = 1_000_000_000;

/// Far above what an export of the markers needs now (~16 MB), far below what it needed.
const MARKS_RSS_LIMIT_KB: i64 = 64 * 1024;

/// The same for the processes (~60 MB now, most of it the model's per-process totals that
/// the report needs too; ~590 MB before).
const PROCESSES_RSS_LIMIT_KB: i64 = 128 * 1024;

const CHECKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check_perfetto.py");

/// Export `recording`: the trace's bytes, after checking the run's peak memory.
fn export(recording: &Path, dir: &Path, what: &str, limit_kb: i64) -> Vec<u8> {
    let trace = dir.join(format!("{what}.perfetto-trace"));
    let run = run(
        &[
            "export",
            "--perfetto",
            recording.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ],
        dir,
        None,
    );
    println!(
        "export --perfetto of {what}: peak RSS {} KiB, {:?}",
        run.max_rss_kb, run.wall
    );
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.max_rss_kb < limit_kb,
        "{what}: peak RSS {} KiB\n{}",
        run.max_rss_kb,
        run.stderr
    );
    std::fs::read(&trace).unwrap()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

fn count(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle.as_bytes())
        .count()
}

/// Run the Perfetto protos' checker on `trace` against `report --json` of `recording`.
fn check(recording: &Path, trace: &[u8], dir: &Path) -> String {
    let trace_path = dir.join("checked.perfetto-trace");
    std::fs::write(&trace_path, trace).unwrap();
    let report = dir.join("report.json");
    let json = common::nodescope(&["report", recording.to_str().unwrap(), "--json"]).stdout;
    std::fs::write(&report, json).unwrap();
    let check = Command::new("python3")
        .args([
            CHECKER,
            trace_path.to_str().unwrap(),
            report.to_str().unwrap(),
        ])
        .output()
        .expect("run python3 (cargo xtask setup installs the perfetto package it needs)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(check.status.success(), "check_perfetto.py failed:\n{said}");
    said
}

const MILLION: u64 = 1_000_000;

/// `events` recorded at `path` in 1 s windows, written as they are made: the test's own
/// memory stays small (a child's peak RSS starts from its parent's, as spawned).
fn write_recording(path: &Path, events: impl Iterator<Item = Event>) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut writer = Writer::new(file, &recording_header(SECOND)).unwrap();
    let mut end_ns = 0;
    for event in events {
        end_ns = event.ts_ns;
        writer.event(&event).unwrap();
    }
    writer.finish(end_ns).unwrap();
}

#[test]
fn a_million_identical_checkpoints_export_in_bounded_memory_folded() {
    let dir = scratch("perfetto-checkpoints");
    let path = dir.path().join("checkpoints.nsr");
    let events = (0..MILLION).map(|_| Event::new(EventKind::Checkpoint, SECOND));
    write_recording(&path, events);
    let trace = export(&path, dir.path(), "checkpoints", MARKS_RSS_LIMIT_KB);
    // 64 instants, and one saying how many more; the counters count them all.
    assert_eq!(count(&trace, "\x0acheckpoint"), 64);
    let more = format!("{} more checkpoints", MILLION - 64);
    assert!(contains(&trace, &more), "no `{more}` instant");
    assert!(trace.len() < 64 * 1024, "{} bytes", trace.len());
    check(&path, &trace, dir.path());
}

#[test]
fn a_million_lost_event_markers_export_in_bounded_memory_folded() {
    let dir = scratch("perfetto-lost");
    let path = dir.path().join("lost.nsr");
    // Two windows' worth: each window's markers are one instant with their summed count.
    let events = (0..MILLION)
        .map(|i| Event::new(EventKind::Lost, SECOND + (i / (MILLION / 2)) * SECOND).len(3));
    write_recording(&path, events);
    let trace = export(&path, dir.path(), "lost", MARKS_RSS_LIMIT_KB);
    let folded = format!("lost {} events ({} markers)", 3 * MILLION / 2, MILLION / 2);
    assert_eq!(count(&trace, &folded), 2, "no two `{folded}` instants");
    check(&path, &trace, dir.path());
}

#[test]
fn short_lived_processes_export_in_bounded_memory_with_the_reports_sums() {
    const PROCESSES: u32 = 200_000;
    let dir = scratch("perfetto-processes");
    let path = dir.path().join("processes.nsr");
    // One node read each, a thousand processes a second, under four names (four apps).
    let events = (0..PROCESSES).map(|pid| {
        Event::new(EventKind::NodeRead, u64::from(pid) * MILLION)
            .task(pid + 1)
            .nid(pid)
            .comm(&format!("worker{}", pid % 4))
    });
    write_recording(&path, events);
    let trace = export(&path, dir.path(), "processes", PROCESSES_RSS_LIMIT_KB);
    assert!(contains(&trace, "other processes"));
    let said = check(&path, &trace, dir.path());
    println!("{said}");
    assert!(said.contains(" 1024 processes,"), "{said}");
    assert!(
        said.contains(&format!("{PROCESSES} reads on process tracks")),
        "{said}"
    );
    assert!(said.contains("4 apps match the report"), "{said}");
}

/// A trace that cannot be written whole (here, past the file size limit: EFBIG) is not left
/// behind half written, and the error says so.
#[test]
fn a_trace_that_fails_part_way_is_removed_and_said() {
    use std::os::unix::process::CommandExt as _;
    let dir = scratch("perfetto-partial");
    let path = dir.path().join("processes.nsr");
    let events = (0..5_000u32).map(|pid| {
        Event::new(EventKind::NodeRead, u64::from(pid) * MILLION)
            .task(pid + 1)
            .comm("worker")
    });
    write_recording(&path, events);
    let trace = dir.path().join("partial.perfetto-trace");
    let mut command = Command::new(common::NODESCOPE);
    command.args(["export", "--perfetto", path.to_str().unwrap(), "-o"]);
    command.arg(&trace);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 16 * 1024,
                rlim_max: 16 * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("removed, incomplete"), "{stderr}");
    assert!(!trace.exists(), "the partial trace is left: {stderr}");
}
