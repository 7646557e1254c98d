//! A seeded fsstress-like workload (issue 19): the operation mixes of seed 002, whose figures
//! (node writes, checkpoints, nodes per checkpoint, NAT block writes) F2FS engineers judge
//! metadata caching by. fsstress itself is not packaged by Debian 12, so the VM test runs this.
//!
//! As in fsstress, each of `procs` workers works in a directory of its own (`p<i>`) with a
//! random stream of its own (the seed and its index), so every worker's operations and their
//! outcomes are the same for a seed, however the workers interleave. Operations that fail (an
//! rmdir of a non-empty directory, a rename into a removed one) count as failed, as fsstress
//! counts them, and the run goes on.
//!
//! The default mix is fsstress's own frequencies without its XFS-only operations (allocsp,
//! freesp, resvsp, unresvsp, bulkstat, attr_*); the `metadata` mix is the seed's second run:
//! `-w -f chown=0 -f creat=4 -f dwrite=0 -f fdatasync=4 -f fsync=4 -f link=0 -f mkdir=4
//! -f mknod=4 -f rename=5 -f rmdir=5 -f symlink=0 -f truncate=4 -f unlink=5 -f write=0`.
use std::{
    ffi::OsStr,
    fs::{self, File},
    io::{self, Read as _, Seek as _, SeekFrom, Write as _},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use rustix::fs::{self as rfs, Mode, OFlags};
use serde::Serialize;
use sim::rng::Rng;

mod mix;
pub(crate) use mix::{Mix, Op, OP_COUNT};

/// One run's settings.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub dir: PathBuf,
    pub procs: u32,
    pub ops: u32,
    pub seed: u64,
    pub mix: Mix,
}

/// Operations done and failed, per op.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Tally {
    pub done: [u64; OP_COUNT],
    pub failed: [u64; OP_COUNT],
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for i in 0..OP_COUNT {
            self.done[i] += other.done[i];
            self.failed[i] += other.failed[i];
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.done.iter().sum()
    }

    pub(crate) fn failures(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// `creat=12/1 ...`: done/failed per op that ran.
    pub(crate) fn render(&self) -> String {
        let parts: Vec<String> = Op::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| self.done[*i] > 0)
            .map(|(i, op)| format!("{}={}/{}", op.name(), self.done[i], self.failed[i]))
            .collect();
        parts.join(" ")
    }
}

/// Run the workload: `procs` threads of `ops` operations each, under `dir`.
///
/// Each worker's directory is made here and must not exist yet: an existing one, or a symlink
/// at its name, could hold symlinks at the names the seeded workload will use, and nodescope
/// runs as root. All are made before any worker starts, so a refusal leaves nothing done.
pub(crate) fn run(config: &Config) -> Result<Tally> {
    fs::create_dir_all(&config.dir)
        .with_context(|| format!("creating {}", config.dir.display()))?;
    let top = rfs::openat(rfs::CWD, &config.dir, DIR_FLAGS, Mode::empty())
        .with_context(|| format!("opening {}", config.dir.display()))?;
    let roots = (0..config.procs)
        .map(|index| make_worker_dir(&top, &config.dir, index))
        .collect::<Result<Vec<OwnedFd>>>()?;
    let results: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let workers: Vec<_> = roots
            .into_iter()
            .zip(0..)
            .map(|(root, index)| scope.spawn(move || Worker::new(root, config, index).run(config)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect()
    });
    let mut tally = Tally::default();
    for result in results {
        tally.add(&result?);
    }
    Ok(tally)
}

/// How every directory is opened: never through a symlink.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// `dir/p<index>`, made by us now and opened without following a symlink.
fn make_worker_dir(top: &OwnedFd, dir: &Path, index: u32) -> Result<OwnedFd> {
    let name = format!("p{index:x}");
    let path = dir.join(&name);
    match rfs::mkdirat(top, &name, Mode::from_raw_mode(0o755)) {
        Err(rustix::io::Errno::EXIST) => anyhow::bail!(
            "refusing {}: it exists (fsstress works only in worker directories it makes; remove \
             it or name another directory)",
            path.display()
        ),
        other => other.with_context(|| format!("creating {}", path.display()))?,
    }
    let root = rfs::openat(top, &name, DIR_FLAGS, Mode::empty())
        .with_context(|| format!("opening {}", path.display()))?;
    // Someone who may write `dir` could have put a directory of their own in its place between
    // the mkdir and the open; ours belongs to us.
    let owner = rfs::fstat(&root)
        .with_context(|| format!("examining {}", path.display()))?
        .st_uid;
    anyhow::ensure!(
        owner == rustix::process::geteuid().as_raw(),
        "refusing {}: it was replaced while being made (it belongs to uid {owner})",
        path.display()
    );
    Ok(root)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Node,
}

