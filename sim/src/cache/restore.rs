//! Restore: turn a compressed entry back into a raw block under the entry lock, validating in
//! the RFC's order: allocation (slot) size, payload length, LZ4 output length, CRC of the raw
//! block, node footer, inode checksum, requested node type. A failed raw-buffer allocation
//! keeps the compressed copy (the caller may retry); any validation failure drops the copy and
//! reads the block from disk, which stays the source of truth.
//!
//! The work runs inside `hooks::nodescope_sim_restore`, through its callback, so that a return
//! probe on the hook sees the restore's result (0 or -reason, -ENOMEM) and its latency.
use std::{any::Any, ffi::c_void, panic::AssertUnwindSafe, sync::Arc};

use anyhow::Result;
use tracer_common::{
    RESTORE_FAIL_CRC, RESTORE_FAIL_FOOTER, RESTORE_FAIL_INODE_CHECKSUM, RESTORE_FAIL_LZ4_LEN,
    RESTORE_FAIL_NODE_TYPE, RESTORE_FAIL_PAYLOAD_LEN, RESTORE_FAIL_SLOT_SIZE,
};

use super::{config::SlotSet, lz4, Compressed, NodeCache, Served};
use crate::{
    costs,
    disk::Disk,
    events::Emitter,
    f2fs::{crc::f2fs_crc32, node::RequestedType, Block, NodeBlock},
    hooks,
};

/// `-ENOMEM`, what the restore returns when the raw buffer cannot be allocated.
pub const ENOMEM: i32 = 12;

/// What the semantic checks need to know about the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeCheck {
    pub inode_checksums: bool,
    pub checksum_seed: u32,
}

/// Injectable raw-buffer allocation failures (tests, fault scenarios). Deterministic.
#[derive(Clone, Debug, Default)]
pub struct AllocFaults {
    /// Fail this many upcoming allocations.
    pub fail_next: u32,
    /// Also fail every n-th allocation (0 = never).
    pub fail_every: u32,
    pub allocations: u64,
    pub failures: u64,
}

impl AllocFaults {
    fn allocate(&mut self) -> Option<Box<Block>> {
        self.allocations += 1;
        let periodic =
            self.fail_every > 0 && self.allocations.is_multiple_of(u64::from(self.fail_every));
        if self.fail_next > 0 || periodic {
            self.fail_next = self.fail_next.saturating_sub(1);
            self.failures += 1;
            return None;
        }
        Some(Box::new([0u8; 4096]))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    NoMem,
    Invalid(u8),
}

impl Failure {
    fn return_code(self) -> i32 {
        match self {
            Failure::NoMem => -ENOMEM,
            Failure::Invalid(reason) => -i32::from(reason),
        }
    }
}

/// Everything the restore work needs, passed through the hook's `ctx` pointer.
struct RestoreCtx<'a> {
    nid: u32,
    want: RequestedType,
    check: NodeCheck,
    compressed: &'a Compressed,
    /// Slot size of the queue the entry sits on.
    queue_slot_bytes: u32,
    /// The cache's slot sizes: an allocation of any other size is corrupt.
    slots: SlotSet,
    alloc: &'a mut AllocFaults,
    outcome: Option<Result<Box<Block>, Failure>>,
    panic: Option<Box<dyn Any + Send>>,
}

impl RestoreCtx<'_> {
    fn run(&mut self) -> Result<Box<Block>, Failure> {
        let mut raw = self.alloc.allocate().ok_or(Failure::NoMem)?;
        let c = self.compressed;
        let slot_ok = self.slots.sizes().contains(&c.slot_bytes)
            && c.slot.len() == c.slot_bytes as usize
            && c.slot_bytes == self.queue_slot_bytes;
        if !slot_ok {
            return Err(Failure::Invalid(RESTORE_FAIL_SLOT_SIZE));
        }
        if c.clen == 0 || c.clen > c.slot_bytes {
            return Err(Failure::Invalid(RESTORE_FAIL_PAYLOAD_LEN));
        }
        match lz4::decompress_into(&c.slot[..c.clen as usize], &mut raw[..]) {
            Some(len) if len == raw.len() => {}
            _ => return Err(Failure::Invalid(RESTORE_FAIL_LZ4_LEN)),
        }
        if f2fs_crc32(&raw[..]) != c.crc {
            return Err(Failure::Invalid(RESTORE_FAIL_CRC));
        }
        let node = NodeBlock(&raw[..]);
        node.check_footer(self.nid)
            .map_err(|_| Failure::Invalid(RESTORE_FAIL_FOOTER))?;
        node.check_inode_checksum(self.check.inode_checksums, self.check.checksum_seed)
            .map_err(|_| Failure::Invalid(RESTORE_FAIL_INODE_CHECKSUM))?;
        if !self.want.accepts(node.kind()) {
            return Err(Failure::Invalid(RESTORE_FAIL_NODE_TYPE));
        }
        Ok(raw)
    }
}

