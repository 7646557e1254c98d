use tracer_common::{
    knobs::{shown, Knobs},
    Event, EventKind,
};

use super::*;
use crate::model::{Model, ModelConfig};

const SECOND: u64 = 1_000_000_000;

/// Just enough of a protobuf reader to check what `encode` wrote: (field, value) pairs, where
/// a length-delimited value is its bytes and a varint or fixed64 its number.
#[derive(Debug)]
enum Value<'a> {
    Number(u64),
    Bytes(&'a [u8]),
}

fn fields(mut bytes: &[u8]) -> Vec<(u32, Value<'_>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes);
        let value = match key & 7 {
            0 => Value::Number(varint(&mut bytes)),
            1 => {
                let (number, rest) = bytes.split_at(8);
                bytes = rest;
                Value::Number(u64::from_le_bytes(number.try_into().unwrap()))
            }
            2 => {
                let len = varint(&mut bytes) as usize;
                let (payload, rest) = bytes.split_at(len);
                bytes = rest;
                Value::Bytes(payload)
            }
            other => panic!("wire type {other}"),
        };
        out.push(((key >> 3) as u32, value));
    }
    out
}

fn varint(bytes: &mut &[u8]) -> u64 {
    let mut value = 0;
    for shift in (0..64).step_by(7) {
        let byte = bytes[0];
        *bytes = &bytes[1..];
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
    }
    value
}

fn bytes_of<'a>(fields: &[(u32, Value<'a>)], field: u32) -> Option<&'a [u8]> {
    fields.iter().find_map(|(f, v)| match v {
        Value::Bytes(b) if *f == field => Some(*b),
        _ => None,
    })
}

