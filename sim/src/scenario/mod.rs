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

use crate::{
    cache::CacheStats,
    engine::{Engine, MemorySample, Snapshot},
};
use tracer_common::{activity::Counters, knobs::Knobs};

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

/// What happened between two snapshots: the cache's counts over the span (the counter set the
/// model counts events in, and the cache's own work) and the device's node reads. Serialised
/// flat, as `sim --json` has always printed a phase's totals ([`FlatTotals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(into = "FlatTotals")]
pub struct Totals {
    pub duration_ns: u64,
    /// FS_NODE_READ_IO: demand and readahead node reads.
    pub node_reads: u64,
    pub readahead_reads: u64,
    pub cache: CacheStats,
}

/// `Totals` as `sim --json` prints them: reclaims and second chances summed.
#[derive(serde::Serialize)]
pub(crate) struct FlatTotals {
    duration_ns: u64,
    lookups: u64,
    raw_hits: u64,
    retrievals: u64,
    node_reads: u64,
    readahead_reads: u64,
    restores: u64,
    restore_fails: u64,
    restore_nomem: u64,
    conversions: u64,
    convert_rejects: u64,
    convert_aborts: u64,
    reclaims: u64,
    second_chances: u64,
    worker_passes: u64,
    shrinker_calls: u64,
}

impl From<Totals> for FlatTotals {
    fn from(t: Totals) -> FlatTotals {
        let (c, e) = (&t.cache, &t.cache.events);
        FlatTotals {
            duration_ns: t.duration_ns,
            lookups: c.lookups,
            raw_hits: c.raw_hits,
            retrievals: c.retrievals,
            node_reads: t.node_reads,
            readahead_reads: t.readahead_reads,
            restores: e.restores,
            restore_fails: e.restore_fails,
            restore_nomem: e.restore_nomem,
            conversions: e.conversions,
            convert_rejects: e.convert_rejects,
            convert_aborts: e.convert_aborts,
            reclaims: e.reclaims.total(),
            second_chances: e.second_chances.total(),
            worker_passes: c.worker_passes,
            shrinker_calls: c.shrinker_calls,
        }
    }
}

impl Totals {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Totals {
        Totals {
            duration_ns: after.ts_ns - before.ts_ns,
            node_reads: after.node_reads - before.node_reads,
            readahead_reads: after.readahead_reads - before.readahead_reads,
            cache: after.stats.since(&before.stats),
        }
    }

    /// The span's counts of what the cache's events tell.
    pub fn events(&self) -> &Counters {
        &self.cache.events
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
