//! The node cache of the RFC: raw entries on the node LRU, compressed entries on three queues
//! by slot size (256, 512, 1024 bytes), one representation per entry after publication. The
//! slot sizes and reclaim weights are a run-time setting ([`config::CacheConfig`], the RFC's by
//! default), so a what-if can try other slabs and weights on the same code.
//!
//! One module per mechanism: [`admission`] (compress and admit), [`worker`] (the bounded
//! background pass), [`shrinker`] (weighted, credit-carrying reclaim), [`restore`] (validated
//! restore with disk fallback). This module holds the entries, the queues and the access path.
pub mod admission;
pub mod config;
pub mod entry;
pub mod list;
pub mod lz4;
pub mod payload;
pub mod restore;
pub mod shrinker;
pub mod worker;

use std::sync::Arc;

use anyhow::Result;
use tracer_common::{
    activity::Counters, SecondChanceBy, QUEUE_COUNT, QUEUE_RAW, SECOND_CHANCE_BY_RACE,
    SECOND_CHANCE_BY_SHRINKER, SECOND_CHANCE_BY_WORKER,
};

use crate::{
    accounting::Memory,
    costs,
    disk::Disk,
    events::Emitter,
    f2fs::{node::RequestedType, Block, NodeBlock},
};
pub use config::{CacheConfig, SlotSet, Weights, CACHE_QUEUES};
pub use entry::{Compressed, Entry, Repr};
use list::{Queue, NIL};
pub use payload::{Payload, PayloadSizes};
pub use restore::{AllocFaults, NodeCheck};

/// Counters of everything the cache did (monotonic): what its events tell, in the counter set
/// the model counts events in, and the work no event carries. Serialised flat, as `sim --json`
/// has always printed it ([`FlatStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(into = "FlatStats")]
pub struct CacheStats {
    /// Node lookups (get_node_page calls).
    pub lookups: u64,
    pub raw_hits: u64,
    /// Lookups that found no raw entry: each ends in a restore or a disk read (or -ENOMEM).
    pub retrievals: u64,
    /// Demand disk reads: lookups that found the node neither raw nor compressed.
    pub misses: u64,
    pub readahead_reads: u64,
    pub worker_passes: u64,
    pub shrinker_calls: u64,
    /// Restores (with their latencies and failure reasons), conversions, rejects, aborts,
    /// reclaims and second chances by event queue and path, inserts, forgets: counted where
    /// the cache emits the event, as `model::Counters` counts it (node reads are the device's,
    /// in `Snapshot`).
    pub events: Counters,
}

/// `CacheStats` as `sim --json` prints it: one flat object, reclaims by event queue (raw, 256,
/// 512, 1024), second chances by path.
#[derive(serde::Serialize)]
pub(crate) struct FlatStats {
    lookups: u64,
    raw_hits: u64,
    retrievals: u64,
    restores: u64,
    restore_fails: u64,
    restore_nomem: u64,
    misses: u64,
    readahead_reads: u64,
    conversions: u64,
    convert_rejects: u64,
    convert_aborts: u64,
    reclaims: [u64; QUEUE_COUNT],
    second_chances_worker: u64,
    second_chances_shrinker: u64,
    second_chances_race: u64,
    worker_passes: u64,
    shrinker_calls: u64,
    inserts: u64,
    forgets: u64,
}

impl From<CacheStats> for FlatStats {
    fn from(s: CacheStats) -> FlatStats {
        let e = &s.events;
        let by = |path| e.second_chance_reasons.get(path);
        FlatStats {
            lookups: s.lookups,
            raw_hits: s.raw_hits,
            retrievals: s.retrievals,
            restores: e.restores,
            restore_fails: e.restore_fails,
            restore_nomem: e.restore_nomem,
            misses: s.misses,
            readahead_reads: s.readahead_reads,
            conversions: e.conversions,
            convert_rejects: e.convert_rejects,
            convert_aborts: e.convert_aborts,
            reclaims: e.reclaims.to_array(),
            second_chances_worker: by(SECOND_CHANCE_BY_WORKER),
            second_chances_shrinker: by(SECOND_CHANCE_BY_SHRINKER),
            second_chances_race: by(SECOND_CHANCE_BY_RACE),
            worker_passes: s.worker_passes,
            shrinker_calls: s.shrinker_calls,
            inserts: e.inserts,
            forgets: e.forgets,
        }
    }
}

