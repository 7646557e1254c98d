//! Writing files in a directory someone else may have prepared (userspace only): the
//! simulator's knob directory, `tune --sysfs-root`. A symlink planted there must never make us
//! write, create or truncate a file elsewhere, so every open for writing carries O_NOFOLLOW and
//! new files are created exclusively.
//!
//! And opening the files we read or write without blocking: open(2) of a FIFO waits for the
//! other end, past --duration and past SIGTERM, so every open here carries O_NONBLOCK (which
//! has no effect on regular files and block devices) and anything but a regular file is then
//! refused, naming what it is. sysfs and procfs files are regular files.
use std::{
    fs::{self, File, FileType, OpenOptions},
    io::{self, Read as _, Write as _},
    os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _},
    path::Path,
    vec::Vec,
};

/// Knob and stats files are a line or a few; reading stops here (a device node such as
/// /dev/zero would otherwise be read until memory runs out).
pub const READ_LIMIT: u64 = 64 * 1024;

/// Whether the last component of a path may be a symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlinks {
    /// A path the user named (`--psi`, `--kallsyms`, `--image`): theirs to point anywhere.
    Follow,
    /// A file in a directory someone else may have prepared (knobs, stats, state files).
    Refuse,
}

/// "a FIFO", "a directory", ...: what a file that is not a regular one is, for messages.
pub fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symlink"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "of an unknown type"
    }
}

/// The error for a file that is not a regular file.
pub fn not_regular(file_type: FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        std::format!("not a regular file ({})", kind_of(file_type)),
    )
}

/// Fails, naming its type, unless `file` is a regular file.
pub fn ensure_regular(file: &File) -> io::Result<()> {
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() {
        Ok(())
    } else {
        Err(not_regular(file_type))
    }
}

/// Open `path` with `options` plus O_NONBLOCK and O_CLOEXEC (and O_NOFOLLOW when symlinks
/// are refused), without blocking whatever it is; the caller checks the type.
pub fn open_nonblocking(
    path: &Path,
    options: &mut OpenOptions,
    symlinks: Symlinks,
) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if symlinks == Symlinks::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    options.custom_flags(flags).open(path).map_err(|err| {
        // A FIFO without a reader opened for writing says ENXIO, as does a device node
        // without its driver: name what is there instead.
        if err.raw_os_error() != Some(libc::ENXIO) {
            return err;
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => not_regular(meta.file_type()),
            _ => err,
        }
    })
}

/// Open a regular file we only read, refusing FIFOs, devices, directories and sockets (a
/// clear error, never a wait).
pub fn open_regular(path: &Path, symlinks: Symlinks) -> io::Result<File> {
    let file = open_nonblocking(path, OpenOptions::new().read(true), symlinks)?;
    ensure_regular(&file)?;
    Ok(file)
}

/// A regular file's whole contents, refused when longer than `limit` bytes (so that a wrong
/// path never reads until memory runs out).
pub fn read_regular(path: &Path, symlinks: Symlinks, limit: u64) -> io::Result<Vec<u8>> {
    let mut content = Vec::new();
    open_regular(path, symlinks)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut content)?;
    if content.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            std::format!("longer than {limit} bytes: not what was expected here"),
        ));
    }
    Ok(content)
}

/// Open an existing regular file for writing, truncating it; fails (ELOOP) on a symlink,
/// never creates the file and never blocks on a FIFO.
pub fn open_existing_for_writing(path: &Path, truncate: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).truncate(truncate);
    let file = open_nonblocking(path, &mut options, Symlinks::Refuse)?;
    ensure_regular(&file)?;
    Ok(file)
}

/// Write `bytes` to an existing file with one write(2); never through a symlink.
pub fn write_existing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    open_existing_for_writing(path, true)?.write_all(bytes)
}

/// Create `path` with `bytes`; fails (EEXIST) when anything, a dangling symlink included, is
/// already there.
pub fn create_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path)?
        .write_all(bytes)
}

/// Replace `dir/name` atomically with `bytes` through the temporary `dir/.name.new`, created
/// exclusively (a stale one, symlink or not, is unlinked first). rename(2) replaces a symlink
/// at `name` itself, never its target.
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let temporary = dir.join(std::format!(".{name}.new"));
    if let Err(err) = create_new(&temporary, bytes) {
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(err);
        }
        fs::remove_file(&temporary)?;
        create_new(&temporary, bytes)?;
    }
    fs::rename(&temporary, dir.join(name))
}

