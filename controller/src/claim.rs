//! One controller per device, and original values that outlive a killed controller.
//!
//! Before its first write to a device, a controller *claims* it in the state directory
//! (default [`default_state_dir`]): it takes an exclusive `flock` on `<key>.lock` (held until
//! the process ends, SIGKILL included: the kernel drops it with the descriptor) and writes the
//! device's original values, with its pid, to `<key>.state` (atomically, fsync'd). A clean
//! end removes the state file. So a state file found by the next claimant, who holds the lock,
//! was left by a controller that did not end cleanly: its originals are the true ones, not
//! what the device holds now ([`Claim::left_behind`]).
//!
//! `<key>` is the device's knob directory, canonical, escaped into one file name, so two
//! knob roots (the kernel's, a simulator's) never share a claim. Lock files are never removed:
//! unlinking a lock file another process has open would let two processes hold "the" lock.
use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read as _, Write as _},
    os::{fd::AsRawFd as _, unix::fs::OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use tracer_common::{
    files::{self, Symlinks},
    knobs::{Knob, Knobs},
};

use crate::{
    audit::{AuditLog, AuditRecord, Event, Outcome},
    knobs::{parse, SysfsKnobs},
    tuner::{recover, TunerOptions},
};

/// Where root keeps claims: tmpfs, gone at reboot exactly when the knobs reset to defaults.
pub const ROOT_STATE_DIR: &str = "/run/nodescope";

/// A state file is a few short lines; anything longer is not ours.
const STATE_LIMIT: u64 = 4096;

/// Where root keeps claims on Android, which has no /run: under /data (system:system 0771, a
/// group nodescope trusts), not /data/local/tmp, which the shell's group may write in and so
/// plant links (it survives a reboot, but so does nothing else that would put the knobs back:
/// stale originals there are still the operator's).
pub const ANDROID_STATE_DIR: &str = "/data/nodescope";

/// `/run/nodescope` for root (on Android, which has no /run, `/data/nodescope`);
/// otherwise `$XDG_RUNTIME_DIR/nodescope`, else `/tmp/nodescope-state-<euid>` (checked
/// private by [`StateDir::open`]).
pub fn default_state_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        let android = !Path::new("/run").is_dir() && Path::new("/data/local/tmp").is_dir();
        return PathBuf::from(if android {
            ANDROID_STATE_DIR
        } else {
            ROOT_STATE_DIR
        });
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("nodescope"),
        None => PathBuf::from(format!("/tmp/nodescope-state-{euid}")),
    }
}

/// What a claimant recorded for one device: the values to put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub pid: u32,
    pub device: String,
    pub knob_dir: PathBuf,
    pub originals: Knobs,
}

