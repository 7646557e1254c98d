//! The reader on a real image made by mkfs.f2fs + sload.f2fs (a small file set, built once and
//! cached), and on damaged copies of it.
use std::{
    fs,
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
};

use super::{Image, NodeBlock, NodeKind, BLOCK_SIZE};
use crate::{
    fileset::{build_image, vm::VmFileSet},
    nodes::NodeSet,
};

fn small_fileset() -> VmFileSet {
    VmFileSet {
        dirs: 4,
        files_per_dir: 8,
        shaped_blocks: vec![1, 80, 512],
        shaped_copies: 1,
        image_bytes: 128 << 20,
    }
}

fn good_image() -> PathBuf {
    build_image(&small_fileset().manifest()).expect("mkfs.f2fs + sload.f2fs build the test image")
}

/// A private copy of the good image to damage, removed (with its directory) when dropped.
struct Copy {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Copy {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

fn copy(name: &str, len: Option<u64>) -> Copy {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join(name);
    let bytes = fs::read(good_image()).unwrap();
    let keep = len.map_or(bytes.len(), |l| l as usize);
    fs::write(&path, &bytes[..keep]).unwrap();
    Copy { path, _dir: dir }
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(bytes, offset)
        .unwrap();
}

fn open_error(path: &Path) -> String {
    match NodeSet::load(path) {
        Ok(_) => panic!("{} should not load", path.display()),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn reads_every_node_of_a_good_image() {
    let image = Image::open(&good_image()).unwrap();
    assert!(image.inode_checksums());
    let nodes = NodeSet::load(image.path()).unwrap();
    // root + files/ + 4 dirs + 32 files + shaped/ + 3 shaped files + sentinel; a 512-block
    // file fits its inode's addresses, so there are no direct nodes.
    assert_eq!(nodes.len(), 43);
    assert_eq!(image.checkpoint.valid_node_count, 43);
    assert_eq!(image.checkpoint.valid_inode_count, 43);
    let file = nodes
        .nid_of("files/d-3/f-7")
        .expect("path resolved from inode names");
    let block = nodes.block(file).unwrap();
    let node = NodeBlock(&block[..]);
    assert_eq!(
        (node.kind(), node.footer_nid(), node.name().as_str()),
        (NodeKind::Inode, file, "f-7")
    );
    assert_eq!(node.parent_ino(), nodes.nid_of("files/d-3").unwrap());
    assert!(node.has_inode_checksum(true));
    assert_eq!(nodes.nid_of(""), Some(image.superblock.root_ino));
    assert!(nodes.nid_of("sentinel").is_some());
}

#[test]
fn a_truncated_image_is_named_as_such() {
    let message = open_error(&copy("truncated.img", Some(16 << 20)));
    assert!(message.contains("is truncated"), "{message}");
    let tiny = open_error(&copy("tiny.img", Some(4096)));
    assert!(tiny.contains("too short"), "{tiny}");
}

#[test]
fn bad_magic_in_both_superblocks_is_reported() {
    let path = copy("magic.img", None);
    write_at(&path, 1024, &[0; 4]);
    write_at(&path, BLOCK_SIZE as u64 + 1024, &[0; 4]);
    let message = open_error(&path);
    assert!(
        message.contains("bad superblock magic 0x00000000"),
        "{message}"
    );
}

#[test]
fn a_damaged_primary_superblock_falls_back_to_the_backup() {
    let path = copy("primary.img", None);
    write_at(&path, 1024 + 200, b"damage");
    NodeSet::load(&path).expect("the backup superblock is intact");
    write_at(&path, BLOCK_SIZE as u64 + 1024 + 200, b"damage");
    let message = open_error(&path);
    assert!(message.contains("superblock CRC mismatch"), "{message}");
}

#[test]
fn a_corrupted_inode_fails_its_checksum() {
    let path = copy("inode.img", None);
    let image = Image::open(&path).unwrap();
    let nodes = NodeSet::load(&path).unwrap();
    let nid = nodes.nid_of("files/d-1/f-2").unwrap();
    let addr = image.nat.get(nid).unwrap().block_addr;
    write_at(&path, u64::from(addr) * BLOCK_SIZE as u64 + 24, &[0x5a]);
    let message = open_error(&path);
    assert!(
        message.contains(&format!("inode {nid} checksum mismatch")),
        "{message}"
    );
    // A footer naming another nid.
    write_at(
        &path,
        u64::from(addr) * BLOCK_SIZE as u64 + 4072,
        &7777u32.to_le_bytes(),
    );
    let message = open_error(&path);
    assert!(
        message.contains(&format!("node footer names nid 7777, expected {nid}")),
        "{message}"
    );
}

#[test]
fn corrupted_checkpoints_are_reported() {
    let path = copy("cp.img", None);
    let image = Image::open(&path).unwrap();
    let sb = &image.superblock;
    for pack in [sb.cp_blkaddr, sb.cp_blkaddr + sb.blocks_per_seg()] {
        write_at(&path, u64::from(pack) * BLOCK_SIZE as u64 + 8, &[0xee; 8]);
    }
    let message = open_error(&path);
    assert!(message.contains("no valid checkpoint"), "{message}");
    assert!(message.contains("CRC mismatch"), "{message}");
}

/// An inode block with an inline xattr area holding `entries` (index, name, value).
fn inode_with_xattrs(entries: &[(u8, &[u8], &[u8])]) -> Vec<u8> {
    let mut block = vec![0u8; BLOCK_SIZE];
    block[3] = super::xattr::F2FS_INLINE_XATTR;
    let mut at = 360 + (923 - 50) * 4 + 24;
    for (index, name, value) in entries {
        block[at] = *index;
        block[at + 1] = name.len() as u8;
        block[at + 2..at + 4].copy_from_slice(&(value.len() as u16).to_le_bytes());
        block[at + 4..at + 4 + name.len()].copy_from_slice(name);
        let value_at = at + 4 + name.len();
        block[value_at..value_at + value.len()].copy_from_slice(value);
        at = (value_at + value.len() + 3) & !3;
    }
    block
}

#[test]
fn inline_xattrs_are_read_in_order_up_to_the_zero_word() {
    let label = b"u:object_r:app_data_file:s0:c57,c256,c512,c768\0";
    let block = inode_with_xattrs(&[(9, b"c", &[2; 40]), (6, b"selinux", label)]);
    let found = super::xattr::inline_xattrs(&NodeBlock(&block)).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(
        (found[0].index, &found[0].name[..], found[0].value.len()),
        (9, &b"c"[..], 40)
    );
    assert_eq!((found[1].index, &found[1].value[..]), (6, &label[..]));
    // No inline xattr flag: nothing, whatever the area holds.
    let mut without = block.clone();
    without[3] = 0;
    assert!(super::xattr::inline_xattrs(&NodeBlock(&without))
        .unwrap()
        .is_empty());
}

#[test]
fn an_xattr_running_past_the_inline_area_is_an_error() {
    let block = inode_with_xattrs(&[(6, b"selinux", &[b'x'; 180])]);
    let error = super::xattr::inline_xattrs(&NodeBlock(&block)).unwrap_err();
    assert!(
        format!("{error:#}").contains("runs past the 200-byte inline area"),
        "{error:#}"
    );
}
