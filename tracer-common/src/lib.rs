//! Types shared between the kernel-side eBPF programs (tracer-ebpf), the simulator and
//! userspace. Everything here is `#[repr(C)]`, plain old data and `no_std`, so the very same
//! bytes travel through a BPF ring buffer, a recording file or a simulator channel.
#![no_std]

#[cfg(feature = "user")]
extern crate std;

#[cfg(feature = "user")]
pub mod files;
pub mod knobs;
pub mod maps;
#[cfg(feature = "user")]
pub mod text;

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
}

impl EventKind {
    pub const ALL: [EventKind; 17] = [
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
    ];

    pub fn from_u8(value: u8) -> Option<EventKind> {
        EventKind::ALL.iter().copied().find(|k| *k as u8 == value)
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
        }
    }
}

/// `Event::flags`: the read was readahead (REQ_RAHEAD), not demand.
pub const FLAG_READAHEAD: u8 = 1 << 0;
/// `Event::flags`: the read was synchronous (REQ_SYNC).
pub const FLAG_SYNC: u8 = 1 << 1;

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

/// `Event::reason` for `SecondChance`: which path gave it.
pub const SECOND_CHANCE_BY_WORKER: u8 = 1;
pub const SECOND_CHANCE_BY_SHRINKER: u8 = 2;
pub const SECOND_CHANCE_BY_RACE: u8 = 3;

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

/// Key of the in-kernel per-process counters (`NODE_COUNTS` map).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TaskKey {
    pub dev: u32,
    pub tgid: u32,
    pub uid: u32,
    pub _pad: u32,
}

/// Value of the in-kernel per-process counters: counting in the kernel is exact even when the
/// ring buffer overflows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TaskCounts {
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
    /// The last comm seen for this tgid (the thread that submitted the last I/O).
    pub comm: [u8; COMM_LEN],
    /// When `comm` was read (CLOCK_MONOTONIC ns): values are per CPU, and the newest CPU's
    /// comm is the process's current one.
    pub comm_ns: u64,
    /// The `RENAMES` value (the time of the last rename anywhere) `comm` was read at: the
    /// programs read the comm again only when an entry is new or some task was renamed since
    /// (exec, prctl(PR_SET_NAME)), not per event. Kernel-side bookkeeping; userspace ignores
    /// it.
    pub comm_gen: u64,
}

impl TaskCounts {
    /// The comm up to its first NUL.
    pub fn comm_bytes(&self) -> &[u8] {
        let end = self.comm.iter().position(|b| *b == 0).unwrap_or(COMM_LEN);
        &self.comm[..end]
    }
}

/// Slots per CPU in the `COUNT_SLOTS` table. A power of two (a task's slot is its tgid's low
/// bits) whose table fits the kernel's 32 KiB limit on a per-CPU map value.
pub const COUNT_SLOTS: usize = 256;

/// One slot of the per-CPU counter table: one task's counts on one CPU, kept in a plain array
/// so that the common case (the task that counted last in this slot counts again) needs no
/// hashing. A slot is a task's from the first count it makes there (when the slot is free)
/// until userspace, having read its final value after the task exited, hands it back
/// (`SLOT_GRANTS`); a task whose slot is another's counts in `NODE_COUNTS` instead.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CountSlot {
    /// Which occupancy this is: 0 = never used; each claim writes the previous value + 1, after
    /// the key and counts, so a reader that sees a new number knows the slot changed hands.
    pub gen: u64,
    pub key: TaskKey,
    pub counts: TaskCounts,
}

impl CountSlot {
    pub const EMPTY: CountSlot = CountSlot {
        gen: 0,
        key: TaskKey {
            dev: 0,
            tgid: 0,
            uid: 0,
            _pad: 0,
        },
        counts: TaskCounts {
            node_reads_demand: 0,
            node_reads_readahead: 0,
            node_writes: 0,
            checkpoints: 0,
            comm: [0; COMM_LEN],
            comm_ns: 0,
            comm_gen: 0,
        },
    };
}

