//! What-if replay: a recorded access trace (every node lookup, node page drops, checkpoints)
//! run through the simulator's own engine and cache at chosen settings.
//!
//! The trace's operations map onto the engine's foreground operations, at the recorded times
//! (relative to the first event, the engine's mount time):
//! - a lookup: [`Engine::access`]; flagged `ACCESS_NEW`: [`Engine::create`]; flagged
//!   `ACCESS_DIRTY`: [`Engine::dirty_untouched`]; a readahead read: [`Engine::readahead`];
//! - a finished checkpoint: [`Engine::checkpoint`] (every dirty node written back);
//! - a node page drop: the recorded system was reclaiming. A *pressure episode* begins: the
//!   engine holds attributed memory to the budget (kswapd ticks and direct reclaim, as
//!   `Pressure::Budget`) until the trace shows the limit released: lookups go on, for a while
//!   and for a number of them, without an eviction ([`PRESSURE_LINGER_NS`],
//!   [`PRESSURE_LINGER_LOOKUPS`]). The state at the end of the last episode is the **budget point**: its retained nodes and bytes, and the lookups after it
//!   (node reads, restores), are what a what-if compares, as the vm-replay scenario does.
//! - data pages in and out of the page cache (a recording made with `--page-cache`): the page
//!   cache's share of memory. A setting whose node cache holds less memory than the recorded
//!   one when an episode begins leaves that memory to the page cache: the data pages the
//!   episode dropped last, as many as fit in it, stay ([`replay`]). A later read of such a
//!   page is then a hit, and the node lookups its read made (of its file's nodes, on its
//!   thread, right after it) are not made. Without data pages the node lookups are replayed
//!   as recorded.
use std::sync::Arc;

use anyhow::{bail, Result};
use tracer_common::{knobs::Knobs, Access, CheckpointPhase, Decoded, Event, EventKind};

use crate::{
    cache::{CacheConfig, CacheStats, Payload},
    engine::{Engine, EngineOptions, Pressure},
    events::Task,
    f2fs::{node::RequestedType, NodeBlock},
    knobs::KnobSource,
    nodes::NodeSet,
};

/// One operation of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lookup,
    Create,
    Modify,
    Readahead,
    Evict,
    Checkpoint,
    /// A data page read into the page cache (a miss): `nid` is the page's index in
    /// [`Trace::pages`].
    PageIn,
    /// A data page dropped from the page cache; `nid` as for `PageIn`.
    PageOut,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Nanoseconds since the trace's first event.
    pub ts_ns: u64,
    pub nid: u32,
    pub op: Op,
    /// The thread that made it, numbered in the order threads appear (0: unknown, or beyond
    /// the 65,535th). It ties a data page's read to the lookups it made.
    pub thread: u16,
}

impl Step {
    pub fn new(ts_ns: u64, nid: u32, op: Op) -> Step {
        Step {
            ts_ns,
            nid,
            op,
            thread: 0,
        }
    }
}

/// A data page: its file's inode number and its index in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataPage {
    pub ino: u32,
    pub index: u64,
}

/// The access trace of one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub dev: u32,
    pub steps: Vec<Step>,
    /// Lookups (every op but drops, checkpoints and data pages).
    pub accesses: u64,
    pub evictions: u64,
    /// The data pages `PageIn` and `PageOut` steps name (empty without `--page-cache`).
    pub pages: Vec<DataPage>,
}

/// The most steps a trace may hold (16 bytes each: 64 MiB). A recording holds events far more
/// compactly than this, so a small crafted file could otherwise claim gigabytes; a real trace
/// of more is refused with a clear error, not cut short.
pub const MAX_TRACE_STEPS: usize = 1 << 22;

/// A pressure episode lasts until the trace has gone this long without an eviction. A kernel
/// held to a limit evicts only when something new comes in; between two misses the limit still
/// holds, though the recording shows nothing (the reference module's on run, kmod/README.md).
pub const PRESSURE_LINGER_NS: u64 = 100_000_000;

/// ... and for as long as fewer than this many lookups come before the next eviction, however
/// long they take. Time alone does not tell a released limit from a recorded system that was
/// slowed (a descheduled guest, a throttled phone): that stretches the gaps between evictions
/// in time, not in work. A gap this long in lookups is the recorded system reading on without
/// reclaiming: its limit was released.
pub const PRESSURE_LINGER_LOOKUPS: u64 = 256;

