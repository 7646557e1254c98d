//! The simulated disk: the image's node blocks plus blocks written back during a run. Counts
//! every node read (FS_NODE_READ_IO).
use std::{collections::HashMap, sync::Arc};

use anyhow::{Context as _, Result};

use crate::{cache::PayloadSizes, f2fs::Block, nodes::NodeSet};

pub struct Disk {
    nodes: Arc<NodeSet>,
    written: HashMap<u32, Arc<Block>>,
    /// `Payload::Sizes`: which nids exist, and the one block handed out for all of them.
    sizes_only: Option<(Arc<PayloadSizes>, Arc<Block>)>,
    pub reads: u64,
    pub readahead_reads: u64,
    pub writes: u64,
}

impl Disk {
    pub fn new(nodes: Arc<NodeSet>) -> Disk {
        Disk {
            nodes,
            written: HashMap::new(),
            sizes_only: None,
            reads: 0,
            readahead_reads: 0,
            writes: 0,
        }
    }

    /// Serve a shared zero block for every nid of `sizes` instead of the image's bytes: for a
    /// cache whose payloads are sizes only (`Payload::Sizes`), where no byte is ever read.
    /// Reads are counted as before; writes keep nothing.
    pub fn hold_sizes_only(&mut self, sizes: Arc<PayloadSizes>) {
        self.sizes_only = Some((sizes, Arc::new([0; 4096])));
    }

    pub fn nodes(&self) -> &Arc<NodeSet> {
        &self.nodes
    }

    /// Submit one 4 KiB node read. The caller emits the NodeRead event.
    pub fn read(&mut self, nid: u32, readahead: bool) -> Result<Arc<Block>> {
        let block = self
            .peek(nid)
            .with_context(|| format!("nid {nid} has no node block on the simulated disk"))?;
        self.reads += 1;
        if readahead {
            self.readahead_reads += 1;
        }
        Ok(block)
    }

    /// The current on-disk block, without I/O.
    pub fn peek(&self, nid: u32) -> Option<Arc<Block>> {
        if let Some((sizes, placeholder)) = &self.sizes_only {
            return sizes.get(nid).map(|_| placeholder.clone());
        }
        self.written
            .get(&nid)
            .or_else(|| self.nodes.block(nid))
            .cloned()
    }

    pub fn write(&mut self, nid: u32, block: Arc<Block>) {
        self.writes += 1;
        if self.sizes_only.is_none() {
            self.written.insert(nid, block);
        }
    }
}
