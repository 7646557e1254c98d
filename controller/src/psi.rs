//! Memory pressure from a PSI file (`/proc/pressure/memory`), current rather than averaged.
//!
//! The kernel's `avg10` is a 10 s exponential average, recomputed every 2 s: a poll that reads
//! it sees a pressure onset 2 s late at the earliest, and then at about a fifth of its size.
//! `total` (microseconds in which some task stalled on memory, since boot) is brought up to date
//! at every read, so the stall share between two readings is exact. [`PsiMeter`] reports the
//! larger of the two: a burst counts at the first reading after it, and is forgotten at
//! `avg10`'s pace, not at once (memory need is the direction to react to fast and let go of
//! slowly, docs/CONTROLLER.md). [`PsiTrigger`] arms the kernel's own threshold on the same file,
//! for a caller that would rather sleep until memory turns tight than poll.
use std::{
    collections::VecDeque,
    ffi::CString,
    fs::{File, OpenOptions},
    io::{ErrorKind, Read as _, Write as _},
    os::{
        fd::{AsFd as _, BorrowedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use tracer_common::files::{self, Symlinks};

/// The span a poll measures the stall share over: the window Android's lmkd arms its PSI
/// triggers with (`some 70000 1000000`). Shorter spans make one 100 ms stall a large share.
pub const RECENT: Duration = Duration::from_secs(1);

/// Readings older than this are dropped, keeping one, so a long decision period still finds
/// the reading at its start (the share is then over the readings kept).
const KEEP: Duration = Duration::from_secs(60);

/// At most this many readings (a poll every 50 ms keeps 60 s).
const MAX_READINGS: usize = 1200;

/// The `some avg10` figure of a PSI file, percent; `None` unless it is a share (0..=100).
pub fn parse_some_avg10(text: &str) -> Option<f64> {
    let avg10: f64 = some_field(text, "avg10=")?.parse().ok()?;
    (0.0..=100.0).contains(&avg10).then_some(avg10)
}

/// The `some total` figure of a PSI file: microseconds some task stalled, since boot.
pub fn parse_some_total_us(text: &str) -> Option<u64> {
    some_field(text, "total=")?.parse().ok()
}

fn some_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|line| line.starts_with("some "))?
        .split_whitespace()
        .find_map(|field| field.strip_prefix(key))
}

/// A PSI file is a few lines: reading stops at the project's read limit, so that a wrong path
/// cannot make the controller read until memory runs out, and it is a regular file (procfs's
/// are), so that a FIFO or a device given as --psi is refused instead of blocking the loop.
fn read_capped(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    files::open_regular(path, Symlinks::Follow)?
        .take(files::READ_LIMIT)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Refuse a PSI path that is there but is not a regular file (procfs's PSI files are): a FIFO
/// would otherwise be read every poll, and a device is no PSI file. A missing path is fine
/// (a kernel without CONFIG_PSI: no signal, said when read).
pub fn check_psi_path(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(files::not_regular(meta.file_type()))
            .with_context(|| format!("the PSI file {}", path.display())),
        _ => Ok(()),
    }
}

/// Memory pressure, percent, from successive readings of one PSI file.
#[derive(Debug, Default)]
pub struct PsiMeter {
    /// (when, `some total`), oldest first.
    readings: VecDeque<(Duration, u64)>,
    /// What a PSI trigger reported, for the readings at that time only: (when, share).
    at_least: Option<(Duration, f64)>,
}

impl PsiMeter {
    /// The pressure at `now` (time since any fixed start, increasing), percent: the larger of
    /// `avg10` and the stall share over the last `span` (from the reading at or before
    /// `now - span`, or the oldest one kept). Only `avg10` at the first reading; `None` when
    /// the text has neither figure.
    pub fn read(&mut self, text: &str, now: Duration, span: Duration) -> Option<f64> {
        let share = parse_some_total_us(text).and_then(|total| {
            let share = self.share_since(now.saturating_sub(span), now, total);
            self.remember(now, total);
            share
        });
        let reported = self
            .at_least
            .filter(|(at, _)| *at == now)
            .map(|(_, share)| share);
        if self.at_least.is_some_and(|(at, _)| at < now) {
            self.at_least = None;
        }
        [parse_some_avg10(text), share, reported]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }

    /// A PSI trigger fired at `now`: the share over its window was at least `share` percent.
    /// Readings at `now` report no less, even when the readings before them are too far back
    /// to show the burst at its size (a waiter on a trigger reads seldom).
    pub fn at_least(&mut self, share: f64, now: Duration) {
        self.at_least = Some((now, share));
    }

    fn share_since(&self, from: Duration, now: Duration, total: u64) -> Option<f64> {
        let (then, before) = self
            .readings
            .iter()
            .rev()
            .find(|(at, _)| *at <= from)
            .or(self.readings.front())?;
        if now <= *then {
            return None;
        }
        let elapsed_us = (now - *then).as_secs_f64() * 1e6;
        let stalled_us = total.saturating_sub(*before) as f64;
        Some((stalled_us / elapsed_us * 100.0).clamp(0.0, 100.0))
    }

    fn remember(&mut self, now: Duration, total: u64) {
        let went_back = self
            .readings
            .back()
            .is_some_and(|&(at, last)| total < last || now < at);
        if went_back {
            // Another file, or a clock that jumped: earlier readings say nothing about this one.
            self.readings.clear();
        }
        self.readings.push_back((now, total));
        while self.readings.len() > MAX_READINGS
            || (self.readings.len() > 1 && self.readings[1].0 + KEEP <= now)
        {
            self.readings.pop_front();
        }
    }
}

/// A PSI file and its [`PsiMeter`]: what `nodescope tune` and `top --tune` read pressure from.
#[derive(Debug)]
pub struct PsiFile {
    path: PathBuf,
    meter: PsiMeter,
    warned: bool,
}

impl PsiFile {
    pub fn new(path: &Path) -> Self {
        PsiFile {
            path: path.to_path_buf(),
            meter: PsiMeter::default(),
            warned: false,
        }
    }

    /// The pressure at `now` over `span` ([`PsiMeter::read`]). A missing file (a kernel
    /// without CONFIG_PSI) is no signal, said once; any other failure is an error.
    pub fn read(&mut self, now: Duration, span: Duration) -> Result<Option<f64>> {
        match read_capped(&self.path) {
            Ok(text)
                if parse_some_avg10(&text).is_none() && parse_some_total_us(&text).is_none() =>
            {
                // Not a PSI file (a wrong --psi, a device node): no signal, and said.
                self.warn_once(&format!(
                    "{} holds no PSI `some avg10=... total=...` line",
                    self.path.display()
                ));
                Ok(None)
            }
            Ok(text) => Ok(self.meter.read(&text, now, span)),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                self.warn_once(&format!(
                    "{} does not exist (kernel without CONFIG_PSI?)",
                    self.path.display()
                ));
                Ok(None)
            }
            Err(err) => Err(err).with_context(|| format!("reading {}", self.path.display())),
        }
    }

    /// [`Self::read`], with every failure no signal, said once (for a view that must go on).
    pub fn read_or_warn(&mut self, now: Duration, span: Duration) -> Option<f64> {
        self.read(now, span).unwrap_or_else(|err| {
            self.warn_once(&format!("{err:#}"));
            None
        })
    }

    /// [`PsiMeter::at_least`].
    pub fn at_least(&mut self, share: f64, now: Duration) {
        self.meter.at_least(share, now);
    }

    fn warn_once(&mut self, what: &str) {
        if !self.warned {
            log::warn!("{what}: no memory pressure signal");
            self.warned = true;
        }
    }
}

/// PROC_SUPER_MAGIC: the file system of /proc.
const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;

/// A PSI trigger (the kernel's Documentation/accounting/psi.rst): its descriptor reports
/// `POLLPRI` when the `some` stall time within a window exceeds the threshold, at most once
/// per window. Android's lmkd waits on memory pressure this way instead of polling.
#[derive(Debug)]
pub struct PsiTrigger {
    file: File,
    /// Stall time within `window` that fires the trigger.
    pub stall: Duration,
    pub window: Duration,
}

impl PsiTrigger {
    /// Arm a trigger on `path` (`/proc/pressure/memory`) for `share_percent` of some stall:
    /// within 1 s (root, or CAP_SYS_RESOURCE), else within 2 s, the windows Linux 6.5 and
    /// later let anyone arm. Refuses anything but a file in procfs: a plain file given as the
    /// PSI file is only ever read, never written.
    pub fn arm(path: &Path, share_percent: f64) -> Result<PsiTrigger> {
        if !(share_percent > 0.0 && share_percent < 100.0) {
            bail!("a PSI trigger needs a share between 0 and 100 %, not {share_percent}");
        }
        if !is_in_procfs(path)? {
            bail!("{} is not in /proc: no PSI trigger there", path.display());
        }
        let mut refusals = Vec::new();
        for window in [Duration::from_secs(1), Duration::from_secs(2)] {
            let window_us = window.as_micros() as f64;
            // Rounded to a nanosecond first: 0.1 x 1.1 % of 1 s is 1100 us, not 1101.
            let exact_us = (window_us * share_percent / 100.0 * 1e3).round() / 1e3;
            let stall_us = exact_us.ceil().max(1.0) as u64;
            match Self::try_arm(path, stall_us, window.as_micros() as u64) {
                Ok(file) => {
                    return Ok(PsiTrigger {
                        file,
                        stall: Duration::from_micros(stall_us),
                        window,
                    })
                }
                Err(err) => refusals.push(format!("{:.0} s window: {err:#}", window.as_secs_f64())),
            }
        }
        bail!(
            "cannot arm a PSI trigger on {}: {}",
            path.display(),
            refusals.join("; ")
        )
    }

    fn try_arm(path: &Path, stall_us: u64, window_us: u64) -> Result<File> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        let mut file = files::open_nonblocking(path, &mut options, Symlinks::Follow)
            .and_then(|file| files::ensure_regular(&file).map(|()| file))
            .with_context(|| format!("opening {} for writing", path.display()))?;
        // The kernel ends the string at the last byte it copied: the NUL must be sent too.
        let spec = CString::new(format!("some {stall_us} {window_us}")).expect("no NUL inside");
        file.write_all(spec.as_bytes_with_nul())
            .with_context(|| format!("writing \"some {stall_us} {window_us}\""))?;
        Ok(file)
    }

    /// What `poll()` waits on: `POLLPRI` when the trigger fires, `POLLERR` when it is gone.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The stall share, percent, that fires the trigger.
    pub fn share(&self) -> f64 {
        self.stall.as_secs_f64() / self.window.as_secs_f64() * 100.0
    }

    /// The line written to arm it, as the kernel documents it.
    pub fn spec(&self) -> String {
        format!(
            "some {} {}",
            self.stall.as_micros(),
            self.window.as_micros()
        )
    }
}

