//! Access traces for `nodescope whatif` (issue #13): every lookup of a node block (a kprobe on
//! the node lookup function the planner found, e.g. `__get_node_page`) and every node page that
//! leaves the page cache (`filemap:mm_filemap_delete_from_page_cache` on F2FS's node inode).
//!
//! Lookups go to userspace in per-CPU batches (`AccessBatch`, one ring-buffer record per
//! `ACCESS_BATCH_RECORDS` lookups): a lookup only appends to its CPU's batch. Evictions, far
//! rarer, are single events.
//!
//! No offset is compiled in: userspace writes an `AccessLayout` into `ACCESS_LAYOUT` with the
//! struct offsets BTF gives and the tracepoint offsets its format file gives. Each program also
//! counts what it saw in `ACCESS_COUNTS` (exact even when the ring buffer overflows).
use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::{fentry, fexit, kprobe, kretprobe, map, raw_tracepoint, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray},
    programs::{
        FEntryContext, FExitContext, ProbeContext, RawTracePointContext, RetProbeContext,
        TracePointContext,
    },
};
use tracer_common::{
    retrieval_outcome, AccessBatch, AccessLayout, AccessRecord, BlockKey, EventKind,
    ACCESS_BATCH_MAGIC, ACCESS_BATCH_MAX_AGE_NS, ACCESS_BATCH_RECORDS, ACCESS_COUNT_DEVICE_READS,
    ACCESS_COUNT_EVICTIONS, ACCESS_COUNT_INODE_EVICTIONS, ACCESS_COUNT_LOCK_WAITS,
    ACCESS_COUNT_LOOKUPS, ACCESS_COUNT_SHRINKER_SCANS, ACCESS_COUNT_SLOTS,
    ACCESS_COUNT_WAITS_NOTED, LOOKUP_SAW_READ, LOOKUP_SAW_WAIT,
};

use crate::maps::{count_drops, emit_batched, fill_thread, EVENTS, WAKEUP_BYTES};

/// Index 0: the offsets, written by userspace before attaching.
#[map(name = "ACCESS_LAYOUT")]
static ACCESS_LAYOUT: Array<AccessLayout> = Array::with_max_entries(1, 0);

/// Device (s_dev) -> its node inode number, learnt from each lookup's `f2fs_sb_info`: the
/// eviction program keeps only pages of that inode on that device.
#[map(name = "NODE_INO")]
static NODE_INO: HashMap<u32, u32> = HashMap::with_max_entries(64, 0);

/// Per CPU, the file system whose device this CPU last looked up (index `SEEN_SBI`: its
/// `f2fs_sb_info` address; `SEEN_DEV`: the device; `SEEN_GENERATION`: `SB_GENERATION` then).
/// A lookup of the same file system in the same generation takes the device from here: no
/// read of `sbi->sb->s_dev` (two bpf_probe_read_kernel calls, most of the program's run time
/// under `cargo xtask vm-bench`), no hash lookup for the node inode.
#[map(name = "ACCESS_SEEN")]
static ACCESS_SEEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(3, 0);
const SEEN_SBI: u32 = 0;
const SEEN_DEV: u32 = 1;
const SEEN_GENERATION: u32 = 2;

/// Index 0: how many F2FS superblocks were torn down since the programs were loaded (a
/// kretprobe on `kill_f2fs_super`, after it freed the `f2fs_sb_info`). A new mount may get a
/// freed `f2fs_sb_info`'s address; a change here tells every CPU's cache the address may now
/// be another device's.
#[map(name = "SB_GENERATION")]
static SB_GENERATION: Array<u64> = Array::with_max_entries(1, 0);

/// Per-CPU counts, index = `ACCESS_COUNT_*`.
#[map(name = "ACCESS_COUNTS")]
static ACCESS_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(ACCESS_COUNT_SLOTS, 0);

/// Per CPU, the lookups not sent yet (index 0). A per-CPU value: a lookup appends to its own
/// CPU's batch with plain stores, no lock and no atomic.
#[map(name = "ACCESS_BATCH")]
static ACCESS_BATCH: PerCpuArray<AccessBatch> = PerCpuArray::with_max_entries(1, 0);

