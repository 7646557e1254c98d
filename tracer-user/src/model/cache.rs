//! The cache's population as the events tell it: entries per queue and the memory they take.
use serde::{Deserialize, Serialize};
use tracer_common::{Decoded, Queue, QUEUE_COUNT};

use super::{PerQueue, ENTRY_BYTES};

/// Cache population derived from events: node reads add raw entries, conversions move raw to a
/// compressed queue, restores move back, reclaims remove. A source attached to a running cache
/// sees only the changes since it started, so counts are clamped at zero.
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

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Population {
    /// Entries per queue, index = `Queue::index`.
    per_queue: [i64; QUEUE_COUNT],
    /// A queue's count went below zero.
    partial: bool,
}

impl Population {
    pub(super) fn apply(&mut self, event: &Decoded) {
        match *event {
            Decoded::NodeRead { .. } => *self.of(Queue::Raw) += 1,
            Decoded::Convert { queue, .. } => {
                *self.of(Queue::Raw) -= 1;
                *self.of(queue) += 1;
            }
            Decoded::Restore { queue, .. } => {
                *self.of(queue) -= 1;
                *self.of(Queue::Raw) += 1;
            }
            Decoded::RestoreFail { queue, .. } | Decoded::Reclaim { queue, .. } => {
                *self.of(queue) -= 1
            }
            _ => return,
        }
        self.note_unseen();
    }

    fn of(&mut self, queue: Queue) -> &mut i64 {
        &mut self.per_queue[queue.index()]
    }

    /// Whether a departure was of an entry never seen arriving.
    fn note_unseen(&mut self) {
        self.partial |= self.per_queue.iter().any(|&count| count < 0);
    }

    pub(super) fn gauges(&self) -> CacheGauges {
        let count = |queue: Queue| self.per_queue[queue.index()].max(0) as u64;
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
            partial: self.partial,
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
        assert!(attached_late.gauges().partial);
    }
}
