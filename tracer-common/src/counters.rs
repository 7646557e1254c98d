//! The kernel's exact per-task counters: the `NODE_COUNTS` hash (`TaskKey` -> `TaskCounts`)
//! and the per-CPU `COUNT_SLOTS` table the node-read program counts in first.

use crate::event::COMM_LEN;

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
    /// Bit number of REQ_RAHEAD in f2fs_submit_page_bio's op_flags (the fast node-read
    /// program's, which reads no layout).
    pub rahead_bit: u32,
    /// Nonzero: commit_creds is hooked (every credential change stamps `TASK_CHANGES`), so a
    /// slot's uid holds until the stamp moves and the programs need not read it per event.
    pub uid_follows_creds: u32,
    pub slots: [CountSlot; COUNT_SLOTS],
}

impl SlotTable {
    pub const EMPTY: SlotTable = SlotTable {
        rahead_bit: 0,
        uid_follows_creds: 0,
        slots: [CountSlot::EMPTY; COUNT_SLOTS],
    };
}
