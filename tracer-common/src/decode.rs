//! `Event::decode`: the 64-byte record read as what its kind means. The record's `queue` byte
//! is a queue, a checkpoint phase, a metadata area or a journal depending on the kind, and
//! `nid` a node id, a block address or a segment number; `Decoded` names each of them, with
//! its type, so that consumers match on variants instead of reading codes by hand.
//!
//! The wire layout is untouched: this is a view computed from an `Event`, never stored.

use crate::access::{RETRIEVAL_OUTCOMES, RETRIEVAL_OUTCOME_COUNT};
use crate::event::*;

/// An event's kind-specific meaning. The fields every kind shares (time, device, task) stay on
/// the `Event`; a variant carries only what its kind gives meaning to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    NodeRead {
        nid: u32,
        readahead: bool,
        sync: bool,
    },
    NodeWrite {
        nid: u32,
    },
    Checkpoint {
        phase: CheckpointPhase,
        /// The CP reason flags (`CP_UMOUNT`, `CP_SYNC`, ...), a bit set.
        reason_flags: u8,
    },
    /// A raw entry became a compressed one in `queue`.
    Convert {
        nid: u32,
        payload_len: u32,
        queue: Queue,
    },
    ConvertReject {
        nid: u32,
        payload_len: u32,
    },
    ConvertAbort {
        nid: u32,
    },
    /// A compressed entry of `queue` restored to raw.
    Restore {
        nid: u32,
        payload_len: u32,
        queue: Queue,
        latency_ns: u64,
    },
    RestoreFail {
        nid: u32,
        payload_len: u32,
        queue: Queue,
        /// None for a code this build does not know: the event still happened and counts.
        reason: Option<RestoreFailure>,
    },
    RestoreNomem {
        nid: u32,
        queue: Queue,
    },
    Reclaim {
        nid: u32,
        queue: Queue,
    },
    /// A raw entry began.
    Insert {
        nid: u32,
    },
    /// An entry of `queue` dropped, neither reclaimed nor a failed restore.
    Forget {
        nid: u32,
        queue: Queue,
    },
    SecondChance {
        nid: u32,
        queue: Queue,
        /// None for a code this build does not know: the event still happened and counts.
        by: Option<SecondChanceBy>,
    },
    Lost {
        count: u32,
    },
    Hello,
    NodeAccess {
        nid: u32,
        access: Access,
        /// A timed lookup's outcome and latency (issue 51); None when the lookup was not
        /// timed (or its outcome code is one this build does not know).
        retrieval: Option<Retrieval>,
    },
    NodeEvict {
        nid: u32,
    },
    /// An inode left F2FS's inode cache: `ino` is its inode number (and its inode block's nid).
    InodeEvict {
        ino: u32,
    },
    /// Reclaim asked F2FS's shrinker to scan `to_scan` of the `count` objects it counted, at
    /// reclaim priority `priority`.
    ShrinkerScan {
        count: u32,
        to_scan: u32,
        priority: u8,
    },
    MetaWrite {
        block: u32,
        area: MetaArea,
    },
    JournalEntry(JournalEntry),
    /// A reading of one of the mechanism's own counters.
    Counter(CounterReading),
    /// A kind, or a kind's code, this build does not know: a newer tracer's recording, or a
    /// damaged one. Never a panic: the kernel side and old recordings must not crash a reader.
    Unknown(Unrecognised),
}

/// What a `Counter` event measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// Events of this kind so far (cumulative since the counter began).
    Events(EventKind),
    /// Entries on a queue now (a gauge).
    Entries,
    /// The restores' latencies summed, in nanoseconds (cumulative).
    RestoreNs,
}

impl Measure {
    #[inline]
    pub const fn from_code(code: u8) -> Option<Measure> {
        match code {
            COUNTER_ENTRIES => Some(Measure::Entries),
            COUNTER_RESTORE_NS => Some(Measure::RestoreNs),
            other => match EventKind::from_u8(other) {
                Some(kind) => Some(Measure::Events(kind)),
                None => None,
            },
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            Measure::Events(kind) => kind as u8,
            Measure::Entries => COUNTER_ENTRIES,
            Measure::RestoreNs => COUNTER_RESTORE_NS,
        }
    }
}

/// One counter's value: what it measures, the queue or reason code it is kept per (None: a
/// total), and the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterReading {
    pub measure: Measure,
    pub sub: Option<u8>,
    pub value: u64,
}

