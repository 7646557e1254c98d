//! Node reads by node type (issue 31): which of them hit inodes, direct, indirect or double
//! indirect nodes or xattr nodes, told by each read nid's block in the recorded device's image
//! (its footer's offset, `sim::f2fs::NodeType`). How well a node block compresses depends on
//! which it is: an inode carries names, xattrs and inline data, a direct node 1,018 block
//! addresses.
use serde::{ser::SerializeMap as _, Serialize, Serializer};
use sim::{
    f2fs::{NodeBlock, NodeType},
    nodes::NodeSet,
};

/// Node reads of one kind of node, on demand and by readahead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Reads {
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

/// The node reads of a recording sorted by the node type of their blocks in `image`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeTypeReads {
    /// The image or device the types were read from.
    pub image: String,
    /// Per type, in [`NodeType::ALL`]'s order.
    by_type: [Reads; NodeType::ALL.len()],
    /// Reads of nids the image has no node block for (a node created after it was made).
    pub not_in_image: Reads,
}

impl NodeTypeReads {
    pub(crate) fn new(image: String) -> NodeTypeReads {
        NodeTypeReads {
            image,
            ..NodeTypeReads::default()
        }
    }

    /// One node read of `nid`.
    pub(crate) fn count(&mut self, nodes: &NodeSet, nid: u32, readahead: bool) {
        match nodes.block(nid) {
            Some(block) => {
                let of_type = NodeBlock(&block[..]).node_type();
                self.by_type[of_type as usize].add(readahead);
            }
            None => self.not_in_image.add(readahead),
        }
    }

    pub(crate) fn get(&self, of_type: NodeType) -> Reads {
        self.by_type[of_type as usize]
    }

    pub(crate) fn total(&self) -> u64 {
        self.by_type.iter().map(Reads::total).sum::<u64>() + self.not_in_image.total()
    }
}

/// `{"image": ..., "inode": {"demand": .., "readahead": ..}, ..., "not_in_image": {..}}`.
impl Serialize for NodeTypeReads {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(NodeType::ALL.len() + 2))?;
        map.serialize_entry("image", &self.image)?;
        for of_type in NodeType::ALL {
            map.serialize_entry(&of_type.name().replace(' ', "_"), &self.get(of_type))?;
        }
        map.serialize_entry("not_in_image", &self.not_in_image)?;
        map.end()
    }
}
