//! Access traces for `nodescope whatif` (issue #13): every lookup of a node block (a kprobe on
//! the node lookup function the planner found, e.g. `__get_node_page`) and every node page that
//! leaves the page cache (`filemap:mm_filemap_delete_from_page_cache` on F2FS's node inode).
//!
//! No offset is compiled in: userspace writes an `AccessLayout` into `ACCESS_LAYOUT` with the
//! struct offsets BTF gives and the tracepoint offsets its format file gives. Each program also
//! counts what it saw in `ACCESS_COUNTS` (exact even when the ring buffer overflows).
use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::{fentry, kprobe, map, tracepoint},
    maps::{Array, HashMap, PerCpuArray},
    programs::{FEntryContext, ProbeContext, TracePointContext},
};
use tracer_common::{
    AccessLayout, EventKind, ACCESS_COUNT_EVICTIONS, ACCESS_COUNT_LOOKUPS, ACCESS_COUNT_SLOTS,
};

use crate::maps::{emit_batched, fill_thread};

/// Index 0: the offsets, written by userspace before attaching.
#[map(name = "ACCESS_LAYOUT")]
static ACCESS_LAYOUT: Array<AccessLayout> = Array::with_max_entries(1, 0);

/// Device (s_dev) -> its node inode number, learnt from each lookup's `f2fs_sb_info`: the
/// eviction program keeps only pages of that inode on that device.
#[map(name = "NODE_INO")]
static NODE_INO: HashMap<u32, u32> = HashMap::with_max_entries(64, 0);

/// Per CPU, the file system (its `f2fs_sb_info` address, index 0, and device, index 1) whose
/// node inode this CPU last put into NODE_INO: lookups of the same file system skip the read
/// and the hash lookup, which every lookup would otherwise pay for.
#[map(name = "ACCESS_SEEN")]
static ACCESS_SEEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

/// Per-CPU counts, index = `ACCESS_COUNT_*`.
#[map(name = "ACCESS_COUNTS")]
static ACCESS_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(ACCESS_COUNT_SLOTS, 0);

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
        let _ = on_access(sbi, nid);
    }
    0
}

/// The same program on a BPF trampoline, where the kernel has BTF and trampolines: the call
/// into it is a direct call from the function's entry, not a kprobe's ftrace handler with its
/// saved registers. Userspace loads it against the lookup function's BTF id (the f2fs module's
/// split BTF when F2FS is a module) and falls back to the kprobe when that fails.
#[fentry]
pub fn f2fs_node_access_fentry(ctx: FEntryContext) -> u32 {
    let _ = on_access(ctx.arg(0), ctx.arg(1));
    0
}

fn on_access(sbi: u64, nid: u64) -> Option<()> {
    let layout = ACCESS_LAYOUT.get(0)?;
    let sb: u64 = read_at(sbi, layout.sbi_sb)?;
    let dev: u32 = read_at(sb, layout.sb_s_dev)?;
    count(ACCESS_COUNT_LOOKUPS);
    remember_node_ino(sbi, dev, layout);
    // Batched wakeups, as the F2FS programs': a lookup is far more frequent than a node read.
    emit_batched(|event| {
        fill_thread(event, EventKind::NodeAccess);
        event.dev = dev;
        event.nid = nid as u32;
    });
    Some(())
}

/// Record this device's node inode for the eviction filter, unless this CPU did so for the
/// same file system last.
fn remember_node_ino(sbi: u64, dev: u32, layout: &AccessLayout) {
    let (Some(seen_sbi), Some(seen_dev)) = (ACCESS_SEEN.get_ptr_mut(0), ACCESS_SEEN.get_ptr_mut(1))
    else {
        return;
    };
    // SAFETY: the slots are this CPU's and BPF programs are not preempted on it.
    if unsafe { *seen_sbi == sbi && *seen_dev == u64::from(dev) } {
        return;
    }
    let Some(node_ino) = read_at::<u32>(sbi, layout.sbi_node_ino) else {
        return;
    };
    // SAFETY: the value is a plain u32 copied out at once.
    if unsafe { NODE_INO.get(&dev) }.copied() != Some(node_ino)
        && NODE_INO.insert(&dev, &node_ino, 0).is_err()
    {
        return;
    }
    // SAFETY: as above.
    unsafe {
        *seen_sbi = sbi;
        *seen_dev = u64::from(dev);
    }
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
