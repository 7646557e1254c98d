//! The one counter set of node-cache activity: what the model counts from events, for a
//! window, a process, an app or the whole run, and what the simulator's cache counts of its
//! own work (`sim::cache::CacheStats` holds one beside the counts no event carries).
use serde::{Deserialize, Serialize};

use crate::{CheckpointPhase, Decoded, Outcome, Queue, RestoreFailure, Retrieval, SecondChanceBy};

/// One count per node-cache queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerQueue {
    pub raw: u64,
    pub b256: u64,
    pub b512: u64,
    pub b1024: u64,
}

impl PerQueue {
    pub fn get_mut(&mut self, queue: Queue) -> &mut u64 {
        match queue {
            Queue::Raw => &mut self.raw,
            Queue::B256 => &mut self.b256,
            Queue::B512 => &mut self.b512,
            Queue::B1024 => &mut self.b1024,
        }
    }

    pub fn get(&self, queue: Queue) -> u64 {
        match queue {
            Queue::Raw => self.raw,
            Queue::B256 => self.b256,
            Queue::B512 => self.b512,
            Queue::B1024 => self.b1024,
        }
    }

    pub fn total(&self) -> u64 {
        self.raw + self.b256 + self.b512 + self.b1024
    }

    /// Raw, 256, 512, 1024: the order of the `QUEUE_*` codes.
    pub fn to_array(self) -> [u64; 4] {
        [self.raw, self.b256, self.b512, self.b1024]
    }

    /// Compressed queues only.
    pub fn compressed(&self) -> u64 {
        self.b256 + self.b512 + self.b1024
    }

    pub fn add(&mut self, other: &PerQueue) {
        for queue in Queue::ALL {
            *self.get_mut(queue) += other.get(queue);
        }
    }

    /// What was counted after `earlier` (an earlier value of the same counters).
    pub fn since(&self, earlier: &PerQueue) -> PerQueue {
        let mut span = *self;
        for queue in Queue::ALL {
            *span.get_mut(queue) = self.get(queue).saturating_sub(earlier.get(queue));
        }
        span
    }
}

/// One count per reason code (index = the code, `RESTORE_FAIL_*` or `SECOND_CHANCE_BY_*`; 0
/// counts events whose reason this build does not know).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerReason(pub [u64; 8]);

impl PerReason {
    /// Count one event of reason `code` (None or a code past the table: the unknown ones).
    pub fn count(&mut self, code: Option<u8>) {
        let index = code.map_or(0, usize::from);
        if let Some(slot) = self.0.get_mut(index) {
            *slot += 1;
        } else {
            self.0[0] += 1;
        }
    }

    /// The count of a reason code (0: the unknown ones).
    pub fn get(&self, code: u8) -> u64 {
        self.0.get(usize::from(code)).copied().unwrap_or(0)
    }

    pub fn add(&mut self, other: &PerReason) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }

    /// What was counted after `earlier`.
    pub fn since(&self, earlier: &PerReason) -> PerReason {
        let mut span = *self;
        for (mine, theirs) in span.0.iter_mut().zip(earlier.0) {
            *mine = mine.saturating_sub(theirs);
        }
        span
    }
}

/// Restore latencies in powers of two of nanoseconds: bucket i holds [2^i, 2^(i+1)) ns (the
/// last everything above). Only restores whose source timed them count: a kernel's own field,
/// a return probe, the simulator; an entry probe's restore has no latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    pub count: u64,
    pub total_ns: u64,
    pub log2_ns: [u64; 32],
}

impl LatencyHistogram {
    /// Count one restore's latency (0: a restore with none, not counted here).
    pub fn record(&mut self, latency_ns: u64) {
        if latency_ns == 0 {
            return;
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(latency_ns);
        let bucket = (63 - latency_ns.leading_zeros() as usize).min(self.log2_ns.len() - 1);
        self.log2_ns[bucket] += 1;
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        self.count += other.count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        for (mine, theirs) in self.log2_ns.iter_mut().zip(other.log2_ns) {
            *mine += theirs;
        }
    }

    /// What was recorded after `earlier`.
    pub fn since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        let mut span = *self;
        span.count = self.count.saturating_sub(earlier.count);
        span.total_ns = self.total_ns.saturating_sub(earlier.total_ns);
        for (mine, theirs) in span.log2_ns.iter_mut().zip(earlier.log2_ns) {
            *mine = mine.saturating_sub(theirs);
        }
        span
    }