/// First pass over a recording's events: which device has the most `NodeAccess` events.
#[derive(Default)]
pub struct AccessesByDevice {
    per_dev: std::collections::HashMap<u32, u64>,
}

impl AccessesByDevice {
    pub fn count(&mut self, event: &Event) {
        if event.kind == EventKind::NodeAccess as u8 {
            *self.per_dev.entry(event.dev).or_default() += 1;
        }
    }

    /// The busiest device (the lowest number among equals). Fails when there is none: the
    /// recording was made without `--accesses`.
    pub fn busiest(&self) -> Result<u32> {
        self.per_dev
            .iter()
            .max_by_key(|(dev, n)| (**n, std::cmp::Reverse(**dev)))
            .map(|(dev, _)| *dev)
            .ok_or_else(|| {
                anyhow::anyhow!("the recording has no node accesses: record with --accesses")
            })
    }
}

/// Second pass: the trace of one device, at most [`MAX_TRACE_STEPS`] steps.
pub struct TraceBuilder {
    trace: Trace,
    max_steps: usize,
    page_ids: std::collections::HashMap<DataPage, u32>,
    threads: std::collections::HashMap<u32, u16>,
}

/// The most pages one `DataPage` event stands for (a folio of 2 MiB).
const MAX_FOLIO_PAGES: u32 = 512;

impl TraceBuilder {
    pub fn new(dev: u32) -> TraceBuilder {
        TraceBuilder::with_limit(dev, MAX_TRACE_STEPS)
    }

    pub fn with_limit(dev: u32, max_steps: usize) -> TraceBuilder {
        TraceBuilder {
            trace: Trace {
                dev,
                ..Trace::default()
            },
            max_steps,
            page_ids: Default::default(),
            threads: Default::default(),
        }
    }

    pub fn add(&mut self, event: &Event) -> Result<()> {
        if event.dev != self.trace.dev && event.kind != EventKind::Checkpoint as u8 {
            return Ok(());
        }
        if let Decoded::DataPage {
            ino,
            index,
            pages,
            added,
        } = event.decode()
        {
            let op = if added { Op::PageIn } else { Op::PageOut };
            for page in 0..u64::from(pages.clamp(1, MAX_FOLIO_PAGES)) {
                let key = DataPage {
                    ino,
                    index: index.saturating_add(page),
                };
                let next = self.trace.pages.len() as u32;
                let id = *self.page_ids.entry(key).or_insert(next);
                if id == next {
                    self.trace.pages.push(key);
                }
                self.push(event, id, op)?;
            }
            return Ok(());
        }
        let Some(op) = op_of(event) else {
            return Ok(());
        };
        self.push(event, event.nid, op)
    }

    fn push(&mut self, event: &Event, nid: u32, op: Op) -> Result<()> {
        if self.trace.steps.len() >= self.max_steps {
            bail!(
                "the trace of device {} has more than {} steps (node lookups, reads ahead, \
                 drops, checkpoints and data pages), the most whatif holds: record a shorter span",
                self.trace.dev,
                self.max_steps
            );
        }
        let next = self.threads.len() + 1;
        let thread = match event.pid {
            0 => 0,
            pid => *self
                .threads
                .entry(pid)
                .or_insert(u16::try_from(next).unwrap_or(0)),
        };
        self.trace.push(event.ts_ns, nid, op);
        if let Some(step) = self.trace.steps.last_mut() {
            step.thread = thread;
        }
        Ok(())
    }

    /// The trace in time order. A kernel's lookups reach a recording in per-CPU batches, after
    /// single events (evictions, checkpoints, reads) of the same time: sorted here (stable, so
    /// equal times keep the recording's order) and timed from the earliest step.
    pub fn finish(mut self) -> Trace {
        self.trace.steps.sort_by_key(|step| step.ts_ns);
        if let Some(first) = self.trace.steps.first().map(|step| step.ts_ns) {
            for step in &mut self.trace.steps {
                step.ts_ns -= first;
            }
        }
        self.trace
    }
}

