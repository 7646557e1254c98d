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

/// Nids below this of the first device converted are kept in a table indexed by nid (8 bytes
/// each, grown to the largest nid seen: at most 8 MiB), the rest in a hash map. Every event of
/// the node cache passes here; at 100,000 events/s the hash map's inserts and removes were a
/// tenth of the daemon's CPU (`cargo xtask bench daemon`, issue 53).
const DENSE_NIDS: u32 = 1 << 20;
/// A free slot of the table.
const NONE: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct ConversionAges {
    /// The device whose nids the table holds: the first one converted.
    dense_dev: Option<u32>,
    /// Conversion time by nid, [`NONE`] where none is remembered.
    dense: Vec<u64>,
    /// Slots of `dense` in use.
    dense_used: usize,
    converted_at: Ages,
    capacity: usize,
}

impl ConversionAges {
    pub(crate) fn new(capacity: usize) -> Self {
        ConversionAges {
            dense_dev: None,
            dense: Vec::new(),
            dense_used: 0,
            converted_at: Ages::default(),
            capacity,
        }
    }

    /// Account one event (`decoded` is its `Event::decode`); for a restore of an entry whose
    /// conversion is remembered, how long after the conversion it came (ns).
    pub(crate) fn restored_after(&mut self, event: &Event, decoded: &Decoded) -> Option<u64> {
        match *decoded {
            Decoded::Convert { nid, .. } => {
                self.converted(event.dev, nid, event.ts_ns);
                None
            }
            Decoded::Restore { nid, .. } => self
                .forget(event.dev, nid)
                .map(|at| event.ts_ns.saturating_sub(at)),
            Decoded::Reclaim { nid, queue } if queue.is_compressed() => {
                self.forget(event.dev, nid);
                None
            }
            Decoded::RestoreFail { nid, .. } => {
                self.forget(event.dev, nid);
                None
            }
            _ => None,
        }
    }

    /// Remember (`dev`, `nid`)'s conversion at `at`, unless full and it is a new one.
    fn converted(&mut self, dev: u32, nid: u32, at: u64) {
        let room = self.tracked() < self.capacity;
        if self.dense_dev.is_none() && nid < DENSE_NIDS {
            self.dense_dev = Some(dev);
        }
        if self.dense_dev == Some(dev) && nid < DENSE_NIDS {
            let index = nid as usize;
            if index >= self.dense.len() {
                if !room {
                    return;
                }
                let len = (index + 1).next_power_of_two().min(DENSE_NIDS as usize);
                self.dense.resize(len, NONE);
            }
            let slot = &mut self.dense[index];
            if *slot == NONE {
                if !room {
                    return;
                }
                self.dense_used += 1;
            }
            *slot = at;
            return;
        }
        let key = key_of(dev, nid);
        if room || self.converted_at.contains_key(&key) {
            self.converted_at.insert(key, at);
        }
    }

    /// Forget (`dev`, `nid`): its conversion time, if remembered.
    fn forget(&mut self, dev: u32, nid: u32) -> Option<u64> {
        if self.dense_dev == Some(dev) && nid < DENSE_NIDS {
            let slot = self.dense.get_mut(nid as usize)?;
            if *slot == NONE {
                return None;
            }
            self.dense_used -= 1;
            return Some(std::mem::replace(slot, NONE));
        }
        self.converted_at.remove(&key_of(dev, nid))
    }

    /// Compressed entries whose conversion time is remembered.
    fn tracked(&self) -> usize {
        self.dense_used + self.converted_at.len()
    }
}

fn key_of(dev: u32, nid: u32) -> u64 {
    (u64::from(dev) << 32) | u64::from(nid)
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

    /// Nids past the table's reach, and other devices, are remembered in the map alike; the
    /// capacity counts both.
    #[test]
    fn large_nids_and_other_devices_share_the_capacity() {
        let mut ages = ConversionAges::new(3);
        let big = DENSE_NIDS + 5;
        for (dev, nid) in [(1, 3), (1, big), (2, 3), (1, 4)] {
            account(&mut ages, &event(EventKind::Convert, dev, nid, 0));
        }
        assert_eq!(ages.tracked(), 3, "the fourth conversion found no room");
        let after = |ages: &mut ConversionAges, dev, nid| {
            account(ages, &event(EventKind::Restore, dev, nid, 7))
        };
        assert_eq!(after(&mut ages, 1, big), Some(7 * MS));
        assert_eq!(after(&mut ages, 2, 3), Some(7 * MS));
        assert_eq!(after(&mut ages, 1, 3), Some(7 * MS));
        assert_eq!(after(&mut ages, 1, 4), None, "never remembered");
        assert_eq!(after(&mut ages, 1, 3), None, "forgotten at its restore");
        assert_eq!(ages.tracked(), 0);
    }
}
