//! The per-CPU counter slots (`COUNT_SLOTS`, tracer-common's `SlotTable`), read from
//! userspace: which task holds each slot on each CPU, what it has counted there, and when a
//! slot may change hands.
//!
//! A program writes only its own CPU's slots; a slot changes hands only once userspace has
//! read its final counts (its task exited: nothing can add to them) and handed it back in
//! `SLOT_GRANTS`. So a task's counts in a slot only grow while it holds it, and a reading can
//! be wrong only while a program is claiming the slot (key, counts and occupancy number are
//! several words): a slot whose occupancy number changed is believed only when a second
//! reading, made at once, agrees with the first.
use std::collections::BTreeSet;

use tracer_common::{SlotTable, TaskCounts, TaskKey, COUNT_SLOTS};

use super::counters::merge;

/// What userspace knows of one slot on one CPU.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// The occupancy number read last (0: never used).
    gen: u64,
    key: TaskKey,
    counts: TaskCounts,
    /// Its task exited and its final counts were taken: handed back, never reported again.
    retired: bool,
}

/// Userspace's view of every CPU's slots, updated from readings of the map.
#[derive(Default)]
pub(crate) struct SlotTracker {
    cpus: Vec<Vec<Seen>>,
}

impl SlotTracker {
    /// Take in a reading (one table per CPU). `again` makes a second reading; it is called only
    /// when some slot changed hands, to confirm what the first one saw there.
    pub(crate) fn observe<E>(
        &mut self,
        first: &[SlotTable],
        again: impl FnOnce() -> Result<Vec<SlotTable>, E>,
    ) -> Result<(), E> {
        self.fit(first.len());
        let changed = first.iter().enumerate().any(|(cpu, table)| {
            table
                .slots
                .iter()
                .zip(&self.cpus[cpu])
                .any(|(slot, seen)| slot.gen != seen.gen)
        });
        let second = if changed { Some(again()?) } else { None };
        for (cpu, table) in first.iter().enumerate() {
            for (index, slot) in table.slots.iter().enumerate() {
                let seen = &mut self.cpus[cpu][index];
                if slot.gen == 0 || seen.retired && slot.gen == seen.gen {
                    continue;
                }
                if slot.gen == seen.gen {
                    grow(&mut seen.counts, &slot.counts);
                    continue;
                }
                let confirmed = second
                    .as_ref()
                    .and_then(|tables| tables.get(cpu))
                    .map(|table| &table.slots[index])
                    .filter(|again| {
                        again.gen == slot.gen
                            && again.key == slot.key
                            && not_less(&again.counts, &slot.counts)
                    });
                let Some(again) = confirmed else {
                    continue;
                };
                if seen.gen != 0 && !seen.retired {
                    log::warn!(
                        "counter slot {index} on CPU {cpu} changed hands without being handed \
                         back (tgid {} -> {}): counts after the last reading are lost",
                        seen.key.tgid,
                        again.key.tgid
                    );
                }
                *seen = Seen {
                    gen: again.gen,
                    key: again.key,
                    counts: again.counts,
                    retired: false,
                };
            }
        }
        Ok(())
    }

