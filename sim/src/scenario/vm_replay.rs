//! `vm-replay`: the RFC's NVMe-backed VM run, modelled step by step.
//!
//! One boot ("side") does what the RFC's guest did: mount the fresh image, create the file set
//! in manifest order (`files/d-*/f-*`, then `shaped/`, then `sentinel`; each creation touches
//! its parent directory's inode and creates the new node in the cache, raw and dirty), `sync`
//! (a checkpoint writes every node back: all clean), then lets the cache thread run until it
//! has nothing left to convert. That state is the **equal node count** point: every created
//! node is cached, raw (compression off) or mostly compressed (on).
//!
//! Then memory pressure holds the node cache to an attributed budget of 3 MiB (kswapd calls the
//! shrinker, 32 entries a call, until the cache fits): the **equal memory** point. Which nodes
//! survive is decided by the mechanisms alone: every node was REFERENCED at creation, so the
//! shrinker's (compression off) or the worker's (on) first sweep gives every entry its second
//! chance, which keeps creation order; reclaim then takes the oldest entries of each queue, in
//! the proportions the fixed weights set, and the newest nodes stay.
//!
//! Pressure is then released and the replay reads each of the 16,384 files once, in manifest
//! order, one `cat` process per directory. Path lookups are served by the dentry and inode
//! caches, which the node shrinker does not touch, so each file costs exactly one node
//! retrieval: its inode, for its inline data. It is a raw hit, a restore, or a disk read.
//!
//! # Calibration
//!
//! Nothing here is fitted to the RFC's results. The inputs are the RFC's file set and budget
//! ("about 3 MiB": exactly 3 MiB here), the accounting sizes derived in `accounting`, the fixed
//! weights and bounds in `cache`, and the real LZ4 sizes of the image's real node blocks. The
//! RFC's off row (760 nodes, 15,668 reads) is what "keep the newest 760 of 16,676 created
//! nodes" gives: 716 of them are replay files (16,384 - 716 = 15,668); this model keeps
//! floor((3 MiB - 19,960) / 4,184) = 747 nodes for the same reason. On the on side the RFC's
//! 9,175 restores + 7,209 reads = 16,384 show that no replay file was raw at replay time, which
//! is what the weights give: raw entries are reclaimed first.
use std::sync::Arc;

use anyhow::{Context as _, Result};

use super::{Phases, RunTotals, ScenarioName};
use crate::{
    engine::{Engine, EngineOptions, Pressure, SlotCounts},
    events::Task,
    f2fs::node::RequestedType,
    fileset::{vm::VmFileSet, Content, Manifest},
    knobs::KnobSource,
    nodes::NodeSet,
    rng::Rng,
};
use tracer_common::knobs::Knobs;

/// "An approximately 3 MiB attributed node-cache budget".
pub const BUDGET_BYTES: u64 = 3 << 20;

#[derive(Clone, Debug)]
pub struct VmReplayParams {
    pub fileset: VmFileSet,
    pub budget_bytes: u64,
    /// How long the cache thread runs after the sync before pressure comes: the same for
    /// every knob setting, so that compression off and on share one timeline and a recording
    /// of one side's accesses replays at the other's settings (`nodescope whatif`). At the
    /// default knobs the worker has nothing left to convert after 85 s.
    pub settle_ns: u64,
    /// How long the pressure is held.
    pub pressure_ns: u64,
}

impl Default for VmReplayParams {
    fn default() -> VmReplayParams {
        VmReplayParams {
            fileset: VmFileSet::default(),
            budget_bytes: BUDGET_BYTES,
            settle_ns: 120_000_000_000,
            pressure_ns: 1_000_000_000,
        }
    }
}

/// The processes of the VM guest.
pub struct GuestTasks {
    pub mount: Task,
    pub shell: Task,
    pub sync: Task,
}

impl Default for GuestTasks {
    fn default() -> GuestTasks {
        GuestTasks {
            mount: Task::process(301, 0, "mount"),
            shell: Task::process(310, 0, "sh"),
            sync: Task::process(320, 0, "sync"),
        }
    }
}

