//! The exact per-task counters the F2FS programs count in: this CPU's `COUNT_SLOTS` table
//! first, the `NODE_COUNTS` hash when another task holds the slot, `COUNT_FAILS` when the hash
//! is full; and the comm and uid stamps (`TASK_CHANGES`) that let a counter skip reading them.
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_uid_gid, bpf_ktime_get_ns,
    },
    macros::{kprobe, map, tracepoint},
    maps::{Array, PerCpuArray, PerCpuHashMap},
    programs::{ProbeContext, TracePointContext},
};
use tracer_common::{CountSlot, SlotTable, TaskCounts, TaskKey, COMM_LEN, COUNT_SLOTS};

use crate::maps::Current;

/// Exact per-(device, tgid, uid) counters. Per-CPU so that increments need no atomics; the
/// size is modest because every possible CPU gets a copy of every value.
#[map(name = "NODE_COUNTS")]
static NODE_COUNTS: PerCpuHashMap<TaskKey, TaskCounts> = PerCpuHashMap::with_max_entries(8192, 0);

/// This CPU's counter slots and the node-read program's settings (one entry): a task counts
/// in the slot its tgid's low bits name while the slot is its own, with no hashing, and in
/// `NODE_COUNTS` when another task holds the slot. Userspace sums both.
#[map(name = "COUNT_SLOTS")]
static COUNT_SLOTS_MAP: PerCpuArray<SlotTable> = PerCpuArray::with_max_entries(1, 0);

/// Per slot, this CPU's occupancy number userspace handed back (0: none): it read that
/// occupancy's final counts after its task exited, so the slot may change hands.
#[map(name = "SLOT_GRANTS")]
static SLOT_GRANTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNT_SLOTS as u32, 0);

/// Increments that found `NODE_COUNTS` full (index 0): shown to the user, never hidden.
#[map(name = "COUNT_FAILS")]
static COUNT_FAILS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[derive(Clone, Copy)]
pub(crate) enum Counter {
    Demand,
    Readahead,
    Write,
    Checkpoint,
}

fn bump(counts: &mut TaskCounts, counter: Counter, n: u64) {
    match counter {
        Counter::Demand => counts.node_reads_demand += n,
        Counter::Readahead => counts.node_reads_readahead += n,
        Counter::Write => counts.node_writes += n,
        Counter::Checkpoint => counts.checkpoints += n,
    }
}

fn count_fail() {
    if let Some(slot) = COUNT_FAILS.get_ptr_mut(0) {
        // SAFETY: the slot belongs to this CPU and BPF programs are not preempted on it.
        unsafe { *slot += 1 };
    }
}

/// The current task as its counter needs it: pid/tgid per event; the uid when the counter's
/// key needs it (a task's slot keeps it until some task's credentials change); the comm and
/// the time only when an entry is new or a task was renamed since the entry's comm was read
/// (one helper call each: per event they were most of the counter's cost).
pub(crate) struct Task {
    pid_tgid: u64,
    uid: Option<u32>,
    named: Option<([u8; COMM_LEN], u64)>,
}

impl Task {
    #[inline(always)]
    pub(crate) fn read() -> Task {
        Task {
            pid_tgid: bpf_get_current_pid_tgid(),
            uid: None,
            named: None,
        }
    }

    /// From a full [`Current`] (the event path has read everything already).
    #[inline(always)]
    pub(crate) fn of(current: &Current) -> Task {
        Task {
            pid_tgid: current.pid_tgid,
            uid: Some(current.uid),
            named: Some((current.comm, current.ts_ns)),
        }
    }

    #[inline(always)]
    fn tgid(&self) -> u32 {
        (self.pid_tgid >> 32) as u32
    }

    /// The uid, read on first use.
    #[inline(always)]
    fn uid(&mut self) -> u32 {
        if let Some(uid) = self.uid {
            return uid;
        }
        let uid = bpf_get_current_uid_gid() as u32;
        self.uid = Some(uid);
        uid
    }

