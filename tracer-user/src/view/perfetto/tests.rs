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
