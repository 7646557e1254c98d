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
    /// Batches replayed one by one against the node cache and the NAT entries (the replay's
    /// own work; batches that could only free extents are done at once).
    pub batches: u64,
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
        // The work one call does on what the replay really holds (node cache entries and NAT
        // entries), bounded by their count, not by the recorded one (up to 4 G, and a crafted
        // recording's to choose): twice it, since the node cache gives an entry a second
        // chance before freeing it, and a NAT entry goes at its first scan. Past that, what is
        // left of them cannot be freed (dirty or converting entries) and more batches would
        // only scan them again, 67 M times for a 4 G count at priority 0.
        let mut own_work = 2 * (self.nat.len() + engine.cache.shrink_count());
        while total > 0 && (total >= SHRINK_BATCH || total >= freeable) {
            let own_left = self.nat.len() + engine.cache.shrink_count();
            if own_left == 0 || own_work == 0 {
                // Only extents left to free (or nothing more the replayed caches can give):
                // the remaining batches free them at once, not a step each.
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
            let own_asked = self.scan(engine, nr);
            self.batches += 1;
            own_work = own_work.saturating_sub(own_asked.max(1));
            total -= nr;
            scanned += nr;
        }
        self.scanned += scanned;
        self.deferred = (self.deferred + delta)
            .saturating_sub(scanned)
            .min(2 * freeable);
    }

    /// `f2fs_shrink_scan` of `nr`: extents, the node cache's share, NAT entries. Returns how
    /// much of `nr` was asked of the node cache and the NAT entries.
    fn scan(&mut self, engine: &mut Engine, nr: u64) -> u64 {
        let mut freed = (nr >> 2).min(self.extents);
        self.extents -= freed;
        let own_asked = nr - freed;
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
        own_asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        cache::CacheConfig, engine::EngineOptions, events::Task, f2fs::node::RequestedType,
        knobs::KnobSource, scenario::vm_replay,
    };
    use tracer_common::knobs::Knobs;

    /// The replayed kernel after 200 node reads, each node then modified (dirty: the node
    /// cache can scan its entries but never free them), and their NAT entries.
    fn dirty_cache() -> (Engine, F2fsShrinker) {
        let nodes = vm_replay::rfc_nodes().unwrap();
        let knobs = Knobs {
            threshold: 0,
            interval_ms: 100,
        };
        let mut engine = Engine::new(
            nodes.clone(),
            KnobSource::Static(knobs),
            EngineOptions::default(),
        );
        engine.cache.set_config(CacheConfig::rfc());
        let task = Task::process(1, 0, "whatif");
        let mut shrinker = F2fsShrinker::default();
        for &nid in nodes.nids().iter().skip(1).take(200) {
            engine.access(&task, nid, RequestedType::Any).unwrap();
            engine.dirty_untouched(&task, nid).unwrap();
            shrinker.node_info(nid);
        }
        assert_eq!(engine.cache.shrink_count(), 200);
        (engine, shrinker)
    }

    /// A crafted recording's calls (priority 0, a count of 16 M objects, again and again
    /// within a reclaim, so that deferred work piles up) against a cache whose entries cannot
    /// be freed: the batches replayed one by one stay bounded by the objects the replay holds
    /// (200 entries and 200 NAT entries: twice that is 800 objects, 96 a batch after the
    /// extents' quarter), not by the recorded count (a quarter of a million batches a call).
    #[test]
    fn huge_recorded_counts_replay_in_bounded_batches() {
        let (mut engine, mut shrinker) = dirty_cache();
        let calls = 3;
        for call in 0..calls {
            let ts = 1_000_000 + call * 1_000;
            shrinker.call(&mut engine, ts, 1 << 24, 0, 0);
        }
        assert_eq!(shrinker.calls, calls);
        // First call: 800 / 96 rounds up to 9 batches; later ones have 200 entries left: 5.
        let bound = 9 + (calls - 1) * 5;
        assert!(
            shrinker.batches <= bound,
            "{} batches replayed one by one, more than {bound}",
            shrinker.batches
        );
        // The dirty entries stay; every NAT entry went; the extents were asked as reclaim
        // asked (twice the count at most, per call).
        assert_eq!(engine.cache.shrink_count(), 200);
        assert_eq!(shrinker.nat.len(), 0);
        assert!(shrinker.scanned >= 2 * (1 << 24), "{}", shrinker.scanned);
        assert!(shrinker.deferred <= 2 * ((1 << 24) + 200));
    }

    /// The largest count a recording can hold (4 G), at priority 0: still bounded.
    #[test]
    fn a_4g_count_replays_in_bounded_batches() {
        let (mut engine, mut shrinker) = dirty_cache();
        for call in 0..4 {
            shrinker.call(&mut engine, 1_000_000 + call, u64::from(u32::MAX), 0, 0);
        }
        assert!(shrinker.batches <= 9 + 3 * 5, "{}", shrinker.batches);
    }
}
