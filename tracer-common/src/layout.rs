//! What userspace tells the F2FS programs before attaching: tracepoint field offsets
//! (`TracepointLayout` per `TP_*`), the `CONFIG_*` settings (the journal kprobe's argument
//! positions among them) and the F2FS constants they filter on.

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
pub const CONFIG_COUNT: u32 = 5;
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
/// `CONFIG` index: nonzero = node lookups are timed (issue 51, `AccessLayout::time_lookups`):
/// the node-read programs then note a demand read in the reading thread's lookup, if one is
/// open (`LOOKUP_TIMING`). Zero: they look nothing up for it.
pub const CONFIG_TIME_LOOKUPS: u32 = 4;

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