/// A timed lookup in progress (issue 51), per thread from its entry to its return: a lookup
/// that reads from disk sleeps and may return on another CPU, so a per-CPU slot cannot hold it.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LookupTiming {
    start_ns: u64,
    sbi: u64,
    nid: u64,
    /// `LOOKUP_SAW_*`, set by the node-read, restore and page-lock programs on this thread.
    seen: u32,
    /// Demand node reads on this thread during the lookup.
    reads: u32,
    /// Whether a block request of this lookup's read was seen issued on its thread, and the
    /// device time of its completed requests.
    issued: u64,
    device_ns: u64,
}

/// A timed lookup's block request in flight: its thread and when it was issued.
#[repr(C)]
#[derive(Clone, Copy)]
struct BlockIo {
    pid_tgid: u64,
    issue_ns: u64,
}

/// Requests by (device, sector). LRU: a completion the kernel did not run the program for
/// (another BPF program running on that CPU) leaves an entry that ages out.
#[map(name = "BLOCK_IO")]
static BLOCK_IO: LruHashMap<BlockKey, BlockIo> = LruHashMap::with_max_entries(4096, 0);

/// Timed lookups whose thread left its CPU (or read from disk) before they returned, by
/// thread; without the `sched_switch` hook (`AccessLayout::lookup_slots` 0), every timed lookup.
#[map(name = "LOOKUP_TIMING")]
static LOOKUP_TIMING: HashMap<u64, LookupTiming> = HashMap::with_max_entries(16384, 0);

/// Per CPU, the timed lookup running on it (`owner`: its thread's pid_tgid, 0 when none). A
/// lookup that returns on the CPU it started on, without its thread leaving the CPU, costs a
/// per-CPU store and load instead of a hash insert, lookup and delete, each taking a bucket
/// lock (under `cargo xtask vm-bench`, most of the timed hook's run time). Whenever the thread
/// leaves the CPU, the `sched_switch` program parks the lookup in `LOOKUP_TIMING` first, so a
/// thread's open lookup is always in its current CPU's slot or in the map.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LookupSlot {
    owner: u64,
    timing: LookupTiming,
}

#[map(name = "LOOKUP_SLOT")]
static LOOKUP_SLOT: PerCpuArray<LookupSlot> = PerCpuArray::with_max_entries(1, 0);

/// Whether timed lookups use the per-CPU slots (userspace hooked `sched_switch`).
#[inline(always)]
fn slots_on() -> bool {
    ACCESS_LAYOUT
        .get(0)
        .is_some_and(|layout| layout.lookup_slots != 0)
}

/// This thread's open timed lookup: in this CPU's slot, else in the map.
#[inline(always)]
fn open_lookup(pid_tgid: u64) -> Option<*mut LookupTiming> {
    if slots_on() {
        if let Some(slot) = LOOKUP_SLOT.get_ptr_mut(0) {
            // SAFETY: this CPU's slot; a program that runs on this CPU in the middle (one
            // that preempted this one) can only be another thread's after a `sched_switch`,
            // which parks this thread's lookup first.
            unsafe {
                if core::ptr::read_volatile(&(*slot).owner) == pid_tgid {
                    return Some(&mut (*slot).timing);
                }
            }
        }
    }
    LOOKUP_TIMING.get_ptr_mut(&pid_tgid)
}

/// Move this CPU's slot's lookup, if `owner` holds it, to the map: its thread leaves the CPU
/// (`sched_switch`), reads from disk, or another lookup needs the slot. The slot stays taken
/// when the map is full, so the lookup is not lost while its thread stays.
#[inline(always)]
fn park(slot: *mut LookupSlot, owner: u64) {
    // SAFETY: this CPU's slot (see open_lookup); the copy is taken before the owner is cleared.
    unsafe {
        if owner == 0 || core::ptr::read_volatile(&(*slot).owner) != owner {
            return;
        }
        let timing = (*slot).timing;
        if LOOKUP_TIMING.insert(&owner, &timing, 0).is_ok() {
            core::ptr::write_volatile(&mut (*slot).owner, 0);
        }
    }
}