fn is_in_procfs(path: &Path) -> Result<bool> {
    let name = CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} has a NUL byte", path.display()))?;
    // SAFETY: statfs reads the NUL-terminated path and writes into the zeroed struct we own.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are valid for the duration of the call.
    if unsafe { libc::statfs(name.as_ptr(), &mut info) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statfs {}", path.display()));
    }
    Ok(info.f_type as libc::c_long == PROC_SUPER_MAGIC)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_file_that_is_not_psi_is_no_signal_and_a_device_an_error() {
        // /dev/zero never ends and a FIFO blocks: anything but a regular file is refused.
        let mut psi = PsiFile::new(Path::new("/dev/zero"));
        let err = format!("{:#}", psi.read(Duration::ZERO, RECENT).unwrap_err());
        assert!(
            err.contains("not a regular file (a character device)"),
            "{err}"
        );
        assert_eq!(psi.read_or_warn(Duration::ZERO, RECENT), None);
        assert!(check_psi_path(Path::new("/dev/zero")).is_err());
        assert!(check_psi_path(Path::new("/nonexistent/psi")).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("psi");
        fs::write(&garbage, "hello\n").unwrap();
        assert_eq!(
            PsiFile::new(&garbage).read(Duration::ZERO, RECENT).unwrap(),
            None
        );
    }

    #[test]
    fn avg10_outside_a_share_is_refused() {
        let line = |avg10: &str| format!("some avg10={avg10} avg60=0.00 avg300=0.00 total=0\n");
        assert_eq!(parse_some_avg10(&line("250.00")), None);
        assert_eq!(parse_some_avg10(&line("-1.00")), None);
        assert_eq!(parse_some_avg10(&line("NaN")), None);
        assert_eq!(parse_some_avg10(&line("100.00")), Some(100.0));
    }

    fn psi(avg10: f64, total_us: u64) -> String {
        format!(
            "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total={total_us}\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        )
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn the_some_line_gives_avg10_and_total() {
        let text = "some avg10=12.34 avg60=1.00 avg300=0.10 total=123\n\
                    full avg10=5.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_some_avg10(text), Some(12.34));
        assert_eq!(parse_some_total_us(text), Some(123));
        assert_eq!(parse_some_total_us("some avg10=1.00\n"), None);
        assert_eq!(parse_some_avg10("full avg10=1.00 total=5\n"), None);
    }

    #[test]
    fn an_onset_counts_at_the_next_reading_while_avg10_still_says_zero() {
        let mut meter = PsiMeter::default();
        assert_eq!(meter.read(&psi(0.0, 1_000), ms(0), RECENT), Some(0.0));
        // 125 ms of stall in the next 250 ms: 50 %, with avg10 not updated yet.
        assert_eq!(meter.read(&psi(0.0, 126_000), ms(250), RECENT), Some(50.0));
    }

    #[test]
    fn the_share_is_over_the_span_asked_for() {
        let mut meter = PsiMeter::default();
        // Readings a second apart: 100 ms of stall in the first second, none in the second,
        // 400 ms in the third.
        for (second, total) in [0, 100_000, 100_000].into_iter().enumerate() {
            meter.read(&psi(0.0, total), ms(1000 * second as u64), RECENT);
        }
        assert_eq!(meter.read(&psi(0.0, 500_000), ms(3000), RECENT), Some(40.0));
        let three_s = meter.read(&psi(0.0, 500_000), ms(3000), ms(3000));
        assert!(
            (three_s.unwrap() - 500.0 / 30.0).abs() < 1e-9,
            "{three_s:?}"
        );
    }

    #[test]
    fn avg10_keeps_a_burst_after_the_share_has_gone() {
        let mut meter = PsiMeter::default();
        meter.read(&psi(0.0, 0), ms(0), RECENT);
        assert_eq!(meter.read(&psi(0.0, 800_000), ms(1000), RECENT), Some(80.0));
        // The burst is over (no stall in the last second) but avg10 has caught up with it.
        assert_eq!(
            meter.read(&psi(15.0, 800_000), ms(2000), RECENT),
            Some(15.0)
        );
    }

    #[test]
    fn a_fired_trigger_sets_a_floor_for_the_readings_at_its_time_only() {
        let mut meter = PsiMeter::default();
        meter.read(&psi(0.0, 0), ms(0), RECENT);
        // 60 ms of stall, all in the last second, but the last reading was 5 s ago: 1.2 %.
        meter.at_least(5.5, ms(5000));
        assert_eq!(meter.read(&psi(0.0, 60_000), ms(5000), RECENT), Some(5.5));
        // Another device's reading at the same time.
        assert_eq!(meter.read(&psi(0.0, 60_000), ms(5000), RECENT), Some(5.5));
        // The one after that: the share since the reading 5.1 s back.
        let next = meter.read(&psi(0.0, 60_000), ms(5100), RECENT).unwrap();
        assert!((next - 6.0 / 5.1).abs() < 1e-9, "{next}");
    }

    #[test]
    fn triggers_are_armed_only_in_procfs_and_a_plain_file_is_left_alone() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("memory");
        let text = psi(1.0, 5);
        std::fs::write(&path, &text).unwrap();
        let err = PsiTrigger::arm(&path, 5.5).unwrap_err();
        assert!(err.to_string().contains("is not in /proc"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(PsiTrigger::arm(Path::new("/proc/pressure/memory"), 0.0).is_err());
    }

    #[test]
    fn a_trigger_on_this_kernel_is_armed_with_the_share_asked_for() {
        let path = Path::new("/proc/pressure/memory");
        if !path.exists() {
            test_skip::skip("this kernel has no PSI (CONFIG_PSI)");
            return;
        }
        let trigger = PsiTrigger::arm(path, 5.5).expect("/proc/pressure/memory takes triggers");
        // 1 s for root, 2 s otherwise: 55 ms or 110 ms of stall, 5.5 % either way.
        assert!((trigger.share() - 5.5).abs() < 1e-9, "{}", trigger.spec());
        assert!(
            trigger.spec() == "some 55000 1000000" || trigger.spec() == "some 110000 2000000",
            "{}",
            trigger.spec()
        );
        let goal_trigger = PsiTrigger::arm(path, 0.1 * 1.1).unwrap();
        assert!(
            goal_trigger.spec().starts_with("some 1100 ")
                || goal_trigger.spec().starts_with("some 2200 ")
        );
    }

    #[test]
    fn a_counter_that_went_back_starts_over() {
        let mut meter = PsiMeter::default();
        meter.read(&psi(0.0, 900_000), ms(0), RECENT);
        // Not a negative share, nor a huge one: only avg10 until the next reading.
        assert_eq!(meter.read(&psi(2.0, 100), ms(500), RECENT), Some(2.0));
        assert_eq!(meter.read(&psi(2.0, 250_100), ms(1000), RECENT), Some(50.0));
    }

    #[test]
    fn old_readings_are_dropped_but_one_before_the_span_is_kept() {
        let mut meter = PsiMeter::default();
        for step in 0..2000u64 {
            meter.read(&psi(0.0, step * 10_000), ms(step * 100), RECENT);
        }
        assert!(meter.readings.len() <= MAX_READINGS);
        assert!(meter.readings.len() >= 600, "60 s of 100 ms readings");
        // 10 ms of stall every 100 ms, over any span: 10 %.
        let share = meter.read(&psi(0.0, 2000 * 10_000), ms(200_000), ms(30_000));
        assert!((share.unwrap() - 10.0).abs() < 1e-9, "{share:?}");
    }
}