    /// The upper bound in ns of the bucket the q-quantile falls in (q in 0..=1); None when
    /// empty.
    pub fn quantile_bound_ns(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.log2_ns.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(1u64 << (i + 1).min(63));
            }
        }
        None
    }

    pub fn mean_ns(&self) -> Option<u64> {
        (self.count > 0).then(|| self.total_ns / self.count)
    }
}

/// A smaller log2 histogram for what is kept per process and app many times over: buckets
/// [2^i, 2^(i+1)) ns for i in 8..=31 as u32 counts (times below 256 ns count in the first,
/// 2.1 s and above in the last), with the exact count and sum. Read as a `LatencyHistogram`
/// (`to_latency`), whose buckets it keeps. A timed lookup takes 100s of ns at the least.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactHistogram {
    pub count: u64,
    pub total_ns: u64,
    pub log2_ns: [u32; 24],
}

impl CompactHistogram {
    const FIRST_LOG2: usize = 8;

    pub fn record(&mut self, latency_ns: u64) {
        if latency_ns == 0 {
            return;
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(latency_ns);
        let log2 = 63 - latency_ns.leading_zeros() as usize;
        let bucket = log2.clamp(Self::FIRST_LOG2, Self::FIRST_LOG2 + 23) - Self::FIRST_LOG2;
        self.log2_ns[bucket] = self.log2_ns[bucket].saturating_add(1);
    }

    pub fn add(&mut self, other: &CompactHistogram) {
        self.count += other.count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        for (mine, theirs) in self.log2_ns.iter_mut().zip(other.log2_ns) {
            *mine = mine.saturating_add(theirs);
        }
    }

    pub fn since(&self, earlier: &CompactHistogram) -> CompactHistogram {
        let mut span = *self;
        span.count = self.count.saturating_sub(earlier.count);
        span.total_ns = self.total_ns.saturating_sub(earlier.total_ns);
        for (mine, theirs) in span.log2_ns.iter_mut().zip(earlier.log2_ns) {
            *mine = mine.saturating_sub(theirs);
        }
        span
    }

    /// The same as a `LatencyHistogram` (quantiles, means, the JSON's buckets).
    pub fn to_latency(&self) -> LatencyHistogram {
        let mut h = LatencyHistogram {
            count: self.count,
            total_ns: self.total_ns,
            ..LatencyHistogram::default()
        };
        for (i, n) in self.log2_ns.iter().enumerate() {
            h.log2_ns[i + Self::FIRST_LOG2] = u64::from(*n);
        }
        h
    }
}

/// Timed node lookups (issue 51), one latency histogram per outcome (`Outcome::index`): each
/// lookup counts once, in its one outcome. A lookup's time is what the process that made it
/// waited for its node block; `wait_ns` sums them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retrievals {
    pub by_outcome: [CompactHistogram; 5],
    /// The demand node reads the lookups submitted themselves (a disk-read lookup's one, and
    /// any it read again): what the node reads are when every demand read is a lookup's.
    #[serde(default)]
    pub node_reads: u64,
    /// The device time of the lookups' reads where measured (the block layer's request from
    /// issue to completion): a disk read's time less this is time waited elsewhere.
    #[serde(default)]
    pub device: CompactHistogram,
}

impl Retrievals {
    /// One timed lookup. A latency of 0 (a clock that did not move) counts as 1 ns, so that
    /// the lookup still counts.
    pub fn record(&mut self, retrieval: Retrieval) {
        self.by_outcome[retrieval.outcome.index()].record(retrieval.latency_ns.max(1));
        self.node_reads += u64::from(retrieval.reads);
        self.device.record(retrieval.device_ns);
    }

    pub fn get(&self, outcome: Outcome) -> LatencyHistogram {
        self.by_outcome[outcome.index()].to_latency()
    }

    /// The reads' device time, where measured.
    pub fn device(&self) -> LatencyHistogram {
        self.device.to_latency()
    }

    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0 && self.node_reads == 0 && self.device.count == 0
    }

    /// Timed lookups, all outcomes.
    pub fn count(&self) -> u64 {
        self.by_outcome.iter().map(|h| h.count).sum()
    }

    /// Their times summed: what the lookups' processes waited, ns.
    pub fn wait_ns(&self) -> u64 {
        self.by_outcome
            .iter()
            .fold(0u64, |sum, h| sum.saturating_add(h.total_ns))
    }

    /// All outcomes in one histogram.
    pub fn all(&self) -> LatencyHistogram {
        let mut all = CompactHistogram::default();
        for h in &self.by_outcome {
            all.add(h);
        }
        all.to_latency()
    }

    pub fn add(&mut self, other: &Retrievals) {
        // Most counter sets time no lookup (untimed runs, most apps): nothing to walk.
        if other.is_empty() {
            return;
        }
        for (mine, theirs) in self.by_outcome.iter_mut().zip(&other.by_outcome) {
            mine.add(theirs);
        }
        self.node_reads += other.node_reads;
        self.device.add(&other.device);
    }

    pub fn since(&self, earlier: &Retrievals) -> Retrievals {
        if earlier.is_empty() {
            return *self;
        }
        let mut span = *self;
        for (mine, theirs) in span.by_outcome.iter_mut().zip(&earlier.by_outcome) {
            *mine = mine.since(theirs);
        }
        span.node_reads = self.node_reads.saturating_sub(earlier.node_reads);
        span.device = self.device.since(&earlier.device);
        span
    }
}

