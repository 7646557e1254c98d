//! The per-app table, kept as events arrive: each app's live process count, its totals (live
//! and retired processes alike: app totals never go down, metrics are counters) and its
//! recent windows. A snapshot or a scrape then costs one row per app, not a pass over every
//! process (10,000 at most: summing them four times a second was a fifth of a daemon's CPU).
//!
//! Bounded like the process table: past `max_apps` apps, an app whose last process retires
//! is folded into `(other)`, and its slot is reused.
use tracer_common::Decoded;

use super::{
    apps::AppKey,
    fast_hash::FastMap,
    rows::{OtherApps, WindowCounts},
    AppRow, Counters,
};

#[derive(Debug, Default)]
pub(super) struct AppTallies {
    slots: Vec<Option<Tally>>,
    index: FastMap<AppKey, usize>,
    free: Vec<usize>,
}

#[derive(Debug)]
struct Tally {
    key: AppKey,
    live: u32,
    total: Counters,
    window: WindowCounts,
}

impl AppTallies {
    /// The slot of `key`'s app, counting one more live process in it.
    pub(super) fn join(&mut self, key: &AppKey, window: u64) -> usize {
        let slot = match self.index.get(key) {
            Some(&slot) => slot,
            None => self.insert(key.clone(), window),
        };
        self.tally(slot).live += 1;
        slot
    }

    pub(super) fn record(&mut self, slot: usize, decoded: &Decoded, window: u64) {
        let tally = self.tally(slot);
        tally.total.record(decoded);
        tally.window.record(decoded, window);
    }

    /// One of the app's processes retired; its counts stay in the app's totals.
    pub(super) fn leave(&mut self, slot: usize, max_apps: usize) {
        let apps = self.index.len();
        let tally = self.tally(slot);
        tally.live = tally.live.saturating_sub(1);
        let other = AppKey::Program("(other)".into());
        if tally.live > 0 || apps <= max_apps || tally.key == other {
            return;
        }
        let Some(folded) = self.slots[slot].take() else {
            return;
        };
        self.index.remove(&folded.key);
        self.free.push(slot);
        let into = match self.index.get(&other) {
            Some(&into) => into,
            None => self.insert(other, folded.window.index()),
        };
        self.tally(into).total.add(&folded.total);
    }

    /// One row per app: live processes, totals, and the counters of window `last` (the last
    /// closed one).
    pub(super) fn rows(&self, last: Option<u64>) -> Vec<AppRow> {
        self.slots
            .iter()
            .flatten()
            .map(|tally| AppRow {
                app: tally.key.clone(),
                processes: tally.live,
                total: tally.total,
                last_window: last.map_or_else(Counters::default, |last| tally.window.at(last)),
            })
            .collect()
    }

    /// The `keep` apps that rank highest by `rank` (of the app's totals and its counters of
    /// window `last`; ties by name), ordered so, and the rest summed. Only the kept apps are
    /// copied out, so a snapshot or a scrape at 10,000 apps costs one pass and `keep` rows.
    /// The model's own `(other)` (apps folded when the table was full) is always in the rest.
    pub(super) fn top(
        &self,
        last: Option<u64>,
        keep: usize,
        rank: fn(&Counters, &Counters) -> (u64, u64),
    ) -> (Vec<AppRow>, Option<OtherApps>) {
        let other = AppKey::Program("(other)".into());
        fn last_ref(tally: &Tally, last: Option<u64>) -> Option<&Counters> {
            last.and_then(|last| tally.window.at_ref(last))
        }
        let last_of = |tally: &Tally| last_ref(tally, last).copied().unwrap_or_default();
        let zero = Counters::default();
        let mut ranked: Vec<((u64, u64), &Tally)> = Vec::new();
        let mut rest = OtherApps::default();
        for tally in self.slots.iter().flatten() {
            if tally.key == other {
                rest.lump(tally.live, &tally.total, last_ref(tally, last));
            } else {
                let ranking = rank(&tally.total, last_ref(tally, last).unwrap_or(&zero));
                ranked.push((ranking, tally));
            }
        }
        let order = |a: &((u64, u64), &Tally), b: &((u64, u64), &Tally)| {
            b.0.cmp(&a.0).then_with(|| a.1.key.cmp(&b.1.key))
        };
        if ranked.len() > keep {
            if keep > 0 {
                ranked.select_nth_unstable_by(keep - 1, order);
            }
            for (_, tally) in ranked.drain(keep..) {
                rest.lump(tally.live, &tally.total, last_ref(tally, last));
            }
        }
        ranked.sort_unstable_by(order);
        let rows = ranked
            .into_iter()
            .map(|(_, tally)| AppRow {
                app: tally.key.clone(),
                processes: tally.live,
                total: tally.total,
                last_window: last_of(tally),
            })
            .collect();
        (rows, (rest.apps > 0).then_some(rest))
    }

    fn insert(&mut self, key: AppKey, window: u64) -> usize {
        let tally = Tally {
            key: key.clone(),
            live: 0,
            total: Counters::default(),
            window: WindowCounts::new(window),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(tally);
                slot
            }
            None => {
                self.slots.push(Some(tally));
                self.slots.len() - 1
            }
        };
        self.index.insert(key, slot);
        slot
    }

    fn tally(&mut self, slot: usize) -> &mut Tally {
        self.slots[slot]
            .as_mut()
            .expect("a live process's app slot is never folded")
    }
}