/// What `Decoded::Unknown` did not recognise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrecognised {
    /// The `kind` byte names no `EventKind`.
    Kind(u8),
    /// A known kind whose `queue` byte (its queue, phase, area or journal) holds no known code.
    Code { kind: EventKind, code: u8 },
}

/// A node-cache queue: the raw LRU, then one per compressed slot size (`QUEUE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Queue {
    Raw,
    B256,
    B512,
    B1024,
}

impl Queue {
    pub const ALL: [Queue; QUEUE_COUNT] = [Queue::Raw, Queue::B256, Queue::B512, Queue::B1024];
    /// The compressed queues, smallest slot first.
    pub const COMPRESSED: [Queue; QUEUE_COUNT - 1] = [Queue::B256, Queue::B512, Queue::B1024];

    #[inline]
    pub const fn from_code(code: u8) -> Option<Queue> {
        match code {
            QUEUE_RAW => Some(Queue::Raw),
            QUEUE_256 => Some(Queue::B256),
            QUEUE_512 => Some(Queue::B512),
            QUEUE_1024 => Some(Queue::B1024),
            _ => None,
        }
    }

    /// The `QUEUE_*` code, also the queue's index in per-queue arrays.
    pub const fn code(self) -> u8 {
        match self {
            Queue::Raw => QUEUE_RAW,
            Queue::B256 => QUEUE_256,
            Queue::B512 => QUEUE_512,
            Queue::B1024 => QUEUE_1024,
        }
    }

    pub const fn index(self) -> usize {
        self.code() as usize
    }

    /// Bytes an entry of this queue holds: a page for raw, the slot size for the others.
    pub const fn slot_bytes(self) -> u32 {
        QUEUE_SLOT_BYTES[self.index()]
    }

    pub const fn is_compressed(self) -> bool {
        !matches!(self, Queue::Raw)
    }
}

/// A phase of `f2fs_write_checkpoint` (`CP_PHASE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckpointPhase {
    StartBlockOps,
    FinishBlockOps,
    FinishCheckpoint,
}

impl CheckpointPhase {
    pub const ALL: [CheckpointPhase; 3] = [
        CheckpointPhase::StartBlockOps,
        CheckpointPhase::FinishBlockOps,
        CheckpointPhase::FinishCheckpoint,
    ];

    #[inline]
    pub const fn from_code(code: u8) -> Option<CheckpointPhase> {
        match code {
            CP_PHASE_START_BLOCK_OPS => Some(CheckpointPhase::StartBlockOps),
            CP_PHASE_FINISH_BLOCK_OPS => Some(CheckpointPhase::FinishBlockOps),
            CP_PHASE_FINISH_CHECKPOINT => Some(CheckpointPhase::FinishCheckpoint),
            _ => None,
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            CheckpointPhase::StartBlockOps => CP_PHASE_START_BLOCK_OPS,
            CheckpointPhase::FinishBlockOps => CP_PHASE_FINISH_BLOCK_OPS,
            CheckpointPhase::FinishCheckpoint => CP_PHASE_FINISH_CHECKPOINT,
        }
    }
}

/// The area of the F2FS layout a metadata block lies in (`META_AREA_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetaArea {
    /// The device's layout was not known to the program (no superblock read for it).
    LayoutUnknown,
    /// The checkpoint packs: CP blocks, orphans, compacted summaries.
    Cp,
    Sit,
    Nat,
    /// The segment summary area.
    Ssa,
    /// At or past the main area, or before the checkpoint packs.
    Other,
}

impl MetaArea {
    pub const ALL: [MetaArea; META_AREA_COUNT] = [
        MetaArea::LayoutUnknown,
        MetaArea::Cp,
        MetaArea::Sit,
        MetaArea::Nat,
        MetaArea::Ssa,
        MetaArea::Other,
    ];

    #[inline]
    pub const fn from_code(code: u8) -> Option<MetaArea> {
        match code {
            META_AREA_UNKNOWN => Some(MetaArea::LayoutUnknown),
            META_AREA_CP => Some(MetaArea::Cp),
            META_AREA_SIT => Some(MetaArea::Sit),
            META_AREA_NAT => Some(MetaArea::Nat),
            META_AREA_SSA => Some(MetaArea::Ssa),
            META_AREA_OTHER => Some(MetaArea::Other),
            _ => None,
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            MetaArea::LayoutUnknown => META_AREA_UNKNOWN,
            MetaArea::Cp => META_AREA_CP,
            MetaArea::Sit => META_AREA_SIT,
            MetaArea::Nat => META_AREA_NAT,
            MetaArea::Ssa => META_AREA_SSA,
            MetaArea::Other => META_AREA_OTHER,
        }
    }

