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
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    match fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let meta = fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    Ok(if meta.file_type().is_symlink() {
        Some("is a symlink".into())
    } else if !meta.is_dir() {
        Some("is not a directory".into())
    } else if meta.uid() != euid {
        Some(std::format!(
            "belongs to uid {}, not to us (uid {euid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o077 != 0 {
        Some(std::format!(
            "has mode {:o}: others may have put files in it",
            meta.mode() & 0o7777
        ))
    } else {
        None
    })
}

/// `path` exists as a directory and is not a symlink to one.
pub fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_dir())
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