    /// The comm and the time, read on first use.
    #[inline(always)]
    fn named(&mut self) -> ([u8; COMM_LEN], u64) {
        if let Some(named) = self.named {
            return named;
        }
        let comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        let named = (comm, unsafe { bpf_ktime_get_ns() });
        self.named = Some(named);
        named
    }
}

/// When some task last changed its comm or its credentials (index 0, CLOCK_MONOTONIC ns; 0:
/// none since the programs were loaded): exec and prctl(PR_SET_NAME) change a comm, setuid
/// and its kin the uid, and a counter reads a comm (and a slot its task's uid) again only
/// when this value differs from the one it read them at. A time, not a count: the BPF target
/// has no atomic add here, and two changes racing on two CPUs would lose one increment of a
/// shared count, while two times differ unless both fell on the same ns.
#[map(name = "TASK_CHANGES")]
static TASK_CHANGES: Array<u64> = Array::with_max_entries(1, 0);

fn last_task_change() -> u64 {
    TASK_CHANGES.get(0).copied().unwrap_or(0)
}

fn stamp_task_change() {
    if let Some(slot) = TASK_CHANGES.get_ptr_mut(0) {
        // SAFETY: the slot is a valid u64 of the map for the program's run; a plain store, so
        // racing changes leave one of their times, each different from any earlier one.
        unsafe { *slot = bpf_ktime_get_ns() };
    }
}

/// task:task_rename (every comm change: exec's and prctl's). It fires before the kernel
/// copies the new comm; the renamed task is the current one for exec and PR_SET_NAME, so its
/// next I/O (which reads the comm again) comes after the copy.
#[tracepoint]
pub fn f2fs_task_rename(_ctx: TracePointContext) -> u32 {
    stamp_task_change();
    0
}

/// Entry of commit_creds, through which every credential change of a task goes (setuid,
/// setreuid, setresuid, their 32-bit compat forms, exec). It changes the current task's
/// credentials only, after this stamp, so that task's next I/O sees the stamp and reads its
/// uid again. Reads no argument: the same object serves every architecture.
#[kprobe]
pub fn f2fs_commit_creds(_ctx: ProbeContext) -> u32 {
    stamp_task_change();
    0
}

/// This CPU's slot table.
#[inline(always)]
pub(crate) fn slot_table() -> Option<&'static mut SlotTable> {
    // SAFETY: the value is this CPU's copy, valid while the program runs, and no other program
    // runs on this CPU meanwhile (tracepoint and kprobe programs do not nest).
    COUNT_SLOTS_MAP
        .get_ptr_mut(0)
        .map(|table| unsafe { &mut *table })
}

/// Add `n` to one counter of the current task on `dev`: in its slot when it holds it or may
/// claim it, else in `NODE_COUNTS`. The map's path is a call of its own, so that its stack
/// and the slot's are not both on the verifier's deepest call chain (6.1 counts 512 bytes).
#[inline(always)]
pub(crate) fn count(dev: u32, counter: Counter, n: u64, task: &mut Task) {
    count_with(slot_table(), dev, counter, n, task);
}

/// `count` with this CPU's slot table already looked up (None: the map alone).
#[inline(always)]
pub(crate) fn count_with(
    table: Option<&mut SlotTable>,
    dev: u32,
    counter: Counter,
    n: u64,
    task: &mut Task,
) {
    let generation = last_task_change();
    let counted = match table {
        Some(table) => count_in_slot(table, dev, counter, n, task, generation),
        None => false,
    };
    if !counted {
        count_in_map(&task_key(dev, task), counter, n, task, generation);
    }
}

#[inline(always)]
fn task_key(dev: u32, task: &mut Task) -> TaskKey {
    TaskKey {
        dev,
        tgid: task.tgid(),
        uid: task.uid(),
        _pad: 0,
    }
}

