//! Compressors on the node blocks of a real image (mkfs.f2fs + sload.f2fs, built once and
//! cached), cross-checked against the cache's own admission.
use std::collections::HashMap;

use super::*;
use crate::{
    cache::admission::{self, Admission},
    f2fs::Image,
    fileset::{build_image, vm::VmFileSet},
};

/// The f2fs reader tests' file set (same fingerprint: the same cached image).
fn image_blocks() -> Vec<Box<Block>> {
    let set = VmFileSet {
        dirs: 4,
        files_per_dir: 8,
        shaped_blocks: vec![1, 80, 512],
        shaped_copies: 1,
        image_bytes: 128 << 20,
    };
    let path = build_image(&set.manifest()).expect("mkfs.f2fs + sload.f2fs build the test image");
    let image = Image::open(&path).unwrap();
    image.nodes().unwrap().into_iter().map(|(_, b)| b).collect()
}

#[test]
fn names_parse_back_and_bad_names_are_refused() {
    let all = Compressor::all();
    assert_eq!(all.len(), 16);
    assert_eq!(all[0], Compressor::Lz4);
    assert_eq!(all[15], Compressor::Zstd(15));
    for compressor in &all {
        assert_eq!(Compressor::parse(&compressor.name()).unwrap(), *compressor);
    }
    assert_eq!(Compressor::Zstd(3).name(), "zstd-3");
    assert_eq!(Compressor::parse(" LZ4 ").unwrap(), Compressor::Lz4);
    for bad in ["zstd-0", "zstd-16", "zstd--1", "zstd-x", "zstd", "gzip", ""] {
        let err = Compressor::parse(bad).unwrap_err().to_string();
        assert!(err.contains("zstd") || err.contains("lz4"), "{bad}: {err}");
    }
}

#[test]
fn slot_mix_takes_the_smallest_slot_that_holds_the_length() {
    let mix = SlotMix::of([1, 256, 257, 512, 513, 1024, 1025, 4096]);
    assert_eq!(
        mix,
        SlotMix {
            slot_256: 2,
            slot_512: 2,
            slot_1024: 2,
            none: 2
        }
    );
    assert_eq!(mix.fitting(), 6);
}

/// The LZ4 row's lengths are the cache's: its slot mix is what admission (threshold 25 %,
/// everything a slot holds) decides for every node block of the image.
#[test]
fn lz4_row_on_a_real_image_matches_admission() {
    let blocks = image_blocks();
    let refs: Vec<&[u8]> = blocks.iter().map(|b| &b[..]).collect();
    let row = Compressor::Lz4.measure(&refs);

    let mut admitted: HashMap<u32, usize> = HashMap::new();
    let mut rejected = 0;
    let mut total = 0u64;
    for block in &blocks {
        match admission::compress(block, 25, &crate::cache::SlotSet::RFC) {
            Admission::Admit {
                slot_bytes, clen, ..
            } => {
                *admitted.entry(slot_bytes).or_default() += 1;
                total += u64::from(clen);
            }
            Admission::Reject { clen } => {
                rejected += 1;
                total += u64::from(clen);
            }
        }
        assert_eq!(Compressor::Lz4.compressed_len(&block[..]), {
            let mut out = [0u8; lz4::MAX_COMPRESSED];
            lz4::compress_into(block, &mut out)
        });
    }
    let expected = SlotMix {
        slot_256: admitted.get(&256).copied().unwrap_or(0),
        slot_512: admitted.get(&512).copied().unwrap_or(0),
        slot_1024: admitted.get(&1024).copied().unwrap_or(0),
        none: rejected,
    };
    assert_eq!(row.slots, expected);
    assert_eq!(row.blocks, blocks.len());
    assert_eq!(row.raw_bytes, blocks.len() as u64 * 4096);
    assert_eq!(row.compressed_bytes, total);
    assert_eq!(row.slots.fitting() + row.slots.none, blocks.len());
    // 32 small files, 4 directories, the root and the shaped files' inodes and direct nodes:
    // node blocks compress well, most into the smallest slot.
    assert!(blocks.len() >= 40, "{} node blocks", blocks.len());
    assert!(row.slots.slot_256 * 2 > blocks.len(), "{row:?}");
    assert!(row.ratio > 4.0, "{row:?}");
    assert_eq!(row.compress_memory_bytes, 8192);
    assert_eq!(row.decompress_memory_bytes, 0);
    assert!(
        row.compress_mb_s > 0.0 && row.decompress_mb_s > 0.0,
        "{row:?}"
    );
}

/// Every zstd level round-trips every node block through an independent decoder
/// (`zstd::stream::decode_all`), and `compressed_len` (a reused per-thread context) gives the
/// measured lengths.
#[test]
fn zstd_round_trips_real_node_blocks_at_every_level() {
    let blocks = image_blocks();
    let refs: Vec<&[u8]> = blocks.iter().map(|b| &b[..]).collect();
    for level in ZSTD_LEVELS {
        let compressor = Compressor::Zstd(level);
        let mut codec = Codec::new(compressor);
        let mut lengths = Vec::new();
        for block in &refs {
            let len = codec.compress(block);
            let decoded = zstd::stream::decode_all(codec.payload(len)).unwrap();
            assert_eq!(decoded, *block, "zstd-{level}");
            assert_eq!(compressor.compressed_len(block), len, "zstd-{level}");
            lengths.push(len);
        }
        let row = compressor.measure(&refs);
        assert_eq!(row.compressor, format!("zstd-{level}"));
        assert_eq!(
            row.compressed_bytes,
            lengths.iter().map(|l| *l as u64).sum::<u64>()
        );
        assert_eq!(row.slots, SlotMix::of(lengths.iter().copied()));
        assert!(row.compress_memory_bytes > 0 && row.decompress_memory_bytes > 0);
    }
}

/// Blocks that are not 4 KiB (not node blocks) still compress and round-trip.
#[test]
fn other_lengths_round_trip() {
    let odd: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 13) as u8).collect();
    for compressor in [Compressor::Lz4, Compressor::Zstd(1)] {
        let row = compressor.measure(&[&odd[..], &[][..]]);
        assert_eq!(row.raw_bytes, 1000);
        assert_eq!(row.blocks, 2);
        assert!(row.compressed_bytes < 1000, "{row:?}");
    }
}
