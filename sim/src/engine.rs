//! The discrete-event engine: one virtual clock, the node cache, the disk, the knobs, and the
//! background actors (the cache thread's compression pass, reclaim under pressure, memory
//! sampling). A workload calls [`Engine::advance_to`] before each foreground operation, so
//! background work due earlier runs first and a foreground access can land between a
//! compression and its publication (the race the RFC handles).
use std::sync::Arc;

use anyhow::Result;
use tracer_common::{Event, QUEUE_1024, QUEUE_256, QUEUE_512, QUEUE_RAW};

use crate::{
    accounting::Memory,
    cache::{
        worker::{PassStats, WorkerPass, WorkerStep},
        CacheStats, NodeCache, NodeCheck, Served,
    },
    costs,
    disk::Disk,
    events::{Emitter, Task, DEFAULT_DEV},
    f2fs::{node::RequestedType, Block},
    knobs::KnobSource,
    nodes::NodeSet,
};
use tracer_common::knobs::Knobs;

/// What drives the shrinker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Pressure {
    None,
    /// Reclaim (kswapd) keeps attributed node-cache memory at or under `bytes`.
    Budget {
        bytes: u64,
    },
    /// Memory pressure at a reclaim priority (12 = DEF_PRIORITY, lightest; 0 heaviest): every
    /// `every_ms` the shrinker is asked to scan `2 x count >> priority` entries, in batches of
    /// 128, as do_shrink_slab computes it for DEFAULT_SEEKS.
    Reclaim {
        priority: u8,
        every_ms: u32,
    },
}

/// The shrinker batch of direct and background reclaim for a budget (SWAP_CLUSTER_MAX).
pub const BUDGET_BATCH: u64 = 32;
/// `SHRINK_BATCH`.
pub const SHRINK_BATCH: u64 = 128;
/// How often kswapd checks a budget.
const BUDGET_TICK_NS: u64 = 10_000_000;

/// Gauges a controller or a live view reads.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Snapshot {
    pub ts_ns: u64,
    pub pressure: Pressure,
    pub memory: Memory,
    /// Entries per queue: raw, 256, 512, 1024.
    pub queue_entries: [u32; 4],
    pub slots: SlotCounts,
    pub knobs: Knobs,
    /// The shrinker's effective count.
    pub shrink_count: u64,
    pub stats: CacheStats,
    /// FS_NODE_READ_IO so far (demand + readahead).
    pub node_reads: u64,
    pub readahead_reads: u64,
    pub last_pass: PassStats,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SlotCounts {
    pub b256: u32,
    pub b512: u32,
    pub b1024: u32,
}

/// One point of the attributed-memory time series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemorySample {
    pub ts_ns: u64,
    pub attributed_bytes: u64,
    pub raw_entries: u64,
    pub compressed_entries: u64,
}

#[derive(Clone, Debug)]
pub struct EngineOptions {
    pub dev: u32,
    /// Keep `Event`s (live mode, tests); scenario totals do not need them.
    pub record_events: bool,
    /// Memory sampling period (0 = never).
    pub sample_every_ns: u64,
    /// Emit the access trace too (`NodeAccess`, `NodeEvict`, checkpoints): `--accesses`.
    pub accesses: bool,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            dev: DEFAULT_DEV,
            record_events: false,
            sample_every_ns: 1_000_000_000,
            accesses: false,
        }
    }
}

/// Hands control to a real-time driver when the engine is about to pass the time it may reach
/// (see `live`). Returns the new limit, or an error when the driver is gone.
pub trait Pacer: Send {
    fn wait_for_more(&mut self, engine: &mut Engine) -> Result<u64>;
}

struct Worker {
    task: Task,
    next_pass_at: u64,
    pass_started_at: u64,
    resume_at: u64,
    pass: Option<WorkerPass>,
    last_pass: PassStats,
}

