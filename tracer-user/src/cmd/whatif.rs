//! `nodescope whatif RECORDING --image IMG`: replay a recording's access trace (record with
//! `--accesses`) through the simulator's cache (`sim::whatif`, the code `nodescope sim` runs)
//! on a grid of settings, each node's real block read from the image through the project's
//! F2FS reader and its LZ4 size computed once. Grid points run in parallel on all cores.
//! `--plot FILE` draws node reads against attributed memory, the Pareto front marked
//! (view/whatif_plot.rs); `--compressors --image IMG` measures every compressor setting on the
//! image's node blocks instead (view/whatif_compressors.rs).
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use sim::{
    cache::{Payload, PayloadSizes},
    nodes::NodeSet,
    whatif::{self, Outcome, Settings, Trace},
};
use tracer_common::{knobs::Knobs, Event};

use crate::{
    record::reader::{self, Item},
    view::{
        stdout::{closed_is_success, print},
        whatif_compressors::compressors_table,
        whatif_plot::{self, PlotPoint},
    },
};

#[derive(Args)]
pub struct WhatifArgs {
    /// A recording made with `--accesses` (not needed with --compressors).
    recording: Option<PathBuf>,
    /// The recorded device's F2FS image (or the device itself, opened read-only).
    #[arg(long, value_name = "IMG")]
    image: Option<PathBuf>,
    /// Attributed-memory budgets held during pressure episodes (comma-separated; KiB/MiB).
    #[arg(long, default_value = "1MiB,2MiB,3MiB,4MiB,6MiB")]
    budget: String,
    /// node_compress_threshold values for compression on (percent, comma-separated).
    #[arg(long, default_value = "25")]
    threshold: String,
    /// node_compress_interval values (ms, comma-separated).
    #[arg(long, default_value = "1000")]
    interval: String,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Draw node reads against attributed memory, off and on, the Pareto front and the
    /// RFC's defaults (25 %, 1000 ms) marked, to FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Measure lz4 and zstd levels 1..15 on the image's node blocks instead: ratio, compress
    /// and decompress MB/s, working memory, and how many blocks fit 256/512/1024-byte slots.
    #[arg(long)]
    compressors: bool,
}

#[derive(serde::Serialize)]
struct Point {
    settings: Settings,
    compression: bool,
    outcome: Outcome,
}

pub fn run(args: WhatifArgs) -> Result<()> {
    let Some(image) = &args.image else {
        bail!("whatif needs --image IMG: the F2FS image (or device) whose node blocks it uses");
    };
    if args.compressors {
        return closed_is_success(
            compressors_table(image, args.json).and_then(|table| print(&table)),
        );
    }
    let Some(recording) = &args.recording else {
        bail!("whatif needs a recording made with --accesses: nodescope whatif REC --image IMG");
    };
    let events = read_events(recording)?;
    let trace = Trace::from_events(&events).with_context(|| format!("{}", recording.display()))?;
    drop(events);
    let nodes = Arc::new(
        NodeSet::load(image)
            .with_context(|| format!("{} is not a readable F2FS image", image.display()))?,
    );
    trace.check_nids(&nodes)?;
    let sizes = Arc::new(PayloadSizes::lz4(&nodes));
    let grid = grid(&args)?;
    let points = run_grid(&trace, &nodes, &sizes, &grid)?;
    if args.json {
        println!("{}", serde_json::to_string(&points)?);
    } else {
        print_table(&trace, &points);
    }
    if let Some(path) = &args.plot {
        whatif_plot::draw(&plot_points(&points), path)
            .with_context(|| format!("drawing {}", path.display()))?;
        eprintln!("whatif: picture written to {}", path.display());
    }
    Ok(())
}

