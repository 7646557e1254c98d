//! An F2FS image file opened for reading node blocks.
use std::{
    collections::HashMap,
    fs::File,
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
};

use anyhow::{bail, ensure, Context as _, Result};
use tracer_common::files;

use super::{
    checkpoint::Checkpoint,
    nat::Nat,
    node::{checksum_seed, NodeBlock, NodeKind},
    superblock::{Superblock, FEATURE_INODE_CHKSUM},
    Block, BLOCK_SIZE,
};

pub struct Image {
    path: PathBuf,
    file: File,
    pub superblock: Superblock,
    pub checkpoint: Checkpoint,
    pub nat: Nat,
    chksum_seed: u32,
}

/// What the reader learns about one inode.
#[derive(Clone, Debug)]
pub struct InodeInfo {
    pub nid: u32,
    pub parent: u32,
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

impl Image {
    /// Open and check an image: superblock (primary, else backup), checkpoint, NAT.
    pub fn open(path: &Path) -> Result<Image> {
        let file =
            open_image(path).with_context(|| format!("opening F2FS image {}", path.display()))?;
        let len = byte_len(&file).with_context(|| format!("stat {}", path.display()))?;
        ensure!(
            len >= 2 * BLOCK_SIZE as u64,
            "{} is {len} bytes: too short to hold an F2FS superblock",
            path.display()
        );
        let superblock = read_superblock(&file).with_context(|| format!("{}", path.display()))?;
        let expected = superblock
            .block_count
            .checked_mul(BLOCK_SIZE as u64)
            .with_context(|| {
                format!(
                    "{}: the superblock says {} blocks, more bytes than a file can hold",
                    path.display(),
                    superblock.block_count
                )
            })?;
        ensure!(
            len >= expected,
            "{} is truncated: {len} bytes, but its superblock says {} blocks ({expected} bytes)",
            path.display(),
            superblock.block_count
        );
        let mut reader = BlockReader {
            file: &file,
            blocks: superblock.block_count,
        };
        let checkpoint = Checkpoint::load(&superblock, &mut |addr| reader.read(addr))
            .with_context(|| format!("{}: checkpoint", path.display()))?;
        let nat = Nat::load(&superblock, &checkpoint, &mut |addr| reader.read(addr))
            .with_context(|| format!("{}: NAT", path.display()))?;
        let chksum_seed = checksum_seed(&superblock.uuid);
        Ok(Image {
            path: path.to_owned(),
            file,
            superblock,
            checkpoint,
            nat,
            chksum_seed,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn inode_checksums(&self) -> bool {
        self.superblock.has(FEATURE_INODE_CHKSUM)
    }

    pub fn checksum_seed(&self) -> u32 {
        self.chksum_seed
    }

    pub fn read_block(&self, addr: u32) -> Result<Vec<u8>> {
        BlockReader {
            file: &self.file,
            blocks: self.superblock.block_count,
        }
        .read(addr)
    }

    /// Read node `nid` through the NAT and check its footer and inode checksum.
    pub fn read_node(&self, nid: u32) -> Result<Box<Block>> {
        let entry = self
            .nat
            .get(nid)
            .with_context(|| format!("nid {nid} is beyond the NAT"))?;
        ensure!(
            entry.is_allocated(),
            "nid {nid} has no block on disk (NAT address {:#x})",
            entry.block_addr
        );
        ensure!(
            entry.block_addr >= self.superblock.main_blkaddr,
            "NAT maps nid {nid} to block {}, before the main area ({})",
            entry.block_addr,
            self.superblock.main_blkaddr
        );
        let bytes = self
            .read_block(entry.block_addr)
            .with_context(|| format!("reading node {nid}"))?;
        let block: Box<Block> = bytes.into_boxed_slice().try_into().expect("one block");
        let node = NodeBlock(&block[..]);
        node.check_footer(nid)
            .with_context(|| format!("node {nid} at block {}", entry.block_addr))?;
        node.check_inode_checksum(self.inode_checksums(), self.chksum_seed)
            .with_context(|| format!("node {nid} at block {}", entry.block_addr))?;
        Ok(block)
    }

    /// Every node block on disk, checked, in nid order. The node and meta inodes are not
    /// node blocks (their NAT entries point at the superblock area) and are skipped.
    pub fn nodes(&self) -> Result<Vec<(u32, Box<Block>)>> {
        let special = [self.superblock.node_ino, self.superblock.meta_ino];
        self.nat
            .allocated()
            .filter(|(nid, _)| !special.contains(nid))
            .map(|(nid, _)| Ok((nid, self.read_node(nid)?)))
            .collect()
    }

    /// Full paths ("/files/d-0/f-1") of every inode, from the names and parent inode numbers
    /// F2FS keeps in each inode. The root is "/".
    pub fn paths(inodes: &[InodeInfo], root_ino: u32) -> HashMap<u32, String> {
        let by_nid: HashMap<u32, &InodeInfo> = inodes.iter().map(|i| (i.nid, i)).collect();
        let mut paths = HashMap::new();
        for inode in inodes {
            let mut parts = Vec::new();
            let mut cursor = inode;
            while cursor.nid != root_ino && parts.len() < 64 {
                parts.push(cursor.name.as_str());
                match by_nid.get(&cursor.parent) {
                    Some(parent) => cursor = parent,
                    None => break,
                }
            }
            parts.reverse();
            paths.insert(inode.nid, format!("/{}", parts.join("/")));
        }
        paths
    }
}

/// Describe an inode block.
pub fn inode_info(nid: u32, block: &Block) -> Option<InodeInfo> {
    let node = NodeBlock(&block[..]);
    (node.kind() == NodeKind::Inode).then(|| InodeInfo {
        nid,
        parent: node.parent_ino(),
        name: node.name(),
        is_dir: node.is_dir(),
        size: node.size(),
    })
}

struct BlockReader<'a> {
    file: &'a File,
    blocks: u64,
}

impl BlockReader<'_> {
    fn read(&mut self, addr: u32) -> Result<Vec<u8>> {
        if u64::from(addr) >= self.blocks {
            bail!(
                "block address {addr} is beyond the end of the filesystem ({} blocks)",
                self.blocks
            );
        }
        let mut buf = vec![0u8; BLOCK_SIZE];
        self.file
            .read_exact_at(&mut buf, u64::from(addr) * BLOCK_SIZE as u64)
            .with_context(|| format!("reading block {addr}"))?;
        Ok(buf)
    }
}

fn read_superblock(file: &File) -> Result<Superblock> {
    let mut first_error = None;
    for block in 0..2u64 {
        let mut buf = vec![0u8; BLOCK_SIZE];
        file.read_exact_at(&mut buf, block * BLOCK_SIZE as u64)
            .with_context(|| format!("reading superblock copy {block}"))?;
        match Superblock::parse(&buf) {
            Ok(sb) => return Ok(sb),
            Err(e) if first_error.is_none() => first_error = Some(e),
            Err(e) => log::debug!("backup superblock is bad too: {e:#}"),
        }
    }
    Err(first_error
        .expect("two attempts")
        .context("no valid superblock (primary and backup)"))
}

/// The bytes a file or block device holds: a block device's metadata says 0, its end does not.
/// An image file or a block device (`whatif --device`), opened without blocking: a FIFO, a
/// character device or a directory is refused, naming what it is.
fn open_image(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::FileTypeExt as _;
    let file = files::open_nonblocking(
        path,
        std::fs::OpenOptions::new().read(true),
        files::Symlinks::Follow,
    )?;
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() || file_type.is_block_device() {
        Ok(file)
    } else {
        Err(files::not_regular(file_type))
    }
}

fn byte_len(file: &File) -> std::io::Result<u64> {
    use std::{io::Seek as _, os::unix::fs::FileTypeExt as _};
    if !file.metadata()?.file_type().is_block_device() {
        return Ok(file.metadata()?.len());
    }
    let mut handle = file;
    let len = handle.seek(std::io::SeekFrom::End(0))?;
    handle.rewind()?;
    Ok(len)
}
