//! Hostile recordings (issue 21, findings 2, 3, 6 and 10): one clear line, a finite run, and
//! memory bounded by the data, never by what a length or a timestamp claims. Each nodescope
//! run is measured: its peak RSS, from wait4 (common/bounded.rs). Careless flags are
//! bounds_flags.rs; whatif's limits bounds_whatif.rs; the `--connect` client bounds_connect.rs.
use std::{fs, path::Path};

use nodescope::record::{writer::Writer, Header, TAG_EVENTS};
use tracer_common::{Event, EventKind};

mod common;

use common::{
    bounded::{recording, run, Run},
    recording_header, replay_json_args, scratch,
};

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
    // Refused as what it is before a byte is read (issue 52: inputs are regular files).
    assert!(
        run.stderr
            .contains("not a regular file (a character device)"),
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
        let replay = self::run(&replay_json_args(path), dir.path(), None);
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

/// Issue 52, item 1: report and export kept every window closed inside one events block. 100
/// node reads 10 s apart in 1 ms windows (an 8.7 KB file) took `report` to 3.4 GB and
/// `export` to 5.0 GB. Now empty windows cost nothing: every form of the report and the
/// export stay under the limit, with the exact counts.
#[test]
fn a_sparse_recording_is_reported_and_exported_in_bounded_memory() {
    let dir = scratch("sparse");
    let path = dir.path().join("sparse.nsr");
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000)).unwrap();
    const READS: u64 = 100;
    const APART_NS: u64 = 10_000_000_000;
    for i in 0..READS {
        let event = Event::new(EventKind::NodeRead, i * APART_NS)
            .task(7)
            .nid(i as u32);
        writer.event(&event).unwrap();
    }
    let (bytes, _) = writer.finish((READS - 1) * APART_NS).unwrap();
    fs::write(&path, &bytes).unwrap();
    let file = path.to_str().unwrap();

    let json = run(&["report", "--json", file], dir.path(), None);
    json.assert_bounded("report --json");
    assert!(json.success, "{}", json.stderr);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["totals"]["node_reads_demand"], READS);

    let text = run(&["report", file], dir.path(), None);
    text.assert_bounded("report");
    assert!(text.success, "{}", text.stderr);

    let compare = run(
        &["report", "--compare", file, file, "--json"],
        dir.path(),
        None,
    );
    compare.assert_bounded("report --compare");
    assert!(compare.success, "{}", compare.stderr);
    let compared: serde_json::Value = serde_json::from_str(&compare.stdout).unwrap();
    assert!(
        compared.to_string().contains("\"node_reads\""),
        "{}",
        compare.stdout
    );

    let trace = dir.path().join("sparse.perfetto-trace");
    let export = run(
        &["export", "--perfetto", file, "-o", trace.to_str().unwrap()],
        dir.path(),
        None,
    );
    export.assert_bounded("export --perfetto");
    assert!(export.success, "{}", export.stderr);
    // Each read's window and the one after it, where its count drops to zero (the last
    // read's window is the recording's last).
    assert!(
        export
            .stderr
            .contains(&format!("{} windows", 2 * READS - 1)),
        "{}",
        export.stderr
    );
}
