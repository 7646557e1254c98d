//! Test helpers: synthetic node blocks and a cache over them, no image needed.
use std::sync::Arc;

use crate::{
    cache::NodeCache,
    disk::Disk,
    events::{Emitter, Task},
    f2fs::{Block, NodeBlock},
    nodes::NodeSet,
};

pub const SEED: u32 = 0x1234_5678;

/// An inode block for `nid`: footer, name, extra attributes and a valid inode checksum.
/// `noise` pseudo-random bytes in the address area make it as incompressible as wanted.
pub fn inode_block(nid: u32, noise: usize) -> Box<Block> {
    let mut block: Box<Block> = Box::new([0; 4096]);
    block[0..2].copy_from_slice(&0o100644u16.to_le_bytes()); // i_mode
    block[3] = 0x20; // i_inline: F2FS_EXTRA_ATTR
    block[16..24].copy_from_slice(&12u64.to_le_bytes()); // i_size
    let name = format!("f-{nid}");
    block[88..92].copy_from_slice(&(name.len() as u32).to_le_bytes());
    block[92..92 + name.len()].copy_from_slice(name.as_bytes());
    block[360..362].copy_from_slice(&36u16.to_le_bytes()); // i_extra_isize
    crate::rng::Rng::new(u64::from(nid)).fill(&mut block[400..400 + noise]);
    block[4072..4076].copy_from_slice(&nid.to_le_bytes()); // footer nid
    block[4076..4080].copy_from_slice(&nid.to_le_bytes()); // footer ino
    seal(&mut block);
    block
}

/// A direct node of inode `ino`.
pub fn direct_block(nid: u32, ino: u32) -> Box<Block> {
    let mut block: Box<Block> = Box::new([0; 4096]);
    block[0..8].copy_from_slice(&0xdead_beefu64.to_le_bytes());
    block[4072..4076].copy_from_slice(&nid.to_le_bytes());
    block[4076..4080].copy_from_slice(&ino.to_le_bytes());
    block[4080..4084].copy_from_slice(&(1u32 << 3).to_le_bytes()); // ofs_of_node 1
    block
}

/// Recompute the inode checksum.
pub fn seal(block: &mut Block) {
    let sum = NodeBlock(&block[..]).computed_inode_checksum(SEED);
    block[368..372].copy_from_slice(&sum.to_le_bytes());
}

pub struct Rig {
    pub cache: NodeCache,
    pub disk: Disk,
    pub em: Emitter,
}

/// A cache over `count` compressible inodes (nids 100..), plus `noisy` incompressible ones
/// after them, with every event recorded.
pub fn rig(count: u32, noisy: u32) -> Rig {
    let mut blocks: Vec<(u32, Box<Block>)> = (0..count)
        .map(|i| (100 + i, inode_block(100 + i, 0)))
        .collect();
    blocks.extend((0..noisy).map(|i| (100 + count + i, inode_block(100 + count + i, 3000))));
    blocks.push((50, direct_block(50, 100)));
    let nodes = Arc::new(NodeSet::from_blocks(blocks, true, SEED));
    let check = crate::cache::NodeCheck {
        inode_checksums: true,
        checksum_seed: SEED,
    };
    let mut em = Emitter::new(7, true);
    em.task = Task::process(4242, 10_001, "tester");
    Rig {
        cache: NodeCache::new(check),
        disk: Disk::new(nodes),
        em,
    }
}

impl Rig {
    /// Read `nids` in (clean, unreferenced raw entries, in this order).
    pub fn load(&mut self, nids: impl IntoIterator<Item = u32>) {
        for nid in nids {
            self.cache
                .get(
                    nid,
                    crate::f2fs::node::RequestedType::Any,
                    &mut self.disk,
                    &mut self.em,
                )
                .unwrap();
        }
    }

    pub fn events(&mut self) -> Vec<tracer_common::Event> {
        let mut out = Vec::new();
        self.em.drain_into(&mut out);
        out
    }

    /// Run a whole worker pass, publishing each conversion right away.
    pub fn pass(&mut self, threshold: u32) -> crate::cache::worker::PassStats {
        let mut pass = crate::cache::worker::WorkerPass::start(&mut self.cache, threshold);
        while !matches!(
            pass.step(&mut self.cache, &mut self.em),
            crate::cache::worker::WorkerStep::Done { .. }
        ) {}
        pass.stats
    }
}

/// (kind, nid, queue, reason) of each event, for exact comparisons.
pub fn brief(events: &[tracer_common::Event]) -> Vec<(u8, u32, u8, u8)> {
    events
        .iter()
        .map(|e| (e.kind, e.nid, e.queue, e.reason))
        .collect()
}