/// The parent directory of a manifest path ("" for the root).
fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// Mount: the root inode is read.
pub fn mount(engine: &mut Engine, tasks: &GuestTasks) -> Result<()> {
    let root = engine.nodes().root_ino;
    let (_, cost) = engine.access(&tasks.mount, root, RequestedType::Inode)?;
    engine.advance_by(cost)
}

/// Create the file set in manifest order, then sync (checkpoint).
pub fn populate(
    engine: &mut Engine,
    manifest: &Manifest,
    tasks: &GuestTasks,
    rng: &mut Rng,
) -> Result<()> {
    let nodes = engine.nodes().clone();
    for entry in &manifest.entries {
        let parent = nodes
            .nid_of(parent_of(&entry.path))
            .with_context(|| format!("parent of {} is not in the image", entry.path))?;
        let created = nodes.nodes_of(&entry.path);
        anyhow::ensure!(!created.is_empty(), "{} is not in the image", entry.path);
        let mut cost = engine.access(&tasks.shell, parent, RequestedType::Inode)?.1;
        for nid in created {
            cost += engine.create(&tasks.shell, nid)?;
        }
        cost += engine.modify(&tasks.shell, parent)?;
        if let Content::Zeros { blocks } = entry.content {
            cost += u64::from(blocks) * crate::costs::WRITE_BLOCK_NS;
        }
        engine.advance_by(cost + rng.range(0, 5_000))?;
    }
    engine.checkpoint();
    engine.em.task = tasks.sync;
    engine.advance_by(5_000_000)
}

/// Read each replay file once, in manifest order, one `cat` per directory.
pub fn replay(
    engine: &mut Engine,
    fileset: &VmFileSet,
    nodes: &NodeSet,
    first_pid: u32,
    rng: &mut Rng,
) -> Result<()> {
    for dir in 0..fileset.dirs {
        let cat = Task::process(first_pid + dir, 0, "cat");
        engine.advance_by(400_000 + rng.range(0, 100_000))?; // fork + exec
        for file in 0..fileset.files_per_dir {
            let path = fileset.replay_path(dir, file);
            let nid = nodes
                .nid_of(&path)
                .with_context(|| format!("{path} is not in the image"))?;
            let (_, cost) = engine.access(&cat, nid, RequestedType::Inode)?;
            engine.advance_by(cost + 15_000 + rng.range(0, 5_000))?; // open, read, write, close
        }
    }
    Ok(())
}

/// One boot with fixed knobs: populate, settle, pressure, replay. Phases: "populate",
/// "settle" (ends at the equal-node point), "pressure" (ends at the equal-memory point),
/// "replay".
pub fn run_static(params: &VmReplayParams, knobs: Knobs, seed: u64) -> Result<RunTotals> {
    run_with(params, knobs, seed, EngineOptions::default()).map(|(totals, _)| totals)
}

/// [`run_static`] with its events kept, the access trace included (`NodeAccess`, `NodeEvict`,
/// the checkpoint): what `nodescope record --accesses` records of this run.
pub fn run_recorded(
    params: &VmReplayParams,
    knobs: Knobs,
    seed: u64,
) -> Result<(RunTotals, Vec<tracer_common::Event>)> {
    let options = EngineOptions {
        record_events: true,
        accesses: true,
        ..EngineOptions::default()
    };
    let (totals, mut engine) = run_with(params, knobs, seed, options)?;
    let mut events = Vec::new();
    engine.drain_events(&mut events);
    Ok((totals, events))
}

