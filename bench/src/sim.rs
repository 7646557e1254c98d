//! `nodescope-bench sim` (`cargo xtask bench sim`): figures, never a pass/fail on speed.
//!
//! - model accesses per second: a whole `vm-replay` run (compression on: creation, worker,
//!   shrinker, replay) and the bare access path (random lookups over a mixed cache);
//! - LZ4 on the image's real node blocks: lz4_flex (what the simulator uses) side by side with
//!   the C liblz4 (through lz4-sys) on the same blocks, compress and decompress, as a ratio.
use std::{hint::black_box, time::Instant};

use anyhow::{ensure, Result};
use lz4_sys::{c_char, c_int, LZ4_compressBound, LZ4_compress_default, LZ4_decompress_safe};
use sim::{
    cache::{NodeCache, NodeCheck},
    disk::Disk,
    events::Emitter,
    f2fs::{node::RequestedType, Block},
    scenario::{run_static, vm_replay, ScenarioName},
};
use tracer_common::knobs::Knobs;

pub fn main() -> Result<()> {
    let nodes = vm_replay::rfc_nodes()?;
    let blocks: Vec<&Block> = nodes
        .nids()
        .iter()
        .filter_map(|nid| nodes.block(*nid).map(|b| &**b))
        .collect();
    println!(
        "sim-bench: {} real node blocks from {}",
        blocks.len(),
        nodes.image_path.display()
    );
    model_throughput()?;
    access_path(&nodes)?;
    lz4_side_by_side(&blocks)
}

fn model_throughput() -> Result<()> {
    let started = Instant::now();
    let run = run_static(ScenarioName::VmReplay, Knobs::DEFAULT, 1)?;
    let seconds = started.elapsed().as_secs_f64();
    let lookups = run.whole.lookups;
    println!(
        "model, whole vm-replay run (compression on): {lookups} lookups, {} conversions, {} reclaims, \
         {:.1} virtual s in {seconds:.3} s: {:.0} accesses/s, {:.0}x real time",
        run.whole.conversions,
        run.whole.reclaims,
        run.whole.duration_ns as f64 / 1e9,
        lookups as f64 / seconds,
        run.whole.duration_ns as f64 / 1e9 / seconds
    );
    Ok(())
}

/// The two access paths on their own: a restore of every node (LZ4 decompress plus the seven
/// checks), then a raw hit on every node.
fn access_path(nodes: &std::sync::Arc<sim::nodes::NodeSet>) -> Result<()> {
    let check = NodeCheck {
        inode_checksums: nodes.inode_checksums,
        checksum_seed: nodes.checksum_seed,
    };
    let mut cache = NodeCache::new(check);
    let mut disk = Disk::new(nodes.clone());
    let mut em = Emitter::new(0, false);
    let nids = nodes.nids();
    for nid in nids {
        cache.get(*nid, RequestedType::Any, &mut disk, &mut em)?;
    }
    const ROUNDS: u32 = 5;
    let (mut restore_s, mut hit_s) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        // Clear REFERENCED, then compress everything (untimed).
        while cache.queue_len(tracer_common::QUEUE_RAW) > 12 {
            let mut pass = sim::cache::worker::WorkerPass::start(&mut cache, 25);
            while !matches!(
                pass.step(&mut cache, &mut em),
                sim::cache::worker::WorkerStep::Done { .. }
            ) {}
            if pass.stats.converted == 0 && pass.stats.second_chances == 0 {
                break;
            }
        }
        let started = Instant::now();
        for nid in nids {
            black_box(cache.get(*nid, RequestedType::Any, &mut disk, &mut em)?);
        }
        restore_s += started.elapsed().as_secs_f64();
        let started = Instant::now();
        for nid in nids {
            black_box(cache.get(*nid, RequestedType::Any, &mut disk, &mut em)?);
        }
        hit_s += started.elapsed().as_secs_f64();
    }
    let total = f64::from(ROUNDS) * nids.len() as f64;
    println!(
        "model, access path: {} restores ({:.0}/s), {} raw hits ({:.0}/s)",
        cache.stats.restores,
        total / restore_s,
        cache.stats.raw_hits,
        total / hit_s
    );
    Ok(())
}