pub struct Engine {
    pub cache: NodeCache,
    pub disk: Disk,
    pub em: Emitter,
    pub knobs: KnobSource,
    now: u64,
    worker: Worker,
    pressure: Pressure,
    next_pressure_tick: u64,
    kswapd: Task,
    samples: Vec<MemorySample>,
    sample_every: u64,
    next_sample_at: u64,
    pacer: Option<(Box<dyn Pacer>, u64)>,
}

impl Engine {
    pub fn new(nodes: Arc<NodeSet>, mut knobs: KnobSource, options: EngineOptions) -> Engine {
        let check = NodeCheck {
            inode_checksums: nodes.inode_checksums,
            checksum_seed: nodes.checksum_seed,
        };
        knobs.refresh();
        // The knobs exist only in sysfs: at mount they hold the kernel's defaults and the first
        // pass is due one default interval later; whatever is written after mount (a static
        // setting or a controller) takes effect from the pass after that due time, because a
        // sysfs write does not move the cache thread's due time.
        let first_pass_at = u64::from(tracer_common::knobs::DEFAULT_INTERVAL_MS) * 1_000_000;
        let mut em = Emitter::new(options.dev, options.record_events);
        em.set_accesses(options.accesses);
        Engine {
            cache: NodeCache::new(check),
            disk: Disk::new(nodes),
            em,
            knobs,
            now: 0,
            worker: Worker {
                task: Task::kthread(412, "f2fs_writeback-254:16"),
                next_pass_at: first_pass_at,

                pass_started_at: 0,
                resume_at: 0,
                pass: None,
                last_pass: PassStats::default(),
            },
            pressure: Pressure::None,
            next_pressure_tick: 0,
            kswapd: Task::kthread(97, "kswapd0"),
            samples: Vec::new(),
            sample_every: options.sample_every_ns,
            next_sample_at: 0,
            pacer: None,
        }
    }

