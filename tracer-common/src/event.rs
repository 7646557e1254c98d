//! The event: what happened (`EventKind`), its 64-byte record (`Event`) and the codes its
//! `queue`, `reason` and `flags` fields carry per kind; and `MetaAreas`, the layout the
//! metadata-write codes are computed from. Readers decode the codes with `Event::decode`
//! (`decode.rs`); writers (the eBPF programs, the simulator) set the raw fields.

/// Length of a task's comm, as in the kernel's `TASK_COMM_LEN`.
pub const COMM_LEN: usize = 16;

/// What happened. The numeric values are part of the recording format: never reuse one.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A node block read submitted to the block layer (FS_NODE_READ_IO). `nid`, `flags`.
    NodeRead = 1,
    /// A node block write submitted to the block layer. `nid`.
    NodeWrite = 2,
    /// A checkpoint phase. `reason` = CP reason flags, `queue` = phase (see `CP_PHASE_*`).
    Checkpoint = 3,
    /// A raw entry converted to a compressed one. `nid`, `len` = payload, `queue` = slot.
    Convert = 4,
    /// Compression result not retained (over threshold or over 1024 bytes). `nid`, `len`.
    ConvertReject = 5,
    /// An access raced the conversion: the new compressed object was discarded. `nid`.
    ConvertAbort = 6,
    /// A compressed entry restored to raw. `nid`, `len`, `queue` = slot, `latency_ns`.
    Restore = 7,
    /// Restore validation failed; the copy was dropped and disk read. `reason` = RESTORE_FAIL_*.
    RestoreFail = 8,
    /// Raw buffer allocation failed during restore; the compressed copy was kept. `nid`.
    RestoreNomem = 9,
    /// An entry reclaimed by the shrinker. `queue` = which queue it came from.
    Reclaim = 10,
    /// REFERENCED entry moved to its queue's tail instead of being converted or reclaimed.
    /// `queue`, `reason` = SECOND_CHANCE_BY_*.
    SecondChance = 11,
    /// Events lost before userspace saw them. `len` = how many.
    Lost = 12,
    /// The self-test event `nodescope probe` uses to prove the ring buffer works.
    Hello = 13,
    /// A lookup of a node block (issue #13's access traces), hit or miss: `nid`, the task.
    /// Captured only when asked (`record --accesses`): every lookup is far more than the reads.
    NodeAccess = 14,
    /// A node page left the page cache (evicted or truncated). `nid`.
    NodeEvict = 15,
    /// A metadata block write (F2FS page type META or META_FLUSH) submitted to the block
    /// layer. `nid` = block address, `queue` = the area it lies in (`META_AREA_*`, from the
    /// device's superblock), `dev`.
    MetaWrite = 16,
    /// An entry put into the current summary's journal by a checkpoint, instead of a NAT or
    /// SIT block. `queue` = `JOURNAL_NAT` or `JOURNAL_SIT`, `nid` = the nid (NAT) or segment
    /// number (SIT). The kprobe carries no device: `dev` is 0.
    JournalEntry = 17,
    /// A raw entry began: a node page the cache now holds, read from disk or found by a lookup
    /// (the reference module's `f2fs_node_cache_insert`). `nid`. With `Forget`, `Reclaim` and
    /// `RestoreFail` it makes every entry's life visible, so the cache's population is counted,
    /// not guessed from node reads.
    Insert = 18,
    /// An entry dropped for any reason but reclaim or a failed restore (its node freed, a
    /// compressed copy made stale by a write or by the page coming back). `nid`, `queue`.
    Forget = 19,
    /// A reading of one of the mechanism's own counters (its debugfs `name value` lines), for
    /// what no event tells one by one: `reason` = what it measures (`COUNTER_*`), `queue` = the
    /// queue or reason code it is kept per (`COUNTER_SUB_ALL` for a total), `latency_ns` = the
    /// counter's value (cumulative since mount; a gauge's current value), `dev`. Never a task's.
    Counter = 20,
    /// An F2FS inode left the inode cache (F2FS's own `f2fs:f2fs_evict_inode`): the next open
    /// of the file reads its inode block again (`f2fs_iget`), and its context and extent
    /// cache are built again. `nid` = the inode number (an inode's nid), `dev`. Captured with
    /// the access trace (`record --accesses`).
    InodeEvict = 21,
    /// Reclaim asked F2FS's shrinker to scan (`vmscan:mm_shrink_slab_start`, kept in the kernel
    /// for F2FS's scan function only): `nid` = the objects F2FS counted (`cache_items`: its
    /// extent caches, clean NAT entries, free nids and, with the RFC, its node cache; one
    /// shrinker for every F2FS mount), `len` = the objects reclaim asks it to scan
    /// (`total_scan`), `reason` = the reclaim priority (12, `DEF_PRIORITY`, down to 0).
    /// `dev` is 0. Captured with the access trace (`record --accesses`): the what-if replays
    /// the kernel's reclaim from these.
    ShrinkerScan = 22,
}