struct Lz4Figures {
    compress_mb_s: f64,
    decompress_mb_s: f64,
    compressed_bytes: usize,
}

fn measure(
    blocks: &[&Block],
    compress: impl Fn(&Block, &mut [u8]) -> usize,
    decompress: impl Fn(&[u8], &mut Block) -> usize,
) -> Result<Lz4Figures> {
    const ROUNDS: usize = 20;
    let mut scratch = vec![0u8; 8192];
    let payloads: Vec<Vec<u8>> = blocks
        .iter()
        .map(|b| {
            let len = compress(b, &mut scratch);
            scratch[..len].to_vec()
        })
        .collect();
    let mut out = [0u8; 4096];
    for (payload, block) in payloads.iter().zip(blocks) {
        ensure!(
            decompress(payload, &mut out) == 4096 && out == **block,
            "round trip failed"
        );
    }
    let bytes = (blocks.len() * 4096 * ROUNDS) as f64;
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for block in blocks {
            black_box(compress(black_box(block), &mut scratch));
        }
    }
    let compress_mb_s = bytes / started.elapsed().as_secs_f64() / 1e6;
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for payload in &payloads {
            black_box(decompress(black_box(payload), &mut out));
        }
    }
    let decompress_mb_s = bytes / started.elapsed().as_secs_f64() / 1e6;
    Ok(Lz4Figures {
        compress_mb_s,
        decompress_mb_s,
        compressed_bytes: payloads.iter().map(Vec::len).sum(),
    })
}

fn c_compress(block: &Block, out: &mut [u8]) -> usize {
    // SAFETY: LZ4_compressBound is a pure function of its argument.
    let bound = unsafe { LZ4_compressBound(4096) };
    assert!(out.len() >= bound as usize);
    // SAFETY: the source is 4096 readable bytes and the destination has `bound` writable bytes,
    // the most LZ4_compress_default can write for 4096 input bytes.
    let written = unsafe {
        LZ4_compress_default(
            block.as_ptr() as *const c_char,
            out.as_mut_ptr() as *mut c_char,
            4096,
            bound,
        )
    };
    written as usize
}

fn c_decompress(payload: &[u8], out: &mut Block) -> usize {
    // SAFETY: the source slice is `payload.len()` readable bytes, the destination 4096 writable
    // bytes; LZ4_decompress_safe never reads or writes past either bound.
    let written = unsafe {
        LZ4_decompress_safe(
            payload.as_ptr() as *const c_char,
            out.as_mut_ptr() as *mut c_char,
            payload.len() as c_int,
            4096,
        )
    };
    written.max(0) as usize
}

fn lz4_side_by_side(blocks: &[&Block]) -> Result<()> {
    let flex = measure(
        blocks,
        |block, out| lz4_flex::block::compress_into(block, out).expect("buffer large enough"),
        |payload, out| lz4_flex::block::decompress_into(payload, out).unwrap_or(0),
    )?;
    let c = measure(blocks, c_compress, c_decompress)?;
    let mean = |f: &Lz4Figures| f.compressed_bytes as f64 / blocks.len() as f64;
    println!(
        "lz4 on {} node blocks (mean compressed size: lz4_flex {:.1} B, liblz4 {:.1} B)",
        blocks.len(),
        mean(&flex),
        mean(&c)
    );
    println!(
        "  {:<12} {:>14} {:>16}",
        "", "compress MB/s", "decompress MB/s"
    );
    println!(
        "  {:<12} {:>14.0} {:>16.0}",
        "lz4_flex", flex.compress_mb_s, flex.decompress_mb_s
    );
    println!(
        "  {:<12} {:>14.0} {:>16.0}",
        "liblz4 (C)", c.compress_mb_s, c.decompress_mb_s
    );
    println!(
        "  {:<12} {:>14.2} {:>16.2}",
        "flex / C",
        flex.compress_mb_s / c.compress_mb_s,
        flex.decompress_mb_s / c.decompress_mb_s
    );
    Ok(())
}
