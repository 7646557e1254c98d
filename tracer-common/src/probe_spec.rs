//! How a probe on one of the RFC's functions turns arguments and return value into an `Event`
//! (`ProbeSpec`, from a probe manifest).

use crate::event::{QUEUE_1024, QUEUE_256, QUEUE_512, QUEUE_RAW};

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
    /// `XFORM_CODES`' table: the code for raw value i in bits 4i..4i+3 (raw 0..7).
    pub codes: u32,
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
/// A kernel's own numbering (an enum's values) to nodescope's codes, by `ValueSpec::codes`:
/// raw values 0..7 map through the table, anything else to 0 (no known code).
pub const XFORM_CODES: u8 = 4;
/// Raw values `XFORM_CODES` can map, and the largest code it can map one to.
pub const CODES_RAW_VALUES: u32 = 8;
pub const CODES_MAX_CODE: u8 = 15;

pub const SPEC_FIELD_DEV: usize = 0;
pub const SPEC_FIELD_NID: usize = 1;
pub const SPEC_FIELD_LEN: usize = 2;
pub const SPEC_FIELD_QUEUE: usize = 3;
pub const SPEC_FIELD_REASON: usize = 4;
/// A non-zero value sets FLAG_READAHEAD.
pub const SPEC_FIELD_READAHEAD: usize = 5;
/// The event's latency in ns, when the kernel records it (a tracepoint's field); otherwise a
/// return probe measures it from entry to return.
pub const SPEC_FIELD_LATENCY: usize = 6;
pub const SPEC_FIELD_COUNT: usize = 7;

pub const RET_FILTER_NONE: u8 = 0;
pub const RET_FILTER_EQ: u8 = 1;
pub const RET_FILTER_NE: u8 = 2;
pub const RET_FILTER_LT: u8 = 3;
pub const RET_FILTER_GE: u8 = 4;
/// A bool's truth: its low byte is not 0 (the ABIs return a bool in the low byte of the
/// return register and leave the rest undefined).
pub const RET_FILTER_TRUE: u8 = 5;

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
            XFORM_CODES if raw < CODES_RAW_VALUES as u64 => {
                u64::from((self.codes >> (raw as u32 * 4)) & 0xf)
            }
            XFORM_CODES => 0,
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
            RET_FILTER_TRUE => ret as u8 != 0,
            _ => true,
        }
    }
}
