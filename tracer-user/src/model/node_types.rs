//! Node reads by node type (issue 31): which of them hit inodes, direct, indirect or double
//! indirect nodes or xattr nodes, told by each read nid's block in the device's image (its
//! footer's offset, `sim::f2fs::NodeType`). How well a node block compresses depends on which
//! it is: an inode carries names, xattrs and inline data, a direct node 1,018 block addresses.
//! `report --image` counts a recording's; a live run (`top`, `stream`) counts per window and
//! since its start, from the simulator's own image or the one `--image` names.
use std::{path::Path, sync::Arc};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use sim::{
    f2fs::{NodeBlock, NodeType},
    nodes::NodeSet,
};

/// Node reads of one kind of node, on demand and by readahead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reads {
    pub demand: u64,
    pub readahead: u64,
}

impl Reads {
    pub(crate) fn total(&self) -> u64 {
        self.demand + self.readahead
    }

    fn add(&mut self, readahead: bool) {
        match readahead {
            true => self.readahead += 1,
            false => self.demand += 1,
        }
    }
}

/// Node reads per node type: a window's, a run's so far, a recording's. Serialized with the
/// types' names (`double_indirect`), and `not_in_image` for nids the image has no node block
/// for (a node created after it was made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeCounts {
    pub inode: Reads,
    pub direct: Reads,
    pub indirect: Reads,
    pub double_indirect: Reads,
    pub xattr: Reads,
    pub not_in_image: Reads,
}

impl TypeCounts {
    /// One node read of `nid`, its type read from `nodes`.
    pub(crate) fn count(&mut self, nodes: &NodeSet, nid: u32, readahead: bool) {
        self.slot(type_of(nodes, nid)).add(readahead);
    }

    fn slot(&mut self, of_type: Option<NodeType>) -> &mut Reads {
        match of_type {
            Some(NodeType::Inode) => &mut self.inode,
            Some(NodeType::Direct) => &mut self.direct,
            Some(NodeType::Indirect) => &mut self.indirect,
            Some(NodeType::DoubleIndirect) => &mut self.double_indirect,
            Some(NodeType::Xattr) => &mut self.xattr,
            None => &mut self.not_in_image,
        }
    }

    /// The reads of `of_type` (`None`: not in the image).
    pub(crate) fn get(&self, of_type: Option<NodeType>) -> Reads {
        let mut counts = *self;
        *counts.slot(of_type)
    }

    /// Every row, in [`NodeType::ALL`]'s order, then not in the image (`None`).
    pub(crate) fn rows(&self) -> impl Iterator<Item = (Option<NodeType>, Reads)> + '_ {
        NodeType::ALL
            .into_iter()
            .map(Some)
            .chain([None])
            .map(|of_type| (of_type, self.get(of_type)))
    }

    pub(crate) fn total(&self) -> u64 {
        self.rows().map(|(_, reads)| reads.total()).sum()
    }
}

/// The node type of `nid`'s block in `nodes`; `None` when it has none.
fn type_of(nodes: &NodeSet, nid: u32) -> Option<NodeType> {
    nodes
        .block(nid)
        .map(|block| NodeBlock(&block[..]).node_type())
}

/// A row's name for people: `double indirect`, `not in the image`.
pub(crate) fn shown_name(of_type: Option<NodeType>) -> &'static str {
    of_type.map_or("not in the image", NodeType::name)
}

/// A row's name in JSON and metric labels, as [`TypeCounts`] serializes it.
pub(crate) fn key(of_type: Option<NodeType>) -> &'static str {
    match of_type {
        Some(NodeType::Inode) => "inode",
        Some(NodeType::Direct) => "direct",
        Some(NodeType::Indirect) => "indirect",
        Some(NodeType::DoubleIndirect) => "double_indirect",
        Some(NodeType::Xattr) => "xattr",
        None => "not_in_image",
    }
}

/// The node reads of a recording, or of a live run so far, sorted by the node type of their
/// blocks in `image`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTypeReads {
    /// The image or device the types were read from.
    pub image: String,
    #[serde(flatten)]
    pub counts: TypeCounts,
}

impl NodeTypeReads {
    pub(crate) fn new(image: String) -> NodeTypeReads {
        NodeTypeReads {
            image,
            counts: TypeCounts::default(),
        }
    }
}

