//! The mechanism's own counters in a recording (issue 49): `Counter` events, as the kernel
//! source writes them from a debugfs counters file, give `report` and a replayed `stream` the
//! counters' totals for the kinds they count, and the entries per queue; the kinds they do not
//! count keep the events' totals, and the processes keep what their events say.
mod common;

use std::process::Command;

use common::write_recording;
use nodescope::record::Header;
use tracer_common::{
    Event, EventKind, Measure, QUEUE_1024, QUEUE_256, QUEUE_512, QUEUE_RAW, RESTORE_FAIL_CRC,
    SECOND_CHANCE_BY_WORKER,
};

const DEV: u32 = (254 << 20) | 16;
const SECOND: u64 = 1_000_000_000;

fn nodescope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nodescope"))
}

fn counter(ts: u64, measure: Measure, sub: Option<u8>, value: u64) -> Event {
    Event::counter(ts, DEV, measure, sub, value)
}

/// Two readings of a module's counters a few seconds apart, and between them the restores one
/// process made (seen one by one), 2 of the counters' 3.
fn events() -> Vec<Event> {
    let convert = Measure::Events(EventKind::Convert);
    let restore = Measure::Events(EventKind::Restore);
    let fail = Measure::Events(EventKind::RestoreFail);
    let reclaim = Measure::Events(EventKind::Reclaim);
    let chance = Measure::Events(EventKind::SecondChance);
    let mut events = vec![
        counter(SECOND, convert, None, 1_000),
        counter(SECOND, restore, None, 50),
        counter(SECOND, fail, Some(RESTORE_FAIL_CRC), 4),
        counter(SECOND, reclaim, Some(QUEUE_256), 10),
        counter(SECOND, chance, Some(SECOND_CHANCE_BY_WORKER), 100),
    ];
    for (queue, entries) in [
        (QUEUE_RAW, 7),
        (QUEUE_256, 9),
        (QUEUE_512, 0),
        (QUEUE_1024, 2),
    ] {
        events.push(counter(SECOND, Measure::Entries, Some(queue), entries));
    }
    for n in 0..2 {
        events.push(
            Event::new(EventKind::Restore, 2 * SECOND + n)
                .task(4242)
                .comm("cat")
                .dev(DEV)
                .nid(100 + n as u32),
        );
    }
    let later = 2 * SECOND + SECOND / 2;
    events.extend([
        counter(later, convert, None, 1_040),
        counter(later, restore, None, 53),
        counter(later, fail, Some(RESTORE_FAIL_CRC), 5),
        counter(later, reclaim, Some(QUEUE_256), 16),
        counter(later, chance, Some(SECOND_CHANCE_BY_WORKER), 130),
        counter(later, Measure::Entries, Some(QUEUE_256), 12),
    ]);
    // The recording goes on past the readings' window.
    events.push(
        Event::new(EventKind::NodeRead, 3 * SECOND + 5)
            .task(4242)
            .comm("cat")
            .dev(DEV),
    );
    events
}

fn recording(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("counters.nsr");
    let header = Header {
        source: "bpf".into(),
        window_ns: SECOND,
        clock_origin_ns: SECOND,
        ..Header::default()
    };
    write_recording(&path, &header, &events());
    path
}

#[test]
fn a_reports_totals_are_the_counters_and_its_processes_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path());
    let out = nodescope()
        .args(["report", "--json", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = &report["totals"];
    assert_eq!(totals["conversions"], 40);
    assert_eq!(totals["restores"], 3, "the counters', not the 2 events'");
    assert_eq!(totals["restore_fails"], 1);
    assert_eq!(totals["restore_fail_reasons"]["crc"], 1);
    assert_eq!(totals["reclaims"]["b256"], 6);
    assert_eq!(totals["second_chance_reasons"]["worker"], 30);
    assert_eq!(
        totals["node_reads"], 1,
        "no counter of node reads: the events'"
    );
    let cache = &report["cache"];
    assert_eq!(
        (
            cache["raw_entries"].as_u64(),
            cache["slots"]["b256"].as_u64()
        ),
        (Some(7), Some(12))
    );
    assert_eq!(cache["slots"]["b1024"], 2);
    let apps = report["apps"].as_array().unwrap();
    let cat = apps
        .iter()
        .find(|a| a["app"]["name"] == "cat" || a["app"] == "cat");
    let cat = cat.unwrap_or_else(|| panic!("no cat in {apps:?}"));
    assert_eq!(
        cat["total"]["restores"], 2,
        "a process keeps the restores it was seen making"
    );
}

#[test]
fn a_replayed_stream_says_what_the_counters_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path());
    let out = nodescope()
        .args(["stream", "--json", "--source", "replay", "--speed", "0"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().expect("a window");
    assert_eq!(last["cumulative"]["conversions"], 40);
    assert_eq!(last["cumulative"]["restores"], 3);
    assert_eq!(last["counters"]["kinds"]["convert"], 40);
    assert_eq!(last["counters"]["entries"]["b256"], 12);
    let restores: u64 = lines
        .iter()
        .map(|l| l["totals"]["restores"].as_u64().unwrap())
        .sum();
    assert_eq!(
        restores, 3,
        "the windows' restores add up to the counters' total"
    );
}
