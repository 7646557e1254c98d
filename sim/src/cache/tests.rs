//! Exact expectations for each mechanism, on synthetic node blocks.
use tracer_common::{
    Decoded, EventKind as K, Queue, QUEUE_1024, QUEUE_256, QUEUE_512, QUEUE_COUNT, QUEUE_RAW,
    RESTORE_FAIL_CRC, RESTORE_FAIL_FOOTER, RESTORE_FAIL_INODE_CHECKSUM, RESTORE_FAIL_LZ4_LEN,
    RESTORE_FAIL_NODE_TYPE, RESTORE_FAIL_PAYLOAD_LEN, RESTORE_FAIL_SLOT_SIZE,
    SECOND_CHANCE_BY_RACE, SECOND_CHANCE_BY_SHRINKER, SECOND_CHANCE_BY_WORKER,
};

use super::{
    admission::{self, Admission},
    worker::{PassStats, WorkerPass, WorkerStep},
    Served, SlotSet,
};
use crate::{
    f2fs::node::RequestedType,
    testutil::{brief, inode_block, rig, seal, Rig},
};

const CONVERT: u8 = K::Convert as u8;
const SECOND: u8 = K::SecondChance as u8;

fn get(r: &mut Rig, nid: u32, want: RequestedType) -> Served {
    r.cache.get(nid, want, &mut r.disk, &mut r.em).unwrap().0
}

fn compress_all(r: &mut Rig, nids: std::ops::Range<u32>) {
    r.load(nids);
    r.pass(25);
    r.events();
}

#[test]
fn worker_gives_referenced_entries_a_second_chance_and_does_not_revisit_them() {
    let mut r = rig(4, 0);
    r.load(100..104);
    assert_eq!(get(&mut r, 101, RequestedType::Any), Served::RawHit); // REFERENCED
    r.events();
    let stats = r.pass(25);
    assert_eq!(
        stats,
        PassStats {
            scanned: 4,
            candidates: 3,
            converted: 3,
            second_chances: 1,
            ..PassStats::default()
        }
    );
    assert_eq!(
        brief(&r.events()),
        [
            (CONVERT, 100, QUEUE_256, 0),
            (SECOND, 101, QUEUE_RAW, SECOND_CHANCE_BY_WORKER),
            (CONVERT, 102, QUEUE_256, 0),
            (CONVERT, 103, QUEUE_256, 0),
        ]
    );
    // 101 went behind the remembered tail: raw, unreferenced, converted by the next pass.
    assert_eq!(r.cache.queue_nids(QUEUE_RAW), [101]);
    assert!(!r.cache.entry(101).unwrap().referenced);
    assert_eq!(r.cache.queue_nids(QUEUE_256), [100, 102, 103]);
    assert_eq!(r.pass(25).converted, 1);
}

#[test]
fn worker_stops_at_256_candidates_and_reschedules_every_32() {
    let mut r = rig(2000, 0);
    r.load(100..2100);
    let stats = r.pass(25);
    assert_eq!(
        (
            stats.scanned,
            stats.candidates,
            stats.converted,
            stats.reschedules
        ),
        (256, 256, 256, 8)
    );
    assert_eq!(r.cache.queue_len(QUEUE_256), 256);
    assert_eq!(r.cache.stats.worker_passes, 1);
}

#[test]
fn worker_stops_at_1024_scanned() {
    let mut r = rig(2000, 0);
    r.load(100..2100);
    for nid in 100..2100 {
        get(&mut r, nid, RequestedType::Any); // all REFERENCED: no candidates
    }
    let stats = r.pass(25);
    assert_eq!(
        (
            stats.scanned,
            stats.candidates,
            stats.second_chances,
            stats.reschedules
        ),
        (1024, 0, 1024, 32)
    );
    // The 1024 second chances moved to the tail in order; the rest are still ahead.
    let raw = r.cache.queue_nids(QUEUE_RAW);
    assert_eq!(
        (raw[0], raw[975], raw[976], raw[1999]),
        (1124, 2099, 100, 1123)
    );
}

