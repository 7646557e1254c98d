//! fsstress's operations and the two mixes of their relative frequencies.
use serde::Serialize;

/// Every operation, in fsstress's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
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

pub(crate) const OP_COUNT: usize = 20;

impl Op {
    pub(crate) const ALL: [Op; OP_COUNT] = [
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

    pub(crate) fn name(self) -> &'static str {
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
pub(crate) enum Mix {
    /// fsstress's default frequencies (its XFS-only operations left out).
    Default,
    /// The seed's creat/fsync/fdatasync/mkdir/mknod/rename/rmdir/truncate/unlink mix.
    Metadata,
}

impl Mix {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mix::Default => "default",
            Mix::Metadata => "metadata",
        }
    }

    pub(crate) fn frequency(self, op: Op) -> u32 {
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
    pub(super) fn pick(self, mut draw: u64) -> Op {
        for op in Op::ALL {
            let f = u64::from(self.frequency(op));
            if draw < f {
                return op;
            }
            draw -= f;
        }
        unreachable!("draw beyond the mix's total")
    }

    pub(super) fn total(self) -> u64 {
        Op::ALL
            .iter()
            .map(|op| u64::from(self.frequency(*op)))
            .sum()
    }
}
