//! The F2FS programs' in-kernel counters: exact per-process counts kept in NODE_COUNTS (no
//! event can be lost on the way) and the increments that did not fit in the map.
use crate::source::bpf::ObjectMaps as _;
use std::os::fd::{AsFd as _, AsRawFd as _};
use tracer_common::maps;

use anyhow::{bail, Context as _, Result};
use aya::{
    maps::{Map, PerCpuArray, PerCpuHashMap, PerCpuValues},
    Ebpf,
};
use tracer_common::{SlotTable, TaskCounts, TaskKey};

/// The in-kernel counters, summed over CPUs: one entry per (device, tgid, uid).
pub(crate) fn read_counts(ebpf: &Ebpf) -> Result<Vec<(TaskKey, TaskCounts)>> {
    let map = ebpf.named_map(maps::NODE_COUNTS)?;
    let counts: PerCpuHashMap<_, TaskKey, TaskCounts> = PerCpuHashMap::try_from(map)?;
    let mut out = Vec::new();
    for item in counts.iter() {
        let (key, per_cpu) = item.context("reading NODE_COUNTS")?;
        out.push((key, sum_cpus(per_cpu.iter())));
    }
    Ok(out)
}

/// NODE_COUNTS's capacity (the eBPF side's `with_max_entries`), for what we print.
pub(crate) const NODE_COUNTS_CAPACITY: usize = 8192;

/// Remove `key`'s entry and return its last value, summed over CPUs, in one step
/// (BPF_MAP_LOOKUP_AND_DELETE_ELEM, hash maps since Linux 5.14): an increment that lands
/// before it is in the value returned, one after it makes a fresh entry. `None`: no entry.
pub(crate) fn take(ebpf: &Ebpf, key: &TaskKey) -> Result<Option<TaskCounts>> {
    let Some(Map::PerCpuHashMap(data)) = ebpf.map(maps::NODE_COUNTS) else {
        bail!("NODE_COUNTS map missing or not a per-CPU hash map");
    };
    let cpus = nr_cpus()?;
    // The kernel copies one value per possible CPU, each rounded up to 8 bytes: TaskCounts
    // is already a multiple of 8, so that is a plain array.
    const _: () = assert!(std::mem::size_of::<TaskCounts>().is_multiple_of(8));
    let mut values = vec![TaskCounts::default(); cpus];
    let attr = ElemAttr {
        map_fd: data.fd().as_fd().as_raw_fd() as u32,
        _pad: 0,
        key: std::ptr::from_ref(key) as u64,
        value: values.as_mut_ptr() as u64,
        flags: 0,
    };
    // SAFETY: the attribute is a valid BPF_MAP_*_ELEM union member whose key and value
    // pointers outlive the call; the value buffer holds one TaskCounts per possible CPU, as
    // much as the kernel writes for this per-CPU map.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_AND_DELETE_ELEM,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<ElemAttr>() as u32,
        )
    };
    if result != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ENOENT) {
            return Ok(None);
        }
        return Err(err).context("taking an exited task's entry out of NODE_COUNTS");
    }
    Ok(Some(sum_cpus(values.iter())))
}

const BPF_MAP_LOOKUP_AND_DELETE_ELEM: libc::c_long = 21;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// The `bpf_attr` member of BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// How often the kernel skipped the loaded program `name` instead of running it
/// (`recursion_misses`: another BPF program of a kind that shares the per-CPU guard was
/// running on that CPU, Linux 5.12 and later). Every skipped run of a counting program is a
/// count lost, so it is said, never hidden. `None` when the program is not loaded.
pub(crate) fn missed_runs(ebpf: &Ebpf, name: &str) -> Result<Option<u64>> {
    let Some(program) = ebpf.program(name) else {
        return Ok(None);
    };
    let Ok(fd) = program.fd() else {
        return Ok(None);
    };
    // SAFETY: bpf_prog_info is plain integers and pointers-as-integers, valid all zero.
    let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
    let attr = InfoAttr {
        bpf_fd: fd.as_fd().as_raw_fd() as u32,
        info_len: std::mem::size_of_val(&info) as u32,
        info: std::ptr::from_mut(&mut info) as u64,
    };
    // SAFETY: the attribute is a valid BPF_OBJ_GET_INFO_BY_FD member whose info pointer and
    // length describe `info`, which outlives the call; the kernel writes at most info_len
    // bytes of it (older kernels fewer, leaving the rest zero).
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<InfoAttr>() as u32,
        )
    };
    if result != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("reading program {name}'s info"));
    }
    Ok(Some(info.recursion_misses))
}

/// The `bpf_attr` member of the BPF_MAP_*_ELEM commands.
#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

fn sum_cpus<'a>(values: impl Iterator<Item = &'a TaskCounts>) -> TaskCounts {
    let mut total = TaskCounts::default();
    for v in values {
        merge(&mut total, v);
    }
    total
}

/// Add one CPU's (or one slot's) counts of a task to its total.
pub(crate) fn merge(total: &mut TaskCounts, v: &TaskCounts) {
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

/// Every CPU's counter slots (`COUNT_SLOTS`), one table per possible CPU.
pub(crate) fn read_slots(ebpf: &Ebpf) -> Result<Vec<SlotTable>> {
    let map = ebpf.named_map(maps::COUNT_SLOTS)?;
    let tables: PerCpuArray<_, SlotTable> = PerCpuArray::try_from(map)?;
    let values = tables.get(&0, 0).context("reading COUNT_SLOTS")?;
    Ok(values.iter().copied().collect())
}

/// Set up every CPU's slot table before the programs attach: all slots free, and the fast
/// node-read program's settings.
pub(crate) fn init_slots(ebpf: &mut Ebpf, rahead_bit: u32, uid_follows_creds: bool) -> Result<()> {
    let map = ebpf.named_map_mut(maps::COUNT_SLOTS)?;
    let mut tables: PerCpuArray<_, SlotTable> = PerCpuArray::try_from(map)?;
    let mut table = SlotTable::EMPTY;
    table.rahead_bit = rahead_bit;
    table.uid_follows_creds = u32::from(uid_follows_creds);
    let values = PerCpuValues::try_from(vec![table; nr_cpus()?]).context("slot tables")?;
    tables.set(0, values, 0).context("writing COUNT_SLOTS")
}

/// Hand slot `index` back on the CPUs whose `grants` entry names its occupancy.
pub(crate) fn write_grants(ebpf: &mut Ebpf, index: usize, grants: Vec<u64>) -> Result<()> {
    let map = ebpf.named_map_mut(maps::SLOT_GRANTS)?;
    let mut map: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
    let mut grants = grants;
    grants.resize(nr_cpus()?, 0);
    let values = PerCpuValues::try_from(grants).context("slot grants")?;
    map.set(index as u32, values, 0)
        .context("writing SLOT_GRANTS")
}

/// The possible CPUs (a per-CPU value has one copy each), read once: the retirement path asks
/// for it per exited entry and per handed-back slot.
fn nr_cpus() -> Result<usize> {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(cpus) = CPUS.get() {
        return Ok(*cpus);
    }
    let cpus = aya::util::nr_cpus()
        .map_err(|(path, err)| anyhow::Error::new(err).context(format!("reading {path}")))?;
    Ok(*CPUS.get_or_init(|| cpus))
}

/// Increments the kernel side could not make because NODE_COUNTS was full.
pub(crate) fn count_failures(ebpf: &Ebpf) -> Result<u64> {
    let map = ebpf.named_map(maps::COUNT_FAILS)?;
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
