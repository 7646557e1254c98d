//! An inode's inline extended attributes (fs/f2fs/xattr.[ch]): the last
//! `DEFAULT_INLINE_XATTR_ADDRS` words of `i_addr`, starting with the 24-byte xattr header, then
//! entries (`e_name_index`, `e_name_len`, `e_value_size`, name, value; each padded to 4 bytes)
//! up to a zero word. Only what lives in the inode block is read: an xattr node
//! (`i_xattr_nid`) is another block.
use anyhow::{ensure, Result};

use super::{le16, node::NodeBlock};

/// `offsetof(struct f2fs_inode, i_addr)` and `DEF_ADDRS_PER_INODE`.
const I_ADDR: usize = 360;
const DEF_ADDRS_PER_INODE: usize = 923;
/// `DEFAULT_INLINE_XATTR_ADDRS`: without flexible_inline_xattr every inode keeps 50 words.
const DEFAULT_INLINE_XATTR_ADDRS: usize = 50;
/// `sizeof(struct f2fs_xattr_header)` and `sizeof(struct f2fs_xattr_entry)` without the name.
const XATTR_HEADER: usize = 24;
const XATTR_ENTRY: usize = 4;
/// `F2FS_INLINE_XATTR` in `i_inline`.
pub const F2FS_INLINE_XATTR: u8 = 0x01;
/// `F2FS_XATTR_INDEX_SECURITY` and `F2FS_XATTR_INDEX_ENCRYPTION` (fs/f2fs/xattr.h).
pub const INDEX_SECURITY: u8 = 6;
pub const INDEX_ENCRYPTION: u8 = 9;
/// `F2FS_XATTR_NAME_ENCRYPTION_CONTEXT`.
pub const ENCRYPTION_CONTEXT_NAME: &[u8] = b"c";

/// One extended attribute: its name index (the prefix), the name after it, the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    pub index: u8,
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

/// The inline xattrs of an inode block (none when it has no inline xattr area). An entry that
/// runs past the area is an error.
pub fn inline_xattrs(node: &NodeBlock) -> Result<Vec<Xattr>> {
    if node.inline_flags() & F2FS_INLINE_XATTR == 0 {
        return Ok(Vec::new());
    }
    let start = I_ADDR + (DEF_ADDRS_PER_INODE - DEFAULT_INLINE_XATTR_ADDRS) * 4;
    let area = &node.0[start..I_ADDR + DEF_ADDRS_PER_INODE * 4];
    let mut found = Vec::new();
    let mut at = XATTR_HEADER;
    while at + 4 <= area.len() && area[at..at + 4] != [0; 4] {
        ensure!(
            at + XATTR_ENTRY <= area.len(),
            "xattr entry at {at} is cut off"
        );
        let (index, name_len) = (area[at], usize::from(area[at + 1]));
        let value_len = usize::from(le16(area, at + 2));
        let name_at = at + XATTR_ENTRY;
        let end = name_at + name_len + value_len;
        ensure!(
            end <= area.len(),
            "xattr entry at {at} ({name_len}-byte name, {value_len}-byte value) runs past the \
             {}-byte inline area",
            area.len()
        );
        found.push(Xattr {
            index,
            name: area[name_at..name_at + name_len].to_vec(),
            value: area[name_at + name_len..end].to_vec(),
        });
        at = (end + 3) & !3;
    }
    Ok(found)
}
