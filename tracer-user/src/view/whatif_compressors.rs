//! `nodescope whatif --compressors --image IMG`: every compressor setting (lz4 as the RFC, zstd
//! levels 1..=15) measured on the node blocks of an image, read through the simulator's F2FS
//! reader: ratio, compress and decompress MB/s, working memory, and the RFC's slot mix.
use std::{fmt::Write as _, path::Path};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use sim::{
    compressors::{Compressor, CompressorRow},
    f2fs::Image,
};

/// What `--json` prints: the image, its node blocks, one row per compressor.
#[derive(Serialize)]
struct CompressorsReport {
    image: String,
    node_blocks: usize,
    rows: Vec<CompressorRow>,
}

/// The table (or, with `json`, one JSON object) for every setting of [`Compressor::all`]. The
/// rows are measured one after another, not in parallel, so their speeds do not share cores.
pub(crate) fn compressors_table(image: &Path, json: bool) -> Result<String> {
    let blocks = node_blocks(image)?;
    let refs: Vec<&[u8]> = blocks.iter().map(|b| &b[..]).collect();
    let rows: Vec<CompressorRow> = Compressor::all()
        .iter()
        .map(|compressor| compressor.measure(&refs))
        .collect();
    let report = CompressorsReport {
        image: image.display().to_string(),
        node_blocks: blocks.len(),
        rows,
    };
    if json {
        return serde_json::to_string_pretty(&report).context("writing the compressors as JSON");
    }
    Ok(table(&report))
}

/// Every node block of the image, checked (footer, inode checksum) by the reader.
fn node_blocks(image: &Path) -> Result<Vec<Box<sim::f2fs::Block>>> {
    let opened = Image::open(image)
        .with_context(|| format!("opening {} as an F2FS image", image.display()))?;
    let blocks: Vec<_> = opened
        .nodes()
        .with_context(|| format!("reading the node blocks of {}", image.display()))?
        .into_iter()
        .map(|(_, block)| block)
        .collect();
    if blocks.is_empty() {
        bail!("{} has no node blocks to compress", image.display());
    }
    Ok(blocks)
}

fn table(report: &CompressorsReport) -> String {
    let mut out = String::new();
    let raw: u64 = report.rows.first().map_or(0, |r| r.raw_bytes);
    let _ = writeln!(
        out,
        "{} node blocks ({:.1} MiB) of {}; MB = 10^6 bytes; slots: blocks whose compressed \
         length fits the RFC's 256/512/1024-byte slots, or none",
        report.node_blocks,
        raw as f64 / f64::from(1u32 << 20),
        report.image
    );
    let _ = writeln!(
        out,
        "{:<10} {:>7} {:>11} {:>13} {:>11} {:>11} {:>7} {:>7} {:>7} {:>7}",
        "compressor",
        "ratio",
        "comp MB/s",
        "decomp MB/s",
        "comp mem",
        "decomp mem",
        "256",
        "512",
        "1024",
        "none"
    );
    for row in &report.rows {
        let _ = writeln!(
            out,
            "{:<10} {:>7.2} {:>11.1} {:>13.1} {:>11} {:>11} {:>7} {:>7} {:>7} {:>7}",
            row.compressor,
            row.ratio,
            row.compress_mb_s,
            row.decompress_mb_s,
            bytes(row.compress_memory_bytes),
            bytes(row.decompress_memory_bytes),
            row.slots.slot_256,
            row.slots.slot_512,
            row.slots.slot_1024,
            row.slots.none
        );
    }
    out
}

/// Bytes as B, KiB or MiB with one decimal, one word (the table splits on whitespace).
fn bytes(value: u64) -> String {
    match value {
        0..1024 => format!("{value}B"),
        1024..1_048_576 => format!("{:.1}KiB", value as f64 / 1024.0),
        _ => format!("{:.1}MiB", value as f64 / 1_048_576.0),
    }
}
