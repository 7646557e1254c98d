//! Footprints (issue 49): what any implementation of the RFC's restore must leave in stable
//! kernel interfaces, whatever its functions are called or inlined into. A restore decompresses
//! a node block with the kernel's LZ4 library inside mainline's node read function
//! (`read_node_page`, `read_node_folio` from 6.16), which then returns without a read
//! (LOCKED_PAGE); a failed one falls back to the disk read. So: the node read's entry opens a
//! context for its thread (nid and device from its page), an LZ4 decompression into one block's
//! capacity inside it is noted, and the read's return decides: served -> `Restore`, its latency
//! from the decompression's start; read from disk -> `RestoreFail`, reason `lz4_len` when LZ4
//! did not give a whole block, else unmapped (a check after it: CRC, footer, inode checksum or
//! node type, which no footprint tells apart).
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::{kprobe, kretprobe, map},
    maps::{Array, HashMap},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_common::{slot_queue_of, EventKind, FootprintLayout, RESTORE_FAIL_LZ4_LEN};

use crate::{maps::emit, rfc};

#[map(name = "FOOTPRINT_LAYOUT")]
static FOOTPRINT_LAYOUT: Array<FootprintLayout> = Array::with_max_entries(1, 0);

/// One thread's node read in progress. Every node lookup passes the node read function, and
/// restores are few: its entry keeps the page alone; nid and device are read from it only when
/// a decompression happened, at the return.
#[repr(C)]
#[derive(Clone, Copy)]
struct ReadContext {
    /// The `struct page *` (or folio) the read fills.
    page: u64,
    /// When the first whole-block decompression inside it began (0: none yet).
    lz4_start_ns: u64,
    /// That decompression's input length and result.
    clen: u32,
    lz4_ret: i32,
    /// LZ4 calls open now (one may call another), and whether the outermost is noted.
    lz4_depth: u32,
    noting: u32,
}

#[map(name = "FOOTPRINT_READS")]
static FOOTPRINT_READS: HashMap<u64, ReadContext> = HashMap::with_max_entries(16384, 0);

fn layout() -> Option<&'static FootprintLayout> {
    FOOTPRINT_LAYOUT.get(0).filter(|l| l.block != 0)
}

fn read<T: Copy + Default>(address: u64) -> T {
    // SAFETY: bpf_probe_read_kernel validates the address and fails instead of faulting.
    unsafe { bpf_probe_read_kernel(address as *const T) }.unwrap_or_default()
}

/// Entry of the node read function (`struct page *` or `struct folio *` first).
#[kprobe]
pub fn footprint_node_read_entry(ctx: ProbeContext) -> u32 {
    let page: u64 = ctx.arg(0).unwrap_or(0);
    if page == 0 || layout().is_none() {
        return 0;
    }
    let context = ReadContext {
        page,
        lz4_start_ns: 0,
        clen: 0,
        lz4_ret: 0,
        lz4_depth: 0,
        noting: 0,
    };
    let _ = FOOTPRINT_READS.insert(&bpf_get_current_pid_tgid(), &context, 0);
    0
}

/// Entry of `LZ4_decompress_safe(src, dst, compressedSize, maxDecompressedSize)` and
/// `LZ4_decompress_safe_partial(src, dst, compressedSize, targetOutputSize, dstCapacity)`:
/// `capacity_arg` is the argument that bounds the output.
fn lz4_entered(ctx: &ProbeContext, capacity_arg: usize) {
    let Some(context) = FOOTPRINT_READS.get_ptr_mut(&bpf_get_current_pid_tgid()) else {
        return;
    };
    let Some(layout) = layout() else { return };
    let clen: u64 = ctx.arg(2).unwrap_or(0);
    let capacity: u64 = ctx.arg(capacity_arg).unwrap_or(0);
    // SAFETY: the pointer is this thread's entry of the map, valid for the program's run; only
    // this thread writes it.
    let context = unsafe { &mut *context };
    if context.lz4_depth == 0
        && context.lz4_start_ns == 0
        && capacity as u32 == layout.block
        && clen as u32 <= layout.block
    {
        context.noting = 1;
        context.clen = clen as u32;
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        context.lz4_start_ns = unsafe { bpf_ktime_get_ns() }.max(1);
    }
    context.lz4_depth += 1;
}

#[kprobe]
pub fn footprint_lz4_safe_entry(ctx: ProbeContext) -> u32 {
    lz4_entered(&ctx, 3);
    0
}

#[kprobe]
pub fn footprint_lz4_partial_entry(ctx: ProbeContext) -> u32 {
    lz4_entered(&ctx, 4);
    0
}

/// Return of either decompressor: the outermost noted call's result.
#[kretprobe]
pub fn footprint_lz4_return(ctx: RetProbeContext) -> u32 {
    let Some(context) = FOOTPRINT_READS.get_ptr_mut(&bpf_get_current_pid_tgid()) else {
        return 0;
    };
    // SAFETY: as in lz4_entered.
    let context = unsafe { &mut *context };
    if context.lz4_depth == 0 {
        return 0; // entered before the node read began
    }
    context.lz4_depth -= 1;
    if context.lz4_depth == 0 && context.noting != 0 {
        context.noting = 0;
        context.lz4_ret = ctx.ret::<i64>() as i32;
    }
    0
}

/// Return of the node read function: a noted decompression was a restore, or a failed one.
#[kretprobe]
pub fn footprint_node_read_return(ctx: RetProbeContext) -> u32 {
    let key = bpf_get_current_pid_tgid();
    // SAFETY: a plain copy of this thread's entry, removed at once.
    let context = unsafe { FOOTPRINT_READS.get(&key) }.copied();
    let _ = FOOTPRINT_READS.remove(&key);
    let (Some(context), Some(layout)) = (context, layout()) else {
        return 0;
    };
    if context.lz4_start_ns == 0 {
        return 0;
    }
    let ret = ctx.ret::<i64>() as i32;
    let whole = context.lz4_ret == layout.block as i32;
    if ret == layout.served && whole {
        if layout.emit_restore != 0 {
            // SAFETY: bpf_ktime_get_ns has no preconditions.
            let latency = unsafe { bpf_ktime_get_ns() }.saturating_sub(context.lz4_start_ns);
            emit_restore(EventKind::Restore, &context, layout, 0, latency.max(1));
        }
    } else if layout.emit_fail != 0 {
        let reason = if whole { 0 } else { RESTORE_FAIL_LZ4_LEN };
        emit_restore(EventKind::RestoreFail, &context, layout, reason, 0);
    }
    0
}

/// A restore's (or a failed restore's) event: the read's nid and device (read from its page
/// now), the payload's length and its slot queue (the smallest of 256, 512 and 1024 that holds
/// it).
fn emit_restore(
    kind: EventKind,
    context: &ReadContext,
    layout: &FootprintLayout,
    reason: u8,
    latency_ns: u64,
) {
    let page = context.page;
    let mapping: u64 = read(page + u64::from(layout.page_mapping));
    let host: u64 = read(mapping + u64::from(layout.mapping_host));
    let sb: u64 = read(host + u64::from(layout.inode_sb));
    let nid = read::<u64>(page + u64::from(layout.page_index)) as u32;
    let dev: u32 = read(sb + u64::from(layout.sb_dev));
    rfc::count(kind);
    emit(|event| {
        crate::maps::fill_task(event, kind);
        event.dev = dev;
        event.nid = nid;
        event.len = context.clen;
        event.queue = slot_queue_of(context.clen);
        event.reason = reason;
        event.latency_ns = latency_ns;
    });
}