fn number_of(fields: &[(u32, Value<'_>)], field: u32) -> Option<u64> {
    fields.iter().find_map(|(f, v)| match v {
        Value::Number(n) if *f == field => Some(*n),
        _ => None,
    })
}

/// Two windows of reads by process 7, one empty window, one more read: the trace.
fn recorded() -> Recorded {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    let read = |ts| Event::new(EventKind::NodeRead, ts).task(7).comm("reader");
    for ts in [1, 2, SECOND + 1, 3 * SECOND + 5] {
        model.ingest(&read(ts));
    }
    model.advance_to(4 * SECOND);
    Recorded {
        header: Header {
            knobs: Some(Knobs {
                threshold: 40,
                interval_ms: 500,
            }),
            ..Header::default()
        },
        windows: model.take_closed(),
        notes: vec![Note {
            ts_ns: 2 * SECOND + 7,
            kind: "knobs".into(),
            text: "threshold 40% interval 500 ms -> threshold 70% interval 900 ms".into(),
        }],
        marks: vec![Event::new(EventKind::Checkpoint, 2 * SECOND)],
        packages: Packages::default(),
    }
}

/// The trace's packets, each as its fields.
fn packets(trace: &[u8]) -> Vec<&[u8]> {
    fields(trace)
        .into_iter()
        .map(|(field, value)| {
            assert_eq!(field, fields::trace::PACKET);
            let Value::Bytes(packet) = value else {
                panic!("a packet is a message")
            };
            packet
        })
        .collect()
}

#[test]
fn per_window_counts_sum_to_the_total_and_drop_to_zero_when_idle() {
    let trace = encode(&recorded());
    let packets = packets(&trace);
    let first = fields(packets[0]);
    assert_eq!(
        number_of(&first, fields::trace_packet::SEQUENCE_FLAGS),
        Some(1)
    );
    // The process's demand-read track: its uuid from the descriptors, its samples from events.
    let mut process = None;
    let mut demand = None;
    let mut samples = Vec::new();
    for packet in &packets {
        let packet = fields(packet);
        assert_eq!(
            number_of(&packet, fields::trace_packet::TRUSTED_PACKET_SEQUENCE_ID),
            Some(SEQUENCE_ID)
        );
        if let Some(descriptor) = bytes_of(&packet, fields::trace_packet::TRACK_DESCRIPTOR) {
            let descriptor = fields(descriptor);
            let uuid = number_of(&descriptor, fields::track_descriptor::UUID);
            if bytes_of(&descriptor, fields::track_descriptor::PROCESS).is_some() {
                process = uuid;
            }
            let name = bytes_of(&descriptor, fields::track_descriptor::NAME);
            let parent = number_of(&descriptor, fields::track_descriptor::PARENT_UUID);
            if name == Some(b"node reads demand") && parent == process {
                demand = uuid;
            }
        }
        if let Some(event) = bytes_of(&packet, fields::trace_packet::TRACK_EVENT) {
            let event = fields(event);
            if number_of(&event, fields::track_event::TRACK_UUID) == demand {
                let ts = number_of(&packet, fields::trace_packet::TIMESTAMP).unwrap();
                let value = number_of(&event, fields::track_event::COUNTER_VALUE).unwrap();
                samples.push((ts / SECOND, value));
            }
        }
    }
    assert!(demand.is_some(), "the process has a demand-read track");
    assert_eq!(samples, [(0, 2), (1, 1), (2, 0), (3, 1)]);
}

#[test]
fn knob_values_are_read_back_from_their_notes() {
    let before = Some(Knobs {
        threshold: 10,
        interval_ms: 200,
    });
    let after = Some(Knobs {
        threshold: 60,
        interval_ms: 1500,
    });
    let text = format!("{} -> {}", shown(before), shown(after));
    assert_eq!(knobs_after(&text), after);
    let unreadable = format!("{} -> {}", shown(before), shown(None));
    assert_eq!(knobs_after(&unreadable), None);
    assert_eq!(knobs_after("something else"), None);
}

#[test]
fn checkpoints_and_notes_are_instants_and_knob_changes_move_the_knob_counters() {
    let trace = encode(&recorded());
    let mut instants = Vec::new();
    let mut counter_values = Vec::new();
    for packet in packets(&trace) {
        let packet = fields(packet);
        let Some(event) = bytes_of(&packet, fields::trace_packet::TRACK_EVENT) else {
            continue;
        };
        let event = fields(event);
        let ts = number_of(&packet, fields::trace_packet::TIMESTAMP).unwrap();
        match number_of(&event, fields::track_event::TYPE) {
            Some(fields::track_event::TYPE_INSTANT) => {
                let name = bytes_of(&event, fields::track_event::NAME).unwrap();
                instants.push((ts, String::from_utf8_lossy(name).into_owned()));
            }
            _ => counter_values.push(number_of(&event, fields::track_event::COUNTER_VALUE)),
        }
    }
    assert_eq!(
        instants,
        [
            (2 * SECOND, "checkpoint".to_string()),
            (
                2 * SECOND + 7,
                "knobs: threshold 40% interval 500 ms -> threshold 70% interval 900 ms".into()
            )
        ]
    );
    for knob in [40, 500, 70, 900] {
        assert!(counter_values.contains(&Some(knob)), "knob value {knob}");
    }
}

/// Issue 51: timed lookups get tracks of their own under each app and each process: `node
/// lookups`, one per outcome seen, and `lookup wait` in ns (a time counter); per window, so the
/// samples sum to the recording's totals. A recording without them has none of these tracks.
#[test]
fn timed_lookups_are_per_app_tracks_whose_samples_sum_to_the_totals() {
    let untimed = encode(&recorded());
    let names = |trace: &[u8]| -> Vec<String> {
        packets(trace)
            .iter()
            .filter_map(|p| {
                let packet = fields(p);
                let descriptor = fields(bytes_of(&packet, fields::trace_packet::TRACK_DESCRIPTOR)?);
                let name = bytes_of(&descriptor, fields::track_descriptor::NAME)?;
                Some(String::from_utf8_lossy(name).into_owned())
            })
            .collect()
    };
    assert!(!names(&untimed).iter().any(|n| n.contains("lookup")));

    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    let lookup = |ts, outcome, ns| {
        let mut e = Event::new(EventKind::NodeAccess, ts).task(7).comm("reader");
        e.reason = outcome;
        e.latency_ns = ns;
        e
    };
    for (ts, outcome, ns) in [
        (1, tracer_common::RETRIEVAL_DISK_READ, 90_000),
        (2, tracer_common::RETRIEVAL_DISK_READ, 90_000),
        (3, tracer_common::RETRIEVAL_HIT, 300),
        (SECOND + 1, tracer_common::RETRIEVAL_WAITED, 40_000),
    ] {
        model.ingest(&lookup(ts, outcome, ns));
    }
    model.advance_to(3 * SECOND);
    let trace = encode(&Recorded {
        header: Header::default(),
        windows: model.take_closed(),
        notes: Vec::new(),
        marks: Vec::new(),
        packages: Packages::default(),
    });
    // Track uuid -> (name, parent, unit); then each track's samples.
    let mut tracks = std::collections::HashMap::new();
    let mut samples: std::collections::HashMap<u64, Vec<(u64, u64)>> = Default::default();
    for packet in packets(&trace) {
        let packet = fields(packet);
        if let Some(descriptor) = bytes_of(&packet, fields::trace_packet::TRACK_DESCRIPTOR) {
            let descriptor = fields(descriptor);
            let uuid = number_of(&descriptor, fields::track_descriptor::UUID).unwrap();
            let name = bytes_of(&descriptor, fields::track_descriptor::NAME)
                .map(|n| String::from_utf8_lossy(n).into_owned());
            let unit = bytes_of(&descriptor, fields::track_descriptor::COUNTER)
                .and_then(|c| number_of(&fields(c), fields::counter_descriptor::UNIT));
            tracks.insert(uuid, (name, unit));
        }
        if let Some(event) = bytes_of(&packet, fields::trace_packet::TRACK_EVENT) {
            let event = fields(event);
            if let Some(value) = number_of(&event, fields::track_event::COUNTER_VALUE) {
                let track = number_of(&event, fields::track_event::TRACK_UUID).unwrap();
                let ts = number_of(&packet, fields::trace_packet::TIMESTAMP).unwrap();
                samples.entry(track).or_default().push((ts / SECOND, value));
            }
        }
    }
    // Per track of that name: its unit and its samples (window, value).
    type Found = Vec<(Option<u64>, Vec<(u64, u64)>)>;
    let of = |wanted: &str| -> Found {
        let mut found: Vec<_> = tracks
            .iter()
            .filter(|(_, (name, _))| name.as_deref() == Some(wanted))
            .map(|(uuid, (_, unit))| (*unit, samples.get(uuid).cloned().unwrap_or_default()))
            .collect();
        found.sort();
        found
    };
    // One under the app (`program reader`), one under the process: the same samples.
    let wait = (Some(1), vec![(0, 180_300), (1, 40_000), (2, 0)]);
    assert_eq!(of("lookup wait"), [wait.clone(), wait]);
    let lookups = (Some(2), vec![(0, 3), (1, 1), (2, 0)]);
    assert_eq!(of("node lookups"), [lookups.clone(), lookups]);
    let disk = (Some(2), vec![(0, 2), (1, 0)]);
    assert_eq!(of("lookups disk_read"), [disk.clone(), disk]);
    assert_eq!(of("lookups waited").len(), 2);
    assert!(of("lookups restore").is_empty(), "no restore: no track");
}

/// The clock snapshots the trace holds, as (MONOTONIC, BOOTTIME) pairs.
fn clock_snapshots(trace: &[u8]) -> Vec<(u64, u64)> {
    use fields::clock_snapshot as cs;
    let mut out = Vec::new();
    for packet in packets(trace) {
        let packet = fields(packet);
        let Some(snapshot) = bytes_of(&packet, fields::trace_packet::CLOCK_SNAPSHOT) else {
            continue;
        };
        let (mut monotonic, mut boottime) = (None, None);
        for (field, value) in fields(snapshot) {
            let (cs::CLOCKS, Value::Bytes(clock)) = (field, value) else {
                continue;
            };
            let clock = fields(clock);
            let ns = number_of(&clock, cs::CLOCK_TIMESTAMP);
            match number_of(&clock, cs::CLOCK_ID) {
                Some(cs::BUILTIN_CLOCK_MONOTONIC) => monotonic = ns,
                Some(cs::BUILTIN_CLOCK_BOOTTIME) => boottime = ns,
                other => panic!("clock {other:?}"),
            }
        }
        out.push((monotonic.unwrap(), boottime.unwrap()));
    }
    out
}

/// Recorded clock pairs become snapshots only when possible: BOOTTIME never below MONOTONIC,
/// neither clock going backwards from the last snapshot kept. The others are left out,
/// counted, and named by an instant where they were recorded.
#[test]
fn impossible_clock_pairs_are_left_out_and_said() {
    let mut recorded = recorded();
    let clock = |monotonic_ns: u64, boottime_ns: u64| {
        ClockPair {
            monotonic_ns,
            boottime_ns,
        }
        .note()
    };
    recorded.notes = vec![
        clock(SECOND, 6 * SECOND),
        // BOOTTIME below MONOTONIC.
        clock(2 * SECOND, SECOND),
        // MONOTONIC backwards.
        clock(SECOND / 2, 7 * SECOND),
        // BOOTTIME backwards.
        clock(3 * SECOND, 5 * SECOND),
        // A suspend: kept.
        clock(3 * SECOND, 66 * SECOND),
    ];
    let (bytes, finished) = encode_finished(&recorded);
    assert_eq!(
        clock_snapshots(&bytes),
        [(SECOND, 6 * SECOND), (3 * SECOND, 66 * SECOND)]
    );
    assert_eq!(
        finished.dropped_clocks.len(),
        3,
        "{:?}",
        finished.dropped_clocks
    );
    assert!(finished.dropped_clocks[0].contains("BOOTTIME below MONOTONIC"));
    assert!(finished.dropped_clocks[1].contains("going backwards"));
    assert!(finished.dropped_clocks[2].contains("going backwards"));
    let instants = packets(&bytes)
        .into_iter()
        .filter_map(|packet| {
            let event = fields(bytes_of(
                &fields(packet),
                fields::trace_packet::TRACK_EVENT,
            )?);
            let name = bytes_of(&event, fields::track_event::NAME)?;
            Some(String::from_utf8_lossy(name).into_owned())
        })
        .filter(|name| name.starts_with("clock snapshot dropped"))
        .count();
    assert_eq!(instants, 3);
}