/// `sched_switch` (a raw tracepoint, hooked only when lookups are timed), run in the context
/// of the thread leaving the CPU: its open lookup, if in this CPU's slot, moves to the map, as
/// the thread may come back on another CPU. It reads no argument: a raw tracepoint program
/// may read only the arguments its tracepoint has, and before Linux 5.18 `sched_switch` has
/// no `prev_state`.
#[raw_tracepoint]
pub fn f2fs_lookup_switch(_ctx: RawTracePointContext) -> u32 {
    park_current();
    0
}

/// The same where `sched_switch` passes `prev_state` (`AccessLayout::switch_state`, Linux
/// 5.18+: `(bool preempt, prev, next, unsigned int prev_state)`). A switch that is no
/// preemption, of a thread that is not runnable, is the thread blocking: in a timed lookup
/// that reads nothing itself, a wait on another's read (or on a lock another holds).
#[raw_tracepoint]
pub fn f2fs_lookup_switch_state(ctx: RawTracePointContext) -> u32 {
    let preempt: u64 = ctx.arg(0);
    let prev_state: u64 = ctx.arg(3);
    if preempt & 0xff == 0 && prev_state & 0xffff_ffff != 0 && lookup_saw(LOOKUP_SAW_WAIT) {
        count(ACCESS_COUNT_WAITS_NOTED);
    }
    park_current();
    0
}

#[inline(always)]
fn park_current() {
    if let Some(slot) = LOOKUP_SLOT.get_ptr_mut(0) {
        park(slot, bpf_get_current_pid_tgid());
    }
}

/// Note `what` (`LOOKUP_SAW_*`) in this thread's timed lookup, if one is open; a read is also
/// counted, and the lookup parked in the map: its thread will sleep on the read, and the block
/// layer's completion, on any CPU, finds it there.
#[inline(always)]
pub(crate) fn lookup_saw(what: u32) -> bool {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(timing) = open_lookup(pid_tgid) else {
        return false;
    };
    // SAFETY: this thread's entry; only this thread writes it (see open_lookup), and the
    // map's values are preallocated, so the pointer stays valid for the program's run.
    unsafe {
        (*timing).seen |= what;
        if what == LOOKUP_SAW_READ {
            (*timing).reads += 1;
        }
    }
    if what == LOOKUP_SAW_READ && slots_on() {
        if let Some(slot) = LOOKUP_SLOT.get_ptr_mut(0) {
            park(slot, pid_tgid);
        }
    }
    true
}

fn count(index: u32) {
    if let Some(slot) = ACCESS_COUNTS.get_ptr_mut(index) {
        // SAFETY: the slot belongs to this CPU and BPF programs are not preempted on it.
        unsafe { *slot += 1 };
    }
}

/// Read a `T` at `base + offset` in kernel memory.
fn read_at<T>(base: u64, offset: u32) -> Option<T> {
    if base == 0 {
        return None;
    }
    let address = base.wrapping_add(u64::from(offset)) as *const T;
    // SAFETY: bpf_probe_read_kernel checks the address and fails cleanly on a bad one.
    unsafe { bpf_probe_read_kernel(address) }.ok()
}

/// Entry of the node lookup: `(struct f2fs_sb_info *sbi, pgoff_t nid, ...)` on every variant
/// (`__get_node_page`, `__get_node_folio`, `f2fs_get_node_page`, `f2fs_get_node_folio`).
#[kprobe]
pub fn f2fs_node_access(ctx: ProbeContext) -> u32 {
    if let (Some(sbi), Some(nid)) = (ctx.arg(0), ctx.arg(1)) {
        let _ = on_entry(sbi, nid);
    }
    0
}

/// The same program on a BPF trampoline, where the kernel has BTF and trampolines: the call
/// into it is a direct call from the function's entry, not a kprobe's ftrace handler with its
/// saved registers. Userspace loads it against the lookup function's BTF id (the f2fs module's
/// split BTF when F2FS is a module) and falls back to the kprobe when that fails.
#[fentry]
pub fn f2fs_node_access_fentry(ctx: FEntryContext) -> u32 {
    let _ = on_entry(ctx.arg(0), ctx.arg(1));
    0
}

