//! `mixed`: a workload whose phases want different knobs, for the controller benchmark.
//!
//! It runs on the RFC's VM image (`files/d-*/f-*`, one inline-data inode per file), starting
//! from an empty cache after mount, with the phone's ambient reclaim throughout
//! (`android::AndroidParams::ambient`: priority 9 every second).
//!
//! 1. **tight** (compression pays): a job walks a working set of 6,144 files over and over,
//!    one file every 0.4 ms (a walk takes about 2.5 s), while kswapd reclaims hard (priority
//!    6 every 100 ms: about a third of the cache's effective count scanned per second). Raw,
//!    the working set (26 MB) is thrashed out between walks and read again from disk;
//!    compressed (about 2 MB, weighted 1/16 of a raw entry by the shrinker) it survives, and a
//!    walk restores instead of reading.
//! 2. **churn** (conversions wasted): the pressure is gone; a service polls a hot set of 2,048
//!    files every 1.5 s. An entry idle for two worker passes is compressed, so with a short
//!    interval each poll restores what the worker has just compressed: a conversion and a
//!    restore per file per poll, for little memory saved. With an interval of a few seconds
//!    the poll's REFERENCED bit keeps the hot set raw and the worker idle.
//! 3. **idle**: nothing runs; whatever is raw can be compressed at leisure.
use std::{ops::Range, sync::Arc};

use anyhow::{Context as _, Result};

use super::{vm_replay, Phases};
use crate::{
    engine::{Engine, Pressure},
    events::Task,
    f2fs::node::RequestedType,
    fileset::vm::VmFileSet,
    nodes::NodeSet,
    rng::Rng,
};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct MixedParams {
    pub fileset: VmFileSet,
    /// Directories (of `files/d-*`) walked in the tight phase.
    pub working_dirs: Range<u32>,
    pub tight_ns: u64,
    pub tight_pressure: Pressure,
    /// The walker's own time per file.
    pub walk_think_ns: u64,
    /// Directories polled in the churn phase.
    pub hot_dirs: Range<u32>,
    pub churn_ns: u64,
    pub poll_every_ns: u64,
    pub idle_ns: u64,
    /// Background reclaim outside the tight phase.
    pub ambient: Pressure,
}

impl Default for MixedParams {
    fn default() -> MixedParams {
        MixedParams {
            fileset: VmFileSet::default(),
            working_dirs: 0..96,
            tight_ns: 60 * SECOND,
            tight_pressure: Pressure::Reclaim {
                priority: 6,
                every_ms: 100,
            },
            walk_think_ns: 400_000,
            hot_dirs: 96..128,
            churn_ns: 120 * SECOND,
            poll_every_ns: 1_500 * MS,
            idle_ns: 60 * SECOND,
            ambient: Pressure::Reclaim {
                priority: 9,
                every_ms: 1000,
            },
        }
    }
}

/// The node set `mixed` runs on (the RFC's VM image).
pub fn nodes() -> Result<Arc<NodeSet>> {
    vm_replay::rfc_nodes()
}

fn inodes(params: &MixedParams, nodes: &NodeSet, dirs: Range<u32>) -> Result<Vec<u32>> {
    let fileset = &params.fileset;
    dirs.flat_map(|dir| (0..fileset.files_per_dir).map(move |file| (dir, file)))
        .map(|(dir, file)| {
            let path = fileset.replay_path(dir, file);
            nodes
                .nid_of(&path)
                .with_context(|| format!("{path} is not in the image"))
        })
        .collect()
}

/// Run the three phases on `engine` (built over [`nodes`]). Phases: "tight", "churn", "idle".
pub fn drive(mut engine: Engine, params: &MixedParams, seed: u64) -> Result<(Engine, Phases)> {
    let nodes = engine.nodes().clone();
    let working = inodes(params, &nodes, params.working_dirs.clone())?;
    let hot = inodes(params, &nodes, params.hot_dirs.clone())?;
    let mut rng = Rng::new(seed);
    let mut phases = Phases::new(&engine);
    let tasks = vm_replay::GuestTasks::default();
    vm_replay::mount(&mut engine, &tasks)?;

    engine.set_pressure(params.tight_pressure);
    let walker = Task::process(4000, 0, "walker");
    let until = engine.now() + params.tight_ns;
    while engine.now() < until {
        for nid in &working {
            let (_, cost) = engine.access(&walker, *nid, RequestedType::Inode)?;
            engine.advance_by(cost + params.walk_think_ns + rng.range(0, 20_000))?;
            if engine.now() >= until {
                break;
            }
        }
    }
    phases.mark(&engine, "tight");

    engine.set_pressure(params.ambient);
    let poller = Task::process(4100, 1000, "poller");
    let until = engine.now() + params.churn_ns;
    while engine.now() < until {
        let next_poll = engine.now() + params.poll_every_ns;
        for nid in &hot {
            let (_, cost) = engine.access(&poller, *nid, RequestedType::Inode)?;
            engine.advance_by(cost + 20_000 + rng.range(0, 5_000))?;
        }
        engine.advance_to(next_poll.max(engine.now()).min(until.max(engine.now())))?;
    }
    phases.mark(&engine, "churn");

    engine.advance_by(params.idle_ns)?;
    phases.mark(&engine, "idle");
    Ok((engine, phases))
}