    /// Stable name, as in `META_AREA_NAMES`.
    pub const fn name(self) -> &'static str {
        META_AREA_NAMES[self.code() as usize]
    }
}

/// An entry a checkpoint put into the current summary's journal (`JOURNAL_*`): what the entry
/// is keyed by depends on the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JournalEntry {
    /// A NAT entry instead of a NAT block write.
    Nat { nid: u32 },
    /// A SIT entry instead of a SIT block write.
    Sit { segment: u32 },
}

impl JournalEntry {
    /// The entry of journal `code` (`JOURNAL_*`) for the event's `nid` field.
    #[inline]
    pub const fn from_code(code: u8, key: u32) -> Option<JournalEntry> {
        match code {
            JOURNAL_NAT => Some(JournalEntry::Nat { nid: key }),
            JOURNAL_SIT => Some(JournalEntry::Sit { segment: key }),
            _ => None,
        }
    }
}

/// Which restore validation step failed (`RESTORE_FAIL_*`), in the RFC's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RestoreFailure {
    SlotSize,
    PayloadLen,
    Lz4Len,
    Crc,
    Footer,
    InodeChecksum,
    NodeType,
}

impl RestoreFailure {
    pub const ALL: [RestoreFailure; 7] = [
        RestoreFailure::SlotSize,
        RestoreFailure::PayloadLen,
        RestoreFailure::Lz4Len,
        RestoreFailure::Crc,
        RestoreFailure::Footer,
        RestoreFailure::InodeChecksum,
        RestoreFailure::NodeType,
    ];

    #[inline]
    pub const fn from_code(code: u8) -> Option<RestoreFailure> {
        match code {
            RESTORE_FAIL_SLOT_SIZE => Some(RestoreFailure::SlotSize),
            RESTORE_FAIL_PAYLOAD_LEN => Some(RestoreFailure::PayloadLen),
            RESTORE_FAIL_LZ4_LEN => Some(RestoreFailure::Lz4Len),
            RESTORE_FAIL_CRC => Some(RestoreFailure::Crc),
            RESTORE_FAIL_FOOTER => Some(RestoreFailure::Footer),
            RESTORE_FAIL_INODE_CHECKSUM => Some(RestoreFailure::InodeChecksum),
            RESTORE_FAIL_NODE_TYPE => Some(RestoreFailure::NodeType),
            _ => None,
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            RestoreFailure::SlotSize => RESTORE_FAIL_SLOT_SIZE,
            RestoreFailure::PayloadLen => RESTORE_FAIL_PAYLOAD_LEN,
            RestoreFailure::Lz4Len => RESTORE_FAIL_LZ4_LEN,
            RestoreFailure::Crc => RESTORE_FAIL_CRC,
            RestoreFailure::Footer => RESTORE_FAIL_FOOTER,
            RestoreFailure::InodeChecksum => RESTORE_FAIL_INODE_CHECKSUM,
            RestoreFailure::NodeType => RESTORE_FAIL_NODE_TYPE,
        }
    }
}

/// Which path gave an entry its second chance (`SECOND_CHANCE_BY_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecondChanceBy {
    Worker,
    Shrinker,
    Race,
}

impl SecondChanceBy {
    pub const ALL: [SecondChanceBy; 3] = [
        SecondChanceBy::Worker,
        SecondChanceBy::Shrinker,
        SecondChanceBy::Race,
    ];

    #[inline]
    pub const fn from_code(code: u8) -> Option<SecondChanceBy> {
        match code {
            SECOND_CHANCE_BY_WORKER => Some(SecondChanceBy::Worker),
            SECOND_CHANCE_BY_SHRINKER => Some(SecondChanceBy::Shrinker),
            SECOND_CHANCE_BY_RACE => Some(SecondChanceBy::Race),
            _ => None,
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            SecondChanceBy::Worker => SECOND_CHANCE_BY_WORKER,
            SecondChanceBy::Shrinker => SECOND_CHANCE_BY_SHRINKER,
            SecondChanceBy::Race => SECOND_CHANCE_BY_RACE,
        }
    }
}

/// A timed node lookup: which one of the five ways it got its node, and how long it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Retrieval {
    pub outcome: Outcome,
    pub latency_ns: u64,
    /// Demand node reads the lookup's thread submitted while it ran (the event's `len`).
    pub reads: u32,
    /// Those reads' device time, the block layer's issue to completion (0: not measured).
    pub device_ns: u64,
}

