//! Reading the RFC's knobs for display and recordings (the controller crate writes them).
use std::path::{Path, PathBuf};

/// Where a device's knob files live: /sys/fs/f2fs/<dev>, or the simulator's directory.
#[derive(Clone, Debug)]
pub struct KnobFiles {
    pub dir: PathBuf,
}

/// The two knob values; None when a file is missing or unreadable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KnobValues {
    pub threshold: Option<u32>,
    pub interval_ms: Option<u32>,
}

impl KnobFiles {
    pub fn new(root: &Path, device: &str) -> KnobFiles {
        KnobFiles {
            dir: root.join(device),
        }
    }

    pub fn read(&self) -> KnobValues {
        let value = |name: &str| {
            std::fs::read_to_string(self.dir.join(name))
                .ok()
                .and_then(|text| text.trim().parse().ok())
        };
        KnobValues {
            threshold: value("node_compress_threshold"),
            interval_ms: value("node_compress_interval"),
        }
    }
}

impl KnobValues {
    pub fn describe(&self) -> String {
        let show = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        format!(
            "threshold {}% interval {} ms",
            show(self.threshold),
            show(self.interval_ms)
        )
    }
}