impl CacheStats {
    /// What the cache did after `earlier` (an earlier snapshot of the same cache).
    pub fn since(&self, earlier: &CacheStats) -> CacheStats {
        let less = |now: u64, then: u64| now.saturating_sub(then);
        CacheStats {
            lookups: less(self.lookups, earlier.lookups),
            raw_hits: less(self.raw_hits, earlier.raw_hits),
            retrievals: less(self.retrievals, earlier.retrievals),
            misses: less(self.misses, earlier.misses),
            readahead_reads: less(self.readahead_reads, earlier.readahead_reads),
            worker_passes: less(self.worker_passes, earlier.worker_passes),
            shrinker_calls: less(self.shrinker_calls, earlier.shrinker_calls),
            events: self.events.since(&earlier.events),
        }
    }
}

/// How an access was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    RawHit,
    Restored,
    /// Restore validation failed (`reason`), the block came from disk.
    RestoreFailedThenRead(u8),
    /// Not cached: read from disk.
    Read,
    /// The raw buffer could not be allocated; the compressed copy is kept; retry later.
    NoMem,
}

pub struct NodeCache {
    entries: Vec<Entry>,
    free_slots: Vec<u32>,
    /// nid -> slot, `NIL` when absent.
    index: Vec<u32>,
    /// Raw, then one per slot size of `config` (the rest stay empty).
    queues: [Queue; CACHE_QUEUES],
    slot_bytes: u64,
    /// Slot sizes and reclaim weights; set before the first entry ([`NodeCache::set_config`]).
    pub(crate) config: CacheConfig,
    pub stats: CacheStats,
    pub alloc: AllocFaults,
    pub check: NodeCheck,
    /// How compressed payloads are made and restored (real LZ4, or sizes known per node).
    pub payload: Payload,
    /// Rounding credit of the shrinker's per-queue quotas, in 1/65536 of an entry.
    pub(crate) shrink_credit: [u32; CACHE_QUEUES],
    /// The part of the raw list the running worker pass has still to visit.
    pub(crate) worker_mark: Option<WorkerMark>,
}

/// Next raw entry the worker visits, and the raw tail it remembered when the pass began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkerMark {
    pub next: u32,
    pub stop: u32,
}

impl NodeCache {
    pub fn new(check: NodeCheck) -> NodeCache {
        NodeCache {
            entries: Vec::new(),
            free_slots: Vec::new(),
            index: Vec::new(),
            queues: [Queue::default(); CACHE_QUEUES],
            slot_bytes: 0,
            config: CacheConfig::rfc(),
            stats: CacheStats::default(),
            alloc: AllocFaults::default(),
            check,
            payload: Payload::Lz4,
            shrink_credit: [0; CACHE_QUEUES],
            worker_mark: None,
        }
    }

    /// Use other slot sizes or reclaim weights. Only on an empty cache: entries already on a
    /// queue belong to the old shape.
    pub fn set_config(&mut self, config: CacheConfig) {
        assert!(
            self.entries.len() == self.free_slots.len(),
            "the cache's shape changes only while it is empty"
        );
        self.config = config;
    }

    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    // ---- queries ----

    fn slot_of(&self, nid: u32) -> Option<u32> {
        self.index.get(nid as usize).copied().filter(|s| *s != NIL)
    }

    pub fn entry(&self, nid: u32) -> Option<&Entry> {
        self.slot_of(nid).map(|s| &self.entries[s as usize])
    }

    pub fn contains(&self, nid: u32) -> bool {
        self.slot_of(nid).is_some()
    }

    /// Entries on a cache queue (raw 0, then one per slot size).
    pub fn queue_len(&self, queue: u8) -> u32 {
        self.queues[queue as usize].len
    }

    /// Entries by event queue (raw, 256, 512, 1024): each cache queue counts on the queue its
    /// events carry, so with the RFC's slot set these are the cache's own queues.
    pub fn queue_lens(&self) -> [u32; QUEUE_COUNT] {
        let mut lens = [0; QUEUE_COUNT];
        for (queue, q) in self.queues[..self.config.queue_count()].iter().enumerate() {
            lens[self.config.event_queue(queue as u8) as usize] += q.len;
        }
        lens
    }

    /// Entries on each cache queue (those past the slot set's stay 0).
    pub fn cache_queue_lens(&self) -> [u32; CACHE_QUEUES] {
        self.queues.map(|q| q.len)
    }