/// A lookup's entry: untimed, it is recorded now; timed, its start is kept for its return.
#[inline(always)]
fn on_entry(sbi: u64, nid: u64) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    if layout.time_lookups == 0 {
        return on_access(sbi, nid, layout, Timed::No);
    }
    let timing = LookupTiming {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        sbi,
        nid,
        seen: 0,
        reads: 0,
        issued: 0,
        device_ns: 0,
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    if layout.lookup_slots != 0 {
        if let Some(slot) = LOOKUP_SLOT.get_ptr_mut(0) {
            // SAFETY: this CPU's slot (see open_lookup). Another thread's lookup still in it
            // (its return or its switch missed) is parked, not lost. The owner is cleared
            // while the fields are written and set last.
            unsafe {
                let owner = core::ptr::read_volatile(&(*slot).owner);
                if owner != pid_tgid {
                    park(slot, owner);
                    if core::ptr::read_volatile(&(*slot).owner) != 0 {
                        // The map is full: this lookup goes untimed rather than lose that one.
                        return insert_timing(pid_tgid, &timing);
                    }
                }
                core::ptr::write_volatile(&mut (*slot).owner, 0);
                (*slot).timing = timing;
                core::ptr::write_volatile(&mut (*slot).owner, pid_tgid);
            }
            return Some(());
        }
    }
    insert_timing(pid_tgid, &timing)
}

/// One open lookup per thread (none calls another): a newer entry replaces an entry whose
/// return was missed.
#[inline(always)]
fn insert_timing(pid_tgid: u64, timing: &LookupTiming) -> Option<()> {
    LOOKUP_TIMING.insert(&pid_tgid, timing, 0).ok()
}

/// Take this thread's open lookup: from this CPU's slot, else from the map.
#[inline(always)]
fn take_lookup(pid_tgid: u64) -> Option<LookupTiming> {
    if slots_on() {
        if let Some(slot) = LOOKUP_SLOT.get_ptr_mut(0) {
            // SAFETY: this CPU's slot (see open_lookup); copied before the owner is cleared.
            unsafe {
                if core::ptr::read_volatile(&(*slot).owner) == pid_tgid {
                    let timing = (*slot).timing;
                    core::ptr::write_volatile(&mut (*slot).owner, 0);
                    return Some(timing);
                }
            }
        }
    }
    // SAFETY: a plain copy of this thread's entry, removed at once.
    let timing = unsafe { LOOKUP_TIMING.get(&pid_tgid) }.copied();
    if timing.is_some() {
        let _ = LOOKUP_TIMING.remove(&pid_tgid);
    }
    timing
}

/// Return of a timed lookup (a kretprobe on each lookup function; `ret` the pointer it returns).
#[kretprobe]
pub fn f2fs_node_access_return(ctx: RetProbeContext) -> u32 {
    let ret: i64 = ctx.ret();
    let _ = on_return(ret);
    0
}

/// The same on a BPF trampoline (fexit): the return value through bpf_get_func_ret, whatever
/// the function's arity (6.15's folio lookups gained a third argument).
#[fexit]
pub fn f2fs_node_access_fexit(ctx: FExitContext) -> u32 {
    let mut value = 0u64;
    // SAFETY: the helper writes one u64 into `value`, or fails without writing.
    let _ = unsafe {
        aya_ebpf::helpers::generated::bpf_get_func_ret(
            aya_ebpf::EbpfContext::as_ptr(&ctx),
            &mut value,
        )
    };
    let _ = on_return(value as i64);
    0
}

/// A timed lookup returned `ret`: its time, its outcome (an `ERR_PTR` is an error; else what
/// its thread saw meanwhile), recorded as an untimed lookup is. A return without its entry
/// (the program attached mid-lookup) is neither counted nor recorded.
#[inline(always)]
fn on_return(ret: i64) -> Option<()> {
    let timing = take_lookup(bpf_get_current_pid_tgid())?;
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let latency = unsafe { bpf_ktime_get_ns() }.saturating_sub(timing.start_ns);
    let error = (-4095..0).contains(&ret);
    let timed = Timed::Yes {
        start_ns: timing.start_ns,
        latency_ns: latency.clamp(1, u64::from(u32::MAX)) as u32,
        outcome: retrieval_outcome(timing.seen, error),
        reads: timing.reads.min(255) as u8,
        device_ns: timing.device_ns.min(u64::from(u32::MAX)) as u32,
    };
    let layout = ACCESS_LAYOUT.get(0)?;
    on_access(timing.sbi, timing.nid, layout, timed)
}

