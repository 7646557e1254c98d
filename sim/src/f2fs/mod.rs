//! The project's own reader of the F2FS on-disk format: just what the simulator needs to take
//! real node blocks out of a real image. Every structure is checked (magic, CRCs, footers,
//! inode checksums) and every failure says what is wrong and where.
//!
//! Layouts follow `include/linux/f2fs_fs.h`; offsets are written out as constants next to the
//! code that reads them.
pub mod checkpoint;
pub mod crc;
pub mod image;
pub mod nat;
pub mod node;
pub mod sparse;
pub mod superblock;
pub mod xattr;

pub use image::{Image, InodeInfo};
pub use node::{NodeBlock, NodeKind, NodeType};

/// F2FS block size: the simulator models 4 KiB blocks only, as the RFC does.
pub const BLOCK_SIZE: usize = 4096;
/// One node block, as it sits on disk and in a raw cache entry.
pub type Block = [u8; BLOCK_SIZE];

/// Block addresses with a special meaning (`NULL_ADDR`, `NEW_ADDR`).
pub const NULL_ADDR: u32 = 0;
pub const NEW_ADDR: u32 = u32::MAX;

pub(crate) fn le16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

pub(crate) fn le32(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(word)
}

pub(crate) fn le64(bytes: &[u8], offset: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(word)
}
#[cfg(test)]
mod tests;