    /// Nids of a queue, head (oldest) first.
    pub fn queue_nids(&self, queue: u8) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.queues[queue as usize].len as usize);
        let mut cursor = self.queues[queue as usize].head;
        while cursor != NIL {
            out.push(self.entries[cursor as usize].nid);
            cursor = self.entries[cursor as usize].links.next;
        }
        out
    }

    pub fn memory(&self) -> Memory {
        let raw = u64::from(self.queues[QUEUE_RAW as usize].len);
        let used = &self.queues[1..self.config.queue_count()];
        let compressed: u64 = used.iter().map(|q| u64::from(q.len)).sum();
        Memory::new(raw, compressed, self.slot_bytes)
    }

    // ---- list plumbing (keeps the worker's position valid) ----

    fn unlink(&mut self, slot: u32) {
        if let Some(mark) = self.worker_mark.as_mut() {
            let links = self.entries[slot as usize].links;
            if mark.next == slot {
                mark.next = if mark.stop == slot { NIL } else { links.next };
            }
            if mark.stop == slot && mark.next != NIL {
                mark.stop = links.prev;
            }
        }
        let queue = self.entries[slot as usize].queue;
        self.queues[queue as usize].unlink(&mut self.entries, slot);
    }

    fn push_tail(&mut self, slot: u32, queue: u8) {
        self.entries[slot as usize].queue = queue;
        self.queues[queue as usize].push_tail(&mut self.entries, slot);
    }

    /// Second chance: clear REFERENCED, move to the tail of the entry's own queue.
    fn give_second_chance(&mut self, slot: u32, by: u8, em: &mut Emitter) {
        let queue = self.entries[slot as usize].queue;
        self.entries[slot as usize].referenced = false;
        self.unlink(slot);
        self.push_tail(slot, queue);
        let nid = self.entries[slot as usize].nid;
        let event_queue = self.config.event_queue(queue);
        if let Some(queue) = tracer_common::Queue::from_code(event_queue) {
            self.stats
                .events
                .second_chance(queue, SecondChanceBy::from_code(by));
        }
        em.second_chance(nid, event_queue, by);
    }

    fn insert_raw(
        &mut self,
        nid: u32,
        block: Arc<Block>,
        referenced: bool,
        dirty: bool,
        em: &mut Emitter,
    ) -> u32 {
        let kind = match &self.payload {
            Payload::Sizes(sizes) => sizes.kind(nid),
            Payload::Lz4 => None,
        }
        .unwrap_or_else(|| NodeBlock(&block[..]).kind());
        let entry = Entry {
            nid,
            kind,
            repr: Repr::Raw(block),
            queue: QUEUE_RAW,
            referenced,
            dirty,
            converting: false,
            raced: false,
            links: list::Links::default(),
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.entries[slot as usize] = entry;
                slot
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        if self.index.len() <= nid as usize {
            self.index.resize(nid as usize + 1, NIL);
        }
        self.index[nid as usize] = slot;
        self.push_tail(slot, QUEUE_RAW);
        self.stats.events.inserts += 1;
        em.insert(nid);
        slot
    }

    /// Drop an entry entirely. The caller reports why: a reclaim, a failed restore, or
    /// [`NodeCache::forget`] for anything else, so that every entry's end is seen once.
    fn remove(&mut self, slot: u32) {
        self.unlink(slot);
        let entry = &mut self.entries[slot as usize];
        if let Repr::Compressed(c) = &entry.repr {
            self.slot_bytes -= u64::from(c.held_bytes);
        }
        entry.repr = Repr::Compressed(Compressed::gone());
        let nid = entry.nid;
        self.index[nid as usize] = NIL;
        self.free_slots.push(slot);
    }

    /// Drop an entry neither reclaimed nor failing a restore, and report it (`Forget`).
    fn forget(&mut self, slot: u32, em: &mut Emitter) {
        let entry = &self.entries[slot as usize];
        let (nid, queue) = (entry.nid, self.config.event_queue(entry.queue));
        self.remove(slot);
        self.stats.events.forgets += 1;
        em.forget(nid, queue);
    }

    /// Replace a compressed representation by a raw block, at the raw tail.
    fn make_raw(&mut self, slot: u32, block: Arc<Block>, referenced: bool) {
        self.unlink(slot);
        let entry = &mut self.entries[slot as usize];
        if let Repr::Compressed(c) = &entry.repr {
            self.slot_bytes -= u64::from(c.held_bytes);
        }
        entry.repr = Repr::Raw(block);
        entry.referenced = referenced;
        self.push_tail(slot, QUEUE_RAW);
    }

    // ---- the access path ----

    /// Create a new node in memory (a new inode or node page): raw, dirty, referenced. An
    /// entry the nid still had is stale (the new page is the truth): forgotten, whatever its form.
    pub fn create(&mut self, nid: u32, block: Arc<Block>, em: &mut Emitter) {
        if let Some(slot) = self.slot_of(nid) {
            self.forget(slot, em);
        }
        self.insert_raw(nid, block, true, true, em);
    }

    /// `__get_node_page`: find the node, restoring or reading it as needed. Returns how it was
    /// served and what it cost in virtual time.
    pub fn get(
        &mut self,
        nid: u32,
        want: RequestedType,
        disk: &mut Disk,
        em: &mut Emitter,
    ) -> Result<(Served, u64)> {
        self.stats.lookups += 1;
        let Some(slot) = self.slot_of(nid) else {
            self.stats.retrievals += 1;
            self.read_in(nid, false, disk, em)?;
            return Ok((Served::Read, costs::NODE_READ_NS));
        };
        let entry = &mut self.entries[slot as usize];
        if entry.queue == QUEUE_RAW {
            entry.referenced = true;
            if entry.converting {
                entry.raced = true;
            }
            self.stats.raw_hits += 1;
            return Ok((Served::RawHit, costs::RAW_HIT_NS));
        }
        self.stats.retrievals += 1;
        self.restore(slot, want, disk, em)
    }

    /// `f2fs_ra_node_page`: read a node ahead unless it is cached in any form.
    pub fn readahead(&mut self, nid: u32, disk: &mut Disk, em: &mut Emitter) -> Result<bool> {
        if self.contains(nid) {
            return Ok(false);
        }
        self.read_in(nid, true, disk, em)?;
        self.stats.readahead_reads += 1;
        Ok(true)
    }

    fn read_in(
        &mut self,
        nid: u32,
        readahead: bool,
        disk: &mut Disk,
        em: &mut Emitter,
    ) -> Result<u32> {
        let block = disk.read(nid, readahead)?;
        em.node_read(nid, readahead);
        if !readahead {
            self.stats.misses += 1;
        }
        Ok(self.insert_raw(nid, block, false, false, em))
    }

    /// Mark a cached raw node dirty without changing its bytes (a replayed modification).
    pub fn mark_dirty(&mut self, nid: u32) -> bool {
        self.dirty_with(nid, None::<fn(&mut Block)>)
    }

    /// Modify a cached raw node (the caller got it first): dirty until written back.
    pub fn dirty(&mut self, nid: u32, modify: impl FnOnce(&mut Block)) -> bool {
        self.dirty_with(nid, Some(modify))
    }

    fn dirty_with(&mut self, nid: u32, modify: Option<impl FnOnce(&mut Block)>) -> bool {
        let Some(slot) = self.slot_of(nid) else {
            return false;
        };
        let entry = &mut self.entries[slot as usize];
        let Repr::Raw(block) = &mut entry.repr else {
            return false;
        };
        if let Some(modify) = modify {
            modify(Arc::make_mut(block));
        }
        entry.dirty = true;
        entry.referenced = true;
        if entry.converting {
            entry.raced = true;
        }
        true
    }

    /// Write every dirty raw node back (checkpoint or writeback): they become clean.
    pub fn write_back(&mut self, disk: &mut Disk) -> u64 {
        let mut written = 0;
        let mut cursor = self.queues[QUEUE_RAW as usize].head;
        while cursor != NIL {
            let entry = &mut self.entries[cursor as usize];
            if entry.dirty {
                if let Repr::Raw(block) = &entry.repr {
                    disk.write(entry.nid, block.clone());
                }
                entry.dirty = false;
                written += 1;
            }
            cursor = entry.links.next;
        }
        written
    }

    /// Abort a conversion an access raced: discard the new object, second chance.
    fn abort_conversion(&mut self, slot: u32, em: &mut Emitter) {
        let entry = &mut self.entries[slot as usize];
        entry.converting = false;
        entry.raced = false;
        self.stats.events.convert_aborts += 1;
        em.convert_abort(entry.nid);
        self.give_second_chance(slot, SECOND_CHANCE_BY_RACE, em);
    }

    /// Publish a finished conversion: the entry now owns only the compressed object.
    fn publish(&mut self, slot: u32, compressed: Compressed, queue: u8) {
        self.unlink(slot);
        self.slot_bytes += u64::from(compressed.held_bytes);
        let entry = &mut self.entries[slot as usize];
        entry.repr = Repr::Compressed(compressed);
        entry.converting = false;
        entry.referenced = false;
        self.push_tail(slot, queue);
        self.stats.events.conversions += 1;
    }

    /// Test hook: change a compressed entry in place (corrupt a payload, a length, a size).
    pub fn tamper(&mut self, nid: u32, change: impl FnOnce(&mut Compressed)) -> bool {
        let Some(slot) = self.slot_of(nid) else {
            return false;
        };
        match &mut self.entries[slot as usize].repr {
            Repr::Compressed(c) => {
                change(c);
                true
            }
            Repr::Raw(_) => false,
        }
    }

    /// Bytes held by a cache queue's members (raw: 4096 each; compressed: their slots).
    pub fn queue_slot_bytes(&self, queue: u8) -> u32 {
        self.config.queue_bytes(queue)
    }
}
#[cfg(test)]
mod corruption_tests;
#[cfg(test)]
mod tests;