/// A timed lookup's outcome (`RETRIEVAL_*`, tracer-common's access.rs says what each means).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Hit,
    Restore,
    DiskRead,
    Waited,
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; RETRIEVAL_OUTCOME_COUNT] = [
        Outcome::Hit,
        Outcome::Restore,
        Outcome::DiskRead,
        Outcome::Waited,
        Outcome::Error,
    ];

    #[inline]
    pub const fn from_code(code: u8) -> Option<Outcome> {
        match code {
            crate::RETRIEVAL_HIT => Some(Outcome::Hit),
            crate::RETRIEVAL_RESTORE => Some(Outcome::Restore),
            crate::RETRIEVAL_DISK_READ => Some(Outcome::DiskRead),
            crate::RETRIEVAL_WAITED => Some(Outcome::Waited),
            crate::RETRIEVAL_ERROR => Some(Outcome::Error),
            _ => None,
        }
    }

    /// 0..5, the order of `ALL`.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn code(self) -> u8 {
        RETRIEVAL_OUTCOMES[self as usize].0
    }

    /// Stable snake_case name: hit, restore, disk_read, waited, error.
    pub const fn name(self) -> &'static str {
        RETRIEVAL_OUTCOMES[self as usize].1
    }
}

/// What a node lookup was for (`NodeAccess` flags `ACCESS_NEW`, `ACCESS_DIRTY`; neither for a
/// plain lookup, which is all the kernel's probe reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Lookup,
    /// The node page was created in memory (a new inode or node page), not looked up.
    Create,
    /// The page was looked up to be modified (dirtied).
    Modify,
}

impl Access {
    /// A creation is also dirty: `ACCESS_NEW` wins over `ACCESS_DIRTY`. Other bits are ignored.
    #[inline]
    pub const fn from_flags(flags: u8) -> Access {
        if flags & ACCESS_NEW != 0 {
            Access::Create
        } else if flags & ACCESS_DIRTY != 0 {
            Access::Modify
        } else {
            Access::Lookup
        }
    }

    pub const fn flags(self) -> u8 {
        match self {
            Access::Lookup => 0,
            Access::Create => ACCESS_NEW,
            Access::Modify => ACCESS_DIRTY,
        }
    }
}

impl Event {
    /// What this event means, by kind. Cheap (a match on two bytes) but not free: a hot path
    /// decodes each event once and hands the result on (as `Model::ingest` does); never
    /// panics. Inline, so that the common kinds' arms fold into the caller's match.
    #[inline]
    pub fn decode(&self) -> Decoded {
        match EventKind::from_u8(self.kind) {
            Some(kind) => self.decode_kind(kind).unwrap_or_else(Decoded::Unknown),
            None => Decoded::Unknown(Unrecognised::Kind(self.kind)),
        }
    }