impl EventKind {
    pub const ALL: [EventKind; 22] = [
        EventKind::NodeRead,
        EventKind::NodeWrite,
        EventKind::Checkpoint,
        EventKind::Convert,
        EventKind::ConvertReject,
        EventKind::ConvertAbort,
        EventKind::Restore,
        EventKind::RestoreFail,
        EventKind::RestoreNomem,
        EventKind::Reclaim,
        EventKind::SecondChance,
        EventKind::Lost,
        EventKind::Hello,
        EventKind::NodeAccess,
        EventKind::NodeEvict,
        EventKind::MetaWrite,
        EventKind::JournalEntry,
        EventKind::Insert,
        EventKind::Forget,
        EventKind::Counter,
        EventKind::InodeEvict,
        EventKind::ShrinkerScan,
    ];

    /// A match, not a search of `ALL`: `Event::decode` calls this for every event.
    #[inline]
    pub const fn from_u8(value: u8) -> Option<EventKind> {
        Some(match value {
            1 => EventKind::NodeRead,
            2 => EventKind::NodeWrite,
            3 => EventKind::Checkpoint,
            4 => EventKind::Convert,
            5 => EventKind::ConvertReject,
            6 => EventKind::ConvertAbort,
            7 => EventKind::Restore,
            8 => EventKind::RestoreFail,
            9 => EventKind::RestoreNomem,
            10 => EventKind::Reclaim,
            11 => EventKind::SecondChance,
            12 => EventKind::Lost,
            13 => EventKind::Hello,
            14 => EventKind::NodeAccess,
            15 => EventKind::NodeEvict,
            16 => EventKind::MetaWrite,
            17 => EventKind::JournalEntry,
            18 => EventKind::Insert,
            19 => EventKind::Forget,
            20 => EventKind::Counter,
            21 => EventKind::InodeEvict,
            22 => EventKind::ShrinkerScan,
            _ => return None,
        })
    }

    /// Stable snake_case name, used in JSON and probe manifests.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::NodeRead => "node_read",
            EventKind::NodeWrite => "node_write",
            EventKind::Checkpoint => "checkpoint",
            EventKind::Convert => "convert",
            EventKind::ConvertReject => "convert_reject",
            EventKind::ConvertAbort => "convert_abort",
            EventKind::Restore => "restore",
            EventKind::RestoreFail => "restore_fail",
            EventKind::RestoreNomem => "restore_nomem",
            EventKind::Reclaim => "reclaim",
            EventKind::SecondChance => "second_chance",
            EventKind::Lost => "lost",
            EventKind::Hello => "hello",
            EventKind::NodeAccess => "node_access",
            EventKind::NodeEvict => "node_evict",
            EventKind::MetaWrite => "meta_write",
            EventKind::JournalEntry => "journal_entry",
            EventKind::Insert => "insert",
            EventKind::Forget => "forget",
            EventKind::Counter => "counter",
            EventKind::InodeEvict => "inode_evict",
            EventKind::ShrinkerScan => "shrinker_scan",
        }
    }
}

