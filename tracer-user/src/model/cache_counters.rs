//! The mechanism's own counters (`Counter` events, `source::bpf::cache_counters`): exact totals
//! for the kinds no event tells one by one, and the cache's entries per queue. A counter's first
//! reading is its baseline; what it counted since then, per window and since the start, takes
//! the place of the events' count of its kind, device by device summed. Per-process and per-app
//! rows stay the events' own: a total is never split across apps.
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use tracer_common::{
    activity::{Counters, PerQueue, PerReason},
    CounterReading, EventKind, Measure, Queue, QUEUE_COUNT, RESTORE_FAIL_REASONS,
    SECOND_CHANCE_REASONS,
};

use super::{CacheGauges, ENTRY_BYTES, MAX_DEVICES};

/// One counter of one device.
type Key = (u32, Measure, Option<u8>);

#[derive(Clone, Copy, Debug)]
struct Reading {
    /// The time of the newest reading taken in.
    ts_ns: u64,
    /// The newest value.
    last: u64,
    /// What the counter counted since its first reading (the baseline), across resets.
    since_start: u64,
    /// What it counted in the open window.
    in_window: u64,
}

/// What the counters say, per window and since the start.
#[derive(Debug, Default)]
pub(crate) struct CounterTally {
    readings: BTreeMap<Key, Reading>,
    devices: BTreeSet<u32>,
}

/// The kinds the counters counted (each kind's total, and its parts), for a window or since
/// the start; and the entries per queue at the end of the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterTotals {
    /// Events per kind, by kind name.
    pub kinds: BTreeMap<&'static str, u64>,
    /// Entries per queue now, when the counters keep them.
    pub entries: Option<PerQueue>,
}

/// The kinds a mechanism's counters can count (`source::bpf::cache_counters`' rules).
const COUNTED_KINDS: [EventKind; 10] = [
    EventKind::Convert,
    EventKind::ConvertReject,
    EventKind::ConvertAbort,
    EventKind::Restore,
    EventKind::RestoreNomem,
    EventKind::RestoreFail,
    EventKind::Insert,
    EventKind::Forget,
    EventKind::Reclaim,
    EventKind::SecondChance,
];

/// Whether a real counters file could have given this reading: a kind its rules name, kept
/// per a queue or reason that measure has (or as a total). Anything else is a crafted
/// recording's, and left out: the tally's keys stay a few dozen per device.
fn is_known(reading: &CounterReading) -> bool {
    let queue = |sub: Option<u8>| sub.is_some_and(|q| usize::from(q) < QUEUE_COUNT);
    let reason = |sub: Option<u8>, reasons: &[(u8, &str)]| {
        sub.is_none_or(|code| reasons.iter().any(|(c, _)| *c == code))
    };
    match reading.measure {
        Measure::Entries => queue(reading.sub),
        Measure::RestoreNs => reading.sub.is_none(),
        Measure::Events(EventKind::Reclaim) => reading.sub.is_none() || queue(reading.sub),
        Measure::Events(EventKind::RestoreFail) => reason(reading.sub, &RESTORE_FAIL_REASONS),
        Measure::Events(EventKind::SecondChance) => reason(reading.sub, &SECOND_CHANCE_REASONS),
        Measure::Events(kind) => COUNTED_KINDS.contains(&kind) && reading.sub.is_none(),
    }
}

impl CounterTally {
    /// One reading taken at `ts_ns`. The first of a counter is its baseline. A counter only
    /// grows, so a lower value is the counter started again (the device mounted again, or a
    /// wrap): what it shows then was counted since. A reading older than one already taken in
    /// is stale news and left out, so the order readings arrive in cannot change a count.
    pub(crate) fn observe(&mut self, dev: u32, ts_ns: u64, reading: &CounterReading) {
        if !is_known(reading) {
            return;
        }
        let key = (dev, reading.measure, reading.sub);
        let Some(entry) = self.readings.get_mut(&key) else {
            // A crafted recording could name a device per event: the counters of devices
            // past MAX_DEVICES are left out (a phone has one or two), so the tally stays
            // bounded.
            if !self.devices.contains(&dev) {
                if self.devices.len() >= MAX_DEVICES {
                    return;
                }
                self.devices.insert(dev);
            }
            self.readings.insert(
                key,
                Reading {
                    ts_ns,
                    last: reading.value,
                    since_start: 0,
                    in_window: 0,
                },
            );
            return;
        };
        if ts_ns < entry.ts_ns {
            return;
        }
        let counted = match reading.value.checked_sub(entry.last) {
            Some(grown) => grown,
            None => reading.value,
        };
        entry.since_start = entry.since_start.saturating_add(counted);
        entry.in_window = entry.in_window.saturating_add(counted);
        entry.last = reading.value;
        entry.ts_ns = ts_ns;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }

