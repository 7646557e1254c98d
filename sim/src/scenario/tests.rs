//! Scenario runs: determinism, the replay identity, the android direction.
use super::{android, run_static, vm_replay, ScenarioName};
use tracer_common::knobs::Knobs;

#[test]
fn vm_replay_is_deterministic_and_its_counters_add_up() {
    let knobs = Knobs::default();
    let a = run_static(ScenarioName::VmReplay, knobs, 7).unwrap();
    let b = run_static(ScenarioName::VmReplay, knobs, 7).unwrap();
    assert_eq!(a.whole, b.whole);
    assert_eq!(a.final_snapshot, b.final_snapshot);
    let replay = a.phase("replay").unwrap().totals;
    assert_eq!(replay.cache.lookups, 16_384);
    assert_eq!(
        replay.events().restores + replay.node_reads,
        replay.cache.retrievals
    );
    assert_eq!(
        replay.cache.raw_hits + replay.cache.retrievals,
        replay.cache.lookups
    );
    let settled = &a.phase("settle").unwrap().end;
    assert_eq!(settled.memory.entries, 16_676);
    let pressed = &a.phase("pressure").unwrap().end;
    assert!(pressed.memory.attributed_bytes <= vm_replay::BUDGET_BYTES);
}

#[test]
fn compression_off_retains_the_newest_nodes_under_the_budget() {
    let off = run_static(
        ScenarioName::VmReplay,
        Knobs {
            threshold: 0,
            interval_ms: 1000,
        },
        1,
    )
    .unwrap();
    let pressed = &off.phase("pressure").unwrap().end;
    // Every entry raw at 4,184 bytes: the budget holds at most 747 of them.
    assert!(
        pressed.memory.entries <= 747 && pressed.memory.entries > 700,
        "{:?}",
        pressed.memory
    );
    assert_eq!(pressed.memory.compressed_entries, 0);
    let replay = off.phase("replay").unwrap().totals;
    assert_eq!(replay.events().restores, 0);
    assert_eq!(replay.node_reads, replay.cache.retrievals);
}

#[test]
fn android_launch_with_compression_keeps_more_nodes_in_less_memory() {
    let report = android::compare(&android::AndroidParams::default(), 3).unwrap();
    assert_eq!(report.off.compressed_entries, 0);
    assert!(report.on.compressed_entries > 0);
    assert!(
        report.on.attached_entries > report.off.attached_entries,
        "{report:?}"
    );
    assert!(
        report.on.logical_bytes < report.off.logical_bytes,
        "{report:?}"
    );
    assert!(report.on.node_reads < report.off.node_reads, "{report:?}");
    assert!(report.on.conversions > 0 && report.on.restores > 0);
}

#[test]
fn scenario_names_parse() {
    assert_eq!(
        "vm-replay".parse::<ScenarioName>().unwrap(),
        ScenarioName::VmReplay
    );
    assert_eq!(
        "android-launch".parse::<ScenarioName>().unwrap(),
        ScenarioName::AndroidLaunch
    );
    let error = "vm".parse::<ScenarioName>().unwrap_err().to_string();
    assert_eq!(
        error,
        "unknown scenario \"vm\"; known: vm-replay, android-launch"
    );
}