/// The value of the per-CPU `COUNT_SLOTS` map (one entry): the settings the node-read program
/// needs on every event, next to the slots it counts in (one map value, so one lookup and one
/// memory page per event), written by userspace once before attaching.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotTable {
    /// Nonzero: f2fs_submit_page_bio has the mainline layout
    /// ([`TracepointLayout::is_mainline_page_bio`]) and node reads are counted only, so the
    /// node-read program reads the record at those offsets and looks nothing else up.
    pub fast_node_reads: u32,
    /// Bit number of REQ_RAHEAD in f2fs_submit_page_bio's op_flags (the fast path's).
    pub rahead_bit: u32,
    /// Nonzero: commit_creds is hooked (every credential change stamps `TASK_CHANGES`), so a
    /// slot's uid holds until the stamp moves and the programs need not read it per event.
    pub uid_follows_creds: u32,
    pub _pad: u32,
    pub slots: [CountSlot; COUNT_SLOTS],
}

impl SlotTable {
    pub const EMPTY: SlotTable = SlotTable {
        fast_node_reads: 0,
        rahead_bit: 0,
        uid_follows_creds: 0,
        _pad: 0,
        slots: [CountSlot::EMPTY; COUNT_SLOTS],
    };
}

/// Tracepoint field offsets, read from the format files at run time and handed to the programs
/// through the `TP_LAYOUT` array map (index = `TP_*`). An offset of `FIELD_ABSENT` means the
/// field does not exist in this kernel's variant.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TracepointLayout {
    pub dev: u16,
    pub ino: u16,
    pub index: u16,
    pub op: u16,
    pub op_flags: u16,
    pub type_: u16,
    pub reason: u16,
    pub phase: u16,
    /// Offset of the __data_loc word of a `msg` string field (6.1's checkpoint).
    pub msg_loc: u16,
    /// Bit number of REQ_RAHEAD in op_flags for this kernel.
    pub rahead_bit: u16,
    pub sync_bit: u16,
    /// Offset of a `char *msg` pointer field: the checkpoint tracepoint of 5.10 and 5.15
    /// stores the message's address, not the string (the programs read through it).
    pub msg_ptr: u16,
    /// Offset of a bio's byte count (`size`, f2fs_submit_read_bio): one bio may carry several
    /// node blocks.
    pub size: u16,
}

pub const FIELD_ABSENT: u16 = u16::MAX;

impl TracepointLayout {
    /// f2fs_submit_page_bio's field offsets on 6.1 .. 6.12 (their format files: dev 8, index
    /// 24, op 40, op_flags 44, type 52): when the layout parsed from this kernel's format file
    /// is this one, the node-read program reads those fields at constant offsets, straight
    /// from the record.
    pub const MAINLINE_PAGE_BIO: TracepointLayout = TracepointLayout {
        dev: 8,
        ino: FIELD_ABSENT,
        index: 24,
        op: 40,
        op_flags: 44,
        type_: 52,
        reason: FIELD_ABSENT,
        phase: FIELD_ABSENT,
        msg_loc: FIELD_ABSENT,
        rahead_bit: 0,
        sync_bit: 0,
        msg_ptr: FIELD_ABSENT,
        size: FIELD_ABSENT,
    };

    /// Whether the five fields the node-read program reads sit at the mainline offsets.
    pub fn is_mainline_page_bio(&self) -> bool {
        let m = &Self::MAINLINE_PAGE_BIO;
        self.dev == m.dev
            && self.index == m.index
            && self.op == m.op
            && self.op_flags == m.op_flags
            && self.type_ == m.type_
    }
}

pub const TP_SUBMIT_PAGE_BIO: u32 = 0;
pub const TP_SUBMIT_READ_BIO: u32 = 1;
pub const TP_SUBMIT_PAGE_WRITE: u32 = 2;
pub const TP_WRITE_CHECKPOINT: u32 = 3;
pub const TP_COUNT: u32 = 4;

