//! How the cache makes and restores a compressed payload: the strategy is a parameter of the
//! one cache, so `nodescope sim` and `nodescope whatif` run the same entries, queues, worker
//! and shrinker.
//!
//! - [`Payload::Lz4`]: the RFC's work done for real: LZ4 at every conversion, the bytes kept
//!   in their slot, LZ4 decompression, CRC and node checks at every restore.
//! - [`Payload::Sizes`]: each node's compressed length computed once per image (by real
//!   compression of the image's real block); a conversion takes the length from the table
//!   and a restore takes the block back from the disk, which holds exactly the bytes that were
//!   compressed. The counts are those of `Lz4` as long as no block is modified in memory,
//!   which holds for a replayed access trace (it knows which node was dirtied, not how).
//!   Nothing then reads a block's bytes, so the disk hands out one shared placeholder block
//!   instead of the image's ([`crate::disk::Disk::hold_sizes_only`]): a lookup no longer
//!   touches 4 KiB of cold memory per node, which was most of a replay's time.
use std::sync::Arc;

use super::lz4;
use crate::{
    f2fs::{Block, NodeBlock, NodeKind},
    nodes::NodeSet,
};

#[derive(Clone, Default)]
pub enum Payload {
    #[default]
    Lz4,
    Sizes(Arc<PayloadSizes>),
}

/// Marks a nid without a block in the table.
const ABSENT: u32 = u32::MAX;

/// Compressed length of every node block of one image, by nid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadSizes {
    by_nid: Vec<u32>,
    kinds: Vec<NodeKind>,
}

impl PayloadSizes {
    /// The LZ4 length of every block, as the cache's own compressor produces it.
    pub fn lz4(nodes: &NodeSet) -> PayloadSizes {
        let mut scratch = Box::new([0u8; lz4::MAX_COMPRESSED]);
        PayloadSizes::measure(nodes, |block| lz4::compress_into(block, &mut scratch))
    }

    /// Any compressor's length of every block (`compressed_len(block)`).
    pub fn measure(nodes: &NodeSet, mut compressed_len: impl FnMut(&Block) -> usize) -> Self {
        let top = nodes
            .nids()
            .iter()
            .copied()
            .max()
            .map_or(0, |n| n as usize + 1);
        let mut by_nid = vec![ABSENT; top];
        let mut kinds = vec![NodeKind::NonInode; top];
        for nid in nodes.nids() {
            let block = nodes.block(*nid).expect("a listed nid has a block");
            by_nid[*nid as usize] = u32::try_from(compressed_len(block)).unwrap_or(ABSENT - 1);
            kinds[*nid as usize] = NodeBlock(&block[..]).kind();
        }
        PayloadSizes { by_nid, kinds }
    }

    /// The compressed length of `nid`'s block, when the image has it.
    pub fn get(&self, nid: u32) -> Option<u32> {
        self.by_nid
            .get(nid as usize)
            .copied()
            .filter(|len| *len != ABSENT)
    }

    /// The kind of `nid`'s block (from its footer), when the image has it.
    pub fn kind(&self, nid: u32) -> Option<NodeKind> {
        self.get(nid).map(|_| self.kinds[nid as usize])
    }
}