/// Entry of the page cache's sleeping page lock (`__folio_lock`, `__lock_page` before 5.16),
/// attached only when lookups are timed: a timed lookup that gets here waits for a node page
/// another task holds locked, its read or readahead in flight.
#[kprobe]
pub fn f2fs_lookup_lock_wait(_ctx: ProbeContext) -> u32 {
    count(ACCESS_COUNT_LOCK_WAITS);
    if lookup_saw(LOOKUP_SAW_WAIT) {
        count(ACCESS_COUNT_WAITS_NOTED);
    }
    0
}

/// `block:block_rq_issue`, hooked only when lookups are timed: a request issued on the thread
/// of a timed lookup that has submitted its read (and none issued yet) is that read's; its
/// issue time is kept by device and sector until it completes.
#[tracepoint]
pub fn f2fs_lookup_block_issue(ctx: TracePointContext) -> u32 {
    let _ = on_block_issue(&ctx);
    0
}

fn on_block_issue(ctx: &TracePointContext) -> Option<()> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let timing = open_lookup(pid_tgid)?;
    let layout = ACCESS_LAYOUT.get(0)?;
    // SAFETY: this thread's entry, written only by this thread (see lookup_saw).
    unsafe {
        if (*timing).seen & LOOKUP_SAW_READ == 0 || (*timing).issued != 0 {
            return None;
        }
        (*timing).issued = 1;
    }
    let key = block_key(ctx, layout.block_issue_dev, layout.block_issue_sector)?;
    let io = BlockIo {
        pid_tgid,
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        issue_ns: unsafe { bpf_ktime_get_ns() },
    };
    BLOCK_IO.insert(&key, &io, 0).ok()
}

/// `block:block_rq_complete`: a timed lookup's request done; its device time goes to the
/// lookup, if it is still open (it waits for this read, so it is).
#[tracepoint]
pub fn f2fs_lookup_block_complete(ctx: TracePointContext) -> u32 {
    let _ = on_block_complete(&ctx);
    0
}

fn on_block_complete(ctx: &TracePointContext) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    let key = block_key(ctx, layout.block_complete_dev, layout.block_complete_sector)?;
    // SAFETY: a plain copy, removed at once.
    let io = unsafe { BLOCK_IO.get(&key) }.copied()?;
    let _ = BLOCK_IO.remove(&key);
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let took = unsafe { bpf_ktime_get_ns() }.saturating_sub(io.issue_ns);
    let timing = LOOKUP_TIMING.get_ptr_mut(&io.pid_tgid)?;
    // SAFETY: the lookup's entry; its thread sleeps on this very read, so nothing else writes
    // it meanwhile.
    unsafe { (*timing).device_ns += took.max(1) };
    Some(())
}

/// A block request's key from its record: `dev` and `sector` at the format file's offsets.
fn block_key(ctx: &TracePointContext, dev: u16, sector: u16) -> Option<BlockKey> {
    // SAFETY: offsets from this tracepoint's format file, inside the record.
    let dev: u32 = unsafe { ctx.read_at(usize::from(dev)) }.ok()?;
    // SAFETY: as above.
    let sector: u64 = unsafe { ctx.read_at(usize::from(sector)) }.ok()?;
    Some(BlockKey {
        dev,
        _pad: 0,
        sector,
    })
}

/// A lookup as recorded: untimed (the tick's time) or timed (its start, time and outcome).
#[derive(Clone, Copy)]
enum Timed {
    No,
    Yes {
        start_ns: u64,
        latency_ns: u32,
        outcome: u8,
        reads: u8,
        device_ns: u32,
    },
}

