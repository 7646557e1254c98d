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
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Population {
    /// Entries per queue, index = `Queue::index`.
    per_queue: [i64; QUEUE_COUNT],
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
            _ => {}
        }
    }

    fn of(&mut self, queue: Queue) -> &mut i64 {
        &mut self.per_queue[queue.index()]
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
        }
    }
}