#[test]
fn rejected_results_stay_raw_and_move_behind_the_remembered_tail() {
    let mut r = rig(2, 2);
    r.load(100..104);
    r.events();
    let stats = r.pass(25);
    assert_eq!(
        (stats.converted, stats.rejected, stats.candidates),
        (2, 2, 4)
    );
    let kinds: Vec<u8> = r.events().iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            CONVERT,
            CONVERT,
            K::ConvertReject as u8,
            K::ConvertReject as u8
        ]
    );
    assert_eq!(r.cache.queue_nids(QUEUE_RAW), [102, 103]);
    // Threshold 0 admits nothing.
    let mut off = rig(1, 0);
    off.load([100]);
    assert_eq!(off.pass(0).rejected, 1);
}

#[test]
fn an_access_between_compression_and_publication_aborts_the_conversion() {
    let mut r = rig(2, 0);
    r.load(100..102);
    r.events();
    let mut pass = WorkerPass::start(&mut r.cache, 25);
    assert!(matches!(
        pass.step(&mut r.cache, &mut r.em),
        WorkerStep::Compressing { .. }
    ));
    assert_eq!(get(&mut r, 100, RequestedType::Any), Served::RawHit); // the race
    while !matches!(pass.step(&mut r.cache, &mut r.em), WorkerStep::Done { .. }) {}
    assert_eq!(
        brief(&r.events()),
        [
            (K::ConvertAbort as u8, 100, 0, 0),
            (SECOND, 100, QUEUE_RAW, SECOND_CHANCE_BY_RACE),
            (CONVERT, 101, QUEUE_256, 0)
        ]
    );
    assert_eq!((pass.stats.aborted, pass.stats.converted), (1, 1));
    let entry = r.cache.entry(100).unwrap();
    assert!(entry.raw().is_some() && !entry.referenced && !entry.converting);
    assert_eq!(r.cache.queue_nids(QUEUE_RAW), [100]);
    assert_eq!(r.cache.stats.events.convert_aborts, 1);
}

#[test]
fn shrinker_gives_referenced_entries_a_second_chance() {
    let mut r = rig(3, 0);
    r.load(100..103);
    get(&mut r, 100, RequestedType::Any);
    r.events();
    let result = r.cache.shrink_scan(2, &mut r.em);
    assert_eq!(
        (
            result.scanned[0],
            result.reclaimed[0],
            result.second_chances
        ),
        (2, 1, 1)
    );
    assert_eq!(
        brief(&r.events()),
        [
            (SECOND, 100, QUEUE_RAW, SECOND_CHANCE_BY_SHRINKER),
            (K::Reclaim as u8, 101, QUEUE_RAW, 0)
        ]
    );
    assert_eq!(r.cache.queue_nids(QUEUE_RAW), [102, 100]);
    assert!(!r.cache.entry(100).unwrap().referenced);
}

#[test]
fn shrinker_second_chance_applies_to_compressed_queues_too() {
    let mut r = rig(3, 0);
    compress_all(&mut r, 100..103);
    let slot = r.cache.slot_of(100).unwrap() as usize;
    r.cache.entries[slot].referenced = true;
    let result = r.cache.shrink_scan(2, &mut r.em);
    assert_eq!((result.scanned[1], result.reclaimed[1]), (2, 1));
    assert_eq!(r.cache.queue_nids(QUEUE_256), [102, 100]);
}

#[test]
fn weights_give_the_effective_count_and_the_quotas() {
    let mut r = rig(102, 0);
    compress_all(&mut r, 102..202);
    r.load(100..102); // 2 raw, 100 compressed in 256-byte slots
                      // (2 x 16 + 100 x 1) / 16 = 8.25, rounded up.
    assert_eq!(r.cache.shrink_count(), 9);
    // Raw's share: 64 x 32 / 132 = 15.5 -> 15, capped at its 2 entries; the other 13 go to the
    // 256 queue: 64 x 100 / 132 = 48.5 -> 48, + 13 = 61.
    assert_eq!(r.cache.shrink_quotas(64)[..4], [2, 61, 0, 0]);
}