/// Read at most [`READ_LIMIT`] bytes of a regular file that is not a symlink.
pub fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    let file = open_regular(path, Symlinks::Refuse)?;
    let mut content = Vec::new();
    file.take(READ_LIMIT).read_to_end(&mut content)?;
    Ok(content)
}

/// Create `dir` with mode 0700 unless it exists, then say what is wrong with it, if anything,
/// for a directory only we may write in: a predictable name (in /tmp, /run) may have been
/// prepared by someone else, with symlinks inside that would make us write their targets.
pub fn private_dir_problem(dir: &Path) -> io::Result<Option<std::string::String>> {
    // Walked from `/` without following a symlink at any component, none of the directories
    // above writable by others (unless sticky), created 0700 where missing: a link one level
    // up would otherwise lead us into a directory someone else chose.
    let fd = match open_dir_for_writing(dir, Some(0o700)) {
        Ok(fd) => fd,
        Err(err) if is_refusal(&err) => {
            return Ok(Some(std::format!("is not safe to write in: {err}")))
        }
        Err(err) => return Err(err),
    };
    // The checks on the descriptor walked to: what was checked is that directory.
    let stat = rustix::fs::fstat(&fd)?;
    let euid = rustix::process::geteuid().as_raw();
    let mode = stat.st_mode & 0o7777;
    Ok(if stat.st_uid != euid {
        Some(std::format!(
            "belongs to uid {}, not to us (uid {euid})",
            stat.st_uid
        ))
    } else if mode & 0o077 != 0 {
        Some(std::format!(
            "has mode {mode:o}: others may have put files in it"
        ))
    } else {
        None
    })
}

/// `path` exists as a directory and is not a symlink to one.
pub fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_dir())
}

/// How [`open_for_writing`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Create {
    /// Create it; fails (EEXIST) on anything at the name, a dangling symlink included.
    New,
    /// Create it or truncate the regular file there (`--force`).
    Truncate,
    /// Create it or append to the regular file there (an audit log).
    Append,
}

/// Why a path is not one nodescope writes under (the message of [`refused`]'s errors).
#[derive(Debug)]
struct Refusal(std::string::String);

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// The error for a path nodescope will not write under.
fn refused(why: std::string::String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Refusal(why))
}

/// Whether `err` is a refusal of the path by [`open_dir_for_writing`] (a symlink on it, a
/// directory others may write in), not a failure of the system.
pub fn is_refusal(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<Refusal>())
}

/// Why `stat`'s directory (`shown`) may not hold what root writes, or whether names in it are
/// anyone's to create (sticky and shared, like /tmp: then only an entry that is ours or
/// root's may be walked into, since the sticky bit keeps others from renaming or deleting it,
/// not from having made it first). A directory others may write in without the sticky bit
/// lets them replace any entry, a real directory by one of theirs included (a symlink is
/// refused anyway), between our look and our write: refused.
fn shared_dir(stat: &rustix::fs::Stat, shown: &Path) -> io::Result<bool> {
    let mode = stat.st_mode & 0o7777;
    if mode & 0o022 == 0 || trusted_group_only(stat, mode, trusted_ids()) {
        return Ok(false);
    }
    let root_or_us = stat.st_uid == 0 || stat.st_uid == rustix::process::geteuid().as_raw();
    if mode & 0o1000 != 0 && root_or_us {
        return Ok(true);
    }
    Err(refused(std::format!(
        "{} has mode {mode:o}: others may replace what is in it (a directory written in as \
         root must be writable only by its owner, or sticky like /tmp)",
        shown.display()
    )))
}

/// Android's system user and group (AID_SYSTEM).
const ANDROID_SYSTEM_ID: u32 = 1000;

/// The ids trusted like root's for a group-writable directory: root's, and on Android the
/// system user's and group's. Elsewhere 1000 is usually a person's user and group, whose
/// other members must not be trusted.
fn trusted_ids() -> &'static [u32] {
    static ANDROID: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let android = *ANDROID.get_or_init(|| Path::new("/system/build.prop").is_file());
    if android {
        &[0, ANDROID_SYSTEM_ID]
    } else {
        &[0]
    }
}

/// A directory only its owner and its group may write in, both among `trusted` (Android's
/// `/data` is `system:system 0771`): system services can already do as root does to the
/// knobs, so their group writing there opens nothing. The shell's (`/data/local/tmp`, group
/// 2000) and the apps' groups are not trusted: `adb shell` could plant links there.
fn trusted_group_only(stat: &rustix::fs::Stat, mode: u32, trusted: &[u32]) -> bool {
    mode & 0o002 == 0 && trusted.contains(&stat.st_uid) && trusted.contains(&stat.st_gid)
}

