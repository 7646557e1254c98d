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
    ffi::CString,
    fs::{self, File, OpenOptions},
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    os::unix::{ffi::OsStrExt as _, fs::OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use serde::Serialize;
use sim::rng::Rng;

/// Every operation, in fsstress's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Chown,
    Creat,
    Dread,
    Dwrite,
    Fdatasync,
    Fsync,
    Getdents,
    Link,
    Mkdir,
    Mknod,
    Read,
    Readlink,
    Rename,
    Rmdir,
    Stat,
    Symlink,
    Sync,
    Truncate,
    Unlink,
    Write,
}

pub const OP_COUNT: usize = 20;

impl Op {
    pub const ALL: [Op; OP_COUNT] = [
        Op::Chown,
        Op::Creat,
        Op::Dread,
        Op::Dwrite,
        Op::Fdatasync,
        Op::Fsync,
        Op::Getdents,
        Op::Link,
        Op::Mkdir,
        Op::Mknod,
        Op::Read,
        Op::Readlink,
        Op::Rename,
        Op::Rmdir,
        Op::Stat,
        Op::Symlink,
        Op::Sync,
        Op::Truncate,
        Op::Unlink,
        Op::Write,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Chown => "chown",
            Op::Creat => "creat",
            Op::Dread => "dread",
            Op::Dwrite => "dwrite",
            Op::Fdatasync => "fdatasync",
            Op::Fsync => "fsync",
            Op::Getdents => "getdents",
            Op::Link => "link",
            Op::Mkdir => "mkdir",
            Op::Mknod => "mknod",
            Op::Read => "read",
            Op::Readlink => "readlink",
            Op::Rename => "rename",
            Op::Rmdir => "rmdir",
            Op::Stat => "stat",
            Op::Symlink => "symlink",
            Op::Sync => "sync",
            Op::Truncate => "truncate",
            Op::Unlink => "unlink",
            Op::Write => "write",
        }
    }
}

/// An operation mix: relative frequencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// fsstress's default frequencies (its XFS-only operations left out).
    Default,
    /// The seed's creat/fsync/fdatasync/mkdir/mknod/rename/rmdir/truncate/unlink mix.
    Metadata,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Default => "default",
            Mix::Metadata => "metadata",
        }
    }

    pub fn frequency(self, op: Op) -> u32 {
        match self {
            Mix::Default => match op {
                Op::Chown => 3,
                Op::Creat | Op::Dread | Op::Dwrite | Op::Write => 4,
                Op::Mkdir | Op::Mknod | Op::Rename | Op::Symlink | Op::Truncate => 2,
                _ => 1,
            },
            Mix::Metadata => match op {
                Op::Creat | Op::Fdatasync | Op::Fsync | Op::Mkdir | Op::Mknod | Op::Truncate => 4,
                Op::Rename | Op::Rmdir | Op::Unlink => 5,
                _ => 0,
            },
        }
    }

    /// The op at `draw` (0 .. the sum of the frequencies).
    fn pick(self, mut draw: u64) -> Op {
        for op in Op::ALL {
            let f = u64::from(self.frequency(op));
            if draw < f {
                return op;
            }
            draw -= f;
        }
        unreachable!("draw beyond the mix's total")
    }

    fn total(self) -> u64 {
        Op::ALL
            .iter()
            .map(|op| u64::from(self.frequency(*op)))
            .sum()
    }
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub procs: u32,
    pub ops: u32,
    pub seed: u64,
    pub mix: Mix,
}

