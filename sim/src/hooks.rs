//! One `#[no_mangle] extern "C"` function per event kind, called on every simulator event with
//! the arguments a kernel function would have. nodescope attaches its kprobe programs to these as
//! uprobes (manifest `probes/sim.toml`), so the very same eBPF code that would watch the patched
//! kernel watches the simulator on a kernel that has uprobes but no kprobes.
//!
//! When nothing is attached each call costs a plain function call: the bodies only pass their
//! arguments through `black_box`, which keeps the call (and the symbol) from being optimised
//! away. Each body also passes its own event kind, so no two hooks compile to the same code:
//! otherwise the optimiser may fold them into one function, and a uprobe on one hook would fire
//! for all of them. Argument order is part of the contract with `probes/sim.toml`: do not reorder.
use std::ffi::c_void;

use core::hint::black_box;

use tracer_common::EventKind;

/// A raw entry was converted: `slot_bytes` is 256, 512 or 1024.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_convert(dev: u32, nid: u32, clen: u32, slot_bytes: u32) {
    black_box((EventKind::Convert as u8, dev, nid, clen, slot_bytes));
}

/// The compressed result was over the threshold or the 1024-byte limit: not retained.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_convert_reject(dev: u32, nid: u32, clen: u32) {
    black_box((EventKind::ConvertReject as u8, dev, nid, clen));
}

/// An access raced the conversion; the new compressed object was discarded.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_convert_abort(dev: u32, nid: u32) {
    black_box((EventKind::ConvertAbort as u8, dev, nid));
}

/// Restore work done by the simulator inside `nodescope_sim_restore`; returns 0 on success.
pub type RestoreWork = extern "C" fn(ctx: *mut c_void) -> i32;

/// Restores a compressed entry by running `work(ctx)`, the way the kernel's restore function
/// would: an entry probe sees the arguments, a return probe sees the result and the latency.
/// Returns what `work` returned (0 = restored; negative = failed, see the fail hooks).
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_restore(
    dev: u32,
    nid: u32,
    clen: u32,
    slot_bytes: u32,
    work: RestoreWork,
    ctx: *mut c_void,
) -> i32 {
    black_box((EventKind::Restore as u8, dev, nid, clen, slot_bytes));
    black_box(work(ctx))
}

/// Restore validation failed (`reason` = tracer_common::RESTORE_FAIL_*): the copy, of `queue`,
/// dropped, the disk read.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_restore_fail(dev: u32, nid: u32, reason: u32, queue: u32) {
    black_box((EventKind::RestoreFail as u8, dev, nid, reason, queue));
}

/// The raw buffer allocation failed: the compressed copy was kept.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_restore_nomem(dev: u32, nid: u32) {
    black_box((EventKind::RestoreNomem as u8, dev, nid));
}

/// The shrinker reclaimed an entry from `queue` (tracer_common::QUEUE_*).
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_reclaim(dev: u32, nid: u32, queue: u32) {
    black_box((EventKind::Reclaim as u8, dev, nid, queue));
}

/// An entry of `queue` (tracer_common::QUEUE_*) dropped, neither reclaimed nor a failed restore.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_forget(dev: u32, nid: u32, queue: u32) {
    black_box((EventKind::Forget as u8, dev, nid, queue));
}

/// A REFERENCED entry got its second chance; `by` = tracer_common::SECOND_CHANCE_BY_*.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_second_chance(dev: u32, nid: u32, queue: u32, by: u32) {
    black_box((EventKind::SecondChance as u8, dev, nid, queue, by));
}

/// A node block was read from the simulated disk (FS_NODE_READ_IO); `readahead` is 0 or 1.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_node_read(dev: u32, nid: u32, readahead: u32) {
    black_box((EventKind::NodeRead as u8, dev, nid, readahead));
}

/// A raw entry began: a node read from disk (a failed restore's read too), or created.
#[no_mangle]
#[inline(never)]
pub extern "C" fn nodescope_sim_insert(dev: u32, nid: u32) {
    black_box((EventKind::Insert as u8, dev, nid));
}

/// Every hook's name and address. Calling this from the code that attaches the probes keeps
/// each hook in the final binary even if a build never calls one (the linker drops unreferenced
/// functions, `#[no_mangle]` or not), so uprobes always find their symbols.
pub fn all() -> [(&'static str, usize); 11] {
    black_box([
        (
            "nodescope_sim_node_read",
            nodescope_sim_node_read as *const () as usize,
        ),
        (
            "nodescope_sim_insert",
            nodescope_sim_insert as *const () as usize,
        ),
        (
            "nodescope_sim_convert",
            nodescope_sim_convert as *const () as usize,
        ),
        (
            "nodescope_sim_convert_reject",
            nodescope_sim_convert_reject as *const () as usize,
        ),
        (
            "nodescope_sim_convert_abort",
            nodescope_sim_convert_abort as *const () as usize,
        ),
        (
            "nodescope_sim_restore",
            nodescope_sim_restore as *const () as usize,
        ),
        (
            "nodescope_sim_restore_fail",
            nodescope_sim_restore_fail as *const () as usize,
        ),
        (
            "nodescope_sim_restore_nomem",
            nodescope_sim_restore_nomem as *const () as usize,
        ),
        (
            "nodescope_sim_reclaim",
            nodescope_sim_reclaim as *const () as usize,
        ),
        (
            "nodescope_sim_second_chance",
            nodescope_sim_second_chance as *const () as usize,
        ),
        (
            "nodescope_sim_forget",
            nodescope_sim_forget as *const () as usize,
        ),
    ])
}
