//! The cache's population as the events tell it: entries per queue and the memory they take.
use serde::{Deserialize, Serialize};
use tracer_common::{Decoded, Queue, QUEUE_COUNT};

use super::{PerQueue, ENTRY_BYTES};

/// Cache population derived from events: an insert begins a raw entry (node reads do, from a
/// source that tells of no inserts: an older recording), conversions move raw to a compressed
/// queue, restores move back, reclaims, failed restores and forgets remove. A source attached
/// to a running cache sees departures of entries it never saw arrive: such a departure from an
/// empty count is dropped and the figures marked partial, so they stay a lower bound that is
/// exact again once the cache has emptied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheGauges {
    pub raw_entries: u64,
    pub slots: PerQueue,
    pub raw_bytes: u64,
    pub compressed_bytes: u64,
    /// Entries' bookkeeping + raw buffers + compressed slots.
    pub attributed_bytes: u64,
    /// Entries left the cache that the events never saw arrive (the source attached to a
    /// cache that was not empty): the figures count only what the events saw.
    #[serde(default)]
    pub partial: bool,
}

/// Entries per queue, as one rule for arrivals counts them.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    /// Index = `Queue::index`.
    per_queue: [u64; QUEUE_COUNT],
    /// A departure found its queue's count at zero.
    partial: bool,
}

impl Counts {
    fn arrive(&mut self, queue: Queue) {
        self.per_queue[queue.index()] += 1;
    }

    fn depart(&mut self, queue: Queue) {
        let count = &mut self.per_queue[queue.index()];
        match count.checked_sub(1) {
            Some(left) => *count = left,
            None => self.partial = true,
        }
    }

    fn apply(&mut self, event: &Decoded) {
        match *event {
            Decoded::Convert { queue, .. } => {
                self.depart(Queue::Raw);
                self.arrive(queue);
            }
            Decoded::Restore { queue, .. } => {
                self.depart(queue);
                self.arrive(Queue::Raw);
            }
            Decoded::RestoreFail { queue, .. }
            | Decoded::Reclaim { queue, .. }
            | Decoded::Forget { queue, .. } => self.depart(queue),
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Population {
    /// Raw entries begun by inserts: exact on a kernel that tells of them.
    by_inserts: Counts,
    /// Raw entries begun by node reads: what a source without inserts can count.
    by_reads: Counts,
    /// An insert arrived: the source tells of them, `by_inserts` is the count.
    inserts_told: bool,
}

impl Population {
    pub(super) fn apply(&mut self, event: &Decoded) {
        match *event {
            Decoded::Insert { .. } => {
                self.inserts_told = true;
                self.by_inserts.arrive(Queue::Raw);
            }
            Decoded::NodeRead { .. } => self.by_reads.arrive(Queue::Raw),
            _ => {
                self.by_inserts.apply(event);
                self.by_reads.apply(event);
            }
        }
    }

    pub(super) fn gauges(&self) -> CacheGauges {
        let counts = if self.inserts_told {
            &self.by_inserts
        } else {
            &self.by_reads
        };
        let count = |queue: Queue| counts.per_queue[queue.index()];
        let slots = PerQueue {
            raw: 0,
            b256: count(Queue::B256),
            b512: count(Queue::B512),
            b1024: count(Queue::B1024),
        };
        let raw_entries = count(Queue::Raw);
        let raw_bytes = raw_entries * u64::from(Queue::Raw.slot_bytes());
        let compressed_bytes: u64 = Queue::COMPRESSED
            .iter()
            .map(|&queue| count(queue) * u64::from(queue.slot_bytes()))
            .sum();
        let entries = raw_entries + slots.compressed();
        CacheGauges {
            raw_entries,
            slots,
            raw_bytes,
            compressed_bytes,
            attributed_bytes: entries * ENTRY_BYTES + raw_bytes + compressed_bytes,
            partial: counts.partial,
        }
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{Event, EventKind, QUEUE_256, QUEUE_RAW};

    use super::*;

    fn apply(population: &mut Population, kind: EventKind, queue: u8) {
        population.apply(&Event::new(kind, 1).nid(3).queue(queue).decode());
    }

    #[test]
    fn a_departure_never_seen_arriving_marks_the_figures_partial() {
        let mut seen = Population::default();
        apply(&mut seen, EventKind::NodeRead, QUEUE_RAW);
        apply(&mut seen, EventKind::Convert, QUEUE_256);
        apply(&mut seen, EventKind::Reclaim, QUEUE_256);
        let gauges = seen.gauges();
        assert_eq!((gauges.raw_entries, gauges.slots.b256), (0, 0));
        assert!(!gauges.partial, "everything that left was seen arriving");
        let mut attached_late = Population::default();
        apply(&mut attached_late, EventKind::Reclaim, QUEUE_RAW);
        apply(&mut attached_late, EventKind::NodeRead, QUEUE_RAW);
        let gauges = attached_late.gauges();
        assert!(gauges.partial);
        // The unseen entry's departure is not held against the one seen arriving.
        assert_eq!(gauges.raw_entries, 1);
    }

    /// Where inserts are told, they and not node reads begin raw entries: a lookup that finds
    /// a page in the page cache begins one with no read, a read the kernel did not cache
    /// begins none; forgets end entries as reclaims do.
    #[test]
    fn inserts_when_told_begin_raw_entries_and_forgets_end_them() {
        let mut population = Population::default();
        apply(&mut population, EventKind::NodeRead, QUEUE_RAW);
        assert_eq!(population.gauges().raw_entries, 1, "no inserts told yet");
        for _ in 0..3 {
            apply(&mut population, EventKind::Insert, QUEUE_RAW);
        }
        apply(&mut population, EventKind::NodeRead, QUEUE_RAW);
        apply(&mut population, EventKind::Convert, QUEUE_256);
        apply(&mut population, EventKind::Convert, QUEUE_256);
        apply(&mut population, EventKind::Forget, QUEUE_256);
        let gauges = population.gauges();
        assert_eq!((gauges.raw_entries, gauges.slots.b256), (1, 1));
        assert!(!gauges.partial);
        apply(&mut population, EventKind::Forget, QUEUE_RAW);
        apply(&mut population, EventKind::Forget, QUEUE_RAW);
        let gauges = population.gauges();
        assert_eq!(gauges.raw_entries, 0);
        assert!(gauges.partial, "one more raw entry left than began");
    }
}