#[inline(always)]
fn on_access(sbi: u64, nid: u64, layout: &AccessLayout, timed: Timed) -> Option<()> {
    let batch = ACCESS_BATCH.get_ptr_mut(0)?;
    // SAFETY: the batch and the device cache are this CPU's. `busy` is set around everything
    // that touches them, so that what else may run on this CPU in the middle leaves them
    // alone: the flush program (an interrupt, `f2fs_access_flush`) and, on a preemptible
    // kernel (Android's), another lookup program: trampolines run with migration disabled, not
    // preemption, and each lookup function has a program of its own. Nothing is read before
    // `busy` is set, so a lookup that preempts this one between the check and the set
    // finishes first and this one then sees its work. The volatile accesses keep that order.
    unsafe {
        if core::ptr::read_volatile(&(*batch).busy) != 0 {
            return on_access_unbatched(sbi, nid, layout, timed);
        }
        core::ptr::write_volatile(&mut (*batch).busy, 1);
        if let Some(dev) = device_of(sbi, layout) {
            count(ACCESS_COUNT_LOOKUPS);
            // A process this CPU did not look up for last goes out on its own, named.
            let pid_tgid = bpf_get_current_pid_tgid();
            let tgid = (pid_tgid >> 32) as u32;
            if tgid != (*batch).last_tgid {
                (*batch).last_tgid = tgid;
                emit_single(dev, nid, timed, true);
            } else {
                append(&mut *batch, pid_tgid, dev, nid, timed);
            }
        }
        core::ptr::write_volatile(&mut (*batch).busy, 0);
    }
    Some(())
}

/// A lookup that found its CPU's batch busy (it preempted another lookup in the middle): its
/// device read through the pointers, and one event through the ring buffer's own lock.
fn on_access_unbatched(sbi: u64, nid: u64, layout: &AccessLayout, timed: Timed) -> Option<()> {
    let sb: u64 = read_at(sbi, layout.sbi_sb)?;
    let dev: u32 = read_at(sb, layout.sb_s_dev)?;
    count(ACCESS_COUNT_LOOKUPS);
    count(ACCESS_COUNT_DEVICE_READS);
    emit_single(dev, nid, timed, false);
    Some(())
}

/// One lookup as a single event through the ring buffer's own lock; `named`: with its task's
/// uid and comm (the first lookup of a process on this CPU), which the reader keeps for the
/// process's batched lookups.
#[inline(always)]
fn emit_single(dev: u32, nid: u64, timed: Timed, named: bool) {
    emit_batched(|event| {
        if named {
            crate::maps::fill_task(event, EventKind::NodeAccess);
        } else {
            fill_thread(event, EventKind::NodeAccess);
        }
        event.dev = dev;
        event.nid = nid as u32;
        if let Timed::Yes {
            start_ns,
            latency_ns,
            outcome,
            reads,
            device_ns,
        } = timed
        {
            event.ts_ns = start_ns;
            event.latency_ns = u64::from(latency_ns) | u64::from(device_ns) << 32;
            event.reason = outcome;
            event.len = u32::from(reads);
        }
    });
}

#[inline(always)]
fn append(batch: &mut AccessBatch, pid_tgid: u64, dev: u32, nid: u64, timed: Timed) {
    let (ts_ns, latency_ns, outcome, reads, device_ns) = match timed {
        Timed::No => (tick_time(batch), 0, 0, 0, 0),
        Timed::Yes {
            start_ns,
            latency_ns,
            outcome,
            reads,
            device_ns,
        } => (start_ns, latency_ns, outcome, reads, device_ns),
    };
    let len = batch.len as usize;
    let Some(record) = batch.records.get_mut(len) else {
        batch.len = 0;
        return;
    };
    *record = AccessRecord {
        ts_ns,
        pid: pid_tgid as u32,
        tgid: (pid_tgid >> 32) as u32,
        dev,
        nid: nid as u32,
        latency_ns,
        outcome,
        reads,
        _pad: [0; 2],
        device_ns,
        _pad2: 0,
    };
    if len == 0 {
        batch.first_ts_ns = ts_ns;
    }
    batch.len = len as u32 + 1;
    if len + 1 >= ACCESS_BATCH_RECORDS
        || ts_ns.wrapping_sub(batch.first_ts_ns) >= ACCESS_BATCH_MAX_AGE_NS
    {
        send(batch);
    }
}

/// The clock as this CPU last read it in the current tick, read now if it has not been (see
/// `AccessRecord`): jiffies is a load of a global, the clock read a clocksource access.
fn tick_time(batch: &mut AccessBatch) -> u64 {
    // SAFETY: bpf_jiffies64 and bpf_ktime_get_ns have no preconditions.
    let jiffies = unsafe { aya_ebpf::helpers::bpf_jiffies64() };
    if jiffies != batch.tick_jiffies || batch.tick_ts_ns == 0 {
        batch.tick_jiffies = jiffies;
        // SAFETY: as above.
        batch.tick_ts_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    }
    batch.tick_ts_ns
}