/// Index into the `CONFIG` array map.
pub const CONFIG_TARGET_TGID: u32 = 0;
pub const CONFIG_COUNT: u32 = 4;
/// `CONFIG` index: bit number of REQ_RAHEAD in `op_flags` for the kprobe fallback, which has no
/// format file to read it from (userspace takes it from another format file, else 19).
pub const CONFIG_RAHEAD_BIT: u32 = 1;
/// `CONFIG` index: nonzero = send every node read through the ring buffer as an event too.
/// Zero (the default) = counts only: node reads go to `NODE_COUNTS` and nowhere else, which
/// is all `top`, `stream` and `daemon` need (their node-read figures are the kernel's exact
/// counters); `record` sets it (a recording is its events).
pub const CONFIG_NODE_READ_EVENTS: u32 = 2;
/// `CONFIG` index: where f2fs_lookup_journal_in_cursum takes its `type`, `val` and `alloc`
/// arguments, packed by `JournalArgs::pack`. Zero (not written) = the 5.10 .. 6.18.12
/// positions 1, 2, 3; 6.18.13 and 6.19 added a first `sbi` argument (positions 2, 3, 4).
pub const CONFIG_JOURNAL_ARGS: u32 = 3;

/// Argument positions (0-based) of f2fs_lookup_journal_in_cursum's `type`, `val` and `alloc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalArgs {
    pub type_: u8,
    pub val: u8,
    pub alloc: u8,
}

impl JournalArgs {
    /// `(journal, type, val, alloc)`: 5.10 .. 6.18.12.
    pub const WITHOUT_SBI: JournalArgs = JournalArgs {
        type_: 1,
        val: 2,
        alloc: 3,
    };
    /// `(sbi, journal, type, val, alloc)`: 6.18.13 and 6.19 on (commit e48e16f3e37f).
    pub const WITH_SBI: JournalArgs = JournalArgs {
        type_: 2,
        val: 3,
        alloc: 4,
    };
    /// Set bit: a written value is never 0, so 0 keeps meaning "not written".
    const PRESENT: u32 = 1 << 24;

    pub const fn pack(self) -> u32 {
        Self::PRESENT | self.type_ as u32 | (self.val as u32) << 8 | (self.alloc as u32) << 16
    }

    /// The positions `pack` wrote, or the old ones when nothing was written.
    pub const fn unpack(word: u32) -> JournalArgs {
        if word & Self::PRESENT == 0 {
            return Self::WITHOUT_SBI;
        }
        JournalArgs {
            type_: word as u8,
            val: (word >> 8) as u8,
            alloc: (word >> 16) as u8,
        }
    }
}

/// F2FS `enum page_type` values the programs filter on (stable across 6.1 .. 6.12+).
pub const F2FS_PAGE_TYPE_NODE: i32 = 1;
/// `REQ_OP_READ`.
pub const REQ_OP_READ: u32 = 0;
/// F2FS block size: iostat counts node reads in these units.
pub const F2FS_BLOCK_BYTES: u32 = 4096;

/// How a probe on one of the RFC's functions (or a simulator hook) turns the function's
/// arguments and return value into an `Event`. Written by userspace from a probe manifest into
/// the `RFC_SPECS` array map, index = `EventKind as u32`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProbeSpec {
    /// One `ValueSpec` per event field, index = `SPEC_FIELD_*`.
    pub fields: [ValueSpec; SPEC_FIELD_COUNT],
    /// Emit only when the return value passes this test (`RET_FILTER_*`); return probes only.
    pub ret_filter: u8,
    pub enabled: u8,
    /// `mem(...)` values are read with bpf_probe_read_user (uprobes) instead of _kernel.
    pub user_memory: u8,
    /// The event is emitted by the return probe; the entry probe only saves arguments and time
    /// (for the latency).
    pub at_return: u8,
    pub ret_filter_value: i32,
}

/// Where one event field comes from.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ValueSpec {
    /// `VALUE_*`.
    pub source: u8,
    /// Argument number (0-based) for `VALUE_ARG` and `VALUE_MEM`.
    pub arg: u8,
    /// Bytes to read for `VALUE_MEM`: 1, 2, 4 or 8.
    pub size: u8,
    /// `XFORM_*`, applied after reading.
    pub transform: u8,
    /// Byte offset for `VALUE_MEM`; the value itself for `VALUE_CONST`.
    pub offset: u32,
}