/// The state directory, checked to be ours alone (it holds what root will write back).
#[derive(Clone, Debug)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Create `dir` (0700) or accept it when it is ours and private. Its path is walked from
    /// `/` without following a symlink at any component, and no directory on it may be
    /// written by others unless sticky (`files::private_dir_problem`): the later opens by path
    /// (locks, state files) then resolve to this same directory, since nobody but us and root
    /// can change any component of the path.
    pub fn open(dir: &Path) -> Result<StateDir> {
        let problem = files::private_dir_problem(dir)
            .with_context(|| format!("creating the state directory {}", dir.display()))?;
        if let Some(problem) = problem {
            bail!(
                "refusing the state directory {}: it {problem}; remove it if you do not know \
                 who made it, or choose another with --state-dir",
                dir.display()
            );
        }
        Ok(StateDir {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Claim `device` (knobs in `knob_dir`), or say which process holds it.
    pub fn claim(&self, device: &str, knob_dir: &Path) -> Result<Claim> {
        let knob_dir = fs::canonicalize(knob_dir)
            .with_context(|| format!("resolving {}", knob_dir.display()))?;
        let key = key_for(&knob_dir);
        let lock_path = self.dir.join(format!("{key}.lock"));
        let lock = lock_exclusive(&lock_path).map_err(|err| match err {
            LockError::Held => anyhow::anyhow!(
                "{device} is already tuned by {} (lock {}): one controller per device; stop \
                 that one first",
                holder(&lock_path),
                lock_path.display()
            ),
            LockError::Io(err) => {
                anyhow::Error::new(err).context(format!("locking {}", lock_path.display()))
            }
        })?;
        let state_path = self.dir.join(format!("{key}.state"));
        let left_behind = read_state(&state_path)?;
        Ok(Claim {
            lock,
            state_path,
            device: device.to_string(),
            knob_dir,
            left_behind,
        })
    }

    /// Every state file in the directory, with what it says (for `tune --restore`), and an
    /// error naming each `*.state` entry that cannot be read as one (malformed, a directory,
    /// a FIFO): one bad file must not hide the others.
    pub fn saved(&self) -> Result<Inventory> {
        let mut inventory = Inventory::default();
        let entries = fs::read_dir(&self.dir)
            .with_context(|| format!("listing the state directory {}", self.dir.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("listing {}", self.dir.display()))?
                .path();
            if path.extension().is_some_and(|ext| ext == "state") {
                match read_state(&path) {
                    Ok(saved) => inventory.saved.extend(saved),
                    Err(err) => inventory.bad.push(err),
                }
            }
        }
        inventory.saved.sort_by(|a, b| a.device.cmp(&b.device));
        Ok(inventory)
    }
}

/// `device`'s knobs under `root` ([`SysfsKnobs::open`]'s checks), claimed in `state` when one
/// is given (not in a dry run). When the claim holds originals left behind, the current values
/// are not required to parse: the start puts the originals back over whatever is there.
pub fn open_claimed(
    root: &Path,
    device: &str,
    state: Option<&StateDir>,
    need_write: bool,
) -> Result<(SysfsKnobs, Option<Claim>)> {
    let mut store = SysfsKnobs::locate(root, device, need_write)?;
    let claim = state
        .map(|state| state.claim(device, store.dir()))
        .transpose()?;
    if claim
        .as_ref()
        .is_none_or(|claim| claim.left_behind().is_none())
    {
        for knob in Knob::ALL {
            crate::knobs::KnobStore::read(&mut store, knob)?;
        }
    }
    Ok((store, claim))
}

/// What a state directory holds.
#[derive(Debug, Default)]
pub struct Inventory {
    /// The state files that parse, by device.
    pub saved: Vec<Saved>,
    /// One error per state file that does not, naming it.
    pub bad: Vec<anyhow::Error>,
}

/// `nodescope tune --restore`: put back the originals of every device (or of `devices`) that
/// a controller left in `state`, one audit record each; a device another controller holds is
/// refused, naming its pid. A state file that cannot be read is an error naming it, after
/// every other device has been seen to. Returns how many devices had originals put back or
/// checked.
pub fn restore_left_behind(
    state: &StateDir,
    devices: &[String],
    audit: &mut AuditLog,
) -> Result<usize> {
    let Inventory { saved, bad } = state.saved()?;
    let unknown: Vec<&String> = devices
        .iter()
        .filter(|device| !saved.iter().any(|s| &s.device == *device))
        .collect();
    let mut errors: Vec<String> = unknown
        .iter()
        .map(|device| {
            format!(
                "no originals recorded for {device} in {}",
                state.path().display()
            )
        })
        .chain(bad.iter().map(|err| format!("{err:#}")))
        .collect();
    let mut done = 0;
    for saved in saved
        .iter()
        .filter(|s| devices.is_empty() || devices.contains(&s.device))
    {
        match restore_one(state, saved) {
            Ok(record) => {
                audit.write(&record)?;
                done += 1;
            }
            Err(err) => errors.push(format!("{}: {err:#}", saved.device)),
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    Ok(done)
}

fn restore_one(state: &StateDir, saved: &Saved) -> Result<AuditRecord> {
    let mut claim = match state.claim(&saved.device, &saved.knob_dir) {
        Err(_) if !saved.knob_dir.exists() => return gone_without_claim(state, saved),
        claim => claim?,
    };
    let (root, name) = split_knob_dir(&saved.knob_dir)?;
    // Not read here: the originals go back whatever the files hold (`recover`).
    let mut store = SysfsKnobs::locate(root, name, true)?;
    let opts = TunerOptions {
        dry_run: false,
        min_write_gap: std::time::Duration::ZERO,
    };
    let record = recover(
        &saved.device,
        &mut store,
        &claim,
        opts,
        std::time::Duration::ZERO,
    )?
    .context("the state file vanished while we held its lock")?;
    claim.release()?;
    Ok(record)
}

/// The device's knobs are gone (unmounted: they reset with the next mount), so the state
/// file has nothing left to protect.
fn gone_without_claim(state: &StateDir, saved: &Saved) -> Result<AuditRecord> {
    let key = key_for(&saved.knob_dir);
    let lock = lock_exclusive(&state.dir.join(format!("{key}.lock"))).map_err(|err| match err {
        LockError::Held => anyhow::anyhow!("held by another controller"),
        LockError::Io(err) => err.into(),
    })?;
    fs::remove_file(state.dir.join(format!("{key}.state")))?;
    drop(lock);
    let mut record = AuditRecord::new(0.0, &saved.device, Event::DeviceGone, Outcome::Unchanged);
    record.new = Some(saved.originals);
    record.reason = format!(
        "{} is gone (unmounted?): nothing to put back; the state file of pid {} is removed",
        saved.knob_dir.display(),
        saved.pid
    );
    Ok(record)
}

fn split_knob_dir(dir: &Path) -> Result<(&Path, &str)> {
    let root = dir.parent();
    let name = dir.file_name().and_then(|name| name.to_str());
    match (root, name) {
        (Some(root), Some(name)) => Ok((root, name)),
        _ => bail!("{} is not a knob directory", dir.display()),
    }
}

/// A device this process alone may tune, until it is dropped.
#[derive(Debug)]
pub struct Claim {
    /// Holds the flock; closing it (drop, exit, SIGKILL) releases the claim.
    lock: File,
    state_path: PathBuf,
    device: String,
    knob_dir: PathBuf,
    left_behind: Option<Saved>,
}

impl Claim {
    /// The originals a controller that did not end cleanly recorded, if one did.
    pub fn left_behind(&self) -> Option<&Saved> {
        self.left_behind.as_ref()
    }

    pub fn knob_dir(&self) -> &Path {
        &self.knob_dir
    }

    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Record `originals` with our pid, atomically and durably, before anything is written.
    pub fn record(&mut self, originals: Knobs) -> Result<()> {
        let saved = Saved {
            pid: std::process::id(),
            device: self.device.clone(),
            knob_dir: self.knob_dir.clone(),
            originals,
        };
        write_durably(&self.state_path, format_state(&saved)?.as_bytes())
            .with_context(|| format!("recording the originals in {}", self.state_path.display()))?;
        self.left_behind = None;
        Ok(())
    }

    /// The originals are back (or the device is gone): nothing is left to put back.
    pub fn release(&mut self) -> Result<()> {
        self.left_behind = None;
        match fs::remove_file(&self.state_path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(err).with_context(|| format!("removing {}", self.state_path.display()))
            }
            _ => Ok(()),
        }
    }

    /// The lock's descriptor stays open for as long as the claim lives.
    pub fn lock_fd(&self) -> i32 {
        self.lock.as_raw_fd()
    }
}

enum LockError {
    Held,
    Io(io::Error),
}

/// Open (never through a symlink) and flock `path`; on success it holds our pid.
fn lock_exclusive(path: &Path) -> Result<File, LockError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(LockError::Io)?;
    // flock(LOCK_EX | LOCK_NB), as std does it on Linux: held by the open file description,
    // let go when the file is closed, whoever closes it (a SIGKILL included).
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::Held),
        Err(std::fs::TryLockError::Error(err)) => return Err(LockError::Io(err)),
    }
    file.set_len(0).map_err(LockError::Io)?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())
        .map_err(LockError::Io)?;
    Ok(file)
}