impl Trace {
    /// The trace of the device with the most `NodeAccess` events. Fails when there is none
    /// (the recording was made without `--accesses`) or when it is over [`MAX_TRACE_STEPS`].
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event> + Clone) -> Result<Trace> {
        let mut counts = AccessesByDevice::default();
        for event in events.clone() {
            counts.count(event);
        }
        let mut builder = TraceBuilder::new(counts.busiest()?);
        for event in events {
            builder.add(event)?;
        }
        Ok(builder.finish())
    }

    pub fn push(&mut self, ts_ns: u64, nid: u32, op: Op) {
        match op {
            Op::Evict => self.evictions += 1,
            Op::Checkpoint | Op::PageIn | Op::PageOut => {}
            _ => self.accesses += 1,
        }
        self.steps.push(Step::new(ts_ns, nid, op));
    }

    /// Fails, naming the first one, when nodes the trace uses are not in the image.
    pub fn check_nids(&self, nodes: &NodeSet) -> Result<()> {
        let missing: Vec<u32> = self
            .steps
            .iter()
            .filter(|s| s.op.is_lookup())
            .map(|s| s.nid)
            .filter(|nid| nodes.block(*nid).is_none())
            .collect();
        if let Some(first) = missing.first() {
            bail!(
                "nid {first} is not in the image {} ({} of the trace's {} accesses are not): \
                 is it the recorded device's image?",
                nodes.image_path.display(),
                missing.len(),
                self.accesses
            );
        }
        Ok(())
    }
}

fn op_of(event: &Event) -> Option<Op> {
    let op = match event.decode() {
        Decoded::NodeAccess { access, .. } => match access {
            Access::Create => Op::Create,
            Access::Modify => Op::Modify,
            Access::Lookup => Op::Lookup,
        },
        Decoded::NodeEvict { .. } => Op::Evict,
        Decoded::NodeRead {
            readahead: true, ..
        } => Op::Readahead,
        Decoded::Checkpoint {
            phase: CheckpointPhase::FinishCheckpoint,
            ..
        } => Op::Checkpoint,
        _ => return None,
    };
    Some(op)
}

impl Op {
    /// A node lookup of some kind: every op but drops, checkpoints and data pages.
    pub fn is_lookup(self) -> bool {
        !matches!(self, Op::Evict | Op::Checkpoint | Op::PageIn | Op::PageOut)
    }
}

/// Per step, whether a pressure episode ends there: at the first lookup [`PRESSURE_LINGER_NS`]
/// or more after an eviction, when at least [`PRESSURE_LINGER_LOOKUPS`] lookups come before the
/// next eviction (or none follows). The whole trace is known, so the episode ends where the
/// limit was released, not where the lookups that prove it had been counted.
fn episode_ends(steps: &[Step]) -> Vec<bool> {
    let mut ends = vec![false; steps.len()];
    let evictions: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].op == Op::Evict)
        .collect();
    for (k, &at) in evictions.iter().enumerate() {
        let next = evictions.get(k + 1).copied();
        let gap = &steps[at + 1..next.unwrap_or(steps.len())];
        let lookups = gap.iter().filter(|s| s.op.is_lookup()).count() as u64;
        if next.is_some() && lookups < PRESSURE_LINGER_LOOKUPS {
            continue;
        }
        let lingered = steps[at].ts_ns.saturating_add(PRESSURE_LINGER_NS);
        if let Some(offset) = gap
            .iter()
            .position(|s| s.op.is_lookup() && s.ts_ns >= lingered)
        {
            ends[at + 1 + offset] = true;
        }
    }
    ends
}

/// One grid point's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Settings {
    /// The knob pair (threshold 0 = compression off).
    pub knobs: Knobs,
    /// Attributed memory the node cache is held to during pressure episodes.
    pub budget_bytes: u64,
    /// Slot sizes and reclaim weights (the RFC's by default).
    pub cache: CacheConfig,
}

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    pub accesses: u64,
    pub pressure_episodes: u64,
    /// Entries and attributed bytes at the budget point (the end of the last pressure episode;
    /// the end of the trace when there was none).
    pub retained_nodes: u64,
    pub retained_bytes: u64,
    /// Entries and attributed bytes at the end of the trace: what a kernel's counters say when
    /// the recording stops (equal to the budget point's when pressure lasts to the end).
    pub end_nodes: u64,
    pub end_bytes: u64,
    /// After the budget point (the whole trace when there was none).
    pub node_reads: u64,
    pub restores: u64,
    pub raw_hits: u64,
    /// The whole trace.
    pub total_node_reads: u64,
    pub total_restores: u64,
    pub conversions: u64,
    /// Entries the shrinker reclaimed over the whole trace: raw, and compressed (any slot).
    pub reclaimed_raw: u64,
    pub reclaimed_compressed: u64,
    pub peak_bytes: u64,
    /// After the budget point, as `node_reads`: the lookups by outcome (issue 51), each lookup
    /// in one. A replay has one task: no lookup waits on another's read.
    pub lookups: LookupOutcomes,
    /// The simulated restores' times after the budget point (`sim::costs`: per payload), for a
    /// wait prediction where the recording timed no restore.
    pub restore_ns: u64,
    /// The page cache's share (recordings with data pages; zeros without).
    pub page_cache: PageCacheEffect,
}

