//! The kernel source's exact counters as one reading for the model (`model::exact`).
use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    path::Path,
};

use anyhow::Result;

use tracer_common::{TaskCounts, TaskKey};

use super::bpf::{f2fs::counters::merge, live::BpfSource};
use crate::model::KernelCounts;

impl BpfSource {
    /// Every in-kernel counter at once: per task, the counter map's failures, and the RFC
    /// probes' per-kind counts (only the kinds that attached), with the devices' names.
    pub(crate) fn read_kernel_counts(&mut self) -> Result<KernelCounts> {
        // Thousands of map syscalls: none may be preempted by a task the programs count.
        let _unpreempted = super::bpf::unpreempted::Unpreempted::enter();
        let mut tasks = self.counts()?;
        let retired = self.retire_exited(&mut tasks)?;
        // Thousands of tasks share a device or two: one look-up per device.
        let devices: BTreeSet<u32> = tasks.iter().map(|(key, _)| key.dev).collect();
        let device_names = devices
            .into_iter()
            .filter_map(|dev| Some((dev, device_name(dev)?)))
            .collect();
        Ok(KernelCounts {
            tasks,
            retired,
            counter_failures: self.count_failures()?,
            rfc: self.attached_rfc_counts()?,
            device_names,
        })
    }

    /// Take the entries of thread groups that no longer exist out of NODE_COUNTS and hand
    /// their counter slots back (a phone starts thousands of short-lived processes a day; a
    /// full map would lose every new process's counts, full slots would send every count to
    /// the map), replacing their reading in `tasks` by their final value. Returns their keys:
    /// the model keeps their counts and forgets the keys.
    ///
    /// No increment is lost: a program increments only the entry or slot of the task running
    /// it, a group with no task left runs nothing, lookup-and-delete returns exactly the value
    /// it removes, and the slots are read after the exits were seen. A tgid reused in between
    /// (pid numbers wrap only after pid_max) is the one case left; it is checked for after the
    /// delete and logged.
    fn retire_exited(&mut self, tasks: &mut Vec<(TaskKey, TaskCounts)>) -> Result<Vec<TaskKey>> {
        let exited: BTreeSet<u32> = tasks
            .iter()
            .map(|(key, _)| key.tgid)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|&tgid| !alive(tgid))
            .collect();
        let mut retired = Vec::new();
        if exited.is_empty() {
            self.note_retired(0);
            return Ok(retired);
        }
        // An exited group's counts are in NODE_COUNTS, in counter slots, or both: its final
        // value is the sum of what each holds now.
        let slot_finals: HashMap<TaskKey, TaskCounts> =
            self.retire_slots(&exited)?.into_iter().collect();
        let read: HashSet<TaskKey> = tasks.iter().map(|(key, _)| *key).collect();
        for key in slot_finals.keys().filter(|key| !read.contains(key)) {
            // Only in a slot this reading had not confirmed yet: final all the same.
            tasks.push((*key, TaskCounts::default()));
        }
        for (key, counts) in tasks.iter_mut().filter(|(k, _)| exited.contains(&k.tgid)) {
            let mut last = self.take_counts(key)?.unwrap_or_default();
            if let Some(in_slots) = slot_finals.get(key) {
                merge(&mut last, in_slots);
            }
            *counts = last;
            retired.push(*key);
        }
        for tgid in exited.iter().filter(|&&tgid| alive(tgid)) {
            log::warn!("tgid {tgid} was reused while its counters were folded");
        }
        self.note_retired(retired.len());
        Ok(retired)
    }

    fn attached_rfc_counts(&self) -> Result<Option<BTreeMap<&'static str, u64>>> {
        let attached = self.per_event_kinds();
        if attached.is_empty() && self.rfc_report().is_none() {
            return Ok(None);
        }
        let counts = self
            .rfc_counts()?
            .into_iter()
            .filter(|(kind, _)| attached.contains(kind))
            .map(|(kind, count)| (kind.name(), count))
            .collect();
        Ok(Some(counts))
    }
}

/// Whether a thread group still exists (a zombie does: it does no I/O, and its entry goes
/// once it is reaped).
fn alive(tgid: u32) -> bool {
    Path::new(&format!("/proc/{tgid}")).exists()
}

/// The kernel's name for a block device number as F2FS tracepoints encode it.
fn device_name(dev: u32) -> Option<String> {
    let path = format!("/sys/dev/block/{}", crate::system::major_minor(dev));
    let target = std::fs::read_link(Path::new(&path)).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}
