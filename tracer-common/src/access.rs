//! The access programs' layout (`AccessLayout`) and their exact counts' indices.

/// Where the access programs (tracer-ebpf/src/access.rs) find what they read, written by
/// userspace into the `ACCESS_LAYOUT` array map (index 0) before attaching: struct member
/// offsets from BTF for the node lookup kprobe, and the field offsets of
/// `filemap:mm_filemap_delete_from_page_cache` from its format file. Nothing is compiled in.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AccessLayout {
    /// Offset of `struct f2fs_sb_info.sb` (a `struct super_block *`).
    pub sbi_sb: u32,
    /// Offset of `struct super_block.s_dev` (dev_t, the encoding tracepoints print).
    pub sb_s_dev: u32,
    /// Offset of `struct f2fs_sb_info.node_ino_num`: the superblock's node inode number.
    pub sbi_node_ino: u32,
    /// Offsets of the eviction tracepoint's `i_ino` (8 bytes), `index` (8) and `s_dev` (4).
    pub evict_ino: u16,
    pub evict_index: u16,
    pub evict_dev: u16,
    /// Non-zero when userspace hooked `kill_f2fs_super`'s return (`SB_GENERATION`): the lookup
    /// program may then keep each CPU's last device instead of reading it per lookup.
    pub cache_device: u16,
    /// Non-zero when the lookups are timed (issue 51): the entry program keeps the lookup's
    /// start per thread (`LOOKUP_TIMING`) and the return program (kretprobe or fexit on the
    /// same function) appends the record with its latency and outcome (`RETRIEVAL_*`).
    pub time_lookups: u16,
    /// Non-zero when the block layer's request tracepoints are hooked for timed lookups: a disk
    /// read's request from issue to completion (its device time) goes into its lookup.
    pub time_device: u16,
    /// Offsets of `block:block_rq_issue`'s and `block:block_rq_complete`'s `dev` (4 bytes)
    /// and `sector` (8), from their format files.
    pub block_issue_dev: u16,
    pub block_issue_sector: u16,
    pub block_complete_dev: u16,
    pub block_complete_sector: u16,
    /// Non-zero when userspace hooked `sched_switch` for timed lookups: a lookup's start then
    /// waits in its CPU's slot (`LOOKUP_SLOT`, no lock) and moves to the per-thread map only
    /// when its thread leaves the CPU (sleeps or is preempted) or reads from disk.
    pub lookup_slots: u16,
    /// Non-zero when this kernel's `sched_switch` raw tracepoint passes the task's state (its
    /// BTF prototype has `prev_state`, Linux 5.18+) and its program reads it
    /// (`f2fs_lookup_switch_state`): a timed lookup whose thread blocks (a switch that is no
    /// preemption, the thread not runnable) is noted as waiting. The page
    /// lock's slow path is inlined into the page cache's own lookup (`__filemap_get_folio`),
    /// so a kprobe on `__folio_lock` misses the lookup that finds its node page locked under
    /// another's read.
    pub switch_state: u16,
    /// Offsets of F2FS's `f2fs:f2fs_evict_inode` record's `dev` (4 bytes) and `ino` (8),
    /// from its format file (read only when that tracepoint is hooked).
    pub inode_evict_dev: u16,
    pub inode_evict_ino: u16,
    /// Offsets of `vmscan:mm_shrink_slab_start`'s `shrink` (8 bytes: the shrinker's scan
    /// function), `cache_items` (8), `total_scan` (8) and `priority` (4), from its format
    /// file (read only when `shrink_scan_fn` is set).
    pub shrink_fn: u16,
    pub shrink_items: u16,
    pub shrink_total: u16,
    pub shrink_priority: u16,
    /// The address of F2FS's shrinker scan function (`f2fs_shrink_scan` in /proc/kallsyms):
    /// the program keeps that shrinker's calls and no other's; 0: not hooked.
    pub shrink_scan_fn: u64,
}

/// A timed lookup's outcome (`AccessRecord::outcome`, a `NodeAccess` event's `reason`), each
/// lookup exactly one; 0: the lookup was not timed.
///
/// The node page was in the page cache, up to date, and nothing waited on it.
pub const RETRIEVAL_HIT: u8 = 1;
/// The RFC's cache restored the node block from its compressed copy inside the lookup (a
/// `Restore` event on the lookup's thread while it ran).
pub const RETRIEVAL_RESTORE: u8 = 2;
/// The lookup itself submitted the node block's read (a demand FS_NODE_READ_IO on its thread
/// while it ran) and waited for it.
pub const RETRIEVAL_DISK_READ: u8 = 3;
/// The lookup waited on the node page's lock held by another task: its read or readahead in
/// flight (or a writer of the page), and read nothing itself.
pub const RETRIEVAL_WAITED: u8 = 4;
/// The lookup returned an error (an `ERR_PTR`).
pub const RETRIEVAL_ERROR: u8 = 5;
/// The outcomes in order, with their stable names (JSON, metrics, recordings' reports).
pub const RETRIEVAL_OUTCOMES: [(u8, &str); 5] = [
    (RETRIEVAL_HIT, "hit"),
    (RETRIEVAL_RESTORE, "restore"),
    (RETRIEVAL_DISK_READ, "disk_read"),
    (RETRIEVAL_WAITED, "waited"),
    (RETRIEVAL_ERROR, "error"),
];
pub const RETRIEVAL_OUTCOME_COUNT: usize = 5;

