//! The audit log: one JSON object per line for every decision, stop and restore.
//!
//! Each line carries `time` (UTC, RFC 3339), `elapsed_s` (since the tuner started: virtual in
//! the simulator), `device`, `event`, `outcome`, `dry_run`, and when they apply `signals`,
//! `old`, `new`, `written`, `reason`, `regime` and `memory_score`.
use std::{
    fs::File,
    io::{self, Write},
    os::fd::{AsRawFd as _, RawFd},
    path::Path,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result};
use serde::Serialize;

use tracer_common::{files, knobs::Knobs};

use crate::{law::Regime, signals::Signals};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// Tuning began; `old` holds the original values that will be put back.
    Start,
    /// One decision period's decision.
    Decision,
    /// Someone else changed a knob: this device is no longer tuned.
    ExternalChange,
    /// A read, write or read-back failed: this device is no longer tuned.
    Failure,
    /// The original values were put back (or deliberately not, see `reason`).
    Restore,
    /// Originals left in the state file by a controller that did not end cleanly were put
    /// back before this run started (`old`: what the device held, `new`: those originals).
    Recover,
    /// The device's knob files went away (unmounted): this device is no longer tuned and
    /// has nothing to put back.
    DeviceGone,
}

/// How it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The law held still; nothing to write.
    Hold,
    /// The new values were written and read back.
    Applied,
    /// Some or all of the new values wait for the write-rate limit.
    RateLimited,
    /// Dry run: decided and logged, nothing written.
    DryRun,
    /// This device is no longer tuned.
    Stopped,
    /// The device was left as it was (restore: nothing to put back, or a knob changed by
    /// someone else).
    Unchanged,
    /// Original values written back and read back.
    Restored,
    /// Putting an original value back failed (see `reason`): the device may keep a tuned value.
    Failed,
    /// Signals could not be read this decision period; holding.
    NoSignals,
}

/// One line of the audit log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditRecord {
    pub elapsed_s: f64,
    pub device: String,
    pub event: Event,
    pub outcome: Outcome,
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signals: Option<Signals>,
    /// Knob values before (for `start`: the originals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Knobs>,
    /// What the law asked for (for `restore`: the originals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Knobs>,
    /// What the device holds after this record (absent in dry-run and when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<Knobs>,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime: Option<Regime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_score: Option<f64>,
}

impl AuditRecord {
    /// A record with only the required fields; callers fill in the rest.
    pub fn new(elapsed_s: f64, device: &str, event: Event, outcome: Outcome) -> Self {
        AuditRecord {
            elapsed_s,
            device: device.to_string(),
            event,
            outcome,
            dry_run: false,
            signals: None,
            old: None,
            new: None,
            written: None,
            reason: String::new(),
            regime: None,
            memory_score: None,
        }
    }
}

/// The longest one audit line may wait for its descriptor (stdout or stderr a pipe whose
/// reader stopped, a stalled journal socket) before the write fails: a failed audit write
/// stops tuning and puts the originals back, so a stuck reader never holds the knobs.
pub const LINE_WAIT: Duration = Duration::from_secs(2);

/// Where audit lines go. Every line is flushed at once, so a crash loses none.
pub struct AuditLog {
    out: Sink,
    name: String,
}

enum Sink {
    /// JSON lines, each with the wall-clock `time`.
    Lines(Box<dyn Write + Send>),
    /// JSON lines to a descriptor, each line's wait bounded ([`BoundedFd`]).
    Fd(BoundedFd),
    /// The records themselves (the benchmark, in virtual time).
    Memory(AuditRecords),
}

/// The records an [`AuditLog::in_memory`] received, shared with the log.
#[derive(Clone, Debug, Default)]
pub struct AuditRecords(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditRecords {
    /// The records received since the last call, oldest first.
    pub fn take(&self) -> Vec<AuditRecord> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn push(&self, record: &AuditRecord) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record.clone());
    }
}