#[test]
fn rounding_credit_is_carried_across_calls() {
    let mut r = rig(16, 0);
    compress_all(&mut r, 101..116);
    r.load([100]); // 1 raw (weight 16) and 15 compressed (weight 1): shares 16/31 and 15/31
    let quotas: Vec<[u64; 4]> = (0..4)
        .map(|_| r.cache.shrink_quotas(1)[..4].try_into().unwrap())
        .collect();
    assert_eq!(
        quotas,
        [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]]
    );
    // Without the carried credit every call would round to nothing.
    let mut fresh = rig(16, 0);
    compress_all(&mut fresh, 101..116);
    fresh.load([100]);
    fresh.cache.shrink_credit = [0; crate::cache::CACHE_QUEUES];
    assert_eq!(fresh.cache.shrink_quotas(1)[..4], [0, 0, 0, 0]);
}

#[test]
fn unused_quota_of_a_capped_queue_is_redistributed() {
    let mut r = rig(5, 0);
    compress_all(&mut r, 101..105);
    r.load([100]); // 1 raw, 4 compressed: raw share 10 x 16/20 = 8, capped at 1
    let result = r.cache.shrink_scan(10, &mut r.em);
    assert_eq!(result.quotas[..4], [1, 4, 0, 0]);
    assert_eq!(result.reclaimed[..4], [1, 4, 0, 0]);
    assert_eq!(r.cache.memory().entries, 0);
}

#[test]
fn restore_brings_the_raw_block_back() {
    let mut r = rig(1, 0);
    compress_all(&mut r, 100..101);
    let before = r.disk.reads;
    assert_eq!(get(&mut r, 100, RequestedType::Inode), Served::Restored);
    let events = r.events();
    assert_eq!(brief(&events), [(K::Restore as u8, 100, QUEUE_256, 0)]);
    assert!(events[0].latency_ns > 0 && events[0].len > 0);
    assert_eq!(r.disk.reads, before);
    let entry = r.cache.entry(100).unwrap();
    assert_eq!(&entry.raw().unwrap()[..], &r.disk.peek(100).unwrap()[..]);
    assert!(entry.referenced);
    assert_eq!(r.cache.memory().slot_bytes, 0);
}

/// Tamper with the compressed copy of 100, access it, expect RestoreFail(reason) + NodeRead,
/// and the read's Insert: the copy's entry ended, the read began another.
fn expect_fallback(want: RequestedType, reason: u8, tamper: impl FnOnce(&mut super::Compressed)) {
    let mut r = rig(1, 0);
    compress_all(&mut r, 100..101);
    assert!(r.cache.tamper(100, tamper));
    let reads = r.disk.reads;
    assert_eq!(
        get(&mut r, 100, want),
        Served::RestoreFailedThenRead(reason)
    );
    let events = r.events();
    assert_eq!(
        brief(&events)
            .iter()
            .map(|(k, n, _, why)| (*k, *n, *why))
            .collect::<Vec<_>>(),
        [
            (K::RestoreFail as u8, 100, reason),
            (K::NodeRead as u8, 100, 0),
            (K::Insert as u8, 100, 0)
        ],
        "reason {reason}"
    );
    assert_eq!(r.disk.reads, reads + 1);
    let entry = r.cache.entry(100).unwrap();
    assert_eq!(&entry.raw().unwrap()[..], &r.disk.peek(100).unwrap()[..]);
    assert_eq!(
        (r.cache.queue_len(QUEUE_RAW), r.cache.queue_len(QUEUE_256)),
        (1, 0)
    );
    assert_eq!(r.cache.stats.events.restore_fails, 1);
    assert_eq!(
        (r.cache.stats.events.inserts, r.cache.stats.events.forgets),
        (2, 0)
    );
}

/// Replace the payload with the compression of a changed block (CRC updated to match), so
/// that the later checks see it.
fn recompress(c: &mut super::Compressed, change: impl FnOnce(&mut crate::f2fs::Block)) {
    let mut block = [0u8; 4096];
    super::lz4::decompress_into(&c.slot[..c.clen as usize], &mut block).unwrap();
    change(&mut block);
    let mut scratch = [0u8; super::lz4::MAX_COMPRESSED];
    let clen = super::lz4::compress_into(&block, &mut scratch);
    let payload = &scratch[..clen];
    c.slot[..payload.len()].copy_from_slice(payload);
    c.clen = payload.len() as u32;
    c.crc = crate::f2fs::crc::f2fs_crc32(&block);
}

