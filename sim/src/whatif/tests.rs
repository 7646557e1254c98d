//! The what-if replay against the scenario it was recorded from.
use super::*;
use crate::{
    cache::PayloadSizes,
    scenario::vm_replay::{self, VmReplayParams},
};

/// vm-replay recorded with compression off, replayed at the scenario's own settings with
/// compression on: exactly the scenario's on side, with real LZ4 and with sizes per node.
#[test]
fn vm_replay_off_recording_replays_to_the_on_scenario_exactly() {
    let params = VmReplayParams::default();
    let (off_knobs, on_knobs) = vm_replay::side_knobs();
    let (off, events) = vm_replay::run_recorded(&params, off_knobs, 1).unwrap();
    let trace = Trace::from_events(&events).unwrap();
    let nodes = vm_replay::rfc_nodes().unwrap();
    trace.check_nids(&nodes).unwrap();
    let report = vm_replay::compare(&params, 1).unwrap();
    let on = report.equal_memory.on;
    let settings = Settings {
        knobs: on_knobs,
        budget_bytes: params.budget_bytes,
        reclaim: Reclaim::Budget,
        cache: crate::cache::CacheConfig::rfc(),
    };
    let sizes = Arc::new(PayloadSizes::lz4(&nodes));
    for payload in [Payload::Lz4, Payload::Sizes(sizes)] {
        let got = replay(&trace, nodes.clone(), settings, payload).unwrap();
        assert_eq!(got.pressure_episodes, 1);
        assert_eq!(
            (got.node_reads, got.restores, got.retained_nodes),
            (on.node_reads, on.restores, on.nodes)
        );
        assert_eq!(got.retained_bytes, on.bytes);
        // Issue 51: after the budget point each lookup is in one outcome; the replay reads
        // small files, so its node reads are the lookups' own disk reads.
        assert_eq!(got.lookups.restores, got.restores);
        assert_eq!(got.lookups.disk_reads, got.node_reads);
        assert_eq!(got.lookups.errors, 0);
        // One retrieval per replayed file after the pressure: no raw hit left (the cover
        // letter's restores + node reads = 16,384).
        assert_eq!(got.lookups.hits, 0);
        assert_eq!(got.lookups.total(), got.restores + got.node_reads);
        assert!(got.restore_ns > 0);
    }
    // The off side replays to itself too.
    let settings_off = Settings {
        knobs: off_knobs,
        ..settings
    };
    let got = replay(&trace, nodes, settings_off, Payload::Lz4).unwrap();
    let replayed = off.phase("replay").unwrap().totals;
    assert_eq!(
        (got.node_reads, got.restores, got.retained_nodes),
        (replayed.node_reads, 0, report.equal_memory.off.nodes)
    );
    // The end of the trace is the run's end: the entries it left, not the budget point's.
    let end = off.final_snapshot.memory;
    assert_eq!(
        (got.end_nodes, got.end_bytes),
        (end.entries, end.attributed_bytes)
    );
    assert_ne!(got.end_nodes, got.retained_nodes);
    // Every lookup of the run is in the trace (mount, parents, modifications, the replay), and
    // every created node: all 16,676 but the root, which the mount read.
    let count = |op: Op| trace.steps.iter().filter(|s| s.op == op).count() as u64;
    assert_eq!(
        count(Op::Lookup) + count(Op::Modify),
        off.whole.cache.lookups
    );
    assert_eq!(count(Op::Create), 16_675);
    assert_eq!(count(Op::Checkpoint), 1);
    assert_eq!(
        count(Op::Evict),
        off.phase("pressure")
            .unwrap()
            .totals
            .events()
            .reclaims
            .total()
    );
}

#[test]
fn a_recording_without_accesses_is_refused_with_the_flag_to_use() {
    let error = Trace::from_events(&[Event::ZERO]).unwrap_err().to_string();
    assert_eq!(
        error,
        "the recording has no node accesses: record with --accesses"
    );
}