/// Everything the model counts from events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
    /// Compressed entries restored: node reads avoided.
    pub restores: u64,
    /// The latencies of the restores that carry one.
    #[serde(default)]
    pub restore_latency: LatencyHistogram,
    pub restore_fails: u64,
    /// `restore_fails` by validation step.
    #[serde(default)]
    pub restore_fail_reasons: PerReason,
    pub restore_nomem: u64,
    pub conversions: u64,
    pub convert_rejects: u64,
    pub convert_aborts: u64,
    pub reclaims: PerQueue,
    pub second_chances: PerQueue,
    /// `second_chances` by the path that gave them.
    #[serde(default)]
    pub second_chance_reasons: PerReason,
    /// Raw entries begun (a kernel that tells of them: the reference module's insert
    /// tracepoint; the simulator).
    #[serde(default)]
    pub inserts: u64,
    /// Entries dropped neither by reclaim nor by a failed restore.
    #[serde(default)]
    pub forgets: u64,
    /// Events lost before they reached us.
    pub lost: u64,
    /// Timed node lookups by outcome (the kernel's `--accesses` lookups when timed, the
    /// simulator's): latency histograms, counts, the time waited. Not serialised while empty:
    /// snapshots of many apps without timed lookups stay their size.
    #[serde(default, skip_serializing_if = "Retrievals::is_empty")]
    pub retrievals: Retrievals,
}

impl Counters {
    pub fn record(&mut self, event: &Decoded) {
        match *event {
            Decoded::NodeRead {
                readahead: true, ..
            } => self.node_reads_readahead += 1,
            Decoded::NodeRead { .. } => self.node_reads_demand += 1,
            Decoded::NodeWrite { .. } => self.node_writes += 1,
            // A checkpoint is three events on a kernel (start and finish of block_ops, the
            // finish); it counts once, as the kernel's CP count does, at its finish.
            Decoded::Checkpoint {
                phase: CheckpointPhase::FinishCheckpoint,
                ..
            } => self.checkpoints += 1,
            Decoded::Checkpoint { .. } => {}
            Decoded::Restore { latency_ns, .. } => self.restored(latency_ns),
            Decoded::RestoreFail { reason, .. } => self.restore_failed(reason),
            Decoded::RestoreNomem { .. } => self.restore_nomem += 1,
            Decoded::Convert { .. } => self.conversions += 1,
            Decoded::ConvertReject { .. } => self.convert_rejects += 1,
            Decoded::ConvertAbort { .. } => self.convert_aborts += 1,
            Decoded::Reclaim { queue, .. } => *self.reclaims.get_mut(queue) += 1,
            Decoded::SecondChance { queue, by, .. } => self.second_chance(queue, by),
            Decoded::Insert { .. } => self.inserts += 1,
            Decoded::Forget { .. } => self.forgets += 1,
            Decoded::Lost { count } => self.lost += u64::from(count),
            // A timed lookup counts in its outcome; untimed ones are what `whatif` replays.
            Decoded::NodeAccess {
                retrieval: Some(retrieval),
                ..
            } => self.retrievals.record(retrieval),
            Decoded::Hello
            | Decoded::NodeAccess { .. }
            | Decoded::NodeEvict { .. }
            | Decoded::InodeEvict { .. }
            | Decoded::ShrinkerScan { .. } => {}
            // Checkpoint anatomy: counted by `model::checkpoints`, not per process.
            Decoded::MetaWrite { .. } | Decoded::JournalEntry(_) => {}
            // The mechanism's own counters: the model puts their totals in place of the
            // events' (`model::cache_counters`), never per process.
            Decoded::Counter(_) => {}
            // A newer tracer's kind or code: nothing here knows what it would count as.
            Decoded::Unknown(_) => {}
        }
    }

