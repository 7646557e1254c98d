//! Programs on mainline F2FS tracepoints (node reads, node writes, checkpoints), counted
//! per task in the kernel and sent through the ring buffer.
//!
//! Field offsets differ between kernels and between the page/folio/cache variants, so no
//! offset is compiled in: userspace parses each tracepoint's `format` file and writes a
//! `TracepointLayout` per tracepoint into `TP_LAYOUT` before attaching.
//!
//! Every event is counted exactly (counters.rs: this CPU's slot table, else the per-CPU
//! `NODE_COUNTS` map; no atomics needed, userspace sums the CPUs). Node writes and checkpoints are also sent individually through the
//! `EVENTS` ring buffer, node reads only when userspace asks (`CONFIG_NODE_READ_EVENTS`:
//! `record` does); a full buffer costs an event (counted in `DROPS`) but never a count.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_kernel_buf},
    macros::{kprobe, kretprobe, map, tracepoint},
    maps::{Array, HashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext as _,
};
use tracer_common::{
    EventKind, SlotTable, TracepointLayout, CONFIG_NODE_READ_EVENTS, CONFIG_RAHEAD_BIT,
    CONFIG_TIME_LOOKUPS, CP_PHASE_FINISH_BLOCK_OPS, CP_PHASE_FINISH_CHECKPOINT,
    CP_PHASE_START_BLOCK_OPS, F2FS_BLOCK_BYTES, F2FS_PAGE_TYPE_NODE, FIELD_ABSENT, FLAG_READAHEAD,
    FLAG_SYNC, REQ_OP_READ, TP_COUNT, TP_SUBMIT_PAGE_BIO, TP_SUBMIT_PAGE_WRITE, TP_SUBMIT_READ_BIO,
    TP_WRITE_CHECKPOINT,
};

use crate::{
    counters::{count, count_with, slot_table, Counter, Task},
    maps::{config, emit, emit_batched, Current},
};

/// Field offsets per tracepoint (index = `TP_*`), from the format files.
#[map(name = "TP_LAYOUT")]
static TP_LAYOUT: Array<TracepointLayout> = Array::with_max_entries(TP_COUNT, 0);

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

/// Kprobe fallback: read_node_page's op_flags, keyed by thread, from entry to return.
#[map(name = "READ_NODE_ARGS")]
static READ_NODE_ARGS: HashMap<u64, u32> = HashMap::with_max_entries(4096, 0);

/// Kprobe fallback: threads currently inside f2fs_ra_node_page (their reads are readahead).
#[map(name = "RA_ACTIVE")]
static RA_ACTIVE: HashMap<u64, u32> = HashMap::with_max_entries(4096, 0);

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

/// A demand node read on this thread: when lookups are timed, the outcome of the lookup it
/// runs in, if any (issue 51). Untimed, one array load.
#[inline(always)]
fn lookup_read() {
    if config(CONFIG_TIME_LOOKUPS) != 0 {
        let _ = crate::access::lookup_saw(tracer_common::LOOKUP_SAW_READ);
    }
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
    if !readahead {
        lookup_read();
    }
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

/// f2fs_submit_page_bio / f2fs_submit_folio_bio: one node block per event, the fields found
/// where this kernel's format file puts them. The record is only ever read through
/// bpf_probe_read_kernel, never loaded from the context: the kernel refuses to attach a
/// program whose context loads reach past the record (7.x's record is 52 bytes), so this
/// program attaches to any layout.
#[tracepoint]
pub fn f2fs_node_read_page(ctx: TracePointContext) -> u32 {
    let _ = on_page_bio(&ctx);
    0
}

/// The same for the mainline layout only (6.1 .. 6.12, `TracepointLayout::MAINLINE_PAGE_BIO`),
/// node reads counted, not sent: the record's fields at constant offsets. Userspace attaches
/// it only where the format file says those offsets, and falls back to
/// `f2fs_node_read_page` when the kernel refuses it.
#[tracepoint]
pub fn f2fs_node_read_page_fast(ctx: TracePointContext) -> u32 {
    let _ = on_mainline_page_bio(&ctx);
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
    let layout = layout(TP_SUBMIT_PAGE_BIO)?;
    let record = Record::copy(ctx);
    let (op_flags, dev) = node_read_submission(&record, &layout)?;
    // For node pages the page index is the nid.
    let nid: u64 = record.field(layout.index).unwrap_or(0);
    let (ra, sync) = (layout.rahead_bit.into(), layout.sync_bit.into());
    node_read(dev, nid as u32, op_flags, ra, sync, 1);
    Some(())
}

fn on_mainline_page_bio(ctx: &TracePointContext) -> Option<()> {
    if let Some(table) = slot_table() {
        return fast_node_read(ctx, table);
    }
    // No slot table on this CPU (never expected): counted through NODE_COUNTS.
    let layout = layout(TP_SUBMIT_PAGE_BIO)?;
    let (op_flags, dev, nid) = mainline_node_read(ctx)?;
    let (ra, sync) = (layout.rahead_bit.into(), layout.sync_bit.into());
    node_read(dev, nid as u32, op_flags, ra, sync, 1);
    Some(())
}

/// The fast program's common case: the record's fields at constant offsets, two task helpers,
/// this CPU's slot. No other map is looked up and nothing is copied, so it touches few memory
/// pages, which is most of what an event costs (issue 16's vm-bench).
#[inline(always)]
fn fast_node_read(ctx: &TracePointContext, table: &mut SlotTable) -> Option<()> {
    let (op_flags, dev, _nid) = mainline_node_read(ctx)?;
    let counter = if bit(op_flags, table.rahead_bit) {
        Counter::Readahead
    } else {
        lookup_read();
        Counter::Demand
    };
    count_with(Some(table), dev, counter, 1, &mut Task::read());
    Some(())
}

/// f2fs_submit_page_bio's field offsets on 6.1 .. 6.12 (`TracepointLayout::MAINLINE_PAGE_BIO`),
/// read by the fast program straight from the record (plain loads the verifier checks against
/// the tracepoint's context, and the kernel against the record's size at attach time).
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
