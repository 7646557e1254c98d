//! The OpenMetrics families nodescope serves at /metrics (docs/STREAM.md, "OpenMetrics"): one
//! table of names, types, help texts and units, which `view::metrics` renders from. A family's
//! samples are its name (gauges), `<name>_total` (counters), or `<name>_bucket`, `_count` and
//! `_sum` (histograms).

/// An OpenMetrics family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// As `# TYPE` names it.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One family: what its `# TYPE`, `# HELP` and `# UNIT` lines say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// `# UNIT`, when the family has one (its name then ends in it).
    pub unit: Option<&'static str>,
}

const fn family(name: &'static str, kind: Kind, help: &'static str) -> Family {
    Family {
        name,
        kind,
        help,
        unit: None,
    }
}

const fn seconds(name: &'static str, kind: Kind, help: &'static str) -> Family {
    Family {
        name,
        kind,
        help,
        unit: Some("seconds"),
    }
}

/// Per app (`app`, `device`, `kind` demand or readahead).
pub const NODE_READS: Family = family(
    "nodescope_node_reads",
    Kind::Counter,
    "Node block reads (FS_NODE_READ_IO) attributed to the app",
);
/// Per app.
pub const RESTORES: Family = family(
    "nodescope_restores",
    Kind::Counter,
    "Compressed node entries restored (node reads avoided)",
);
/// Per app.
pub const CONVERSIONS: Family = family(
    "nodescope_conversions",
    Kind::Counter,
    "Raw node entries converted to compressed ones",
);
/// Per app.
pub const NODE_WRITES: Family = family("nodescope_node_writes", Kind::Counter, "Node block writes");
pub const APPS_OTHER: Family = family(
    "nodescope_apps_other",
    Kind::Gauge,
    "Apps summed in the (other) app series: those past the busiest 200",
);
pub const CHECKPOINTS: Family = family(
    "nodescope_checkpoints",
    Kind::Counter,
    "Completed checkpoints",
);
/// Per `queue`.
pub const RECLAIMS: Family = family(
    "nodescope_reclaims",
    Kind::Counter,
    "Node cache entries reclaimed, per queue",
);
/// Per `reason`.
pub const RESTORE_FAILURES: Family = family(
    "nodescope_restore_failures",
    Kind::Counter,
    "Restores whose validation failed (the copy dropped, disk read), per step",
);
/// Per `reason`.
pub const SECOND_CHANCES: Family = family(
    "nodescope_second_chances",
    Kind::Counter,
    "REFERENCED entries given a second chance, per path",
);
pub const RESTORE_LATENCY: Family = seconds(
    "nodescope_restore_latency_seconds",
    Kind::Histogram,
    "Time from finding a compressed copy to the block in place, per timed restore",
);
/// Per `type` and `kind`, where the model tells node types apart.
pub const NODE_READS_BY_TYPE: Family = family(
    "nodescope_node_reads_by_type",
    Kind::Counter,
    "Node block reads per node type of the block (its footer in the image)",
);
pub const EVENTS_LOST: Family = family(
    "nodescope_events_lost",
    Kind::Counter,
    "Events lost before nodescope saw them",
);
/// Per `queue`.
pub const CACHE_ENTRIES: Family = family(
    "nodescope_cache_entries",
    Kind::Gauge,
    "Node cache entries per queue, derived from events",
);
pub const CACHE_ATTRIBUTED_BYTES: Family = family(
    "nodescope_cache_attributed_bytes",
    Kind::Gauge,
    "Attributed node cache memory",
);
/// Where the knob files are readable.
pub const KNOB_THRESHOLD: Family = family(
    "nodescope_knob_threshold_percent",
    Kind::Gauge,
    "Current knob value",
);
/// Where the knob files are readable.
pub const KNOB_INTERVAL: Family = family(
    "nodescope_knob_interval_ms",
    Kind::Gauge,
    "Current knob value",
);
/// Per `outcome`.
pub const LOOKUP_LATENCY: Family = seconds(
    "nodescope_lookup_latency_seconds",
    Kind::Histogram,
    "Time of each timed node lookup from its entry to its return, per outcome",
);
/// Per app and `outcome`, for the apps with timed lookups.
pub const LOOKUPS: Family = family(
    "nodescope_lookups",
    Kind::Counter,
    "Timed node lookups of the app, per outcome",
);
/// Per app, for the apps with timed lookups.
pub const LOOKUP_WAIT: Family = seconds(
    "nodescope_lookup_wait_seconds",
    Kind::Counter,
    "Time the app's timed node lookups took, summed",
);
/// The daemon with `--record` only.
pub const RECORDING_ACTIVE: Family = family(
    "nodescope_recording_active",
    Kind::Gauge,
    "1 while the daemon's rolling recording is written, 0 once an error stopped it",
);

/// Every family, in the order an exposition writes them (the conditional ones where they
/// fall when present).
pub const FAMILIES: [Family; 20] = [
    NODE_READS,
    RESTORES,
    CONVERSIONS,
    NODE_WRITES,
    APPS_OTHER,
    CHECKPOINTS,
    RECLAIMS,
    RESTORE_FAILURES,
    SECOND_CHANCES,
    RESTORE_LATENCY,
    NODE_READS_BY_TYPE,
    EVENTS_LOST,
    CACHE_ENTRIES,
    CACHE_ATTRIBUTED_BYTES,
    KNOB_THRESHOLD,
    KNOB_INTERVAL,
    LOOKUP_LATENCY,
    LOOKUPS,
    LOOKUP_WAIT,
    RECORDING_ACTIVE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_named_once_with_its_unit_last() {
        let mut names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FAMILIES.len());
        for f in FAMILIES {
            assert!(f.name.starts_with("nodescope_"), "{}", f.name);
            assert!(!f.name.ends_with("_total"), "{}", f.name);
            if let Some(unit) = f.unit {
                assert!(f.name.ends_with(&format!("_{unit}")), "{}", f.name);
            }
        }
    }
}
