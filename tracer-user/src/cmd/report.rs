//! `nodescope report FILE`: what a recording says, per app and per device.
use std::{fmt::Write as _, path::PathBuf};

use anyhow::Result;
use clap::Args;
use tracer_common::text::escape_controls;

use crate::{
    model::{
        recording::{build, nid_counts, MAX_NID_PAIRS},
        Packages,
    },
    record::reader::{self, Reader},
    view::{
        report_text::render,
        stdout::{closed_is_success, print, print_line},
    },
};

#[derive(Args)]
pub struct ReportArgs {
    /// The recording (from `nodescope record`).
    file: PathBuf,
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
}

pub fn run(args: ReportArgs) -> Result<()> {
    // Streamed: a recording of any length (or /dev/zero) is read in bounded memory.
    let reader = reader::open(&args.file)?;
    if args.nids {
        return print_nid_counts(reader, &args.file);
    }
    // The packages file's errors name it, not the recording.
    let packages = Packages::from_file_or(
        args.packages.as_deref(),
        reader.header.packages_list.clone(),
    )?;
    let report = build(reader, packages);
    let printed = if args.json {
        print_line(serde_json::to_string_pretty(&report)?)
    } else {
        // Comms (any process sets its own), host and notes come from the file: escaped.
        print(&escape_controls(&render(&report)))
    };
    closed_is_success(printed)?;
    if let Some(damage) = &report.damage {
        eprintln!(
            "warning: {}: {damage}; the report covers what comes before it",
            args.file.display()
        );
    }
    Ok(())
}

/// The lines, written as they are made (in chunks): the output is never held whole.
fn print_nid_counts<R: std::io::Read>(reader: Reader<R>, file: &std::path::Path) -> Result<()> {
    const CHUNK: usize = 64 * 1024;
    let (found, damage) = nid_counts(reader);
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
        eprintln!(
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