/// Operations done and failed, per op.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
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

    pub fn total(&self) -> u64 {
        self.done.iter().sum()
    }

    pub fn failures(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// `creat=12/1 ...`: done/failed per op that ran.
    pub fn render(&self) -> String {
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
pub fn run(config: &Config) -> Result<Tally> {
    fs::create_dir_all(&config.dir)
        .with_context(|| format!("creating {}", config.dir.display()))?;
    let results: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.procs)
            .map(|index| scope.spawn(move || Worker::new(config, index)?.run(config)))
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Node,
}

/// One worker's view of its directory: what it created and has not removed.
struct Worker {
    root: PathBuf,
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
    fn new(config: &Config, index: u32) -> Result<Worker> {
        let root = config.dir.join(format!("p{index:x}"));
        fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        Ok(Worker {
            root,
            rng: Rng::new(config.seed).fork(u64::from(index) + 1),
            entries: Vec::new(),
            next_name: 0,
            tally: Tally::default(),
        })
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

    fn full(&self, relative: &Path) -> PathBuf {
        self.root.join(relative)
    }

    fn create(&mut self, kind: Kind) -> bool {
        let relative = self.new_name(kind);
        let path = self.full(&relative);
        let made = match kind {
            Kind::File => File::create(&path).is_ok(),
            Kind::Dir => fs::create_dir(&path).is_ok(),
            Kind::Symlink => {
                let target = format!("l{:x}", self.rng.range(0, 1 << 20));
                std::os::unix::fs::symlink(target, &path).is_ok()
            }
            Kind::Node => mknod(&path),
        };
        if made {
            self.entries.push((relative, kind));
        }
        made
    }

    fn file(&mut self) -> Option<PathBuf> {
        let i = self.pick(&[Kind::File])?;
        Some(self.full(&self.entries[i].0.clone()))
    }

    fn write(&mut self, direct: bool) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let size = fs::metadata(&path).map_or(0, |m| m.len());
        let mut offset = self.rng.range(0, size + PAST_END);
        let mut len = self.rng.range(1, MAX_IO + 1);
        if direct {
            offset -= offset % DIRECT_ALIGN;
            len = (len / DIRECT_ALIGN).max(1) * DIRECT_ALIGN;
        }
        let mut data = vec![0u8; len as usize];
        self.rng.fill(&mut data);
        if direct {
            return direct_write(&path, offset, &data);
        }
        OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(offset))?;
                f.write_all(&data)
            })
            .is_ok()
    }

    fn read(&mut self, direct: bool) -> bool {
        let Some(path) = self.file() else {
            return false;
        };
        let size = fs::metadata(&path).map_or(0, |m| m.len());
        if size == 0 {
            return false;
        }
        let mut offset = self.rng.range(0, size);
        let mut len = self.rng.range(1, MAX_IO + 1);
        if direct {
            offset -= offset % DIRECT_ALIGN;
            len = (len / DIRECT_ALIGN).max(1) * DIRECT_ALIGN;
        }
        let mut options = OpenOptions::new();
        options.read(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let mut buffer = AlignedBuffer::new(len as usize);
        options
            .open(&path)
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
        let Ok(file) = OpenOptions::new().write(true).open(&path) else {
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
        let size = fs::metadata(&path).map_or(0, |m| m.len());
        let length = self.rng.range(0, size + PAST_END);
        OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(length))
            .is_ok()
    }

    fn chown(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Node]) else {
            return false;
        };
        let path = self.full(&self.entries[i].0.clone());
        let (uid, gid) = (
            self.rng.range(0, 1 << 16) as u32,
            self.rng.range(0, 1 << 16) as u32,
        );
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).is_ok()
    }

    fn getdents(&mut self) -> bool {
        let dir = self.pick_dir();
        fs::read_dir(self.full(&dir)).map(|d| d.count()).is_ok()
    }

    fn stat(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Symlink, Kind::Node]) else {
            return false;
        };
        fs::symlink_metadata(self.full(&self.entries[i].0.clone())).is_ok()
    }

    fn readlink(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::Symlink]) else {
            return false;
        };
        fs::read_link(self.full(&self.entries[i].0.clone())).is_ok()
    }

    fn link(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File]) else {
            return false;
        };
        let source = self.entries[i].0.clone();
        let relative = self.new_name(Kind::File);
        let linked = fs::hard_link(self.full(&source), self.full(&relative)).is_ok();
        if linked {
            self.entries.push((relative, Kind::File));
        }
        linked
    }

    fn rename(&mut self) -> bool {
        let Some(i) = self.pick(&[Kind::File, Kind::Dir, Kind::Symlink, Kind::Node]) else {
            return false;
        };
        let (from, kind) = self.entries[i].clone();
        let to = self.new_name(kind);
        // A directory cannot move into itself (the kernel says EINVAL, as fsstress sees).
        if !(kind == Kind::Dir && to.starts_with(&from))
            && fs::rename(self.full(&from), self.full(&to)).is_ok()
        {
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
        let removed = if kind == Kind::Dir {
            fs::remove_dir(self.full(&relative)).is_ok()
        } else {
            fs::remove_file(self.full(&relative)).is_ok()
        };
        if removed {
            self.entries.swap_remove(i);
        }
        removed
    }
}

