//! Corrupt compressed copies of real node blocks (the RFC image's), every byte and every
//! length, and check the restore: it serves the original block or rejects the copy and reads
//! the disk, never a corrupt block, never a panic. The expected reason of each corruption comes
//! from an independent decoder (lz4_flex's), so the test also cross-checks ours.
use std::sync::Arc;

use tracer_common::{RESTORE_FAIL_CRC, RESTORE_FAIL_LZ4_LEN, RESTORE_FAIL_PAYLOAD_LEN};

use super::{lz4, Compressed, NodeCache, NodeCheck, Served};
use crate::{
    disk::Disk,
    events::Emitter,
    f2fs::{node::RequestedType, Block, NodeBlock, NodeKind},
    nodes::NodeSet,
    scenario::vm_replay,
    testutil::Rig,
};

/// A few real blocks: the best, the median and the worst compressing retained ones and a
/// non-inode node if one is retained; (nid, block) with the image's checksum settings.
fn real_blocks() -> (Vec<(u32, Box<Block>)>, NodeCheck) {
    let nodes = vm_replay::rfc_nodes().expect("the RFC image");
    let mut sized: Vec<(usize, u32, NodeKind)> = nodes
        .nids()
        .iter()
        .map(|nid| {
            let block = nodes.block(*nid).unwrap();
            let mut out = [0u8; lz4::MAX_COMPRESSED];
            let clen = lz4::compress_into(block, &mut out);
            (clen, *nid, NodeBlock(&block[..]).kind())
        })
        .filter(|(clen, ..)| *clen <= 1024)
        .collect();
    sized.sort_unstable_by_key(|(clen, nid, _)| (*clen, *nid));
    let mut picked = vec![
        sized[0].1,
        sized[sized.len() / 2].1,
        sized[sized.len() - 1].1,
    ];
    picked.extend(sized.iter().find(|s| s.2 != NodeKind::Inode).map(|s| s.1));
    picked.sort_unstable();
    picked.dedup();
    let blocks = picked
        .iter()
        .map(|nid| (*nid, Box::new(**nodes.block(*nid).unwrap())))
        .collect();
    let check = NodeCheck {
        inode_checksums: nodes.inode_checksums,
        checksum_seed: nodes.checksum_seed,
    };
    (blocks, check)
}

/// What the restore must do with `payload` in place of the block's copy, by lz4_flex's
/// decoder: the original back, a CRC mismatch, or a bad LZ4 length.
fn expected(payload: &[u8], original: &Block) -> Served {
    let mut out = [0u8; 4096];
    match lz4_flex::block::decompress_into(payload, &mut out) {
        _ if payload.is_empty() => Served::RestoreFailedThenRead(RESTORE_FAIL_PAYLOAD_LEN),
        Ok(4096) if out == *original => Served::Restored,
        Ok(4096) => Served::RestoreFailedThenRead(RESTORE_FAIL_CRC),
        _ => Served::RestoreFailedThenRead(RESTORE_FAIL_LZ4_LEN),
    }
}

/// A fresh cache holding `nid` compressed, tampered with by `change`, then accessed: what it
/// served, after checking that the block it now holds is the disk's.
fn restore_tampered(
    nodes: &Arc<NodeSet>,
    check: NodeCheck,
    nid: u32,
    change: impl FnOnce(&mut Compressed),
) -> Served {
    let mut r = Rig {
        cache: NodeCache::new(check),
        disk: Disk::new(nodes.clone()),
        em: Emitter::new(7, false),
    };
    r.load([nid]);
    assert_eq!(r.pass(25).converted, 1, "nid {nid} compresses");
    assert!(r.cache.tamper(nid, change));
    let (served, _) = r
        .cache
        .get(nid, RequestedType::Any, &mut r.disk, &mut r.em)
        .unwrap();
    let held = r.cache.entry(nid).unwrap().raw().unwrap().clone();
    assert_eq!(&held[..], &r.disk.peek(nid).unwrap()[..], "nid {nid}");
    served
}

