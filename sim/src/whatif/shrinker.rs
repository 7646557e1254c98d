//! F2FS's shrinker driven as the recorded kernel's reclaim drove it (`Op::ShrinkerScan`, from
//! `vmscan:mm_shrink_slab_start`): each call's priority is replayed against the replayed
//! kernel's own count, so a setting that holds fewer entries is asked to scan fewer objects,
//! and inside F2FS's scan the node cache competes with the other caches as in the RFC's
//! shrinker.
//!
//! What reclaim does with a shrinker (`do_shrink_slab`, 5.10 .. mainline): it takes the
//! objects the shrinker counts, asks it to scan `(count >> priority) * 4 / seeks` of them plus
//! the work deferred from earlier calls (`deferred >> priority`), at most twice the count, in
//! batches of 128, and defers what it did not scan. F2FS's scan of a batch of `nr`
//! (`f2fs_shrink_scan`) frees read extent cache entries first (up to `nr / 4`), then, with the
//! RFC, the node cache scans its share of what is left, its count against the NAT and free nid
//! caches' (`__node_cache_share` in the reference module); clean NAT entries take the rest.
//!
//! On issue 50's phone trial (the reference module, `memory.reclaim` of the pressure's size),
//! kprobes on F2FS's shrinker showed the same sequence of calls in every trial, off and on
//! (36 counts, the first at 18,168 objects off, 12,751 on: 6,370 raw entries against 953 in
//! node cache units, beside 6,370 NAT entries, about 300 free nids and 5,128 extents), each
//! call's batches in proportion to the count (4 against 3 at the first). The node cache took
//! 8,057 to 8,441 of the off kernels' scans (2,082 to 2,466 reclaimed, the rest second
//! chances) and 1,738 of the on kernels'; a replay that scanned the share of the cache the off
//! kernel's node pages showed (`Op::Scan`, `Op::Evict`) scanned 1,124 to 1,189 of the on
//! replay's: the on kernel's small count competes with the same NAT entries, which reclaim
//! takes first, not with a cache of the off kernel's size.
use std::collections::{HashSet, VecDeque};

use crate::engine::Engine;

/// `SHRINK_BATCH`: F2FS's shrinker sets no batch of its own.
pub const SHRINK_BATCH: u64 = 128;
/// `DEFAULT_SEEKS`, F2FS's.
pub const SHRINK_SEEKS: u64 = 2;
/// Two calls further apart than this belong to two reclaims: the other caches' split is taken
/// again from the recorded count (the extents and NAT entries have been rebuilt meanwhile).
pub const RECLAIM_GAP_NS: u64 = 1_000_000_000;

/// F2FS's clean NAT entries as the replay makes them: one per node read from disk or restored
/// (`f2fs_get_node_info` before the read), freed oldest first.
#[derive(Default)]
struct NatCache {
    cached: HashSet<u32>,
    order: VecDeque<u32>,
}

impl NatCache {
    fn insert(&mut self, nid: u32) {
        if self.cached.insert(nid) {
            self.order.push_back(nid);
        }
    }

    fn len(&self) -> u64 {
        self.cached.len() as u64
    }

    /// Free up to `n`, oldest first; how many were freed.
    fn free(&mut self, n: u64) -> u64 {
        let mut freed = 0;
        while freed < n {
            let Some(nid) = self.order.pop_front() else {
                break;
            };
            self.cached.remove(&nid);
            freed += 1;
        }
        freed
    }
}

/// The replayed kernel's F2FS shrinker and what it competes with.
#[derive(Default)]
pub struct F2fsShrinker {
    /// Reclaim's deferred work for this shrinker (`nr_deferred`).
    deferred: u64,
    /// Read extent cache entries (with the free nids, which reclaim takes after the NAT
    /// entries): the recorded count's part that is neither node cache nor NAT.
    extents: u64,
    nat: NatCache,
    last_call_ns: Option<u64>,
    /// Calls replayed, objects F2FS was asked to scan, node cache entries scanned.
    pub calls: u64,
    pub scanned: u64,
    pub node_scanned: u64,
}

impl F2fsShrinker {
    /// A node the replay read from disk or restored: its NAT entry is cached.
    pub fn node_info(&mut self, nid: u32) {
        self.nat.insert(nid);
    }

    /// A recorded call at `ts_ns`: reclaim at `priority` found `count` objects, of which
    /// `recorded_node_cache` were the recorded kernel's node cache (0 without the RFC).
    pub fn call(
        &mut self,
        engine: &mut Engine,
        ts_ns: u64,
        count: u64,
        priority: u8,
        recorded_node_cache: u64,
    ) {
        let again = self
            .last_call_ns
            .is_none_or(|last| ts_ns.saturating_sub(last) > RECLAIM_GAP_NS);
        if again {
            self.extents = count
                .saturating_sub(recorded_node_cache)
                .saturating_sub(self.nat.len());
        }
        self.last_call_ns = Some(ts_ns);
        let freeable = self.extents + self.nat.len() + engine.cache.shrink_count();
        if freeable == 0 {
            return;
        }
        self.calls += 1;
        let priority = u32::from(priority).min(63);
        let delta = (freeable >> priority) * 4 / SHRINK_SEEKS;
        let mut total = ((self.deferred >> priority) + delta).min(2 * freeable);
        let mut scanned = 0;
        while total > 0 && (total >= SHRINK_BATCH || total >= freeable) {
            if self.nat.len() == 0 && engine.cache.shrink_count() == 0 {
                // Only extents left: the remaining batches free them at once, not a step each
                // (a recorded count is up to 4 G objects: 67 M batches).
                let (whole, rest) = (total / SHRINK_BATCH, total % SHRINK_BATCH);
                let last = if whole == 0 || rest >= freeable {
                    rest
                } else {
                    0
                };
                let quarters = (whole * (SHRINK_BATCH >> 2)).saturating_add(last >> 2);
                self.extents -= quarters.min(self.extents);
                scanned += whole * SHRINK_BATCH + last;
                break;
            }
            let nr = total.min(SHRINK_BATCH);
            self.scan(engine, nr);
            total -= nr;
            scanned += nr;
        }
        self.scanned += scanned;
        self.deferred = (self.deferred + delta)
            .saturating_sub(scanned)
            .min(2 * freeable);
    }

    /// `f2fs_shrink_scan` of `nr`: extents, the node cache's share, NAT entries.
    fn scan(&mut self, engine: &mut Engine, nr: u64) {
        let mut freed = (nr >> 2).min(self.extents);
        self.extents -= freed;
        if freed < nr {
            let own = engine.cache.shrink_count();
            if let Some(share) = ((nr - freed) * own).checked_div(own + self.nat.len()) {
                let result = engine.shrink_exactly(share);
                self.node_scanned += result.scanned_total();
                freed += result.reclaimed_total();
            }
        }
        if freed < nr {
            self.nat.free(nr - freed);
        }
    }
}