/// Put the batch in the ring buffer as one record and start a new one. The reader is woken as
/// for single events, once `WAKEUP_BYTES` wait; a full ring loses the batch's lookups, counted.
fn send(batch: &mut AccessBatch) {
    if batch.len == 0 {
        return;
    }
    batch.magic = ACCESS_BATCH_MAGIC;
    let wakeup = if EVENTS.query(BPF_RB_AVAIL_DATA.into()) >= WAKEUP_BYTES {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    if EVENTS
        .output::<AccessBatch>(&*batch, wakeup.into())
        .is_err()
    {
        count_drops(u64::from(batch.len));
    }
    batch.len = 0;
}

/// Never attached: userspace runs it on a CPU whose batch waits (BPF_PROG_TEST_RUN with
/// BPF_F_TEST_RUN_ON_CPU, Linux 5.10: an interrupt on that CPU, or the caller itself on its own
/// CPU) to have that batch sent now. Returns 1 when it found a lookup in the middle of an
/// append and left the batch.
#[raw_tracepoint]
pub fn f2fs_access_flush(_ctx: RawTracePointContext) -> u32 {
    let Some(batch) = ACCESS_BATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: this CPU's batch; an append this interrupt stopped has set `busy`, and nothing
    // else on this CPU can run until this program returns.
    unsafe {
        if core::ptr::read_volatile(&(*batch).busy) != 0 {
            return 1;
        }
        send(&mut *batch);
    }
    0
}

/// The device of the file system `sbi` points to: this CPU's cached one when it is the same
/// file system in the same generation and userspace hooked the teardowns
/// (`AccessLayout::cache_device`), else read through the pointers, and the node inode of that
/// device recorded for the eviction filter. Called with the batch `busy` (the cache's guard).
fn device_of(sbi: u64, layout: &AccessLayout) -> Option<u32> {
    let seen_sbi = ACCESS_SEEN.get_ptr_mut(SEEN_SBI)?;
    let seen_dev = ACCESS_SEEN.get_ptr_mut(SEEN_DEV)?;
    let seen_generation = ACCESS_SEEN.get_ptr_mut(SEEN_GENERATION)?;
    let generation = SB_GENERATION.get(0).copied().unwrap_or(0);
    // SAFETY: the slots are this CPU's, and the caller holds them (`busy`).
    unsafe {
        if layout.cache_device != 0 && *seen_sbi == sbi && *seen_generation == generation {
            return Some(*seen_dev as u32);
        }
    }
    let sb: u64 = read_at(sbi, layout.sbi_sb)?;
    let dev: u32 = read_at(sb, layout.sb_s_dev)?;
    count(ACCESS_COUNT_DEVICE_READS);
    if remember_node_ino(sbi, dev, layout) {
        // SAFETY: as above.
        unsafe {
            *seen_sbi = sbi;
            *seen_dev = u64::from(dev);
            *seen_generation = generation;
        }
    }
    Some(dev)
}

/// Record this device's node inode for the eviction filter. False when it could not be.
fn remember_node_ino(sbi: u64, dev: u32, layout: &AccessLayout) -> bool {
    let Some(node_ino) = read_at::<u32>(sbi, layout.sbi_node_ino) else {
        return false;
    };
    // SAFETY: the value is a plain u32 copied out at once.
    unsafe { NODE_INO.get(&dev) }.copied() == Some(node_ino)
        || NODE_INO.insert(&dev, &node_ino, 0).is_ok()
}

/// Return of `kill_f2fs_super`: an F2FS superblock and its `f2fs_sb_info` are gone.
#[kretprobe]
pub fn f2fs_sb_gone(_ctx: RetProbeContext) -> u32 {
    if let Some(generation) = SB_GENERATION.get_ptr_mut(0) {
        // SAFETY: a valid map value; two teardowns at once may both write the same new value,
        // which still differs from every CPU's cached one, all that matters.
        unsafe { *generation += 1 };
    }
    0
}

/// mm_filemap_delete_from_page_cache: a page (folio) left some file's page cache; keep those of
/// a known F2FS device's node inode, whose page index is the nid.
#[tracepoint]
pub fn f2fs_node_evict(ctx: TracePointContext) -> u32 {
    let _ = on_evict(&ctx);
    0
}

fn on_evict(ctx: &TracePointContext) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    // SAFETY: bpf_probe_read_kernel copes with any address; the offsets come from this
    // tracepoint's format file, so they lie inside the record.
    let dev: u32 = unsafe { ctx.read_at(usize::from(layout.evict_dev)) }.ok()?;
    // SAFETY: NODE_INO values are plain u32s copied out at once.
    let node_ino = unsafe { NODE_INO.get(&dev) }.copied()?;
    // SAFETY: as above, an offset from the format file.
    let ino: u64 = unsafe { ctx.read_at(usize::from(layout.evict_ino)) }.ok()?;
    if ino != u64::from(node_ino) {
        return None;
    }
    // SAFETY: as above.
    let index: u64 = unsafe { ctx.read_at(usize::from(layout.evict_index)) }.ok()?;
    count(ACCESS_COUNT_EVICTIONS);
    emit_batched(|event| {
        fill_thread(event, EventKind::NodeEvict);
        event.dev = dev;
        event.nid = index as u32;
    });
    Some(())
}

