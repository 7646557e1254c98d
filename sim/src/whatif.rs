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
//!   With [`Reclaim::AsRecorded`] (`whatif --budget recorded`) an episode instead frees, at
//!   each recorded drop, the memory the recorded kernel freed with it.
//! - a demand node read that no timed lookup on its thread was running at: a lookup through a
//!   function the trace does not hook, replayed as a lookup ([`Op::UntracedLookup`]).
use std::sync::Arc;

use anyhow::{bail, Result};
use tracer_common::{
    knobs::Knobs, Access, CheckpointPhase, Decoded, Event, EventKind, SecondChanceBy,
};

use crate::{
    cache::{CacheConfig, CacheStats, Payload},
    engine::{Engine, EngineOptions, Pressure},
    events::Task,
    f2fs::node::RequestedType,
    knobs::KnobSource,
    nodes::NodeSet,
};

/// A reloaded inode's lookups: the first lookup of its inode block after the recorded eviction
/// (`f2fs_iget` reading it) and the lookups of that block that follow within this span (the
/// encryption context's read, SELinux's label, in the same open). On the reference module's
/// phone trial, every inode evicted under pressure was looked up again after the release, the
/// second lookup on the same thread 0.33 to 13.4 ms after the first (TCG guest).
pub const RELOAD_SPAN_NS: u64 = 50_000_000;

/// One operation of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lookup,
    Create,
    Modify,
    Readahead,
    Evict,
    Checkpoint,
    /// A demand node read that no traced lookup made: a lookup through a function the trace
    /// does not hook (6.12's `f2fs_get_node_page_ra`, for the nodes under an indirect node),
    /// known from its read. Only in traces whose lookups are timed, which tells the reads
    /// lookups made from the others. Replayed as a lookup; not one of `Trace::accesses`.
    UntracedLookup,
    /// An inode left the recorded kernel's inode cache (`nid` = its inode number, which is its
    /// inode block's nid): its file's next open reads it again.
    InodeEvict,
    /// The recorded kernel's node cache shrinker scanned an entry and left it (its REFERENCED
    /// second chance): reclaim work that dropped nothing, which only a kernel with the RFC's
    /// tracepoints shows. With `Evict`, what `Reclaim::AsRecorded` replays when the trace has
    /// no `ShrinkerScan`.
    Scan,
    /// Reclaim asked F2FS's shrinker to scan: `count` objects counted, at reclaim `priority`
    /// (`vmscan:mm_shrink_slab_start`). What `Reclaim::AsRecorded` replays when the trace has
    /// them ([`shrinker`]). `nid` is 0: one shrinker serves every F2FS mount.
    ShrinkerScan {
        count: u32,
        priority: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Nanoseconds since the trace's first event.
    pub ts_ns: u64,
    pub nid: u32,
    pub op: Op,
}