/// Lookups by how they were served (issue 51's outcomes, but `waited`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LookupOutcomes {
    pub hits: u64,
    pub restores: u64,
    pub disk_reads: u64,
    /// The raw buffer could not be allocated (the kernel's lookup fails with -ENOMEM).
    pub errors: u64,
}

impl LookupOutcomes {
    pub fn total(&self) -> u64 {
        self.hits + self.restores + self.disk_reads + self.errors
    }
}

/// Counters at the budget point.
#[derive(Clone, Copy, Default)]
struct Mark {
    reads: u64,
    stats: CacheStats,
}

/// Replay `trace` over `nodes` at `settings`, payloads made as `payload` says. With data pages
/// in the trace, the page cache gets the memory the setting saves (see the module's doc):
/// a first replay at the same settings with compression off gives the recorded cache's
/// memory at each episode's start.
pub fn replay(
    trace: &Trace,
    nodes: Arc<NodeSet>,
    settings: Settings,
    payload: Payload,
) -> Result<Outcome> {
    if trace.pages.is_empty() {
        return run(trace, nodes, settings, payload, None);
    }
    let recorded = Settings {
        knobs: Knobs {
            threshold: 0,
            ..settings.knobs
        },
        ..settings
    };
    let held = nodes.clone();
    let mut baseline = PageCache::new(trace, &held, Vec::new());
    run(
        trace,
        nodes.clone(),
        recorded,
        payload.clone(),
        Some(&mut baseline),
    )?;
    let mut pages = PageCache::new(trace, &held, baseline.episode_start_bytes);
    let mut outcome = run(trace, nodes, settings, payload, Some(&mut pages))?;
    outcome.page_cache = pages.effect;
    Ok(outcome)
}

/// What the page cache's share of memory did in a replay (recordings with data pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageCacheEffect {
    /// Data pages the episodes' drops spared: the memory the node cache saved, given over.
    pub pages_kept: u64,
    /// Reads of those pages the recording made, now hits.
    pub reads_spared: u64,
    /// Node lookups those reads made, not made.
    pub lookups_spared: u64,
}

/// The replay's view of the page cache: which data pages it keeps that the recording
/// dropped, and per thread the pages of its last read, to tell whether the lookups after it
/// were made for a read that is now a hit.
struct PageCache<'a> {
    trace: &'a Trace,
    nodes: &'a NodeSet,
    /// The recorded (compression off) cache's attributed bytes as each episode began, in
    /// order; empty on the baseline run, which collects them.
    recorded_bytes: Vec<u64>,
    episode_start_bytes: Vec<u64>,
    /// Step indices of the `PageOut`s to skip: the pages stay.
    kept_drops: std::collections::HashSet<usize>,
    /// Pages in this replay's page cache that the recording had dropped.
    kept: std::collections::HashSet<u32>,
    reads: std::collections::HashMap<u16, Read>,
    effect: PageCacheEffect,
}

/// A thread's last read of data pages: its file, whether every page of it was already there,
/// and whether a lookup of the file's nodes followed (later pages begin a new read).
#[derive(Clone, Copy)]
struct Read {
    ino: u32,
    all_kept: bool,
    looked_up: bool,
}