/// The RFC's own defaults are the settings marked on the picture.
fn plot_points(points: &[Point]) -> Vec<PlotPoint> {
    points
        .iter()
        .map(|p| PlotPoint {
            // Attributed memory is what the cache holds at the budget point, not the budget.
            memory_bytes: p.outcome.retained_bytes,
            node_reads: p.outcome.node_reads,
            compression: p.compression,
            chosen: p.compression
                && p.settings.knobs.threshold == tracer_common::knobs::DEFAULT_THRESHOLD
                && p.settings.knobs.interval_ms == tracer_common::knobs::DEFAULT_INTERVAL_MS,
            label: format!(
                "{} {} KiB budget",
                if p.compression { "on" } else { "off" },
                p.settings.budget_bytes >> 10
            ),
        })
        .collect()
}

fn read_events(path: &Path) -> Result<Vec<Event>> {
    let mut reader = reader::open(path)?;
    let mut events = Vec::new();
    while let Some(item) = reader.next_item() {
        match item.with_context(|| format!("reading {}", path.display()))? {
            Item::Events(batch) => events.extend(batch),
            _ => continue,
        }
    }
    Ok(events)
}

fn grid(args: &WhatifArgs) -> Result<Vec<Settings>> {
    let budgets = list(&args.budget, parse_bytes)?;
    let thresholds = list(&args.threshold, |s| Ok(s.parse::<u32>()?))?;
    let intervals = list(&args.interval, |s| Ok(s.parse::<u32>()?))?;
    let mut grid = Vec::new();
    for budget_bytes in budgets {
        grid.push(Settings {
            knobs: Knobs {
                threshold: 0,
                interval_ms: tracer_common::knobs::DEFAULT_INTERVAL_MS,
            },
            budget_bytes,
        });
        for threshold in &thresholds {
            for interval_ms in &intervals {
                grid.push(Settings {
                    knobs: Knobs {
                        threshold: *threshold,
                        interval_ms: *interval_ms,
                    },
                    budget_bytes,
                });
            }
        }
    }
    Ok(grid)
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

/// Every grid point, spread over all cores.
fn run_grid(
    trace: &Trace,
    nodes: &Arc<NodeSet>,
    sizes: &Arc<PayloadSizes>,
    grid: &[Settings],
) -> Result<Vec<Point>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = grid.len().div_ceil(cores).max(1);
    let results: Vec<Result<Vec<Point>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = grid
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|settings| {
                            let payload = Payload::Sizes(sizes.clone());
                            let outcome = whatif::replay(trace, nodes.clone(), *settings, payload)?;
                            Ok(Point {
                                settings: *settings,
                                compression: settings.knobs.threshold > 0,
                                outcome,
                            })
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a grid thread panicked"))
            .collect()
    });
    let mut points = Vec::new();
    for part in results {
        points.extend(part?);
    }
    Ok(points)
}

fn print_table(trace: &Trace, points: &[Point]) {
    println!(
        "whatif: {} accesses, {} node page drops on dev {}:{}",
        trace.accesses,
        trace.evictions,
        trace.dev >> 20,
        trace.dev & 0xfffff
    );
    println!(
        "* = on the Pareto front: no other point has fewer node reads for no more retained bytes"
    );
    println!(
        "{:>10} {:>9} {:>9} {:>14} {:>14} {:>11} {:>9}",
        "budget",
        "threshold",
        "interval",
        "retained nodes",
        "retained bytes",
        "node reads",
        "restores"
    );
    let front = whatif_plot::pareto_front(&plot_points(points));
    for (index, p) in points.iter().enumerate() {
        let o = &p.outcome;
        println!(
            "{:>10} {:>9} {:>9} {:>14} {:>14} {:>11} {:>9}{}",
            p.settings.budget_bytes,
            if p.compression {
                format!("{}%", p.settings.knobs.threshold)
            } else {
                "off".into()
            },
            p.settings.knobs.interval_ms,
            o.retained_nodes,
            o.retained_bytes,
            o.node_reads,
            o.restores,
            if front.contains(&index) { " *" } else { "" }
        );
    }
}