    /// The counts of every slot held by a live task (or one not yet retired), per CPU.
    pub(crate) fn live(&self) -> impl Iterator<Item = (TaskKey, TaskCounts)> + '_ {
        self.cpus
            .iter()
            .flatten()
            .filter(|seen| seen.gen != 0 && !seen.retired)
            .map(|seen| (seen.key, seen.counts))
    }

    /// The final counts of the slots whose task's thread group has exited, from `tables` (a
    /// reading made after the exits were seen: those slots can no longer change), summed per
    /// key; the slots become retired. Also returns the slot indexes whose grants changed
    /// (write them with [`SlotTracker::grants`]).
    pub(crate) fn retire(
        &mut self,
        tables: &[SlotTable],
        exited: &BTreeSet<u32>,
    ) -> (Vec<(TaskKey, TaskCounts)>, BTreeSet<usize>) {
        self.fit(tables.len());
        let mut finals: Vec<(TaskKey, TaskCounts)> = Vec::new();
        let mut changed = BTreeSet::new();
        for (cpu, table) in tables.iter().enumerate() {
            for (index, slot) in table.slots.iter().enumerate() {
                let seen = &mut self.cpus[cpu][index];
                if slot.gen == 0
                    || !exited.contains(&slot.key.tgid)
                    || seen.retired && seen.gen == slot.gen
                {
                    continue;
                }
                match finals.iter_mut().find(|(key, _)| *key == slot.key) {
                    Some((_, total)) => merge(total, &slot.counts),
                    None => finals.push((slot.key, slot.counts)),
                }
                *seen = Seen {
                    gen: slot.gen,
                    key: slot.key,
                    counts: slot.counts,
                    retired: true,
                };
                changed.insert(index);
            }
        }
        (finals, changed)
    }

    /// Slot `index`'s grant on each CPU: the occupancy number handed back, 0 where the slot is
    /// held (or never was).
    pub(crate) fn grants(&self, index: usize) -> Vec<u64> {
        self.cpus
            .iter()
            .map(|slots| {
                let seen = &slots[index];
                if seen.retired {
                    seen.gen
                } else {
                    0
                }
            })
            .collect()
    }

    fn fit(&mut self, cpus: usize) {
        if self.cpus.len() < cpus {
            self.cpus.resize(cpus, vec![Seen::default(); COUNT_SLOTS]);
        }
    }
}

/// Counts only grow within an occupancy: keep the larger of each (and the newer comm), so a
/// reading cannot take anything back.
fn grow(kept: &mut TaskCounts, read: &TaskCounts) {
    kept.node_reads_demand = kept.node_reads_demand.max(read.node_reads_demand);
    kept.node_reads_readahead = kept.node_reads_readahead.max(read.node_reads_readahead);
    kept.node_writes = kept.node_writes.max(read.node_writes);
    kept.checkpoints = kept.checkpoints.max(read.checkpoints);
    if read.comm_ns > kept.comm_ns {
        kept.comm = read.comm;
        kept.comm_ns = read.comm_ns;
    }
}

