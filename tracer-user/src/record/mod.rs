//! The recording format: what `nodescope record` writes and `report` / `--source replay` read.
//!
//! ```text
//! file    = header record* footer?
//! header  = MAGIC (8) | version u16 | json_len u32 | json | crc32(json) u32
//! record  = tag u8 | payload_len u32 | crc32(payload) u32 | payload
//!   tag 'E': events block  = count u32 | lz4 block of count x 64-byte tracer_common::Event
//!   tag 'N': note          = JSON (knob change, controller decision), see `Note`
//!   tag 'F': footer        = JSON `Footer` (totals), always last
//! ```
//! All integers little-endian. Every record carries its own checksum, so a damaged file is read
//! up to the damage and the reader says which record and byte offset broke.
pub mod reader;
pub mod writer;

use serde::{Deserialize, Serialize};
use tracer_common::knobs::Knobs;

pub(crate) const MAGIC: [u8; 8] = *b"NSCOPE\r\n";
pub(crate) const VERSION: u16 = 1;
pub const TAG_EVENTS: u8 = b'E';
pub(crate) const TAG_NOTE: u8 = b'N';
pub(crate) const TAG_FOOTER: u8 = b'F';
/// Events per compressed block: big enough to compress well, small enough that a damaged block
/// loses little.
pub(crate) const EVENTS_PER_BLOCK: usize = 4096;
/// Sanity limit on the header's JSON (it carries the packages list): a reader allocates no
/// more than this for it, whatever a damaged or crafted length field says.
pub(crate) const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
/// Sanity limit on a note's or the footer's JSON (a knob change or a decision is a line).
pub(crate) const MAX_NOTE_BYTES: usize = 64 * 1024;
pub(crate) const EVENT_BYTES: usize = std::mem::size_of::<tracer_common::Event>();
/// The largest events block the writer makes, decoded: [`EVENTS_PER_BLOCK`] events.
pub(crate) const MAX_BLOCK_BYTES: usize = EVENTS_PER_BLOCK * EVENT_BYTES;
/// The shortest and longest window a recording may declare (the flags' own limits,
/// `cmd::MIN_WINDOW_S` and `cmd::MAX_WINDOW_S`): windows are bookkept one by one.
pub(crate) const MIN_WINDOW_NS: u64 = 1_000_000;
pub(crate) const MAX_WINDOW_NS: u64 = 86_400 * 1_000_000_000;
/// No event or footer lies further than this after the recording's clock origin (a year): a
/// timestamp beyond it is damage, not a very long recording.
pub(crate) const MAX_SPAN_NS: u64 = 366 * 86_400 * 1_000_000_000;

/// What the recording says about itself, written first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub host: String,
    pub kernel: String,
    /// "bpf", "sim" or "replay", and what attached / which scenario.
    pub source: String,
    pub detail: String,
    pub devices: Vec<String>,
    /// What the probe planner attached, one line each.
    pub probe_plan: Vec<String>,
    /// The knobs at the start, as the fields `threshold` and `interval_ms` (both or neither;
    /// recordings before the pair was one value wrote two nulls, read as None).
    #[serde(flatten)]
    pub knobs: Option<Knobs>,
    /// The origin of the model's windows (events' clock) and their length: a replay cuts the
    /// same windows as the live run.
    pub clock_origin_ns: u64,
    pub window_ns: u64,
    /// Wall-clock time (Unix seconds) at the start.
    pub started_unix: u64,
    /// The Android packages.list in force, so replays and reports name apps.
    #[serde(default)]
    pub packages_list: Option<String>,
}

/// A knob change or a controller decision, in the events' clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub ts_ns: u64,
    pub kind: String,
    pub text: String,
}

/// The kind of the notes that pair the recording's clock (CLOCK_MONOTONIC, the kernel
/// source's) with CLOCK_BOOTTIME, Android's trace clock: one at the start and one whenever the
/// two moved apart (a suspend: MONOTONIC stops, BOOTTIME does not). Their text is
/// `monotonic_ns=<n> boottime_ns=<n>`; `export --perfetto` makes them clock snapshots.
pub const CLOCK_NOTE: &str = "clock";

/// A (CLOCK_MONOTONIC, CLOCK_BOOTTIME) pair read back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPair {
    pub monotonic_ns: u64,
    pub boottime_ns: u64,
}

impl ClockPair {
    /// Both clocks now.
    pub fn now() -> ClockPair {
        ClockPair {
            monotonic_ns: crate::system::clock_ns(libc::CLOCK_MONOTONIC),
            boottime_ns: crate::system::clock_ns(libc::CLOCK_BOOTTIME),
        }
    }

    /// BOOTTIME less MONOTONIC: the time spent suspended since boot.
    pub fn offset_ns(&self) -> i128 {
        i128::from(self.boottime_ns) - i128::from(self.monotonic_ns)
    }

    pub fn note(&self) -> Note {
        Note {
            ts_ns: self.monotonic_ns,
            kind: CLOCK_NOTE.into(),
            text: format!(
                "monotonic_ns={} boottime_ns={}",
                self.monotonic_ns, self.boottime_ns
            ),
        }
    }

    /// The pair a clock note holds.
    pub fn from_note(note: &Note) -> Option<ClockPair> {
        if note.kind != CLOCK_NOTE {
            return None;
        }
        let mut words = note.text.split_whitespace();
        let value = |word: Option<&str>, key: &str| -> Option<u64> {
            word?.strip_prefix(key)?.strip_prefix('=')?.parse().ok()
        };
        Some(ClockPair {
            monotonic_ns: value(words.next(), "monotonic_ns")?,
            boottime_ns: value(words.next(), "boottime_ns")?,
        })
    }
}

/// Written last by a clean finish.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Footer {
    pub events: u64,
    pub blocks: u64,
    pub notes: u64,
    /// Events lost before they reached the recorder (also recorded as Lost events).
    pub lost: u64,
    /// The events' clock when recording stopped: replays close windows up to here.
    pub end_ns: u64,
}

#[cfg(test)]
mod tests;
