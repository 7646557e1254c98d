//! The cache's population as the events tell it: entries per queue and the memory they take.
use serde::{Deserialize, Serialize};
use tracer_common::{Event, EventKind, QUEUE_RAW, QUEUE_SLOT_BYTES};

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
    per_queue: [i64; 4],
}

impl Population {
    pub(super) fn apply(&mut self, event: &Event) {
        let queue = usize::from(event.queue.min(3));
        let raw = usize::from(QUEUE_RAW);
        match event.kind() {
            Some(EventKind::NodeRead) => self.per_queue[raw] += 1,
            Some(EventKind::Convert) => {
                self.per_queue[raw] -= 1;
                self.per_queue[queue] += 1;
            }
            Some(EventKind::Restore) => {
                self.per_queue[queue] -= 1;
                self.per_queue[raw] += 1;
            }
            Some(EventKind::RestoreFail) | Some(EventKind::Reclaim) => self.per_queue[queue] -= 1,
            _ => {}
        }
    }

    pub(super) fn gauges(&self) -> CacheGauges {
        let count = |q: usize| self.per_queue[q].max(0) as u64;
        let slots = PerQueue {
            raw: 0,
            b256: count(1),
            b512: count(2),
            b1024: count(3),
        };
        let raw_entries = count(0);
        let raw_bytes = raw_entries * u64::from(QUEUE_SLOT_BYTES[0]);
        let compressed_bytes: u64 = (1..4)
            .map(|q| count(q) * u64::from(QUEUE_SLOT_BYTES[q]))
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