impl AuditLog {
    /// Append to `path` (created if missing) under the project's file policy: a regular file
    /// or the null device (operators give `--audit /dev/null` to keep no log), never through
    /// a symlink at any component of its path nor under a directory others may write in (as
    /// root, a link planted there would make us append to its target: `--audit
    /// shared/logs/audit.jsonl` with `shared/logs` a link), and never a wait at the open (a
    /// FIFO without a reader would block forever, deaf to SIGTERM, while the device is
    /// claimed).
    pub fn to_file(path: &Path) -> Result<Self> {
        let context = || format!("opening the audit log {}", path.display());
        let file = files::open_for_writing_accepting(path, files::Create::Append, 0o644, |meta| {
            meta.is_file() || is_null_device(meta)
        })
        .map_err(|err| with_null_hint(err, path))
        .with_context(context)?;
        Ok(Self::to_fd(
            BoundedFd::new(Descriptor::File(file)),
            &path.display().to_string(),
        ))
    }

    /// Lines to stderr, each waiting at most [`LINE_WAIT`] (or until the deadline).
    pub fn to_stderr() -> Self {
        Self::to_fd(
            BoundedFd::new(Descriptor::Std(libc::STDERR_FILENO)),
            "stderr",
        )
    }

    /// Lines to stdout, each waiting at most [`LINE_WAIT`] (or until the deadline).
    pub fn to_stdout() -> Self {
        // Whatever Rust's stdout buffered goes first: the lines bypass its buffer.
        let _ = io::stdout().flush();
        Self::to_fd(
            BoundedFd::new(Descriptor::Std(libc::STDOUT_FILENO)),
            "stdout",
        )
    }

    fn to_fd(fd: BoundedFd, name: &str) -> Self {
        AuditLog {
            out: Sink::Fd(fd),
            name: name.to_string(),
        }
    }

    /// No line waits past `deadline` (the command's `--duration`): a line its descriptor
    /// cannot take by then fails at once.
    pub fn set_deadline(&mut self, deadline: Instant) {
        if let Sink::Fd(fd) = &mut self.out {
            fd.deadline = Some(deadline);
        }
    }

    /// Drop every line: for benchmarks that run thousands of decisions.
    pub fn discard() -> Self {
        Self::to_writer(Box::new(io::sink()), "nowhere")
    }

    pub fn to_writer(out: Box<dyn Write + Send>, name: &str) -> Self {
        AuditLog {
            out: Sink::Lines(out),
            name: name.to_string(),
        }
    }

    /// Keep the records in memory, unencoded, for the caller to [`AuditRecords::take`].
    pub fn in_memory() -> (Self, AuditRecords) {
        let records = AuditRecords::default();
        let log = AuditLog {
            out: Sink::Memory(records.clone()),
            name: "memory".to_string(),
        };
        (log, records)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn write(&mut self, record: &AuditRecord) -> Result<()> {
        if let Sink::Memory(records) = &self.out {
            records.push(record);
            return Ok(());
        }
        let mut line = serde_json::to_value(record).context("encoding an audit record")?;
        line["time"] = rfc3339_utc(SystemTime::now()).into();
        let mut text = serde_json::to_string(&line).context("encoding an audit record")?;
        text.push('\n');
        let name = &self.name;
        match &mut self.out {
            Sink::Memory(_) => Ok(()),
            // One write call per line, so lines from a restore in a panic hook do not
            // interleave.
            Sink::Lines(out) => out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .with_context(|| format!("writing the audit log {name}")),
            Sink::Fd(fd) => fd
                .write_line(text.as_bytes())
                .with_context(|| format!("writing the audit log {name}")),
        }
    }
}

/// The null device's number (Linux's devices.txt: major 1, minor 3). What is opened is
/// checked by this number, not by its path: any other device, or a FIFO, named `/dev/null`
/// by a bind mount or a replaced node, is refused.
fn null_device() -> libc::dev_t {
    libc::makedev(1, 3)
}

/// Whether `meta` is the null device: a character device numbered 1:3.
fn is_null_device(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    meta.file_type().is_char_device() && meta.rdev() == null_device()
}

/// A refusal of `path` for its type says what is accepted instead: a regular file, or
/// `/dev/null` for no log (a symlink to it is refused like any other symlink, ELOOP).
fn with_null_hint(err: io::Error, path: &Path) -> io::Error {
    let refused_type = err.kind() == io::ErrorKind::InvalidInput
        || err.raw_os_error() == Some(libc::ELOOP)
        || std::fs::symlink_metadata(path).is_ok_and(|meta| !meta.is_file());
    if !refused_type {
        return err;
    }
    io::Error::new(
        err.kind(),
        format!("{err}: give a regular file, or /dev/null itself to keep no audit log"),
    )
}

/// An audit descriptor: a regular file (or the null device) we opened, or stdout/stderr.
enum Descriptor {
    File(File),
    Std(RawFd),
}

/// Writes that never wait longer than [`LINE_WAIT`], nor past the deadline, nor after a stop
/// signal (SIGTERM must not wait for a reader that stopped reading): before each piece,
/// poll(2) says the descriptor takes it now. A regular file always does. The descriptor stays
/// blocking (stdout and stderr are shared with other processes: O_NONBLOCK on them would be
/// theirs too), so the pieces are at most PIPE_BUF bytes, which a pipe that polls writable
/// takes whole. Once a line timed out, later lines do not wait at all.
struct BoundedFd {
    fd: Descriptor,
    deadline: Option<Instant>,
    stuck: bool,
}

/// POSIX's PIPE_BUF on Linux: a pipe that polls writable has room for this much.
const PIECE: usize = 4096;

impl BoundedFd {
    fn new(fd: Descriptor) -> Self {
        BoundedFd {
            fd,
            deadline: None,
            stuck: false,
        }
    }