/// `Event::flags`: the read was readahead (REQ_RAHEAD), not demand.
pub const FLAG_READAHEAD: u8 = 1 << 0;
/// `Event::flags`: the read was synchronous (REQ_SYNC).
pub const FLAG_SYNC: u8 = 1 << 1;

/// `Event::flags` of a `NodeAccess`: the node page was created in memory (a new inode or node
/// page), not looked up: raw, dirty and referenced. The kernel's lookup probe never sets it;
/// the simulator does, so that a replay of its accesses (`nodescope whatif`) creates what it
/// created.
pub const ACCESS_NEW: u8 = 1 << 6;
/// `Event::flags` of a `NodeAccess`: the lookup was for a modification (the page is dirtied).
pub const ACCESS_DIRTY: u8 = 1 << 7;

/// `Event::queue` values: which node-cache queue an entry sits on.
pub const QUEUE_RAW: u8 = 0;
pub const QUEUE_256: u8 = 1;
pub const QUEUE_512: u8 = 2;
pub const QUEUE_1024: u8 = 3;
pub const QUEUE_COUNT: usize = 4;
/// Slot size in bytes of each compressed queue (index = queue value).
pub const QUEUE_SLOT_BYTES: [u32; QUEUE_COUNT] = [4096, 256, 512, 1024];

/// `Event::reason` for `RestoreFail`: which validation step failed, in the RFC's order.
pub const RESTORE_FAIL_SLOT_SIZE: u8 = 1;
pub const RESTORE_FAIL_PAYLOAD_LEN: u8 = 2;
pub const RESTORE_FAIL_LZ4_LEN: u8 = 3;
pub const RESTORE_FAIL_CRC: u8 = 4;
pub const RESTORE_FAIL_FOOTER: u8 = 5;
pub const RESTORE_FAIL_INODE_CHECKSUM: u8 = 6;
pub const RESTORE_FAIL_NODE_TYPE: u8 = 7;
pub const RESTORE_FAIL_REASONS: [(u8, &str); 7] = [
    (RESTORE_FAIL_SLOT_SIZE, "slot_size"),
    (RESTORE_FAIL_PAYLOAD_LEN, "payload_len"),
    (RESTORE_FAIL_LZ4_LEN, "lz4_len"),
    (RESTORE_FAIL_CRC, "crc"),
    (RESTORE_FAIL_FOOTER, "footer"),
    (RESTORE_FAIL_INODE_CHECKSUM, "inode_checksum"),
    (RESTORE_FAIL_NODE_TYPE, "node_type"),
];

/// `Event::reason` of a `Counter` reading: what the counter measures. Below 0x80 it is the
/// `EventKind` whose events it counts (cumulative); the others are these.
/// The cache's entries on the queue `Event::queue`, now (a gauge).
pub const COUNTER_ENTRIES: u8 = 0x80;
/// The sum of the restores' latencies, in nanoseconds (cumulative).
pub const COUNTER_RESTORE_NS: u8 = 0x81;
/// `Event::queue` of a `Counter` reading kept for all queues or reasons together.
pub const COUNTER_SUB_ALL: u8 = 0xff;

/// `Event::reason` for `SecondChance`: which path gave it.
pub const SECOND_CHANCE_BY_WORKER: u8 = 1;
pub const SECOND_CHANCE_BY_SHRINKER: u8 = 2;
pub const SECOND_CHANCE_BY_RACE: u8 = 3;
pub const SECOND_CHANCE_REASONS: [(u8, &str); 3] = [
    (SECOND_CHANCE_BY_WORKER, "worker"),
    (SECOND_CHANCE_BY_SHRINKER, "shrinker"),
    (SECOND_CHANCE_BY_RACE, "race"),
];

