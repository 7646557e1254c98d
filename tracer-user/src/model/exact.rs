//! Exact counts kept in the kernel, per window.
//!
//! The kernel source counts node reads, node writes and checkpoints per (device, tgid, uid) in a
//! per-CPU map, so its counts stay exact when the ring buffer overflows; the RFC probes count
//! their events per kind the same way. The source reports these counters as cumulative
//! readings ([`KernelCounts`]); the model turns successive readings into the deltas of the
//! window that is open when they are read ([`ExactWindow`]). Sources without such counters
//! (the simulator, recordings) leave a window's `exact` empty and the events speak alone.
use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use tracer_common::{TaskCounts, TaskKey};

use super::Counters;

/// One reading of the kernel's cumulative counters.
#[derive(Clone, Debug, Default)]
pub struct KernelCounts {
    pub tasks: Vec<(TaskKey, TaskCounts)>,
    /// Keys whose entry the source deleted after this reading (exited processes): their
    /// value in `tasks` is final, and a later entry with the same key counts from zero.
    pub retired: Vec<TaskKey>,
    /// Counter increments lost because the counter map was full.
    pub counter_failures: u64,
    /// Events per kind counted by the RFC probes, when a probe manifest is attached.
    pub rfc: Option<BTreeMap<&'static str, u64>>,
    /// Block device names by the number F2FS tracepoints print (major << 20 | minor).
    pub device_names: BTreeMap<u32, String>,
}

/// One process's exact counts in one window (devices and uids summed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExactProcess {
    pub comm: String,
    pub uid: u32,
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
}

/// Node reads, node writes and checkpoints of one device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceNodeCounts {
    pub name: Option<String>,
    pub node_reads: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
}

/// The four exact counts summed over processes (and over windows, for the cumulative ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExactTotals {
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
}

/// The kernel's exact counts over one window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExactWindow {
    pub totals: ExactTotals,
    /// Since the first reading, up to the end of this window.
    pub cumulative: ExactTotals,
    pub processes: BTreeMap<u32, ExactProcess>,
    pub devices: BTreeMap<u32, DeviceNodeCounts>,
    pub counter_drops: u64,
    pub rfc: Option<BTreeMap<&'static str, u64>>,
}

/// Turns cumulative readings into per-window deltas.
#[derive(Debug, Default)]
pub(crate) struct ExactTracker {
    previous: HashMap<TaskKey, TaskCounts>,
    previous_failures: u64,
    previous_rfc: BTreeMap<&'static str, u64>,
    cumulative: ExactTotals,
    /// What the open window has gathered so far; `None` until a reading arrives.
    open: Option<ExactWindow>,
}

impl ExactTracker {
    /// Add what changed since the previous reading to the open window.
    pub(crate) fn observe(&mut self, reading: &KernelCounts) {
        let window = self.open.get_or_insert_with(ExactWindow::default);
        for (key, counts) in &reading.tasks {
            let before = self.previous.get(key).copied().unwrap_or_default();
            let delta = Delta::between(&before, counts);
            if delta.is_zero() {
                continue;
            }
            add_process(window, key, counts, &delta);
            for totals in [&mut window.totals, &mut self.cumulative] {
                totals.node_reads_demand += delta.demand;
                totals.node_reads_readahead += delta.readahead;
                totals.node_writes += delta.writes;
                totals.checkpoints += delta.checkpoints;
            }
            let device = window.devices.entry(key.dev).or_default();
            device.name = reading.device_names.get(&key.dev).cloned();
            device.node_reads += delta.demand + delta.readahead;
            device.node_writes += delta.writes;
            device.checkpoints += delta.checkpoints;
            self.previous.insert(*key, *counts);
        }
        for key in &reading.retired {
            self.previous.remove(key);
        }
        window.counter_drops += reading
            .counter_failures
            .saturating_sub(self.previous_failures);
        self.previous_failures = reading.counter_failures;
        if let Some(rfc) = &reading.rfc {
            let deltas = window.rfc.get_or_insert_with(BTreeMap::new);
            for (kind, count) in rfc {
                let before = self.previous_rfc.insert(kind, *count).unwrap_or(0);
                *deltas.entry(kind).or_default() += count.saturating_sub(before);
            }
        }
    }

