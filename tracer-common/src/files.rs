//! Writing files in a directory someone else may have prepared (userspace only): the
//! simulator's knob directory, `tune --sysfs-root`. A symlink planted there must never make us
//! write, create or truncate a file elsewhere, so every open for writing carries O_NOFOLLOW and
//! new files are created exclusively.
use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read as _, Write as _},
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
    vec::Vec,
};

/// Knob and stats files are a line or a few; reading stops here (a device node such as
/// /dev/zero would otherwise be read until memory runs out).
pub const READ_LIMIT: u64 = 64 * 1024;

/// Open an existing file for writing, truncating it; fails (ELOOP) on a symlink and never
/// creates the file.
pub fn open_existing_for_writing(path: &Path, truncate: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .truncate(truncate)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
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

/// Read at most [`READ_LIMIT`] bytes of a file that is not a symlink.
pub fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
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
}