    /// One restore, with its latency (0: its source did not time it).
    pub fn restored(&mut self, latency_ns: u64) {
        self.restores += 1;
        self.restore_latency.record(latency_ns);
    }

    /// One failed restore, by the validation step that refused it (None: unknown).
    pub fn restore_failed(&mut self, reason: Option<RestoreFailure>) {
        self.restore_fails += 1;
        self.restore_fail_reasons.count(reason.map(|r| r.code()));
    }

    /// One second chance in `queue`, by the path that gave it (None: unknown).
    pub fn second_chance(&mut self, queue: Queue, by: Option<SecondChanceBy>) {
        *self.second_chances.get_mut(queue) += 1;
        self.second_chance_reasons.count(by.map(|b| b.code()));
    }

    /// How many events these counters counted (lost-event markers aside).
    pub fn events(&self) -> u64 {
        self.node_reads()
            + self.node_writes
            + self.checkpoints
            + self.restores
            + self.restore_fails
            + self.restore_nomem
            + self.conversions
            + self.convert_rejects
            + self.convert_aborts
            + self.reclaims.total()
            + self.second_chances.total()
            + self.inserts
            + self.forgets
    }

    pub fn node_reads(&self) -> u64 {
        self.node_reads_demand + self.node_reads_readahead
    }

    /// restores / (restores + node reads): the share of node retrievals the compressed cache
    /// served. None when there were no retrievals.
    pub fn hit_ratio(&self) -> Option<f64> {
        let retrievals = self.restores + self.node_reads();
        (retrievals > 0).then(|| self.restores as f64 / retrievals as f64)
    }

    pub fn add(&mut self, other: &Counters) {
        self.node_reads_demand += other.node_reads_demand;
        self.node_reads_readahead += other.node_reads_readahead;
        self.node_writes += other.node_writes;
        self.checkpoints += other.checkpoints;
        self.restores += other.restores;
        self.restore_latency.add(&other.restore_latency);
        self.restore_fails += other.restore_fails;
        self.restore_fail_reasons.add(&other.restore_fail_reasons);
        self.restore_nomem += other.restore_nomem;
        self.conversions += other.conversions;
        self.convert_rejects += other.convert_rejects;
        self.convert_aborts += other.convert_aborts;
        self.reclaims.add(&other.reclaims);
        self.second_chances.add(&other.second_chances);
        self.second_chance_reasons.add(&other.second_chance_reasons);
        self.inserts += other.inserts;
        self.forgets += other.forgets;
        self.lost += other.lost;
        self.retrievals.add(&other.retrievals);
    }

