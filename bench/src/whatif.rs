//! `nodescope-bench whatif [--json]` (`cargo xtask bench whatif`): how fast `nodescope whatif`
//! replays an access trace through the simulator's cache, on one core, next to the baseline
//! measured in the same run: the same replay with `Payload::Lz4`, the simulator's path before
//! the what-if speed work (LZ4 compression at every conversion, decompression and validation
//! at every restore). Figures only, never a pass/fail on speed.
//!
//! The trace: vm-replay recorded with compression off (every lookup, creation, the checkpoint,
//! the drops), then its budget point and replay repeated every 120 s of recorded time until it
//! holds at least 1 M accesses. `exact`: the vm-replay recording replayed at the scenario's
//! settings gives the on scenario's node reads, restores and retained nodes (both payloads),
//! and both payloads give identical outcomes on the long trace.
use std::{sync::Arc, time::Instant};

use anyhow::{bail, Result};
use serde::Serialize;
use sim::{
    cache::{Payload, PayloadSizes},
    scenario::vm_replay,
    whatif::{self, Op, Outcome, Reclaim, Settings, Trace},
};

const MIN_ACCESSES: u64 = 1_000_000;
const ROUND_NS: u64 = 120_000_000_000;

#[derive(Serialize)]
struct Figures {
    exact: bool,
    accesses_per_s: f64,
    baseline_accesses_per_s: f64,
    speedup: f64,
    trace_accesses: u64,
    sizes_table_ms: f64,
    node_reads: u64,
    restores: u64,
    conversions: u64,
}

pub fn main(args: &[String]) -> Result<()> {
    let json = match args {
        [] => false,
        [flag] if flag == "--json" => true,
        [flag] if flag == "--profile" => return profile(),
        _ => bail!("nodescope-bench whatif takes only --json (or --profile), not {args:?}"),
    };
    let check = whatif::vm_replay_check(1)?;
    let trace = long_trace(&check.trace);
    let nodes = vm_replay::rfc_nodes()?;
    let settings = Settings {
        knobs: vm_replay::side_knobs().1,
        budget_bytes: vm_replay::BUDGET_BYTES,
        reclaim: Reclaim::Budget,
        cache: sim::cache::CacheConfig::rfc(),
    };
    let (baseline, baseline_s) = timed(&trace, &nodes, settings, Payload::Lz4)?;
    let started = Instant::now();
    let sizes = Arc::new(PayloadSizes::lz4(&nodes));
    let sizes_table_ms = started.elapsed().as_secs_f64() * 1e3;
    let (fast, fast_s) = timed(&trace, &nodes, settings, Payload::Sizes(sizes))?;
    let figures = Figures {
        exact: check.exact() && fast == baseline,
        accesses_per_s: trace.accesses as f64 / fast_s,
        baseline_accesses_per_s: trace.accesses as f64 / baseline_s,
        speedup: baseline_s / fast_s,
        trace_accesses: trace.accesses,
        sizes_table_ms,
        node_reads: fast.total_node_reads,
        restores: fast.total_restores,
        conversions: fast.conversions,
    };
    if json {
        println!("{}", serde_json::to_string(&figures)?);
        return Ok(());
    }
    println!(
        "whatif-bench: vm-replay check {:?} (scenario on {:?}, whatif lz4 {:?}, sizes {:?})",
        check.exact(),
        check.scenario_on,
        check.whatif_lz4,
        check.whatif_sizes
    );
    println!(
        "trace: {} accesses ({} restores, {} node reads, {} conversions at 3 MiB, compression on)",
        figures.trace_accesses, figures.restores, figures.node_reads, figures.conversions
    );
    println!(
        "baseline (LZ4 per conversion and restore): {:.0} accesses/s ({baseline_s:.2} s)",
        figures.baseline_accesses_per_s
    );
    println!(
        "sizes per node ({sizes_table_ms:.1} ms once per image): {:.0} accesses/s ({fast_s:.2} s), \
         {:.1}x; outcomes identical: {}",
        figures.accesses_per_s,
        figures.speedup,
        fast == baseline
    );
    Ok(())
}

/// `--profile`: only the fast replay, five times, for `perf record`.
fn profile() -> Result<()> {
    let check = whatif::vm_replay_check(1)?;
    let trace = long_trace(&check.trace);
    let nodes = vm_replay::rfc_nodes()?;
    let settings = Settings {
        knobs: vm_replay::side_knobs().1,
        budget_bytes: vm_replay::BUDGET_BYTES,
        reclaim: Reclaim::Budget,
        cache: sim::cache::CacheConfig::rfc(),
    };
    let sizes = Arc::new(PayloadSizes::lz4(&nodes));
    for _ in 0..5 {
        let (_, seconds) = timed(&trace, &nodes, settings, Payload::Sizes(sizes.clone()))?;
        println!("{:.0} accesses/s", trace.accesses as f64 / seconds);
    }
    Ok(())
}

fn timed(
    trace: &Trace,
    nodes: &Arc<sim::nodes::NodeSet>,
    settings: Settings,
    payload: Payload,
) -> Result<(Outcome, f64)> {
    let started = Instant::now();
    let outcome = whatif::replay(trace, nodes.clone(), settings, payload)?;
    Ok((outcome, started.elapsed().as_secs_f64()))
}

/// The recorded trace, then its budget point and replay again every [`ROUND_NS`] until it has
/// [`MIN_ACCESSES`].
fn long_trace(recorded: &Trace) -> Trace {
    let first_drop = recorded
        .steps
        .iter()
        .position(|s| s.op == Op::Evict)
        .unwrap_or(0);
    let tail = &recorded.steps[first_drop..];
    let mut trace = recorded.clone();
    let start = tail.first().map_or(0, |s| s.ts_ns);
    let mut base = recorded.steps.last().map_or(0, |s| s.ts_ns);
    while trace.accesses < MIN_ACCESSES {
        base += ROUND_NS;
        for step in tail {
            trace.push(base + step.ts_ns - start, step.nid, step.op);
        }
    }
    trace
}
