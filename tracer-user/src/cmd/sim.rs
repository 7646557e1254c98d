//! `nodescope sim`: run the compressed node cache simulator, a scenario with compression off
//! and on, or observed through uprobes.
//!
//! `--scenario vm-replay` compares compression off and on the way the RFC's VM run did (equal
//! node count, equal memory); `--scenario android-launch` compares the phone trial's final
//! snapshots. With `--threshold`/`--interval` it runs the scenario once with those static knob
//! values and prints its totals instead.
use std::fmt::Write as _;

use tracer_common::knobs::{Knobs, INTERVAL_RANGE_MS, THRESHOLD_RANGE};

use anyhow::{Context as _, Result};
use clap::Args;

use crate::view::{
    sim_tables::{android_table, totals_table, vm_replay_table},
    stdout::{closed_is_success, print, print_line},
};
use sim::{
    knobs,
    scenario::{
        android::{self},
        run_static,
        vm_replay::{self},
        ScenarioName,
    },
};

#[derive(Args)]
pub(crate) struct SimArgs {
    /// Scenario: vm-replay or android-launch.
    #[arg(long, value_name = "NAME")]
    scenario: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed of the simulated workload's timing and choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run once with this node_compress_threshold (percent, 0 = off) and print the totals.
    #[arg(long, value_name = "PERCENT")]
    threshold: Option<String>,
    /// Run once with this node_compress_interval (ms) and print the totals.
    #[arg(long, value_name = "MS")]
    interval: Option<String>,
    /// Observe the run only through eBPF (uprobes on the simulator's hooks, root) and report,
    /// per event kind, what eBPF saw next to what the simulator emitted.
    #[arg(long)]
    via_bpf: bool,
}

pub(crate) fn run(args: SimArgs) -> Result<()> {
    let scenario: ScenarioName = args.scenario.parse()?;
    let ran = if args.via_bpf {
        run_via_bpf(scenario, &args)
    } else if args.threshold.is_some() || args.interval.is_some() {
        run_with_knobs(scenario, &args)
    } else {
        scenario_output(scenario, &args).and_then(print_line)
    };
    closed_is_success(ran)
}

/// The scenario's RFC-style comparison, as JSON or a table.
fn scenario_output(scenario: ScenarioName, args: &SimArgs) -> Result<String> {
    let output = match scenario {
        ScenarioName::VmReplay => {
            let report = vm_replay::compare(&Default::default(), args.seed)?;
            if args.json {
                serde_json::to_string_pretty(&report)?
            } else {
                vm_replay_table(&report, args.seed)
            }
        }
        ScenarioName::AndroidLaunch => {
            let report = android::compare(&Default::default(), args.seed)?;
            if args.json {
                serde_json::to_string_pretty(&report)?
            } else {
                android_table(&report, args.seed)
            }
        }
    };
    Ok(output)
}

/// Run the scenario while eBPF watches the simulator's hooks; print the comparison. Exits
/// non-zero when a count differs or events were lost.
fn run_via_bpf(scenario: ScenarioName, args: &SimArgs) -> Result<()> {
    let (output, observation) = crate::source::bpf::observe::observe(
        || scenario_output(scenario, args),
        sim::events::emitted,
    )
    .context("observing the simulator through eBPF (needs root and uprobes)")?;
    let output = output?;
    if args.json {
        let mut value: serde_json::Value = serde_json::from_str(&output)?;
        value["via_bpf"] = serde_json::to_value(&observation.via_bpf)?;
        value["drops"] = observation.drops.into();
        value["probes"] = serde_json::to_value(&observation.probes)?;
        print_line(serde_json::to_string_pretty(&value)?)?;
    } else {
        let mut text =
            format!("{output}\n\nseen through eBPF (uprobes on the simulator's hooks):\n");
        let _ = writeln!(
            text,
            "{:<16} {:>10} {:>10} {:>10}",
            "kind", "bpf", "kernel", "sim"
        );
        for (kind, counts) in &observation.via_bpf {
            let _ = writeln!(
                text,
                "{kind:<16} {:>10} {:>10} {:>10}",
                counts.bpf, counts.kernel, counts.sim
            );
        }
        let _ = writeln!(text, "drops {}", observation.drops);
        print(&text)?;
    }
    anyhow::ensure!(
        observation.all_equal(),
        "eBPF and the simulator disagree (see via_bpf), or events were lost"
    );
    Ok(())
}

/// Validate knob values as the kernel would, then run once.
fn run_with_knobs(scenario: ScenarioName, args: &SimArgs) -> Result<()> {
    let defaults = Knobs::default();
    let parse = |text: &Option<String>, range, default: u32, name: &str| -> Result<u32> {
        match text {
            None => Ok(default),
            Some(text) => knobs::validate(text, range)
                .map_err(|why| anyhow::anyhow!("{name} {text:?}: {why}")),
        }
    };
    let values = Knobs {
        threshold: parse(
            &args.threshold,
            THRESHOLD_RANGE,
            defaults.threshold,
            "--threshold",
        )?,
        interval_ms: parse(
            &args.interval,
            INTERVAL_RANGE_MS,
            defaults.interval_ms,
            "--interval",
        )?,
    };
    let totals = run_static(scenario, values, args.seed)
        .with_context(|| format!("running {scenario} with {values:?}"))?;
    if args.json {
        print_line(serde_json::to_string_pretty(&totals)?)
    } else {
        print_line(totals_table(&totals))
    }
}