/// A character device node 0:0, as fsstress's mknod makes (root only).
fn mknod(path: &Path) -> bool {
    let Ok(name) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::mknod(name.as_ptr(), libc::S_IFCHR | 0o444, 0) == 0 }
}

fn direct_write(path: &Path, offset: u64, data: &[u8]) -> bool {
    let mut buffer = AlignedBuffer::new(data.len());
    buffer.as_mut_slice().copy_from_slice(data);
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(offset))?;
            f.write_all(buffer.as_mut_slice())
        })
        .is_ok()
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
mod tests {
    use super::*;

    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in fs::read_dir(&d).unwrap().flatten() {
                let meta = fs::symlink_metadata(entry.path()).unwrap();
                let rel = entry
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .display()
                    .to_string();
                let size = if meta.is_file() { meta.len() } else { 0 };
                out.push(format!("{rel} {size}"));
                if meta.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        out.sort();
        out
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nodescope-fsstress-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn direct_io_buffers_are_page_aligned() {
        for len in [1, 4096, 5000, 131072] {
            let mut buffer = AlignedBuffer::new(len);
            let slice = buffer.as_mut_slice();
            assert_eq!(slice.len(), len);
            assert_eq!(slice.as_ptr() as usize % DIRECT_ALIGN as usize, 0);
        }
    }

    #[test]
    fn the_mixes_have_the_seeds_frequencies() {
        assert_eq!(Mix::Metadata.total(), 4 * 6 + 5 * 3);
        assert_eq!(Mix::Metadata.frequency(Op::Write), 0);
        assert_eq!(Mix::Metadata.frequency(Op::Rename), 5);
        assert_eq!(Mix::Default.frequency(Op::Chown), 3);
        assert_eq!(Mix::Default.total(), 3 + 4 * 4 + 2 * 5 + 10);
        let picks: Vec<Op> = (0..Mix::Metadata.total())
            .map(|d| Mix::Metadata.pick(d))
            .collect();
        assert_eq!(picks.iter().filter(|op| **op == Op::Unlink).count(), 5);
        assert!(picks.iter().all(|op| Mix::Metadata.frequency(*op) > 0));
    }

    #[test]
    fn a_seed_gives_the_same_tree_and_tally_twice_and_another_seed_does_not() {
        let run_once = |name: &str, seed: u64| {
            let dir = scratch(name);
            let config = Config {
                dir: dir.clone(),
                procs: 4,
                ops: 150,
                seed,
                mix: Mix::Default,
            };
            let tally = run(&config).unwrap();
            let shape = tree(&dir);
            fs::remove_dir_all(&dir).unwrap();
            (tally, shape)
        };
        let (a, tree_a) = run_once("a", 7);
        let (b, tree_b) = run_once("b", 7);
        let (c, tree_c) = run_once("c", 8);
        assert_eq!(a, b);
        assert_eq!(tree_a, tree_b);
        assert_eq!(a.total(), 4 * 150);
        assert_ne!(tree_a, tree_c);
        assert!(tree_a.len() > 20, "{tree_a:?}");
        let _ = c;
    }

    #[test]
    fn the_metadata_mix_runs_only_its_operations() {
        let dir = scratch("meta");
        let config = Config {
            dir: dir.clone(),
            procs: 2,
            ops: 200,
            seed: 1,
            mix: Mix::Metadata,
        };
        let tally = run(&config).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(tally.total(), 400);
        for op in Op::ALL {
            if Mix::Metadata.frequency(op) == 0 {
                assert_eq!(tally.done[op as usize], 0, "{}", op.name());
            }
        }
        assert!(tally.done[Op::Mkdir as usize] > 0 && tally.done[Op::Rename as usize] > 0);
        assert!(tally.failures() < tally.total());
    }
}
