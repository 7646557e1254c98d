//! The node shrinker with fixed reclaim weights.
//!
//! The RFC's weights are the memory an entry holds in 256-byte units: raw 16 (a full block),
//! compressed 1, 2 and 4 (their slots). They are the cache's setting ([`super::Weights`]), so
//! a what-if can try others; the raw weight stays the effective count's unit. The weights give:
//! - the effective count (`count_objects`): the weighted population divided by the raw weight,
//!   so an all-raw cache counts exactly as it did before the patch, and compressed entries add
//!   only their fraction of a block (they are retained preferentially);
//! - the per-queue scan quotas: `nr_to_scan` entries split in proportion to weight x population,
//!   so a raw entry is 16 times as likely to be scanned as a 256-byte one, but every queue stays
//!   reclaimable under sustained pressure.
//!
//! Quotas are fixed point (1/65536 of an entry); the fraction a queue did not get is carried to
//! the next call as rounding credit. A queue whose quota exceeds its population is capped and
//! the rest is redistributed to the others by the same weights.
use tracer_common::SECOND_CHANCE_BY_SHRINKER;

use super::{list::NIL, NodeCache, CACHE_QUEUES};
use crate::events::Emitter;

/// Fixed-point one entry.
const CREDIT_ONE: u64 = 1 << 16;

/// What one shrinker call did, by cache queue (raw, then one per slot size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShrinkResult {
    pub quotas: [u64; CACHE_QUEUES],
    pub scanned: [u64; CACHE_QUEUES],
    pub reclaimed: [u64; CACHE_QUEUES],
    pub second_chances: u64,
}

impl ShrinkResult {
    pub fn reclaimed_total(&self) -> u64 {
        self.reclaimed.iter().sum()
    }

    pub fn scanned_total(&self) -> u64 {
        self.scanned.iter().sum()
    }
}

impl NodeCache {
    fn weighted_population(&self) -> [u64; CACHE_QUEUES] {
        let lens = self.cache_queue_lens();
        let weights = &self.config.weights;
        std::array::from_fn(|q| weights.get(q) * u64::from(lens[q]))
    }

    /// `count_objects`: the weighted population in raw-entry units, rounded up.
    pub fn shrink_count(&self) -> u64 {
        self.weighted_population()
            .iter()
            .sum::<u64>()
            .div_ceil(self.config.weight_unit())
    }

    /// `shrink_count` unrounded: the weighted population in raw-entry units (a raw entry is
    /// one, a compressed one its weight's share of it).
    pub fn effective_count(&self) -> f64 {
        let weighted: u64 = self.weighted_population().iter().sum();
        weighted as f64 / self.config.weight_unit() as f64
    }

    /// Split `nr_to_scan` into per-queue quotas (updates the carried credit).
    pub fn shrink_quotas(&mut self, nr_to_scan: u64) -> [u64; CACHE_QUEUES] {
        let weighted = self.weighted_population();
        let total: u64 = weighted.iter().sum();
        let mut quotas = [0u64; CACHE_QUEUES];
        if total == 0 {
            return quotas;
        }
        for q in 0..self.config.queue_count() {
            let exact = u128::from(nr_to_scan) * u128::from(weighted[q]) * u128::from(CREDIT_ONE)
                / u128::from(total);
            let credit = u64::from(self.shrink_credit[q]) + exact as u64;
            quotas[q] = credit / CREDIT_ONE;
            self.shrink_credit[q] = (credit % CREDIT_ONE) as u32;
        }
        let lens = self.cache_queue_lens().map(u64::from);
        let used = self.config.queue_count();
        redistribute(&mut quotas[..used], &lens[..used], &weighted[..used]);
        quotas
    }

    /// `scan_objects`: scan up to `nr_to_scan` entries across the queues and reclaim the cold
    /// ones. REFERENCED entries get their second chance; entries being converted or dirty are
    /// skipped.
    pub fn shrink_scan(&mut self, nr_to_scan: u64, em: &mut Emitter) -> ShrinkResult {
        self.stats.shrinker_calls += 1;
        let mut result = ShrinkResult {
            quotas: self.shrink_quotas(nr_to_scan),
            ..ShrinkResult::default()
        };
        for queue in 0..self.config.queue_count() {
            self.scan_queue(queue as u8, result.quotas[queue], em, &mut result);
        }
        result
    }

    fn scan_queue(&mut self, queue: u8, quota: u64, em: &mut Emitter, result: &mut ShrinkResult) {
        let mut cursor = self.queues[queue as usize].head;
        for _ in 0..quota {
            if cursor == NIL {
                break;
            }
            let slot = cursor;
            cursor = self.entries[slot as usize].links.next;
            result.scanned[queue as usize] += 1;
            let entry = &self.entries[slot as usize];
            if entry.referenced {
                result.second_chances += 1;
                self.give_second_chance(slot, SECOND_CHANCE_BY_SHRINKER, em);
            } else if !(entry.converting || entry.dirty) {
                let nid = entry.nid;
                self.remove(slot);
                let event_queue = self.config.event_queue(queue);
                if let Some(counted) = tracer_common::Queue::from_code(event_queue) {
                    *self.stats.events.reclaims.get_mut(counted) += 1;
                }
                result.reclaimed[queue as usize] += 1;
                em.reclaim(nid, event_queue);
                if queue == tracer_common::QUEUE_RAW {
                    em.node_evict(nid);
                }
            }
        }
    }
}

/// Cap each quota at its queue's population and hand the excess to the queues still below
/// their cap, in proportion to their weighted population (integer remainders go to the largest
/// weighted populations first).
fn redistribute(quotas: &mut [u64], lens: &[u64], weighted: &[u64]) {
    loop {
        let mut excess = 0;
        for q in 0..quotas.len() {
            if quotas[q] > lens[q] {
                excess += quotas[q] - lens[q];
                quotas[q] = lens[q];
            }
        }
        let open: Vec<usize> = (0..quotas.len())
            .filter(|q| quotas[*q] < lens[*q] && weighted[*q] > 0)
            .collect();
        if excess == 0 || open.is_empty() {
            return;
        }
        let open_total: u64 = open.iter().map(|q| weighted[*q]).sum();
        let mut given = 0;
        for q in &open {
            let share = excess * weighted[*q] / open_total;
            quotas[*q] += share;
            given += share;
        }
        let mut by_weight = open.clone();
        by_weight.sort_by_key(|q| std::cmp::Reverse(weighted[*q]));
        for q in by_weight.iter().cycle().take((excess - given) as usize) {
            quotas[*q] += 1;
        }
    }
}
