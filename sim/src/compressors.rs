//! Compressors a node cache could use, measured on real node blocks: LZ4 as the RFC runs it
//! (through the simulator's own codec, [`crate::cache::lz4`]) and zstd levels 1..=15 (the
//! `zstd` crate, libzstd bundled), the comparison the btrfs zstd-levels patch tabulated for
//! Silesia (ratio, compress and decompress MB/s, working memory per level).
//!
//! - [`Compressor::compressed_len`] really compresses one block (a context per thread, reused).
//! - [`Compressor::measure`] compresses and decompresses a set of blocks, checks every round
//!   trip, and returns one [`CompressorRow`]: ratio, speeds (MB = 10^6 bytes, as the patch and
//!   lzbench count), working memory, and the slot mix (how many blocks fit the RFC's 256, 512
//!   and 1024-byte slots, or none).
//!
//! Working memory, and how it is known:
//! - LZ4: lz4_flex (0.14) compresses an input shorter than 64 KiB with `HashTable4KU16`, 4096
//!   u16 entries = 8,192 bytes, allocated per call ([`LZ4_COMPRESS_TABLE_BYTES`], from its
//!   source `block/hashtable.rs`). The simulator's decoder keeps no state beyond the output
//!   block: 0 bytes.
//! - zstd: `ZSTD_sizeof_CCtx` / `ZSTD_sizeof_DCtx` of fresh contexts after they have
//!   compressed and decompressed these blocks at the level. libzstd sizes its tables for the
//!   4 KiB source (a one-shot call knows the size), so this is what compressing node blocks
//!   costs, far less than the level's tables for large inputs that the btrfs patch reports.
use std::{cell::RefCell, time::Instant};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use zstd::zstd_safe::{self, CCtx, DCtx};

use crate::{
    cache::{lz4, SlotSet},
    f2fs::Block,
};

/// The zstd levels compared (those of the btrfs patch's table).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=15;
/// lz4_flex's hash table for inputs below 64 KiB: 4096 entries of u16.
pub const LZ4_COMPRESS_TABLE_BYTES: u64 = 4096 * 2;
/// Each speed is timed over at least this long (whole passes over the blocks), so a small
/// image still gives a stable figure.
const MIN_TIMED_SECONDS: f64 = 0.2;

/// One compressor setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compressor {
    /// LZ4 block format, as the RFC compresses node blocks.
    Lz4,
    /// zstd at a level (one-shot frames, no dictionary).
    Zstd(i32),
}

/// The slots the RFC's compressed queues use: how many blocks fit each (the smallest that
/// holds the compressed length) and how many fit none (longer than 1024 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SlotMix {
    pub slot_256: usize,
    pub slot_512: usize,
    pub slot_1024: usize,
    pub none: usize,
}

/// One compressor measured on a set of blocks.
#[derive(Clone, Debug, Serialize)]
pub struct CompressorRow {
    pub compressor: String,
    pub blocks: usize,
    pub raw_bytes: u64,
    pub compressed_bytes: u64,
    /// raw_bytes / compressed_bytes.
    pub ratio: f64,
    /// Raw bytes compressed a second, in MB (10^6 bytes).
    pub compress_mb_s: f64,
    /// Raw bytes produced a second by decompression, in MB (10^6 bytes).
    pub decompress_mb_s: f64,
    /// Working memory of the compressor (see the module documentation for how it is known).
    pub compress_memory_bytes: u64,
    /// Working memory of the decompressor.
    pub decompress_memory_bytes: u64,
    pub slots: SlotMix,
}

thread_local! {
    /// A zstd compression context per thread, reused by `compressed_len`.
    static ZSTD_CCTX: RefCell<CCtx<'static>> = RefCell::new(CCtx::create());
}

impl SlotMix {
    /// The slot mix of these compressed lengths.
    pub fn of(lengths: impl IntoIterator<Item = usize>) -> SlotMix {
        let mut mix = SlotMix::default();
        for len in lengths {
            let slot = SlotSet::RFC
                .sizes()
                .iter()
                .map(|bytes| *bytes as usize)
                .find(|bytes| len <= *bytes);
            match slot {
                Some(256) => mix.slot_256 += 1,
                Some(512) => mix.slot_512 += 1,
                Some(_) => mix.slot_1024 += 1,
                None => mix.none += 1,
            }
        }
        mix
    }