/// What the other programs note in a timed lookup's per-thread context while it runs
/// (`LookupTiming::seen`), from which its return program takes the outcome.
pub const LOOKUP_SAW_READ: u32 = 1 << 0;
pub const LOOKUP_SAW_RESTORE: u32 = 1 << 1;
pub const LOOKUP_SAW_WAIT: u32 = 1 << 2;

/// `BLOCK_IO`'s key: a block request by its device (the disk's, as the block tracepoints print
/// it) and first sector.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockKey {
    pub dev: u32,
    pub _pad: u32,
    pub sector: u64,
}

/// A timed lookup's outcome from what its thread saw while it ran and what it returned: an
/// error first, then a restore, the lookup's own read, a wait on another's, else a hit.
pub const fn retrieval_outcome(seen: u32, error: bool) -> u8 {
    if error {
        RETRIEVAL_ERROR
    } else if seen & LOOKUP_SAW_RESTORE != 0 {
        RETRIEVAL_RESTORE
    } else if seen & LOOKUP_SAW_READ != 0 {
        RETRIEVAL_DISK_READ
    } else if seen & LOOKUP_SAW_WAIT != 0 {
        RETRIEVAL_WAITED
    } else {
        RETRIEVAL_HIT
    }
}

/// `ACCESS_COUNTS` indices: exact per-CPU counts of what the access programs saw.
pub const ACCESS_COUNT_LOOKUPS: u32 = 0;
pub const ACCESS_COUNT_EVICTIONS: u32 = 1;
/// Lookups that read their device through `sbi->sb` (the rest took their CPU's cached one).
pub const ACCESS_COUNT_DEVICE_READS: u32 = 2;
/// Entries of the page lock's slow path the lock-wait program saw (timed lookups), and the
/// waits noted in a timed lookup: those entries inside one, and its thread blocking
/// (`sched_switch`, `AccessLayout::switch_state`).
pub const ACCESS_COUNT_LOCK_WAITS: u32 = 3;
pub const ACCESS_COUNT_WAITS_NOTED: u32 = 4;
/// F2FS inodes of a traced device that left the inode cache (`f2fs:f2fs_evict_inode`).
pub const ACCESS_COUNT_INODE_EVICTIONS: u32 = 5;
/// Calls of F2FS's shrinker by reclaim (`vmscan:mm_shrink_slab_start`).
pub const ACCESS_COUNT_SHRINKER_SCANS: u32 = 6;
pub const ACCESS_COUNT_SLOTS: u32 = 7;

/// Node lookups an [`AccessBatch`] holds. A lookup is the most frequent event nodescope traces
/// (every one, hit or miss): each CPU collects them in its own batch and sends the batch to the
/// ring buffer as one record when it is full, so the ring's lock, header and wakeup check are
/// paid once per this many lookups (docs/PERFORMANCE.md, the lookup cost).
pub const ACCESS_BATCH_RECORDS: usize = 64;

/// A batch whose first lookup is this old goes out with the next lookup, full or not; userspace
/// also asks each CPU with a waiting batch to send it at every refresh (the `ACCESS_FLUSH`
/// program), so a quiet CPU's lookups are late by one refresh at most.
pub const ACCESS_BATCH_MAX_AGE_NS: u64 = 100_000_000;

/// `AccessBatch::magic` on every batch sent: with its size, what tells a batch from an `Event`
/// in the ring buffer.
pub const ACCESS_BATCH_MAGIC: u32 = 0x4241_534e;

/// One node lookup in a batch: what a `NodeAccess` event carries (no uid and no comm: nothing
/// attributes lookups to a uid or a name).
///
/// `ts_ns` is CLOCK_MONOTONIC as every event's, read once per CPU and scheduler tick (1/HZ,
/// 4 ms on Debian's and Android's kernels): the first lookup of a tick on a CPU reads the clock
/// and the others of that tick take its reading. The clock read was most of the lookup
/// program's cost (docs/PERFORMANCE.md); the what-if's times are intervals of 100 ms and more.
/// A CPU's lookups stay in the order it made them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AccessRecord {
    pub ts_ns: u64,
    pub pid: u32,
    pub tgid: u32,
    pub dev: u32,
    pub nid: u32,
    /// A timed lookup's time from entry to return, ns (saturated at u32::MAX, 4.29 s); 0
    /// untimed. `ts_ns` is then the lookup's start, read from the clock, not the tick's.
    pub latency_ns: u32,
    /// `RETRIEVAL_*`, 0 untimed.
    pub outcome: u8,
    /// A timed lookup's demand node reads submitted on its thread while it ran (saturated at
    /// 255): 1 for a disk read, more where the lookup read again (its page changed under it).
    pub reads: u8,
    pub _pad: [u8; 2],
    /// The device time of those reads, ns (saturated at u32::MAX): the block layer's request
    /// from issue to completion, where the request was issued on the lookup's thread (0:
    /// not measured).
    pub device_ns: u32,
    pub _pad2: u32,
}

