//! Conversions restored soon after: the law's "too eager" signal (docs/CONTROLLER.md).
//!
//! Remembers when each compressed entry was converted, by (device, nid), until it is restored,
//! reclaimed or fails to restore. A restore within the eager time of its conversion counts.
//! Bounded: past `capacity` tracked entries new conversions are not remembered (their restores
//! then count as not eager), so a huge cache cannot grow the model without limit.
use tracer_common::{Decoded, Event};

use super::fast_hash::FastMap;

/// (device << 32 | nid) -> conversion time.
type Ages = FastMap<u64, u64>;

#[derive(Debug)]
pub(crate) struct ConversionAges {
    converted_at: Ages,
    capacity: usize,
}

impl ConversionAges {
    pub(crate) fn new(capacity: usize) -> Self {
        ConversionAges {
            converted_at: Ages::default(),
            capacity,
        }
    }

    /// Account one event (`decoded` is its `Event::decode`); for a restore of an entry whose
    /// conversion is remembered, how long after the conversion it came (ns).
    pub(crate) fn restored_after(&mut self, event: &Event, decoded: &Decoded) -> Option<u64> {
        let key_of = |nid: u32| (u64::from(event.dev) << 32) | u64::from(nid);
        match *decoded {
            Decoded::Convert { nid, .. } => {
                let key = key_of(nid);
                if self.converted_at.len() < self.capacity || self.converted_at.contains_key(&key) {
                    self.converted_at.insert(key, event.ts_ns);
                }
                None
            }
            Decoded::Restore { nid, .. } => self
                .converted_at
                .remove(&key_of(nid))
                .map(|at| event.ts_ns.saturating_sub(at)),
            Decoded::Reclaim { nid, queue } if queue.is_compressed() => {
                self.converted_at.remove(&key_of(nid));
                None
            }
            Decoded::RestoreFail { nid, .. } => {
                self.converted_at.remove(&key_of(nid));
                None
            }
            _ => None,
        }
    }

    /// Compressed entries whose conversion time is remembered.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.converted_at.len()
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{EventKind, QUEUE_256};

    use super::*;

    const MS: u64 = 1_000_000;

    /// An event on the compressed entry (`dev`, `nid`) in the 256-byte queue.
    fn event(kind: EventKind, dev: u32, nid: u32, ts_ms: u64) -> Event {
        Event::new(kind, ts_ms * MS)
            .dev(dev)
            .nid(nid)
            .queue(QUEUE_256)
    }

    /// `restored_after` the way the model calls it.
    fn account(ages: &mut ConversionAges, event: &Event) -> Option<u64> {
        ages.restored_after(event, &event.decode())
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
        .map(|e| account(&mut ages, e).is_some_and(|age| age < eager))
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
            account(&mut ages, &event(EventKind::Convert, 1, nid, 0));
        }
        assert_eq!(ages.tracked(), 2);
        let eager = |ages: &mut ConversionAges, nid| {
            account(ages, &event(EventKind::Restore, 1, nid, 10))
                .is_some_and(|age| age < 1_000 * MS)
        };
        assert!(eager(&mut ages, 1));
        assert!(!eager(&mut ages, 4), "never remembered");
    }
}