    #[inline]
    fn decode_kind(&self, kind: EventKind) -> Result<Decoded, Unrecognised> {
        let nid = self.nid;
        let unrecognised = Unrecognised::Code {
            kind,
            code: self.queue,
        };
        let queue = || Queue::from_code(self.queue).ok_or(unrecognised);
        Ok(match kind {
            EventKind::NodeRead => Decoded::NodeRead {
                nid,
                readahead: self.is_readahead(),
                sync: self.flags & FLAG_SYNC != 0,
            },
            EventKind::NodeWrite => Decoded::NodeWrite { nid },
            EventKind::Checkpoint => Decoded::Checkpoint {
                phase: CheckpointPhase::from_code(self.queue).ok_or(unrecognised)?,
                reason_flags: self.reason,
            },
            EventKind::Convert => Decoded::Convert {
                nid,
                payload_len: self.len,
                queue: queue()?,
            },
            EventKind::ConvertReject => Decoded::ConvertReject {
                nid,
                payload_len: self.len,
            },
            EventKind::ConvertAbort => Decoded::ConvertAbort { nid },
            EventKind::Restore => Decoded::Restore {
                nid,
                payload_len: self.len,
                queue: queue()?,
                latency_ns: self.latency_ns,
            },
            EventKind::RestoreFail => Decoded::RestoreFail {
                nid,
                payload_len: self.len,
                queue: queue()?,
                reason: RestoreFailure::from_code(self.reason),
            },
            EventKind::RestoreNomem => Decoded::RestoreNomem {
                nid,
                queue: queue()?,
            },
            EventKind::Reclaim => Decoded::Reclaim {
                nid,
                queue: queue()?,
            },
            EventKind::Insert => Decoded::Insert { nid },
            EventKind::Forget => Decoded::Forget {
                nid,
                queue: queue()?,
            },
            EventKind::SecondChance => Decoded::SecondChance {
                nid,
                queue: queue()?,
                by: SecondChanceBy::from_code(self.reason),
            },
            EventKind::Lost => Decoded::Lost { count: self.len },
            EventKind::Hello => Decoded::Hello,
            EventKind::NodeAccess => Decoded::NodeAccess {
                nid,
                access: Access::from_flags(self.flags),
                // latency_ns: the time in the low 32 bits, the device time in the high.
                retrieval: Outcome::from_code(self.reason).map(|outcome| Retrieval {
                    outcome,
                    latency_ns: self.latency_ns & u64::from(u32::MAX),
                    reads: self.len,
                    device_ns: self.latency_ns >> 32,
                }),
            },
            EventKind::NodeEvict => Decoded::NodeEvict { nid },
            EventKind::InodeEvict => Decoded::InodeEvict { ino: nid },
            EventKind::ShrinkerScan => Decoded::ShrinkerScan {
                count: nid,
                to_scan: self.len,
                priority: self.reason,
            },
            EventKind::MetaWrite => Decoded::MetaWrite {
                block: nid,
                area: MetaArea::from_code(self.queue).ok_or(unrecognised)?,
            },
            EventKind::JournalEntry => {
                Decoded::JournalEntry(JournalEntry::from_code(self.queue, nid).ok_or(unrecognised)?)
            }
            EventKind::Counter => Decoded::Counter(CounterReading {
                measure: Measure::from_code(self.reason).ok_or(Unrecognised::Code {
                    kind,
                    code: self.reason,
                })?,
                sub: (self.queue != COUNTER_SUB_ALL).then_some(self.queue),
                value: self.latency_ns,
            }),
        })
    }
}

impl Event {
    /// A `Counter` event: `measure`'s value on device `dev`, kept per queue or reason `sub`
    /// (None: a total).
    pub const fn counter(
        ts_ns: u64,
        dev: u32,
        measure: Measure,
        sub: Option<u8>,
        value: u64,
    ) -> Event {
        let mut event = Event::new(EventKind::Counter, ts_ns);
        event.dev = dev;
        event.reason = measure.code();
        event.queue = match sub {
            Some(code) => code,
            None => COUNTER_SUB_ALL,
        };
        event.latency_ns = value;
        event
    }
}

impl Decoded {
    /// The kind, None for an unrecognised kind byte.
    pub const fn kind(&self) -> Option<EventKind> {
        Some(match self {
            Decoded::NodeRead { .. } => EventKind::NodeRead,
            Decoded::NodeWrite { .. } => EventKind::NodeWrite,
            Decoded::Checkpoint { .. } => EventKind::Checkpoint,
            Decoded::Convert { .. } => EventKind::Convert,
            Decoded::ConvertReject { .. } => EventKind::ConvertReject,
            Decoded::ConvertAbort { .. } => EventKind::ConvertAbort,
            Decoded::Restore { .. } => EventKind::Restore,
            Decoded::RestoreFail { .. } => EventKind::RestoreFail,
            Decoded::RestoreNomem { .. } => EventKind::RestoreNomem,
            Decoded::Reclaim { .. } => EventKind::Reclaim,
            Decoded::Insert { .. } => EventKind::Insert,
            Decoded::Forget { .. } => EventKind::Forget,
            Decoded::SecondChance { .. } => EventKind::SecondChance,
            Decoded::Lost { .. } => EventKind::Lost,
            Decoded::Hello => EventKind::Hello,
            Decoded::NodeAccess { .. } => EventKind::NodeAccess,
            Decoded::NodeEvict { .. } => EventKind::NodeEvict,
            Decoded::InodeEvict { .. } => EventKind::InodeEvict,
            Decoded::ShrinkerScan { .. } => EventKind::ShrinkerScan,
            Decoded::MetaWrite { .. } => EventKind::MetaWrite,
            Decoded::JournalEntry(_) => EventKind::JournalEntry,
            Decoded::Counter(_) => EventKind::Counter,
            Decoded::Unknown(Unrecognised::Code { kind, .. }) => *kind,
            Decoded::Unknown(Unrecognised::Kind(_)) => return None,
        })
    }
}

#[cfg(test)]
mod tests;