#[test]
fn corrupted_payload_falls_back_to_a_disk_read() {
    expect_fallback(RequestedType::Any, RESTORE_FAIL_LZ4_LEN, |c| {
        let clen = c.clen as usize;
        c.slot[..clen].fill(0xff);
    });
}

#[test]
fn each_validation_step_has_its_reason_in_order() {
    expect_fallback(RequestedType::Any, RESTORE_FAIL_SLOT_SIZE, |c| {
        c.slot_bytes = 512
    });
    expect_fallback(RequestedType::Any, RESTORE_FAIL_PAYLOAD_LEN, |c| {
        c.clen = 300
    });
    expect_fallback(RequestedType::Any, RESTORE_FAIL_LZ4_LEN, |c| c.clen -= 1);
    expect_fallback(RequestedType::Any, RESTORE_FAIL_CRC, |c| c.crc ^= 1);
    expect_fallback(RequestedType::Any, RESTORE_FAIL_FOOTER, |c| {
        recompress(c, |b| b[4072..4076].copy_from_slice(&999u32.to_le_bytes()));
    });
    expect_fallback(RequestedType::Any, RESTORE_FAIL_INODE_CHECKSUM, |c| {
        recompress(c, |b| b[16] ^= 1)
    });
    expect_fallback(RequestedType::Any, RESTORE_FAIL_INODE_CHECKSUM, |c| {
        recompress(c, |b| {
            b[16] ^= 1;
            b[20] ^= 1;
        })
    });
    expect_fallback(RequestedType::NonInode, RESTORE_FAIL_NODE_TYPE, |_| {});
    // A sealed change passes every check.
    let mut r = rig(1, 0);
    compress_all(&mut r, 100..101);
    r.cache.tamper(100, |c| {
        recompress(c, |b| {
            b[16] ^= 1;
            seal(b);
        })
    });
    assert_eq!(get(&mut r, 100, RequestedType::Inode), Served::Restored);
}

#[test]
fn allocation_failure_keeps_the_compressed_copy() {
    let mut r = rig(1, 0);
    compress_all(&mut r, 100..101);
    r.cache.alloc.fail_next = 1;
    let reads = r.disk.reads;
    assert_eq!(get(&mut r, 100, RequestedType::Inode), Served::NoMem);
    assert_eq!(
        brief(&r.events()),
        [(K::RestoreNomem as u8, 100, QUEUE_256, 0)]
    );
    assert_eq!(r.disk.reads, reads);
    assert!(r.cache.entry(100).unwrap().compressed().is_some());
    assert_eq!(r.cache.queue_nids(QUEUE_256), [100]);
    // The caller retries: now it restores.
    assert_eq!(get(&mut r, 100, RequestedType::Inode), Served::Restored);
    assert_eq!(r.cache.stats.events.restore_nomem, 1);
    assert_eq!(r.cache.stats.events.restores, 1);
}

#[test]
fn attributed_memory_follows_the_representations() {
    let mut r = rig(3, 0);
    r.load(100..103);
    assert_eq!(r.cache.memory().attributed_bytes, 19_960 + 3 * (88 + 4096));
    r.pass(25);
    assert_eq!(r.cache.memory().attributed_bytes, 19_960 + 3 * (88 + 256));
}

#[test]
fn hooks_see_the_same_events_the_emitter_records() {
    // Every event kind the cache emits is recorded with the rig's task and device.
    let mut r = rig(2, 0);
    r.load(100..102);
    let events = r.events();
    assert!(events
        .iter()
        .all(|e| e.dev == 7 && e.tgid == 4242 && e.uid == 10_001 && e.comm_bytes() == b"tester"));
    let kinds: Vec<u8> = events.iter().map(|e| e.kind).collect();
    let (read, insert) = (K::NodeRead as u8, K::Insert as u8);
    assert_eq!(kinds, [read, insert, read, insert]);
    assert!(events.iter().all(|e| e.flags == 0));
}

fn shaped_rig(count: u32, slots: &str, weights: &str) -> Rig {
    let mut r = rig(count, 0);
    let slots = crate::cache::SlotSet::parse(slots).unwrap();
    let weights = crate::cache::Weights::parse(weights).unwrap();
    r.cache
        .set_config(crate::cache::CacheConfig::new(slots, weights).unwrap());
    r
}

