//! The node address table: nid -> (owner inode, block address). Each NAT block has two copies
//! on disk; the checkpoint's NAT bitmap says which is valid. Entries changed since the last NAT
//! flush sit in the NAT journal of the hot data summary and override the blocks.
use std::collections::BTreeMap;

use anyhow::{ensure, Context as _, Result};

use super::{
    checkpoint::Checkpoint, le16, le32, superblock::Superblock, BLOCK_SIZE, NEW_ADDR, NULL_ADDR,
};

/// `sizeof(struct f2fs_nat_entry)`: version (1), ino (4), block_addr (4), packed.
const NAT_ENTRY_SIZE: usize = 9;
/// `NAT_ENTRY_PER_BLOCK`.
pub const NAT_ENTRY_PER_BLOCK: u32 = (BLOCK_SIZE / NAT_ENTRY_SIZE) as u32;
/// `SUM_ENTRY_SIZE * ENTRIES_IN_SUM`: the journal follows the 512 summary entries.
const SUM_ENTRIES_BYTES: usize = 7 * 512;
/// `sizeof(struct nat_journal_entry)`: nid (4) + a NAT entry.
const NAT_JOURNAL_ENTRY_SIZE: usize = 4 + NAT_ENTRY_SIZE;
/// `NAT_JOURNAL_ENTRIES`.
const NAT_JOURNAL_ENTRIES: usize = (507 - 2) / NAT_JOURNAL_ENTRY_SIZE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatEntry {
    pub ino: u32,
    pub block_addr: u32,
}

impl NatEntry {
    const EMPTY: NatEntry = NatEntry {
        ino: 0,
        block_addr: 0,
    };

    fn parse(bytes: &[u8]) -> NatEntry {
        NatEntry {
            ino: le32(bytes, 1),
            block_addr: le32(bytes, 5),
        }
    }

    /// The nid has a node block on disk.
    pub fn is_allocated(&self) -> bool {
        self.block_addr != NULL_ADDR && self.block_addr != NEW_ADDR
    }
}

/// The whole NAT: `len` nids, of which only the entries that are not all zero are kept (an
/// image's NAT is mostly empty, and how big it is comes from the image itself: a damaged
/// superblock may claim millions of nids that no block fills).
pub struct Nat {
    entries: BTreeMap<u32, NatEntry>,
    len: u32,
    pub journal_entries: usize,
}

impl Nat {
    pub fn load(
        sb: &Superblock,
        cp: &Checkpoint,
        read_block: &mut dyn FnMut(u32) -> Result<Vec<u8>>,
    ) -> Result<Nat> {
        let nat_blocks = (sb.segment_count_nat / 2)
            .checked_mul(sb.blocks_per_seg())
            .with_context(|| {
                format!(
                    "superblock says the NAT has {} segments: implausible",
                    sb.segment_count_nat
                )
            })?;
        ensure!(nat_blocks > 0, "superblock says the NAT has no segments");
        ensure!(
            cp.nat_bitmap.len() * 8 >= nat_blocks as usize,
            "checkpoint NAT bitmap covers {} blocks, the NAT has {nat_blocks}",
            cp.nat_bitmap.len() * 8
        );
        let mut entries = BTreeMap::new();
        for block_index in 0..nat_blocks {
            let addr = current_nat_addr(sb, &cp.nat_bitmap, block_index);
            let block = read_block(addr)
                .with_context(|| format!("reading NAT block {block_index} at {addr}"))?;
            let first_nid = block_index * NAT_ENTRY_PER_BLOCK;
            for (index, bytes) in block.chunks_exact(NAT_ENTRY_SIZE).enumerate() {
                let entry = NatEntry::parse(bytes);
                if entry != NatEntry::EMPTY {
                    entries.insert(first_nid + index as u32, entry);
                }
            }
        }
        let mut nat = Nat {
            entries,
            // At most 32,768 blocks (the bitmap's bits) of 455 entries: no overflow.
            len: nat_blocks * NAT_ENTRY_PER_BLOCK,
            journal_entries: 0,
        };
        nat.apply_journal(cp, read_block)?;
        Ok(nat)
    }

    /// Journalled entries are newer than the NAT blocks.
    fn apply_journal(
        &mut self,
        cp: &Checkpoint,
        read_block: &mut dyn FnMut(u32) -> Result<Vec<u8>>,
    ) -> Result<()> {
        let (addr, compact) = cp.nat_journal_block();
        let block = read_block(addr)
            .with_context(|| format!("reading the NAT journal summary at block {addr}"))?;
        let journal = if compact {
            &block[..]
        } else {
            &block[SUM_ENTRIES_BYTES..]
        };
        let count = le16(journal, 0) as usize;
        ensure!(
            count <= NAT_JOURNAL_ENTRIES,
            "NAT journal at block {addr} claims {count} entries, at most {NAT_JOURNAL_ENTRIES} fit"
        );
        for slot in 0..count {
            let at = 2 + slot * NAT_JOURNAL_ENTRY_SIZE;
            let nid = le32(journal, at);
            ensure!(
                nid < self.len,
                "NAT journal entry {slot} names nid {nid}, beyond the NAT"
            );
            self.entries
                .insert(nid, NatEntry::parse(&journal[at + 4..]));
        }
        self.journal_entries = count;
        Ok(())
    }

    /// The entry of `nid`; None beyond the NAT.
    pub fn get(&self, nid: u32) -> Option<NatEntry> {
        (nid < self.len).then(|| self.entries.get(&nid).copied().unwrap_or(NatEntry::EMPTY))
    }

    /// Every nid with a node block on disk, in nid order.
    pub fn allocated(&self) -> impl Iterator<Item = (u32, NatEntry)> + '_ {
        self.entries
            .iter()
            .filter(|(_, e)| e.is_allocated())
            .map(|(nid, e)| (*nid, *e))
    }
}

/// `current_nat_addr()`: NAT block `n` lives in segment pair `n / blocks_per_seg`; the bitmap
/// bit (most significant bit first, as `f2fs_test_bit`) selects the second copy.
fn current_nat_addr(sb: &Superblock, bitmap: &[u8], block_index: u32) -> u32 {
    let per_seg = sb.blocks_per_seg();
    let seg_pair = block_index >> sb.log_blocks_per_seg;
    // Saturating: past u32 is an address beyond any image, whose read fails and says where.
    let mut addr = sb
        .nat_blkaddr
        .saturating_add(seg_pair << sb.log_blocks_per_seg << 1)
        .saturating_add(block_index & (per_seg - 1));
    let byte = bitmap[(block_index >> 3) as usize];
    if byte & (0x80 >> (block_index & 7)) != 0 {
        addr = addr.saturating_add(per_seg);
    }
    addr
}