pub const VALUE_NONE: u8 = 0;
pub const VALUE_ARG: u8 = 1;
pub const VALUE_RET: u8 = 2;
pub const VALUE_CONST: u8 = 3;
/// Read `size` bytes at `arg + offset` (an argument that points at a struct).
pub const VALUE_MEM: u8 = 4;

pub const XFORM_NONE: u8 = 0;
/// 256 / 512 / 1024 (slot bytes) to QUEUE_256 / QUEUE_512 / QUEUE_1024.
pub const XFORM_SLOT_QUEUE: u8 = 1;
/// Negate (a -errno return value to a positive reason).
pub const XFORM_NEG: u8 = 2;
/// Any non-zero value to 1.
pub const XFORM_BOOL: u8 = 3;

pub const SPEC_FIELD_DEV: usize = 0;
pub const SPEC_FIELD_NID: usize = 1;
pub const SPEC_FIELD_LEN: usize = 2;
pub const SPEC_FIELD_QUEUE: usize = 3;
pub const SPEC_FIELD_REASON: usize = 4;
/// A non-zero value sets FLAG_READAHEAD.
pub const SPEC_FIELD_READAHEAD: usize = 5;
pub const SPEC_FIELD_COUNT: usize = 6;

pub const RET_FILTER_NONE: u8 = 0;
pub const RET_FILTER_EQ: u8 = 1;
pub const RET_FILTER_NE: u8 = 2;
pub const RET_FILTER_LT: u8 = 3;
pub const RET_FILTER_GE: u8 = 4;

/// Size of the `RFC_SPECS` and `RFC_COUNTS` maps: every `EventKind` value fits.
pub const RFC_KIND_SLOTS: u32 = 32;

impl ValueSpec {
    /// Apply `transform` to a raw value read from a register or memory.
    pub fn apply(&self, raw: u64) -> u64 {
        match self.transform {
            XFORM_SLOT_QUEUE => match raw {
                256 => QUEUE_256 as u64,
                512 => QUEUE_512 as u64,
                1024 => QUEUE_1024 as u64,
                _ => QUEUE_RAW as u64,
            },
            XFORM_NEG => (raw as i64).wrapping_neg() as u64,
            XFORM_BOOL => (raw != 0) as u64,
            _ => raw,
        }
    }
}

impl ProbeSpec {
    /// Whether a return value passes the filter.
    pub fn accepts_ret(&self, ret: i64) -> bool {
        let value = self.ret_filter_value as i64;
        match self.ret_filter {
            RET_FILTER_EQ => ret == value,
            RET_FILTER_NE => ret != value,
            RET_FILTER_LT => ret < value,
            RET_FILTER_GE => ret >= value,
            _ => true,
        }
    }
}

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
    pub _pad: u16,
}