/// The node blocks node reads are classified by, and what to call them.
#[derive(Clone)]
pub struct NodeImage {
    pub nodes: Arc<NodeSet>,
    /// The image file or device, or the simulator's image's name.
    pub name: String,
    /// The device the image is (the kernel's encoding, major << 20 | minor): only its node
    /// reads are classified. `None` (an image file, the simulator's disk): every node read is.
    pub dev: Option<u32>,
}

impl NodeImage {
    /// An F2FS image, or a device (read-only), as `--image` names it.
    pub(crate) fn load(path: &Path) -> Result<NodeImage> {
        use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
        let nodes = NodeSet::load(path)
            .with_context(|| format!("{} is not a readable F2FS image", path.display()))?;
        let dev = std::fs::metadata(path)
            .ok()
            .filter(|meta| meta.file_type().is_block_device())
            .map(|meta| libc::major(meta.rdev()) << 20 | libc::minor(meta.rdev()));
        Ok(NodeImage {
            nodes: Arc::new(nodes),
            name: path.display().to_string(),
            dev,
        })
    }
}

/// A live run's node reads by node type: the open window's and all so far.
pub(crate) struct NodeTypeTally {
    image: NodeImage,
    open: TypeCounts,
    total: NodeTypeReads,
}

impl NodeTypeTally {
    pub(crate) fn new(image: NodeImage) -> NodeTypeTally {
        let total = NodeTypeReads::new(image.name.clone());
        NodeTypeTally {
            image,
            open: TypeCounts::default(),
            total,
        }
    }

    /// A node read of `nid` on device `dev`; one of another device than the image's is not
    /// classified.
    pub(crate) fn count(&mut self, dev: u32, nid: u32, readahead: bool) {
        if self.image.dev.is_some_and(|image| image != dev) {
            return;
        }
        let of_type = type_of(&self.image.nodes, nid);
        self.open.slot(of_type).add(readahead);
        self.total.counts.slot(of_type).add(readahead);
    }

    /// The open window's counts, which start again from nothing.
    pub(crate) fn close_window(&mut self) -> TypeCounts {
        std::mem::take(&mut self.open)
    }

    pub(crate) fn total(&self) -> &NodeTypeReads {
        &self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node block with only its footer: offset 0 is an inode, 1 a direct node.
    fn footer_only(nid: u32, ofs: u32) -> (u32, Box<sim::f2fs::Block>) {
        let mut block = Box::new([0u8; sim::f2fs::BLOCK_SIZE]);
        let footer = sim::f2fs::BLOCK_SIZE - 24;
        block[footer..footer + 4].copy_from_slice(&nid.to_le_bytes());
        block[footer + 4..footer + 8].copy_from_slice(&10u32.to_le_bytes());
        block[footer + 8..footer + 12].copy_from_slice(&(ofs << 3).to_le_bytes());
        (nid, block)
    }

    #[test]
    fn a_devices_image_types_only_that_devices_reads_and_windows_start_again() {
        let nodes = NodeSet::from_blocks(vec![footer_only(10, 0), footer_only(11, 1)], false, 0);
        let disk = 254 << 20;
        let mut tally = NodeTypeTally::new(NodeImage {
            nodes: Arc::new(nodes),
            name: "/dev/vda".into(),
            dev: Some(disk),
        });
        tally.count(disk, 10, false);
        tally.count(disk, 11, true);
        tally.count(disk, 12, false);
        // Another device's reads: its nids mean nothing in this image.
        tally.count(7 << 20, 10, false);
        let window = tally.close_window();
        assert_eq!(
            window.inode,
            Reads {
                demand: 1,
                readahead: 0
            }
        );
        assert_eq!(
            window.direct,
            Reads {
                demand: 0,
                readahead: 1
            }
        );
        assert_eq!(
            window.not_in_image,
            Reads {
                demand: 1,
                readahead: 0
            }
        );
        assert_eq!(window.total(), 3);
        tally.count(disk, 10, false);
        assert_eq!(tally.close_window().total(), 1);
        assert_eq!(tally.total().counts.inode.demand, 2);
        assert_eq!(tally.total().counts.total(), 4);
    }
}