/// The access trace of one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub dev: u32,
    pub steps: Vec<Step>,
    /// Lookups the recording traced (every op but drops, checkpoints and untraced lookups).
    pub accesses: u64,
    pub evictions: u64,
    /// `UntracedLookup` steps.
    pub untraced_lookups: u64,
    /// `InodeEvict` steps.
    pub inode_evictions: u64,
    /// `Scan` steps.
    pub scans: u64,
    /// `ShrinkerScan` steps.
    pub shrinker_scans: u64,
    /// The recorded kernel had the RFC's node cache (its events: inserts, reclaims,
    /// conversions), which F2FS's shrinker counted beside its other caches.
    pub node_cache: bool,
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
    /// Timed lookups by (thread, nid): from their start to their return.
    timed: std::collections::HashMap<(u32, u32), Vec<(u64, u64)>>,
    /// Demand node reads: (time, thread, nid).
    demand_reads: Vec<(u64, u32, u32)>,
}

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
            timed: Default::default(),
            demand_reads: Vec::new(),
        }
    }

    pub fn add(&mut self, event: &Event) -> Result<()> {
        // Checkpoints and F2FS's shrinker are not any one device's.
        let any_device = [EventKind::Checkpoint, EventKind::ShrinkerScan].map(|kind| kind as u8);
        if event.dev != self.trace.dev && !any_device.contains(&event.kind) {
            return Ok(());
        }
        match event.decode() {
            Decoded::Insert { .. } | Decoded::Reclaim { .. } | Decoded::Convert { .. } => {
                self.trace.node_cache = true;
            }
            Decoded::NodeAccess {
                retrieval: Some(retrieval),
                ..
            } => {
                let end = event.ts_ns.saturating_add(retrieval.latency_ns);
                self.timed
                    .entry((event.pid, event.nid))
                    .or_default()
                    .push((event.ts_ns, end));
            }
            Decoded::NodeRead {
                readahead: false,
                nid,
                ..
            } => {
                // Each may become a step: held to the steps' limit before it is kept.
                if self.demand_reads.len() >= self.max_steps {
                    self.too_many()?;
                }
                self.demand_reads.push((event.ts_ns, event.pid, nid));
            }
            _ => {}
        }
        let Some(op) = op_of(event) else {
            return Ok(());
        };
        self.push(event.ts_ns, event.nid, op)
    }

    fn push(&mut self, ts_ns: u64, nid: u32, op: Op) -> Result<()> {
        if self.trace.steps.len() >= self.max_steps {
            self.too_many()?;
        }
        self.trace.push(ts_ns, nid, op);
        Ok(())
    }

    fn too_many(&self) -> Result<()> {
        bail!(
            "the trace of device {} has more than {} steps (node lookups, reads ahead, \
                 drops and checkpoints), the most whatif holds: record a shorter span",
            self.trace.dev,
            self.max_steps
        )
    }

    /// The demand reads no timed lookup on their thread was running at, as lookups of their
    /// own (none when no lookup was timed: an untimed lookup's time is its CPU's tick's).
    fn add_untraced_lookups(&mut self) -> Result<()> {
        if self.timed.is_empty() {
            return Ok(());
        }
        for (ts_ns, pid, nid) in std::mem::take(&mut self.demand_reads) {
            let covered = self.timed.get(&(pid, nid)).is_some_and(|spans| {
                spans
                    .iter()
                    .any(|&(start, end)| (start..=end).contains(&ts_ns))
            });
            if !covered {
                self.push(ts_ns, nid, Op::UntracedLookup)?;
            }
        }
        Ok(())
    }

    /// The trace in time order. A kernel's lookups reach a recording in per-CPU batches, after
    /// single events (evictions, checkpoints, reads) of the same time: sorted here (stable, so
    /// equal times keep the recording's order) and timed from the earliest step.
    pub fn finish(mut self) -> Result<Trace> {
        self.add_untraced_lookups()?;
        self.trace.steps.sort_by_key(|step| step.ts_ns);
        if let Some(first) = self.trace.steps.first().map(|step| step.ts_ns) {
            for step in &mut self.trace.steps {
                step.ts_ns -= first;
            }
        }
        Ok(self.trace)
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
        builder.finish()
    }

    pub fn push(&mut self, ts_ns: u64, nid: u32, op: Op) {
        match op {
            Op::Evict => self.evictions += 1,
            Op::Checkpoint => {}
            Op::UntracedLookup => self.untraced_lookups += 1,
            Op::InodeEvict => self.inode_evictions += 1,
            Op::Scan => self.scans += 1,
            Op::ShrinkerScan { .. } => self.shrinker_scans += 1,
            _ => self.accesses += 1,
        }
        self.steps.push(Step { ts_ns, nid, op });
    }

    /// The trace as if its kernel had evicted only `kept` of the inodes it evicted: those
    /// whose block was looked up longest before their eviction, the inode cache's LRU order.
    /// The others stay cached: their evictions and their reloads' lookups
    /// ([`RELOAD_SPAN_NS`]) are taken out. On issue 50's phone trial, the on kernel's evicted
    /// set was the off recording's this way: 295 of 298, 358 of 358, 361 of 361 (by the order
    /// of eviction instead: 218, 304, 338). Fails for more than the trace evicted: when a
    /// cached inode is next opened makes no node lookup, so a trace cannot show another
    /// inode's reload.
    pub fn with_inode_evictions(&self, kept: u64) -> Result<Trace> {
        if kept > self.inode_evictions {
            bail!(
                "the recording evicted {} inodes: a trace cannot show which other inodes a \
                 kernel would evict (ask for {} or fewer)",
                self.inode_evictions,
                self.inode_evictions
            );
        }
        let evicted = self.evictions_least_recently_used(kept);
        let mut spared = std::collections::HashSet::new();
        let mut reloads = ReloadTracker::default();
        let mut trace = Trace {
            dev: self.dev,
            node_cache: self.node_cache,
            ..Trace::default()
        };
        for (index, step) in self.steps.iter().enumerate() {
            let keep = match step.op {
                Op::InodeEvict => {
                    reloads.evicted(step.nid);
                    let stays_cached = !evicted.contains(&index);
                    if stays_cached {
                        spared.insert(step.nid);
                    } else {
                        spared.remove(&step.nid);
                    }
                    !stays_cached
                }
                Op::Lookup | Op::UntracedLookup => {
                    !(reloads.is_reload(step.nid, step.ts_ns) && spared.contains(&step.nid))
                }
                _ => true,
            };
            if keep {
                trace.push(step.ts_ns, step.nid, step.op);
            }
        }
        Ok(trace)
    }

    /// The step indices of `count` inode evictions: those whose inode block's last lookup
    /// before them is the oldest (never looked up counts as oldest; equals by the order of
    /// eviction).
    fn evictions_least_recently_used(&self, count: u64) -> std::collections::HashSet<usize> {
        let mut last_lookup = std::collections::HashMap::new();
        let mut evictions = Vec::new();
        for (index, step) in self.steps.iter().enumerate() {
            if step.op.is_lookup() {
                last_lookup.insert(step.nid, step.ts_ns);
            } else if step.op == Op::InodeEvict {
                let last = last_lookup.get(&step.nid).copied();
                evictions.push((last, index));
            }
        }
        evictions.sort_unstable();
        evictions
            .into_iter()
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .map(|(_, index)| index)
            .collect()
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
        Decoded::InodeEvict { .. } => Op::InodeEvict,
        Decoded::SecondChance {
            by: Some(SecondChanceBy::Shrinker),
            ..
        } => Op::Scan,
        Decoded::NodeRead {
            readahead: true, ..
        } => Op::Readahead,
        Decoded::ShrinkerScan {
            count, priority, ..
        } => Op::ShrinkerScan { count, priority },
        Decoded::Checkpoint {
            phase: CheckpointPhase::FinishCheckpoint,
            ..
        } => Op::Checkpoint,
        _ => return None,
    };
    Some(op)
}