#[test]
fn every_corrupted_byte_and_every_truncation_is_caught() {
    let (blocks, check) = real_blocks();
    assert!(blocks.len() >= 3, "picked {} blocks", blocks.len());
    let nodes = Arc::new(NodeSet::from_blocks(
        blocks.clone(),
        check.inode_checksums,
        check.checksum_seed,
    ));
    let (mut restored, mut rejected) = (0, 0);
    for (nid, original) in &blocks {
        let mut scratch = [0u8; lz4::MAX_COMPRESSED];
        let clen = lz4::compress_into(original, &mut scratch);
        let payload = &scratch[..clen];
        for at in 0..clen {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut corrupt = payload.to_vec();
                corrupt[at] ^= mask;
                let want = expected(&corrupt, original);
                let got = restore_tampered(&nodes, check, *nid, |c| c.slot[at] ^= mask);
                assert_eq!(got, want, "nid {nid} byte {at} ^ {mask:#x}");
                if got == Served::Restored {
                    restored += 1;
                } else {
                    rejected += 1;
                }
            }
        }
        // A truncated block never decodes to 4096 bytes: the decoder stops early or fails.
        for len in 0..clen {
            let want = if len == 0 {
                RESTORE_FAIL_PAYLOAD_LEN
            } else {
                RESTORE_FAIL_LZ4_LEN
            };
            let got = restore_tampered(&nodes, check, *nid, |c| c.clen = len as u32);
            assert_eq!(
                got,
                Served::RestoreFailedThenRead(want),
                "nid {nid} cut to {len}"
            );
            assert_eq!(expected(&payload[..len], original), got, "nid {nid} {len}");
        }
    }
    // Most flips must be rejected; a few decode to the very same block (an offset into a run
    // of zeros moved within the run) and are served, which is right.
    assert!(
        rejected > 10 * restored,
        "{rejected} rejected, {restored} restored"
    );
}

#[test]
fn our_decoder_agrees_with_lz4_flex_on_every_corruption() {
    let (blocks, _) = real_blocks();
    for (nid, original) in &blocks {
        let mut scratch = [0u8; lz4::MAX_COMPRESSED];
        let clen = lz4::compress_into(original, &mut scratch);
        let mut ours = [0u8; 4096];
        assert_eq!(
            lz4::decompress_into(&scratch[..clen], &mut ours),
            Some(4096)
        );
        assert_eq!(ours, **original, "nid {nid} round trip");
        for at in 0..clen {
            // Every single-bit flip, and every value at the first bytes (token, literal lengths).
            let values: Vec<u8> = match at {
                0..16 => (0..=255).collect(),
                _ => (0..8).map(|bit| scratch[at] ^ (1 << bit)).collect(),
            };
            for value in values {
                let mut corrupt = scratch[..clen].to_vec();
                corrupt[at] = value;
                let mut theirs = [0u8; 4096];
                let flex = lz4_flex::block::decompress_into(&corrupt, &mut theirs).ok();
                let got = lz4::decompress_into(&corrupt, &mut ours);
                assert_eq!(got, flex, "nid {nid} byte {at} = {value:#x}");
                if let Some(len) = got {
                    assert_eq!(ours[..len], theirs[..len], "nid {nid} byte {at} = {value}");
                }
            }
        }
    }
}

#[test]
fn overlapping_matches_repeat_their_pattern() {
    // Literals "abc", then a match of 10 at offset 3: "abcabcabcabca"; then literal "!".
    let payload = [0x36, b'a', b'b', b'c', 3, 0, 0x10, b'!'];
    let mut out = [0u8; 4096];
    assert_eq!(lz4::decompress_into(&payload, &mut out), Some(14));
    assert_eq!(&out[..14], b"abcabcabcabca!");
    // Offset 0, an offset before the start, a match running past 4096, a block ending with a
    // match: all refused.
    for bad in [
        &[0x10, b'a', 0, 0, 0x00, b'x'][..],
        &[0x10, b'a', 2, 0, 0x00, b'x'],
        &[
            0x1f, b'a', 1, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
            255, 255, 255, 0, 0x00, b'x',
        ],
        &[0x10, b'a', 1, 0],
    ] {
        assert_eq!(lz4::decompress_into(bad, &mut out), None, "{bad:?}");
    }
}