/// One worker's view of its directory: what it created and has not removed.
///
/// Every operation works relative to the worker's directory descriptor, opens each directory
/// on the way with O_NOFOLLOW, creates with O_EXCL and never follows a symlink at the last
/// name either: a file chowned to another uid by the workload lets that user plant names in
/// it, and nothing the workload does may reach outside its directory.
struct Worker {
    root: OwnedFd,
    rng: Rng,
    /// Paths relative to `root`, with their kind; the root itself is not listed.
    entries: Vec<(PathBuf, Kind)>,
    next_name: u64,
    tally: Tally,
}

/// fsstress's I/O sizes: up to 32 pages per read or write, offsets up to a MiB past the end.
const MAX_IO: u64 = 32 * 4096;
const PAST_END: u64 = 1 << 20;
const DIRECT_ALIGN: u64 = 4096;

impl Worker {
    fn new(root: OwnedFd, config: &Config, index: u32) -> Worker {
        Worker {
            root,
            rng: Rng::new(config.seed).fork(u64::from(index) + 1),
            entries: Vec::new(),
            next_name: 0,
            tally: Tally::default(),
        }
    }

    fn run(mut self, config: &Config) -> Result<Tally> {
        let total = config.mix.total();
        anyhow::ensure!(total > 0, "the mix has no operations");
        for _ in 0..config.ops {
            let op = config.mix.pick(self.rng.range(0, total));
            let ok = self.apply(op);
            let i = op as usize;
            self.tally.done[i] += 1;
            if !ok {
                self.tally.failed[i] += 1;
            }
        }
        Ok(self.tally)
    }

    fn apply(&mut self, op: Op) -> bool {
        match op {
            Op::Chown => self.chown(),
            Op::Creat => self.create(Kind::File),
            Op::Mkdir => self.create(Kind::Dir),
            Op::Mknod => self.create(Kind::Node),
            Op::Symlink => self.create(Kind::Symlink),
            Op::Dread => self.read(true),
            Op::Read => self.read(false),
            Op::Dwrite => self.write(true),
            Op::Write => self.write(false),
            Op::Fdatasync => self.sync_file(true),
            Op::Fsync => self.sync_file(false),
            Op::Getdents => self.getdents(),
            Op::Link => self.link(),
            Op::Readlink => self.readlink(),
            Op::Rename => self.rename(),
            Op::Rmdir => self.remove(Kind::Dir),
            Op::Unlink => self.remove(Kind::File),
            Op::Stat => self.stat(),
            Op::Sync => {
                // SAFETY: sync(2) takes no arguments and cannot fail.
                unsafe { libc::sync() };
                true
            }
            Op::Truncate => self.truncate(),
        }
    }