/// A trace one step over the limit is refused, naming the limit; at the limit it is whole
/// (issue 33, finding 6: a small crafted recording claimed gigabytes of steps).
#[test]
fn a_trace_over_the_step_limit_is_refused_and_one_at_it_is_kept() {
    let lookup = |i: u64| Event::new(EventKind::NodeAccess, i).nid(i as u32);
    let mut builder = TraceBuilder::with_limit(0, 3);
    for i in 0..3 {
        builder.add(&lookup(i)).unwrap();
    }
    let error = builder.add(&lookup(3)).unwrap_err().to_string();
    assert!(error.contains("more than 3 steps"), "{error}");
    assert!(error.contains("record a shorter span"), "{error}");
    let trace = builder.finish().unwrap();
    assert_eq!((trace.steps.len(), trace.accesses), (3, 3));
}

/// A kernel's lookups reach a recording in per-CPU batches, behind the single events of their
/// time: the trace is put in time order (equal times keep the recording's order) and timed
/// from its earliest step, not from the first event read.
#[test]
fn a_trace_is_put_in_time_order_and_timed_from_its_earliest_step() {
    let lookup = |ts: u64, nid: u32| Event::new(EventKind::NodeAccess, ts).nid(nid);
    let mut evict = Event::new(EventKind::NodeEvict, 1_500).nid(9);
    evict.dev = 0;
    let mut builder = TraceBuilder::new(0);
    // The eviction came out first; the batch with the lookups before and after it, later.
    for event in [evict, lookup(1_000, 9), lookup(1_000, 8), lookup(2_000, 9)] {
        builder.add(&event).unwrap();
    }
    let trace = builder.finish().unwrap();
    let steps: Vec<(u64, u32, Op)> = trace.steps.iter().map(|s| (s.ts_ns, s.nid, s.op)).collect();
    assert_eq!(
        steps,
        [
            (0, 9, Op::Lookup),
            (0, 8, Op::Lookup),
            (500, 9, Op::Evict),
            (1_000, 9, Op::Lookup)
        ]
    );
}

#[test]
fn the_busiest_device_is_chosen_the_lowest_among_equals() {
    let on = |dev: u32| {
        let mut event = Event::new(EventKind::NodeAccess, 0);
        event.dev = dev;
        event
    };
    let mut counts = AccessesByDevice::default();
    for dev in [9, 4, 9, 4, 7] {
        counts.count(&on(dev));
    }
    assert_eq!(counts.busiest().unwrap(), 4);
}

/// Steady pressure: an eviction, then `lookups` lookups 1 ms apart, `cycles` times; `pause_ns`
/// of silence before the first lookup of every cycle.
fn pressed(cycles: u64, lookups: u64, pause_ns: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut ts = 0;
    for cycle in 0..cycles {
        steps.push(Step {
            ts_ns: ts,
            nid: 0,
            op: Op::Evict,
        });
        ts += pause_ns;
        for i in 0..lookups {
            ts += 1_000_000;
            let nid = (cycle * lookups + i) as u32;
            steps.push(Step {
                ts_ns: ts,
                nid,
                op: Op::Lookup,
            });
        }
    }
    steps
}

fn ended_at(steps: &[Step]) -> Vec<usize> {
    let ends = episode_ends(steps);
    (0..steps.len()).filter(|&i| ends[i]).collect()
}

/// A recorded system that was slowed (a descheduled guest) leaves gaps of seconds between
/// evictions with a few lookups in them: the limit held all along, so one episode, ending
/// only after the last eviction.
#[test]
fn a_slowed_recording_does_not_end_its_pressure_episode() {
    let steps = pressed(50, 10, 2_000_000_000);
    let last_evict = steps.len() - 11;
    let first_late = (last_evict + 1..steps.len())
        .find(|&i| steps[i].ts_ns >= steps[last_evict].ts_ns + PRESSURE_LINGER_NS)
        .unwrap();
    assert_eq!(ended_at(&steps), vec![first_late]);
}

