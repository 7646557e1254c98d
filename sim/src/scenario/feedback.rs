//! The feedback counters a snapshot does not carry, derived from the events: what the
//! controlled runs and the live simulator report to a controller.
//!
//! A `Snapshot` has the cumulative counters (node reads, restores, conversions, reclaims per
//! queue) and the memory. What it lacks is derived here from the events, as a live source
//! would: **eager restores** (a restore of an entry converted less than max(2 x the interval,
//! the floor [`FeedbackTracker::new`] is given) before) and **refaults** (a demand read of a node the shrinker
//! had reclaimed).
//!
//! **Memory pressure** stands in for PSI memory `some` over the window (the share of the
//! window in which some task waited for memory, what PSI's `total` gives over an interval),
//! in percent, capped at 100. It adds two shares:
//! - refault stalls: each refault keeps its task waiting `costs::NODE_READ_NS`; Linux counts
//!   the refaults of a thrashing working set as memory stalls too;
//! - reclaim effort: entries the shrinker scanned per second over the cache's effective count.
//!   The simulator has no allocating tasks of its own, so how hard reclaim works stands in for
//!   the stalls of the allocations that drive it: priority 9 once a second (a phone's ambient
//!   kswapd) gives 0.4 %, priority 5 every 100 ms (a 1 GiB allocation) 62.5 %.
use tracer_common::{knobs::eager_span_with_floor_ns, Decoded, Event, SecondChanceBy};

use crate::costs;

/// Cumulative counters a [`Snapshot`] does not carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Feedback {
    /// Restores of entries converted less than 2 x node_compress_interval before.
    pub eager_restores: u64,
    /// Compressed entries reclaimed (never restored since their conversion).
    pub wasted: u64,
    /// Demand reads of nodes the shrinker had reclaimed.
    pub refaults: u64,
    /// Entries the shrinker scanned (reclaimed or given a second chance).
    pub shrinker_scanned: u64,
}

/// Derives [`Feedback`] and the memory pressure from the events, window by window.
#[derive(Debug, Default)]
pub struct FeedbackTracker {
    /// A restore within this long of the conversion is eager, whatever the interval.
    eager_floor_ns: u64,
    /// By nid: when it was converted, while it is compressed ([`NEVER`] otherwise).
    converted_at: Vec<u64>,
    /// By nid: reclaimed and not read back since.
    reclaimed: Vec<bool>,
    totals: Feedback,
    /// The totals when the current window began.
    window_start: Feedback,
}

/// `converted_at` of a nid that is not compressed.
const NEVER: u64 = u64::MAX;

/// The slot of `nid` in a per-nid table, grown on first use.
fn slot<T: Clone>(table: &mut Vec<T>, nid: u32, empty: T) -> &mut T {
    let index = nid as usize;
    if table.len() <= index {
        table.resize(index + 1, empty);
    }
    &mut table[index]
}

impl FeedbackTracker {
    /// Restores count as eager within max(2 x interval, `eager_floor_ns`) of the conversion.
    pub fn new(eager_floor_ns: u64) -> Self {
        FeedbackTracker {
            eager_floor_ns,
            ..FeedbackTracker::default()
        }
    }

    /// Account one event; `interval_ms` is the interval in force (for "eager").
    pub fn record(&mut self, event: &Event, interval_ms: u32) {
        match event.decode() {
            Decoded::Convert { nid, .. } => {
                *slot(&mut self.converted_at, nid, NEVER) = event.ts_ns;
            }
            Decoded::Restore { nid, .. } => {
                let at = std::mem::replace(slot(&mut self.converted_at, nid, NEVER), NEVER);
                let eager_ns = eager_span_with_floor_ns(interval_ms, self.eager_floor_ns);
                if at != NEVER && event.ts_ns.saturating_sub(at) < eager_ns {
                    self.totals.eager_restores += 1;
                }
            }
            Decoded::Reclaim { nid, queue } => {
                if queue.is_compressed() {
                    self.totals.wasted += 1;
                }
                self.totals.shrinker_scanned += 1;
                *slot(&mut self.converted_at, nid, NEVER) = NEVER;
                *slot(&mut self.reclaimed, nid, false) = true;
            }
            Decoded::SecondChance {
                by: Some(SecondChanceBy::Shrinker),
                ..
            } => self.totals.shrinker_scanned += 1,
            Decoded::RestoreFail { nid, .. } => *slot(&mut self.converted_at, nid, NEVER) = NEVER,
            Decoded::NodeRead {
                nid,
                readahead: false,
                ..
            } => self.demand_read(nid),
            _ => {}
        }
    }

    /// A demand read of a node the shrinker reclaimed is a refault (once).
    fn demand_read(&mut self, nid: u32) {
        if std::mem::take(slot(&mut self.reclaimed, nid, false)) {
            self.totals.refaults += 1;
        }
    }

    /// The cumulative feedback so far.
    pub fn totals(&self) -> Feedback {
        self.totals
    }

    /// Close a window of `window_ns` over a cache whose effective count is `shrink_count`:
    /// the cumulative feedback and the window's memory pressure.
    pub fn close_window(&mut self, window_ns: u64, shrink_count: u64) -> (Feedback, f64) {
        let start = std::mem::replace(&mut self.window_start, self.totals);
        (
            self.totals,
            pressure(&start, &self.totals, window_ns, shrink_count),
        )
    }
}

