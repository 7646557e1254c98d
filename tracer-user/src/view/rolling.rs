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
    output::OutputFile,
    pipeline::{KnobChange, Pipeline},
    runner::{End, Flow, Refresh, Sink},
    view::recorder::Recorder,
};

const PREFIX: &str = "nodescope-";
const SUFFIX: &str = ".nsr";
/// The highest file number the daemon uses (12 digits; at one file a second, 31,000 years). A
/// name with a higher one is not the daemon's: `u64::MAX` there once wrapped the sequence.
pub(crate) const MAX_SEQUENCE: u64 = 999_999_999_999;
/// Names skipped at a rotation because something else took them (a directory, a foreign file):
/// past this many in a row the rotation fails, and the daemon stops recording.
const TAKEN_NAMES_SKIPPED: u64 = 64;

/// How much the rolling recording may keep.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RollingLimits {
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

pub(crate) struct RollingRecorder {
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
    /// Only the daemon's own files count (see [`numbered`]); anything else in `dir` is named
    /// in the log once, and never numbered after, rotated or removed.
    pub(crate) fn start(dir: &Path, limits: RollingLimits, pipeline: &Pipeline) -> Result<Self> {
        anyhow::ensure!(
            limits.files >= 2,
            "--record-files must be at least 2 (one finished file and the one being written)"
        );
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let listing = list(dir)?;
        for foreign in &listing.foreign {
            log::warn!(
                "recording: {} is not one of the daemon's files: it is left alone",
                foreign.display()
            );
        }
        let after = listing
            .ours
            .last()
            .map_or(Some(0), |(n, _)| n.checked_add(1));
        let (sequence, current) = create_next(dir, after, pipeline)?;
        let mut rolling = RollingRecorder {
            dir: dir.to_path_buf(),
            limits,
            current,
            sequence,
        };
        rolling.remove_oldest()?;
        Ok(rolling)
    }

    pub(crate) fn events(&mut self, events: &[Event]) -> Result<()> {
        self.current.events(events)
    }

    pub(crate) fn knob_change(&mut self, change: &KnobChange) -> Result<()> {
        self.current.knob_change(change)
    }

    /// The file being written.
    pub(crate) fn current_path(&self) -> PathBuf {
        file_name(&self.dir, self.sequence)
    }

    /// At a refresh: flush on the recorder's time bound, and start the next file when this one
    /// has reached its share of the cap.
    pub(crate) fn tick(&mut self, pipeline: &Pipeline) -> Result<()> {
        self.current.flush_if_due()?;
        if self.current.bytes_written() < self.limits.file_bytes() {
            return Ok(());
        }
        let (sequence, next) = create_next(&self.dir, self.sequence.checked_add(1), pipeline)?;
        let finished = std::mem::replace(&mut self.current, next);
        finished.finish(pipeline.now_ns())?;
        self.sequence = sequence;
        self.remove_oldest()
    }

    /// Finish the file being written; returns its path and size.
    pub(crate) fn finish(self, end_ns: u64) -> Result<(PathBuf, u64, u64)> {
        let path = self.current_path();
        let (bytes, footer) = self.current.finish(end_ns)?;
        Ok((path, bytes, footer.events))
    }

    /// Remove the oldest recordings until `files` remain.
    fn remove_oldest(&mut self) -> Result<()> {
        let all = numbered(&self.dir)?;
        // The file being written is one of them: it is never removed.
        let all: Vec<_> = all
            .into_iter()
            .filter(|(n, _)| *n != self.sequence)
            .collect();
        let kept_besides_current = self.limits.files as usize - 1;
        let excess = all.len().saturating_sub(kept_besides_current);
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

/// The first free file number from `from` on, and its recorder. A name something else holds
/// (a directory, a file the daemon did not make) is skipped, up to [`TAKEN_NAMES_SKIPPED`].
fn create_next(dir: &Path, from: Option<u64>, pipeline: &Pipeline) -> Result<(u64, Recorder)> {
    let from = from
        .filter(|n| *n <= MAX_SEQUENCE)
        .with_context(|| format!("{}: the file numbers reached {MAX_SEQUENCE}", dir.display()))?;
    let last = from.saturating_add(TAKEN_NAMES_SKIPPED).min(MAX_SEQUENCE);
    for sequence in from..=last {
        let path = file_name(dir, sequence);
        if fs::symlink_metadata(&path).is_ok() {
            log::warn!(
                "recording: {} is taken: skipping its number",
                path.display()
            );
            continue;
        }
        return Ok((sequence, Recorder::create(&path, pipeline, RECORDING)?));
    }
    anyhow::bail!(
        "{}: the names nodescope-{from:06}.nsr to nodescope-{last:06}.nsr are all taken",
        dir.display()
    )
}

/// What `dir` holds: the daemon's recordings, oldest (lowest number) first, and the entries
/// named like one that are not (see [`numbered`]).
struct Listing {
    ours: Vec<(u64, PathBuf)>,
    foreign: Vec<PathBuf>,
}

fn list(dir: &Path) -> Result<Listing> {
    let mut listing = Listing {
        ours: Vec::new(),
        foreign: Vec::new(),
    };
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(name) = name
            .to_str()
            .filter(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
        else {
            continue;
        };
        // Not followed: a symlink or a directory is never one of the daemon's files.
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        match sequence_of(name).filter(|_| regular) {
            Some(number) => listing.ours.push((number, entry.path())),
            None => listing.foreign.push(entry.path()),
        }
    }
    listing.ours.sort();
    listing.foreign.sort();
    Ok(listing)
}

/// The number in a name exactly as the daemon writes it (`nodescope-` at least six digits,
/// no sign, no padding past six, at most [`MAX_SEQUENCE`], `.nsr`).
fn sequence_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let number = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse::<u64>().ok())??;
    (number <= MAX_SEQUENCE && format!("{number:06}") == digits).then_some(number)
}