    fn raw(&self) -> RawFd {
        match &self.fd {
            Descriptor::File(file) => file.as_raw_fd(),
            Descriptor::Std(fd) => *fd,
        }
    }

    fn write_line(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let now = Instant::now();
        let mut until = now
            + if self.stuck {
                Duration::ZERO
            } else {
                LINE_WAIT
            };
        if let Some(deadline) = self.deadline {
            until = until.min(deadline.max(now));
        }
        while !bytes.is_empty() {
            if let Err(err) = self.wait_writable(until) {
                self.stuck = true;
                return Err(err);
            }
            let piece = &bytes[..bytes.len().min(PIECE)];
            // SAFETY: `piece` is valid for reads of its length; the descriptor is open.
            let written = unsafe { libc::write(self.raw(), piece.as_ptr().cast(), piece.len()) };
            if written < 0 {
                let err = io::Error::last_os_error();
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    continue;
                }
                return Err(err);
            }
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[written as usize..];
        }
        Ok(())
    }

    /// Until the descriptor takes a piece now; an error once `until` passes, or at once after
    /// a stop signal.
    fn wait_writable(&self, until: Instant) -> io::Result<()> {
        loop {
            let mut fds = vec![libc::pollfd {
                fd: self.raw(),
                events: libc::POLLOUT,
                revents: 0,
            }];
            let stop = crate::safety::stop_wake_fd();
            if let Some(stop) = stop {
                fds.push(libc::pollfd {
                    fd: stop,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let left = until.saturating_duration_since(Instant::now());
            let timeout_ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: `fds` holds `fds.len()` initialised pollfd structs for the call.
            let ready =
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
            if ready < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if fds[0].revents != 0 {
                // Writable, or an error (POLLERR, POLLHUP) that the write reports.
                return Ok(());
            }
            if fds.get(1).is_some_and(|fd| fd.revents != 0) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "a stop signal came while it took no line: its reader stopped reading?",
                ));
            }
            if ready == 0 && Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "it took no line in time (a line waits {:.0} s at most, never past \
                         --duration): its reader stopped reading?",
                        LINE_WAIT.as_secs_f64()
                    ),
                ));
            }
        }
    }
}

/// Log lines to stderr that never wait longer than [`LINE_WAIT`] (and not at all once one
/// timed out, or after a stop signal): a stderr pipe whose reader stopped reading must not hold
/// a command past its deadline or its SIGTERM. What does not fit in time is dropped.
pub struct BoundedStderr(BoundedFd);