/// The memory pressure over a trailing window, from readings of the cumulative feedback taken
/// at any pace (the controlled runs' hand-overs, the live simulator's polls).
#[derive(Debug)]
pub struct TrailingPressure {
    window_ns: u64,
    /// (time, cumulative feedback) of the readings in the last window, oldest first.
    recent: std::collections::VecDeque<(u64, Feedback)>,
}

impl TrailingPressure {
    pub fn new(window_ns: u64) -> Self {
        TrailingPressure {
            window_ns,
            recent: [(0, Feedback::default())].into(),
        }
    }

    /// Take a reading at `now_ns`; the pressure since the reading a window back (or since the
    /// first one), over a cache whose effective count is `shrink_count`.
    pub fn update(&mut self, now_ns: u64, totals: Feedback, shrink_count: u64) -> f64 {
        let since = now_ns.saturating_sub(self.window_ns);
        while self.recent.len() > 1 && self.recent[1].0 <= since {
            self.recent.pop_front();
        }
        let (then, start) = self.recent.front().copied().unwrap_or_default();
        self.recent.push_back((now_ns, totals));
        pressure(&start, &totals, now_ns.saturating_sub(then), shrink_count)
    }
}

/// Refault stall share plus reclaim effort share, percent (see the module notes).
fn pressure(start: &Feedback, end: &Feedback, window_ns: u64, shrink_count: u64) -> f64 {
    if window_ns == 0 {
        return 0.0;
    }
    let refaults = end.refaults - start.refaults;
    let stall = (refaults * costs::NODE_READ_NS) as f64 / window_ns as f64;
    let scanned = (end.shrinker_scanned - start.shrinker_scanned) as f64;
    let effort = scanned / shrink_count.max(1) as f64 / (window_ns as f64 / 1e9);
    ((stall + effort) * 100.0).min(100.0)
}

#[cfg(test)]
mod tests {
    use tracer_common::{
        EventKind, QUEUE_256, QUEUE_RAW, SECOND_CHANCE_BY_SHRINKER, SECOND_CHANCE_BY_WORKER,
    };

    use super::*;

    const MS: u64 = 1_000_000;

    fn event(kind: EventKind, nid: u32, ts_ms: u64) -> Event {
        Event::new(kind, ts_ms * MS).nid(nid)
    }

    #[test]
    fn eager_restores_follow_the_interval_or_the_floor() {
        // Interval 1000 ms: eager means restored within 2 s of the conversion.
        let mut tracker = FeedbackTracker::new(0);
        for e in [
            event(EventKind::Convert, 1, 0),
            event(EventKind::Convert, 2, 0),
            event(EventKind::Restore, 1, 1_999),
            event(EventKind::Restore, 2, 2_000),
            // Restored twice: only the first restore follows a conversion.
            event(EventKind::Restore, 1, 2_100),
        ] {
            tracker.record(&e, 1000);
        }
        assert_eq!(tracker.close_window(3_000 * MS, 1).0.eager_restores, 1);

        // Interval 100 ms, floor 3 s: a restore 2.5 s after the conversion is eager.
        let mut tracker = FeedbackTracker::new(3_000 * MS);
        tracker.record(&event(EventKind::Convert, 7, 0), 100);
        tracker.record(&event(EventKind::Restore, 7, 2_500), 100);
        assert_eq!(tracker.close_window(3_000 * MS, 1).0.eager_restores, 1);
    }

    #[test]
    fn wasted_refaults_and_pressure_per_window() {
        let mut tracker = FeedbackTracker::default();
        let mut second_chance = event(EventKind::SecondChance, 9, 5);
        second_chance.reason = SECOND_CHANCE_BY_SHRINKER;
        let mut by_worker = second_chance;
        by_worker.reason = SECOND_CHANCE_BY_WORKER;
        let readahead = event(EventKind::NodeRead, 4, 30).flags(tracer_common::FLAG_READAHEAD);
        for e in [
            event(EventKind::Convert, 3, 0),
            event(EventKind::Reclaim, 3, 10).queue(QUEUE_256),
            event(EventKind::Reclaim, 4, 11).queue(QUEUE_RAW),
            event(EventKind::Reclaim, 5, 12).queue(QUEUE_RAW),
            second_chance,
            by_worker,
            event(EventKind::NodeRead, 3, 20),
            event(EventKind::NodeRead, 3, 21),
            readahead,
            event(EventKind::NodeRead, 6, 40),
        ] {
            tracker.record(&e, 1000);
        }
        // Window of 100 ms over an effective count of 40 entries: 4 scanned (3 reclaims, one
        // shrinker second chance) is 10 % of the cache in 0.1 s, 100 % a second: capped.
        let (feedback, pressure) = tracker.close_window(100 * MS, 40);
        assert_eq!(
            feedback,
            Feedback {
                eager_restores: 0,
                wasted: 1,
                refaults: 1,
                shrinker_scanned: 4,
            }
        );
        assert_eq!(pressure, 100.0);

        // Next window, 1 s, count 1000: one refault (90 us, 0.009 %) and 5 scanned (0.5 %).
        tracker.record(&event(EventKind::NodeRead, 5, 1_000), 1000);
        for nid in 10..15 {
            tracker.record(
                &event(EventKind::Reclaim, nid, 1_050).queue(QUEUE_RAW),
                1000,
            );
        }
        let (feedback, pressure) = tracker.close_window(1_000 * MS, 1000);
        assert_eq!(feedback.refaults, 2);
        assert_eq!(feedback.shrinker_scanned, 9);
        assert!((pressure - 0.509).abs() < 1e-9, "{pressure}");
    }
}