/// The rolling recording's own files in `dir`, oldest (lowest number) first: regular files
/// named as the daemon names them. Directories, symlinks and foreign names are left out.
/// The daemon's sink for `--record DIR`. An error there (a full disk, a directory removed,
/// every next name taken) stops the recording, not the daemon: said in the log, to the clients
/// (a notice in the decisions pane) and in the metrics (`recording_active` 0, through
/// [`RollingSink::active`]).
pub(crate) struct RollingSink {
    recording: Option<RollingRecorder>,
    active: std::sync::Arc<std::sync::atomic::AtomicBool>,
    notices: Vec<String>,
}

impl RollingSink {
    pub(crate) fn new(recording: RollingRecorder) -> RollingSink {
        RollingSink {
            recording: Some(recording),
            active: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            notices: Vec::new(),
        }
    }

    /// Whether the recording still runs, for the metrics.
    pub(crate) fn active(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        std::sync::Arc::clone(&self.active)
    }

    /// One step of the recording; on an error, the recording stops (with its footer when it
    /// can still get one) and a notice says why.
    fn step(&mut self, pipeline: &Pipeline, step: impl FnOnce(&mut RollingRecorder) -> Result<()>) {
        let Some(recording) = &mut self.recording else {
            return;
        };
        let Err(err) = step(recording) else {
            return;
        };
        let line = format!("recording stopped: {err:#}; serving on without it");
        log::error!("daemon: {line}");
        if let Some(recording) = self.recording.take() {
            let path = recording.current_path();
            if let Err(err) = recording.finish(pipeline.now_ns()) {
                log::warn!("daemon: {} has no footer: {err:#}", path.display());
            }
        }
        self.active
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.notices.push(line);
    }
}

impl Sink for RollingSink {
    fn events(&mut self, batch: &[Event], pipeline: &Pipeline) -> Result<()> {
        self.step(pipeline, |recording| recording.events(batch));
        Ok(())
    }

    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        if let Some(change) = at.knob_change {
            self.step(at.pipeline, |recording| recording.knob_change(change));
        }
        self.step(at.pipeline, |recording| recording.tick(at.pipeline));
        Ok(Flow::Continue)
    }

    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// The footer; an error here is logged (the knobs still go back, the clients got their
    /// end).
    fn finish(&mut self, end: &End) -> Result<()> {
        let Some(recording) = self.recording.take() else {
            return Ok(());
        };
        let path = recording.current_path();
        match recording.finish(end.pipeline.now_ns()) {
            Ok((path, bytes, events)) => log::info!(
                "daemon: recording {} finished ({events} events, {bytes} bytes)",
                path.display()
            ),
            Err(err) => log::error!("daemon: {} has no footer: {err:#}", path.display()),
        }
        self.active
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

pub(crate) fn numbered(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    Ok(list(dir)?.ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_the_daemon_writes_are_numbered() {
        assert_eq!(sequence_of("nodescope-000000.nsr"), Some(0));
        assert_eq!(sequence_of("nodescope-000042.nsr"), Some(42));
        assert_eq!(sequence_of("nodescope-1234567.nsr"), Some(1_234_567));
        assert_eq!(
            sequence_of("nodescope-999999999999.nsr"),
            Some(MAX_SEQUENCE)
        );
        for foreign in [
            "nodescope-18446744073709551615.nsr",
            "nodescope-1000000000000.nsr",
            "nodescope-42.nsr",
            "nodescope-0000042.nsr",
            "nodescope-+00042.nsr",
            "nodescope-.nsr",
            "nodescope-00004a.nsr",
        ] {
            assert_eq!(sequence_of(foreign), None, "{foreign}");
        }
    }
}
