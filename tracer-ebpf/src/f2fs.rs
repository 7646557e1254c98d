//! Programs on mainline F2FS tracepoints (node reads, node writes, checkpoints), counted
//! per task in the kernel and sent through the ring buffer.
//!
//! Field offsets differ between kernels and between the page/folio/cache variants, so no
//! offset is compiled in: userspace parses each tracepoint's `format` file and writes a
//! `TracepointLayout` per tracepoint into `TP_LAYOUT` before attaching.
//!
//! Every event is counted exactly, in the per-CPU `NODE_COUNTS` map (no atomics needed,
//! userspace sums the CPUs). Node writes and checkpoints are also sent individually through the
//! `EVENTS` ring buffer, node reads only when userspace asks (`CONFIG_NODE_READ_EVENTS`:
//! `record` does); a full buffer costs an event (counted in `DROPS`) but never a count.
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_uid_gid, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_kernel_buf,
    },
    macros::{kprobe, kretprobe, map, tracepoint},
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext as _,
};
use tracer_common::{
    CountSlot, EventKind, SlotTable, TaskCounts, TaskKey, TracepointLayout, COMM_LEN,
    CONFIG_NODE_READ_EVENTS, CONFIG_RAHEAD_BIT, COUNT_SLOTS, CP_PHASE_FINISH_BLOCK_OPS,
    CP_PHASE_FINISH_CHECKPOINT, CP_PHASE_START_BLOCK_OPS, F2FS_BLOCK_BYTES, F2FS_PAGE_TYPE_NODE,
    FIELD_ABSENT, FLAG_READAHEAD, FLAG_SYNC, REQ_OP_READ, TP_COUNT, TP_SUBMIT_PAGE_BIO,
    TP_SUBMIT_PAGE_WRITE, TP_SUBMIT_READ_BIO, TP_WRITE_CHECKPOINT,
};

use crate::maps::{config, emit, emit_batched, Current};

/// Field offsets per tracepoint (index = `TP_*`), from the format files.
#[map(name = "TP_LAYOUT")]
static TP_LAYOUT: Array<TracepointLayout> = Array::with_max_entries(TP_COUNT, 0);

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

/// Bytes of a tracepoint record copied at once: every field these programs read lies in the
/// first 64 bytes of F2FS's records (f2fs_submit_page_bio's last, `type`, is at 52 on 6.1 and
/// 6.12); a field beyond is read on its own.
const RECORD_BYTES: usize = 64;
/// Bytes after the copy in its map value, never written: a field read at an offset masked
/// to below RECORD_BYTES stays inside the value whatever the verifier knows of the offset.
const RECORD_SLACK: usize = 8;

/// This CPU's copy of the record being handled. One bpf_probe_read_kernel for the whole
/// record instead of one per field (each a helper call). A map value, not the stack: reading
/// the stack at a run-time offset needs kernel 5.12, a map value does not.
#[map(name = "TP_RECORD")]
static TP_RECORD: PerCpuArray<[u8; RECORD_BYTES + RECORD_SLACK]> =
    PerCpuArray::with_max_entries(1, 0);

/// Increments that found `NODE_COUNTS` full (index 0): shown to the user, never hidden.
#[map(name = "COUNT_FAILS")]
static COUNT_FAILS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Kprobe fallback: read_node_page's op_flags, keyed by thread, from entry to return.
#[map(name = "READ_NODE_ARGS")]
static READ_NODE_ARGS: HashMap<u64, u32> = HashMap::with_max_entries(4096, 0);

/// Kprobe fallback: threads currently inside f2fs_ra_node_page (their reads are readahead).
#[map(name = "RA_ACTIVE")]
static RA_ACTIVE: HashMap<u64, u32> = HashMap::with_max_entries(4096, 0);