impl BoundedStderr {
    pub fn new() -> Self {
        BoundedStderr(BoundedFd::new(Descriptor::Std(libc::STDERR_FILENO)))
    }
}

impl Default for BoundedStderr {
    fn default() -> Self {
        Self::new()
    }
}

impl io::Write for BoundedStderr {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write_line(bytes).map(|()| bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `2026-11-30T12:34:56.789Z`, without a date crate.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since_epoch.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap_day = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
        assert_eq!(rfc3339_utc(leap_day), "2000-02-29T00:00:00.123Z");
        let later = UNIX_EPOCH + Duration::from_secs(1_796_041_845);
        assert_eq!(rfc3339_utc(later), "2026-11-30T12:30:45.000Z");
    }

    #[test]
    fn records_are_single_json_lines_with_time() {
        let buffer = SharedBuffer::default();
        let mut log = AuditLog::to_writer(Box::new(buffer.clone()), "memory");
        let mut record = AuditRecord::new(1.5, "sim0", Event::Decision, Outcome::Hold);
        record.reason = "because".to_string();
        log.write(&record).unwrap();
        let text = buffer.text();
        assert_eq!(text.lines().count(), 1);
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["device"], "sim0");
        assert_eq!(line["event"], "decision");
        assert_eq!(line["outcome"], "hold");
        assert_eq!(line["elapsed_s"], 1.5);
        assert!(line["time"].as_str().unwrap().ends_with('Z'));
        assert!(line.get("signals").is_none());
    }

    #[test]
    fn the_null_device_is_accepted_as_an_audit_log() {
        let mut log = AuditLog::to_file(Path::new("/dev/null")).unwrap();
        assert_eq!(log.name(), "/dev/null");
        let record = AuditRecord::new(0.5, "sim0", Event::Decision, Outcome::Hold);
        log.write(&record).unwrap();
    }

    /// Only the null device itself: a FIFO, a symlink to /dev/null and another character
    /// device are refused, each with an error that names /dev/null as the alternative.
    #[test]
    fn fifos_symlinks_and_other_devices_are_refused_naming_dev_null() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        for (path, what) in [
            (fifo.as_path(), "a FIFO"),
            (link.as_path(), ""),
            (Path::new("/dev/zero"), "a character device"),
        ] {
            let err = AuditLog::to_file(path).err().unwrap();
            let text = format!("{err:#}");
            assert!(text.contains(what), "{}: {text}", path.display());
            assert!(
                text.contains("/dev/null itself"),
                "{}: {text}",
                path.display()
            );
        }
    }

    #[derive(Clone, Default)]
    struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl SharedBuffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for SharedBuffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}

/// `--audit` under a planted symlink or a directory others may write in: nothing opened.
#[cfg(test)]
mod path_tests {
    use std::{
        fs,
        os::unix::fs::{symlink, PermissionsExt as _},
    };

    use super::*;

    #[test]
    fn an_audit_log_under_a_planted_symlink_or_a_shared_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::create_dir(dir.path().join("shared")).unwrap();
        symlink(&elsewhere, dir.path().join("shared/logs")).unwrap();
        let refusal = |path: &Path| match AuditLog::to_file(path) {
            Ok(_) => panic!("{} was opened", path.display()),
            Err(error) => format!("{error:#}"),
        };
        let error = refusal(&dir.path().join("shared/logs/audit.jsonl"));
        assert!(error.contains("is a symlink"), "{error}");
        assert!(!elsewhere.join("audit.jsonl").exists());

        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let error = refusal(&open.join("audit.jsonl"));
        assert!(
            format!("{error:#}").contains("others may replace"),
            "{error:#}"
        );
        assert!(!open.join("audit.jsonl").exists());

        let real = dir.path().join("logs");
        fs::create_dir(&real).unwrap();
        AuditLog::to_file(&real.join("audit.jsonl")).unwrap();
        assert!(real.join("audit.jsonl").is_file());
    }
}