    /// Start a new window: what the counters counted so far belongs to the closed one.
    pub(crate) fn close_window(&mut self) {
        for reading in self.readings.values_mut() {
            reading.in_window = 0;
        }
    }

    /// Sum over devices of `of(reading)` for one measure and part.
    fn sum(&self, measure: Measure, sub: Option<u8>, of: impl Fn(&Reading) -> u64) -> Option<u64> {
        let mut found = false;
        let mut total = 0;
        for ((_, m, s), reading) in &self.readings {
            if *m == measure && *s == sub {
                found = true;
                total = u64::saturating_add(total, of(reading));
            }
        }
        found.then_some(total)
    }

    /// Whether any counter measures `measure`.
    fn has(&self, measure: Measure) -> bool {
        self.readings.keys().any(|(_, m, _)| *m == measure)
    }

    fn parts(&self, measure: Measure) -> Vec<Option<u8>> {
        let mut parts: Vec<Option<u8>> = self
            .readings
            .keys()
            .filter(|(_, m, _)| *m == measure)
            .map(|(_, _, s)| *s)
            .collect();
        parts.sort();
        parts.dedup();
        parts
    }

    /// Put the counters' counts in place of the events' in `counters`: the window's
    /// (`since_start` false) or everything since the baseline.
    pub(crate) fn overlay(&self, counters: &mut Counters, since_start: bool) {
        let counted = |r: &Reading| {
            if since_start {
                r.since_start
            } else {
                r.in_window
            }
        };
        let total = |kind: EventKind| -> Option<u64> {
            let measure = Measure::Events(kind);
            self.has(measure).then(|| {
                self.parts(measure)
                    .into_iter()
                    .filter_map(|sub| self.sum(measure, sub, counted))
                    .fold(0, u64::saturating_add)
            })
        };
        let set = |field: &mut u64, kind: EventKind| {
            if let Some(count) = total(kind) {
                *field = count;
            }
        };
        set(&mut counters.conversions, EventKind::Convert);
        set(&mut counters.convert_rejects, EventKind::ConvertReject);
        set(&mut counters.convert_aborts, EventKind::ConvertAbort);
        set(&mut counters.restores, EventKind::Restore);
        set(&mut counters.restore_nomem, EventKind::RestoreNomem);
        set(&mut counters.inserts, EventKind::Insert);
        set(&mut counters.forgets, EventKind::Forget);
        let restore_fail = Measure::Events(EventKind::RestoreFail);
        if let Some(count) = total(EventKind::RestoreFail) {
            counters.restore_fails = count;
            counters.restore_fail_reasons = self.per_reason(restore_fail, counted);
        }
        let reclaim = Measure::Events(EventKind::Reclaim);
        if self.has(reclaim) {
            let mut queues = PerQueue::default();
            for queue in Queue::ALL {
                *queues.get_mut(queue) =
                    self.sum(reclaim, Some(queue.code()), counted).unwrap_or(0);
            }
            // A total kept for no queue: its queue is not known, the total must still hold.
            queues.raw = queues
                .raw
                .saturating_add(self.sum(reclaim, None, counted).unwrap_or(0));
            counters.reclaims = queues;
        }
        let chance = Measure::Events(EventKind::SecondChance);
        if let Some(count) = total(EventKind::SecondChance) {
            counters.second_chance_reasons = self.per_reason(chance, counted);
            // The counters keep second chances by who gave them, not by queue: the events'
            // compressed queues stay (while they fit the total), the rest is shown as raw.
            let compressed = counters.second_chances.compressed();
            counters.second_chances = if compressed <= count {
                PerQueue {
                    raw: count - compressed,
                    ..counters.second_chances
                }
            } else {
                PerQueue {
                    raw: count,
                    ..PerQueue::default()
                }
            };
        }
    }

    fn per_reason(&self, measure: Measure, counted: impl Fn(&Reading) -> u64) -> PerReason {
        let mut reasons = PerReason::default();
        for sub in self.parts(measure) {
            let count = self.sum(measure, sub, &counted).unwrap_or(0);
            let index = sub.map_or(0, usize::from);
            let slot = match reasons.0.get_mut(index) {
                Some(slot) => slot,
                None => &mut reasons.0[0],
            };
            *slot = slot.saturating_add(count);
        }
        reasons
    }

    /// The cache's entries per queue as the counters keep them (all four queues), now.
    pub(crate) fn entries(&self) -> Option<PerQueue> {
        let mut queues = PerQueue::default();
        let mut found = 0;
        for queue in Queue::ALL {
            if let Some(count) = self.sum(Measure::Entries, Some(queue.code()), |r| r.last) {
                *queues.get_mut(queue) = count;
                found += 1;
            }
        }
        (found == QUEUE_COUNT).then_some(queues)
    }