/// Count in the task's slot of this CPU's table if it holds it or may claim it; false when
/// another task holds it. While no task changed its comm or credentials since the slot's
/// were read (and commit_creds is hooked: `SlotTable::uid_follows_creds`), the slot's uid is
/// the task's and nothing but the pid/tgid is read.
#[inline(always)]
fn count_in_slot(
    table: &mut SlotTable,
    dev: u32,
    counter: Counter,
    n: u64,
    task: &mut Task,
    generation: u64,
) -> bool {
    let tgid = task.tgid();
    let index = tgid as usize & (COUNT_SLOTS - 1);
    let uid_follows_creds = table.uid_follows_creds != 0;
    let slot = &mut table.slots[index];
    if slot.gen != 0 && slot.key.tgid == tgid && slot.key.dev == dev {
        let fresh = slot.counts.comm_gen == generation;
        if fresh && uid_follows_creds || slot.key.uid == task.uid() {
            bump(&mut slot.counts, counter, n);
            if !fresh {
                let (comm, comm_ns) = task.named();
                slot.counts.comm = comm;
                slot.counts.comm_ns = comm_ns;
                slot.counts.comm_gen = generation;
            }
            return true;
        }
    }
    if slot.gen != 0 && granted(index) != slot.gen {
        return false;
    }
    let key = task_key(dev, task);
    claim(slot, &key, task, generation);
    bump(&mut slot.counts, counter, n);
    true
}

/// The occupancy number userspace handed slot `index` back at on this CPU (0: none).
#[inline(always)]
fn granted(index: usize) -> u64 {
    SLOT_GRANTS.get(index as u32).copied().unwrap_or(0)
}

/// Make a free slot the task's, with zero counts. The occupancy number is written last, so
/// a reader that sees the new number sees the new key with it (userspace also reads a slot
/// that changed hands twice before it believes it). Field by field: no 64-byte value on the
/// stack.
#[inline(always)]
fn claim(slot: &mut CountSlot, key: &TaskKey, task: &mut Task, generation: u64) {
    let (comm, comm_ns) = task.named();
    let next = slot.gen + 1;
    slot.key = *key;
    let counts = &mut slot.counts;
    counts.node_reads_demand = 0;
    counts.node_reads_readahead = 0;
    counts.node_writes = 0;
    counts.checkpoints = 0;
    counts.comm = comm;
    counts.comm_ns = comm_ns;
    counts.comm_gen = generation;
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
    // SAFETY: the slot is a valid, aligned map value field for the program's run.
    unsafe { core::ptr::write_volatile(&mut slot.gen, next) };
}

/// Add `n` to one counter of the task's `NODE_COUNTS` entry, making the entry if need be.
#[inline(never)]
fn count_in_map(key: &TaskKey, counter: Counter, n: u64, task: &mut Task, generation: u64) {
    let key = *key;
    if bump_existing(&key, counter, n, task, generation) {
        return;
    }
    let (comm, comm_ns) = task.named();
    let mut fresh = TaskCounts {
        comm,
        comm_ns,
        comm_gen: generation,
        ..TaskCounts::default()
    };
    bump(&mut fresh, counter, n);
    // NOEXIST: if another CPU inserted the key since our lookup, BPF_ANY would replace its
    // value on every CPU and lose its count; instead we fail and bump our own CPU's slot.
    if NODE_COUNTS.insert(&key, &fresh, BPF_NOEXIST.into()).is_ok() {
        return;
    }
    if !bump_existing(&key, counter, n, task, generation) {
        count_fail();
    }
}

fn bump_existing(
    key: &TaskKey,
    counter: Counter,
    n: u64,
    task: &mut Task,
    generation: u64,
) -> bool {
    let Some(counts) = NODE_COUNTS.get_ptr_mut(key) else {
        return false;
    };
    // SAFETY: the pointer is this CPU's copy of the value, valid for the program's run, and no
    // other program touches this CPU's copy while we run.
    let counts = unsafe { &mut *counts };
    bump(counts, counter, n);
    // exec changes the comm within a thread group (sh -> cat): read it again after any
    // rename. A fresh per-CPU value has comm_gen 0 and no comm, so it is read then too.
    if counts.comm_gen != generation || counts.comm_ns == 0 {
        let (comm, comm_ns) = task.named();
        counts.comm = comm;
        counts.comm_ns = comm_ns;
        counts.comm_gen = generation;
    }
    true
}
