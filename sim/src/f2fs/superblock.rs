//! The superblock (`struct f2fs_super_block`), 1024 bytes into block 0, backup in block 1.
use anyhow::{bail, ensure, Result};

use super::{crc, le32, le64, BLOCK_SIZE};

/// Byte offset of the superblock inside its block (`F2FS_SUPER_OFFSET`).
pub const SUPER_OFFSET: usize = 1024;

/// Superblock feature bits the reader cares about (`F2FS_FEATURE_*`).
pub const FEATURE_EXTRA_ATTR: u32 = 0x0008;
pub const FEATURE_INODE_CHKSUM: u32 = 0x0020;
pub const FEATURE_SB_CHKSUM: u32 = 0x0800;

/// The fields the reader uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub log_blocksize: u32,
    pub log_blocks_per_seg: u32,
    pub block_count: u64,
    pub segment_count_nat: u32,
    pub cp_blkaddr: u32,
    pub sit_blkaddr: u32,
    pub nat_blkaddr: u32,
    pub ssa_blkaddr: u32,
    pub main_blkaddr: u32,
    pub root_ino: u32,
    pub node_ino: u32,
    pub meta_ino: u32,
    pub uuid: [u8; 16],
    pub cp_payload: u32,
    pub feature: u32,
}

impl Superblock {
    /// Parse and check the superblock found in `block` (a whole 4 KiB block).
    pub fn parse(block: &[u8]) -> Result<Superblock> {
        ensure!(
            block.len() >= BLOCK_SIZE,
            "superblock block is {} bytes, not 4096",
            block.len()
        );
        let sb = &block[SUPER_OFFSET..];
        let magic = le32(sb, 0);
        if magic != crc::F2FS_MAGIC {
            bail!(
                "bad superblock magic {magic:#010x} (expected {:#010x}): not an F2FS image",
                crc::F2FS_MAGIC
            );
        }
        let parsed = Superblock {
            log_blocksize: le32(sb, 16),
            log_blocks_per_seg: le32(sb, 20),
            block_count: le64(sb, 36),
            segment_count_nat: le32(sb, 60),
            cp_blkaddr: le32(sb, 76),
            sit_blkaddr: le32(sb, 80),
            nat_blkaddr: le32(sb, 84),
            ssa_blkaddr: le32(sb, 88),
            main_blkaddr: le32(sb, 92),
            root_ino: le32(sb, 96),
            node_ino: le32(sb, 100),
            meta_ino: le32(sb, 104),
            uuid: sb[108..124].try_into().expect("16 bytes"),
            cp_payload: le32(sb, 1664),
            feature: le32(sb, 2180),
        };
        ensure!(
            parsed.log_blocksize == 12,
            "superblock says log_blocksize {}: only 4 KiB blocks are supported",
            parsed.log_blocksize
        );
        ensure!(
            (1..=12).contains(&parsed.log_blocks_per_seg),
            "superblock says log_blocks_per_seg {}: implausible",
            parsed.log_blocks_per_seg
        );
        if parsed.has(FEATURE_SB_CHKSUM) {
            check_crc(sb)?;
        }
        Ok(parsed)
    }

    pub fn has(&self, feature: u32) -> bool {
        self.feature & feature != 0
    }

    pub fn blocks_per_seg(&self) -> u32 {
        1 << self.log_blocks_per_seg
    }
}

/// The superblock CRC sits at `checksum_offset` and covers every byte before it.
fn check_crc(sb: &[u8]) -> Result<()> {
    let offset = le32(sb, 32) as usize;
    ensure!(
        offset + 4 <= BLOCK_SIZE - SUPER_OFFSET,
        "superblock checksum_offset {offset} lies outside the superblock"
    );
    let stored = le32(sb, offset);
    let computed = crc::f2fs_crc32(&sb[..offset]);
    ensure!(
        stored == computed,
        "superblock CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
    );
    Ok(())
}
