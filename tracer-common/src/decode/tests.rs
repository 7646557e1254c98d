use super::*;

/// A raw event of `kind` with the given `queue` code, built the way the eBPF side writes one.
fn raw(kind: EventKind, queue: u8) -> Event {
    Event::new(kind, 1_000).dev(7).nid(42).queue(queue).len(300)
}

#[test]
fn every_kind_round_trips_to_its_variant() {
    let mut read = raw(EventKind::NodeRead, 0);
    read.flags = FLAG_READAHEAD | FLAG_SYNC;
    let mut checkpoint = raw(EventKind::Checkpoint, CP_PHASE_FINISH_BLOCK_OPS);
    checkpoint.reason = 0b101;
    let mut restore = raw(EventKind::Restore, QUEUE_512);
    restore.latency_ns = 9_000;
    let mut restore_fail = raw(EventKind::RestoreFail, QUEUE_1024);
    restore_fail.reason = RESTORE_FAIL_CRC;
    let mut second_chance = raw(EventKind::SecondChance, QUEUE_RAW);
    second_chance.reason = SECOND_CHANCE_BY_SHRINKER;
    let mut shrinker_scan = raw(EventKind::ShrinkerScan, 0);
    shrinker_scan.reason = 5;
    let access = raw(EventKind::NodeAccess, 0).flags(ACCESS_DIRTY);
    let cases = [
        (
            read,
            Decoded::NodeRead {
                nid: 42,
                readahead: true,
                sync: true,
            },
        ),
        (raw(EventKind::NodeWrite, 0), Decoded::NodeWrite { nid: 42 }),
        (
            checkpoint,
            Decoded::Checkpoint {
                phase: CheckpointPhase::FinishBlockOps,
                reason_flags: 0b101,
            },
        ),
        (
            raw(EventKind::Convert, QUEUE_256),
            Decoded::Convert {
                nid: 42,
                payload_len: 300,
                queue: Queue::B256,
            },
        ),
        (
            raw(EventKind::ConvertReject, 0),
            Decoded::ConvertReject {
                nid: 42,
                payload_len: 300,
            },
        ),
        (
            raw(EventKind::ConvertAbort, 0),
            Decoded::ConvertAbort { nid: 42 },
        ),
        (
            restore,
            Decoded::Restore {
                nid: 42,
                payload_len: 300,
                queue: Queue::B512,
                latency_ns: 9_000,
            },
        ),
        (
            restore_fail,
            Decoded::RestoreFail {
                nid: 42,
                payload_len: 300,
                queue: Queue::B1024,
                reason: Some(RestoreFailure::Crc),
            },
        ),
        (
            raw(EventKind::RestoreNomem, QUEUE_256),
            Decoded::RestoreNomem {
                nid: 42,
                queue: Queue::B256,
            },
        ),
        (
            raw(EventKind::Reclaim, QUEUE_RAW),
            Decoded::Reclaim {
                nid: 42,
                queue: Queue::Raw,
            },
        ),
        (
            raw(EventKind::Insert, QUEUE_RAW),
            Decoded::Insert { nid: 42 },
        ),
        (
            raw(EventKind::Forget, QUEUE_512),
            Decoded::Forget {
                nid: 42,
                queue: Queue::B512,
            },
        ),
        (
            second_chance,
            Decoded::SecondChance {
                nid: 42,
                queue: Queue::Raw,
                by: Some(SecondChanceBy::Shrinker),
            },
        ),
        (raw(EventKind::Lost, 0), Decoded::Lost { count: 300 }),
        (raw(EventKind::Hello, 0), Decoded::Hello),
        (
            access,
            Decoded::NodeAccess {
                nid: 42,
                access: Access::Modify,
                retrieval: None,
            },
        ),
        (raw(EventKind::NodeEvict, 0), Decoded::NodeEvict { nid: 42 }),
        (
            raw(EventKind::InodeEvict, 0),
            Decoded::InodeEvict { ino: 42 },
        ),
        (
            shrinker_scan,
            Decoded::ShrinkerScan {
                count: 42,
                to_scan: 300,
                priority: 5,
            },
        ),
        (
            raw(EventKind::MetaWrite, META_AREA_NAT),
            Decoded::MetaWrite {
                block: 42,
                area: MetaArea::Nat,
            },
        ),
        (
            raw(EventKind::JournalEntry, JOURNAL_SIT),
            Decoded::JournalEntry(JournalEntry::Sit { segment: 42 }),
        ),
        (
            Event::counter(
                1,
                7,
                Measure::Events(EventKind::Reclaim),
                Some(QUEUE_512),
                1234,
            ),
            Decoded::Counter(CounterReading {
                measure: Measure::Events(EventKind::Reclaim),
                sub: Some(QUEUE_512),
                value: 1234,
            }),
        ),
    ];
    assert_eq!(cases.len(), EventKind::ALL.len(), "one case per kind");
    for (event, expected) in cases {
        assert_eq!(event.decode(), expected, "{:?}", event.kind());
        assert_eq!(expected.kind(), event.kind());
    }
}