/// `ACCESS_COUNTS` indices: exact per-CPU counts of what the access programs saw.
pub const ACCESS_COUNT_LOOKUPS: u32 = 0;
pub const ACCESS_COUNT_EVICTIONS: u32 = 1;
pub const ACCESS_COUNT_SLOTS: u32 = 2;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are #[repr(C)], Copy, contain only integers and byte arrays, and
    // have explicit padding fields, so every bit pattern is a valid value.
    unsafe impl aya::Pod for super::Event {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TaskKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TaskCounts {}
    // SAFETY: as above (CountSlot's fields are all 8-byte aligned, no implicit padding).
    unsafe impl aya::Pod for super::CountSlot {}
    // SAFETY: as above: four u32 then 8-byte aligned slots, no implicit padding.
    unsafe impl aya::Pod for super::SlotTable {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TracepointLayout {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::ProbeSpec {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AccessLayout {}
    unsafe impl aya::Pod for super::MetaAreas {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_is_64_bytes_without_implicit_padding() {
        assert_eq!(core::mem::size_of::<Event>(), 64);
        assert_eq!(core::mem::align_of::<Event>(), 8);
    }

    #[test]
    fn slot_table_fits_a_per_cpu_value_without_implicit_padding() {
        assert_eq!(core::mem::size_of::<CountSlot>(), 8 + 16 + 64);
        assert_eq!(
            core::mem::size_of::<SlotTable>(),
            16 + COUNT_SLOTS * core::mem::size_of::<CountSlot>()
        );
        // The kernel refuses per-CPU values above PCPU_MIN_UNIT_SIZE (32 KiB).
        assert!(core::mem::size_of::<SlotTable>() <= 32 * 1024);
        assert!(COUNT_SLOTS.is_power_of_two());
    }

    #[test]
    fn the_mainline_page_bio_layout_is_recognised_by_its_five_fields() {
        let mut layout = TracepointLayout::MAINLINE_PAGE_BIO;
        layout.rahead_bit = 19;
        assert!(layout.is_mainline_page_bio());
        layout.type_ = 56;
        assert!(!layout.is_mainline_page_bio());
    }

    #[test]
    fn journal_argument_positions_survive_the_config_word() {
        for args in [JournalArgs::WITHOUT_SBI, JournalArgs::WITH_SBI] {
            assert_ne!(args.pack(), 0);
            assert_eq!(JournalArgs::unpack(args.pack()), args);
        }
        // A CONFIG slot userspace never wrote reads 0: the pre-6.18.13 positions.
        assert_eq!(JournalArgs::unpack(0), JournalArgs::WITHOUT_SBI);
    }

    #[test]
    fn kinds_round_trip_through_u8() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_u8(kind as u8), Some(kind));
        }
        assert_eq!(EventKind::from_u8(0), None);
        assert_eq!(EventKind::from_u8(200), None);
    }

    #[test]
    fn meta_areas_sort_blocks_by_layout() {
        // mkfs.f2fs's layout of a 1 GiB image: 2 CP, 2 SIT, 4 NAT segments, SSA, main.
        let areas = MetaAreas {
            cp_blkaddr: 512,
            sit_blkaddr: 1536,
            nat_blkaddr: 2560,
            ssa_blkaddr: 4608,
            main_blkaddr: 5120,
            _pad: 0,
        };
        assert_eq!(areas.area_of(0), META_AREA_OTHER);
        assert_eq!(areas.area_of(512), META_AREA_CP);
        assert_eq!(areas.area_of(1535), META_AREA_CP);
        assert_eq!(areas.area_of(1536), META_AREA_SIT);
        assert_eq!(areas.area_of(2560), META_AREA_NAT);
        assert_eq!(areas.area_of(4607), META_AREA_NAT);
        assert_eq!(areas.area_of(4608), META_AREA_SSA);
        assert_eq!(areas.area_of(5119), META_AREA_SSA);
        assert_eq!(areas.area_of(5120), META_AREA_OTHER);
        assert_eq!(META_AREA_NAMES[META_AREA_NAT as usize], "nat");
    }

    #[test]
    fn value_transforms() {
        let spec = |transform| ValueSpec {
            transform,
            ..ValueSpec::default()
        };
        assert_eq!(spec(XFORM_SLOT_QUEUE).apply(512), QUEUE_512 as u64);
        assert_eq!(spec(XFORM_SLOT_QUEUE).apply(4096), QUEUE_RAW as u64);
        assert_eq!(spec(XFORM_NEG).apply((-4i64) as u64), 4);
        assert_eq!(spec(XFORM_BOOL).apply(7), 1);
        assert_eq!(spec(XFORM_NONE).apply(7), 7);
    }

    #[test]
    fn ret_filters() {
        let filter = |ret_filter, ret_filter_value| ProbeSpec {
            ret_filter,
            ret_filter_value,
            ..ProbeSpec::default()
        };
        assert!(filter(RET_FILTER_EQ, 0).accepts_ret(0));
        assert!(!filter(RET_FILTER_EQ, 0).accepts_ret(-5));
        assert!(filter(RET_FILTER_LT, 0).accepts_ret(-5));
        assert!(!filter(RET_FILTER_GE, 0).accepts_ret(-1));
        assert!(filter(RET_FILTER_NONE, 0).accepts_ret(-1));
    }
}
