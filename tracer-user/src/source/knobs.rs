//! Reading the RFC's knobs for display, recordings and the model (the controller crate writes
//! them).
use std::path::{Path, PathBuf};

use controller::knobs::read_file;
use tracer_common::knobs::{Knob, Knobs};

/// Where a device's knob files live: /sys/fs/f2fs/<dev>, or the simulator's directory.
#[derive(Clone, Debug)]
pub(crate) struct KnobFiles {
    pub dir: PathBuf,
}

impl KnobFiles {
    pub(crate) fn new(root: &Path, device: &str) -> KnobFiles {
        KnobFiles {
            dir: root.join(device),
        }
    }

    /// Both values; None when either file is missing or does not hold a valid value (a kernel
    /// without the RFC's knobs). Read as the controller reads them (`controller::knobs::
    /// read_file`: no symlink followed, no FIFO waited on).
    pub(crate) fn read(&self) -> Option<Knobs> {
        let value = |knob: Knob| read_file(&self.dir.join(knob.file_name()), knob).ok();
        Some(Knobs {
            threshold: value(Knob::Threshold)?,
            interval_ms: value(Knob::Interval)?,
        })
    }
}