/// "pid N" from the lock file, for the refusal message.
fn holder(lock_path: &Path) -> String {
    let mut text = String::new();
    let read = files::open_regular(lock_path, Symlinks::Refuse)
        .and_then(|f| f.take(32).read_to_string(&mut text));
    match (read, text.trim().parse::<u32>()) {
        (Ok(_), Ok(pid)) => format!("pid {pid}"),
        _ => "another process".to_string(),
    }
}

/// The canonical knob directory as one file name: `/sys/fs/f2fs/vdb` -> `sys-fs-f2fs-vdb`;
/// bytes other than ASCII letters, digits, `.` and `_` (a `-` included) become `%XX`.
fn key_for(knob_dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let bytes = knob_dir.as_os_str().as_bytes();
    let mut key = String::new();
    for &byte in bytes.strip_prefix(b"/").unwrap_or(bytes) {
        match byte {
            b'/' => key.push('-'),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' => key.push(byte as char),
            _ => key.push_str(&format!("%{byte:02X}")),
        }
    }
    // File names stop at 255 bytes: a long path keeps its tail and a hash of the whole.
    if key.len() > 200 {
        let tail = &key[key.len() - 150..];
        key = format!("{:016x}-{tail}", fnv1a(bytes));
    }
    key
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

const HEADER: &str = "# nodescope tune: the original knob values of a tuned device; a clean exit \
                      removes this file, `nodescope tune --restore` puts them back";

fn format_state(saved: &Saved) -> Result<String> {
    let dir = saved.knob_dir.to_str().filter(|dir| !dir.contains('\n'));
    let Some(dir) = dir else {
        bail!(
            "{}: a knob directory whose name is not one line of UTF-8 cannot be recorded",
            saved.knob_dir.display()
        );
    };
    Ok(format!(
        "{HEADER}\npid {}\ndevice {}\ndir {dir}\n{} {}\n{} {}\n",
        saved.pid,
        saved.device,
        Knob::Threshold.file_name(),
        saved.originals.threshold,
        Knob::Interval.file_name(),
        saved.originals.interval_ms,
    ))
}

/// A state file, if there is one; an unreadable or malformed one is an error naming it (its
/// values may be the only copy of the operator's settings: never skipped silently).
fn read_state(path: &Path) -> Result<Option<Saved>> {
    // A FIFO or a directory at the name is an error naming it, never a wait.
    let bytes = match files::open_regular(path, Symlinks::Refuse) {
        Ok(file) => {
            let mut bytes = Vec::new();
            file.take(STATE_LIMIT)
                .read_to_end(&mut bytes)
                .with_context(|| format!("reading {}", path.display()))?;
            bytes
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("opening {}", path.display())),
    };
    parse_state(&String::from_utf8_lossy(&bytes))
        .map(Some)
        .with_context(|| {
            format!(
                "{} is not a nodescope state file; look at it, put the knobs back by hand, \
                 then remove it",
                path.display()
            )
        })
}

fn parse_state(text: &str) -> Result<Saved> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .with_context(|| format!("no {name} line"))
    };
    let knob = |knob: Knob| parse(knob, knob.file_name(), field(knob.file_name())?);
    Ok(Saved {
        pid: field("pid")?
            .trim()
            .parse()
            .context("pid is not a number")?,
        device: field("device")?.to_string(),
        knob_dir: PathBuf::from(field("dir")?),
        originals: Knobs {
            threshold: knob(Knob::Threshold)?,
            interval_ms: knob(Knob::Interval)?,
        },
    })
}

