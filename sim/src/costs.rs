//! The virtual-time cost model: how long each step takes on the simulated machine. Used to
//! advance the virtual clock and for `latency_ns`; never measured from the host, so runs are
//! deterministic. Figures are for an NVMe-backed VM like the RFC's and a current x86 core.

/// One 4 KiB node read from an NVMe device (QEMU, cache=none): submission to completion.
pub const NODE_READ_NS: u64 = 90_000;
/// A raw cache hit: lookup, lock, reference.
pub const RAW_HIT_NS: u64 = 300;
/// Restore: lookup, allocation, checks; plus LZ4 decompression and CRC per payload byte.
pub const RESTORE_BASE_NS: u64 = 1_000;
pub const RESTORE_PER_BYTE_NS: u64 = 2;
/// Examining one raw entry in a worker pass.
pub const WORKER_SCAN_NS: u64 = 50;
/// LZ4-compressing one 4 KiB block (about 1 GB/s) and computing its CRC.
pub const COMPRESS_NS: u64 = 4_000;
/// cond_resched() after a batch.
pub const RESCHEDULE_NS: u64 = 1_000;
/// One shrinker call, per entry scanned.
pub const SHRINK_PER_ENTRY_NS: u64 = 100;
/// Creating a file or directory (everything but the node cache).
pub const CREATE_NS: u64 = 40_000;
/// Writing `n` zero blocks to a new file.
pub const WRITE_BLOCK_NS: u64 = 2_000;

pub fn restore_ns(clen: u32) -> u64 {
    RESTORE_BASE_NS + RESTORE_PER_BYTE_NS * u64::from(clen)
}
