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
    assert_eq!(count(Op::Lookup) + count(Op::Modify), off.whole.lookups);
    assert_eq!(count(Op::Create), 16_675);
    assert_eq!(count(Op::Checkpoint), 1);
    assert_eq!(
        count(Op::Evict),
        off.phase("pressure").unwrap().totals.reclaims
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
    let trace = builder.finish();
    assert_eq!((trace.steps.len(), trace.accesses), (3, 3));
}

#[test]
fn the_busiest_device_is_chosen_the_lowest_among_equals() {
    let on = |dev: u32| {
        let mut event = Event::new(EventKind::NodeAccess, 0);
        event.dev = dev;
        event
    };
    let mut counts = DeviceCounts::default();
    for dev in [9, 4, 9, 4, 7] {
        counts.count(&on(dev));
    }
    assert_eq!(counts.busiest().unwrap(), 4);
}