/// Write through a temporary created exclusively, fsync it, rename it over `path`, fsync the
/// directory: after a crash the file is either the old one or the new one, whole.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = dir.join(format!(".{name}.{}.new", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temporary, path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob_dir(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_second_claim_on_a_device_names_the_holder_and_another_device_is_free() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(&tmp.path().join("state")).unwrap();
        let vdb = knob_dir(tmp.path(), "vdb");
        let vdc = knob_dir(tmp.path(), "vdc");
        let first = state.claim("vdb", &vdb).unwrap();
        // flock locks belong to the open file description: a second open conflicts, even in
        // the same process.
        let err = state.claim("vdb", &vdb).unwrap_err().to_string();
        assert!(
            err.contains(&format!("already tuned by pid {}", std::process::id())),
            "{err}"
        );
        state.claim("vdc", &vdc).unwrap();
        drop(first);
        state.claim("vdb", &vdb).unwrap();
    }

    #[test]
    fn recorded_originals_are_left_behind_until_released() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(&tmp.path().join("state")).unwrap();
        let vdb = knob_dir(tmp.path(), "vdb");
        let originals = Knobs {
            threshold: 25,
            interval_ms: 1000,
        };
        let mut claim = state.claim("vdb", &vdb).unwrap();
        assert_eq!(claim.left_behind(), None);
        claim.record(originals).unwrap();
        drop(claim); // as SIGKILL would: the state file stays

        let mut next = state.claim("vdb", &vdb).unwrap();
        let saved = next.left_behind().cloned().expect("left behind");
        assert_eq!(saved.originals, originals);
        assert_eq!(saved.pid, std::process::id());
        assert_eq!(saved.knob_dir, fs::canonicalize(&vdb).unwrap());
        assert_eq!(state.saved().unwrap().saved, vec![saved]);
        next.release().unwrap();
        drop(next);
        assert_eq!(state.claim("vdb", &vdb).unwrap().left_behind(), None);
        assert!(state.saved().unwrap().saved.is_empty());
    }

    #[test]
    fn a_damaged_state_file_is_an_error_not_a_fresh_start() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(&tmp.path().join("state")).unwrap();
        let vdb = knob_dir(tmp.path(), "vdb");
        let key = key_for(&fs::canonicalize(&vdb).unwrap());
        let path = state.path().join(format!("{key}.state"));
        fs::write(
            &path,
            "pid 12\ndevice vdb\ndir /x\nnode_compress_threshold 400\n",
        )
        .unwrap();
        let err = format!("{:#}", state.claim("vdb", &vdb).unwrap_err());
        assert!(err.contains("is not a nodescope state file"), "{err}");
        assert!(err.contains("outside the valid range"), "{err}");
    }

    #[test]
    fn a_state_directory_someone_else_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = StateDir::open(&open).unwrap_err().to_string();
        assert!(err.contains("has mode 777"), "{err}");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        assert!(StateDir::open(&link)
            .unwrap_err()
            .to_string()
            .contains("is a symlink"));
        // A link one level up: the state directory would be made in its target.
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::create_dir(tmp.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("run/ns")).unwrap();
        let err = StateDir::open(&tmp.path().join("run/ns/state"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ns is a symlink"), "{err}");
        assert!(!elsewhere.join("state").exists());
        // Under a directory others may write in, without the sticky bit.
        let err = StateDir::open(&open.join("state")).unwrap_err().to_string();
        assert!(err.contains("has mode 777"), "{err}");
        assert!(!open.join("state").exists());
    }

    /// Issue 52, item 9: a plain knob file a killed writer left empty must not keep the
    /// originals out: `tune --restore` and the next `tune` write them over whatever is there.
    #[test]
    fn originals_go_back_over_an_empty_or_garbled_knob_file() {
        use crate::{knobs::KnobStore as _, session::Session, tuner::TunerOptions};
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(&tmp.path().join("state")).unwrap();
        let root = knob_dir(tmp.path(), "knobs");
        let dir = knob_dir(&root, "sim0");
        let originals = Knobs {
            threshold: 25,
            interval_ms: 1000,
        };
        let (threshold, interval) = (
            dir.join(Knob::Threshold.file_name()),
            dir.join(Knob::Interval.file_name()),
        );
        let leave_behind = |threshold_text: &str, interval_text: &str| {
            fs::write(&threshold, "25\n").unwrap();
            fs::write(&interval, "1000\n").unwrap();
            let (_, claim) = open_claimed(&root, "sim0", Some(&state), true).unwrap();
            let mut claim = claim.unwrap();
            claim.record(originals).unwrap();
            drop(claim); // SIGKILL: the state file stays
            fs::write(&threshold, threshold_text).unwrap();
            fs::write(&interval, interval_text).unwrap();
        };

        leave_behind("", "250\n");
        let (mut audit, records) = AuditLog::in_memory();
        assert_eq!(restore_left_behind(&state, &[], &mut audit).unwrap(), 1);
        assert_eq!(fs::read_to_string(&threshold).unwrap(), "25\n");
        assert_eq!(fs::read_to_string(&interval).unwrap(), "1000\n");
        let record = records.take().pop().unwrap();
        assert_eq!(record.outcome, Outcome::Restored);
        assert_eq!(
            record.old, None,
            "the device's values could not all be read"
        );
        assert_eq!(record.written, Some(originals));
        assert!(state.saved().unwrap().saved.is_empty());

        // The next `tune` recovers by itself, and starts from the originals.
        // Half of "1000\n" written: out of range.
        leave_behind("40\n", "10");
        let (mut store, claim) = open_claimed(&root, "sim0", Some(&state), true).unwrap();
        assert!(claim.as_ref().unwrap().left_behind().is_some());
        assert!(store.read(Knob::Interval).is_err(), "\"10\" is no interval");
        let opts = TunerOptions {
            dry_run: false,
            min_write_gap: std::time::Duration::ZERO,
        };
        let (audit, _records) = AuditLog::in_memory();
        let mut session = Session::start_claimed(
            vec![("sim0".to_string(), store, claim)],
            opts,
            crate::law::Config::default(),
            audit,
        )
        .unwrap();
        assert_eq!(session.tuners()[0].original(), originals);
        assert_eq!(fs::read_to_string(&threshold).unwrap(), "25\n");
        assert_eq!(fs::read_to_string(&interval).unwrap(), "1000\n");

        // Without originals to put back, a garbled knob is still refused, naming the file.
        session.restore_all().unwrap();
        drop(session);
        fs::write(&threshold, "").unwrap();
        let err = format!(
            "{:#}",
            open_claimed(&root, "sim0", Some(&state), true).unwrap_err()
        );
        assert!(
            err.contains("contains \"\", which is not a whole number"),
            "{err}"
        );
    }

    #[test]
    fn keys_are_one_file_name_per_directory() {
        assert_eq!(key_for(Path::new("/sys/fs/f2fs/vdb")), "sys-fs-f2fs-vdb");
        assert_ne!(key_for(Path::new("/a-b/c")), key_for(Path::new("/a/b/c")));
        let long = PathBuf::from(format!("/{}", "x/".repeat(200)));
        assert!(key_for(&long).len() < 255);
    }
}
