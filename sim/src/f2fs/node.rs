//! Node blocks: inodes, direct and indirect nodes. The footer (last 24 bytes) names the block's
//! nid and owner inode; `ofs_of_node` tells an inode (offset 0) from the others.
use anyhow::{ensure, Result};

use super::{crc, le16, le32, BLOCK_SIZE};

/// `offsetof(struct f2fs_node, footer)`.
const FOOTER_OFFSET: usize = BLOCK_SIZE - 24;
/// `OFFSET_BIT_SHIFT`: the footer flag keeps the node offset above three flag bits.
const OFFSET_BIT_SHIFT: u32 = 3;
/// `XATTR_NODE_OFFSET`: the offset every xattr node carries.
const XATTR_NODE_OFFSET: u32 = u32::MAX >> OFFSET_BIT_SHIFT;
/// Inode fields (`struct f2fs_inode`).
const I_MODE: usize = 0;
const I_ADVISE: usize = 2;
const I_INLINE: usize = 3;
const I_UID: usize = 4;
const I_GID: usize = 8;
const I_SIZE: usize = 16;
const I_GENERATION: usize = 68;
const I_PINO: usize = 84;
const I_NAMELEN: usize = 88;
const I_NAME: usize = 92;
const I_EXTRA_ISIZE: usize = 360;
const I_INODE_CHECKSUM: usize = 368;
/// `F2FS_EXTRA_ATTR` in `i_inline`.
const F2FS_EXTRA_ATTR: u8 = 0x20;
/// `F2FS_INLINE_DATA` in `i_inline`.
pub const F2FS_INLINE_DATA: u8 = 0x02;
const S_IFMT: u16 = 0o170000;
const S_IFDIR: u16 = 0o040000;
const S_IFREG: u16 = 0o100000;
/// `FADVISE_ENCRYPT_BIT` and `FADVISE_ENC_NAME_BIT` in `i_advise`: the file is encrypted, and
/// so is the name the inode keeps.
pub const FADVISE_ENCRYPT: u8 = 0x04;
pub const FADVISE_ENC_NAME: u8 = 0x08;

/// What a node block is, from its footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NodeKind {
    Inode,
    /// A direct or an indirect node.
    NonInode,
    Xattr,
}

/// What a node block is to its file, from its offset (`ofs_of_node`): the inode (0), an xattr
/// node, or a direct, indirect or double indirect node, by `IS_DNODE`'s arithmetic
/// (fs/f2fs/node.h): the inode's five nids are two direct nodes (offsets 1, 2), two indirect
/// ones (3 and 4 + NIDS_PER_BLOCK) and a double indirect one (5 + 2 * NIDS_PER_BLOCK), whose
/// indirect children come every NIDS_PER_BLOCK + 1 offsets from 6 + 2 * NIDS_PER_BLOCK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeType {
    Inode,
    Direct,
    Indirect,
    DoubleIndirect,
    Xattr,
}

/// `NIDS_PER_BLOCK`: the nids an indirect node holds, (4096 - 24) / 4.
const NIDS_PER_BLOCK: u32 = 1018;

impl NodeType {
    pub const ALL: [NodeType; 5] = [
        NodeType::Inode,
        NodeType::Direct,
        NodeType::Indirect,
        NodeType::DoubleIndirect,
        NodeType::Xattr,
    ];

    pub fn of_offset(ofs: u32) -> NodeType {
        const N: u32 = NIDS_PER_BLOCK;
        match ofs {
            0 => NodeType::Inode,
            XATTR_NODE_OFFSET => NodeType::Xattr,
            3 => NodeType::Indirect,
            o if o == 4 + N => NodeType::Indirect,
            o if o == 5 + 2 * N => NodeType::DoubleIndirect,
            o if o >= 6 + 2 * N && (o - (6 + 2 * N)).is_multiple_of(N + 1) => NodeType::Indirect,
            _ => NodeType::Direct,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodeType::Inode => "inode",
            NodeType::Direct => "direct",
            NodeType::Indirect => "indirect",
            NodeType::DoubleIndirect => "double indirect",
            NodeType::Xattr => "xattr",
        }
    }
}

/// The node type a caller asks for (`enum node_type` of `__get_node_page`); the last check of
/// the restore path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestedType {
    Any,
    Inode,
    NonInode,
    Xattr,
}

impl RequestedType {
    pub fn accepts(self, kind: NodeKind) -> bool {
        match self {
            RequestedType::Any => true,
            RequestedType::Inode => kind == NodeKind::Inode,
            RequestedType::NonInode => kind != NodeKind::Inode,
            RequestedType::Xattr => kind == NodeKind::Xattr,
        }
    }

    /// What a reader of a node of this kind asks for.
    pub fn for_kind(kind: NodeKind) -> RequestedType {
        match kind {
            NodeKind::Inode => RequestedType::Inode,
            NodeKind::NonInode => RequestedType::NonInode,
            NodeKind::Xattr => RequestedType::Xattr,
        }
    }
}

/// A view of one node block.
#[derive(Clone, Copy)]
pub struct NodeBlock<'a>(pub &'a [u8]);

impl<'a> NodeBlock<'a> {
    pub fn footer_nid(&self) -> u32 {
        le32(self.0, FOOTER_OFFSET)
    }

    pub fn footer_ino(&self) -> u32 {
        le32(self.0, FOOTER_OFFSET + 4)
    }

    pub fn ofs_of_node(&self) -> u32 {
        le32(self.0, FOOTER_OFFSET + 8) >> OFFSET_BIT_SHIFT
    }

    pub fn node_type(&self) -> NodeType {
        NodeType::of_offset(self.ofs_of_node())
    }

