use tracer_common::{Event, EventKind};

use super::{
    reader::{read_all, Item},
    writer::Writer,
    Header, Note,
};

fn sample_events(n: u32) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let kind = if i % 7 == 0 {
                EventKind::Restore
            } else {
                EventKind::NodeRead
            };
            Event::new(kind, u64::from(i) * 1000)
                .task(100 + i % 13)
                .nid(i)
        })
        .collect()
}

fn recording(events: &[Event]) -> Vec<u8> {
    let header = Header {
        kernel: "test".into(),
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    let mut writer = Writer::new(Vec::new(), &header).unwrap();
    for (i, event) in events.iter().enumerate() {
        writer.event(event).unwrap();
        if i == 5000 {
            let note = Note {
                ts_ns: event.ts_ns,
                kind: "knobs".into(),
                text: "threshold 30".into(),
            };
            writer.note(&note).unwrap();
        }
    }
    writer.finish(99_000_000).unwrap().0
}

#[test]
fn a_recording_reads_back_exactly() {
    let events = sample_events(10_000);
    let bytes = recording(&events);
    let contents = read_all(&bytes).unwrap();
    assert!(contents.damage.is_none());
    assert_eq!(contents.header.kernel, "test");
    let back: Vec<Event> = contents.events().copied().collect();
    assert_eq!(back, events);
    let footer = contents.footer().unwrap();
    assert_eq!((footer.events, footer.blocks, footer.notes), (10_000, 4, 1));
    assert_eq!(footer.end_ns, 99_000_000);
    let notes = contents
        .items
        .iter()
        .filter(|i| matches!(i, Item::Note(_)))
        .count();
    assert_eq!(notes, 1);
}

/// Cut the file at many offsets: never a panic, always a prefix of the events, and the damage
/// named unless the cut falls exactly between records.
#[test]
fn truncation_at_any_offset_keeps_the_intact_prefix() {
    let events = sample_events(9_000);
    let bytes = recording(&events);
    let mut offsets: Vec<usize> = (0..bytes.len()).step_by(97).collect();
    offsets.extend([bytes.len() - 1, 1, 8, 13, 17]);
    for cut in offsets {
        let Ok(contents) = read_all(&bytes[..cut]) else {
            continue; // the header itself was cut: an error, never a panic
        };
        let back: Vec<Event> = contents.events().copied().collect();
        assert_eq!(back[..], events[..back.len()], "cut at {cut}");
        assert!(
            contents.footer().is_none(),
            "cut at {cut} cannot keep the footer"
        );
        if let Some(damage) = &contents.damage {
            assert!(damage.offset as usize <= cut, "cut at {cut}: {damage}");
        }
    }
}

#[test]
fn flipped_bytes_are_caught_by_checksums_and_name_the_record() {
    let events = sample_events(9_000);
    let bytes = recording(&events);
    let header_end = 18 + u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    for position in (0..bytes.len()).step_by(331) {
        let mut damaged = bytes.clone();
        damaged[position] ^= 0x5a;
        if position < header_end {
            let err = read_all(&damaged)
                .err()
                .expect("a damaged header is an error");
            assert!(
                err.record.is_none() && err.offset as usize <= position,
                "{err}"
            );
            continue;
        }
        let contents = read_all(&damaged).unwrap();
        let damage = contents
            .damage
            .as_ref()
            .unwrap_or_else(|| panic!("flip at {position} undetected"));
        assert!(damage.record.is_some());
        assert!(
            damage.offset as usize <= position,
            "flip at {position}: {damage}"
        );
        let back: Vec<Event> = contents.events().copied().collect();
        assert_eq!(back[..], events[..back.len()]);
    }
}

#[test]
fn a_wrong_version_or_magic_is_a_clear_error() {
    let mut bytes = recording(&sample_events(10));
    bytes[8] = 9;
    let err = read_all(&bytes).err().unwrap().to_string();
    assert_eq!(
        err,
        "header at byte offset 8: format version 9, this nodescope reads 1"
    );
    let err = read_all(b"hello world").err().unwrap().to_string();
    assert!(err.contains("not a nodescope recording"), "{err}");
}

/// Leaves a small valid recording where `cargo xtask test` seeds the fuzzer's corpus from.
#[test]
fn write_fuzz_seed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-seed");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = recording(&sample_events(300));
    std::fs::write(dir.join("recording.nsr"), &bytes).unwrap();
    assert_eq!(read_all(&bytes).unwrap().events().count(), 300);
}

/// The knob pair is one value in the header but keeps its two fields on disk: recordings made
/// before (two nulls, or two numbers) read as they were, and new ones write the same names.
#[test]
fn header_knobs_keep_their_two_fields_on_disk() {
    let with = Header {
        knobs: Some(tracer_common::knobs::Knobs {
            threshold: 40,
            interval_ms: 500,
        }),
        ..Header::default()
    };
    let json = serde_json::to_value(&with).unwrap();
    assert_eq!(json["threshold"], 40);
    assert_eq!(json["interval_ms"], 500);
    assert_eq!(serde_json::from_value::<Header>(json).unwrap(), with);
    let mut old = serde_json::to_value(Header::default()).unwrap();
    old["threshold"] = serde_json::Value::Null;
    old["interval_ms"] = serde_json::Value::Null;
    assert_eq!(serde_json::from_value::<Header>(old).unwrap().knobs, None);
    let mut half = serde_json::to_value(&with).unwrap();
    half.as_object_mut().unwrap().remove("interval_ms");
    assert_eq!(serde_json::from_value::<Header>(half).unwrap().knobs, None);
}

/// Batches written with `Writer::events`, across block boundaries and with lost-event records
/// among them, make the same file byte for byte as the events written one at a time.
#[test]
fn a_batch_writes_the_same_bytes_as_its_events_one_by_one() {
    let mut events = sample_events(9_000);
    for (i, event) in events.iter_mut().enumerate().filter(|(i, _)| i % 1000 == 3) {
        *event = Event::new(EventKind::Lost, event.ts_ns).len(i as u32 + 1);
    }
    let header = Header {
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    let mut one_by_one = Writer::new(Vec::new(), &header).unwrap();
    events.iter().for_each(|e| one_by_one.event(e).unwrap());
    let mut batched = Writer::new(Vec::new(), &header).unwrap();
    for chunk in events.chunks(1_777) {
        batched.events(chunk).unwrap();
    }
    batched.events(&[]).unwrap();
    let (one_by_one, footer) = one_by_one.finish(0).unwrap();
    let (batched, batched_footer) = batched.finish(0).unwrap();
    assert_eq!(batched, one_by_one);
    let lost: u64 = (0..9).map(|k| k * 1000 + 4).sum();
    assert_eq!((batched_footer.events, batched_footer.lost), (9_000, lost));
    assert_eq!(footer.blocks, batched_footer.blocks);
    let back: Vec<Event> = read_all(&batched).unwrap().events().copied().collect();
    assert_eq!(back, events);
}