impl<'a> PageCache<'a> {
    fn new(trace: &'a Trace, nodes: &'a NodeSet, recorded_bytes: Vec<u64>) -> PageCache<'a> {
        PageCache {
            trace,
            nodes,
            recorded_bytes,
            episode_start_bytes: Vec::new(),
            kept_drops: Default::default(),
            kept: Default::default(),
            reads: Default::default(),
            effect: PageCacheEffect::default(),
        }
    }

    /// An episode begins at step `at` with the replay's cache at `bytes`: the memory it holds
    /// less than the recorded cache keeps the pages the episode drops last.
    fn episode_begins(&mut self, at: usize, episode_end: usize, bytes: u64) {
        let episode = self.episode_start_bytes.len();
        self.episode_start_bytes.push(bytes);
        let Some(&recorded) = self.recorded_bytes.get(episode) else {
            return;
        };
        let mut room = recorded.saturating_sub(bytes) / PAGE_BYTES;
        for index in (at..episode_end).rev() {
            if room == 0 {
                break;
            }
            if self.trace.steps[index].op == Op::PageOut {
                self.kept_drops.insert(index);
                room -= 1;
            }
        }
    }

    /// Whether the step at `index` is replayed (false: a kept page's drop, a spared lookup).
    fn replays(&mut self, index: usize, step: &Step) -> bool {
        match step.op {
            Op::PageOut => {
                if self.kept_drops.contains(&index) {
                    self.kept.insert(step.nid);
                    self.effect.pages_kept += 1;
                    return false;
                }
                self.kept.remove(&step.nid);
                false
            }
            Op::PageIn => {
                let was_kept = self.kept.remove(&step.nid);
                self.effect.reads_spared += u64::from(was_kept);
                let ino = self.trace.pages[step.nid as usize].ino;
                let read = self.reads.entry(step.thread).or_insert(Read {
                    ino,
                    all_kept: true,
                    looked_up: true,
                });
                if read.looked_up || read.ino != ino {
                    *read = Read {
                        ino,
                        all_kept: was_kept,
                        looked_up: false,
                    };
                } else {
                    read.all_kept &= was_kept;
                }
                false
            }
            op if op.is_lookup() && step.thread != 0 => {
                let Some(read) = self.reads.get_mut(&step.thread) else {
                    return true;
                };
                let owner = self
                    .nodes
                    .block(step.nid)
                    .map(|block| NodeBlock(&block[..]).footer_ino());
                if owner != Some(read.ino) {
                    return true;
                }
                read.looked_up = true;
                if read.all_kept {
                    self.effect.lookups_spared += 1;
                    return false;
                }
                true
            }
            _ => true,
        }
    }
}

/// A data page's memory in the page cache.
const PAGE_BYTES: u64 = 4096;

/// Where each pressure episode that begins at a step ends (the step that ends it, or the
/// trace's length), as [`run`] walks them.
fn episode_spans(steps: &[Step], ends: &[bool]) -> std::collections::HashMap<usize, usize> {
    let mut spans = std::collections::HashMap::new();
    let mut open: Option<usize> = None;
    for (index, step) in steps.iter().enumerate() {
        if let Some(begun) = open {
            if ends[index] {
                spans.insert(begun, index);
                open = None;
            }
        }
        if step.op == Op::Evict && open.is_none() {
            open = Some(index);
        }
    }
    if let Some(begun) = open {
        spans.insert(begun, steps.len());
    }
    spans
}