/// `Event::queue` for `Checkpoint`: the phase, as newer kernels number it. 6.1 kernels carry a
/// message string instead; the tracer maps it to the same numbers.
pub const CP_PHASE_START_BLOCK_OPS: u8 = 0;
pub const CP_PHASE_FINISH_BLOCK_OPS: u8 = 1;
pub const CP_PHASE_FINISH_CHECKPOINT: u8 = 2;

/// `Event::queue` for `MetaWrite`: the area of the F2FS layout the block lies in. `UNKNOWN`
/// when the device's layout was not known to the program (no superblock read for it).
pub const META_AREA_UNKNOWN: u8 = 0;
/// The checkpoint packs (`cp_blkaddr .. sit_blkaddr`): CP blocks, orphans, compacted summaries.
pub const META_AREA_CP: u8 = 1;
pub const META_AREA_SIT: u8 = 2;
pub const META_AREA_NAT: u8 = 3;
/// Segment summary area (`ssa_blkaddr .. main_blkaddr`).
pub const META_AREA_SSA: u8 = 4;
/// At or past `main_blkaddr`, or before `cp_blkaddr`.
pub const META_AREA_OTHER: u8 = 5;
pub const META_AREA_COUNT: usize = 6;
pub const META_AREA_NAMES: [&str; META_AREA_COUNT] =
    ["unknown", "cp", "sit", "nat", "ssa", "other"];

/// `Event::queue` for `JournalEntry`: F2FS's `NAT_JOURNAL` and `SIT_JOURNAL`.
pub const JOURNAL_NAT: u8 = 0;
pub const JOURNAL_SIT: u8 = 1;

/// The start block of each area of one device's F2FS layout, from its superblock, written by
/// userspace into the `META_AREAS` map (key = device number as the tracepoints print it).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MetaAreas {
    pub cp_blkaddr: u32,
    pub sit_blkaddr: u32,
    pub nat_blkaddr: u32,
    pub ssa_blkaddr: u32,
    pub main_blkaddr: u32,
    pub _pad: u32,
}

impl MetaAreas {
    /// mkfs.f2fs's layout of a 1 GiB image (2 CP, 2 SIT, 4 NAT segments, SSA, main), for tests.
    #[cfg(test)]
    pub(crate) const MKFS_1GIB: MetaAreas = MetaAreas {
        cp_blkaddr: 512,
        sit_blkaddr: 1536,
        nat_blkaddr: 2560,
        ssa_blkaddr: 4608,
        main_blkaddr: 5120,
        _pad: 0,
    };

    /// The `META_AREA_*` of block `addr`.
    pub const fn area_of(&self, addr: u32) -> u8 {
        if addr < self.cp_blkaddr || addr >= self.main_blkaddr {
            META_AREA_OTHER
        } else if addr < self.sit_blkaddr {
            META_AREA_CP
        } else if addr < self.nat_blkaddr {
            META_AREA_SIT
        } else if addr < self.ssa_blkaddr {
            META_AREA_NAT
        } else {
            META_AREA_SSA
        }
    }
}

/// One node-cache event. 64 bytes, the same layout in the kernel, the simulator, recordings.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Monotonic time (CLOCK_MONOTONIC, or the simulator's virtual clock), nanoseconds.
    pub ts_ns: u64,
    /// Time spent in the probed function when an entry and a return probe pair up.
    pub latency_ns: u64,
    /// Kernel device number as F2FS tracepoints print it (major << 20 | minor).
    pub dev: u32,
    /// Thread id and process id (kernel pid and tgid) of the task current at the event.
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    /// Node id.
    pub nid: u32,
    /// Byte length: compressed payload for conversions and restores, count for `Lost`.
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub queue: u8,
    pub reason: u8,
    pub _pad: [u8; 4],
    pub comm: [u8; COMM_LEN],
}

impl Event {
    pub const ZERO: Event = Event {
        ts_ns: 0,
        latency_ns: 0,
        dev: 0,
        pid: 0,
        tgid: 0,
        uid: 0,
        nid: 0,
        len: 0,
        kind: 0,
        flags: 0,
        queue: 0,
        reason: 0,
        _pad: [0; 4],
        comm: [0; COMM_LEN],
    };