impl Op {
    /// A node lookup of some kind: every op but drops, checkpoints, inode evictions and scans.
    pub fn is_lookup(self) -> bool {
        !matches!(
            self,
            Op::Evict | Op::Checkpoint | Op::InodeEvict | Op::Scan | Op::ShrinkerScan { .. }
        )
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

/// How a pressure episode reclaims the replayed cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reclaim {
    /// Held to `Settings::budget_bytes` of attributed memory until the episode ends.
    #[default]
    Budget,
    /// As the recorded kernel reclaimed: each entry its shrinker scanned (a node page the
    /// recording saw dropped, or a second chance the shrinker gave, when the recording has the
    /// RFC's events), when it was scanned, has the replay's shrinker scan the same share of the
    /// replayed cache as it was of the recorded kernel's node pages (one of however many it
    /// held), in the shrinker's effective count (a raw entry one, a compressed one its weight's
    /// share), split among the queues by their weights, each scanned entry reclaimed or given
    /// its second chance. Reclaim asks every shrinker to scan a share of its own count
    /// (`do_shrink_slab`: `count >> priority`), whatever the count, so a cache of small
    /// compressed entries is scanned in proportion, mostly its raw entries. Issue 50's first
    /// phone trials took the whole cache in every mode, which a replay freeing the dropped
    /// pages' bytes matched; a reclaim that takes part of it (the trial since the phone's page
    /// cache is in the guest) leaves compressed entries standing where raw ones go.
    ///
    /// When the trace has F2FS's shrinker calls (`Op::ShrinkerScan`), those are replayed
    /// instead ([`shrinker`]): each call's priority against the replayed kernel's own count,
    /// the node cache competing with the extent and NAT caches inside F2FS's scan. The drops
    /// and second chances then only mark the episodes.
    AsRecorded,
}

/// One grid point's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Settings {
    /// The knob pair (threshold 0 = compression off).
    pub knobs: Knobs,
    /// Attributed memory the node cache is held to during pressure episodes
    /// (`Reclaim::Budget`).
    pub budget_bytes: u64,
    pub reclaim: Reclaim,
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
    /// Inodes the recorded kernel evicted (the whole trace), and, after the budget point, the
    /// lookups that reloaded one ([`RELOAD_SPAN_NS`]) and how many of them read from disk or
    /// restored: what the recorded kernel's inode cache adds to `node_reads` and `restores`.
    pub inode_evictions: u64,
    pub reloads: Reloads,
    /// F2FS's shrinker, when the trace has its calls (`Reclaim::AsRecorded`).
    pub shrinker: ShrinkerCalls,
}

