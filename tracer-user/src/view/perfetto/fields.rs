//! Field numbers and enum values of Perfetto's trace protos that nodescope writes, each checked
//! against Perfetto's own definitions (protos/perfetto/trace/trace_packet.proto,
//! track_event/track_descriptor.proto, track_event/process_descriptor.proto,
//! track_event/counter_descriptor.proto, track_event/track_event.proto,
//! track_event/debug_annotation.proto), as shipped in the PyPI `perfetto` package's
//! `perfetto_trace_pb2` (docs/PERFETTO.md). Only numbers live here, no message definitions.

/// `Trace`: the file is a Trace message, a sequence of packets.
pub(super) mod trace {
    pub(crate) const PACKET: u32 = 1;
}

pub(super) mod trace_packet {
    pub(crate) const CLOCK_SNAPSHOT: u32 = 6;
    pub(crate) const TIMESTAMP: u32 = 8;
    pub(crate) const TIMESTAMP_CLOCK_ID: u32 = 58;
    pub(crate) const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub(crate) const TRACK_EVENT: u32 = 11;
    pub(crate) const SEQUENCE_FLAGS: u32 = 13;
    pub(crate) const TRACK_DESCRIPTOR: u32 = 60;
    /// TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED.
    pub(crate) const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
}

/// `ClockSnapshot` (protos/perfetto/trace/clock_snapshot.proto) and its `Clock`, and the
/// `BuiltinClock` values (protos/perfetto/common/builtin_clock.proto).
pub(super) mod clock_snapshot {
    pub(crate) const CLOCKS: u32 = 1;
    pub(crate) const PRIMARY_TRACE_CLOCK: u32 = 2;
    pub(crate) const CLOCK_ID: u32 = 1;
    pub(crate) const CLOCK_TIMESTAMP: u32 = 2;
    pub(crate) const BUILTIN_CLOCK_MONOTONIC: u64 = 3;
    pub(crate) const BUILTIN_CLOCK_BOOTTIME: u64 = 6;
}

pub(super) mod track_descriptor {
    pub(crate) const UUID: u32 = 1;
    pub(crate) const NAME: u32 = 2;
    pub(crate) const PROCESS: u32 = 3;
    pub(crate) const PARENT_UUID: u32 = 5;
    pub(crate) const COUNTER: u32 = 8;
}

pub(super) mod process_descriptor {
    pub(crate) const PID: u32 = 1;
    pub(crate) const PROCESS_NAME: u32 = 6;
}

pub(super) mod counter_descriptor {
    pub(crate) const UNIT: u32 = 3;
}

pub(super) mod track_event {
    pub(crate) const DEBUG_ANNOTATIONS: u32 = 4;
    pub(crate) const TYPE: u32 = 9;
    pub(crate) const TRACK_UUID: u32 = 11;
    pub(crate) const NAME: u32 = 23;
    pub(crate) const COUNTER_VALUE: u32 = 30;
    /// TrackEvent.Type values.
    pub(crate) const TYPE_INSTANT: u64 = 3;
    pub(crate) const TYPE_COUNTER: u64 = 4;
}

pub(super) mod debug_annotation {
    pub(crate) const UINT_VALUE: u32 = 3;
    pub(crate) const NAME: u32 = 10;
}
