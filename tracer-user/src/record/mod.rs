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

pub const MAGIC: [u8; 8] = *b"NSCOPE\r\n";
pub const VERSION: u16 = 1;
pub const TAG_EVENTS: u8 = b'E';
pub const TAG_NOTE: u8 = b'N';
pub const TAG_FOOTER: u8 = b'F';
/// Events per compressed block: big enough to compress well, small enough that a damaged block
/// loses little.
pub const EVENTS_PER_BLOCK: usize = 4096;
/// Sanity limit on one record's payload (a block of 4096 events is 256 KiB before compression).
pub const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
pub const EVENT_BYTES: usize = std::mem::size_of::<tracer_common::Event>();

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
    pub threshold: Option<u32>,
    pub interval_ms: Option<u32>,
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
