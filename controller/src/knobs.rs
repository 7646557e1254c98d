//! Where the RFC's two knobs live, and reading and writing them there (the knobs themselves,
//! their ranges and defaults are `tracer_common::knobs`).
//!
//! A device is a directory `<sysfs-root>/<dev>/` holding `node_compress_threshold` and
//! `node_compress_interval` (the kernel's `/sys/fs/f2fs/<dev>/`, or the simulator's knob
//! directory). [`KnobStore`] is the seam: [`SysfsKnobs`] reads and writes those files,
//! [`MemoryKnobs`] keeps the values in memory (tests, and the simulator in virtual time).
use std::{
    fs,
    io::ErrorKind,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    thread,
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use tracer_common::{
    files,
    knobs::{Knob, Knobs, INTERVAL_FILE, THRESHOLD_FILE},
    text::quote_capped,
};

pub const DEFAULT_SYSFS_ROOT: &str = "/sys/fs/f2fs";
/// Reads of a knob file before unparsable contents count as an error (see `SysfsKnobs::read`).
const READ_ATTEMPTS: u32 = 3;
const READ_RETRY_DELAY: Duration = Duration::from_millis(10);

/// The kernel answers EINVAL outside the knob's range; we refuse before it has to.
pub fn validate(knob: Knob, value: u32) -> Result<()> {
    knob.check(value).map(drop).map_err(anyhow::Error::new)
}

/// Both values in range, or an error naming the first that is not.
pub fn validate_all(knobs: &Knobs) -> Result<()> {
    knobs.check().map_err(anyhow::Error::new)
}

/// Parse a knob file's contents (sysfs prints "%u\n"), naming `origin` in every error and
/// quoting only the head of the contents (a knob linked to another file must not print it).
pub fn parse(knob: Knob, origin: &str, content: &str) -> Result<u32> {
    let trimmed = content.trim();
    let value: u32 = trimmed.parse().map_err(|_| {
        anyhow::anyhow!(
            "{origin} contains {}, which is not a whole number",
            quote_capped(content.as_bytes())
        )
    })?;
    let range = knob.range();
    if !range.contains(&value) {
        bail!(
            "{origin} contains {}, outside the valid range {}..={}",
            quote_capped(trimmed.as_bytes()),
            range.start(),
            range.end()
        );
    }
    Ok(value)
}

/// The one reader of a knob file, for the controller and for nodescope's display alike:
/// never through a symlink, never blocking on a FIFO (`files::read_no_follow`), parsed as sysfs
/// prints it and range-checked ([`parse`]). A plain file (the simulator's directory) can be
/// caught between the truncation and the write of someone's update and read empty; sysfs
/// never is. So an unparsable read is retried briefly before it counts.
pub fn read_file(path: &Path, knob: Knob) -> Result<u32> {
    let origin = path.display().to_string();
    let mut attempt = 1;
    loop {
        let content = files::read_no_follow(path).with_context(|| format!("reading {origin}"))?;
        let content = String::from_utf8_lossy(&content);
        match parse(knob, &origin, &content) {
            Err(_) if attempt < READ_ATTEMPTS => {
                attempt += 1;
                thread::sleep(READ_RETRY_DELAY);
            }
            parsed => return parsed,
        }
    }
}

/// Where a device's knobs are read and written.
pub trait KnobStore: Send {
    /// Where the knob lives, for messages (a path for sysfs).
    fn origin(&self, knob: Knob) -> String;
    /// The current value, parsed and range-checked (an error names the origin and content).
    fn read(&mut self, knob: Knob) -> Result<u32>;
    /// Write a value that `Knob::validate` accepted.
    fn write(&mut self, knob: Knob, value: u32) -> Result<()>;

    /// Whether the device is still there (its knob directory exists): a read that fails on a
    /// device that went away ends its tuning quietly, not as a failure.
    fn present(&mut self) -> bool {
        true
    }

    fn read_all(&mut self) -> Result<Knobs> {
        Ok(Knobs {
            threshold: self.read(Knob::Threshold)?,
            interval_ms: self.read(Knob::Interval)?,
        })
    }
}

/// The knob files of one device directory.
#[derive(Debug)]
pub struct SysfsKnobs {
    dir: PathBuf,
}

impl SysfsKnobs {
    /// Check that both files exist, parse, are in range and (unless `need_write` is false)
    /// can be opened for writing; refuse with a message that names the file otherwise.
    pub fn open(root: &Path, device: &str, need_write: bool) -> Result<Self> {
        let mut knobs = Self::locate(root, device, need_write)?;
        for knob in Knob::ALL {
            knobs.read(knob)?;
        }
        Ok(knobs)
    }

    /// [`SysfsKnobs::open`] without reading the values: what a restore needs, which writes the
    /// originals whatever the files hold now (a plain knob file left empty by a writer killed
    /// in the middle, before writes were atomic, must not keep its originals out).
    pub fn locate(root: &Path, device: &str, need_write: bool) -> Result<Self> {
        let dir = root.join(device);
        if dir.is_dir() {
            check_inside(root, &dir)?;
        }
        if !dir.is_dir() {
            bail!(
                "no device directory {} (devices under {}: {})",
                dir.display(),
                root.display(),
                list_or_none(&list_dirs(root).unwrap_or_default())
            );
        }
        let knobs = SysfsKnobs { dir };
        for knob in Knob::ALL {
            knobs.check_present(knob)?;
            if need_write {
                knobs.check_writable(knob)?;
            }
        }
        Ok(knobs)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, knob: Knob) -> PathBuf {
        self.dir.join(knob.file_name())
    }

    fn check_present(&self, knob: Knob) -> Result<()> {
        let path = self.path(knob);
        let meta = fs::symlink_metadata(&path);
        if meta
            .as_ref()
            .is_ok_and(|meta| meta.file_type().is_symlink())
        {
            bail!(
                "{} is a symlink: knob files are never symlinks, refusing to follow it",
                path.display()
            );
        }
        if let Some(meta) = meta.as_ref().ok().filter(|meta| !meta.is_file()) {
            bail!(
                "{}: {}: knob files are regular files",
                path.display(),
                files::not_regular(meta.file_type())
            );
        }
        if meta.is_err() {
            bail!(
                "{} is missing (RFC patch \"f2fs: retain clean node blocks in a compressed \
                 cache\" not applied?)",
                path.display()
            );
        }
        Ok(())
    }

    /// Opening for writing changes nothing (no truncation) and fails exactly when a write
    /// would be refused for permissions: EACCES on a file we may not write, and on a sysfs
    /// attribute that has no store method.
    fn check_writable(&self, knob: Knob) -> Result<()> {
        let path = self.path(knob);
        files::open_existing_for_writing(&path, false)
            .map(drop)
            .with_context(|| {
                format!(
                    "{} is not writable (run as root, or use --dry-run to only decide and log)",
                    path.display()
                )
            })
    }
}

impl KnobStore for SysfsKnobs {
    fn origin(&self, knob: Knob) -> String {
        self.path(knob).display().to_string()
    }

    fn present(&mut self) -> bool {
        fs::symlink_metadata(&self.dir).is_ok()
    }

    fn read(&mut self, knob: Knob) -> Result<u32> {
        read_file(&self.path(knob), knob)
    }

    fn write(&mut self, knob: Knob, value: u32) -> Result<()> {
        validate(knob, value)?;
        let path = self.path(knob);
        write_knob_file(&path, format!("{value}\n").as_bytes())
            .with_context(|| format!("writing {value} to {}", path.display()))
    }
}

/// sysfs's `f_type` (statfs(2)).
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// Write a knob file so that no moment, and no SIGKILL, leaves it empty or half-written.
/// Never creates the knob (one that vanished, a device unmounted, is an error, not a new plain
/// file), never writes through a symlink, never blocks on a FIFO. A sysfs attribute takes one
/// write(2) of the whole value, without O_TRUNC (sysfs parses each write on its own and has no
/// "half" state); a plain file (the simulator's) is replaced by rename(2) of a complete
/// temporary file in the same directory, keeping its mode (and, as root, its owner).
pub fn write_knob_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::{io::Write as _, os::fd::AsRawFd as _};
    let mut file = files::open_existing_for_writing(path, false)?;
    // SAFETY: `stat` is plain data that fstatfs fills; the descriptor is open for the call.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets, u32 on others
    if stat.f_type as i64 == SYSFS_MAGIC {
        let written = file.write(bytes)?;
        if written != bytes.len() {
            return Err(std::io::Error::new(
                ErrorKind::WriteZero,
                format!("the kernel took {written} of {} bytes", bytes.len()),
            ));
        }
        return Ok(());
    }
    replace_plain(path, &file, bytes)
}