/// A CPU's lookups since its last batch went out (`ACCESS_BATCH`, per-CPU, index 0), and the
/// ring-buffer record it goes out as.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AccessBatch {
    pub magic: u32,
    /// Records in use, from the first.
    pub len: u32,
    /// When the first record was taken.
    pub first_ts_ns: u64,
    /// Non-zero while a lookup appends: the flush program, run by an interrupt on this CPU,
    /// leaves the batch alone then (the append sends it when it is due).
    pub busy: u32,
    /// The process (tgid) of this CPU's last lookup. A lookup of another process goes out as
    /// a single event with its uid and comm, ahead of the batches, so that the reader can name
    /// the process of the batched ones (whose records carry neither).
    pub last_tgid: u32,
    /// The jiffies count of this CPU's last clock read, and what the clock read then: a lookup
    /// in the same tick takes that time instead of reading the clock (see [`AccessRecord`]).
    pub tick_jiffies: u64,
    pub tick_ts_ns: u64,
    pub records: [AccessRecord; ACCESS_BATCH_RECORDS],
}

impl AccessBatch {
    /// A batch out of a ring-buffer record: None when the record is something else (an
    /// `Event` is 64 bytes; a batch is larger and starts with its magic).
    pub fn from_bytes(bytes: &[u8]) -> Option<AccessBatch> {
        if bytes.len() != core::mem::size_of::<AccessBatch>() {
            return None;
        }
        // SAFETY: the slice holds exactly size_of::<AccessBatch>() bytes, AccessBatch is
        // plain old data valid for any bit pattern, and read_unaligned copes with any alignment.
        let batch = unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<AccessBatch>()) };
        (batch.magic == ACCESS_BATCH_MAGIC).then_some(batch)
    }

    /// The records in use (a corrupt length is clamped to the batch).
    pub fn records(&self) -> &[AccessRecord] {
        let len = (self.len as usize).min(ACCESS_BATCH_RECORDS);
        &self.records[..len]
    }

    /// The batch's lookups as `NodeAccess` events, in the order the CPU took them.
    pub fn events(&self) -> impl Iterator<Item = crate::Event> + '_ {
        self.records().iter().map(|record| {
            let mut event = crate::Event::new(crate::EventKind::NodeAccess, record.ts_ns)
                .dev(record.dev)
                .nid(record.nid);
            event.pid = record.pid;
            event.tgid = record.tgid;
            // A timed lookup's event: latency in the low 32 bits, device time in the high.
            event.latency_ns = u64::from(record.latency_ns) | u64::from(record.device_ns) << 32;
            event.reason = record.outcome;
            event.len = u32::from(record.reads);
            event
        })
    }
}

/// What the footprint programs (issue 49) read, written by userspace into `FOOTPRINT_LAYOUT`
/// from this kernel's BTF: a node read's nid and device behind its page or folio, and the block
/// size a node block's LZ4 output must have. The programs see an implementation of the RFC's
/// restore by what it must leave whatever its names: the kernel's LZ4 decompressor filling one
/// node block inside mainline's node read function (`read_node_page` / `read_node_folio`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FootprintLayout {
    /// Offset of `struct page.index` (a folio's is the same): the node read's nid.
    pub page_index: u32,
    /// `struct page.mapping`, `address_space.host`, `inode.i_sb`, `super_block.s_dev`: the
    /// device, four reads away.
    pub page_mapping: u32,
    pub mapping_host: u32,
    pub inode_sb: u32,
    pub sb_dev: u32,
    /// The node block's size (F2FS_BLKSIZE): a decompression into a buffer of this capacity
    /// inside a node read is a restore.
    pub block: u32,
    /// What the node read returns when it was served without a read: LOCKED_PAGE.
    pub served: i32,
    /// Non-zero: emit `Restore` (a manifest's probe for restores, when attached, does instead).
    pub emit_restore: u8,
    /// Non-zero: emit `RestoreFail`.
    pub emit_fail: u8,
    pub _pad: [u8; 2],
}

/// The slot queue (`QUEUE_*`) of a payload of `len` bytes, the cover letter's rule: the smallest
/// of 256, 512 and 1024 that holds it; 0 (raw) for none.
pub const fn slot_queue_of(len: u32) -> u8 {
    if len == 0 {
        crate::QUEUE_RAW
    } else if len <= 256 {
        crate::QUEUE_256
    } else if len <= 512 {
        crate::QUEUE_512
    } else if len <= 1024 {
        crate::QUEUE_1024
    } else {
        crate::QUEUE_RAW
    }
}
