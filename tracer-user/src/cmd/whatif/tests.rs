use sim::{
    cache::CacheConfig,
    whatif::grid::{memory_weights, settings, Cell},
};

use super::*;
use crate::view::whatif_tables::in_table;

fn axes_of(slots: &str, weights: &str, compressors: &str) -> Axes {
    let args = WhatifArgs {
        recording: None,
        image: None,
        device: None,
        budget: "1MiB,3MiB".into(),
        inode_evictions: None,
        threshold: "25,50".into(),
        interval: "1000".into(),
        slots: slots.into(),
        weights: weights.into(),
        compressor: compressors.into(),
        json: false,
        plot: None,
        force: false,
        compressors: false,
    };
    axes(&args).unwrap()
}

#[test]
fn the_memory_rule_is_the_rfcs_weights_for_its_set_and_scales_to_others() {
    let label = |s: &str| memory_weights(&SlotSet::parse(s).unwrap()).label();
    assert_eq!(label("256/512/1024"), "16:1:2:4");
    assert_eq!(label("128/256/512/1024"), "32:1:2:4:8");
    assert_eq!(label("512/1024/2048"), "8:1:2:4");
    assert_eq!(label("384/768"), "32:3:6");
}

#[test]
fn cells_pair_each_slot_set_with_the_weights_that_fit_it() {
    let axes = axes_of(
        "256/512/1024,128/256/512/1024",
        "memory,1:1:1:1",
        "lz4,zstd1",
    );
    let cells = cells(&axes);
    // Per budget: off, then (2 weights for the 3-slot set + 1 for the 4-slot set) x 2
    // compressors x 2 thresholds.
    assert_eq!(cells.len(), 2 * (1 + 3 * 2 * 2));
    assert!(cells
        .iter()
        .all(|c| c.slots == 0 || c.weights == 0 || c.knobs.is_none()));
    let off: Vec<&Cell> = cells.iter().filter(|c| c.knobs.is_none()).collect();
    assert_eq!(off.len(), 2);
    assert_eq!(settings(&axes, off[0]).cache, CacheConfig::rfc());
}

#[test]
fn each_table_holds_the_other_axes_at_their_first_value() {
    let axes = axes_of(
        "256/512/1024,128/256/512/1024",
        "memory,1:1:1:1",
        "lz4,zstd1",
    );
    let cells = cells(&axes);
    let count = |q: Question| cells.iter().filter(|c| in_table(&axes, q, c)).count();
    // 2 budgets x (off + the axis's values).
    assert_eq!(count(Question::Slots), 2 * (1 + 2));
    assert_eq!(count(Question::Weights), 2 * (1 + 2));
    assert_eq!(count(Question::ThresholdInterval), 2 * (1 + 2));
    assert_eq!(count(Question::Compressor), 2 * (1 + 2));
}
