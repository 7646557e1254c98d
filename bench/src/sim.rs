//! `nodescope-bench sim` (`cargo xtask bench sim`): figures, never a pass/fail on speed.
//!
//! - model accesses per second: a whole `vm-replay` run (compression on: creation, worker,
//!   shrinker, replay) and the bare access path (random lookups over a mixed cache);
//! - LZ4 on the image's real node blocks: the simulator's codec (`sim::cache::lz4`, what
//!   admission and restore call) side by side with the C liblz4 (through lz4-sys) on the same
//!   blocks, compress and decompress, as a ratio (ours / C).
//!
//! `--json` also prints the LZ4 figures as one JSON object (`lz4_decompress_ratio`,
//! `lz4_compress_ratio`, ...) after the text.
use std::{hint::black_box, time::Instant};

use anyhow::{bail, ensure, Result};
use lz4_sys::{c_char, c_int, LZ4_compressBound, LZ4_compress_default, LZ4_decompress_safe};
use serde::Serialize;
use sim::{
    cache::{
        lz4::{self, MAX_COMPRESSED},
        NodeCache, NodeCheck,
    },
    disk::Disk,
    events::Emitter,
    f2fs::{node::RequestedType, Block},
    scenario::{run_static, vm_replay, ScenarioName},
};
use tracer_common::knobs::Knobs;

pub fn main(args: &[String]) -> Result<()> {
    let json = match args {
        [] => false,
        [flag] if flag == "--json" => true,
        _ => bail!("nodescope-bench sim takes only --json, not {args:?}"),
    };
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
    let lz4 = lz4_side_by_side(&blocks)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&lz4)?);
    }
    Ok(())
}

fn model_throughput() -> Result<()> {
    let started = Instant::now();
    let run = run_static(ScenarioName::VmReplay, Knobs::DEFAULT, 1)?;
    let seconds = started.elapsed().as_secs_f64();
    let lookups = run.whole.cache.lookups;
    println!(
        "model, whole vm-replay run (compression on): {lookups} lookups, {} conversions, {} reclaims, \
         {:.1} virtual s in {seconds:.3} s: {:.0} accesses/s, {:.0}x real time",
        run.whole.events().conversions,
        run.whole.events().reclaims.total(),
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
        cache.stats.events.restores,
        total / restore_s,
        cache.stats.raw_hits,
        total / hit_s
    );
    Ok(())
}

/// Throughput of one codec on the blocks, in MB/s of raw (4 KiB) data.
#[derive(Clone, Copy, Default)]
struct Lz4Figures {
    compress_mb_s: f64,
    decompress_mb_s: f64,
}

/// One codec: compress a block into a buffer of `MAX_COMPRESSED` bytes, decompress a payload.
struct Codec {
    compress: fn(&Block, &mut [u8; MAX_COMPRESSED]) -> usize,
    decompress: fn(&[u8], &mut Block) -> usize,
}

const OURS: Codec = Codec {
    compress: lz4::compress_into,
    decompress: |payload, out| lz4::decompress_into(payload, out).unwrap_or(0),
};
const LIBLZ4: Codec = Codec {
    compress: c_compress,
    decompress: c_decompress,
};

impl Codec {
    /// Every block's payload, after checking that each round-trips exactly.
    fn payloads(&self, blocks: &[&Block]) -> Result<Vec<Vec<u8>>> {
        let mut scratch = [0u8; MAX_COMPRESSED];
        let mut out = [0u8; 4096];
        let mut payloads = Vec::with_capacity(blocks.len());
        for block in blocks {
            let clen = (self.compress)(block, &mut scratch);
            let payload = scratch[..clen].to_vec();
            ensure!(
                (self.decompress)(&payload, &mut out) == 4096 && out == **block,
                "round trip failed"
            );
            payloads.push(payload);
        }
        Ok(payloads)
    }

