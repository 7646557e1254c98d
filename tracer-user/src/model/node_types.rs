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
        let of_type = nodes
            .block(nid)
            .map(|block| NodeBlock(&block[..]).node_type());
        self.slot(of_type).add(readahead);
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
}

impl NodeImage {
    /// An F2FS image, or a device (read-only), as `--image` names it.
    pub(crate) fn load(path: &Path) -> Result<NodeImage> {
        let nodes = NodeSet::load(path)
            .with_context(|| format!("{} is not a readable F2FS image", path.display()))?;
        Ok(NodeImage {
            nodes: Arc::new(nodes),
            name: path.display().to_string(),
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

    pub(crate) fn count(&mut self, nid: u32, readahead: bool) {
        self.open.count(&self.image.nodes, nid, readahead);
        self.total.counts.count(&self.image.nodes, nid, readahead);
    }

    /// The open window's counts, which start again from nothing.
    pub(crate) fn close_window(&mut self) -> TypeCounts {
        std::mem::take(&mut self.open)
    }

    pub(crate) fn total(&self) -> &NodeTypeReads {
        &self.total
    }
}
