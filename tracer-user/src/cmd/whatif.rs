//! `nodescope whatif RECORDING --image IMG` (or `--device /dev/X`): replay a recording's
//! access trace (record with `--accesses`) through the simulator's cache (`sim::whatif`, the
//! code `nodescope sim` runs) on a grid of settings, each node's real block read from the image
//! through the project's F2FS reader and its compressed size computed once per compressor.
//! Axes: budget, threshold x interval (and compression off), slot sets, reclaim weights,
//! compressor. Grid points run in parallel on all cores, a progress bar on stderr when it is a
//! terminal. One table per RFC question (view/whatif_tables.rs), or `--json`; `--plot FILE`
//! draws node reads against attributed memory, the Pareto front marked (view/whatif_plot.rs);
//! `--compressors --image IMG` measures every compressor setting on the image's node blocks
//! instead (view/whatif_compressors.rs).
use std::{
    io::IsTerminal as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sim::{
    cache::{SlotSet, Weights},
    compressors::Compressor,
    nodes::NodeSet,
    whatif::{
        self,
        grid::{cells, payload_sizes, run_grid, Axes, WeightChoice},
        Reclaim, Trace,
    },
};
use tracer_common::{Event, EventKind};

use crate::{
    output::OutputFile,
    source::replay::ReplaySource,
    system::{self, block::block_device, major_minor},
    view::{
        stdout::{closed_is_success, print},
        whatif_compressors::compressors_table,
        whatif_plot::{self, PlotPoint},
        whatif_tables::{self, Question, Row, WaitTable},
    },
};

#[derive(Args)]
pub(crate) struct WhatifArgs {
    /// A recording made with `--accesses` (not needed with --compressors).
    recording: Option<PathBuf>,
    /// The recorded device's F2FS image.
    #[arg(long, value_name = "IMG")]
    image: Option<PathBuf>,
    /// The recorded F2FS block device itself, opened read-only (instead of --image). Without
    /// either, on the host that made the recording: the device its events name, found from
    /// their device number (/sys/dev/block/MAJ:MIN).
    #[arg(long, value_name = "DEV")]
    device: Option<PathBuf>,
    /// Attributed-memory budgets held during pressure episodes (comma-separated; KiB/MiB), or
    /// `recorded`: each entry the recorded shrinker scanned (a node page the recording saw
    /// dropped, or a second chance it gave, in recordings with the RFC's events) has the cache's
    /// shrinker scan the same share of the replayed cache as it was of the recorded kernel's
    /// node pages, in the shrinker's effective count (a compressed entry counts its slot's
    /// share of a block).
    #[arg(long, default_value = "1MiB,2MiB,3MiB,4MiB,6MiB")]
    budget: String,
    /// Replay as if the recorded kernel had evicted only N of the inodes it evicted (recordings
    /// with inode_evict events): those whose blocks were looked up longest ago; the others
    /// stay cached, and their reloads' lookups are taken out. N at most the recorded
    /// evictions: which other inodes a kernel would evict, a recording cannot show.
    #[arg(long, value_name = "N")]
    inode_evictions: Option<u64>,
    /// node_compress_threshold values for compression on (percent, comma-separated).
    #[arg(long, default_value = "25")]
    threshold: String,
    /// node_compress_interval values (ms, comma-separated).
    #[arg(long, default_value = "1000")]
    interval: String,
    /// Compressed slot-size sets, comma-separated, sizes separated by '/' (e.g.
    /// 256/512/1024,128/256/512/1024,512/1024/2048). The first is the other tables' setting.
    #[arg(long, default_value = "256/512/1024")]
    slots: String,
    /// Reclaim weights raw:slot queues, comma-separated (e.g. memory,1:1:1:1). `memory` is the
    /// RFC's rule for any slot set: each entry's bytes in units of the sizes' common divisor
    /// (16:1:2:4 for 256/512/1024). A list applies to the slot sets it has one number per
    /// queue for.
    #[arg(long, default_value = "memory")]
    weights: String,
    /// Compressors whose sizes admission uses, comma-separated: lz4, zstd1 .. zstd15.
    #[arg(long, default_value = "lz4")]
    compressor: String,
    /// One JSON array of grid points (every axis named) instead of the tables.
    #[arg(long)]
    json: bool,
    /// Draw node reads against attributed memory, off and on, the Pareto front and the
    /// RFC's defaults (25 %, 1000 ms) marked, to FILE (.svg or .png): the points of table (c).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// With --plot: replace FILE when it exists (without it, an existing file is refused).
    #[arg(long, requires = "plot")]
    force: bool,
    /// Measure lz4 and zstd levels 1..15 on the image's node blocks instead: ratio, compress
    /// and decompress MB/s, working memory, and how many blocks fit 256/512/1024-byte slots.
    #[arg(long)]
    compressors: bool,
}

pub(crate) fn run(args: WhatifArgs) -> Result<()> {
    let given = match (&args.image, &args.device) {
        (Some(image), None) => Some((image.clone(), "image")),
        (None, Some(device)) => Some((device.clone(), "device")),
        (Some(_), Some(_)) => bail!("whatif takes --image IMG or --device /dev/X, not both"),
        (None, None) => None,
    };
    if args.compressors {
        let Some((source, _)) = &given else {
            bail!("whatif --compressors needs --image IMG or --device /dev/X: the node blocks it measures");
        };
        return closed_is_success(
            compressors_table(source, args.json).and_then(|table| print(&table)),
        );
    }
    if let Some(path) = &args.plot {
        // Before the grid runs, not after.
        OutputFile::new(args.force).check(path)?;
    }
    let Some(recording) = &args.recording else {
        bail!("whatif needs a recording made with --accesses: nodescope whatif REC --image IMG");
    };
    let axes = axes(&args)?;
    let (trace, waits) =
        read_trace(recording).with_context(|| format!("{}", recording.display()))?;
    let trace = match args.inode_evictions {
        Some(kept) => trace
            .with_inode_evictions(kept)
            .with_context(|| format!("--inode-evictions {kept}"))?,
        None => trace,
    };
    let (source, what) = match given {
        Some(given) => given,
        None => (recorded_device(recording, trace.dev)?, "device"),
    };
    let source = &source;
    let nodes = Arc::new(
        NodeSet::load(source)
            .with_context(|| format!("{} is not a readable F2FS {what}", source.display()))?,
    );
    trace.check_nids(&nodes)?;
    let sizes = payload_sizes(&nodes, &axes.compressors);
    let cells = cells(&axes);
    let progress = progress_bar(cells.len());
    let outcomes = run_grid(&trace, &nodes, &sizes, &axes, &cells, &|| progress.inc(1))?;
    progress.finish_and_clear();
    let rows: Vec<Row> = cells
        .iter()
        .zip(&outcomes)
        .map(|(cell, outcome)| whatif_tables::row(&axes, cell, outcome, waits.as_ref()))
        .collect();
    let tables = whatif_tables::tables(&axes, &cells, &rows);
    if args.json {
        let points = whatif_tables::json_points(&axes, &cells, outcomes, &tables, waits.as_ref());
        println!("{}", serde_json::to_string(&points)?);
    } else {
        closed_is_success(print(&whatif_tables::render(
            &trace,
            &tables,
            &rows,
            waits.as_ref(),
        )))?;
    }
    if let Some(path) = &args.plot {
        let knobs_table = tables
            .iter()
            .find(|t| t.question == Question::ThresholdInterval)
            .expect("table (c) is always made");
        let points: Vec<PlotPoint> = knobs_table
            .rows
            .iter()
            .map(|i| rows[*i].plot_point())
            .collect();
        whatif_plot::draw(&points, path, OutputFile::new(args.force))
            .with_context(|| format!("drawing {}", path.display()))?;
        say!("whatif: picture written to {}", path.display());
    }
    Ok(())
}

/// Without --image or --device: the device the recording's events name, when `whatif` runs
/// on the host that recorded it (found from its number through /sys/dev/block; on a phone the
/// dm device F2FS is mounted on). Says which device it took.
fn recorded_device(recording: &Path, dev: u32) -> Result<PathBuf> {
    let header = ReplaySource::offline(recording)?.header().clone();
    let number = major_minor(dev);
    let here = system::hostname();
    if header.host != here {
        bail!(
            "{} was recorded on {}, this is {here}: give --image IMG (an image of its device \
             {number}) or --device /dev/X",
            recording.display(),
            header.host
        );
    }
    let device = block_device(Path::new("/"), dev).with_context(|| {
        format!("the recording's device {number}: give --image IMG or --device /dev/X")
    })?;
    let name = device.file_name().map(|n| n.to_string_lossy().into_owned());
    if !header.devices.is_empty() && !name.is_some_and(|n| header.devices.contains(&n)) {
        bail!(
            "{} is {}, which was not one of the recording's F2FS devices ({}): give --image \
             IMG or --device /dev/X",
            number,
            device.display(),
            header.devices.join(", ")
        );
    }
    say!(
        "whatif: reading node blocks from {} (the recording's device {number}, found \
         through /sys/dev/block/{number})",
        device.display()
    );
    Ok(device)
}

/// The busiest device's trace, in two passes over the file: memory is bounded by the trace's
/// step limit, never by how many events a (small, compressible) recording claims. With it the
/// wait prediction's latency table from that device's timed lookups (issue 51), if any.
fn read_trace(path: &Path) -> Result<(Trace, Option<WaitTable>)> {
    let mut counts = whatif::AccessesByDevice::default();
    each_event(path, |event| {
        counts.count(event);
        Ok(())
    })?;
    let dev = counts.busiest()?;
    let mut builder = whatif::TraceBuilder::new(dev);
    let mut timed = tracer_common::activity::Counters::default();
    each_event(path, |event| {
        if event.dev == dev
            && matches!(
                event.kind(),
                Some(EventKind::NodeAccess | EventKind::Restore)
            )
        {
            timed.record(&event.decode());
        }
        builder.add(event)
    })?;
    let waits = WaitTable::measured(&timed.retrievals, &timed.restore_latency);
    Ok((builder.finish()?, waits))
}

fn each_event(path: &Path, visit: impl FnMut(&Event) -> Result<()>) -> Result<()> {
    ReplaySource::offline(path)?.each_event(visit)
}

fn axes(args: &WhatifArgs) -> Result<Axes> {
    let as_recorded = args.budget.trim() == "recorded";
    let axes = Axes {
        budgets: if as_recorded {
            vec![0]
        } else {
            list(&args.budget, parse_bytes)?
        },
        reclaim: if as_recorded {
            Reclaim::AsRecorded
        } else {
            Reclaim::Budget
        },
        thresholds: list(&args.threshold, |s| Ok(s.parse::<u32>()?))?,
        intervals: list(&args.interval, |s| Ok(s.parse::<u32>()?))?,
        slot_sets: list(&args.slots, SlotSet::parse)?,
        weights: list(&args.weights, |s| match s {
            "memory" => Ok(WeightChoice::Memory),
            _ => Ok(WeightChoice::Fixed(Weights::parse(s)?)),
        })?,
        compressors: list(&args.compressor, Compressor::parse)?,
    };
    if let Some(bad) = axes.thresholds.iter().find(|t| **t == 0 || **t > 100) {
        bail!("--threshold {bad}: thresholds are 1 to 100 percent (compression off is always run)");
    }
    check_grid_size(&axes)?;
    for choice in &axes.weights {
        if let WeightChoice::Fixed(w) = choice {
            if !axes.slot_sets.iter().any(|s| choice.for_slots(s).is_some()) {
                bail!(
                    "--weights {}: {} numbers fit no slot set given (raw, then one per slot size)",
                    w.label(),
                    w.len()
                );
            }
        }
    }
    Ok(axes)
}

/// The most grid points one run takes: each replays the whole trace, and each keeps its
/// outcome and row, so the plain product of long axes would run for days and allocate
/// gigabytes before the first answer.
pub(crate) const MAX_GRID_POINTS: u64 = 10_000;

/// Refuses a grid over [`MAX_GRID_POINTS`], naming the product (an upper bound: slot sets and
/// weights that do not fit each other are left out later).
fn check_grid_size(axes: &Axes) -> Result<()> {
    let on_axes = [
        ("slot sets", axes.slot_sets.len()),
        ("weights", axes.weights.len()),
        ("compressors", axes.compressors.len()),
        ("thresholds", axes.thresholds.len()),
        ("intervals", axes.intervals.len()),
    ];
    let on_points = on_axes
        .iter()
        .try_fold(1u64, |product, (_, n)| product.checked_mul(*n as u64));
    let points = on_points
        .and_then(|on| on.checked_add(1))
        .and_then(|per_budget| per_budget.checked_mul(axes.budgets.len() as u64));
    if points.is_some_and(|points| points <= MAX_GRID_POINTS) {
        return Ok(());
    }
    let factors: Vec<String> = on_axes
        .iter()
        .map(|(name, n)| format!("{n} {name}"))
        .collect();
    let shown = points.map_or_else(|| "more than 2^64".to_string(), |p| p.to_string());
    bail!(
        "the grid has {shown} points ({} budgets x (off + {})), more than the {MAX_GRID_POINTS} \
         whatif runs: give fewer values per axis",
        axes.budgets.len(),
        factors.join(" x ")
    )
}

fn list<T>(text: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    text.split(',')
        .map(|s| parse(s.trim()).with_context(|| format!("bad grid value {s:?}")))
        .collect()
}

/// "3MiB", "512KiB" or bytes.
fn parse_bytes(text: &str) -> Result<u64> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let scale = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => bail!("unknown unit {other:?} (B, KiB, MiB, GiB)"),
    };
    Ok(number.parse::<u64>()? * scale)
}

/// Grids of more than a few points show their progress on stderr, when it is a terminal.
fn progress_bar(points: usize) -> ProgressBar {
    const SHOWN_FROM: usize = 12;
    if points < SHOWN_FROM || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template("whatif {bar:40} {pos}/{len} points, {elapsed} ({eta} left)")
            .expect("a valid template");
    ProgressBar::with_draw_target(Some(points as u64), ProgressDrawTarget::stderr())
        .with_style(style)
}

#[cfg(test)]
mod tests;
