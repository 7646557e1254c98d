//! Scenarios: `vm-replay` (the RFC's VM run) and `android-launch` (the RFC's phone trial), and
//! a generic way to run either with static knobs and read its totals ([`run_static`]): cheap
//! enough for a controller benchmark to call many times (the image is built once and its node
//! blocks loaded once per process).
pub mod android;
pub mod controlled;
pub mod feedback;
pub mod mixed;
pub mod vm_replay;

use std::{fmt, str::FromStr};

use anyhow::{bail, Result};

use crate::engine::{Engine, MemorySample, Snapshot};
use tracer_common::knobs::Knobs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioName {
    VmReplay,
    AndroidLaunch,
}

impl ScenarioName {
    pub const ALL: [ScenarioName; 2] = [ScenarioName::VmReplay, ScenarioName::AndroidLaunch];

    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioName::VmReplay => "vm-replay",
            ScenarioName::AndroidLaunch => "android-launch",
        }
    }
}

impl fmt::Display for ScenarioName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScenarioName {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<ScenarioName> {
        match ScenarioName::ALL.iter().find(|n| n.as_str() == s) {
            Some(name) => Ok(*name),
            None => {
                let known: Vec<&str> = ScenarioName::ALL.iter().map(|n| n.as_str()).collect();
                bail!("unknown scenario {s:?}; known: {}", known.join(", "))
            }
        }
    }
}

/// What happened between two snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    pub duration_ns: u64,
    /// Node lookups.
    pub lookups: u64,
    pub raw_hits: u64,
    /// Lookups not served by a raw entry: each is a restore, or a disk read (a miss, or a failed
    /// restore), or -ENOMEM.
    pub retrievals: u64,
    /// FS_NODE_READ_IO: demand and readahead node reads.
    pub node_reads: u64,
    pub readahead_reads: u64,
    pub restores: u64,
    pub restore_fails: u64,
    pub restore_nomem: u64,
    pub conversions: u64,
    pub convert_rejects: u64,
    pub convert_aborts: u64,
    pub reclaims: u64,
    pub second_chances: u64,
    pub worker_passes: u64,
    pub shrinker_calls: u64,
}

impl Totals {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Totals {
        let (a, b) = (&before.stats, &after.stats);
        let second_chances = |s: &crate::cache::CacheStats| {
            s.second_chances_worker + s.second_chances_shrinker + s.second_chances_race
        };
        Totals {
            duration_ns: after.ts_ns - before.ts_ns,
            lookups: b.lookups - a.lookups,
            raw_hits: b.raw_hits - a.raw_hits,
            retrievals: b.retrievals - a.retrievals,
            node_reads: after.node_reads - before.node_reads,
            readahead_reads: after.readahead_reads - before.readahead_reads,
            restores: b.restores - a.restores,
            restore_fails: b.restore_fails - a.restore_fails,
            restore_nomem: b.restore_nomem - a.restore_nomem,
            conversions: b.conversions - a.conversions,
            convert_rejects: b.convert_rejects - a.convert_rejects,
            convert_aborts: b.convert_aborts - a.convert_aborts,
            reclaims: b.reclaims.iter().sum::<u64>() - a.reclaims.iter().sum::<u64>(),
            second_chances: second_chances(b) - second_chances(a),
            worker_passes: b.worker_passes - a.worker_passes,
            shrinker_calls: b.shrinker_calls - a.shrinker_calls,
        }
    }
}

/// One named phase of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Phase {
    pub name: String,
    pub totals: Totals,
    /// The state at the end of the phase.
    pub end: Snapshot,
}

/// Records phases as a run goes.
pub struct Phases {
    last: Snapshot,
    pub phases: Vec<Phase>,
}

impl Phases {
    pub fn new(engine: &Engine) -> Phases {
        Phases {
            last: engine.snapshot(),
            phases: Vec::new(),
        }
    }

    pub fn mark(&mut self, engine: &Engine, name: &str) -> &Phase {
        let now = engine.snapshot();
        let totals = Totals::between(&self.last, &now);
        self.phases.push(Phase {
            name: name.to_string(),
            totals,
            end: now.clone(),
        });
        self.last = now;
        self.phases.last().expect("just pushed")
    }

    pub fn get(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// The outcome of a run with static knobs: totals per phase and for the whole run, the final
/// state, and attributed memory over time (the cost inputs a controller benchmark needs).
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunTotals {
    pub scenario: ScenarioName,
    pub knobs: Knobs,
    pub seed: u64,
    pub phases: Vec<Phase>,
    pub whole: Totals,
    pub final_snapshot: Snapshot,
    pub memory: Vec<MemorySample>,
    /// Time-weighted mean and the peak of attributed memory over the run.
    pub mean_attributed_bytes: u64,
    pub peak_attributed_bytes: u64,
}

impl RunTotals {
    fn new(
        scenario: ScenarioName,
        knobs: Knobs,
        seed: u64,
        first: &Snapshot,
        engine: &Engine,
        phases: Phases,
    ) -> RunTotals {
        let final_snapshot = engine.snapshot();
        let memory = engine.samples().to_vec();
        let (mean, peak) = memory_stats(&memory);
        RunTotals {
            scenario,
            knobs,
            seed,
            whole: Totals::between(first, &final_snapshot),
            phases: phases.phases,
            final_snapshot,
            memory,
            mean_attributed_bytes: mean,
            peak_attributed_bytes: peak,
        }
    }

    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

fn memory_stats(samples: &[MemorySample]) -> (u64, u64) {
    let peak = samples
        .iter()
        .map(|s| s.attributed_bytes)
        .max()
        .unwrap_or(0);
    let mean = if samples.is_empty() {
        0
    } else {
        samples.iter().map(|s| s.attributed_bytes).sum::<u64>() / samples.len() as u64
    };
    (mean, peak)
}

/// Run a scenario once with fixed knob values (no knob files) and return its totals.
pub fn run_static(scenario: ScenarioName, knobs: Knobs, seed: u64) -> Result<RunTotals> {
    match scenario {
        ScenarioName::VmReplay => {
            vm_replay::run_static(&vm_replay::VmReplayParams::default(), knobs, seed)
        }
        ScenarioName::AndroidLaunch => {
            android::run_static(&android::AndroidParams::default(), knobs, seed)
        }
    }
}

#[cfg(test)]
mod tests;
