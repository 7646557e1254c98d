//! One node-cache entry: a nid in exactly one representation after publication.
use std::sync::Arc;

use super::list::{LinkStore, Links};
use crate::f2fs::{Block, NodeKind};

/// A compressed representation: a private-slab object of `slot_bytes`, holding `clen` bytes
/// of LZ4 payload and the CRC of the original block.
#[derive(Clone, Debug)]
pub struct Compressed {
    /// The slab object; its length is the allocation size.
    pub slot: Box<[u8]>,
    /// The allocation size the entry records (checked against the object on restore).
    pub slot_bytes: u32,
    pub clen: u32,
    pub crc: u32,
    /// The bytes attributed memory counts for it: the object's length when it holds the
    /// payload, the slot size when only the size is modelled (`Payload::Sizes`).
    pub held_bytes: u32,
}

impl Compressed {
    /// What an entry holds once reclaimed: nothing, and no allocation.
    pub fn gone() -> Compressed {
        Compressed {
            slot: Box::default(),
            slot_bytes: 0,
            clen: 0,
            crc: 0,
            held_bytes: 0,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Repr {
    /// A raw 4 KiB buffer (shared with the disk until modified).
    Raw(Arc<Block>),
    Compressed(Compressed),
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub nid: u32,
    pub kind: NodeKind,
    pub repr: Repr,
    /// Which queue it sits on (`tracer_common::QUEUE_*`).
    pub queue: u8,
    pub referenced: bool,
    pub dirty: bool,
    /// Compressed by the worker, not yet published.
    pub converting: bool,
    /// Accessed while `converting`: the conversion must be aborted.
    pub raced: bool,
    pub links: Links,
}

impl Entry {
    pub fn compressed(&self) -> Option<&Compressed> {
        match &self.repr {
            Repr::Compressed(c) => Some(c),
            Repr::Raw(_) => None,
        }
    }

    pub fn raw(&self) -> Option<&Arc<Block>> {
        match &self.repr {
            Repr::Raw(block) => Some(block),
            Repr::Compressed(_) => None,
        }
    }
}

impl LinkStore for Vec<Entry> {
    fn links(&mut self, slot: u32) -> &mut Links {
        &mut self[slot as usize].links
    }
}