/// Lookups that reloaded an inode the recorded kernel had evicted, after the budget point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reloads {
    pub lookups: u64,
    pub node_reads: u64,
    pub restores: u64,
}

impl Reloads {
    /// What came after `mark`, an earlier reading of the same counts.
    fn since(&self, mark: &Reloads) -> Reloads {
        Reloads {
            lookups: self.lookups - mark.lookups,
            node_reads: self.node_reads - mark.node_reads,
            restores: self.restores - mark.restores,
        }
    }
}

/// Inodes evicted and not yet reloaded, or in their reload (its first lookup's time).
#[derive(Default)]
struct ReloadTracker {
    pending: std::collections::HashMap<u32, Option<u64>>,
    total: Reloads,
}

impl ReloadTracker {
    fn evicted(&mut self, ino: u32) {
        self.pending.insert(ino, None);
    }

    /// Whether a lookup of `nid` at `ts_ns` is part of an inode's reload.
    fn is_reload(&mut self, nid: u32, ts_ns: u64) -> bool {
        // Most traces evict no inode: no hashing per lookup then.
        if self.pending.is_empty() {
            return false;
        }
        let Some(first) = self.pending.get_mut(&nid) else {
            return false;
        };
        match *first {
            None => {
                *first = Some(ts_ns);
                true
            }
            Some(start) if ts_ns.saturating_sub(start) <= RELOAD_SPAN_NS => true,
            Some(_) => {
                self.pending.remove(&nid);
                false
            }
        }
    }
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

/// One entry the recorded kernel's shrinker scanned, of the `held` node pages it held then: the
/// replay's shrinker scans the same share of its own effective count (`Reclaim::AsRecorded`;
/// the fraction of an entry stays `owed`).
fn scan_as_recorded(engine: &mut Engine, held: usize, owed: &mut f64) {
    *owed += engine.cache.effective_count() / held.max(1) as f64;
    engine.shrink_scans(owed);
}

/// Counters at the budget point.
#[derive(Clone, Copy, Default)]
struct Mark {
    reads: u64,
    stats: CacheStats,
    reloads: Reloads,
}

/// Replay `trace` over `nodes` at `settings`, payloads made as `payload` says.
pub fn replay(
    trace: &Trace,
    nodes: Arc<NodeSet>,
    settings: Settings,
    payload: Payload,
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
    let mut pressing = false;
    let mut outcome = Outcome::default();
    let mut mark = Mark::default();
    // `Reclaim::AsRecorded`: the recorded kernel's node pages (looked up, not dropped since),
    // and the scans its shrinker made, as shares of the replayed cache's effective count, that
    // the replay has not made yet.
    let mut recorded = std::collections::HashSet::new();
    let mut owed = 0.0;
    // ... or, when the trace has F2FS's shrinker calls, those calls replayed.
    let by_calls = settings.reclaim == Reclaim::AsRecorded && trace.shrinker_scans > 0;
    let mut shrinker = shrinker::F2fsShrinker::default();
    let mut reloads = ReloadTracker::default();
    for (step, &ends_episode) in trace.steps.iter().zip(&ends) {
        engine.advance_to(step.ts_ns)?;
        if pressing && ends_episode {
            if settings.reclaim == Reclaim::Budget {
                engine.set_pressure(Pressure::None);
            }
            pressing = false;
            let memory = engine.cache.memory();
            outcome.retained_nodes = memory.entries;
            outcome.retained_bytes = memory.attributed_bytes;
            mark = Mark {
                reads: engine.disk.reads,
                stats: engine.cache.stats,
                reloads: reloads.total,
            };
        }
        if settings.reclaim == Reclaim::AsRecorded && step.op.is_lookup() {
            recorded.insert(step.nid);
        }
        match step.op {
            Op::Lookup | Op::UntracedLookup => {
                let reload = reloads.is_reload(step.nid, step.ts_ns);
                let (reads, restores) = (engine.disk.reads, engine.cache.stats.events.restores);
                engine.access(&task, step.nid, RequestedType::Any)?;
                let (read, restored) = (
                    engine.disk.reads - reads,
                    engine.cache.stats.events.restores - restores,
                );
                if by_calls && read + restored > 0 {
                    shrinker.node_info(step.nid);
                }
                if reload {
                    reloads.total.lookups += 1;
                    reloads.total.node_reads += read;
                    reloads.total.restores += restored;
                }
            }
            Op::Create => {
                engine.create(&task, step.nid)?;
                if by_calls {
                    shrinker.node_info(step.nid);
                }
            }
            Op::Modify => {
                engine.dirty_untouched(&task, step.nid)?;
            }
            Op::Readahead => {
                engine.readahead(&task, &[step.nid])?;
                if by_calls {
                    shrinker.node_info(step.nid);
                }
            }
            Op::Checkpoint => {
                engine.checkpoint();
            }
            Op::InodeEvict => reloads.evicted(step.nid),
            Op::Scan => {
                if settings.reclaim == Reclaim::AsRecorded && !by_calls {
                    scan_as_recorded(&mut engine, recorded.len(), &mut owed);
                }
            }
            Op::ShrinkerScan { count, priority } => {
                if by_calls {
                    let recorded_node_cache = if trace.node_cache {
                        recorded.len() as u64
                    } else {
                        0
                    };
                    shrinker.call(
                        &mut engine,
                        step.ts_ns,
                        u64::from(count),
                        priority,
                        recorded_node_cache,
                    );
                }
            }
            Op::Evict => {
                if !pressing {
                    if settings.reclaim == Reclaim::Budget {
                        engine.set_pressure(budget);
                    }
                    pressing = true;
                    outcome.pressure_episodes += 1;
                }
                if settings.reclaim == Reclaim::AsRecorded {
                    if !by_calls {
                        scan_as_recorded(&mut engine, recorded.len(), &mut owed);
                    }
                    recorded.remove(&step.nid);
                }
            }
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
    outcome.inode_evictions = trace.inode_evictions;
    outcome.reloads = reloads.total.since(&mark.reloads);
    outcome.shrinker = ShrinkerCalls {
        calls: shrinker.calls,
        scanned: shrinker.scanned,
        node_scanned: shrinker.node_scanned,
    };
    Ok(outcome)
}

/// F2FS's shrinker as the replay drove it from the recorded calls (`Op::ShrinkerScan`; all
/// zero without them): the calls that found something to count, the objects it was asked to
/// scan, and the node cache entries it scanned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShrinkerCalls {
    pub calls: u64,
    pub scanned: u64,
    pub node_scanned: u64,
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
        reclaim: Reclaim::Budget,
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
pub mod shrinker;

#[cfg(test)]
mod tests;