/// A gap long in time and in lookups is a released limit: the episode ends at the first lookup
/// the linger time after the eviction, and the next eviction begins another.
#[test]
fn a_gap_long_in_time_and_lookups_ends_the_episode_where_the_linger_runs_out() {
    let lookups = PRESSURE_LINGER_LOOKUPS;
    let steps = pressed(2, lookups, 0);
    // Lookups are 1 ms apart: the 100th after the eviction is the first 100 ms after it.
    let linger_lookups = (PRESSURE_LINGER_NS / 1_000_000) as usize;
    let first_gap_end = linger_lookups;
    let second_gap_end = 1 + lookups as usize + linger_lookups;
    assert_eq!(ended_at(&steps), vec![first_gap_end, second_gap_end]);
    // One lookup fewer in the first gap and it is the same episode.
    let mut short = steps.clone();
    short.remove(5);
    assert_eq!(ended_at(&short), vec![second_gap_end - 1]);
}

/// A demand read that no timed lookup on its thread was running at is a lookup the trace
/// missed (an unhooked lookup function): one `UntracedLookup` step, not one of the accesses.
/// A read inside a timed lookup of its nid on its thread is that lookup's own; without timed
/// lookups no read is taken for a lookup.
#[test]
fn demand_reads_outside_timed_lookups_are_untraced_lookups() {
    let timed = |ts: u64, nid: u32, pid: u32| {
        let mut event = Event::new(EventKind::NodeAccess, ts).nid(nid);
        event.reason = tracer_common::RETRIEVAL_DISK_READ;
        event.latency_ns = 500;
        event.pid = pid;
        event
    };
    let read = |ts: u64, nid: u32, pid: u32, flags: u8| {
        let mut event = Event::new(EventKind::NodeRead, ts).nid(nid).flags(flags);
        event.pid = pid;
        event
    };
    let events = [
        timed(1_000, 7, 1),
        read(1_200, 7, 1, 0), // the lookup's own read
        read(1_300, 7, 2, 0), // another thread's: missed
        read(2_000, 7, 1, 0), // after the lookup returned: missed
        read(1_250, 8, 1, 0), // another nid: missed
        read(1_260, 9, 1, tracer_common::FLAG_READAHEAD), // readahead: an op of its own
    ];
    let mut builder = TraceBuilder::new(0);
    for event in &events {
        builder.add(event).unwrap();
    }
    let trace = builder.finish().unwrap();
    assert_eq!((trace.accesses, trace.untraced_lookups), (2, 3));
    let untraced: Vec<(u64, u32)> = trace
        .steps
        .iter()
        .filter(|s| s.op == Op::UntracedLookup)
        .map(|s| (s.ts_ns + 1_000, s.nid))
        .collect();
    assert_eq!(untraced, [(1_250, 8), (1_300, 7), (2_000, 7)]);

    let mut untimed = TraceBuilder::new(0);
    for event in &events {
        let mut event = *event;
        event.reason = 0;
        untimed.add(&event).unwrap();
    }
    let trace = untimed.finish().unwrap();
    assert_eq!((trace.accesses, trace.untraced_lookups), (2, 0));
}

/// `Reclaim::AsRecorded`: each entry the recorded kernel's shrinker scanned (a drop, or a
/// second chance it gave) has the replay's shrinker scan the same share of the replayed cache's
/// effective count as it was of the recorded kernel's node pages. Compression off, a drop is a
/// scan of one cold entry, reclaimed; with every entry compressed to a 256-byte slot (a
/// sixteenth of a raw entry in the count) the same drops scan a sixteenth as many.
#[test]
fn recorded_scans_take_the_same_share_of_the_cache() {
    let (mut trace, nodes, nids) = lookups_of(2_000);
    // 10 s later (every entry cold and, with compression on, converted), 100 drops.
    let later = 10_000_000_000;
    for i in 0..100u64 {
        trace.push(later + i * 1_000, nids[i as usize], Op::Evict);
    }
    let settings = as_recorded;
    let off = replay(&trace, nodes.clone(), settings(0), Payload::Lz4).unwrap();
    assert_eq!((off.reclaimed_raw, off.end_nodes), (100, 1_900));
    let on = replay(&trace, nodes.clone(), settings(25), Payload::Lz4).unwrap();
    assert_eq!(
        (on.reclaimed_raw, on.reclaimed_compressed, on.end_nodes),
        (0, 6, 1_994)
    );
    // What six 256-byte entries held.
    let mut before = trace.clone();
    before.steps.truncate(nids.len());
    before.push(later, nids[0], Op::Checkpoint);
    let held = replay(&before, nodes_again(), settings(25), Payload::Lz4).unwrap();
    assert_eq!(held.end_nodes, 2_000);
    assert_eq!(held.end_bytes - on.end_bytes, 6 * (256 + 88));
    // Second chances the recorded shrinker gave are scans too: 1,500 more, each a 1,900th of
    // the recorded cache (the drops left 1,900 pages), so about a sixteenth of 1,500 x 1,994 /
    // 1,900 more compressed entries: 102 in all.
    let mut scanned = trace.clone();
    for i in 0..1_500u64 {
        scanned.push(later + 200_000 + i * 1_000, nids[100], Op::Scan);
    }
    assert_eq!(scanned.scans, 1_500);
    let on = replay(&scanned, nodes, settings(25), Payload::Lz4).unwrap();
    assert_eq!((on.reclaimed_compressed, on.end_nodes), (102, 1_898));
}

