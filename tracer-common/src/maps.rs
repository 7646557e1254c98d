//! The names of the eBPF object's maps, for userspace to find them by. aya-ebpf's
//! `#[map(name = "...")]` takes a literal, so tracer-ebpf spells each name there once more; a
//! test (tracer-user's `source::bpf::tests`) parses the built object and holds both sides to
//! this list: every name here is a map of the object, every map of the object is named here.

/// The BTF offsets and settings the footprint programs read (`FootprintLayout`).
pub const FOOTPRINT_LAYOUT: &str = "FOOTPRINT_LAYOUT";
/// Per thread inside a node read: what the footprint programs saw of it so far.
pub const FOOTPRINT_READS: &str = "FOOTPRINT_READS";
/// Events to userspace (ring buffer).
pub const EVENTS: &str = "EVENTS";
/// Events the ring buffer had no room for, per CPU.
pub const DROPS: &str = "DROPS";
/// Run-time switches (`CONFIG_*` slots).
pub const CONFIG: &str = "CONFIG";
/// Where each tracepoint's fields are, from its format file.
pub const TP_LAYOUT: &str = "TP_LAYOUT";
/// Exact counters per (device, tgid, uid), where a task holds no counter slot.
pub const NODE_COUNTS: &str = "NODE_COUNTS";
/// Each CPU's counter slots (a task counts in the one its tgid's low bits name).
pub const COUNT_SLOTS: &str = "COUNT_SLOTS";
/// Per slot, the occupancy userspace read the final counts of (the slot may change hands).
pub const SLOT_GRANTS: &str = "SLOT_GRANTS";
/// Each CPU's copy of the tracepoint record being handled.
pub const TP_RECORD: &str = "TP_RECORD";
/// Increments that found NODE_COUNTS full.
pub const COUNT_FAILS: &str = "COUNT_FAILS";
/// Kprobe fallback: read_node_page's op_flags per thread, from entry to return.
pub const READ_NODE_ARGS: &str = "READ_NODE_ARGS";
/// Kprobe fallback: threads inside f2fs_ra_node_page.
pub const RA_ACTIVE: &str = "RA_ACTIVE";
/// When some task last changed its comm or its credentials.
pub const TASK_CHANGES: &str = "TASK_CHANGES";
/// Each F2FS device's metadata layout.
pub const META_AREAS: &str = "META_AREAS";
/// Exact metadata reads per area and journal entries per kind.
pub const CPANAT_COUNTS: &str = "CPANAT_COUNTS";
/// The BTF offsets the `--accesses` programs read.
pub const ACCESS_LAYOUT: &str = "ACCESS_LAYOUT";
/// Device -> its node inode number.
pub const NODE_INO: &str = "NODE_INO";
/// Per CPU, the file system whose device the lookup program last read, and its generation.
pub const ACCESS_SEEN: &str = "ACCESS_SEEN";
/// The `--accesses` programs' counts (`ACCESS_COUNT_*`).
pub const ACCESS_COUNTS: &str = "ACCESS_COUNTS";
/// Per CPU, the node lookups not yet sent (`AccessBatch`).
pub const ACCESS_BATCH: &str = "ACCESS_BATCH";
/// Per thread, its timed node lookup in progress: start, arguments, what it saw.
pub const LOOKUP_TIMING: &str = "LOOKUP_TIMING";
/// Per CPU, the timed lookup running on it (`sched_switch` moves it to `LOOKUP_TIMING`).
pub const LOOKUP_SLOT: &str = "LOOKUP_SLOT";
/// A timed lookup's block request in flight, by device and sector: its thread, its issue.
pub const BLOCK_IO: &str = "BLOCK_IO";
/// F2FS superblocks torn down (`kill_f2fs_super` returns) since loading.
pub const SB_GENERATION: &str = "SB_GENERATION";
/// The RFC probes' decoding specs, index = EventKind.
pub const RFC_SPECS: &str = "RFC_SPECS";
/// Events emitted per RFC kind, counted before the ring buffer.
pub const RFC_COUNTS: &str = "RFC_COUNTS";
/// What an RFC probe keeps from entry to return.
pub const RFC_STASH: &str = "RFC_STASH";
/// The ring-buffer benchmark's settings: only in the bench's build of the programs (tracer-ebpf's
/// `bench` feature), not in the product's object, so not in [`ALL`].
pub const BENCH_SETTINGS: &str = "BENCH_SETTINGS";

/// Every map of the product's object.
pub const ALL: [&str; 28] = [
    EVENTS,
    DROPS,
    CONFIG,
    TP_LAYOUT,
    NODE_COUNTS,
    COUNT_SLOTS,
    SLOT_GRANTS,
    TP_RECORD,
    COUNT_FAILS,
    READ_NODE_ARGS,
    RA_ACTIVE,
    TASK_CHANGES,
    META_AREAS,
    CPANAT_COUNTS,
    ACCESS_LAYOUT,
    NODE_INO,
    ACCESS_SEEN,
    ACCESS_COUNTS,
    ACCESS_BATCH,
    SB_GENERATION,
    LOOKUP_TIMING,
    LOOKUP_SLOT,
    BLOCK_IO,
    RFC_SPECS,
    RFC_COUNTS,
    RFC_STASH,
    FOOTPRINT_LAYOUT,
    FOOTPRINT_READS,
];

/// The eBPF programs' frequent events wake the `EVENTS` reader once this many wait, not per
/// event (a paced replay wakes as often, so that it costs what a live run costs). 4,096 cut
/// the daemon's wakeups to a quarter, but events then lagged the counters' readings by up to
/// 4,096, and vm-foreign's check of a per-event kind against its counter failed (issue 53).
pub const RING_WAKEUP_EVENTS: u64 = 1024;
