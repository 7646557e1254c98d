//! Every file a subcommand creates (`record -o` and `--perfetto`, `export -o`, `whatif
//! --plot`, `probe --discover -o`, the daemon's rolling recordings): one policy (issue 33,
//! finding 9). An existing name is refused unless `--force`; a symlink is never written
//! through, `--force` or not (as root it could point at any file), at the file's name or at
//! any directory above it, nor is a directory on the way that others may write in (unless
//! sticky, like /tmp: `files::open_dir_for_writing`); anything but a regular file (a FIFO, a
//! device) is refused, and no open blocks.
use std::{
    fs::{self, File},
    io::{ErrorKind, Write as _},
    path::Path,
};

use anyhow::{bail, Context as _, Result};
use tracer_common::files;

/// How one output file is created.
#[derive(Clone, Copy, Debug)]
pub struct OutputFile {
    /// Replace an existing regular file (`--force`).
    pub force: bool,
    /// Permission bits (before the umask).
    pub mode: u32,
}

impl OutputFile {
    /// A file for the user (0644 before the umask).
    pub fn new(force: bool) -> OutputFile {
        OutputFile { force, mode: 0o644 }
    }

    /// A file only its owner may read: per-process data, as the daemon's socket (0600).
    pub(crate) fn private(force: bool) -> OutputFile {
        OutputFile { force, mode: 0o600 }
    }

    /// Refuse early (before a long run) what [`Self::create`] would refuse: the file itself,
    /// and the directories on its path (see [`files::open_dir_for_writing`]).
    pub fn check(self, path: &Path) -> Result<()> {
        files::open_parent(path).with_context(|| format!("creating {}", path.display()))?;
        match fs::symlink_metadata(path) {
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err).with_context(|| format!("examining {}", path.display())),
            Ok(meta) => refusal(path, &meta, self.force),
        }
    }

    /// Create `path` for writing: its directory walked without following any symlink and
    /// held by descriptor, the file created in it (`files::open_for_writing`).
    pub fn create(self, path: &Path) -> Result<File> {
        let how = if self.force {
            self.check(path)?;
            files::Create::Truncate
        } else {
            // O_EXCL: fails on anything at the name, a dangling symlink included.
            files::Create::New
        };
        files::open_for_writing(path, how, self.mode).map_err(|err| {
            match fs::symlink_metadata(path) {
                Ok(meta) if err.kind() == ErrorKind::AlreadyExists || self.force => {
                    refusal(path, &meta, self.force).err()
                }
                _ => None,
            }
            .unwrap_or_else(|| {
                anyhow::Error::new(err).context(format!("creating {}", path.display()))
            })
        })
    }

    /// Create `path` holding `bytes`.
    pub fn write(self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.create(path)?
            .write_all(bytes)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// Why an existing `path` may not be written, if it may not.
fn refusal(path: &Path, meta: &fs::Metadata, force: bool) -> Result<()> {
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        bail!(
            "{} is a symlink: refusing to write through it, --force or not (remove it, or \
             name the file it points to)",
            path.display()
        );
    }
    if !file_type.is_file() {
        bail!(
            "{} is {}: refusing to write there",
            path.display(),
            files::kind_of(file_type)
        );
    }
    if !force {
        bail!(
            "{} exists: refusing to overwrite it (--force replaces it)",
            path.display()
        );
    }
    Ok(())
}

/// Write `text` to stderr, waiting for a stalled reader at most `controller::audit::LINE_WAIT`
/// (and not at all once a line timed out, or after a stop signal), so that a stderr pipe
/// nobody reads never holds a command past its deadline or its SIGTERM (issue 52). What does
/// not fit in time is dropped: these are diagnostics, the output proper goes to stdout.
pub(crate) fn stderr_text(text: &str) {
    use std::{
        io::Write as _,
        sync::{Mutex, OnceLock},
    };
    static STDERR: OnceLock<Mutex<controller::audit::BoundedStderr>> = OnceLock::new();
    let mut stderr = STDERR
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _ = stderr.write(text.as_bytes());
}