    /// A random entry of `kinds` (index into `entries`).
    fn pick(&mut self, kinds: &[Kind]) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.entries.len())
            .filter(|i| kinds.contains(&self.entries[*i].1))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        Some(candidates[self.rng.range(0, candidates.len() as u64) as usize])
    }

    /// A directory to put something in: the worker's root or one of its directories.
    fn pick_dir(&mut self) -> PathBuf {
        let dirs = self.entries.iter().filter(|e| e.1 == Kind::Dir).count() as u64;
        if self.rng.range(0, dirs + 1) == 0 {
            return PathBuf::new();
        }
        self.pick(&[Kind::Dir])
            .map(|i| self.entries[i].0.clone())
            .unwrap_or_default()
    }

    fn new_name(&mut self, kind: Kind) -> PathBuf {
        let prefix = match kind {
            Kind::File => "f",
            Kind::Dir => "d",
            Kind::Symlink => "l",
            Kind::Node => "c",
        };
        self.next_name += 1;
        self.pick_dir()
            .join(format!("{prefix}{:x}", self.next_name))
    }

    /// The directory at `relative` (the root for an empty path), opened component by
    /// component without following a symlink.
    fn dir(&self, relative: &Path) -> io::Result<OwnedFd> {
        let mut dir = self.root.try_clone()?;
        for component in relative.components() {
            dir = rfs::openat(&dir, component.as_os_str(), DIR_FLAGS, Mode::empty())?;
        }
        Ok(dir)
    }

    /// The directory holding `relative`, and its last name.
    fn parent<'a>(&self, relative: &'a Path) -> io::Result<(OwnedFd, &'a OsStr)> {
        let name = relative
            .file_name()
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let parent = relative.parent().unwrap_or(Path::new(""));
        Ok((self.dir(parent)?, name))
    }

    /// A regular file the workload made, opened with `flags`, never through a symlink nor
    /// blocking on a FIFO put at its name.
    fn open(&self, relative: &Path, flags: OFlags) -> io::Result<File> {
        let (dir, name) = self.parent(relative)?;
        let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rfs::openat(&dir, name, flags, Mode::empty())?;
        if !rfs::FileType::from_raw_mode(rfs::fstat(&fd)?.st_mode).is_file() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        Ok(File::from(fd))
    }

    fn make(&mut self, relative: &Path, kind: Kind) -> io::Result<()> {
        let (dir, name) = self.parent(relative)?;
        match kind {
            Kind::File => {
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                rfs::openat(&dir, name, flags, Mode::from_raw_mode(0o644))?;
            }
            Kind::Dir => rfs::mkdirat(&dir, name, Mode::from_raw_mode(0o755))?,
            Kind::Symlink => {
                let target = format!("l{:x}", self.rng.range(0, 1 << 20));
                rfs::symlinkat(target, &dir, name)?;
            }
            // A character device node 0:0, as fsstress's mknod makes (root only).
            Kind::Node => rfs::mknodat(
                &dir,
                name,
                rfs::FileType::CharacterDevice,
                Mode::from_raw_mode(0o444),
                0,
            )?,
        }
        Ok(())
    }

    fn create(&mut self, kind: Kind) -> bool {
        let relative = self.new_name(kind);
        let made = self.make(&relative, kind).is_ok();
        if made {
            self.entries.push((relative, kind));
        }
        made
    }

    fn file(&mut self) -> Option<PathBuf> {
        let i = self.pick(&[Kind::File])?;
        Some(self.entries[i].0.clone())
    }

    fn size(&self, relative: &Path) -> u64 {
        self.open(relative, OFlags::RDONLY)
            .and_then(|f| f.metadata())
            .map_or(0, |m| m.len())
    }

    fn write(&mut self, direct: bool) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let size = self.size(&path);
        let mut offset = self.rng.range(0, size + PAST_END);
        let mut len = self.rng.range(1, MAX_IO + 1);
        if direct {
            offset -= offset % DIRECT_ALIGN;
            len = (len / DIRECT_ALIGN).max(1) * DIRECT_ALIGN;
        }
        let mut data = AlignedBuffer::new(len as usize);
        self.rng.fill(data.as_mut_slice());
        let flags = if direct {
            OFlags::WRONLY | OFlags::DIRECT
        } else {
            OFlags::WRONLY
        };
        self.open(&path, flags)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset))?;
                f.write_all(data.as_mut_slice())
            })
            .is_ok()
    }

    fn read(&mut self, direct: bool) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let size = self.size(&path);
        if size == 0 {
            return false;
        }
        let mut offset = self.rng.range(0, size);
        let mut len = self.rng.range(1, MAX_IO + 1);
        if direct {
            offset -= offset % DIRECT_ALIGN;
            len = (len / DIRECT_ALIGN).max(1) * DIRECT_ALIGN;
        }
        let flags = if direct {
            OFlags::RDONLY | OFlags::DIRECT
        } else {
            OFlags::RDONLY
        };
        let mut buffer = AlignedBuffer::new(len as usize);
        self.open(&path, flags)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset))?;
                f.read(buffer.as_mut_slice())
            })
            .is_ok()
    }

    fn sync_file(&mut self, data_only: bool) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let Ok(file) = self.open(&path, OFlags::WRONLY) else {
            return false;
        };
        if data_only {
            file.sync_data().is_ok()
        } else {
            file.sync_all().is_ok()
        }
    }

    fn truncate(&mut self) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let size = self.size(&path);
        let length = self.rng.range(0, size + PAST_END);
        self.open(&path, OFlags::WRONLY)
            .and_then(|f| f.set_len(length))
            .is_ok()
    }

    fn chown(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Node]) else {
            return false;
        };
        let relative = self.entries[i].0.clone();
        let (uid, gid) = (
            self.rng.range(0, 1 << 16) as u32,
            self.rng.range(0, 1 << 16) as u32,
        );
        self.parent(&relative)
            .and_then(|(dir, name)| {
                let owner = rfs::Uid::from_raw(uid);
                let group = rfs::Gid::from_raw(gid);
                let flags = rfs::AtFlags::SYMLINK_NOFOLLOW;
                Ok(rfs::chownat(&dir, name, Some(owner), Some(group), flags)?)
            })
            .is_ok()
    }

    fn getdents(&mut self) -> bool {
        let relative = self.pick_dir();
        self.dir(&relative)
            .and_then(|dir| Ok(rfs::Dir::read_from(&dir)?.count()))
            .is_ok()
    }

    fn stat(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Symlink, Kind::Node]) else {
            return false;
        };
        let relative = self.entries[i].0.clone();
        self.parent(&relative)
            .and_then(|(dir, name)| Ok(rfs::statat(&dir, name, rfs::AtFlags::SYMLINK_NOFOLLOW)?))
            .is_ok()
    }

    fn readlink(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::Symlink]) else {
            return false;
        };
        let relative = self.entries[i].0.clone();
        self.parent(&relative)
            .and_then(|(dir, name)| Ok(rfs::readlinkat(&dir, name, Vec::new())?))
            .is_ok()
    }

    fn link(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File]) else {
            return false;
        };
        let source = self.entries[i].0.clone();
        let relative = self.new_name(Kind::File);
        // linkat without AT_SYMLINK_FOLLOW links the name itself, a symlink included.
        let linked = self
            .parent(&source)
            .and_then(|(from_dir, from)| {
                let (to_dir, to) = self.parent(&relative)?;
                Ok(rfs::linkat(
                    &from_dir,
                    from,
                    &to_dir,
                    to,
                    rfs::AtFlags::empty(),
                )?)
            })
            .is_ok();
        if linked {
            self.entries.push((relative, Kind::File));
        }
        linked
    }

    fn rename_at(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_dir, from_name) = self.parent(from)?;
        let (to_dir, to_name) = self.parent(to)?;
        Ok(rfs::renameat(&from_dir, from_name, &to_dir, to_name)?)
    }

    fn rename(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Symlink, Kind::Node]) else {
            return false;
        };
        let (from, kind) = self.entries[i].clone();
        let to = self.new_name(kind);
        // A directory cannot move into itself (the kernel says EINVAL, as fsstress sees).
        if !(kind == Kind::Dir && to.starts_with(&from)) && self.rename_at(&from, &to).is_ok() {
            for entry in &mut self.entries {
                if let Ok(rest) = entry.0.strip_prefix(&from) {
                    entry.0 = if rest.as_os_str().is_empty() {
                        to.clone()
                    } else {
                        to.join(rest)
                    };
                }
            }
            return true;
        }
        false
    }

    /// rmdir a directory (fails when not empty), or unlink anything else.
    fn remove(&mut self, kind: Kind) -> bool {
        let kinds: &[Kind] = if kind == Kind::Dir {
            &[Kind::Dir]
        } else {
            &[Kind::File, Kind::Symlink, Kind::Node]
        };
        let Some(i) = self.pick(kinds) else {
            return false;
        };
        let relative = self.entries[i].0.clone();
        let flags = if kind == Kind::Dir {
            rfs::AtFlags::REMOVEDIR
        } else {
            rfs::AtFlags::empty()
        };
        let removed = self
            .parent(&relative)
            .and_then(|(dir, name)| Ok(rfs::unlinkat(&dir, name, flags)?))
            .is_ok();
        if removed {
            self.entries.swap_remove(i);
        }
        removed
    }
}

/// One page, aligned as O_DIRECT wants its memory.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; DIRECT_ALIGN as usize]);

/// A page-aligned buffer.
struct AlignedBuffer {
    pages: Vec<Page>,
    len: usize,
}

impl AlignedBuffer {
    fn new(len: usize) -> AlignedBuffer {
        let pages = len.div_ceil(DIRECT_ALIGN as usize);
        AlignedBuffer {
            pages: vec![Page([0; DIRECT_ALIGN as usize]); pages],
            len,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        let bytes = self.pages.len() * DIRECT_ALIGN as usize;
        // SAFETY: Page is repr(C) around a byte array with no padding (size 4096 = its
        // alignment), so the vector's memory is `bytes` initialised, contiguous bytes, borrowed
        // mutably for no longer than `self`.
        let all =
            unsafe { std::slice::from_raw_parts_mut(self.pages.as_mut_ptr().cast::<u8>(), bytes) };
        &mut all[..self.len]
    }
}

#[cfg(test)]
mod planted;
#[cfg(test)]
mod tests;