/// Open the directory `dir` to write in (as root): every component of the path walked from
/// `/` (from the current directory for a relative path) with openat(2) and O_NOFOLLOW |
/// O_DIRECTORY, so that no symlink anywhere in it is followed (`shared/ns/rec` with `shared/ns`
/// a planted link would lead elsewhere: not only the last component counts), and no directory
/// on the way, `dir` included, may be written by others unless it is sticky and root's or
/// ours (see [`shared_dir`]). What was checked is what is held: the returned descriptor (read
/// only, O_DIRECTORY) is the directory, whatever its path names later; names in it are
/// created, listed and removed relative to it. `create`: the mode for missing components,
/// created on the way (none: a missing one is an error).
///
/// openat2(2)'s RESOLVE_NO_SYMLINKS would refuse the links in one call but not look at the
/// directories' modes; the walk does both, on every kernel.
pub fn open_dir_for_writing(dir: &Path, create: Option<u32>) -> io::Result<std::os::fd::OwnedFd> {
    use std::{ffi::OsStr, path::Component, path::PathBuf};

    use rustix::{
        fs::{self as rfs, Mode, OFlags},
        io::Errno,
    };
    // O_PATH: walking needs search permission only, not read.
    let walk = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let start = if dir.is_absolute() { "/" } else { "." };
    let mut current = rfs::open(start, walk, Mode::empty())?;
    let mut stat = rfs::fstat(&current)?;
    let mut shown = PathBuf::from(start);
    for component in dir.components() {
        let name: &OsStr = match component {
            Component::RootDir | Component::CurDir => continue,
            // A real directory's parent, walked like any other (never a link).
            Component::ParentDir => OsStr::new(".."),
            Component::Normal(name) => name,
            Component::Prefix(_) => return Err(refused("a path prefix on Unix?".into())),
        };
        let shared = shared_dir(&stat, &shown)?;
        shown.push(name);
        let opened = match rfs::openat(&current, name, walk, Mode::empty()) {
            Err(Errno::NOENT) if create.is_some() => {
                let mode = Mode::from_raw_mode(create.unwrap_or(0o700));
                match rfs::mkdirat(&current, name, mode) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                rfs::openat(&current, name, walk, Mode::empty())
            }
            other => other,
        };
        let next = opened.map_err(|err| {
            // Name what is there instead of a bare ELOOP or ENOTDIR.
            match rfs::statat(&current, name, rfs::AtFlags::SYMLINK_NOFOLLOW) {
                Ok(there) if rfs::FileType::from_raw_mode(there.st_mode).is_symlink() => {
                    refused(std::format!(
                        "{} is a symlink: refusing to follow it (nodescope writes there as \
                         root; a planted link would lead it elsewhere)",
                        shown.display()
                    ))
                }
                Ok(there) if !rfs::FileType::from_raw_mode(there.st_mode).is_dir() => {
                    refused(std::format!("{} is not a directory", shown.display()))
                }
                _ => io::Error::new(
                    io::Error::from(err).kind(),
                    std::format!("{}: {err}", shown.display()),
                ),
            }
        })?;
        let next_stat = rfs::fstat(&next)?;
        let euid = rustix::process::geteuid().as_raw();
        if shared && next_stat.st_uid != 0 && next_stat.st_uid != euid {
            return Err(refused(std::format!(
                "{} belongs to uid {}, in a directory where anyone may create names: not \
                 ours to write in",
                shown.display(),
                next_stat.st_uid
            )));
        }
        current = next;
        stat = next_stat;
    }
    // The directory itself holds what we write: the same rule.
    shared_dir(&stat, &shown)?;
    Ok(rfs::openat(
        &current,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// `path`'s directory opened by [`open_dir_for_writing`] (without creating anything) and the
/// file's name in it.
pub fn open_parent(path: &Path) -> io::Result<(std::os::fd::OwnedFd, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    Ok((open_dir_for_writing(parent, None)?, name))
}

/// Open the file `path` for writing (as root) under the rule of [`open_dir_for_writing`] for
/// its directory, and never through a symlink at its own name (O_NOFOLLOW), never blocking on
/// a FIFO (O_NONBLOCK); anything but a regular file is refused.
pub fn open_for_writing(path: &Path, how: Create, mode: u32) -> io::Result<File> {
    open_for_writing_accepting(path, how, mode, fs::Metadata::is_file)
}

/// [`open_for_writing`], taking what `accept` accepts of the opened file instead of regular
/// files only (the audit log also takes the null device).
pub fn open_for_writing_accepting(
    path: &Path,
    how: Create,
    mode: u32,
    accept: impl Fn(&fs::Metadata) -> bool,
) -> io::Result<File> {
    use rustix::fs::{self as rfs, Mode, OFlags};
    let (dir, name) = open_parent(path)?;
    let mut flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    flags |= match how {
        Create::New => OFlags::CREATE | OFlags::EXCL,
        Create::Truncate => OFlags::CREATE | OFlags::TRUNC,
        Create::Append => OFlags::CREATE | OFlags::APPEND,
    };
    let opened = rfs::openat(&dir, name, flags, Mode::from_raw_mode(mode));
    let file = File::from(opened.map_err(|err| {
        // A FIFO without a reader opened for writing says ENXIO, as does a device node
        // without its driver: name what is there instead.
        if err != rustix::io::Errno::NXIO {
            return io::Error::from(err);
        }
        // (By path: only the message depends on it.)
        match fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => not_regular(meta.file_type()),
            _ => io::Error::from(err),
        }
    })?);
    let meta = file.metadata()?;
    if !accept(&meta) {
        return Err(not_regular(meta.file_type()));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(std::format!(
            "tracer-common-files-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn no_write_goes_through_a_symlink() {
        let dir = scratch("symlinks");
        let outside = dir.join("outside");
        fs::write(&outside, "precious").unwrap();
        symlink(&outside, dir.join("knob")).unwrap();
        symlink(dir.join("dangling-target"), dir.join("dangling")).unwrap();
        symlink(&outside, dir.join(".stats.new")).unwrap();

        assert!(write_existing(&dir.join("knob"), b"1\n").is_err());
        assert!(create_new(&dir.join("dangling"), b"1\n").is_err());
        assert!(read_no_follow(&dir.join("knob")).is_err());
        replace(&dir, "stats", b"fresh\n").unwrap();

        assert_eq!(fs::read_to_string(&outside).unwrap(), "precious");
        assert!(!dir.join("dangling-target").exists());
        assert_eq!(fs::read_to_string(dir.join("stats")).unwrap(), "fresh\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    use std::string::ToString as _;

    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt as _;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    }

    /// Each open would block forever on a FIFO nobody writes: the test would hang, not pass.
    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = scratch("fifos");
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let refusal = |result: io::Result<std::string::String>| result.unwrap_err().to_string();
        let fifo_error = "not a regular file (a FIFO)";
        let text = |r: io::Result<Vec<u8>>| r.map(|b| std::string::String::from_utf8(b).unwrap());
        assert_eq!(refusal(text(read_no_follow(&fifo))), fifo_error);
        assert_eq!(
            refusal(text(read_regular(&fifo, Symlinks::Follow, 10))),
            fifo_error
        );
        assert_eq!(
            refusal(write_existing(&fifo, b"1\n").map(|()| std::string::String::new())),
            fifo_error
        );
        assert_eq!(
            refusal(text(read_regular(
                Path::new("/dev/zero"),
                Symlinks::Follow,
                10
            ))),
            "not a regular file (a character device)"
        );
        assert_eq!(
            refusal(text(read_regular(&dir, Symlinks::Follow, 10))),
            "not a regular file (a directory)"
        );
        fs::write(dir.join("long"), "12345678901").unwrap();
        assert!(
            refusal(text(read_regular(&dir.join("long"), Symlinks::Follow, 10)))
                .contains("longer than 10 bytes")
        );
        fs::write(dir.join("short"), "1234567890").unwrap();
        assert_eq!(
            read_regular(&dir.join("short"), Symlinks::Follow, 10).unwrap(),
            b"1234567890"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// [`open_dir_for_writing`] and [`open_for_writing`] on real directories with planted links.
#[cfg(test)]
mod walk_tests {
    use std::{
        os::unix::fs::{symlink, PermissionsExt as _},
        path::PathBuf,
        string::ToString as _,
    };

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(std::format!(
            "tracer-common-walk-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    /// `shared/ns` a link to another directory: neither the directory under it nor a file
    /// under it is opened, created or written, at any depth.
    #[test]
    fn a_symlink_above_the_last_component_is_refused() {
        let dir = scratch("parent-link");
        let elsewhere = dir.join("elsewhere");
        fs::create_dir_all(elsewhere.join("rec")).unwrap();
        fs::create_dir(dir.join("shared")).unwrap();
        symlink(&elsewhere, dir.join("shared/ns")).unwrap();

        let rec = dir.join("shared/ns/rec");
        let error = open_dir_for_writing(&rec, Some(0o700)).unwrap_err();
        assert!(error.to_string().contains("is a symlink"), "{error}");
        let deeper = dir.join("shared/ns/new/deeper");
        assert!(open_dir_for_writing(&deeper, Some(0o700)).is_err());
        assert!(
            !elsewhere.join("new").exists(),
            "nothing created through the link"
        );
        let audit = dir.join("shared/ns/audit.jsonl");
        for how in [Create::New, Create::Truncate, Create::Append] {
            let error = open_for_writing(&audit, how, 0o644).unwrap_err();
            assert!(
                error.to_string().contains("is a symlink"),
                "{how:?}: {error}"
            );
        }
        assert!(!elsewhere.join("audit.jsonl").exists());
        // A link as the last component is refused the same way.
        symlink(&elsewhere, dir.join("last")).unwrap();
        assert!(open_dir_for_writing(&dir.join("last"), None).is_err());

        // The real path works, and missing components are created with the mode given.
        let real = dir.join("shared/real/rec");
        open_dir_for_writing(&real, Some(0o700)).unwrap();
        let mode = fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let mut file = open_for_writing(&real.join("out"), Create::New, 0o600).unwrap();
        file.write_all(b"ok").unwrap();
        assert!(open_for_writing(&real.join("out"), Create::New, 0o600).is_err());
        open_for_writing(&real.join("out"), Create::Append, 0o600)
            .unwrap()
            .write_all(b"!")
            .unwrap();
        assert_eq!(fs::read_to_string(real.join("out")).unwrap(), "ok!");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory on the way that others may write in, without the sticky bit, is refused
    /// (they could swap the next component for a directory of theirs); a sticky one is walked
    /// through when the entry under it is ours or root's.
    #[test]
    fn a_directory_others_may_write_is_refused_unless_sticky() {
        let dir = scratch("writable");
        let open = dir.join("open");
        fs::create_dir_all(open.join("rec")).unwrap();
        // Group write from a group that is not root's or Android's system (the shell's, 2000).
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&open, None, Some(2000)).unwrap();
        }
        for mode in [0o777, 0o775] {
            fs::set_permissions(&open, fs::Permissions::from_mode(mode)).unwrap();
            let error = open_dir_for_writing(&open.join("rec"), None).unwrap_err();
            assert!(error.to_string().contains("others may replace"), "{error}");
            assert!(open_for_writing(&open.join("rec/file"), Create::New, 0o600).is_err());
            // The directory written in itself, too.
            assert!(open_for_writing(&open.join("file"), Create::New, 0o600).is_err());
        }
        assert!(!open.join("rec/file").exists() && !open.join("file").exists());

        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        open_dir_for_writing(&open.join("rec"), None).unwrap();
        open_for_writing(&open.join("file"), Create::New, 0o600).unwrap();
        // In a sticky directory, an entry made by someone else is not walked into.
        if rustix::process::geteuid().is_root() {
            let theirs = open.join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65_534), Some(65_534)).unwrap();
            let error = open_dir_for_writing(&theirs, None).unwrap_err();
            assert!(
                error.to_string().contains("belongs to uid 65534"),
                "{error}"
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod trusted_group_tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// Android's /data is `system:system 0771`: a directory only root or system may write in
    /// is trusted there; the same mode with the shell's group (/data/local/tmp) is not, and off
    /// Android 1000 is a person's ids, trusted no more than any other user's.
    #[test]
    fn a_directory_only_root_or_system_may_write_is_trusted() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let dir = std::env::temp_dir().join(std::format!("files-trusted-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let data = dir.join("data");
        fs::create_dir_all(&data).unwrap();
        fs::set_permissions(&data, fs::Permissions::from_mode(0o771)).unwrap();
        let android: &[u32] = &[0, ANDROID_SYSTEM_ID];
        let linux: &[u32] = &[0];
        for (uid, gid, on_android, elsewhere) in [
            (1000, 1000, true, false),
            (0, 1000, true, false),
            (0, 0, true, true),
            (1000, 2000, false, false),
        ] {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
            let stat = rustix::fs::stat(&data).unwrap();
            let mode = stat.st_mode & 0o7777;
            assert_eq!(
                trusted_group_only(&stat, mode, android),
                on_android,
                "{uid}:{gid}"
            );
            assert_eq!(
                trusted_group_only(&stat, mode, linux),
                elsewhere,
                "{uid}:{gid}"
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
