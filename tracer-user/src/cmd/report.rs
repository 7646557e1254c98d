//! `nodescope report FILE`: what a recording says, per app and per device.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use clap::Args;
use sim::nodes::NodeSet;
use tracer_common::text::escape_controls;

use crate::{
    model::{
        comparison::compare,
        recording::{build, nid_counts, Image, Report, MAX_NID_PAIRS},
        Packages,
    },
    source::replay::ReplaySource,
    view::{
        compare_text,
        report_text::render,
        stdout::{closed_is_success, print, print_line},
    },
};

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// The recording (from `nodescope record`).
    #[arg(required_unless_present = "compare")]
    file: Option<PathBuf>,
    /// Instead of one report: two recordings of the same workload, compression off then on,
    /// compared as the RFC's cover letter does (retained nodes, attributed memory, node reads,
    /// restores, the change of each, in total and per app).
    #[arg(long, num_args = 2, value_names = ["OFF", "ON"], conflicts_with_all = ["file", "nids"])]
    compare: Option<Vec<PathBuf>>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Android packages.list for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<PathBuf>,
    /// Instead of the report: events per kind and nid, one `KIND NID COUNT` line each (the
    /// arm64 VM test compares them with a kprobe_events hist trigger keyed on the nid). At
    /// most 1,048,576 (kind, nid) pairs are kept, the first met: the events of any further
    /// pair are counted and said on stderr, and the exit status is then 1.
    #[arg(long, conflicts_with = "json")]
    nids: bool,
    /// The recorded device's F2FS image, or the device itself (read-only): node reads are
    /// then told apart by node type (inode, direct, indirect, double indirect, xattr), read
    /// from each nid's block.
    #[arg(long, value_name = "IMG", conflicts_with_all = ["compare", "nids"])]
    image: Option<PathBuf>,
}

pub(crate) fn run(args: ReportArgs) -> Result<()> {
    if let Some(pair) = &args.compare {
        return print_comparison(&args, &pair[0], &pair[1]);
    }
    let file = args.file.as_deref().context("a recording to report on")?;
    // Streamed: a recording of any length (or /dev/zero) is read in bounded memory.
    if args.nids {
        return print_nid_counts(ReplaySource::offline(file)?, file);
    }
    let report = report_of(&args, file)?;
    warn_damage(file, &report);
    let printed = if args.json {
        print_line(serde_json::to_string_pretty(&report)?)
    } else {
        // Comms (any process sets its own), host and notes come from the file: escaped.
        print(&escape_controls(&render(&report)))
    };
    closed_is_success(printed)
}

/// The recording at `file` replayed through the pipeline into its report.
fn report_of(args: &ReportArgs, file: &Path) -> Result<Report> {
    let source = ReplaySource::offline(file)?;
    // The packages file's errors name it, not the recording.
    let packages = Packages::from_file_or(
        args.packages.as_deref(),
        source.header().packages_list.clone(),
    )?;
    let nodes = args
        .image
        .as_deref()
        .map(|path| {
            NodeSet::load(path)
                .with_context(|| format!("{} is not a readable F2FS image", path.display()))
        })
        .transpose()?;
    let image = nodes
        .as_ref()
        .zip(args.image.as_deref())
        .map(|(nodes, path)| Image {
            nodes,
            name: path.display().to_string(),
        });
    build(source, packages, image)
}

fn warn_damage(file: &Path, report: &Report) {
    if let Some(damage) = &report.damage {
        say!(
            "warning: {}: {damage}; the report covers what comes before it",
            file.display()
        );
    }
}

fn print_comparison(args: &ReportArgs, off: &Path, on: &Path) -> Result<()> {
    let mut reports = Vec::new();
    for file in [off, on] {
        let report = report_of(args, file)?;
        warn_damage(file, &report);
        reports.push(report);
    }
    let comparison = compare(&reports[0], &reports[1]);
    let printed = if args.json {
        print_line(serde_json::to_string_pretty(&comparison)?)
    } else {
        // App names come from the files: escaped.
        print(&escape_controls(&compare_text::render(&comparison)))
    };
    closed_is_success(printed)
}

/// The lines, written as they are made (in chunks): the output is never held whole.
fn print_nid_counts(mut source: ReplaySource, file: &Path) -> Result<()> {
    const CHUNK: usize = 64 * 1024;
    let (found, damage) = nid_counts(&mut source)?;
    let mut out = String::with_capacity(CHUNK + 64);
    let mut printed = Ok(());
    for ((kind, nid), count) in &found.counts {
        let _ = writeln!(out, "{kind} {nid} {count}");
        if out.len() >= CHUNK {
            printed = print(&out);
            out.clear();
            if printed.is_err() {
                break;
            }
        }
    }
    if printed.is_ok() {
        printed = print(&out);
    }
    closed_is_success(printed)?;
    if let Some(damage) = damage {
        say!(
            "warning: {}: {damage}; the counts cover what comes before it",
            file.display()
        );
    }
    anyhow::ensure!(
        found.left_out == 0,
        "{}: more than {MAX_NID_PAIRS} distinct (kind, nid) pairs: {} events of further \
         (kind, nid) pairs are not listed",
        file.display(),
        found.left_out
    );
    Ok(())
}
