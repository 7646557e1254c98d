//! The access programs' layout (`AccessLayout`) and their exact counts' indices.

/// Where the access programs (tracer-ebpf/src/access.rs) find what they read, written by
/// userspace into the `ACCESS_LAYOUT` array map (index 0) before attaching: struct member
/// offsets from BTF for the node lookup kprobe, and the field offsets of
/// `filemap:mm_filemap_delete_from_page_cache` from its format file. Nothing is compiled in.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AccessLayout {
    /// Offset of `struct f2fs_sb_info.sb` (a `struct super_block *`).
    pub sbi_sb: u32,
    /// Offset of `struct super_block.s_dev` (dev_t, the encoding tracepoints print).
    pub sb_s_dev: u32,
    /// Offset of `struct f2fs_sb_info.node_ino_num`: the superblock's node inode number.
    pub sbi_node_ino: u32,
    /// Offsets of the eviction tracepoint's `i_ino` (8 bytes), `index` (8) and `s_dev` (4).
    pub evict_ino: u16,
    pub evict_index: u16,
    pub evict_dev: u16,
    pub _pad: u16,
}

/// `ACCESS_COUNTS` indices: exact per-CPU counts of what the access programs saw.
pub const ACCESS_COUNT_LOOKUPS: u32 = 0;
pub const ACCESS_COUNT_EVICTIONS: u32 = 1;
pub const ACCESS_COUNT_SLOTS: u32 = 2;