#[derive(Clone, Copy)]
enum Counter {
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
fn slot_table() -> Option<&'static mut SlotTable> {
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
fn count(dev: u32, counter: Counter, n: u64, task: &mut Task) {
    count_with(slot_table(), dev, counter, n, task);
}

/// `count` with this CPU's slot table already looked up (None: the map alone).
#[inline(always)]
fn count_with(table: Option<&mut SlotTable>, dev: u32, counter: Counter, n: u64, task: &mut Task) {
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

pub(crate) fn layout(index: u32) -> Option<TracepointLayout> {
    TP_LAYOUT.get(index).copied()
}

/// A tracepoint record: this CPU's copy of its first RECORD_BYTES, if it could be made.
struct Record<'a> {
    ctx: &'a TracePointContext,
    copy: Option<&'a [u8; RECORD_BYTES + RECORD_SLACK]>,
}

impl<'a> Record<'a> {
    fn copy(ctx: &'a TracePointContext) -> Record<'a> {
        let copy = TP_RECORD.get_ptr_mut(0).and_then(|slot| {
            // SAFETY: the slot is this CPU's map value, valid for the program's run, and no
            // other program runs on this CPU meanwhile; bpf_probe_read_kernel copes with any
            // source address, and the record lies at the start of the kernel's 8 KiB per-CPU
            // trace buffer, so RECORD_BYTES from its start are in that buffer.
            let slot = unsafe { &mut *slot };
            unsafe {
                bpf_probe_read_kernel_buf(ctx.as_ptr() as *const u8, &mut slot[..RECORD_BYTES])
            }
            .ok()?;
            Some(&*slot)
        });
        Record { ctx, copy }
    }

    /// Read a field at a run-time offset; `None` when the layout says the field is absent.
    fn field<T: Copy>(&self, offset: u16) -> Option<T> {
        if offset == FIELD_ABSENT {
            return None;
        }
        let at = usize::from(offset);
        match self.copy {
            Some(copy) if at + core::mem::size_of::<T>() <= RECORD_BYTES => {
                // The check above is the truth; the mask (a no-op after it) is for the
                // verifier: the compiler may check one register and read with another filled
                // from the same stack slot, whose bound 6.1's verifier does not know (it
                // rejected f2fs_node_write so). Opaque, so that the compiler keeps it.
                let at = core::hint::black_box(at) & (RECORD_BYTES - 1);
                // SAFETY: at < RECORD_BYTES and size_of::<T>() <= RECORD_SLACK (fields are
                // integers of at most 8 bytes), so the read stays in the map value; the value
                // is plain data, valid for any bytes.
                Some(unsafe { core::ptr::read_unaligned(copy.as_ptr().add(at) as *const T) })
            }
            _ => field(self.ctx, offset),
        }
    }
}

/// Read a field at a run-time offset; `None` when the layout says the field is absent.
pub(crate) fn field<T>(ctx: &TracePointContext, offset: u16) -> Option<T> {
    if offset == FIELD_ABSENT {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copes with any address; the offset comes from this
    // tracepoint's format file, so it lies inside the record.
    unsafe { ctx.read_at::<T>(usize::from(offset)) }.ok()
}

fn bit(flags: u32, bit: u32) -> bool {
    bit < 32 && (flags >> bit) & 1 != 0
}

/// Count and emit `blocks` node reads by the current task. Inlined: BPF calls take at most
/// five arguments.
#[inline(always)]
fn node_read(dev: u32, nid: u32, op_flags: u32, rahead_bit: u32, sync_bit: u32, blocks: u32) {
    let readahead = bit(op_flags, rahead_bit);
    let counter = if readahead {
        Counter::Readahead
    } else {
        Counter::Demand
    };
    if config(CONFIG_NODE_READ_EVENTS) == 0 {
        count(dev, counter, u64::from(blocks), &mut Task::read());
        return;
    }
    let current = Current::read();
    count(dev, counter, u64::from(blocks), &mut Task::of(&current));
    let mut flags = 0;
    if readahead {
        flags |= FLAG_READAHEAD;
    }
    if bit(op_flags, sync_bit) {
        flags |= FLAG_SYNC;
    }
    emit_batched(|event| {
        current.fill(event, EventKind::NodeRead);
        event.dev = dev;
        event.nid = nid;
        event.flags = flags;
        event.len = blocks * F2FS_BLOCK_BYTES;
    });
}

/// f2fs_submit_page_bio / f2fs_submit_folio_bio: one node block per event.
#[tracepoint]
pub fn f2fs_node_read_page(ctx: TracePointContext) -> u32 {
    let _ = on_page_bio(&ctx);
    0
}

/// The (op_flags, dev) of a submission that is a node read; None for anything else.
fn node_read_submission(record: &Record, layout: &TracepointLayout) -> Option<(u32, u32)> {
    let page_type: i32 = record.field(layout.type_)?;
    let op: u32 = record.field(layout.op)?;
    if page_type != F2FS_PAGE_TYPE_NODE || op != REQ_OP_READ {
        return None;
    }
    Some((record.field(layout.op_flags)?, record.field(layout.dev)?))
}

fn on_page_bio(ctx: &TracePointContext) -> Option<()> {
    if let Some(table) = slot_table() {
        if table.fast_node_reads != 0 {
            return fast_node_read(ctx, table);
        }
    }
    let layout = layout(TP_SUBMIT_PAGE_BIO)?;
    let (op_flags, dev, nid) = if layout.is_mainline_page_bio() {
        mainline_node_read(ctx)?
    } else {
        let record = Record::copy(ctx);
        let (op_flags, dev) = node_read_submission(&record, &layout)?;
        // For node pages the page index is the nid.
        let nid: u64 = record.field(layout.index).unwrap_or(0);
        (op_flags, dev, nid)
    };
    let (ra, sync) = (layout.rahead_bit.into(), layout.sync_bit.into());
    node_read(dev, nid as u32, op_flags, ra, sync, 1);
    Some(())
}

/// The node-read program's common case (`SlotTable::fast_node_reads`: the mainline layout,
/// counts only): the record's fields at constant offsets, two task helpers, this CPU's slot.
/// No other map is looked up and nothing is copied, so it touches few memory pages, which is
/// most of what an event costs (issue 16's vm-bench).
#[inline(always)]
fn fast_node_read(ctx: &TracePointContext, table: &mut SlotTable) -> Option<()> {
    let (op_flags, dev, _nid) = mainline_node_read(ctx)?;
    let counter = if bit(op_flags, table.rahead_bit) {
        Counter::Readahead
    } else {
        Counter::Demand
    };
    count_with(Some(table), dev, counter, 1, &mut Task::read());
    Some(())
}

/// f2fs_submit_page_bio's field offsets on 6.1 .. 6.12 (`TracepointLayout::MAINLINE_PAGE_BIO`).
/// When the layout userspace parsed from this kernel's format file is this one, the program
/// reads the fields straight from the record at these constant offsets (plain loads the
/// verifier checks against the tracepoint's context) instead of copying the record with
/// bpf_probe_read_kernel; any other layout takes the copy.
const MAINLINE_DEV: u16 = TracepointLayout::MAINLINE_PAGE_BIO.dev;
const MAINLINE_INDEX: u16 = TracepointLayout::MAINLINE_PAGE_BIO.index;
const MAINLINE_OP: u16 = TracepointLayout::MAINLINE_PAGE_BIO.op;
const MAINLINE_OP_FLAGS: u16 = TracepointLayout::MAINLINE_PAGE_BIO.op_flags;
const MAINLINE_TYPE: u16 = TracepointLayout::MAINLINE_PAGE_BIO.type_;

/// The (op_flags, dev, nid) of a mainline-layout submission that is a node read.
#[inline(always)]
fn mainline_node_read(ctx: &TracePointContext) -> Option<(u32, u32, u64)> {
    let page_type: i32 = record_at::<i32, { MAINLINE_TYPE as usize }>(ctx);
    let op: u32 = record_at::<u32, { MAINLINE_OP as usize }>(ctx);
    if page_type != F2FS_PAGE_TYPE_NODE || op != REQ_OP_READ {
        return None;
    }
    Some((
        record_at::<u32, { MAINLINE_OP_FLAGS as usize }>(ctx),
        record_at::<u32, { MAINLINE_DEV as usize }>(ctx),
        record_at::<u64, { MAINLINE_INDEX as usize }>(ctx),
    ))
}

/// The record's field at a constant offset, loaded directly from the context.
#[inline(always)]
fn record_at<T: Copy, const OFFSET: usize>(ctx: &TracePointContext) -> T {
    // SAFETY: a tracepoint program's context is its record, which the verifier lets it read at
    // constant, size-aligned offsets from 8 up (it rejects the program otherwise); the callers'
    // offsets are aligned to T and lie in the record (the layout matched them). Volatile: one
    // load of exactly this size at exactly this constant offset, as the verifier requires.
    unsafe { core::ptr::read_volatile((ctx.as_ptr() as *const u8).add(OFFSET) as *const T) }
}

/// f2fs_submit_read_bio: kernels whose node reads go through the metadata cache (dev-test)
/// only fire this one, per bio.
#[tracepoint]
pub fn f2fs_node_read_bio(ctx: TracePointContext) -> u32 {
    let _ = on_read_bio(&ctx);
    0
}

fn on_read_bio(ctx: &TracePointContext) -> Option<()> {
    let layout = layout(TP_SUBMIT_READ_BIO)?;
    let record = Record::copy(ctx);
    let (op_flags, dev) = node_read_submission(&record, &layout)?;
    let bytes: u32 = record.field(layout.size)?;

    // iostat counts blocks, so a multi-block bio counts as its blocks.
    let blocks = (bytes / F2FS_BLOCK_BYTES).max(1);
    let (ra, sync) = (layout.rahead_bit.into(), layout.sync_bit.into());
    node_read(dev, 0, op_flags, ra, sync, blocks);
    Some(())
}

/// f2fs_submit_page_write: node block writes (type NODE, any temperature).
#[tracepoint]
pub fn f2fs_node_write(ctx: TracePointContext) -> u32 {
    let _ = on_page_write(&ctx);
    0
}

fn on_page_write(ctx: &TracePointContext) -> Option<()> {
    let layout = layout(TP_SUBMIT_PAGE_WRITE)?;
    let record = Record::copy(ctx);
    let page_type: i32 = record.field(layout.type_)?;
    if page_type != F2FS_PAGE_TYPE_NODE {
        return None;
    }
    let dev: u32 = record.field(layout.dev)?;
    let nid: u64 = record.field(layout.index).unwrap_or(0);
    let current = Current::read();
    count(dev, Counter::Write, 1, &mut Task::of(&current));
    emit_batched(|event| {
        current.fill(event, EventKind::NodeWrite);
        event.dev = dev;
        event.nid = nid as u32;
        event.len = F2FS_BLOCK_BYTES;
    });
    Some(())
}

/// f2fs_write_checkpoint: every phase is an event; only "finish checkpoint" is counted, so the
/// count equals completed checkpoints (debugfs "CP count").
#[tracepoint]
pub fn f2fs_checkpoint(ctx: TracePointContext) -> u32 {
    let _ = on_checkpoint(&ctx);
    0
}

fn on_checkpoint(ctx: &TracePointContext) -> Option<()> {
    let layout = layout(TP_WRITE_CHECKPOINT)?;
    let dev: u32 = field(ctx, layout.dev)?;
    let reason: i32 = field(ctx, layout.reason).unwrap_or(0);
    let phase = checkpoint_phase(ctx, &layout)?;
    let current = Current::read();
    if phase == CP_PHASE_FINISH_CHECKPOINT {
        count(dev, Counter::Checkpoint, 1, &mut Task::of(&current));
    }
    emit(|event| {
        current.fill(event, EventKind::Checkpoint);
        event.dev = dev;
        event.queue = phase;
        event.reason = reason as u8;
    });
    Some(())
}

/// The phase number: a numeric field on 6.18.y and later, a message string in the record on
/// 6.1 .. 6.18, the message's address on 5.10 and 5.15.
fn checkpoint_phase(ctx: &TracePointContext, layout: &TracepointLayout) -> Option<u8> {
    // Little-endian: the low byte of a u16/int phase is the phase.
    if let Some(phase) = field::<u8>(ctx, layout.phase) {
        return Some(phase);
    }
    let head: [u8; 8] = match field::<u64>(ctx, layout.msg_ptr) {
        // SAFETY: bpf_probe_read_kernel copes with any address; this one is the kernel's
        // pointer to a string literal of F2FS's (every message is longer than 8 bytes).
        Some(address) => unsafe { bpf_probe_read_kernel(address as *const [u8; 8]) }.ok()?,
        None => {
            // __data_loc: low 16 bits = offset of the string in the record, high 16 = length.
            let loc: u32 = field(ctx, layout.msg_loc)?;
            let offset = (loc & 0xffff) as usize;
            // SAFETY: bpf_probe_read_kernel copes with any address; the offset is the
            // kernel's own.
            unsafe { ctx.read_at(offset) }.ok()?
        }
    };
    // The three messages differ within their first 8 bytes.
    match &head {
        b"start bl" => Some(CP_PHASE_START_BLOCK_OPS),
        b"finish b" => Some(CP_PHASE_FINISH_BLOCK_OPS),
        b"finish c" => Some(CP_PHASE_FINISH_CHECKPOINT),
        _ => None,
    }
}

/// Kprobe fallback, entry of `read_node_page(struct page *, blk_opf_t op_flags)`.
#[kprobe]
pub fn f2fs_read_node_page_entry(ctx: ProbeContext) -> u32 {
    let op_flags: u64 = ctx.arg(1).unwrap_or(0);
    let _ = READ_NODE_ARGS.insert(&bpf_get_current_pid_tgid(), &(op_flags as u32), 0);
    0
}

/// Kprobe fallback, return of read_node_page: 0 means a read was submitted (iostat counts it
/// then too); LOCKED_PAGE (1) is a cache hit, negative an error. No device is known here
/// without BTF, so these counts carry dev 0.
#[kretprobe]
pub fn f2fs_read_node_page_return(ctx: RetProbeContext) -> u32 {
    let key = bpf_get_current_pid_tgid();
    // SAFETY: the value is a plain u32 copied out at once; only this thread writes its key.
    let op_flags = unsafe { READ_NODE_ARGS.get(&key) }.copied();
    let _ = READ_NODE_ARGS.remove(&key);
    let ret: i32 = ctx.ret();
    let Some(mut op_flags) = op_flags else {
        return 0;
    };
    if ret != 0 {
        return 0;
    }
    let rahead_bit = config(CONFIG_RAHEAD_BIT);
    if RA_ACTIVE.get_ptr(&key).is_some() && rahead_bit < 32 {
        op_flags |= 1 << rahead_bit;
    }
    node_read(0, 0, op_flags, rahead_bit, u32::MAX, 1);
    0
}

/// Kprobe fallback: mark the thread as doing readahead while in f2fs_ra_node_page.
#[kprobe]
pub fn f2fs_ra_node_page_entry(_ctx: ProbeContext) -> u32 {
    let _ = RA_ACTIVE.insert(&bpf_get_current_pid_tgid(), &1, 0);
    0
}

#[kretprobe]
pub fn f2fs_ra_node_page_return(_ctx: RetProbeContext) -> u32 {
    let _ = RA_ACTIVE.remove(&bpf_get_current_pid_tgid());
    0
}