    /// One timed pass: compress every block `rounds` times, then decompress every payload.
    fn pass(&self, blocks: &[&Block], payloads: &[Vec<u8>], rounds: usize) -> Lz4Figures {
        let mut scratch = [0u8; MAX_COMPRESSED];
        let mut out = [0u8; 4096];
        let bytes = (blocks.len() * 4096 * rounds) as f64;
        let started = Instant::now();
        for _ in 0..rounds {
            for block in blocks {
                black_box((self.compress)(black_box(block), &mut scratch));
            }
        }
        let compress_mb_s = bytes / started.elapsed().as_secs_f64() / 1e6;
        let started = Instant::now();
        for _ in 0..rounds {
            for payload in payloads {
                black_box((self.decompress)(black_box(payload), &mut out));
            }
        }
        let decompress_mb_s = bytes / started.elapsed().as_secs_f64() / 1e6;
        Lz4Figures {
            compress_mb_s,
            decompress_mb_s,
        }
    }
}

fn c_compress(block: &Block, out: &mut [u8; MAX_COMPRESSED]) -> usize {
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

/// What `--json` prints.
#[derive(Serialize)]
struct Lz4Report {
    blocks: usize,
    mean_compressed_bytes_ours: f64,
    mean_compressed_bytes_c: f64,
    ours_compress_mb_s: f64,
    ours_decompress_mb_s: f64,
    c_compress_mb_s: f64,
    c_decompress_mb_s: f64,
    lz4_compress_ratio: f64,
    lz4_decompress_ratio: f64,
}

/// Ours and C alternate pass by pass (so that a busy machine slows both alike); each codec's
/// figure is its best pass.
fn lz4_side_by_side(blocks: &[&Block]) -> Result<Lz4Report> {
    const PASSES: usize = 9;
    const ROUNDS: usize = 10;
    let ours_payloads = OURS.payloads(blocks)?;
    let c_payloads = LIBLZ4.payloads(blocks)?;
    let best = |a: Lz4Figures, b: Lz4Figures| Lz4Figures {
        compress_mb_s: a.compress_mb_s.max(b.compress_mb_s),
        decompress_mb_s: a.decompress_mb_s.max(b.decompress_mb_s),
    };
    let (mut ours, mut c) = (Lz4Figures::default(), Lz4Figures::default());
    for _ in 0..PASSES {
        ours = best(ours, OURS.pass(blocks, &ours_payloads, ROUNDS));
        c = best(c, LIBLZ4.pass(blocks, &c_payloads, ROUNDS));
    }
    let mean = |payloads: &[Vec<u8>]| {
        payloads.iter().map(Vec::len).sum::<usize>() as f64 / blocks.len() as f64
    };
    let report = Lz4Report {
        blocks: blocks.len(),
        mean_compressed_bytes_ours: mean(&ours_payloads),
        mean_compressed_bytes_c: mean(&c_payloads),
        ours_compress_mb_s: ours.compress_mb_s,
        ours_decompress_mb_s: ours.decompress_mb_s,
        c_compress_mb_s: c.compress_mb_s,
        c_decompress_mb_s: c.decompress_mb_s,
        lz4_compress_ratio: ours.compress_mb_s / c.compress_mb_s,
        lz4_decompress_ratio: ours.decompress_mb_s / c.decompress_mb_s,
    };
    print_lz4(&report);
    Ok(report)
}

fn print_lz4(r: &Lz4Report) {
    println!(
        "lz4 on {} node blocks, best of alternating passes (mean compressed size: ours {:.1} B, \
         liblz4 {:.1} B)",
        r.blocks, r.mean_compressed_bytes_ours, r.mean_compressed_bytes_c
    );
    println!(
        "  {:<22} {:>14} {:>16}",
        "", "compress MB/s", "decompress MB/s"
    );
    println!(
        "  {:<22} {:>14.0} {:>16.0}",
        "ours (sim::cache::lz4)", r.ours_compress_mb_s, r.ours_decompress_mb_s
    );
    println!(
        "  {:<22} {:>14.0} {:>16.0}",
        "liblz4 (C)", r.c_compress_mb_s, r.c_decompress_mb_s
    );
    println!(
        "  {:<22} {:>14.2} {:>16.2}",
        "ours / C", r.lz4_compress_ratio, r.lz4_decompress_ratio
    );
}