    /// Blocks that fit a slot.
    pub fn fitting(&self) -> usize {
        self.slot_256 + self.slot_512 + self.slot_1024
    }
}

impl Compressor {
    /// Every setting compared: lz4, then zstd 1..=15.
    pub fn all() -> Vec<Compressor> {
        std::iter::once(Compressor::Lz4)
            .chain(ZSTD_LEVELS.map(Compressor::Zstd))
            .collect()
    }

    /// "lz4", "zstd-3".
    pub fn name(&self) -> String {
        match self {
            Compressor::Lz4 => "lz4".to_string(),
            Compressor::Zstd(level) => format!("zstd-{level}"),
        }
    }

    /// The inverse of [`Compressor::name`]; zstd levels outside 1..=15 are refused.
    pub fn parse(text: &str) -> Result<Compressor> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("lz4") {
            return Ok(Compressor::Lz4);
        }
        let lower = text.to_ascii_lowercase();
        let Some(level) = lower
            .strip_prefix("zstd-")
            .or_else(|| lower.strip_prefix("zstd"))
        else {
            bail!("{text:?} is not a compressor: lz4 or zstd1 .. zstd15 (or zstd-1 .. zstd-15)");
        };
        let level: i32 = level
            .parse()
            .with_context(|| format!("{text:?}: the zstd level is not a number"))?;
        if !ZSTD_LEVELS.contains(&level) {
            bail!("{text:?}: zstd levels are 1 to 15");
        }
        Ok(Compressor::Zstd(level))
    }

    /// The compressed length of `block`, really compressing it.
    pub fn compressed_len(&self, block: &[u8]) -> usize {
        match self {
            Compressor::Lz4 => lz4_len(block),
            Compressor::Zstd(level) => ZSTD_CCTX.with(|cctx| {
                let mut out = vec![0u8; zstd_safe::compress_bound(block.len())];
                zstd_compress(&mut cctx.borrow_mut(), &mut out, block, *level)
            }),
        }
    }

    /// Compress and decompress `blocks` (each pass timed whole, repeated for at least
    /// [`MIN_TIMED_SECONDS`]); every round trip is checked byte for byte.
    pub fn measure(&self, blocks: &[&[u8]]) -> CompressorRow {
        let mut codec = Codec::new(*self);
        let raw_bytes: u64 = blocks.iter().map(|b| b.len() as u64).sum();
        let payloads: Vec<Vec<u8>> = blocks
            .iter()
            .map(|b| {
                let len = codec.compress(b);
                codec.payload(len).to_vec()
            })
            .collect();
        let compress_seconds = timed_passes(|| {
            for block in blocks {
                std::hint::black_box(codec.compress(block));
            }
        });
        let mut restored = vec![0u8; blocks.iter().map(|b| b.len()).max().unwrap_or(0)];
        for (block, payload) in blocks.iter().zip(&payloads) {
            let len = codec.decompress(payload, &mut restored[..block.len()]);
            assert!(
                restored[..len] == **block,
                "{} did not restore a block it compressed",
                self.name()
            );
        }
        let decompress_seconds = timed_passes(|| {
            for (block, payload) in blocks.iter().zip(&payloads) {
                std::hint::black_box(codec.decompress(payload, &mut restored[..block.len()]));
            }
        });
        let compressed_bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
        let (compress_memory_bytes, decompress_memory_bytes) = codec.memory();
        CompressorRow {
            compressor: self.name(),
            blocks: blocks.len(),
            raw_bytes,
            compressed_bytes,
            ratio: ratio(raw_bytes, compressed_bytes),
            compress_mb_s: raw_bytes as f64 / compress_seconds / 1e6,
            decompress_mb_s: raw_bytes as f64 / decompress_seconds / 1e6,
            compress_memory_bytes,
            decompress_memory_bytes,
            slots: SlotMix::of(payloads.iter().map(Vec::len)),
        }
    }
}

impl std::fmt::Display for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for Compressor {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Compressor> {
        Compressor::parse(text)
    }
}

fn ratio(raw: u64, compressed: u64) -> f64 {
    if compressed == 0 {
        0.0
    } else {
        raw as f64 / compressed as f64
    }
}