    /// What was counted after `earlier` (an earlier value of the same monotonic counters).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let less = |now: u64, then: u64| now.saturating_sub(then);
        Counters {
            node_reads_demand: less(self.node_reads_demand, earlier.node_reads_demand),
            node_reads_readahead: less(self.node_reads_readahead, earlier.node_reads_readahead),
            node_writes: less(self.node_writes, earlier.node_writes),
            checkpoints: less(self.checkpoints, earlier.checkpoints),
            restores: less(self.restores, earlier.restores),
            restore_latency: self.restore_latency.since(&earlier.restore_latency),
            restore_fails: less(self.restore_fails, earlier.restore_fails),
            restore_fail_reasons: self
                .restore_fail_reasons
                .since(&earlier.restore_fail_reasons),
            restore_nomem: less(self.restore_nomem, earlier.restore_nomem),
            conversions: less(self.conversions, earlier.conversions),
            convert_rejects: less(self.convert_rejects, earlier.convert_rejects),
            convert_aborts: less(self.convert_aborts, earlier.convert_aborts),
            reclaims: self.reclaims.since(&earlier.reclaims),
            second_chances: self.second_chances.since(&earlier.second_chances),
            second_chance_reasons: self
                .second_chance_reasons
                .since(&earlier.second_chance_reasons),
            inserts: less(self.inserts, earlier.inserts),
            forgets: less(self.forgets, earlier.forgets),
            lost: less(self.lost, earlier.lost),
            retrievals: self.retrievals.since(&earlier.retrievals),
        }
    }

    /// Whether anything at all happened.
    pub fn is_empty(&self) -> bool {
        *self == Counters::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Event, EventKind, QUEUE_256, QUEUE_RAW, RESTORE_FAIL_CRC, SECOND_CHANCE_BY_RACE,
        SECOND_CHANCE_BY_WORKER,
    };

    fn record(counters: &mut Counters, kind: EventKind, queue: u8, reason: u8) {
        let mut event = Event::new(kind, 1).nid(7).queue(queue);
        event.reason = reason;
        counters.record(&event.decode());
    }

    #[test]
    fn reasons_are_counted_per_code_and_unknown_codes_apart() {
        let mut c = Counters::default();
        record(
            &mut c,
            EventKind::SecondChance,
            QUEUE_RAW,
            SECOND_CHANCE_BY_WORKER,
        );
        record(
            &mut c,
            EventKind::SecondChance,
            QUEUE_256,
            SECOND_CHANCE_BY_RACE,
        );
        record(
            &mut c,
            EventKind::SecondChance,
            QUEUE_RAW,
            SECOND_CHANCE_BY_RACE,
        );
        record(&mut c, EventKind::SecondChance, QUEUE_RAW, 0);
        record(&mut c, EventKind::SecondChance, QUEUE_RAW, 200);
        record(&mut c, EventKind::RestoreFail, QUEUE_256, RESTORE_FAIL_CRC);
        assert_eq!(c.second_chances.total(), 5);
        assert_eq!(c.second_chance_reasons.0, [2, 1, 0, 2, 0, 0, 0, 0]);
        assert_eq!(c.restore_fails, 1);
        assert_eq!(c.restore_fail_reasons.get(RESTORE_FAIL_CRC), 1);
        let mut sum = c;
        sum.add(&c);
        assert_eq!(sum.second_chance_reasons.get(SECOND_CHANCE_BY_RACE), 4);
        assert_eq!(sum.restore_fail_reasons.get(RESTORE_FAIL_CRC), 2);
    }

    #[test]
    fn restore_latencies_go_to_power_of_two_buckets_and_add_up() {
        let restore = |ns: u64| {
            let mut e = Event::new(EventKind::Restore, 1);
            e.latency_ns = ns;
            e
        };
        let mut window = Counters::default();
        for ns in [0, 1, 1_500, 1_500, 3_000] {
            window.record(&restore(ns).decode());
        }
        let h = window.restore_latency;
        // The restore of 0 ns had no latency (an entry probe): counted as a restore only.
        assert_eq!((window.restores, h.count, h.total_ns), (5, 4, 6_001));
        assert_eq!((h.log2_ns[0], h.log2_ns[10], h.log2_ns[11]), (1, 2, 1));
        assert_eq!(h.quantile_bound_ns(0.5), Some(2_048));
        assert_eq!(h.quantile_bound_ns(0.99), Some(4_096));
        assert_eq!(h.mean_ns(), Some(1_500));
        let mut total = Counters::default();
        total.add(&window);
        total.add(&window);
        assert_eq!(total.restore_latency.count, 8);
        assert_eq!(total.restore_latency.log2_ns[10], 4);
        assert_eq!(
            Counters::default().restore_latency.quantile_bound_ns(0.5),
            None
        );
    }

    #[test]
    fn timed_lookups_count_once_in_their_outcome() {
        let lookup = |outcome: u8, ns: u64| {
            let mut e = Event::new(EventKind::NodeAccess, 1).nid(3);
            e.reason = outcome;
            e.latency_ns = ns;
            e
        };
        let mut c = Counters::default();
        for (outcome, ns) in [
            (crate::RETRIEVAL_HIT, 300),
            (crate::RETRIEVAL_HIT, 0),
            (crate::RETRIEVAL_DISK_READ, 1_000_000),
            (crate::RETRIEVAL_RESTORE, 5_000),
            (crate::RETRIEVAL_WAITED, 70_000),
            (crate::RETRIEVAL_ERROR, 900),
            // untimed and unknown codes: not retrievals
            (0, 0),
            (9, 50),
        ] {
            c.record(&lookup(outcome, ns).decode());
        }
        let r = c.retrievals;
        assert_eq!(r.count(), 6);
        assert_eq!(r.get(Outcome::Hit).count, 2);
        assert_eq!(r.get(Outcome::Hit).total_ns, 301);
        assert_eq!(r.get(Outcome::DiskRead).log2_ns[19], 1);
        assert_eq!(r.wait_ns(), 301 + 1_000_000 + 5_000 + 70_000 + 900);
        assert_eq!(r.all().count, 6);
        assert_eq!(c.events(), 0, "lookups are not node-cache events");
        let mut twice = c;
        twice.add(&c);
        assert_eq!(twice.retrievals.since(&c.retrievals), c.retrievals);
        assert_eq!(twice.since(&c).retrievals.get(Outcome::Waited).count, 1);
    }
}
