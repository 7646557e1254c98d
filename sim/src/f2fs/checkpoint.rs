//! The checkpoint (`struct f2fs_checkpoint`): two packs at `cp_blkaddr` and one segment later;
//! the valid pack with the higher version is current. It carries the NAT version bitmap and
//! locates the summary that holds the NAT journal.
use anyhow::{bail, ensure, Context as _, Result};

use super::{crc, le32, le64, superblock::Superblock, BLOCK_SIZE};

/// `ckpt_flags` bits (`CP_*_FLAG`).
pub const CP_UMOUNT_FLAG: u32 = 0x0001;
pub const CP_COMPACT_SUM_FLAG: u32 = 0x0004;
pub const CP_FASTBOOT_FLAG: u32 = 0x0020;
pub const CP_LARGE_NAT_BITMAP_FLAG: u32 = 0x0400;

/// Offset of `sit_nat_version_bitmap` in the checkpoint block.
const BITMAP_OFFSET: usize = 192;
/// Summary types before the node ones (`NR_CURSEG_DATA_TYPE`) and all persistent ones.
const NR_CURSEG_DATA_TYPE: u32 = 3;
const NR_CURSEG_PERSIST_TYPE: u32 = 6;

#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub version: u64,
    /// Block address where this pack starts.
    pub pack_start: u32,
    pub flags: u32,
    pub pack_total_blocks: u32,
    pub pack_start_sum: u32,
    pub valid_node_count: u32,
    pub valid_inode_count: u32,
    /// The NAT version bitmap: bit `n` set means NAT block `n` is valid in its second copy.
    pub nat_bitmap: Vec<u8>,
}

impl Checkpoint {
    /// Pick the current checkpoint: read both packs, keep the valid one with the higher version.
    pub fn load(
        sb: &Superblock,
        read_block: &mut dyn FnMut(u32) -> Result<Vec<u8>>,
    ) -> Result<Checkpoint> {
        let first = sb.cp_blkaddr;
        // Addresses come from the image: one past u32 saturates to an address beyond any
        // image, whose read fails and says where (here and below).
        let second = sb.cp_blkaddr.saturating_add(sb.blocks_per_seg());
        let packs = [
            Self::load_pack(sb, first, read_block),
            Self::load_pack(sb, second, read_block),
        ];
        match packs {
            [Ok(a), Ok(b)] => Ok(if b.version > a.version { b } else { a }),
            [Ok(a), Err(e)] | [Err(e), Ok(a)] => {
                log::debug!("one checkpoint pack is invalid ({e:#}); using the other");
                Ok(a)
            }
            [Err(a), Err(b)] => bail!("no valid checkpoint: pack 1: {a:#}; pack 2: {b:#}"),
        }
    }

    /// A pack is valid when its header and its trailing copy both pass the CRC and agree.
    fn load_pack(
        sb: &Superblock,
        start: u32,
        read_block: &mut dyn FnMut(u32) -> Result<Vec<u8>>,
    ) -> Result<Checkpoint> {
        let head =
            read_block(start).with_context(|| format!("reading checkpoint block {start}"))?;
        let head_version = checked_version(&head)
            .with_context(|| format!("checkpoint header at block {start}"))?;
        let total = le32(&head, 136);
        ensure!(
            (2..=sb.blocks_per_seg()).contains(&total),
            "checkpoint at block {start}: cp_pack_total_block_count {total} is implausible"
        );
        let tail_addr = start.saturating_add(total - 1);
        let tail = read_block(tail_addr)
            .with_context(|| format!("reading checkpoint block {tail_addr}"))?;
        let tail_version = checked_version(&tail)
            .with_context(|| format!("checkpoint trailer at block {tail_addr}"))?;
        ensure!(
            head_version == tail_version,
            "checkpoint at block {start}: header version {head_version} != trailer version {tail_version}"
        );
        let flags = le32(&head, 132);
        Ok(Checkpoint {
            version: head_version,
            pack_start: start,
            flags,
            pack_total_blocks: total,
            pack_start_sum: le32(&head, 140),
            valid_node_count: le32(&head, 144),
            valid_inode_count: le32(&head, 148),
            nat_bitmap: nat_bitmap(sb, &head, flags)?,
        })
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Block address of the hot data summary, whose journal holds recent NAT entries, and
    /// whether it is in the compact format.
    pub fn nat_journal_block(&self) -> (u32, bool) {
        if self.has(CP_COMPACT_SUM_FLAG) {
            return (self.pack_start.saturating_add(self.pack_start_sum), true);
        }
        let base = if self.has(CP_UMOUNT_FLAG) || self.has(CP_FASTBOOT_FLAG) {
            NR_CURSEG_PERSIST_TYPE
        } else {
            NR_CURSEG_DATA_TYPE
        };
        // sum_blk_addr(sbi, base, CURSEG_HOT_DATA = 0)
        let end = self.pack_start.saturating_add(self.pack_total_blocks);
        (end.saturating_sub(base + 1), false)
    }
}

/// Check a checkpoint block's CRC and return its version.
fn checked_version(block: &[u8]) -> Result<u64> {
    let offset = le32(block, 164) as usize;
    ensure!(
        (BITMAP_OFFSET..=BLOCK_SIZE - 4).contains(&offset),
        "checksum_offset {offset} is outside the block"
    );
    let stored = le32(block, offset);
    let mut computed = crc::f2fs_crc32(&block[..offset]);
    if offset < BLOCK_SIZE - 4 {
        // Large-bitmap layouts checksum the bytes after the CRC field too.
        computed = crc::crc32_le(computed, &block[offset + 4..]);
    }
    ensure!(
        stored == computed,
        "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
    );
    Ok(le64(block, 0))
}

/// `__bitmap_ptr(sbi, NAT_BITMAP)`.
fn nat_bitmap(sb: &Superblock, head: &[u8], flags: u32) -> Result<Vec<u8>> {
    let sit_bytes = le32(head, 156) as usize;
    let nat_bytes = le32(head, 160) as usize;
    let start = if flags & CP_LARGE_NAT_BITMAP_FLAG != 0 {
        BITMAP_OFFSET + 4
    } else if sb.cp_payload > 0 {
        BITMAP_OFFSET
    } else {
        BITMAP_OFFSET + sit_bytes
    };
    ensure!(
        start + nat_bytes <= BLOCK_SIZE,
        "NAT version bitmap ({nat_bytes} bytes at {start}) does not fit the checkpoint block"
    );
    Ok(head[start..start + nat_bytes].to_vec())
}
