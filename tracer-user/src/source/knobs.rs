//! Reading the RFC's knobs for display, recordings and the model (the controller crate writes
//! them).
use std::path::{Path, PathBuf};

use tracer_common::{
    files,
    knobs::{Knobs, INTERVAL_FILE, THRESHOLD_FILE},
};

/// Where a device's knob files live: /sys/fs/f2fs/<dev>, or the simulator's directory.
#[derive(Clone, Debug)]
pub struct KnobFiles {
    pub dir: PathBuf,
}

impl KnobFiles {
    pub fn new(root: &Path, device: &str) -> KnobFiles {
        KnobFiles {
            dir: root.join(device),
        }
    }

    /// Both values; None when either file is missing or does not hold a number (a kernel
    /// without the RFC's knobs).
    pub fn read(&self) -> Option<Knobs> {
        // Never through a symlink nor blocking on a FIFO, as the controller reads them.
        let value = |name: &str| -> Option<u32> {
            let bytes = files::read_no_follow(&self.dir.join(name)).ok()?;
            std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
        };
        Some(Knobs {
            threshold: value(THRESHOLD_FILE)?,
            interval_ms: value(INTERVAL_FILE)?,
        })
    }
}

/// `threshold 25% interval 1000 ms`, or dashes when the knobs could not be read.
pub fn describe(knobs: Option<Knobs>) -> String {
    match knobs {
        Some(k) => format!("threshold {}% interval {} ms", k.threshold, k.interval_ms),
        None => "threshold -% interval - ms".to_string(),
    }
}
