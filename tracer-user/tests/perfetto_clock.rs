//! Perfetto on the system's timeline (issue 51): a kernel recording's clock notes (CLOCK_MONOTONIC
//! paired with CLOCK_BOOTTIME, again after a suspend moved them apart) become clock snapshots
//! and every packet names CLOCK_MONOTONIC, so that merged with a trace stamped in BOOTTIME,
//! nodescope's samples land at the right BOOTTIME on either side of the suspend
//! (tests/data/check_perfetto_clock.py, with Perfetto's own protos).
mod common;

use std::{fs::File, io::BufWriter, process::Command};

use common::{nodescope, scratch};
use nodescope::record::{writer::Writer, ClockPair, Header};
use tracer_common::{Event, EventKind};

const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/check_perfetto_clock.py"
);
const SECOND: u64 = 1_000_000_000;
/// Suspended 5 s before the recording began, and 60 s during it.
const BEFORE: u64 = 5 * SECOND;
const SUSPEND: u64 = 60 * SECOND;

#[test]
fn a_kernel_recording_lands_on_boottime_across_a_suspend() {
    let dir = scratch("perfetto-clock");
    let recording = dir.path().join("run.nsr");
    let header = Header {
        source: "bpf".into(),
        window_ns: SECOND,
        clock_origin_ns: SECOND,
        ..Header::default()
    };
    let mut writer =
        Writer::new(BufWriter::new(File::create(&recording).unwrap()), &header).unwrap();
    let pair = |monotonic_ns: u64, boottime_ns: u64| ClockPair {
        monotonic_ns,
        boottime_ns,
    };
    writer.note(&pair(SECOND, SECOND + BEFORE).note()).unwrap();
    let read = |ts: u64| {
        Event::new(EventKind::NodeRead, ts)
            .task(77)
            .comm("cat")
            .dev(7)
    };
    writer.event(&read(SECOND + SECOND / 2)).unwrap();
    // A suspend between the two windows: MONOTONIC stood still, BOOTTIME went on.
    writer
        .note(&pair(3 * SECOND, 3 * SECOND + BEFORE + SUSPEND).note())
        .unwrap();
    writer.event(&read(3 * SECOND + SECOND / 2)).unwrap();
    writer.event(&read(4 * SECOND + SECOND / 2)).unwrap();
    writer.finish(5 * SECOND).unwrap();

    let trace = dir.path().join("run.perfetto-trace");
    nodescope(&[
        "export",
        "--perfetto",
        recording.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    let merged = dir.path().join("merged.perfetto-trace");
    let expect = |mono: u64, boot: u64| format!("node reads demand:{mono}:{boot}");
    let check = Command::new("python3")
        .arg(CHECKER)
        .args([trace.to_str().unwrap(), merged.to_str().unwrap()])
        .arg(expect(SECOND, SECOND + BEFORE))
        .arg(expect(3 * SECOND, 3 * SECOND + BEFORE + SUSPEND))
        .arg(expect(4 * SECOND, 4 * SECOND + BEFORE + SUSPEND))
        .output()
        .expect("run python3 (cargo xtask setup installs the perfetto package it needs)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(check.status.success(), "{said}");
    assert!(said.contains("2 clock snapshots"), "{said}");
}

#[test]
fn a_simulator_recording_keeps_its_own_clock() {
    let dir = scratch("perfetto-sim-clock");
    let recording = dir.path().join("sim.nsr");
    let knobs = dir.path().join("knobs");
    nodescope(&[
        "record",
        "-o",
        recording.to_str().unwrap(),
        "--source",
        "sim",
        "--sysfs-root",
        knobs.to_str().unwrap(),
        "--duration",
        "2",
        "--speed",
        "0",
    ]);
    let contents = nodescope::record::reader::read_all(&std::fs::read(&recording).unwrap())
        .expect("a readable recording");
    assert!(contents.damage.is_none());
    let kinds: Vec<&str> = contents
        .items
        .iter()
        .filter_map(|item| match item {
            nodescope::record::reader::Item::Note(note) => Some(note.kind.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !kinds.contains(&"clock"),
        "the simulator's clock is virtual: no BOOTTIME pair ({kinds:?})"
    );
}
