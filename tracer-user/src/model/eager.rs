//! Conversions restored soon after: the law's "too eager" signal (docs/CONTROLLER.md).
//!
//! Remembers when each compressed entry was converted, by (device, nid), until it is restored,
//! reclaimed or fails to restore. A restore within the eager time of its conversion counts.
//! Bounded: past `capacity` tracked entries new conversions are not remembered (their restores
//! then count as not eager), so a huge cache cannot grow the model without limit.
use std::collections::HashMap;

use tracer_common::{Event, EventKind, QUEUE_RAW};

#[derive(Debug)]
pub struct ConversionAges {
    converted_at: HashMap<(u32, u32), u64>,
    capacity: usize,
}

impl ConversionAges {
    pub fn new(capacity: usize) -> Self {
        ConversionAges {
            converted_at: HashMap::new(),
            capacity,
        }
    }

    /// Account one event; true when it is a restore within `eager_ns` of its conversion.
    pub fn is_eager_restore(&mut self, event: &Event, eager_ns: u64) -> bool {
        let key = (event.dev, event.nid);
        match event.kind() {
            Some(EventKind::Convert) => {
                if self.converted_at.len() < self.capacity || self.converted_at.contains_key(&key) {
                    self.converted_at.insert(key, event.ts_ns);
                }
                false
            }
            Some(EventKind::Restore) => self
                .converted_at
                .remove(&key)
                .is_some_and(|at| event.ts_ns.saturating_sub(at) < eager_ns),
            Some(EventKind::Reclaim) if event.queue != QUEUE_RAW => {
                self.converted_at.remove(&key);
                false
            }
            Some(EventKind::RestoreFail) => {
                self.converted_at.remove(&key);
                false
            }
            _ => false,
        }
    }

    /// Compressed entries whose conversion time is remembered.
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.converted_at.len()
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::QUEUE_256;

    use super::*;

    const MS: u64 = 1_000_000;

    fn event(kind: EventKind, dev: u32, nid: u32, ts_ms: u64) -> Event {
        Event {
            kind: kind as u8,
            dev,
            nid,
            ts_ns: ts_ms * MS,
            queue: QUEUE_256,
            ..Event::ZERO
        }
    }

    #[test]
    fn restores_within_the_eager_time_of_their_conversion_count_once() {
        let mut ages = ConversionAges::new(10);
        let eager = 2_000 * MS;
        let results: Vec<bool> = [
            event(EventKind::Convert, 1, 7, 0),
            event(EventKind::Convert, 2, 7, 0), // same nid, other device
            event(EventKind::Convert, 1, 8, 0),
            event(EventKind::Restore, 1, 7, 1_999), // eager
            event(EventKind::Restore, 2, 7, 2_000), // not: exactly the eager time
            event(EventKind::Restore, 1, 7, 2_100), // restored twice: no conversion before
            event(EventKind::Reclaim, 1, 8, 500),   // reclaimed compressed: forgotten
            event(EventKind::Restore, 1, 8, 600),
        ]
        .iter()
        .map(|e| ages.is_eager_restore(e, eager))
        .collect();
        assert_eq!(
            results,
            [false, false, false, true, false, false, false, false]
        );
        assert_eq!(ages.tracked(), 0);
    }

    #[test]
    fn past_capacity_new_conversions_are_not_remembered() {
        let mut ages = ConversionAges::new(2);
        for nid in 0..5 {
            ages.is_eager_restore(&event(EventKind::Convert, 1, nid, 0), 1_000 * MS);
        }
        assert_eq!(ages.tracked(), 2);
        let eager = |ages: &mut ConversionAges, nid| {
            ages.is_eager_restore(&event(EventKind::Restore, 1, nid, 10), 1_000 * MS)
        };
        assert!(eager(&mut ages, 1));
        assert!(!eager(&mut ages, 4), "never remembered");
    }
}