/// The callback handed to `nodescope_sim_restore`.
extern "C" fn restore_work(ctx: *mut c_void) -> i32 {
    // SAFETY: `ctx` is the `&mut RestoreCtx` that `NodeCache::restore` passed to the hook,
    // which calls us synchronously while that borrow is alive and unused elsewhere.
    let ctx = unsafe { &mut *(ctx as *mut RestoreCtx<'_>) };
    // A panic must not unwind through an extern "C" frame: catch it, hand it back.
    match std::panic::catch_unwind(AssertUnwindSafe(|| ctx.run())) {
        Ok(outcome) => {
            let code = outcome.as_ref().map_or_else(|f| f.return_code(), |_| 0);
            ctx.outcome = Some(outcome);
            code
        }
        Err(panic) => {
            ctx.panic = Some(panic);
            -1
        }
    }
}

impl NodeCache {
    /// Restore an entry whose payload is only a size (`Payload::Sizes`): the block that was
    /// compressed is the disk's (only clean blocks are converted and a replay never changes
    /// bytes), so it comes back from there, without I/O, and validation cannot fail.
    fn restore_sized(
        &mut self,
        slot: u32,
        nid: u32,
        clen: u32,
        queue: u8,
        disk: &mut Disk,
        em: &mut Emitter,
    ) -> Result<(Served, u64)> {
        let block = disk
            .peek(nid)
            .ok_or_else(|| anyhow::anyhow!("nid {nid} has no node block on the simulated disk"))?;
        let latency = costs::restore_ns(clen);
        self.make_raw(slot, block, true);
        self.stats.events.restored(latency);
        em.restored(nid, clen, self.config.event_queue(queue), latency);
        Ok((Served::Restored, latency))
    }

    /// Restore the compressed entry in `slot` for an access wanting `want`.
    pub(super) fn restore(
        &mut self,
        slot: u32,
        want: RequestedType,
        disk: &mut Disk,
        em: &mut Emitter,
    ) -> Result<(Served, u64)> {
        let entry = &self.entries[slot as usize];
        let (nid, queue) = (entry.nid, entry.queue);
        let compressed = entry.compressed().expect("restore of a compressed entry");
        let (clen, slot_bytes) = (compressed.clen, compressed.slot_bytes);
        if compressed.slot.is_empty() && matches!(self.payload, super::Payload::Sizes(_)) {
            return self.restore_sized(slot, nid, clen, queue, disk, em);
        }
        let mut ctx = RestoreCtx {
            nid,
            want,
            check: self.check,
            compressed,
            queue_slot_bytes: self.config.queue_bytes(queue),
            slots: self.config.slots,
            alloc: &mut self.alloc,
            outcome: None,
            panic: None,
        };
        let ctx_ptr = &mut ctx as *mut RestoreCtx<'_> as *mut c_void;
        let code =
            hooks::nodescope_sim_restore(em.dev, nid, clen, slot_bytes, restore_work, ctx_ptr);
        if let Some(panic) = ctx.panic.take() {
            std::panic::resume_unwind(panic);
        }
        let outcome = ctx.outcome.take().expect("the restore work ran");
        debug_assert_eq!(
            code,
            outcome.as_ref().map_or_else(|f| f.return_code(), |_| 0)
        );
        let latency = costs::restore_ns(clen);
        let event_queue = self.config.event_queue(queue);
        match outcome {
            Ok(block) => {
                self.make_raw(slot, Arc::from(block), true);
                self.stats.events.restored(latency);
                em.restored(nid, clen, event_queue, latency);
                Ok((Served::Restored, latency))
            }
            Err(Failure::NoMem) => {
                self.stats.events.restore_nomem += 1;
                em.restore_nomem(nid, event_queue);
                Ok((Served::NoMem, latency))
            }
            Err(Failure::Invalid(reason)) => {
                // The copy's entry ends here (`RestoreFail`); the disk read begins a new one
                // (`Insert`), as in the kernel, where the read inserts the page it brings.
                self.remove(slot);
                self.stats
                    .events
                    .restore_failed(tracer_common::RestoreFailure::from_code(reason));
                em.restore_fail(nid, reason, clen, event_queue);
                let block = disk.read(nid, false)?;
                em.node_read(nid, false);
                self.insert_raw(nid, block, true, false, em);
                Ok((
                    Served::RestoreFailedThenRead(reason),
                    latency + costs::NODE_READ_NS,
                ))
            }
        }
    }
}