    /// The open window's counts, leaving an empty one open (`None`: no reading yet).
    pub(crate) fn close(&mut self) -> Option<ExactWindow> {
        let mut window = self.open.take()?;
        window.cumulative = self.cumulative;
        self.open = Some(ExactWindow {
            rfc: window
                .rfc
                .as_ref()
                .map(|rfc| rfc.keys().map(|k| (*k, 0)).collect()),
            ..ExactWindow::default()
        });
        Some(window)
    }

    /// Whether the open window holds any count.
    pub(crate) fn open_is_empty(&self) -> bool {
        self.open.as_ref().is_none_or(|w| {
            w.processes.is_empty()
                && w.counter_drops == 0
                && w.rfc
                    .as_ref()
                    .is_none_or(|rfc| rfc.values().all(|&c| c == 0))
        })
    }
}

impl ExactProcess {
    pub fn totals(&self) -> ExactTotals {
        ExactTotals {
            node_reads_demand: self.node_reads_demand,
            node_reads_readahead: self.node_reads_readahead,
            node_writes: self.node_writes,
            checkpoints: self.checkpoints,
        }
    }
}

/// Put the kernel's four counts in place of those the events gave.
pub(crate) fn set_counts(counters: &mut Counters, exact: &ExactTotals) {
    counters.node_reads_demand = exact.node_reads_demand;
    counters.node_reads_readahead = exact.node_reads_readahead;
    counters.node_writes = exact.node_writes;
    counters.checkpoints = exact.checkpoints;
}

/// What one task's counters gained between two readings.
struct Delta {
    demand: u64,
    readahead: u64,
    writes: u64,
    checkpoints: u64,
}

impl Delta {
    fn between(before: &TaskCounts, after: &TaskCounts) -> Delta {
        Delta {
            demand: after
                .node_reads_demand
                .saturating_sub(before.node_reads_demand),
            readahead: after
                .node_reads_readahead
                .saturating_sub(before.node_reads_readahead),
            writes: after.node_writes.saturating_sub(before.node_writes),
            checkpoints: after.checkpoints.saturating_sub(before.checkpoints),
        }
    }

    fn is_zero(&self) -> bool {
        self.demand == 0 && self.readahead == 0 && self.writes == 0 && self.checkpoints == 0
    }
}

fn add_process(window: &mut ExactWindow, key: &TaskKey, counts: &TaskCounts, delta: &Delta) {
    let process = window
        .processes
        .entry(key.tgid)
        .or_insert_with(|| ExactProcess {
            comm: String::from_utf8_lossy(counts.comm_bytes()).into_owned(),
            uid: key.uid,
            ..ExactProcess::default()
        });
    process.node_reads_demand += delta.demand;
    process.node_reads_readahead += delta.readahead;
    process.node_writes += delta.writes;
    process.checkpoints += delta.checkpoints;
}

#[cfg(test)]
mod tests {
    use super::*;

    const VDA: u32 = 254 << 20;

    fn key(dev: u32, tgid: u32) -> TaskKey {
        TaskKey {
            dev,
            tgid,
            uid: 0,
            _pad: 0,
        }
    }

    fn counts(
        demand: u64,
        readahead: u64,
        writes: u64,
        checkpoints: u64,
        comm: &str,
    ) -> TaskCounts {
        let mut counts = TaskCounts {
            node_reads_demand: demand,
            node_reads_readahead: readahead,
            node_writes: writes,
            checkpoints,
            ..TaskCounts::default()
        };
        counts.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        counts
    }

    fn reading(tasks: Vec<(TaskKey, TaskCounts)>) -> KernelCounts {
        KernelCounts {
            tasks,
            device_names: BTreeMap::from([(VDA, "vda".to_string())]),
            ..KernelCounts::default()
        }
    }