    /// The gauges from the counters' entries: exact whatever the events saw.
    pub(crate) fn gauges(&self) -> Option<CacheGauges> {
        let entries = self.entries()?;
        // Saturating: a crafted recording's counter may hold any value.
        let bytes = |queue: Queue| {
            entries
                .get(queue)
                .saturating_mul(u64::from(queue.slot_bytes()))
        };
        let raw_bytes = bytes(Queue::Raw);
        let compressed_bytes = Queue::COMPRESSED
            .iter()
            .map(|&q| bytes(q))
            .fold(0, u64::saturating_add);
        let count = entries.to_array().into_iter().fold(0, u64::saturating_add);
        Some(CacheGauges {
            raw_entries: entries.raw,
            slots: PerQueue { raw: 0, ..entries },
            raw_bytes,
            compressed_bytes,
            attributed_bytes: count
                .saturating_mul(ENTRY_BYTES)
                .saturating_add(raw_bytes)
                .saturating_add(compressed_bytes),
            partial: false,
        })
    }

    /// The kinds counted, per kind name, for the window or since the start.
    pub(crate) fn totals(&self, since_start: bool) -> CounterTotals {
        let mut kinds = BTreeMap::new();
        for (_, measure, _) in self.readings.keys() {
            if let Measure::Events(kind) = measure {
                kinds.entry(kind.name()).or_insert(0);
            }
        }
        let counted = |r: &Reading| {
            if since_start {
                r.since_start
            } else {
                r.in_window
            }
        };
        for ((_, measure, _), reading) in &self.readings {
            if let Measure::Events(kind) = measure {
                let total = kinds.entry(kind.name()).or_insert(0);
                *total = u64::saturating_add(*total, counted(reading));
            }
        }
        CounterTotals {
            kinds,
            entries: self.entries(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{Decoded, Event, QUEUE_256, QUEUE_RAW, RESTORE_FAIL_CRC};

    use super::*;

    fn observe(tally: &mut CounterTally, dev: u32, measure: Measure, sub: Option<u8>, value: u64) {
        let ts = tally.readings.values().map(|r| r.ts_ns).max().unwrap_or(0) + 1;
        observe_at(tally, ts, dev, measure, sub, value);
    }

    fn observe_at(
        tally: &mut CounterTally,
        ts: u64,
        dev: u32,
        measure: Measure,
        sub: Option<u8>,
        value: u64,
    ) {
        let Decoded::Counter(reading) = Event::counter(ts, dev, measure, sub, value).decode()
        else {
            panic!("not a counter");
        };
        tally.observe(dev, ts, &reading);
    }

    #[test]
    fn counts_run_from_the_first_reading_per_window_and_since_the_start() {
        let mut tally = CounterTally::default();
        let convert = Measure::Events(EventKind::Convert);
        observe(&mut tally, 1, convert, None, 100);
        observe(&mut tally, 2, convert, None, 7);
        observe(&mut tally, 1, convert, None, 130);
        let mut window = Counters::default();
        tally.overlay(&mut window, false);
        assert_eq!(window.conversions, 30);
        tally.close_window();
        observe(&mut tally, 2, convert, None, 12);
        let mut window = Counters::default();
        tally.overlay(&mut window, false);
        assert_eq!(window.conversions, 5);
        let mut all = Counters::default();
        tally.overlay(&mut all, true);
        assert_eq!(all.conversions, 35);
        assert_eq!(tally.totals(true).kinds["convert"], 35);
    }

    #[test]
    fn a_crafted_recording_cannot_grow_the_tally_or_overflow_it() {
        let mut tally = CounterTally::default();
        let convert = Measure::Events(EventKind::Convert);
        for dev in 0..10_000 {
            observe(&mut tally, dev, convert, None, 0);
            observe(&mut tally, dev, convert, None, u64::MAX);
        }
        assert_eq!(tally.readings.len(), MAX_DEVICES);
        let mut all = Counters::default();
        tally.overlay(&mut all, true);
        assert_eq!(all.conversions, u64::MAX);
        for queue in 0..4u8 {
            observe(&mut tally, 1, Measure::Entries, Some(queue), u64::MAX);
        }
        assert_eq!(tally.gauges().unwrap().attributed_bytes, u64::MAX);
        assert_eq!(tally.totals(true).kinds["convert"], u64::MAX);
    }

    #[test]
    fn parts_make_the_totals_and_entries_make_the_gauges() {
        let mut tally = CounterTally::default();
        let fail = Measure::Events(EventKind::RestoreFail);
        let reclaim = Measure::Events(EventKind::Reclaim);
        observe(&mut tally, 1, fail, Some(RESTORE_FAIL_CRC), 0);
        observe(&mut tally, 1, fail, Some(RESTORE_FAIL_CRC), 2);
        observe(&mut tally, 1, reclaim, Some(QUEUE_RAW), 0);
        observe(&mut tally, 1, reclaim, Some(QUEUE_256), 0);
        observe(&mut tally, 1, reclaim, Some(QUEUE_256), 3);
        let mut all = Counters::default();
        tally.overlay(&mut all, true);
        assert_eq!(all.restore_fails, 2);
        assert_eq!(all.restore_fail_reasons.get(RESTORE_FAIL_CRC), 2);
        assert_eq!(all.reclaims.b256, 3);
        assert_eq!(
            all.restores, 0,
            "no restore counter: the events' count stays"
        );
        assert!(tally.gauges().is_none(), "no entries counters");
        for (queue, count) in [(0u8, 4u64), (1, 5), (2, 0), (3, 1)] {
            observe(&mut tally, 1, Measure::Entries, Some(queue), count);
        }
        let gauges = tally.gauges().unwrap();
        assert_eq!(
            (gauges.raw_entries, gauges.slots.b256, gauges.slots.b1024),
            (4, 5, 1)
        );
        assert_eq!(
            gauges.attributed_bytes,
            10 * ENTRY_BYTES + 4 * 4096 + 5 * 256 + 1024
        );
    }

    /// Issue 63: a remount starts the counter again, and a crafted one may wrap: what was
    /// counted stays, and what the new one shows is counted on top.
    #[test]
    fn a_counter_that_starts_again_keeps_what_was_counted() {
        let mut tally = CounterTally::default();
        let insert = Measure::Events(EventKind::Insert);
        for value in [1000, 5000, 10, 20] {
            observe(&mut tally, 1, insert, None, value);
        }
        assert_eq!(tally.totals(true).kinds["insert"], 4000 + 10 + 10);
        let mut tally = CounterTally::default();
        for value in [u64::MAX - 5, u64::MAX - 1, 3] {
            observe(&mut tally, 1, insert, None, value);
        }
        assert_eq!(tally.totals(true).kinds["insert"], 4 + 3);
    }

    /// Issue 63: near-2^64 parts and totals saturate instead of wrapping (or panicking in a
    /// debug build).
    #[test]
    fn parts_near_the_top_saturate() {
        let mut tally = CounterTally::default();
        let fail = Measure::Events(EventKind::RestoreFail);
        for sub in [Some(RESTORE_FAIL_CRC), Some(1), None] {
            observe(&mut tally, 1, fail, sub, 0);
            observe(&mut tally, 1, fail, sub, u64::MAX - 1);
        }
        let mut all = Counters::default();
        tally.overlay(&mut all, true);
        assert_eq!(all.restore_fails, u64::MAX);
        assert_eq!(all.restore_fail_reasons.get(RESTORE_FAIL_CRC), u64::MAX - 1);
        assert_eq!(all.restore_fail_reasons.0[0], u64::MAX - 1);
    }

    /// Issue 63: readings that reach the tally out of their order (a stale one after a newer
    /// one, as a cancelled read once delivered the first readings) count nothing twice.
    #[test]
    fn a_stale_reading_after_a_newer_one_changes_no_count() {
        let mut tally = CounterTally::default();
        let insert = Measure::Events(EventKind::Insert);
        observe_at(&mut tally, 10, 1, insert, None, 4196);
        observe_at(&mut tally, 30, 1, insert, None, 8392);
        observe_at(&mut tally, 20, 1, insert, None, 6000);
        observe_at(&mut tally, 40, 1, insert, None, 9000);
        assert_eq!(tally.totals(true).kinds["insert"], 9000 - 4196);
    }

    /// Issue 63: a recording naming thousands of counters per device kept `report` busy for
    /// minutes; only what a real counters file can hold is taken in.
    #[test]
    fn only_counters_a_real_file_can_hold_are_kept() {
        let mut tally = CounterTally::default();
        for dev in 0..4 {
            for measure in 0..=255u8 {
                let Some(measure) = Measure::from_code(measure) else {
                    continue;
                };
                for sub in (0..=254u8).map(Some).chain([None]) {
                    observe(&mut tally, dev, measure, sub, 7);
                }
            }
        }
        // Per device: 4 entries queues, restore_ns, reclaim (total + 4 queues), restore_fail
        // (total + 7 reasons), second_chance (total + 3 reasons), 7 other kinds.
        let per_device = 4 + 1 + 5 + 8 + 4 + 7;
        assert_eq!(tally.readings.len(), 4 * per_device);
    }
}