    pub fn kind(&self) -> NodeKind {
        match self.ofs_of_node() {
            0 => NodeKind::Inode,
            XATTR_NODE_OFFSET => NodeKind::Xattr,
            _ => NodeKind::NonInode,
        }
    }

    /// `f2fs_sanity_check_node_footer`'s identity part: the footer names the nid asked for and
    /// an inode's footer names itself as owner.
    pub fn check_footer(&self, nid: u32) -> Result<()> {
        let (found_nid, ino) = (self.footer_nid(), self.footer_ino());
        ensure!(
            found_nid == nid,
            "node footer names nid {found_nid}, expected {nid}"
        );
        ensure!(ino != 0, "node footer of nid {nid} names owner inode 0");
        if self.kind() == NodeKind::Inode {
            ensure!(ino == nid, "inode block of nid {nid} names owner {ino}");
        }
        Ok(())
    }

    pub fn is_dir(&self) -> bool {
        le16(self.0, I_MODE) & S_IFMT == S_IFDIR
    }

    pub fn is_regular(&self) -> bool {
        le16(self.0, I_MODE) & S_IFMT == S_IFREG
    }

    /// Permission bits and set-id bits of `i_mode`.
    pub fn permissions(&self) -> u32 {
        u32::from(le16(self.0, I_MODE) & 0o7777)
    }

    pub fn uid(&self) -> u32 {
        le32(self.0, I_UID)
    }

    pub fn gid(&self) -> u32 {
        le32(self.0, I_GID)
    }

    pub fn advise(&self) -> u8 {
        self.0[I_ADVISE]
    }

    /// The name kept in the inode, raw (ciphertext when `FADVISE_ENC_NAME` is set).
    pub fn name_bytes(&self) -> &'a [u8] {
        let len = (le32(self.0, I_NAMELEN) as usize).min(255);
        &self.0[I_NAME..I_NAME + len]
    }

    pub fn inline_flags(&self) -> u8 {
        self.0[I_INLINE]
    }

    pub fn size(&self) -> u64 {
        super::le64(self.0, I_SIZE)
    }

    pub fn parent_ino(&self) -> u32 {
        le32(self.0, I_PINO)
    }

    /// The inode's own name (F2FS keeps it for recovery), lossy UTF-8.
    pub fn name(&self) -> String {
        let len = (le32(self.0, I_NAMELEN) as usize).min(255);
        String::from_utf8_lossy(&self.0[I_NAME..I_NAME + len]).into_owned()
    }

    /// Whether this block carries an inode checksum (`f2fs_enable_inode_chksum`).
    pub fn has_inode_checksum(&self, feature_on: bool) -> bool {
        feature_on
            && self.kind() == NodeKind::Inode
            && self.inline_flags() & F2FS_EXTRA_ATTR != 0
            && I_INODE_CHECKSUM + 4 <= I_EXTRA_ISIZE + le16(self.0, I_EXTRA_ISIZE) as usize
    }

    pub fn stored_inode_checksum(&self) -> u32 {
        le32(self.0, I_INODE_CHECKSUM)
    }

    /// `f2fs_inode_chksum`: CRC of ino and generation seeded by the uuid CRC, then the whole
    /// block with the checksum field read as zero.
    pub fn computed_inode_checksum(&self, seed: u32) -> u32 {
        let ino = &self.0[FOOTER_OFFSET + 4..FOOTER_OFFSET + 8];
        let generation = &self.0[I_GENERATION..I_GENERATION + 4];
        let mut sum = crc::crc32_le(crc::crc32_le(seed, ino), generation);
        sum = crc::crc32_le(sum, &self.0[..I_INODE_CHECKSUM]);
        sum = crc::crc32_le(sum, &[0; 4]);
        crc::crc32_le(sum, &self.0[I_INODE_CHECKSUM + 4..BLOCK_SIZE])
    }

    /// `f2fs_inode_chksum_verify`; blocks without a checksum pass.
    pub fn check_inode_checksum(&self, feature_on: bool, seed: u32) -> Result<()> {
        if !self.has_inode_checksum(feature_on) {
            return Ok(());
        }
        let (stored, computed) = (
            self.stored_inode_checksum(),
            self.computed_inode_checksum(seed),
        );
        ensure!(
            stored == computed,
            "inode {} checksum mismatch: stored {stored:#010x}, computed {computed:#010x}",
            self.footer_nid()
        );
        Ok(())
    }
}

/// `sbi->s_chksum_seed`: CRC of the uuid from all ones.
pub fn checksum_seed(uuid: &[u8; 16]) -> u32 {
    crc::crc32_le(!0, uuid)
}

#[cfg(test)]
mod type_tests {
    use super::*;

    /// The offsets of a file's nodes as F2FS numbers them (N = 1018 nids per indirect node).
    #[test]
    fn offsets_name_their_node_type_as_is_dnode_does() {
        let cases = [
            (0, NodeType::Inode),
            (1, NodeType::Direct),
            (2, NodeType::Direct),
            (3, NodeType::Indirect),
            (4, NodeType::Direct),
            (3 + 1018, NodeType::Direct),
            (4 + 1018, NodeType::Indirect),
            (5 + 1018, NodeType::Direct),
            (4 + 2 * 1018, NodeType::Direct),
            (5 + 2 * 1018, NodeType::DoubleIndirect),
            (6 + 2 * 1018, NodeType::Indirect),
            (7 + 2 * 1018, NodeType::Direct),
            (6 + 2 * 1018 + 1019, NodeType::Indirect),
            (7 + 2 * 1018 + 1019, NodeType::Direct),
            (XATTR_NODE_OFFSET, NodeType::Xattr),
        ];
        for (ofs, want) in cases {
            assert_eq!(NodeType::of_offset(ofs), want, "offset {ofs}");
        }
    }
}