fn not_less(later: &TaskCounts, earlier: &TaskCounts) -> bool {
    later.node_reads_demand >= earlier.node_reads_demand
        && later.node_reads_readahead >= earlier.node_reads_readahead
        && later.node_writes >= earlier.node_writes
        && later.checkpoints >= earlier.checkpoints
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tracer_common::CountSlot;

    use super::*;

    fn key(tgid: u32) -> TaskKey {
        TaskKey {
            dev: 7,
            tgid,
            uid: 1000,
            _pad: 0,
        }
    }

    fn slot(gen: u64, tgid: u32, demand: u64) -> CountSlot {
        CountSlot {
            gen,
            key: key(tgid),
            counts: TaskCounts {
                node_reads_demand: demand,
                comm_ns: 1,
                ..TaskCounts::default()
            },
        }
    }

    /// `cpus` tables, empty but for `slots` (cpu, index, slot).
    fn tables(cpus: usize, slots: &[(usize, usize, CountSlot)]) -> Vec<SlotTable> {
        let mut tables = vec![SlotTable::EMPTY; cpus];
        for &(cpu, index, slot) in slots {
            tables[cpu].slots[index] = slot;
        }
        tables
    }

    fn no_second_reading() -> Result<Vec<SlotTable>, Infallible> {
        panic!("nothing changed hands: no second reading is needed")
    }

    fn live(tracker: &SlotTracker) -> Vec<(u32, u64)> {
        let mut live: Vec<_> = tracker
            .live()
            .map(|(k, c)| (k.tgid, c.node_reads_demand))
            .collect();
        live.sort();
        live
    }

    #[test]
    fn a_claim_is_believed_when_a_second_reading_agrees_and_then_grows() {
        let mut tracker = SlotTracker::default();
        let first = tables(2, &[(0, 5, slot(1, 5, 3)), (1, 5, slot(1, 261, 1))]);
        let second = tables(2, &[(0, 5, slot(1, 5, 4)), (1, 5, slot(1, 261, 1))]);
        tracker
            .observe(&first, || Ok::<_, Infallible>(second.clone()))
            .unwrap();
        // The second reading's counts: the newer of two that agree.
        assert_eq!(live(&tracker), vec![(5, 4), (261, 1)]);
        let later = tables(2, &[(0, 5, slot(1, 5, 9)), (1, 5, slot(1, 261, 1))]);
        tracker.observe(&later, no_second_reading).unwrap();
        assert_eq!(live(&tracker), vec![(5, 9), (261, 1)]);
    }

    #[test]
    fn a_claim_caught_half_written_waits_for_the_next_reading() {
        let mut tracker = SlotTracker::default();
        // The first reading saw the new occupancy number with the old task's key (torn); the
        // second sees the finished claim: they disagree, so nothing is believed yet.
        let torn = tables(1, &[(0, 9, slot(1, 265, 0))]);
        let done = tables(1, &[(0, 9, slot(1, 9, 1))]);
        tracker
            .observe(&torn, || Ok::<_, Infallible>(done.clone()))
            .unwrap();
        assert_eq!(live(&tracker), vec![]);
        tracker
            .observe(&done, || Ok::<_, Infallible>(done.clone()))
            .unwrap();
        assert_eq!(live(&tracker), vec![(9, 1)]);
    }

    #[test]
    fn counts_that_read_smaller_are_not_taken_back() {
        let mut tracker = SlotTracker::default();
        let t = tables(1, &[(0, 1, slot(1, 1, 10))]);
        tracker
            .observe(&t, || Ok::<_, Infallible>(t.clone()))
            .unwrap();
        let smaller = tables(1, &[(0, 1, slot(1, 1, 8))]);
        tracker.observe(&smaller, no_second_reading).unwrap();
        assert_eq!(live(&tracker), vec![(1, 10)]);
    }

    #[test]
    fn an_exited_task_is_retired_once_with_its_final_counts_summed_over_cpus() {
        let mut tracker = SlotTracker::default();
        let t = tables(
            2,
            &[
                (0, 4, slot(1, 4, 2)),
                (1, 4, slot(3, 4, 5)),
                (1, 6, slot(1, 6, 7)),
            ],
        );
        tracker
            .observe(&t, || Ok::<_, Infallible>(t.clone()))
            .unwrap();
        // After the exit was seen, the final reading has one more count on CPU 0.
        let last = tables(
            2,
            &[
                (0, 4, slot(1, 4, 3)),
                (1, 4, slot(3, 4, 5)),
                (1, 6, slot(1, 6, 7)),
            ],
        );
        let (finals, changed) = tracker.retire(&last, &BTreeSet::from([4]));
        assert_eq!(finals.len(), 1);
        assert_eq!(finals[0].0, key(4));
        assert_eq!(finals[0].1.node_reads_demand, 8);
        assert_eq!(changed, BTreeSet::from([4]));
        assert_eq!(tracker.grants(4), vec![1, 3]);
        assert_eq!(tracker.grants(6), vec![0, 0]);
        assert_eq!(live(&tracker), vec![(6, 7)]);
        // Retired slots are neither reported nor retired again while they keep the old task.
        tracker.observe(&last, no_second_reading).unwrap();
        assert_eq!(live(&tracker), vec![(6, 7)]);
        let (again, changed) = tracker.retire(&last, &BTreeSet::from([4]));
        assert!(again.is_empty() && changed.is_empty());
    }

    #[test]
    fn a_handed_back_slot_is_counted_again_for_its_next_task() {
        let mut tracker = SlotTracker::default();
        let t = tables(1, &[(0, 2, slot(1, 2, 4))]);
        tracker
            .observe(&t, || Ok::<_, Infallible>(t.clone()))
            .unwrap();
        tracker.retire(&t, &BTreeSet::from([2]));
        assert_eq!(tracker.grants(2), vec![1]);
        let next = tables(1, &[(0, 2, slot(2, 258, 1))]);
        tracker
            .observe(&next, || Ok::<_, Infallible>(next.clone()))
            .unwrap();
        assert_eq!(live(&tracker), vec![(258, 1)]);
        assert_eq!(tracker.grants(2), vec![0]);
    }
}