/// Seconds a pass of `pass` takes, averaged over as many passes as fill
/// [`MIN_TIMED_SECONDS`] (at least one).
fn timed_passes(mut pass: impl FnMut()) -> f64 {
    let started = Instant::now();
    let mut passes = 0u32;
    loop {
        pass();
        passes += 1;
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed >= MIN_TIMED_SECONDS {
            return elapsed / f64::from(passes);
        }
    }
}

/// LZ4 through the simulator's codec for a 4 KiB block (what admission runs); other lengths
/// (not node blocks) through lz4_flex directly, the same encoder.
fn lz4_len(block: &[u8]) -> usize {
    let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(block.len())];
    lz4_compress(block, &mut out)
}

/// Compress into `out` (room for lz4_flex's bound), returning the payload length.
fn lz4_compress(block: &[u8], out: &mut [u8]) -> usize {
    match (
        <&Block>::try_from(block),
        <&mut [u8; lz4::MAX_COMPRESSED]>::try_from(&mut *out),
    ) {
        (Ok(block), Ok(out)) => lz4::compress_into(block, out),
        _ => lz4_flex::block::compress_into(block, out).expect("the output holds lz4_flex's bound"),
    }
}

fn zstd_compress(cctx: &mut CCtx<'_>, out: &mut [u8], block: &[u8], level: i32) -> usize {
    cctx.compress(out, block, level).unwrap_or_else(|code| {
        // The output holds compress_bound(len): libzstd cannot fail on it.
        panic!(
            "zstd-{level} failed with room for its bound: {}",
            zstd_safe::get_error_name(code)
        )
    })
}

/// One compressor's contexts for a measurement: fresh, so their sizes are this level's, and
/// an output buffer reused for every block, so the timed loops allocate nothing.
struct Codec {
    kind: CodecKind,
    out: Vec<u8>,
}

enum CodecKind {
    Lz4,
    Zstd {
        level: i32,
        cctx: CCtx<'static>,
        dctx: DCtx<'static>,
    },
}

impl Codec {
    fn new(compressor: Compressor) -> Codec {
        let kind = match compressor {
            Compressor::Lz4 => CodecKind::Lz4,
            Compressor::Zstd(level) => CodecKind::Zstd {
                level,
                cctx: CCtx::create(),
                dctx: DCtx::create(),
            },
        };
        Codec {
            kind,
            out: Vec::new(),
        }
    }

    /// Compress `block` into the output buffer; the payload is `payload(len)`.
    fn compress(&mut self, block: &[u8]) -> usize {
        let bound = match self.kind {
            CodecKind::Lz4 => lz4_flex::block::get_maximum_output_size(block.len()),
            CodecKind::Zstd { .. } => zstd_safe::compress_bound(block.len()),
        };
        if self.out.len() < bound {
            self.out.resize(bound, 0);
        }
        match &mut self.kind {
            CodecKind::Lz4 => lz4_compress(block, &mut self.out[..bound]),
            CodecKind::Zstd { level, cctx, .. } => {
                zstd_compress(cctx, &mut self.out[..bound], block, *level)
            }
        }
    }

    fn payload(&self, len: usize) -> &[u8] {
        &self.out[..len]
    }

    /// Decompress `payload` into `out` (the block's length), returning the length written.
    /// A payload this codec made always decodes, so failing to is a bug, not bad input.
    fn decompress(&mut self, payload: &[u8], out: &mut [u8]) -> usize {
        match &mut self.kind {
            CodecKind::Lz4 => match <&mut Block>::try_from(&mut *out) {
                Ok(block) => lz4::decompress_into(payload, block)
                    .expect("the simulator's LZ4 decoder reads what lz4_flex wrote"),
                Err(_) => lz4_flex::block::decompress_into(payload, out)
                    .expect("lz4_flex reads what it wrote"),
            },
            CodecKind::Zstd { dctx, .. } => dctx.decompress(out, payload).unwrap_or_else(|code| {
                panic!(
                    "zstd did not decompress its own frame: {}",
                    zstd_safe::get_error_name(code)
                )
            }),
        }
    }

    /// (compress, decompress) working memory in bytes.
    fn memory(&self) -> (u64, u64) {
        match &self.kind {
            CodecKind::Lz4 => (LZ4_COMPRESS_TABLE_BYTES, 0),
            CodecKind::Zstd { cctx, dctx, .. } => (cctx.sizeof() as u64, dctx.sizeof() as u64),
        }
    }
}

#[cfg(test)]
#[path = "compressors_tests.rs"]
mod tests;