    /// An event of `kind` at `ts_ns`, everything else zero; the setters below fill the rest
    /// (tests, benchmarks and the simulator build events this way).
    pub const fn new(kind: EventKind, ts_ns: u64) -> Event {
        let mut event = Event::ZERO;
        event.kind = kind as u8;
        event.ts_ns = ts_ns;
        event
    }

    /// The process: pid and tgid both set to `tgid` (a single-threaded task).
    pub const fn task(mut self, tgid: u32) -> Event {
        self.pid = tgid;
        self.tgid = tgid;
        self
    }

    pub const fn uid(mut self, uid: u32) -> Event {
        self.uid = uid;
        self
    }

    pub const fn dev(mut self, dev: u32) -> Event {
        self.dev = dev;
        self
    }

    pub const fn nid(mut self, nid: u32) -> Event {
        self.nid = nid;
        self
    }

    pub const fn queue(mut self, queue: u8) -> Event {
        self.queue = queue;
        self
    }

    pub const fn len(mut self, len: u32) -> Event {
        self.len = len;
        self
    }

    pub const fn flags(mut self, flags: u8) -> Event {
        self.flags = flags;
        self
    }

    /// The task's command name, cut to `COMM_LEN - 1` bytes like the kernel's.
    pub fn comm(mut self, name: &str) -> Event {
        let bytes = name.as_bytes();
        let n = bytes.len().min(COMM_LEN - 1);
        self.comm = [0; COMM_LEN];
        self.comm[..n].copy_from_slice(&bytes[..n]);
        self
    }

    pub fn kind(&self) -> Option<EventKind> {
        EventKind::from_u8(self.kind)
    }

    pub fn is_readahead(&self) -> bool {
        self.flags & FLAG_READAHEAD != 0
    }

    /// Copy an event out of bytes (a ring-buffer record, a recording); None when too short.
    pub fn from_bytes(bytes: &[u8]) -> Option<Event> {
        if bytes.len() < core::mem::size_of::<Event>() {
            return None;
        }
        // SAFETY: the slice holds at least size_of::<Event>() bytes, Event is plain old data
        // valid for any bit pattern, and read_unaligned copes with any alignment.
        Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<Event>()) })
    }

    /// Events' bytes, one after another, as `as_bytes` gives each: a recorder copies a batch
    /// in one go.
    pub fn slice_as_bytes(events: &[Event]) -> &[u8] {
        // SAFETY: as in as_bytes, every byte of an Event is initialised; the slice is
        // contiguous, its length in bytes cannot overflow (it is already allocated), and the
        // result borrows `events`.
        unsafe {
            core::slice::from_raw_parts(
                events.as_ptr().cast::<u8>(),
                core::mem::size_of_val(events),
            )
        }
    }

    /// Events' bytes to write over, as `slice_as_bytes` reads them: a recording's block is
    /// decoded straight into events.
    pub fn slice_as_bytes_mut(events: &mut [Event]) -> &mut [u8] {
        // SAFETY: as in slice_as_bytes; and any bytes written make valid events (plain old
        // data, every bit pattern valid, see from_bytes). The result borrows `events` mutably.
        unsafe {
            core::slice::from_raw_parts_mut(
                events.as_mut_ptr().cast::<u8>(),
                core::mem::size_of_val(events),
            )
        }
    }

    /// The event's bytes, exactly as they travel through the ring buffer.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: Event is #[repr(C)] with explicit padding fields, so all its bytes are
        // initialised; the slice borrows self and lives no longer.
        unsafe {
            core::slice::from_raw_parts(
                (self as *const Event).cast::<u8>(),
                core::mem::size_of::<Event>(),
            )
        }
    }

    /// The comm up to its first NUL.
    pub fn comm_bytes(&self) -> &[u8] {
        let end = self.comm.iter().position(|b| *b == 0).unwrap_or(COMM_LEN);
        &self.comm[..end]
    }
}
