//! The kernel source's exact counters as one reading for the model (`model::exact`).
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use anyhow::Result;

use super::bpf::live::BpfSource;
use crate::model::KernelCounts;

impl BpfSource {
    /// Every in-kernel counter at once: per task, the counter map's failures, and the RFC
    /// probes' per-kind counts (only the kinds that attached), with the devices' names.
    pub fn read_kernel_counts(&self) -> Result<KernelCounts> {
        let tasks = self.counts()?;
        // Thousands of tasks share a device or two: one look-up per device.
        let devices: BTreeSet<u32> = tasks.iter().map(|(key, _)| key.dev).collect();
        let device_names = devices
            .into_iter()
            .filter_map(|dev| Some((dev, device_name(dev)?)))
            .collect();
        Ok(KernelCounts {
            tasks,
            counter_failures: self.count_failures()?,
            rfc: self.attached_rfc_counts()?,
            device_names,
        })
    }

    fn attached_rfc_counts(&self) -> Result<Option<BTreeMap<&'static str, u64>>> {
        let Some(report) = self.rfc_report() else {
            return Ok(None);
        };
        // Attachment lines start with the kind's name.
        let attached: Vec<&str> = report
            .attached
            .iter()
            .filter_map(|a| a.split(' ').next())
            .collect();
        let counts = self
            .rfc_counts()?
            .into_iter()
            .filter(|(kind, _)| attached.contains(&kind.name()))
            .map(|(kind, count)| (kind.name(), count))
            .collect();
        Ok(Some(counts))
    }
}

/// The kernel's name for a block device number as F2FS tracepoints encode it.
fn device_name(dev: u32) -> Option<String> {
    let path = format!("/sys/dev/block/{}", crate::system::major_minor(dev));
    let target = std::fs::read_link(Path::new(&path)).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}