/// `path` (a regular file, open as `current`) replaced by a complete copy holding `bytes`.
fn replace_plain(path: &Path, current: &fs::File, bytes: &[u8]) -> std::io::Result<()> {
    use std::{
        io::Write as _,
        os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _},
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "not a file in a directory",
        ));
    };
    let meta = current.metadata()?;
    let temporary = dir.join(format!(".{}.new", name.to_string_lossy()));
    let create = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temporary)
    };
    // A stale temporary (ours, from a writer killed here; or anything planted) is unlinked,
    // never followed or written.
    let mut file = match create() {
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            fs::remove_file(&temporary)?;
            create()?
        }
        other => other?,
    };
    let written = (|| {
        file.write_all(bytes)?;
        file.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        // As root, the simulator's owner keeps its file; elsewhere this fails harmlessly (we
        // own the new file, and could only have written one we may replace).
        let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// A device directory reached through a symlink must stay under the root: otherwise a link
/// planted there would make us write knob files anywhere.
fn check_inside(root: &Path, dir: &Path) -> Result<()> {
    let canonical = |path: &Path| {
        fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))
    };
    let (root_real, dir_real) = (canonical(root)?, canonical(dir)?);
    if !dir_real.starts_with(&root_real) {
        bail!(
            "{} links to {}, outside {}: refusing to write knobs there",
            dir.display(),
            dir_real.display(),
            root.display()
        );
    }
    Ok(())
}