/// f2fs:f2fs_evict_inode: an inode left F2FS's inode cache; kept for devices whose lookups are
/// traced (`NODE_INO` has them), so another mount's inodes are not.
#[tracepoint]
pub fn f2fs_inode_evict(ctx: TracePointContext) -> u32 {
    let _ = on_inode_evict(&ctx);
    0
}

fn on_inode_evict(ctx: &TracePointContext) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    // SAFETY: bpf_probe_read_kernel copes with any address; the offsets come from this
    // tracepoint's format file, so they lie inside the record.
    let dev: u32 = unsafe { ctx.read_at(usize::from(layout.inode_evict_dev)) }.ok()?;
    // SAFETY: NODE_INO values are plain u32s copied out at once.
    unsafe { NODE_INO.get(&dev) }?;
    // SAFETY: as above, an offset from the format file.
    let ino: u64 = unsafe { ctx.read_at(usize::from(layout.inode_evict_ino)) }.ok()?;
    count(ACCESS_COUNT_INODE_EVICTIONS);
    emit_batched(|event| {
        fill_thread(event, EventKind::InodeEvict);
        event.dev = dev;
        event.nid = ino as u32;
    });
    Some(())
}

/// vmscan:mm_shrink_slab_start: reclaim asks a shrinker to scan; kept for F2FS's shrinker only
/// (its scan function's address, from kallsyms), with what F2FS counted, what it is asked to
/// scan and the reclaim priority: the what-if replays the kernel's reclaim from these.
#[tracepoint]
pub fn f2fs_shrinker_scan(ctx: TracePointContext) -> u32 {
    let _ = on_shrinker_scan(&ctx);
    0
}

fn on_shrinker_scan(ctx: &TracePointContext) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    if layout.shrink_scan_fn == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address; the offsets come from this
    // tracepoint's format file, so they lie inside the record.
    let shrink: u64 = unsafe { ctx.read_at(usize::from(layout.shrink_fn)) }.ok()?;
    if shrink != layout.shrink_scan_fn {
        return None;
    }
    // SAFETY: as above, offsets from the format file.
    let items: u64 = unsafe { ctx.read_at(usize::from(layout.shrink_items)) }.ok()?;
    // SAFETY: as above.
    let total: u64 = unsafe { ctx.read_at(usize::from(layout.shrink_total)) }.ok()?;
    // SAFETY: as above.
    let priority: i32 = unsafe { ctx.read_at(usize::from(layout.shrink_priority)) }.ok()?;
    count(ACCESS_COUNT_SHRINKER_SCANS);
    emit_batched(|event| {
        fill_thread(event, EventKind::ShrinkerScan);
        event.nid = items.min(u64::from(u32::MAX)) as u32;
        event.len = total.min(u64::from(u32::MAX)) as u32;
        event.reason = priority.clamp(0, i32::from(u8::MAX)) as u8;
    });
    Some(())
}