    #[test]
    fn windows_get_the_deltas_read_while_they_were_open() {
        let mut tracker = ExactTracker::default();
        assert_eq!(tracker.close(), None, "no reading, no exact counts");
        tracker.observe(&reading(vec![
            (key(VDA, 10), counts(5, 0, 0, 0, "cat")),
            (key(VDA, 11), counts(1, 0, 0, 0, "idle")),
        ]));
        let first = tracker.close().unwrap();
        assert_eq!(first.processes[&10].node_reads_demand, 5);
        assert_eq!(first.devices[&VDA].node_reads, 6);
        tracker.observe(&reading(vec![
            (key(VDA, 10), counts(8, 2, 0, 0, "cat")),
            (key(VDA, 11), counts(1, 0, 0, 0, "idle")),
            (key(VDA, 12), counts(0, 0, 20, 1, "f2fs_ckpt-254:0")),
        ]));
        tracker.observe(&reading(vec![(
            key(VDA, 12),
            counts(0, 0, 30, 2, "f2fs_ckpt-254:0"),
        )]));
        assert!(!tracker.open_is_empty());
        let second = tracker.close().unwrap();
        assert_eq!(second.processes.len(), 2, "idle processes are left out");
        let cat = &second.processes[&10];
        assert_eq!((cat.node_reads_demand, cat.node_reads_readahead), (3, 2));
        let ckpt = &second.processes[&12];
        assert_eq!(
            (ckpt.comm.as_str(), ckpt.node_writes, ckpt.checkpoints),
            ("f2fs_ckpt-254:0", 30, 2)
        );
        let vda = &second.devices[&VDA];
        assert_eq!(vda.name.as_deref(), Some("vda"));
        assert_eq!(
            (vda.node_reads, vda.node_writes, vda.checkpoints),
            (5, 30, 2)
        );
        assert!(tracker.open_is_empty());
    }

    #[test]
    fn a_retired_entry_counts_its_last_delta_and_a_reused_key_starts_from_zero() {
        let mut tracker = ExactTracker::default();
        tracker.observe(&reading(vec![(key(VDA, 10), counts(5, 0, 0, 0, "cat"))]));
        assert_eq!(tracker.close().unwrap().totals.node_reads_demand, 5);
        // The process exited: its entry was taken out with its final value (7).
        let mut last = reading(vec![(key(VDA, 10), counts(7, 0, 0, 0, "cat"))]);
        last.retired = vec![key(VDA, 10)];
        tracker.observe(&last);
        assert_eq!(tracker.close().unwrap().processes[&10].node_reads_demand, 2);
        // Gone from the map and from the tracker: a later reading without it adds nothing,
        // and the same tgid reused counts from zero, not from 7.
        tracker.observe(&reading(vec![]));
        assert_eq!(tracker.close().unwrap().totals.node_reads_demand, 0);
        tracker.observe(&reading(vec![(key(VDA, 10), counts(3, 0, 0, 0, "sh"))]));
        let window = tracker.close().unwrap();
        assert_eq!(window.processes[&10].node_reads_demand, 3);
        assert_eq!(window.cumulative.node_reads_demand, 10);
        assert!(tracker.previous.len() == 1);
    }

    #[test]
    fn rfc_kinds_and_counter_failures_are_deltas_too() {
        let mut tracker = ExactTracker::default();
        let mut first = reading(vec![]);
        first.counter_failures = 2;
        first.rfc = Some(BTreeMap::from([("restore", 7), ("convert", 1)]));
        tracker.observe(&first);
        assert_eq!(tracker.close().unwrap().counter_drops, 2);
        let mut second = first.clone();
        second.counter_failures = 5;
        second.rfc = Some(BTreeMap::from([("restore", 10), ("convert", 1)]));
        tracker.observe(&second);
        let window = tracker.close().unwrap();
        assert_eq!(window.counter_drops, 3);
        assert_eq!(
            window.rfc,
            Some(BTreeMap::from([("restore", 3), ("convert", 0)]))
        );
        let quiet = tracker.close().unwrap();
        assert_eq!(
            quiet.rfc,
            Some(BTreeMap::from([("restore", 0), ("convert", 0)]))
        );
    }
}
