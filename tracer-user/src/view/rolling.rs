//! The daemon's rolling recording (`daemon --record DIR`): events and knob changes into
//! `DIR/nodescope-NNNNNN.nsr`, a new file when the current one reaches its share of the size
//! cap, the oldest files removed so that at most `files` remain. Every file is a complete
//! recording (header, blocks, footer) that `report`, `export` and `--source replay` read; the
//! file being written gets its footer at the next rotation or when the daemon stops.
use std::{
    ffi::CStr,
    fs::File,
    io::ErrorKind,
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use tracer_common::{files, Event};

use crate::{
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
    /// `--record DIR` as given, for messages only: every file operation goes through `fd`.
    dir: PathBuf,
    /// DIR, opened without following a symlink when the recording started. Every create, list,
    /// stat and delete is relative to it, so a symlink swapped in for DIR later redirects
    /// nothing.
    fd: OwnedFd,
    limits: RollingLimits,
    current: Recorder,
    /// The number of the file being written.
    sequence: u64,
}

/// The rolling files carry the same per-process data as the daemon's socket, which is 0600:
/// so are they.
const FILE_MODE: u32 = 0o600;

impl RollingRecorder {
    /// Start a new file in `dir` (created 0700 if missing, else checked to be ours and private,
    /// see [`open_private_dir`]), numbered after any recording there. Only the daemon's own
    /// files count (see [`numbered`]); anything else in `dir` is named in the log once, and
    /// never numbered after, rotated or removed.
    pub(crate) fn start(dir: &Path, limits: RollingLimits, pipeline: &Pipeline) -> Result<Self> {
        anyhow::ensure!(
            limits.files >= 2,
            "--record-files must be at least 2 (one finished file and the one being written)"
        );
        let fd = open_private_dir(dir)?;
        let listing = list(&fd, dir)?;
        for foreign in &listing.foreign {
            log::warn!(
                "recording: {} is not one of the daemon's files: it is left alone",
                dir.join(foreign).display()
            );
        }
        let after = listing
            .ours
            .last()
            .map_or(Some(0), |(n, _)| n.checked_add(1));
        let (sequence, current) = create_next(&fd, dir, after, pipeline)?;
        let mut rolling = RollingRecorder {
            dir: dir.to_path_buf(),
            fd,
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

    /// The file being written (as named under DIR, for messages).
    pub(crate) fn current_path(&self) -> PathBuf {
        self.dir.join(file_name(self.sequence))
    }

    /// At a refresh: flush on the recorder's time bound, and start the next file when this one
    /// has reached its share of the cap.
    pub(crate) fn tick(&mut self, pipeline: &Pipeline) -> Result<()> {
        self.current.flush_if_due()?;
        if self.current.bytes_written() < self.limits.file_bytes() {
            return Ok(());
        }
        let (sequence, next) =
            create_next(&self.fd, &self.dir, self.sequence.checked_add(1), pipeline)?;
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
        let all = numbered(&self.fd, &self.dir)?;
        // The file being written is one of them: it is never removed.
        let all: Vec<_> = all
            .into_iter()
            .filter(|(n, _)| *n != self.sequence)
            .collect();
        let kept_besides_current = self.limits.files as usize - 1;
        let excess = all.len().saturating_sub(kept_besides_current);
        for (_, name) in all.into_iter().take(excess) {
            let path = self.dir.join(&name);
            rfs::unlinkat(&self.fd, name.as_str(), AtFlags::empty())
                .with_context(|| format!("removing {}", path.display()))?;
            log::info!("recording: removed the oldest file {}", path.display());
        }
        Ok(())
    }
}

/// `dir` for the rolling recording, held by descriptor: the rule of the state and socket
/// directories (`files::private_dir_problem`). Created 0700 (with its parents) when missing;
/// otherwise it must be a directory, not a symlink to one, belonging to us, that nobody else
/// may write in: the daemon deletes files there, and whoever may write in it could put a name
/// there for it to write or delete. One of ours that others may only read (0755, as earlier
/// versions made it under the umask) is made 0700. The path is walked from `/` without
/// following a symlink at any component (`files::open_dir_for_writing`), and the checks are
/// made on the descriptor so opened, so what was checked is what is used, whatever the path
/// names later: files are created, listed and removed relative to it.
fn open_private_dir(dir: &Path) -> Result<OwnedFd> {
    let refuse = |problem: String| {
        anyhow::anyhow!(
            "refusing the recording directory {}: it {problem}; remove it if you do not know \
             who made it, or choose another with --record",
            dir.display()
        )
    };
    // Every component walked without following a symlink (a link one level up would lead
    // the daemon into another directory, to rotate away its files), none writable by others
    // unless sticky; missing ones created 0700.
    let fd = files::open_dir_for_writing(dir, Some(0o700)).map_err(|err| {
        let kind = err.kind();
        let error = anyhow::Error::new(err).context(format!("opening {}", dir.display()));
        if kind == ErrorKind::PermissionDenied {
            error.context(format!(
                "refusing the recording directory {}: choose another with --record",
                dir.display()
            ))
        } else {
            error
        }
    })?;
    let stat = rfs::fstat(&fd).with_context(|| format!("examining {}", dir.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    let mode = stat.st_mode & 0o7777;
    if stat.st_uid != euid {
        return Err(refuse(format!(
            "belongs to uid {}, not to us (uid {euid})",
            stat.st_uid
        )));
    }
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "has mode {mode:o}: others may put files in it"
        )));
    }
    if mode & 0o077 != 0 {
        rfs::fchmod(&fd, Mode::from_raw_mode(0o700))
            .with_context(|| format!("making {} private (mode 700)", dir.display()))?;
        log::info!(
            "recording: {} had mode {mode:o}; made it 700 (the recordings show every \
             process's activity)",
            dir.display()
        );
    }
    Ok(fd)
}

fn file_name(sequence: u64) -> String {
    format!("{PREFIX}{sequence:06}{SUFFIX}")
}

/// The first free file number from `from` on, and its recorder, created in `fd` (DIR). A name
/// something else holds (a directory, a file the daemon did not make, a symlink) is skipped,
/// up to [`TAKEN_NAMES_SKIPPED`]: the file is created exclusively, never through a symlink.
fn create_next(
    fd: &OwnedFd,
    dir: &Path,
    from: Option<u64>,
    pipeline: &Pipeline,
) -> Result<(u64, Recorder)> {
    let from = from
        .filter(|n| *n <= MAX_SEQUENCE)
        .with_context(|| format!("{}: the file numbers reached {MAX_SEQUENCE}", dir.display()))?;
    let last = from.saturating_add(TAKEN_NAMES_SKIPPED).min(MAX_SEQUENCE);
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | OFlags::CLOEXEC;
    for sequence in from..=last {
        let name = file_name(sequence);
        let path = dir.join(&name);
        match rfs::openat(fd, name.as_str(), flags, Mode::from_raw_mode(FILE_MODE)) {
            Err(rustix::io::Errno::EXIST) => {
                log::warn!(
                    "recording: {} is taken: skipping its number",
                    path.display()
                );
            }
            Err(err) => {
                return Err(std::io::Error::from(err))
                    .with_context(|| format!("creating {}", path.display()))
            }
            Ok(file) => {
                let file = File::from(file);
                return Ok((sequence, Recorder::from_file(file, &path, pipeline)?));
            }
        }
    }
    anyhow::bail!(
        "{}: the names nodescope-{from:06}.nsr to nodescope-{last:06}.nsr are all taken",
        dir.display()
    )
}

/// What DIR holds: the daemon's recordings, oldest (lowest number) first, and the entries
/// named like one that are not (see [`numbered`]); names within DIR.
struct Listing {
    ours: Vec<(u64, String)>,
    foreign: Vec<String>,
}

/// List DIR through its descriptor `fd` (`dir` names it in messages).
fn list(fd: &OwnedFd, dir: &Path) -> Result<Listing> {
    let mut listing = Listing {
        ours: Vec::new(),
        foreign: Vec::new(),
    };
    let context = || format!("listing {}", dir.display());
    for entry in rfs::Dir::read_from(fd.as_fd()).with_context(context)? {
        let entry = entry.with_context(context)?;
        let Some(name) = name_of(entry.file_name()) else {
            continue;
        };
        // Not followed: a symlink or a directory is never one of the daemon's files.
        let regular = rfs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|stat| {
            rfs::FileType::from_raw_mode(stat.st_mode) == rfs::FileType::RegularFile
        });
        match sequence_of(name).filter(|_| regular) {
            Some(number) => listing.ours.push((number, name.to_string())),
            None => listing.foreign.push(name.to_string()),
        }
    }
    listing.ours.sort();
    listing.foreign.sort();
    Ok(listing)
}

/// A directory entry's name when it is named like a recording (`nodescope-*.nsr`).
fn name_of(name: &CStr) -> Option<&str> {
    name.to_str()
        .ok()
        .filter(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
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

/// The rolling recording's own files in DIR (its descriptor `fd`), oldest (lowest number)
/// first: regular files named as the daemon names them. Directories, symlinks and foreign
/// names are left out.
fn numbered(fd: &OwnedFd, dir: &Path) -> Result<Vec<(u64, String)>> {
    Ok(list(fd, dir)?.ours)
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
