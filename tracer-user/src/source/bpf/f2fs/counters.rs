//! The F2FS programs' in-kernel counters: exact per-process counts kept in NODE_COUNTS (no
//! event can be lost on the way) and the increments that did not fit in the map.
use anyhow::{Context as _, Result};
use aya::{
    maps::{PerCpuArray, PerCpuHashMap},
    Ebpf,
};
use tracer_common::{TaskCounts, TaskKey};

/// The in-kernel counters, summed over CPUs: one entry per (device, tgid, uid).
pub fn read_counts(ebpf: &Ebpf) -> Result<Vec<(TaskKey, TaskCounts)>> {
    let map = ebpf.map("NODE_COUNTS").context("NODE_COUNTS map missing")?;
    let counts: PerCpuHashMap<_, TaskKey, TaskCounts> = PerCpuHashMap::try_from(map)?;
    let mut out = Vec::new();
    for item in counts.iter() {
        let (key, per_cpu) = item.context("reading NODE_COUNTS")?;
        out.push((key, sum_cpus(per_cpu.iter())));
    }
    Ok(out)
}

fn sum_cpus<'a>(values: impl Iterator<Item = &'a TaskCounts>) -> TaskCounts {
    let mut total = TaskCounts::default();
    for v in values {
        total.node_reads_demand += v.node_reads_demand;
        total.node_reads_readahead += v.node_reads_readahead;
        total.node_writes += v.node_writes;
        total.checkpoints += v.checkpoints;
        // Each CPU has its own copy of the comm: the newest one is the process's name now.
        if v.comm[0] != 0 && (total.comm[0] == 0 || v.comm_ns > total.comm_ns) {
            total.comm = v.comm;
            total.comm_ns = v.comm_ns;
        }
    }
    total
}

/// Increments the kernel side could not make because NODE_COUNTS was full.
pub fn count_failures(ebpf: &Ebpf) -> Result<u64> {
    let map = ebpf.map("COUNT_FAILS").context("COUNT_FAILS map missing")?;
    let fails: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
    Ok(fails
        .get(&0, 0)
        .context("reading COUNT_FAILS")?
        .iter()
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summing_cpus_adds_counts_and_keeps_the_newest_comm() {
        let cpu = |demand, comm: &[u8], comm_ns| {
            let mut c = TaskCounts {
                node_reads_demand: demand,
                comm_ns,
                ..TaskCounts::default()
            };
            c.comm[..comm.len()].copy_from_slice(comm);
            c
        };
        let cpus = [cpu(2, b"cat", 20), cpu(0, b"", 0), cpu(1, b"sh", 10)];
        let total = sum_cpus(cpus.iter());
        assert_eq!(total.node_reads_demand, 3);
        assert_eq!(&total.comm[..4], b"cat\0");
    }
}