fn run(
    trace: &Trace,
    nodes: Arc<NodeSet>,
    settings: Settings,
    payload: Payload,
    mut pages: Option<&mut PageCache>,
) -> Result<Outcome> {
    let options = EngineOptions {
        dev: trace.dev,
        record_events: false,
        sample_every_ns: 0,
        accesses: false,
    };
    let mut engine = Engine::new(nodes, KnobSource::Static(settings.knobs), options);
    engine.cache.set_config(settings.cache);
    engine.set_payload(payload);
    let task = Task::process(1, 0, "whatif");
    let budget = Pressure::Budget {
        bytes: settings.budget_bytes,
    };
    let ends = episode_ends(&trace.steps);
    let spans = match pages {
        Some(_) => episode_spans(&trace.steps, &ends),
        None => Default::default(),
    };
    let mut pressing = false;
    let mut outcome = Outcome::default();
    let mut mark = Mark::default();
    for (index, (step, &ends_episode)) in trace.steps.iter().zip(&ends).enumerate() {
        engine.advance_to(step.ts_ns)?;
        if pressing && ends_episode {
            engine.set_pressure(Pressure::None);
            pressing = false;
            let memory = engine.cache.memory();
            outcome.retained_nodes = memory.entries;
            outcome.retained_bytes = memory.attributed_bytes;
            mark = Mark {
                reads: engine.disk.reads,
                stats: engine.cache.stats,
            };
        }
        if let Some(pages) = pages.as_deref_mut() {
            if step.op == Op::Evict && !pressing {
                let end = spans.get(&index).copied().unwrap_or(trace.steps.len());
                pages.episode_begins(index, end, engine.cache.memory().attributed_bytes);
            }
            if !pages.replays(index, step) {
                continue;
            }
        }
        match step.op {
            Op::Lookup => {
                engine.access(&task, step.nid, RequestedType::Any)?;
            }
            Op::Create => {
                engine.create(&task, step.nid)?;
            }
            Op::Modify => {
                engine.dirty_untouched(&task, step.nid)?;
            }
            Op::Readahead => {
                engine.readahead(&task, &[step.nid])?;
            }
            Op::Checkpoint => {
                engine.checkpoint();
            }
            Op::Evict => {
                if !pressing {
                    engine.set_pressure(budget);
                    pressing = true;
                    outcome.pressure_episodes += 1;
                }
            }
            Op::PageIn | Op::PageOut => {}
        }
        outcome.peak_bytes = outcome
            .peak_bytes
            .max(engine.cache.memory().attributed_bytes);
    }
    if outcome.pressure_episodes == 0 || pressing {
        let memory = engine.cache.memory();
        outcome.retained_nodes = memory.entries;
        outcome.retained_bytes = memory.attributed_bytes;
    }
    let end = engine.cache.memory();
    outcome.end_nodes = end.entries;
    outcome.end_bytes = end.attributed_bytes;
    let stats = engine.cache.stats;
    outcome.accesses = trace.accesses;
    outcome.node_reads = engine.disk.reads - mark.reads;
    outcome.restores = stats.events.restores - mark.stats.events.restores;
    outcome.raw_hits = stats.raw_hits - mark.stats.raw_hits;
    outcome.total_node_reads = engine.disk.reads;
    outcome.total_restores = stats.events.restores;
    outcome.conversions = stats.events.conversions;
    outcome.reclaimed_raw = stats.events.reclaims.raw;
    outcome.reclaimed_compressed = stats.events.reclaims.compressed();
    let since = stats.since(&mark.stats);
    let nomem = since.events.restore_nomem;
    outcome.lookups = LookupOutcomes {
        hits: since.raw_hits,
        restores: since.events.restores,
        disk_reads: since
            .lookups
            .saturating_sub(since.raw_hits + since.events.restores + nomem),
        errors: nomem,
    };
    outcome.restore_ns = since.events.restore_latency.total_ns;
    Ok(outcome)
}

/// The three counts the exactness claim is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BudgetCounts {
    pub node_reads: u64,
    pub restores: u64,
    pub retained_nodes: u64,
}

impl From<&Outcome> for BudgetCounts {
    fn from(o: &Outcome) -> BudgetCounts {
        BudgetCounts {
            node_reads: o.node_reads,
            restores: o.restores,
            retained_nodes: o.retained_nodes,
        }
    }
}

/// `vm-replay` recorded with compression off, replayed at the scenario's own settings with
/// compression on, next to the scenario's on side.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VmReplayCheck {
    pub scenario_on: BudgetCounts,
    pub whatif_lz4: BudgetCounts,
    pub whatif_sizes: BudgetCounts,
    /// The recorded (off) run's events, for callers that write them to a recording.
    #[serde(skip)]
    pub events: Vec<Event>,
    #[serde(skip)]
    pub trace: Trace,
}

impl VmReplayCheck {
    pub fn exact(&self) -> bool {
        self.whatif_lz4 == self.scenario_on && self.whatif_sizes == self.scenario_on
    }
}

pub fn vm_replay_check(seed: u64) -> Result<VmReplayCheck> {
    use crate::{cache::PayloadSizes, scenario::vm_replay};
    let params = vm_replay::VmReplayParams::default();
    let (off_knobs, on_knobs) = vm_replay::side_knobs();
    let (_, events) = vm_replay::run_recorded(&params, off_knobs, seed)?;
    let trace = Trace::from_events(&events)?;
    let nodes = vm_replay::rfc_nodes()?;
    trace.check_nids(&nodes)?;
    let on = vm_replay::compare(&params, seed)?.equal_memory.on;
    let settings = Settings {
        knobs: on_knobs,
        budget_bytes: params.budget_bytes,
        cache: CacheConfig::rfc(),
    };
    let lz4 = replay(&trace, nodes.clone(), settings, Payload::Lz4)?;
    let sizes = Payload::Sizes(Arc::new(PayloadSizes::lz4(&nodes)));
    let sized = replay(&trace, nodes, settings, sizes)?;
    Ok(VmReplayCheck {
        scenario_on: BudgetCounts {
            node_reads: on.node_reads,
            restores: on.restores,
            retained_nodes: on.nodes,
        },
        whatif_lz4: BudgetCounts::from(&lz4),
        whatif_sizes: BudgetCounts::from(&sized),
        events,
        trace,
    })
}

pub mod grid;

#[cfg(test)]
mod tests;
