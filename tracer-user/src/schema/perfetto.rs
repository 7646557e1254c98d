//! The Perfetto trace's track names (docs/PERFETTO.md): what `export --perfetto` and
//! `record --perfetto` name their tracks and instants, and what a trace processor query
//! selects by. `view::perfetto` lays the tracks out with these.
use tracer_common::Outcome;

/// The cache's counters and gauges, and the knobs, as tracks under it.
pub const CACHE_TRACK: &str = "nodescope node cache";
/// One child track per app: [`app_track`].
pub const APPS_TRACK: &str = "nodescope apps";
/// Notes (knob changes, clocks...) and lost events, as instants.
pub const EVENTS_TRACK: &str = "nodescope events";

/// Counter tracks of the cache track, per window.
pub const NODE_READS_DEMAND: &str = "node reads demand";
pub const NODE_READS_READAHEAD: &str = "node reads readahead";
pub const NODE_WRITES: &str = "node writes";
pub const CHECKPOINTS: &str = "checkpoints";
pub const RESTORES: &str = "restores";
pub const EAGER_RESTORES: &str = "eager restores";
pub const RESTORE_FAILURES: &str = "restore failures";
pub const CONVERSIONS: &str = "conversions";
/// Per queue: raw, 256, 512, 1024.
pub const RECLAIMS: [&str; 4] = [
    "reclaims raw",
    "reclaims 256",
    "reclaims 512",
    "reclaims 1024",
];
pub const LOST_EVENTS: &str = "lost events";

/// Gauge tracks of the cache track (bytes).
pub const MEMORY_RAW: &str = "attributed memory raw";
pub const MEMORY_COMPRESSED: &str = "attributed memory compressed";
pub const MEMORY_TOTAL: &str = "attributed memory total";

/// Gauge tracks of the cache track: the knobs, from the recording's knob notes.
pub const KNOB_THRESHOLD: &str = "node_compress_threshold (%)";
pub const KNOB_INTERVAL: &str = "node_compress_interval (ms)";

/// A device's counters' keys: `nodescope.[major:minor].<key>`, beside Perfetto's own
/// `f2fs_iostat.[major:minor].<key>` tracks.
pub const DEVICE_NODE_READS: &str = "read_fs_node";
pub const DEVICE_NODE_WRITES: &str = "write_fs_node";
pub const DEVICE_CHECKPOINTS: &str = "checkpoints";

/// Timed lookups (issue 51), under an app's or a process's track: their count, per outcome
/// ([`lookups_of`]) and their times summed (ns).
pub const NODE_LOOKUPS: &str = "node lookups";
pub const LOOKUP_WAIT: &str = "lookup wait";

/// The instant of a completed checkpoint, on its device's track.
pub const CHECKPOINT_INSTANT: &str = "checkpoint";

/// A device's track: `f2fs [major:minor]` (`other` for the devices past the trace's bound).
pub fn device_track(device: &str) -> String {
    format!("f2fs [{device}]")
}

/// One of a device's counters: `nodescope.[major:minor].<key>`.
pub fn device_counter(device: &str, key: &str) -> String {
    format!("nodescope.[{device}].{key}")
}

/// An app's track under [`APPS_TRACK`]: `app com.whatsapp`, `kernel kworker`, `program fio`,
/// the kind as report's JSON spells it.
pub fn app_track(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

/// The lookups of one outcome: `lookups hit`, ...
pub fn lookups_of(outcome: Outcome) -> String {
    format!("lookups {}", outcome.name())
}

/// The instant of events lost: one per window, `markers` lost-event markers of it summed.
pub fn lost_instant(count: u64, markers: u64) -> String {
    if markers > 1 {
        format!("lost {count} events ({markers} markers)")
    } else {
        format!("lost {count} events")
    }
}

/// The instant of a window's checkpoints past the trace's bound per window, counted.
pub fn more_checkpoints(count: u64) -> String {
    format!("{count} more checkpoints")
}

/// The track of the processes past the trace's bound on process tracks, summed.
pub const OTHER_PROCESSES_TRACK: &str = "other processes";