    /// How the cache makes and restores payloads; `Sizes` also makes the disk hand out a
    /// placeholder instead of the image's bytes (nothing reads them then).
    pub fn set_payload(&mut self, payload: crate::cache::Payload) {
        if let crate::cache::Payload::Sizes(sizes) = &payload {
            self.disk.hold_sizes_only(sizes.clone());
        }
        self.cache.payload = payload;
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn nodes(&self) -> &Arc<NodeSet> {
        self.disk.nodes()
    }

    pub fn set_pacer(&mut self, pacer: Box<dyn Pacer>, limit: u64) {
        self.pacer = Some((pacer, limit));
    }

    pub fn drain_events(&mut self, out: &mut Vec<Event>) {
        self.em.drain_into(out);
    }

    pub fn samples(&self) -> &[MemorySample] {
        &self.samples
    }

    pub fn set_pressure(&mut self, pressure: Pressure) {
        self.pressure = pressure;
        self.next_pressure_tick = self.now;
    }

    pub fn pressure(&self) -> Pressure {
        self.pressure
    }

    // ---- time ----

    /// Run every background actor due before `t`, then set the clock to `t`.
    pub fn advance_to(&mut self, t: u64) -> Result<()> {
        loop {
            let limit = match &self.pacer {
                Some((_, limit)) => (*limit).min(t),
                None => t,
            };
            self.run_background_until(limit);
            self.now = self.now.max(limit);
            if limit >= t {
                return Ok(());
            }
            let (mut pacer, _) = self.pacer.take().expect("paced");
            let next = pacer.wait_for_more(self);
            match next {
                Ok(next) => self.pacer = Some((pacer, next)),
                Err(e) => {
                    self.pacer = Some((pacer, 0));
                    return Err(e);
                }
            }
        }
    }

    pub fn advance_by(&mut self, ns: u64) -> Result<()> {
        self.advance_to(self.now + ns)
    }

    fn run_background_until(&mut self, t: u64) {
        loop {
            let worker_at = if self.worker.pass.is_some() {
                self.worker.resume_at
            } else {
                self.worker.next_pass_at
            };
            let pressure_at = if self.pressure == Pressure::None {
                u64::MAX
            } else {
                self.next_pressure_tick
            };
            let sample_at = if self.sample_every == 0 {
                u64::MAX
            } else {
                self.next_sample_at
            };
            let next = worker_at.min(pressure_at).min(sample_at);
            if next > t {
                return;
            }
            self.now = self.now.max(next);
            if next == sample_at {
                self.sample();
            } else if next == worker_at {
                self.worker_step();
            } else {
                self.pressure_tick();
            }
        }
    }

    fn sample(&mut self) {
        let memory = self.cache.memory();
        self.samples.push(MemorySample {
            ts_ns: self.now,
            attributed_bytes: memory.attributed_bytes,
            raw_entries: memory.raw_entries,
            compressed_entries: memory.compressed_entries,
        });
        self.next_sample_at = self.now + self.sample_every;
    }

    // ---- the cache thread ----

    fn worker_step(&mut self) {
        self.em.now_ns = self.now;
        self.em.task = self.worker.task;
        let mut pass = match self.worker.pass.take() {
            Some(pass) => pass,
            None => {
                let knobs = self.knobs.refresh();
                self.worker.pass_started_at = self.now;
                self.worker.next_pass_at = self.now + u64::from(knobs.interval_ms) * 1_000_000;
                if !knobs.enabled() {
                    return;
                }
                WorkerPass::start(&mut self.cache, knobs.threshold)
            }
        };
        let cost = match pass.step(&mut self.cache, &mut self.em) {
            WorkerStep::Compressing { cost_ns } | WorkerStep::Reschedule { cost_ns } => cost_ns,
            WorkerStep::Done { .. } => {
                self.worker.last_pass = pass.stats;
                self.worker.next_pass_at = self.worker.next_pass_at.max(self.now);
                return;
            }
        };
        self.worker.resume_at = self.now + cost.max(1);
        self.worker.pass = Some(pass);
    }

    // ---- reclaim ----

    fn pressure_tick(&mut self) {
        self.em.now_ns = self.now;
        self.em.task = self.kswapd;
        match self.pressure {
            Pressure::None => {}
            Pressure::Budget { bytes } => {
                self.reclaim_to_budget(bytes);
                self.next_pressure_tick = self.now + BUDGET_TICK_NS;
            }
            Pressure::Reclaim { priority, every_ms } => {
                let mut remaining = (self.cache.shrink_count() * 2) >> priority.min(12);
                while remaining > 0 {
                    let batch = remaining.min(SHRINK_BATCH);
                    if self.cache.shrink_scan(batch, &mut self.em).scanned_total() == 0 {
                        break;
                    }
                    remaining -= batch;
                }
                self.next_pressure_tick = self.now + u64::from(every_ms.max(1)) * 1_000_000;
            }
        }
    }

    /// Shrink until attributed memory fits `bytes`, or until two sweeps over the whole cache
    /// reclaimed nothing (every entry busy or dirty).
    pub fn reclaim_to_budget(&mut self, bytes: u64) {
        self.shrink_above(bytes, BUDGET_BATCH);
    }

    /// Shrink `batch` entries at a time while attributed memory is above `target`, or until two
    /// sweeps over the whole cache reclaimed nothing (every entry busy or dirty).
    fn shrink_above(&mut self, target: u64, batch: u64) {
        let mut scanned_in_vain = 0;
        while self.cache.memory().attributed_bytes > target {
            let result = self.cache.shrink_scan(batch, &mut self.em);
            if result.scanned_total() == 0 {
                break;
            }
            if result.reclaimed_total() > 0 {
                scanned_in_vain = 0;
            } else {
                scanned_in_vain += result.scanned_total();
                if scanned_in_vain > 2 * self.cache.memory().entries {
                    break;
                }
            }
        }
    }

    /// Ask the shrinker to scan the whole entries of `owed` (the fraction stays owed): a
    /// recorded kernel's reclaim replayed as the share of the cache its shrinker scanned.
    pub fn shrink_scans(&mut self, owed: &mut f64) {
        let whole = owed.floor();
        if whole < 1.0 {
            return;
        }
        *owed -= whole;
        self.em.now_ns = self.now;
        self.em.task = self.kswapd;
        self.cache.shrink_scan(whole as u64, &mut self.em);
    }

    /// Ask the shrinker to scan `nr` entries now, in kswapd: a replayed kernel's F2FS
    /// shrinker giving the node cache its share (`sim::whatif::shrinker`).
    pub fn shrink_exactly(&mut self, nr: u64) -> crate::cache::shrinker::ShrinkResult {
        self.em.now_ns = self.now;
        self.em.task = self.kswapd;
        self.cache.shrink_scan(nr, &mut self.em)
    }

    /// Direct reclaim in the allocating task when a budget is exceeded.
    fn direct_reclaim(&mut self) {
        if let Pressure::Budget { bytes } = self.pressure {
            self.reclaim_to_budget(bytes);
        }
    }

    // ---- foreground operations (at `now`, in `task`) ----

    fn enter(&mut self, task: &Task) {
        self.em.now_ns = self.now;
        self.em.task = *task;
    }

    /// A node lookup (`__get_node_page`); returns how it was served and its cost, which is
    /// also the traced lookup's latency (issue 51).
    pub fn access(&mut self, task: &Task, nid: u32, want: RequestedType) -> Result<(Served, u64)> {
        self.access_for(task, nid, want, 0)
    }

    /// A lookup traced with `flags` (0, or `ACCESS_DIRTY` for a modification).
    fn access_for(
        &mut self,
        task: &Task,
        nid: u32,
        want: RequestedType,
        flags: u8,
    ) -> Result<(Served, u64)> {
        self.enter(task);
        let traced = self.em.node_access(nid, flags);
        let served = self.cache.get(nid, want, &mut self.disk, &mut self.em)?;
        self.em
            .time_access(traced, retrieval_outcome(served.0), served.1);
        if served.0 != Served::RawHit {
            self.direct_reclaim();
        }
        Ok(served)
    }

    /// Readahead of nodes (`f2fs_ra_node_pages`); returns the cost.
    pub fn readahead(&mut self, task: &Task, nids: &[u32]) -> Result<u64> {
        self.enter(task);
        let mut issued = 0;
        for nid in nids {
            if self.cache.readahead(*nid, &mut self.disk, &mut self.em)? {
                issued += 1;
            }
        }
        if issued > 0 {
            self.direct_reclaim();
        }
        // Readahead is asynchronous: the caller waits for the batch once.
        Ok(if issued > 0 { costs::NODE_READ_NS } else { 0 })
    }

    /// Create a new node in memory (a new inode or node page), as its file is created.
    pub fn create(&mut self, task: &Task, nid: u32) -> Result<u64> {
        self.enter(task);
        let block: Arc<Block> = self
            .disk
            .peek(nid)
            .ok_or_else(|| anyhow::anyhow!("nid {nid} is not in the image"))?;
        self.em.node_access(nid, crate::events::ACCESS_NEW);
        self.cache.create(nid, block, &mut self.em);
        self.direct_reclaim();
        Ok(costs::CREATE_NS)
    }

    /// Modify a node: look it up, then dirty it (mtime bump; the inode checksum is recomputed
    /// so the block stays valid).
    pub fn modify(&mut self, task: &Task, nid: u32) -> Result<u64> {
        let (_, cost) =
            self.access_for(task, nid, RequestedType::Any, crate::events::ACCESS_DIRTY)?;
        let check = self.cache.check;
        let stamp = self.now;
        self.cache
            .dirty(nid, |block| touch_block(block, stamp, check));
        Ok(cost)
    }

    /// Checkpoint: write back every dirty node.
    pub fn checkpoint(&mut self) -> u64 {
        let written = self.cache.write_back(&mut self.disk);
        self.em.now_ns = self.now;
        self.em.checkpoint_done();
        written
    }

    /// A lookup for a modification that leaves the block's bytes as they are (a replayed
    /// access trace knows which node was dirtied, not how): the node is dirty until the next
    /// checkpoint.
    pub fn dirty_untouched(&mut self, task: &Task, nid: u32) -> Result<u64> {
        let (_, cost) =
            self.access_for(task, nid, RequestedType::Any, crate::events::ACCESS_DIRTY)?;
        self.cache.mark_dirty(nid);
        Ok(cost)
    }

    /// Let background work run until the cache thread has done `quiet_passes` passes in a row
    /// with nothing to do (no conversion, no second chance, no abort), or `max_ns` elapsed.
    /// With compression disabled there are no passes: one interval is enough.
    pub fn settle(&mut self, quiet_passes: u32, max_ns: u64) -> Result<()> {
        let deadline = self.now + max_ns;
        let mut quiet = 0;
        let mut seen_passes = self.cache.stats.worker_passes;
        while self.now < deadline && quiet < quiet_passes {
            let step = u64::from(self.knobs.values().interval_ms) * 1_000_000;
            self.advance_to((self.now + step).min(deadline))?;
            if !self.knobs.values().enabled() {
                return Ok(());
            }
            if self.cache.stats.worker_passes != seen_passes {
                seen_passes = self.cache.stats.worker_passes;
                let pass = self.worker.last_pass;
                let idle = pass.converted == 0 && pass.second_chances == 0 && pass.aborted == 0;
                quiet = if idle { quiet + 1 } else { 0 };
            }
        }
        Ok(())
    }

    pub fn snapshot(&self) -> Snapshot {
        let lens = self.cache.queue_lens();
        Snapshot {
            ts_ns: self.now,
            pressure: self.pressure,
            memory: self.cache.memory(),
            queue_entries: lens,
            slots: SlotCounts {
                b256: lens[QUEUE_256 as usize],
                b512: lens[QUEUE_512 as usize],
                b1024: lens[QUEUE_1024 as usize],
            },
            knobs: self.knobs.values(),
            shrink_count: self.cache.shrink_count(),
            stats: self.cache.stats,
            node_reads: self.disk.reads,
            readahead_reads: self.disk.readahead_reads,
            last_pass: self.worker.last_pass,
        }
        .with_raw_check(lens[QUEUE_RAW as usize])
    }
}

impl Snapshot {
    fn with_raw_check(self, raw: u32) -> Snapshot {
        debug_assert_eq!(u64::from(raw), self.memory.raw_entries);
        self
    }
}

/// A modification of a node block: bump the inode's mtime (or a direct node's cp version) and
/// keep the inode checksum valid.
fn touch_block(block: &mut Block, stamp_ns: u64, check: NodeCheck) {
    use crate::f2fs::{NodeBlock, NodeKind};
    const I_MTIME: usize = 48;
    const I_INODE_CHECKSUM: usize = 368;
    let node = NodeBlock(&block[..]);
    if node.kind() != NodeKind::Inode {
        return;
    }
    let seconds = 1_700_000_000 + stamp_ns / 1_000_000_000;
    block[I_MTIME..I_MTIME + 8].copy_from_slice(&seconds.to_le_bytes());
    let node = NodeBlock(&block[..]);
    if node.has_inode_checksum(check.inode_checksums) {
        let sum = node.computed_inode_checksum(check.checksum_seed);
        block[I_INODE_CHECKSUM..I_INODE_CHECKSUM + 4].copy_from_slice(&sum.to_le_bytes());
    }
}

/// A simulated lookup's outcome as the kernel's timed lookups name it: a raw hit, a restore, a
/// read (after a failed restore too: the block came from disk), and an error where the raw
/// buffer could not be allocated (the kernel's lookup returns -ENOMEM then). The simulator has
/// one task at a time, so no lookup ever waits on another's read.
pub fn retrieval_outcome(served: Served) -> u8 {
    match served {
        Served::RawHit => tracer_common::RETRIEVAL_HIT,
        Served::Restored => tracer_common::RETRIEVAL_RESTORE,
        Served::Read | Served::RestoreFailedThenRead(_) => tracer_common::RETRIEVAL_DISK_READ,
        Served::NoMem => tracer_common::RETRIEVAL_ERROR,
    }
}