/// Devices under `root` that carry both knobs, sorted. Errors explain what is missing.
pub fn discover_devices(root: &Path) -> Result<Vec<String>> {
    let dirs = list_dirs(root)?;
    let with_knobs: Vec<String> = dirs
        .iter()
        .filter(|dev| {
            // Anything at both names: a knob that is not a regular file is then refused by
            // name (SysfsKnobs::open), not skipped in silence.
            Knob::ALL
                .iter()
                .all(|knob| fs::symlink_metadata(root.join(dev).join(knob.file_name())).is_ok())
        })
        .cloned()
        .collect();
    if with_knobs.is_empty() {
        bail!(
            "no device under {} has {THRESHOLD_FILE} and {INTERVAL_FILE} (RFC patch \"f2fs: \
             retain clean node blocks in a compressed cache\" not applied?); devices seen: {}",
            root.display(),
            list_or_none(&dirs)
        );
    }
    Ok(with_knobs)
}

fn list_dirs(root: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(root).map_err(|err| {
        let hint = if err.kind() == ErrorKind::NotFound {
            " (is F2FS loaded and mounted? --sysfs-root DIR points at a simulator's knob \
             directory)"
        } else {
            ""
        };
        anyhow::anyhow!("cannot list {}: {err}{hint}", root.display())
    })?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", root.display()))?;
        // sysfs device entries are directories (or symlinks to them).
        if entry.path().is_dir() {
            dirs.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// Knobs held in memory: for tests, and for the simulator when it runs the controller in
/// virtual time. Clones share the values, so the simulator keeps one clone and reads what the
/// controller wrote (or writes itself, to play "someone else").
#[derive(Clone, Debug)]
pub struct MemoryKnobs {
    name: String,
    values: Arc<Mutex<Knobs>>,
}

impl MemoryKnobs {
    pub fn new(name: &str, knobs: Knobs) -> Self {
        MemoryKnobs {
            name: name.to_string(),
            values: Arc::new(Mutex::new(knobs)),
        }
    }

    pub fn get(&self) -> Knobs {
        *self
            .values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, knob: Knob, value: u32) {
        self.values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .set(knob, value);
    }
}

impl KnobStore for MemoryKnobs {
    fn origin(&self, knob: Knob) -> String {
        format!("{}/{}", self.name, knob.file_name())
    }

    fn read(&mut self, knob: Knob) -> Result<u32> {
        let value = self.get().get(knob);
        validate(knob, value).with_context(|| format!("{} holds {value}", self.origin(knob)))?;
        Ok(value)
    }

    fn write(&mut self, knob: Knob, value: u32) -> Result<()> {
        validate(knob, value)?;
        self.set(knob, value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_sysfs_output_and_names_the_file_and_content_otherwise() {
        assert_eq!(parse(Knob::Threshold, "f", "25\n").unwrap(), 25);
        assert_eq!(parse(Knob::Interval, "f", " 100 \n").unwrap(), 100);
        let err = parse(Knob::Threshold, "/x/t", "abc\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/x/t contains \"abc\\n\", which is not a whole number"
        );
        let err = parse(Knob::Threshold, "/x/t", "101").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/x/t contains \"101\", outside the valid range 0..=100"
        );
        let err = parse(Knob::Interval, "/x/i", "99").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/x/i contains \"99\", outside the valid range 100..=30000"
        );
        assert!(parse(Knob::Interval, "/x/i", "-5").is_err());
        assert!(parse(Knob::Interval, "/x/i", "").is_err());
    }

    #[test]
    fn validate_holds_the_kernel_ranges() {
        assert!(validate(Knob::Threshold, 0).is_ok());
        assert!(validate(Knob::Threshold, 100).is_ok());
        assert!(validate(Knob::Threshold, 101).is_err());
        assert!(validate(Knob::Interval, 99).is_err());
        assert!(validate(Knob::Interval, 100).is_ok());
        assert!(validate(Knob::Interval, 30_000).is_ok());
        assert!(validate(Knob::Interval, 30_001).is_err());
    }

    #[test]
    fn memory_knobs_refuse_out_of_range_writes() {
        let mut knobs = MemoryKnobs::new(
            "sim0",
            Knobs {
                threshold: 10,
                interval_ms: 1000,
            },
        );
        assert!(knobs.write(Knob::Interval, 50).is_err());
        assert_eq!(knobs.get().interval_ms, 1000);
        knobs.write(Knob::Threshold, 20).unwrap();
        assert_eq!(knobs.read(Knob::Threshold).unwrap(), 20);
    }

    /// `<root>/<dev>/` with both knob files holding valid values.
    fn device(root: &Path, dev: &str) -> PathBuf {
        let dir = root.join(dev);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(THRESHOLD_FILE), "25\n").unwrap();
        fs::write(dir.join(INTERVAL_FILE), "1000\n").unwrap();
        dir
    }

    #[test]
    fn no_knob_is_written_through_a_symlink_out_of_the_root() {
        let scratch = tempfile::TempDir::new().unwrap();
        let (root, outside) = (scratch.path().join("root"), scratch.path().join("outside"));
        fs::create_dir_all(&root).unwrap();
        let elsewhere = device(&outside, "dev");
        std::os::unix::fs::symlink(&elsewhere, root.join("linked")).unwrap();
        let err = SysfsKnobs::open(&root, "linked", true).unwrap_err();
        assert!(err.to_string().contains("outside"), "{err:#}");

        let dir = device(&root, "sim0");
        let passwd = outside.join("passwd");
        fs::write(&passwd, "root:x:0:0:root:/root:/bin/bash\nSECRET\n").unwrap();
        fs::remove_file(dir.join(THRESHOLD_FILE)).unwrap();
        std::os::unix::fs::symlink(&passwd, dir.join(THRESHOLD_FILE)).unwrap();
        let err = SysfsKnobs::open(&root, "sim0", true).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err:#}");

        // Swapped in after the checks: the write and the read still refuse to follow it.
        fs::remove_file(dir.join(THRESHOLD_FILE)).unwrap();
        fs::write(dir.join(THRESHOLD_FILE), "25\n").unwrap();
        let mut knobs = SysfsKnobs::open(&root, "sim0", true).unwrap();
        fs::remove_file(dir.join(THRESHOLD_FILE)).unwrap();
        std::os::unix::fs::symlink(&passwd, dir.join(THRESHOLD_FILE)).unwrap();
        assert!(knobs.write(Knob::Threshold, 30).is_err());
        let err = knobs.read(Knob::Threshold).unwrap_err();
        assert!(!format!("{err:#}").contains("SECRET"), "{err:#}");
        assert!(fs::read_to_string(&passwd).unwrap().contains("SECRET"));
        assert_eq!(
            fs::read_to_string(elsewhere.join(THRESHOLD_FILE)).unwrap(),
            "25\n"
        );
    }

    /// Issue 52, item 9: a plain knob file is never seen empty or half-written, by a reader
    /// or after a SIGKILL: each write replaces it whole. (A truncate-then-write was caught
    /// empty by this reader within a few hundred writes.)
    #[test]
    fn a_plain_knob_file_is_never_empty_or_half_written() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let scratch = tempfile::TempDir::new().unwrap();
        let dir = device(scratch.path(), "sim0");
        let path = dir.join(INTERVAL_FILE);
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, done) = (path.clone(), Arc::clone(&done));
            thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !done.load(Ordering::Relaxed) {
                    seen.insert(fs::read_to_string(&path).unwrap());
                }
                seen
            })
        };
        let mut knobs = SysfsKnobs::open(scratch.path(), "sim0", true).unwrap();
        for round in 0..3000 {
            let value = if round % 2 == 0 { 25_000 } else { 1000 };
            knobs.write(Knob::Interval, value).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        let seen = reader.join().unwrap();
        let whole: std::collections::BTreeSet<String> =
            ["1000\n", "25000\n"].map(String::from).into();
        assert!(seen.is_subset(&whole), "{seen:?}");
        // Its mode is kept, and nothing is left beside it.
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        knobs.write(Knob::Interval, 500).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "500\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [INTERVAL_FILE, THRESHOLD_FILE]);
        // A knob that vanished is not created.
        fs::remove_file(&path).unwrap();
        assert!(knobs.write(Knob::Interval, 500).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn parse_errors_quote_only_the_head_of_the_file() {
        let content = format!("{}SECRET\n", "y".repeat(40));
        let err = parse(Knob::Threshold, "/x/t", &content).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "/x/t contains \"{}\"..., which is not a whole number",
                "y".repeat(32)
            )
        );
    }
}