fn run_with(
    params: &VmReplayParams,
    knobs: Knobs,
    seed: u64,
    options: EngineOptions,
) -> Result<(RunTotals, Engine)> {
    let manifest = params.fileset.manifest();
    let nodes = NodeSet::for_manifest(&manifest)?;
    let mut engine = Engine::new(nodes.clone(), KnobSource::Static(knobs), options);
    let first = engine.snapshot();
    let mut phases = Phases::new(&engine);
    let mut rng = Rng::new(seed);
    let tasks = GuestTasks::default();

    mount(&mut engine, &tasks)?;
    populate(&mut engine, &manifest, &tasks, &mut rng)?;
    phases.mark(&engine, "populate");
    engine.advance_by(params.settle_ns)?;
    phases.mark(&engine, "settle");
    engine.set_pressure(Pressure::Budget {
        bytes: params.budget_bytes,
    });
    engine.advance_by(params.pressure_ns)?;
    engine.set_pressure(Pressure::None);
    phases.mark(&engine, "pressure");
    replay(&mut engine, &params.fileset, &nodes, 2000, &mut rng)?;
    phases.mark(&engine, "replay");
    let totals = RunTotals::new(ScenarioName::VmReplay, knobs, seed, &first, &engine, phases);
    Ok((totals, engine))
}

// ---- the RFC-style comparison ----

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct NodesBytes {
    pub bytes: u64,
    pub nodes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EqualNodes {
    pub off: NodesBytes,
    pub on: NodesBytes,
    pub memory_reduction: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MemorySide {
    pub bytes: u64,
    pub nodes: u64,
    pub node_reads: u64,
    pub restores: u64,
    /// Replay lookups not served by a raw entry: restores + node reads, by construction of
    /// the counters checked independently (the cache counts lookups, the disk counts reads).
    pub retrievals: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EqualMemory {
    pub off: MemorySide,
    pub on: MemorySide,
    pub retained_ratio: f64,
    pub read_reduction: f64,
}

/// `nodescope sim --scenario vm-replay --json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VmReplayReport {
    pub equal_nodes: EqualNodes,
    pub equal_memory: EqualMemory,
    /// Compressed entries by slot at the equal-node point (compression on).
    pub slots: SlotCounts,
    #[serde(skip)]
    pub off: RunTotals,
    #[serde(skip)]
    pub on: RunTotals,
}

/// Knob values of the two sides: compression disabled at runtime vs the default threshold.
pub fn side_knobs() -> (Knobs, Knobs) {
    let on = Knobs::default();
    (Knobs { threshold: 0, ..on }, on)
}

pub fn compare(params: &VmReplayParams, seed: u64) -> Result<VmReplayReport> {
    let (off_knobs, on_knobs) = side_knobs();
    let off = run_static(params, off_knobs, seed)?;
    let on = run_static(params, on_knobs, seed)?;
    let at = |run: &RunTotals, phase: &str| run.phase(phase).expect("phase recorded").end.clone();
    let nodes_bytes = |run: &RunTotals| {
        let s = at(run, "settle");
        NodesBytes {
            bytes: s.memory.attributed_bytes,
            nodes: s.memory.entries,
        }
    };
    let memory_side = |run: &RunTotals| {
        let s = at(run, "pressure");
        let replay = run.phase("replay").expect("replay phase").totals;
        MemorySide {
            bytes: s.memory.attributed_bytes,
            nodes: s.memory.entries,
            node_reads: replay.node_reads,
            restores: replay.events().restores,
            retrievals: replay.cache.retrievals,
        }
    };
    let (nodes_off, nodes_on) = (nodes_bytes(&off), nodes_bytes(&on));
    let (mem_off, mem_on) = (memory_side(&off), memory_side(&on));
    Ok(VmReplayReport {
        equal_nodes: EqualNodes {
            off: nodes_off,
            on: nodes_on,
            memory_reduction: 1.0 - nodes_on.bytes as f64 / nodes_off.bytes as f64,
        },
        equal_memory: EqualMemory {
            off: mem_off,
            on: mem_on,
            retained_ratio: mem_on.nodes as f64 / mem_off.nodes.max(1) as f64,
            read_reduction: 1.0 - mem_on.node_reads as f64 / mem_off.node_reads.max(1) as f64,
        },
        slots: at(&on, "settle").slots,
        off,
        on,
    })
}

/// The node set of the RFC's file set (built and loaded on first use).
pub fn rfc_nodes() -> Result<Arc<NodeSet>> {
    NodeSet::for_manifest(&VmFileSet::default().manifest())
}
