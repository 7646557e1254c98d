//! Field numbers and enum values of Perfetto's trace protos that nodescope writes, each checked
//! against Perfetto's own definitions (protos/perfetto/trace/trace_packet.proto,
//! track_event/track_descriptor.proto, track_event/process_descriptor.proto,
//! track_event/counter_descriptor.proto, track_event/track_event.proto,
//! track_event/debug_annotation.proto), as shipped in the PyPI `perfetto` package's
//! `perfetto_trace_pb2` (docs/PERFETTO.md). Only numbers live here, no message definitions.

/// `Trace`: the file is a Trace message, a sequence of packets.
pub mod trace {
    pub const PACKET: u32 = 1;
}

pub mod trace_packet {
    pub const TIMESTAMP: u32 = 8;
    pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    /// TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED.
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
}

pub mod track_descriptor {
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
}

pub mod process_descriptor {
    pub const PID: u32 = 1;
    pub const PROCESS_NAME: u32 = 6;
}

pub mod counter_descriptor {
    pub const UNIT: u32 = 3;
}

pub mod track_event {
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const TRACK_UUID: u32 = 11;
    pub const NAME: u32 = 23;
    pub const COUNTER_VALUE: u32 = 30;
    /// TrackEvent.Type values.
    pub const TYPE_INSTANT: u64 = 3;
    pub const TYPE_COUNTER: u64 = 4;
}

pub mod debug_annotation {
    pub const UINT_VALUE: u32 = 3;
    pub const NAME: u32 = 10;
}
