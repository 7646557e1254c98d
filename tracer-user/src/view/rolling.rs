//! The daemon's rolling recording (`daemon --record DIR`): events and knob changes into
//! `DIR/nodescope-NNNNNN.nsr`, a new file when the current one reaches its share of the size
//! cap, the oldest files removed so that at most `files` remain. Every file is a complete
//! recording (header, blocks, footer) that `report`, `export` and `--source replay` read; the
//! file being written gets its footer at the next rotation or when the daemon stops.
use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use tracer_common::Event;

use crate::{
    pipeline::{KnobChange, Pipeline},
    view::{output::OutputFile, recorder::Recorder},
};

const PREFIX: &str = "nodescope-";
const SUFFIX: &str = ".nsr";

/// How much the rolling recording may keep.
#[derive(Clone, Copy, Debug)]
pub struct RollingLimits {
    /// All files together, about (each file may pass its share by one block).
    pub max_bytes: u64,
    /// Files kept, the one being written included (at least 2: one finished, one open).
    pub files: u32,
}

impl RollingLimits {
    /// One file's share of the cap.
    fn file_bytes(&self) -> u64 {
        (self.max_bytes / u64::from(self.files.max(1))).max(1)
    }
}

pub struct RollingRecorder {
    dir: PathBuf,
    limits: RollingLimits,
    current: Recorder,
    /// The number of the file being written.
    sequence: u64,
}

/// The rolling files carry the same per-process data as the daemon's socket, which is 0600:
/// so are they. A name already taken is never overwritten.
const RECORDING: OutputFile = OutputFile {
    force: false,
    mode: 0o600,
};

impl RollingRecorder {
    /// Start a new file in `dir` (created if missing), numbered after any recording there.
    pub fn start(dir: &Path, limits: RollingLimits, pipeline: &Pipeline) -> Result<Self> {
        anyhow::ensure!(
            limits.files >= 2,
            "--record-files must be at least 2 (one finished file and the one being written)"
        );
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let sequence = numbered(dir)?.last().map_or(0, |(n, _)| n + 1);
        let current = Recorder::create(&file_name(dir, sequence), pipeline, RECORDING)?;
        let mut rolling = RollingRecorder {
            dir: dir.to_path_buf(),
            limits,
            current,
            sequence,
        };
        rolling.remove_oldest()?;
        Ok(rolling)
    }

    pub fn events(&mut self, events: &[Event]) -> Result<()> {
        self.current.events(events)
    }

    pub fn knob_change(&mut self, change: &KnobChange) -> Result<()> {
        self.current.knob_change(change)
    }

    /// The file being written.
    pub fn current_path(&self) -> PathBuf {
        file_name(&self.dir, self.sequence)
    }

    /// At a refresh: flush on the recorder's time bound, and start the next file when this one
    /// has reached its share of the cap.
    pub fn tick(&mut self, pipeline: &Pipeline) -> Result<()> {
        self.current.flush_if_due()?;
        if self.current.bytes_written() < self.limits.file_bytes() {
            return Ok(());
        }
        let next = Recorder::create(
            &file_name(&self.dir, self.sequence + 1),
            pipeline,
            RECORDING,
        )?;
        let finished = std::mem::replace(&mut self.current, next);
        finished.finish(pipeline.now_ns())?;
        self.sequence += 1;
        self.remove_oldest()
    }

    /// Finish the file being written; returns its path and size.
    pub fn finish(self, end_ns: u64) -> Result<(PathBuf, u64, u64)> {
        let path = self.current_path();
        let (bytes, footer) = self.current.finish(end_ns)?;
        Ok((path, bytes, footer.events))
    }

    /// Remove the oldest recordings until `files` remain.
    fn remove_oldest(&mut self) -> Result<()> {
        let all = numbered(&self.dir)?;
        let excess = all.len().saturating_sub(self.limits.files as usize);
        for (_, path) in all.into_iter().take(excess) {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            log::info!("recording: removed the oldest file {}", path.display());
        }
        Ok(())
    }
}

fn file_name(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{sequence:06}{SUFFIX}"))
}

/// The rolling recording's files in `dir`, oldest (lowest number) first.
pub fn numbered(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let number = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.strip_suffix(SUFFIX))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            found.push((number, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}