fn nodes_again() -> Arc<NodeSet> {
    vm_replay::rfc_nodes().unwrap()
}

/// Inode evictions come from their own events (the inode number as nid), are counted apart
/// from lookups and node-page drops, and are no lookup.
#[test]
fn inode_evictions_are_steps_of_their_own() {
    let mut builder = TraceBuilder::new(0);
    for event in [
        Event::new(EventKind::NodeAccess, 1_000).nid(9),
        Event::new(EventKind::InodeEvict, 2_000).nid(9),
        Event::new(EventKind::NodeAccess, 3_000).nid(9),
    ] {
        builder.add(&event).unwrap();
    }
    let trace = builder.finish().unwrap();
    let ops: Vec<Op> = trace.steps.iter().map(|s| s.op).collect();
    assert_eq!(ops, [Op::Lookup, Op::InodeEvict, Op::Lookup]);
    assert_eq!(
        (trace.accesses, trace.evictions, trace.inode_evictions),
        (2, 0, 1)
    );
    assert!(!Op::InodeEvict.is_lookup());
}

/// A reload: after an inode's recorded eviction, its block's first lookup and those within
/// `RELOAD_SPAN_NS` of it; a later lookup is the cached inode's own again. Each is served as
/// any lookup (the first one reads from disk: its page was dropped with the inode's).
#[test]
fn the_lookups_that_reload_an_evicted_inode_are_counted() {
    let nodes = vm_replay::rfc_nodes().unwrap();
    let nids: Vec<u32> = nodes.nids().iter().copied().skip(1).take(2).collect();
    let (inode, other) = (nids[0], nids[1]);
    let ms = 1_000_000;
    let mut trace = Trace::default();
    trace.push(0, inode, Op::Lookup);
    trace.push(ms, other, Op::Lookup);
    trace.push(2 * ms, inode, Op::Evict);
    trace.push(3 * ms, inode, Op::InodeEvict);
    // The reload, after the pressure (its episode ends at the first lookup 100 ms after the
    // drop): the inode block read again, then the context's lookup 1 ms later.
    let reload = 200 * ms;
    trace.push(reload, inode, Op::Lookup);
    trace.push(reload + ms, other, Op::Lookup);
    trace.push(reload + ms, inode, Op::Lookup);
    // Long after: the cached inode's own lookup (an xattr read), no reload.
    trace.push(reload + RELOAD_SPAN_NS + ms, inode, Op::Lookup);
    let outcome = replay(&trace, nodes, off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(outcome.inode_evictions, 1);
    assert_eq!(
        outcome.reloads,
        Reloads {
            lookups: 2,
            node_reads: 1,
            restores: 0
        }
    );
    // After the budget point (the end of the one episode), as node_reads are: the reload's.
    assert_eq!((outcome.pressure_episodes, outcome.node_reads), (1, 1));
    assert_eq!(outcome.total_node_reads, 3);
}

/// A kernel that evicts fewer inodes evicts those looked up longest ago (the inode cache's LRU
/// order), whatever order the recording evicted them in: the others' evictions and reload
/// lookups leave the trace, every other step stays.
#[test]
fn fewer_inode_evictions_keep_the_least_recently_used() {
    let ms = 1_000_000;
    let (recent, old) = (10, 20);
    let mut trace = Trace::default();
    trace.push(0, old, Op::Lookup);
    trace.push(5 * ms, recent, Op::Lookup);
    // The recording evicted the recently used one first.
    trace.push(10 * ms, recent, Op::InodeEvict);
    trace.push(11 * ms, old, Op::InodeEvict);
    // Both reloaded: the inode block, then its context's lookup 1 ms later.
    for (at, ino) in [(100 * ms, recent), (200 * ms, old)] {
        trace.push(at, ino, Op::Lookup);
        trace.push(at + ms, ino, Op::Lookup);
    }
    // A later lookup of the recent inode's block (no reload) and another node.
    trace.push(400 * ms, recent, Op::Lookup);
    trace.push(400 * ms, 30, Op::Lookup);

    let one = trace.with_inode_evictions(1).unwrap();
    let steps: Vec<(u64, u32, Op)> = one.steps.iter().map(|s| (s.ts_ns, s.nid, s.op)).collect();
    assert_eq!(
        steps,
        [
            (0, old, Op::Lookup),
            (5 * ms, recent, Op::Lookup),
            (11 * ms, old, Op::InodeEvict),
            (200 * ms, old, Op::Lookup),
            (201 * ms, old, Op::Lookup),
            (400 * ms, recent, Op::Lookup),
            (400 * ms, 30, Op::Lookup),
        ]
    );
    assert_eq!((one.accesses, one.inode_evictions), (6, 1));
    assert_eq!(trace.with_inode_evictions(2).unwrap(), trace);
    let none = trace.with_inode_evictions(0).unwrap();
    assert_eq!((none.accesses, none.inode_evictions), (4, 0));
    let error = trace.with_inode_evictions(3).unwrap_err().to_string();
    assert!(error.contains("evicted 2 inodes"), "{error}");
}

/// A trace of 200 node reads, 10 s of quiet, then F2FS's shrinker called once at priority 0
/// with `count` objects; 50 of the nodes dropped just before when `drops`.
fn shrinker_trace(count: u32, drops: bool) -> (Trace, Arc<NodeSet>) {
    let (mut trace, nodes, nids) = lookups_of(200);
    let later = 10_000_000_000;
    if drops {
        for (i, &nid) in nids.iter().take(50).enumerate() {
            trace.push(later + i as u64, nid, Op::Evict);
        }
    }
    trace.push(later + 1_000, 0, Op::ShrinkerScan { count, priority: 0 });
    (trace, nodes)
}

fn off_as_recorded() -> Settings {
    as_recorded(0)
}

/// `Reclaim::AsRecorded` at `threshold` %, 100 ms, the RFC's cache.
fn as_recorded(threshold: u32) -> Settings {
    Settings {
        knobs: Knobs {
            threshold,
            interval_ms: 100,
        },
        budget_bytes: 0,
        reclaim: Reclaim::AsRecorded,
        cache: crate::cache::CacheConfig::rfc(),
    }
}

/// One lookup of each of the first `n` nodes of the RFC's node set (after the root), 1 us
/// apart: with compression off, `n` raw entries, each read from disk.
fn lookups_of(n: usize) -> (Trace, Arc<NodeSet>, Vec<u32>) {
    let nodes = vm_replay::rfc_nodes().unwrap();
    let nids: Vec<u32> = nodes.nids().iter().copied().skip(1).take(n).collect();
    let mut trace = Trace::default();
    for (i, &nid) in nids.iter().enumerate() {
        trace.push(i as u64 * 1_000, nid, Op::Lookup);
    }
    (trace, nodes, nids)
}

/// F2FS's shrinker replayed from a recorded call: 200 raw entries (unreferenced: read as
/// misses) and 200 NAT entries (one per node read), the other 300 of the recorded 500 objects
/// extents. Priority 0 asks for 700 x 4 / 2 = 1,400, capped at twice the count: 10 batches of
/// 128 (the last 120 deferred). Each batch frees 32 extents, then the node cache scans its
/// share of the other 96 against the NAT entries (48 while they are equal) and the NAT
/// entries give the rest: 48, 48, 48, 48, then the last 8 entries. Drops do not scan when the
/// calls are there; a recording whose kernel had the RFC's cache counted its held nodes in
/// the call (150 after 50 drops), leaving 150 extents: 550 objects, 8 batches.
#[test]
fn recorded_shrinker_calls_replay_f2fs_scan_against_the_replayed_count() {
    let (trace, nodes) = shrinker_trace(500, false);
    assert_eq!(trace.shrinker_scans, 1);
    let outcome = replay(&trace, nodes, off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(
        outcome.shrinker,
        ShrinkerCalls {
            calls: 1,
            scanned: 1_280,
            node_scanned: 200
        }
    );
    assert_eq!((outcome.reclaimed_raw, outcome.end_nodes), (200, 0));

    let (dropped, nodes) = shrinker_trace(500, true);
    let outcome = replay(&dropped, nodes, off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(outcome.shrinker.scanned, 1_280);
    assert_eq!((outcome.reclaimed_raw, outcome.end_nodes), (200, 0));

    let (mut with_cache, nodes) = shrinker_trace(500, true);
    with_cache.node_cache = true;
    // A trace given fewer inode evictions is still one of a kernel with the cache.
    let given = with_cache.with_inode_evictions(0).unwrap();
    assert_eq!(given, with_cache);
    let outcome = replay(&with_cache, nodes, off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(
        outcome.shrinker,
        ShrinkerCalls {
            calls: 1,
            scanned: 1_024,
            node_scanned: 200
        }
    );
}

/// A higher priority asks for less: at priority 3, 700 >> 3 = 87, x 4 / 2 = 174: one batch of
/// 128 (46 deferred), whose 96 after the extents split 48 / 48 between the node cache and the
/// NAT entries. A second call within the second asks for (46 >> 3) + the new delta.
#[test]
fn the_shrinker_priority_and_deferred_work_are_the_kernel_s() {
    let (mut trace, nodes) = shrinker_trace(500, false);
    let call = trace.steps.last_mut().unwrap();
    call.op = Op::ShrinkerScan {
        count: 500,
        priority: 3,
    };
    let outcome = replay(&trace, nodes_again(), off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(
        outcome.shrinker,
        ShrinkerCalls {
            calls: 1,
            scanned: 128,
            node_scanned: 48
        }
    );
    // Left: 152 entries, 152 NAT entries, 268 extents = 572; (572 >> 3) x 2 = 142, plus
    // 46 >> 3 = 5: 147, one batch: 32 extents, then 48 of 96 to the node cache.
    let ts = trace.steps.last().unwrap().ts_ns + 1_000;
    trace.push(
        ts,
        0,
        Op::ShrinkerScan {
            count: 500,
            priority: 3,
        },
    );
    let outcome = replay(&trace, nodes, off_as_recorded(), Payload::Lz4).unwrap();
    assert_eq!(
        outcome.shrinker,
        ShrinkerCalls {
            calls: 2,
            scanned: 256,
            node_scanned: 96
        }
    );
    assert_eq!(outcome.end_nodes, 104);
}

/// F2FS's shrinker calls belong to no device (one shrinker for every mount): kept in the
/// trace of whichever device it is; the RFC cache's own events mark the recorded kernel as
/// one with the node cache.
#[test]
fn shrinker_calls_join_every_device_s_trace() {
    let dev = 0x80_0011;
    let mut call = Event::new(EventKind::ShrinkerScan, 2_000)
        .nid(18_168)
        .len(512);
    call.reason = 6;
    let mut builder = TraceBuilder::new(dev);
    for event in [
        Event::new(EventKind::NodeAccess, 1_000).dev(dev).nid(9),
        call,
    ] {
        builder.add(&event).unwrap();
    }
    let trace = builder.finish().unwrap();
    assert_eq!(trace.shrinker_scans, 1);
    assert!(!trace.node_cache);
    assert_eq!(
        trace.steps[1].op,
        Op::ShrinkerScan {
            count: 18_168,
            priority: 6
        }
    );
    let mut builder = TraceBuilder::new(dev);
    for event in [
        Event::new(EventKind::NodeAccess, 1_000).dev(dev).nid(9),
        Event::new(EventKind::Insert, 1_100).dev(dev).nid(9),
    ] {
        builder.add(&event).unwrap();
    }
    assert!(builder.finish().unwrap().node_cache);
}