#[test]
fn raw_only_weights_reclaim_only_raw_entries_and_slot_only_weights_only_compressed_ones() {
    // 4 raw entries and 6 compressed ones (all in the smallest slot), 5 entries to scan.
    let mut raw_only = shaped_rig(10, "256/512/1024", "1:0:0:0");
    compress_all(&mut raw_only, 104..110);
    raw_only.load(100..104);
    let result = raw_only.cache.shrink_scan(5, &mut raw_only.em);
    // Raw's quota is capped at its 4 entries; the compressed queues weigh nothing.
    assert_eq!(result.reclaimed[..4], [4, 0, 0, 0]);
    assert_eq!(
        raw_only.cache.stats.events.reclaims.to_array(),
        [4, 0, 0, 0]
    );

    let mut slot_only = shaped_rig(10, "256/512/1024", "0:1:1:1");
    compress_all(&mut slot_only, 104..110);
    slot_only.load(100..104);
    let result = slot_only.cache.shrink_scan(5, &mut slot_only.em);
    assert_eq!(result.reclaimed[..4], [0, 5, 0, 0]);
    assert_eq!(
        slot_only.cache.stats.events.reclaims.to_array(),
        [0, 5, 0, 0]
    );
    // With raw weighing nothing, the effective count is the compressed entries in units of 1.
    assert_eq!(slot_only.cache.shrink_count(), 1);
}

#[test]
fn a_slot_set_below_every_compressed_length_retains_nothing_compressed() {
    let mut r = shaped_rig(6, "64", "16:1");
    let clen = match admission::compress(&inode_block(100, 0), 100, &SlotSet::RFC) {
        Admission::Admit { clen, .. } => clen,
        Admission::Reject { .. } => panic!("the rig's inodes compress"),
    };
    assert!(
        clen > 64,
        "the rig's inodes compress to {clen} bytes, within 64"
    );
    compress_all(&mut r, 100..106);
    assert_eq!(r.cache.stats.events.conversions, 0);
    assert_eq!(r.cache.stats.events.convert_rejects, 6);
    assert_eq!(r.cache.queue_lens(), [6, 0, 0, 0]);
}

#[test]
fn a_fourth_slot_size_gets_its_own_queue_and_restores_from_it() {
    let mut r = shaped_rig(4, "128/256/512/1024", "32:1:2:4:8");
    compress_all(&mut r, 100..104);
    let (clen, slot_bytes) = {
        let c = r.cache.entry(100).unwrap().compressed().unwrap();
        (c.clen, c.slot_bytes)
    };
    let queue = r.cache.config().slots.slot_for(clen).unwrap().1;
    assert_eq!(r.cache.queue_slot_bytes(queue), slot_bytes);
    assert_eq!(r.cache.queue_len(queue), 4);
    assert_eq!(get(&mut r, 100, RequestedType::Any), Served::Restored);
    assert_eq!(r.cache.queue_len(queue), 3);
    assert_eq!(r.cache.queue_len(0), 1);
}

/// A rig over inodes 100.. whose noise cycles so that they compress into each slot size, and
/// one in five not at all.
fn mixed_rig(count: u32) -> Rig {
    const NOISE: [usize; 5] = [0, 300, 500, 800, 3000];
    let blocks = (100..100 + count)
        .map(|nid| (nid, inode_block(nid, NOISE[nid as usize % NOISE.len()])))
        .collect();
    let nodes = std::sync::Arc::new(crate::nodes::NodeSet::from_blocks(
        blocks,
        true,
        crate::testutil::SEED,
    ));
    let check = super::NodeCheck {
        inode_checksums: true,
        checksum_seed: crate::testutil::SEED,
    };
    Rig {
        cache: super::NodeCache::new(check),
        disk: crate::disk::Disk::new(nodes),
        em: crate::events::Emitter::new(7, true),
    }
}

