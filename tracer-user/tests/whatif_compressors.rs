//! `nodescope whatif --compressors --image IMG` on a real image (mkfs.f2fs + sload.f2fs, the
//! simulator's small reader-test file set, built once and cached): one row per setting, each
//! row's lengths and slot mix the ones the simulator's own code computes for those blocks.
use std::process::Command;

use serde_json::Value;
use sim::{
    cache::admission::{self, Admission},
    compressors::{Compressor, SlotMix},
    f2fs::{Block, Image},
    fileset::{build_image, vm::VmFileSet},
};

mod common;

use common::{nodescope, scratch, NODESCOPE};

fn small_image() -> std::path::PathBuf {
    let set = VmFileSet {
        dirs: 4,
        files_per_dir: 8,
        shaped_blocks: vec![1, 80, 512],
        shaped_copies: 1,
        image_bytes: 128 << 20,
    };
    build_image(&set.manifest()).expect("mkfs.f2fs + sload.f2fs build the test image")
}

fn node_blocks(image: &std::path::Path) -> Vec<Box<Block>> {
    let image = Image::open(image).unwrap();
    image.nodes().unwrap().into_iter().map(|(_, b)| b).collect()
}

fn slots(row: &Value) -> SlotMix {
    let n = |key: &str| row["slots"][key].as_u64().unwrap() as usize;
    SlotMix {
        slot_256: n("slot_256"),
        slot_512: n("slot_512"),
        slot_1024: n("slot_1024"),
        none: n("none"),
    }
}

#[test]
fn json_rows_are_every_setting_measured_on_the_images_node_blocks() {
    let image = small_image();
    let blocks = node_blocks(&image);
    let output = nodescope(&[
        "whatif",
        "--compressors",
        "--image",
        image.to_str().unwrap(),
        "--json",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(
        report["node_blocks"].as_u64().unwrap() as usize,
        blocks.len()
    );
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["compressor"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = Compressor::all().iter().map(Compressor::name).collect();
    assert_eq!(names, expected);
    assert_eq!(names.len(), 16);

    // lz4: the slot mix admission gives these blocks (threshold 25 %: all a slot holds).
    let mut lz4_mix = SlotMix::default();
    for block in &blocks {
        match admission::compress(block, 25, &sim::cache::SlotSet::RFC) {
            Admission::Admit {
                slot_bytes: 256, ..
            } => lz4_mix.slot_256 += 1,
            Admission::Admit {
                slot_bytes: 512, ..
            } => lz4_mix.slot_512 += 1,
            Admission::Admit { .. } => lz4_mix.slot_1024 += 1,
            Admission::Reject { .. } => lz4_mix.none += 1,
        }
    }
    assert_eq!(slots(&rows[0]), lz4_mix);

    for (row, compressor) in rows.iter().zip(Compressor::all()) {
        let lengths: Vec<usize> = blocks
            .iter()
            .map(|b| compressor.compressed_len(&b[..]))
            .collect();
        let total: u64 = lengths.iter().map(|l| *l as u64).sum();
        let name = compressor.name();
        assert_eq!(
            row["blocks"].as_u64().unwrap() as usize,
            blocks.len(),
            "{name}"
        );
        assert_eq!(
            row["raw_bytes"].as_u64().unwrap(),
            4096 * blocks.len() as u64
        );
        assert_eq!(row["compressed_bytes"].as_u64().unwrap(), total, "{name}");
        assert_eq!(slots(row), SlotMix::of(lengths), "{name}");
        let ratio = row["ratio"].as_f64().unwrap();
        assert!((ratio - 4096.0 * blocks.len() as f64 / total as f64).abs() < 1e-9);
        for key in ["compress_mb_s", "decompress_mb_s"] {
            assert!(row[key].as_f64().unwrap() > 0.0, "{name} {key}");
        }
        assert!(row["compress_memory_bytes"].as_u64().unwrap() > 0, "{name}");
    }
}

#[test]
fn the_table_has_a_header_and_one_row_per_setting() {
    let image = small_image();
    let output = nodescope(&[
        "whatif",
        "--compressors",
        "--image",
        image.to_str().unwrap(),
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 + 16, "{text}");
    assert!(lines[0].contains("node blocks"), "{text}");
    assert!(lines[1].starts_with("compressor"), "{text}");
    for (line, compressor) in lines[2..].iter().zip(Compressor::all()) {
        let first = line.split_whitespace().next().unwrap();
        assert_eq!(first, compressor.name());
        assert_eq!(line.split_whitespace().count(), 10, "{line}");
    }
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = scratch("whatif-compressors");
    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![0u8; 8192]).unwrap();
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["whatif", "--compressors", "--image", junk.to_str().unwrap()],
            "as an F2FS image",
        ),
        (
            vec!["whatif", "--compressors", "--image", "/nonexistent/x.img"],
            "/nonexistent/x.img",
        ),
        (vec!["whatif", "--compressors"], "needs --image"),
    ];
    for (args, expected) in cases {
        let output = Command::new(NODESCOPE).args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}
