//! Checkpoint anatomy (issue 19): the metadata blocks a checkpoint writes, sorted by the area
//! of the F2FS layout they lie in, and the NAT/SIT entries it puts into the current summary's
//! journal instead of a block.
//!
//! Metadata writes come from the same tracepoint as node writes (f2fs_submit_page_write, its
//! layout in TP_LAYOUT); a meta page's index is its block address. The areas come from the
//! device's superblock, written per device by userspace into `META_AREAS`: nothing about the
//! layout is compiled in. Journal entries come from a kprobe on
//! `f2fs_lookup_journal_in_cursum(journal, type, val, alloc)` (`(sbi, journal, ...)` from
//! 6.18.13; userspace writes the positions into CONFIG): the NAT and SIT flushes call it with
//! `alloc = 1` once per entry they put into the journal, and never otherwise.
use aya_ebpf::{
    macros::{kprobe, map, tracepoint},
    maps::{HashMap, PerCpuArray},
    programs::{ProbeContext, TracePointContext},
};
use tracer_common::{
    EventKind, JournalArgs, MetaAreas, CONFIG_JOURNAL_ARGS, F2FS_BLOCK_BYTES, META_AREA_COUNT,
    META_AREA_UNKNOWN, TP_SUBMIT_PAGE_WRITE,
};

use crate::{
    f2fs::{field, layout},
    maps::{config, emit, fill_task},
};

/// F2FS `enum page_type`: META, and META_FLUSH (the checkpoint's commit block).
const PAGE_TYPE_META: i32 = 2;
const PAGE_TYPE_META_FLUSH: i32 = 4;

/// Each F2FS device's layout (key = device number as the tracepoints print it).
#[map(name = "META_AREAS")]
static META_AREAS: HashMap<u32, MetaAreas> = HashMap::with_max_entries(64, 0);

/// Exact counts, before the ring buffer: index = `META_AREA_*`, then `META_AREA_COUNT +
/// JOURNAL_*` for journal entries. The name is the map's in the object, which userspace finds
/// it by (tracer_common::maps): it keeps the module's former short name.
#[map(name = "CPANAT_COUNTS")]
static CPANAT_COUNTS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(META_AREA_COUNT as u32 + 2, 0);

fn count(index: u32) {
    if let Some(slot) = CPANAT_COUNTS.get_ptr_mut(index) {
        // SAFETY: the slot belongs to this CPU and BPF programs are not preempted on it.
        unsafe { *slot += 1 };
    }
}

/// f2fs_submit_page_write: metadata block writes (type META or META_FLUSH).
#[tracepoint]
pub fn f2fs_meta_write(ctx: TracePointContext) -> u32 {
    let _ = on_meta_write(&ctx);
    0
}

fn on_meta_write(ctx: &TracePointContext) -> Option<()> {
    let layout = layout(TP_SUBMIT_PAGE_WRITE)?;
    let page_type: i32 = field(ctx, layout.type_)?;
    if page_type != PAGE_TYPE_META && page_type != PAGE_TYPE_META_FLUSH {
        return None;
    }
    let dev: u32 = field(ctx, layout.dev)?;
    // A meta page's index is the block address it is written to.
    let blkaddr: u64 = field(ctx, layout.index).unwrap_or(0);
    let blkaddr = blkaddr as u32;
    // SAFETY: the value is copied out at once; userspace writes the map only before attaching.
    let area = match unsafe { META_AREAS.get(&dev) } {
        Some(areas) => areas.area_of(blkaddr),
        None => META_AREA_UNKNOWN,
    };
    count(u32::from(area));
    emit(|event| {
        fill_task(event, EventKind::MetaWrite);
        event.dev = dev;
        event.nid = blkaddr;
        event.queue = area;
        event.len = F2FS_BLOCK_BYTES;
    });
    Some(())
}

/// kprobe f2fs_lookup_journal_in_cursum([struct f2fs_sb_info *,] struct f2fs_journal *,
/// int type, unsigned int val, int alloc): with `alloc` set, one NAT (type 0) or SIT (type 1)
/// entry goes into the journal. Where each argument is comes from userspace (BTF).
#[kprobe]
pub fn f2fs_journal_entry(ctx: ProbeContext) -> u32 {
    let args = JournalArgs::unpack(config(CONFIG_JOURNAL_ARGS));
    let journal_type: u64 = argument(&ctx, args.type_).unwrap_or(u64::MAX);
    let value: u64 = argument(&ctx, args.val).unwrap_or(0);
    let alloc: u64 = argument(&ctx, args.alloc).unwrap_or(0);
    // The int arguments: only their low 32 bits are defined.
    if alloc as u32 == 0 || journal_type as u32 > 1 {
        return 0;
    }
    let journal_type = journal_type as u8;
    count(META_AREA_COUNT as u32 + u32::from(journal_type));
    emit(|event| {
        fill_task(event, EventKind::JournalEntry);
        event.nid = value as u32;
        event.queue = journal_type;
    });
    0
}

/// Argument `n` of a probed function. Each register is read at its constant offset first: the
/// verifier refuses a context read at an offset it cannot pin down, which a `match` on `n`
/// compiles to; opaque, so that the compiler does not fold the reads back into one.
fn argument(ctx: &ProbeContext, n: u8) -> Option<u64> {
    let registers: [Option<u64>; 6] = core::hint::black_box([
        ctx.arg(0),
        ctx.arg(1),
        ctx.arg(2),
        ctx.arg(3),
        ctx.arg(4),
        ctx.arg(5),
    ]);
    registers.get(usize::from(n)).copied().flatten()
}