/// Per queue, (arrivals - departures) counted from the events, as a tracer counts them.
fn population_from_events(events: &[tracer_common::Event]) -> [i64; QUEUE_COUNT] {
    let raw = Queue::Raw.index();
    let mut held = [0i64; QUEUE_COUNT];
    for event in events {
        match event.decode() {
            Decoded::Insert { .. } => held[raw] += 1,
            Decoded::Convert { queue, .. } => {
                held[raw] -= 1;
                held[queue.index()] += 1;
            }
            Decoded::Restore { queue, .. } => {
                held[queue.index()] -= 1;
                held[raw] += 1;
            }
            Decoded::Reclaim { queue, .. }
            | Decoded::RestoreFail { queue, .. }
            | Decoded::Forget { queue, .. } => held[queue.index()] -= 1,
            _ => {}
        }
    }
    held
}

#[test]
fn inserts_and_forgets_let_the_events_count_every_queue_exactly() {
    let mut r = mixed_rig(41);
    r.load(100..140);
    r.pass(25);
    let lens = r.cache.queue_lens();
    assert!(
        lens.iter().all(|n| *n > 0),
        "every queue holds some: {lens:?}"
    );
    let head = |r: &Rig, queue: u8| r.cache.queue_nids(queue)[0];
    // Restores, and a failed one (its disk read inserts again).
    for queue in [QUEUE_256, QUEUE_512, QUEUE_1024] {
        let nid = head(&r, queue);
        assert_eq!(get(&mut r, nid, RequestedType::Any), Served::Restored);
    }
    let stale = head(&r, QUEUE_512);
    assert!(r.cache.tamper(stale, |c| c.crc ^= 1));
    assert!(matches!(
        get(&mut r, stale, RequestedType::Any),
        Served::RestoreFailedThenRead(RESTORE_FAIL_CRC)
    ));
    // Creations over a compressed copy and over a raw entry (each forgotten), and a new node.
    let block = |nid: u32| std::sync::Arc::from(inode_block(nid, 0));
    for nid in [head(&r, QUEUE_1024), head(&r, QUEUE_RAW), 500] {
        r.cache.create(nid, block(nid), &mut r.em);
    }
    // A converting entry forgotten: the pass's pending conversion is no longer its to publish.
    r.load([140]);
    let mut pass = WorkerPass::start(&mut r.cache, 25);
    assert!(matches!(
        pass.step(&mut r.cache, &mut r.em),
        WorkerStep::Compressing { .. }
    ));
    assert!(r.cache.entry(140).unwrap().converting);
    r.cache.create(140, block(140), &mut r.em);
    while !matches!(pass.step(&mut r.cache, &mut r.em), WorkerStep::Done { .. }) {}
    // Reclaims, raw and compressed; the reclaimed read back (readahead too) and converted.
    r.cache.shrink_scan(64, &mut r.em);
    let gone: Vec<u32> = (100..141).filter(|nid| !r.cache.contains(*nid)).collect();
    assert!(gone.len() >= 4, "reclaimed {gone:?}");
    r.load(gone[..2].iter().copied());
    for nid in &gone[2..] {
        assert!(r.cache.readahead(*nid, &mut r.disk, &mut r.em).unwrap());
    }
    r.pass(25);

    let events = r.events();
    let count = |kind: K| events.iter().filter(|e| e.kind == kind as u8).count() as u64;
    let stats = r.cache.stats;
    assert_eq!(
        (count(K::Insert), count(K::Forget)),
        (stats.events.inserts, stats.events.forgets)
    );
    assert_eq!(stats.events.forgets, 3);
    // The loads, the failed restore's read, the four creations, 140, the reclaimed read back.
    assert_eq!(stats.events.inserts, 40 + 1 + 4 + 1 + gone.len() as u64);
    assert_eq!((stats.events.restores, stats.events.restore_fails), (3, 1));
    assert!(
        stats.events.reclaims.raw > 0 && stats.events.reclaims.compressed() > 0,
        "{:?}",
        stats.events.reclaims
    );
    let forgotten: Vec<u8> = events
        .iter()
        .filter(|e| e.kind == K::Forget as u8)
        .map(|e| e.queue)
        .collect();
    assert_eq!(forgotten, [QUEUE_1024, QUEUE_RAW, QUEUE_RAW]);
    assert_eq!(stats.events.conversions, count(K::Convert));
    assert_eq!(
        population_from_events(&events),
        r.cache.queue_lens().map(i64::from)
    );
}