#[test]
fn every_code_round_trips() {
    for queue in Queue::ALL {
        assert_eq!(Queue::from_code(queue.code()), Some(queue));
        assert_eq!(queue.index(), usize::from(queue.code()));
        assert_eq!(queue.is_compressed(), queue != Queue::Raw);
    }
    assert_eq!(Queue::B512.slot_bytes(), 512);
    assert_eq!(Queue::Raw.slot_bytes(), 4096);
    for phase in CheckpointPhase::ALL {
        assert_eq!(CheckpointPhase::from_code(phase.code()), Some(phase));
    }
    for area in MetaArea::ALL {
        assert_eq!(MetaArea::from_code(area.code()), Some(area));
    }
    assert_eq!(MetaArea::Nat.name(), "nat");
    for failure in RestoreFailure::ALL {
        assert_eq!(RestoreFailure::from_code(failure.code()), Some(failure));
        let named = RESTORE_FAIL_REASONS
            .iter()
            .any(|(code, _)| *code == failure.code());
        assert!(named, "{failure:?} is in RESTORE_FAIL_REASONS");
    }
    for by in SecondChanceBy::ALL {
        assert_eq!(SecondChanceBy::from_code(by.code()), Some(by));
    }
    for access in [Access::Lookup, Access::Create, Access::Modify] {
        assert_eq!(Access::from_flags(access.flags()), access);
    }
    // The simulator flags a creation new and dirty: creation wins.
    assert_eq!(
        Access::from_flags(ACCESS_NEW | ACCESS_DIRTY),
        Access::Create
    );
}

#[test]
fn every_meta_area_of_the_layout_decodes() {
    let areas = MetaAreas::MKFS_1GIB;
    let blocks = [
        (0, MetaArea::Other),
        (512, MetaArea::Cp),
        (1536, MetaArea::Sit),
        (2560, MetaArea::Nat),
        (4608, MetaArea::Ssa),
        (5120, MetaArea::Other),
    ];
    for (block, area) in blocks {
        let event = Event::new(EventKind::MetaWrite, 1)
            .nid(block)
            .queue(areas.area_of(block));
        assert_eq!(event.decode(), Decoded::MetaWrite { block, area });
    }
}

#[test]
fn a_counter_of_a_total_and_of_an_unknown_measure() {
    let total = Event::counter(1, 7, Measure::Entries, None, 9);
    assert_eq!(
        total.decode(),
        Decoded::Counter(CounterReading {
            measure: Measure::Entries,
            sub: None,
            value: 9,
        })
    );
    let mut unknown = total;
    unknown.reason = 0x90;
    assert_eq!(
        unknown.decode(),
        Decoded::Unknown(Unrecognised::Code {
            kind: EventKind::Counter,
            code: 0x90
        })
    );
}

#[test]
fn unknown_kinds_decode_to_unknown() {
    for kind in [0, 23, 31, 200, 255] {
        let mut event = Event::ZERO;
        event.kind = kind;
        assert_eq!(event.decode(), Decoded::Unknown(Unrecognised::Kind(kind)));
        assert_eq!(event.decode().kind(), None);
    }
}

#[test]
fn unknown_codes_decode_to_unknown_with_their_kind() {
    let cases = [
        (EventKind::Checkpoint, 3),
        (EventKind::Convert, 4),
        (EventKind::Restore, 200),
        (EventKind::RestoreFail, 4),
        (EventKind::RestoreNomem, 4),
        (EventKind::Reclaim, 255),
        (EventKind::SecondChance, 4),
        (EventKind::MetaWrite, META_AREA_COUNT as u8),
        (EventKind::JournalEntry, 2),
    ];
    for (kind, code) in cases {
        let decoded = raw(kind, code).decode();
        assert_eq!(decoded, Decoded::Unknown(Unrecognised::Code { kind, code }));
        assert_eq!(decoded.kind(), Some(kind));
    }
}

#[test]
fn unknown_reasons_keep_the_event() {
    // The kernel's own reason numbering may differ from ours: the event still counts.
    let mut fail = raw(EventKind::RestoreFail, QUEUE_256);
    fail.reason = 99;
    assert!(matches!(
        fail.decode(),
        Decoded::RestoreFail { reason: None, .. }
    ));
    let mut chance = raw(EventKind::SecondChance, QUEUE_256);
    chance.reason = 0;
    assert!(matches!(
        chance.decode(),
        Decoded::SecondChance { by: None, .. }
    ));
}

#[test]
fn kinds_without_a_code_ignore_the_queue_byte() {
    // Only kinds whose `queue` byte means something can have it unrecognised.
    for kind in [
        EventKind::NodeRead,
        EventKind::NodeWrite,
        EventKind::ConvertReject,
        EventKind::ConvertAbort,
        EventKind::Lost,
        EventKind::Hello,
        EventKind::NodeAccess,
        EventKind::NodeEvict,
    ] {
        assert!(
            !matches!(raw(kind, 250).decode(), Decoded::Unknown(_)),
            "{kind:?}"
        );
    }
}

#[test]
fn decoding_leaves_the_wire_layout_alone() {
    assert_eq!(core::mem::size_of::<Event>(), 64);
    let event = raw(EventKind::Convert, QUEUE_256);
    let bytes = event.as_bytes();
    assert_eq!(Event::from_bytes(bytes), Some(event));
    assert_eq!(
        Event::from_bytes(bytes).map(|e| e.decode()),
        Some(event.decode())
    );
}

#[test]
fn the_kind_match_agrees_with_the_discriminants() {
    for value in 0..=u8::MAX {
        if let Some(kind) = EventKind::from_u8(value) {
            assert_eq!(kind as u8, value);
        } else {
            assert!(EventKind::ALL.iter().all(|kind| *kind as u8 != value));
        }
    }
}
