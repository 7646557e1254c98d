//! `nodescope report FILE`: what a recording says, per app and per device.
use std::{collections::BTreeMap, fmt::Write as _, path::PathBuf};

use crate::record::{
    reader::{self, Damage, Item, Reader},
    Note,
};
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use tracer_common::text::escape_controls;
use tracer_common::{Decoded, EventKind};

use crate::{
    model::{AppRow, Counters, Model, Packages, PerQueue},
    view::{
        checkpoint_table::{self, CheckpointReport},
        stdout::{closed_is_success, print, print_line},
    },
};

/// Notes are listed up to this many bytes of text (a crafted file could hold millions).
const MAX_NOTES_SHOWN_BYTES: usize = 32 << 20;

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

/// Per device: checkpoints and the node writes between them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceReport {
    pub node_writes: u64,
    pub checkpoints: u64,
    pub node_writes_per_checkpoint: Option<f64>,
    /// Node lookups and node-page evictions (recordings made with `--accesses`).
    #[serde(skip_serializing_if = "is_zero")]
    pub node_accesses: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub node_evictions: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub header: crate::record::Header,
    pub time_range: TimeRange,
    pub totals: Counters,
    pub hit_ratio: Option<f64>,
    pub apps: Vec<AppRow>,
    /// Conversions by the slot they went into.
    pub slot_mix: PerQueue,
    pub devices: BTreeMap<String, DeviceReport>,
    /// Checkpoint anatomy (issue 19): seed 002's table.
    pub checkpoints: CheckpointReport,
    pub notes: Vec<Note>,
    /// Notes past the first [`MAX_NOTES_SHOWN_BYTES`] of them, counted only.
    pub notes_omitted: u64,
    /// Events lost before they were recorded.
    pub drops: u64,
    pub complete: bool,
    /// Where the file stopped being readable, if it did.
    pub damage: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct TimeRange {
    pub start_ns: u64,
    pub end_ns: u64,
    pub seconds: f64,
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

/// Build the report from a recording, read one record at a time. Damage ends the read; the
/// report covers what comes before it and names it.
pub fn build<R: std::io::Read>(mut reader: Reader<R>, packages: Packages) -> Report {
    let header = reader.header.clone();
    let mut model = Model::for_recording(&header, packages);
    let mut slot_mix = PerQueue::default();
    let mut devices: BTreeMap<String, DeviceReport> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut notes_omitted = 0;
    let mut notes_bytes = 0;
    let mut footer = None;
    let mut damage = None;
    let mut last = header.clock_origin_ns;
    while let Some(item) = reader.next_item() {
        match item {
            Ok(Item::Events(events)) => {
                for event in &events {
                    model.ingest(event);
                    tally(event, &mut slot_mix, &mut devices);
                }
                last = events.last().map_or(last, |e| e.ts_ns);
                // The report needs totals, not windows: none are kept.
                model.take_closed();
            }
            Ok(Item::Note(note)) if notes_bytes < MAX_NOTES_SHOWN_BYTES => {
                notes_bytes += note.text.len() + note.kind.len();
                notes.push(note);
            }
            Ok(Item::Note(_)) => notes_omitted += 1,
            Ok(Item::Footer(found)) => footer = Some(found),
            Err(found) => damage = Some(found),
        }
    }
    let end_ns = footer.as_ref().map_or(last, |f| f.end_ns.max(last));
    for device in devices.values_mut() {
        device.node_writes_per_checkpoint =
            (device.checkpoints > 0).then(|| device.node_writes as f64 / device.checkpoints as f64);
    }
    let mut apps = model.apps();
    apps.sort_by(|a, b| {
        b.total
            .node_reads()
            .cmp(&a.total.node_reads())
            .then(a.app.cmp(&b.app))
    });
    let totals = *model.totals();
    Report {
        time_range: TimeRange {
            start_ns: header.clock_origin_ns,
            end_ns,
            seconds: end_ns.saturating_sub(header.clock_origin_ns) as f64 / 1e9,
        },
        header,
        hit_ratio: totals.hit_ratio(),
        totals,
        apps,
        slot_mix,
        devices,
        checkpoints: CheckpointReport::from_tracker(model.checkpoints()),
        notes,
        notes_omitted,
        drops: totals.lost,
        complete: footer.is_some() && damage.is_none(),
        damage: damage.map(|d| d.to_string()),
    }
}

/// The (kind, nid) pairs `report --nids` keeps: a real recording has at most a few hundred
/// thousand (one F2FS's nids in use, a handful of kinds), and a crafted one with a new nid in
/// every event must not make the map grow with the file (10 M pairs used 888 MB). About 60
/// bytes each in the map: 64 MB at most.
pub const MAX_NID_PAIRS: usize = 1 << 20;

/// Events per (kind, nid), sorted by kind then nid, for at most [`MAX_NID_PAIRS`] pairs.
#[derive(Debug, Default)]
pub struct NidCounts {
    pub counts: BTreeMap<(&'static str, u32), u64>,
    /// Events of pairs met after the map was full.
    pub left_out: u64,
}

/// [`NidCounts`] over the whole recording, and the damage that ended it, if any.
pub fn nid_counts<R: std::io::Read>(mut reader: Reader<R>) -> (NidCounts, Option<Damage>) {
    let mut found = NidCounts::default();
    while let Some(item) = reader.next_item() {
        match item {
            Ok(Item::Events(events)) => {
                for event in &events {
                    found.add(event.kind().map_or("unknown", EventKind::name), event.nid);
                }
            }
            Ok(_) => {}
            Err(damage) => return (found, Some(damage)),
        }
    }
    (found, None)
}

impl NidCounts {
    fn add(&mut self, kind: &'static str, nid: u32) {
        if let Some(count) = self.counts.get_mut(&(kind, nid)) {
            *count += 1;
        } else if self.counts.len() < MAX_NID_PAIRS {
            self.counts.insert((kind, nid), 1);
        } else {
            self.left_out += 1;
        }
    }
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

fn tally(
    event: &tracer_common::Event,
    slot_mix: &mut PerQueue,
    devices: &mut BTreeMap<String, DeviceReport>,
) {
    let device_count: fn(&mut DeviceReport) -> &mut u64 = match event.decode() {
        Decoded::Convert { queue, .. } if queue.is_compressed() => {
            *slot_mix.get_mut(queue) += 1;
            return;
        }
        Decoded::NodeWrite { .. } => |device| &mut device.node_writes,
        Decoded::Checkpoint { .. } => |device| &mut device.checkpoints,
        Decoded::NodeAccess { .. } => |device| &mut device.node_accesses,
        Decoded::NodeEvict { .. } => |device| &mut device.node_evictions,
        _ => return,
    };
    let device = devices
        .entry(crate::system::major_minor(event.dev))
        .or_default();
    *device_count(device) += 1;
}

fn render(report: &Report) -> String {
    let mut out = String::new();
    let h = &report.header;
    let t = &report.totals;
    let _ = writeln!(
        out,
        "recording: {} on {} ({}), {:.1} s",
        h.source, h.host, h.kernel, report.time_range.seconds
    );
    let _ = writeln!(
        out,
        "node reads {} (demand {}, readahead {})  restores {}  hit ratio {}  conversions {}  lost {}",
        t.node_reads(),
        t.node_reads_demand,
        t.node_reads_readahead,
        t.restores,
        report.hit_ratio.map_or_else(|| "-".into(), |r| format!("{:.1}%", r * 100.0)),
        t.conversions,
        report.drops
    );
    let r = &t.reclaims;
    let _ = writeln!(
        out,
        "reclaims raw {} 256 {} 512 {} 1024 {}",
        r.raw, r.b256, r.b512, r.b1024
    );
    let m = &report.slot_mix;
    let _ = writeln!(
        out,
        "slot mix of conversions: 256 {} 512 {} 1024 {}",
        m.b256, m.b512, m.b1024
    );
    for (dev, d) in &report.devices {
        let per = d
            .node_writes_per_checkpoint
            .map_or_else(|| "-".into(), |v| format!("{v:.1}"));
        let _ = write!(
            out,
            "device {dev}: checkpoints {} node writes {} per checkpoint {per}",
            d.checkpoints, d.node_writes
        );
        if d.node_accesses + d.node_evictions > 0 {
            let _ = write!(
                out,
                " node accesses {} node evictions {}",
                d.node_accesses, d.node_evictions
            );
        }
        out.push('\n');
    }
    out.push_str(&checkpoint_table::render(&report.checkpoints));
    let _ = writeln!(
        out,
        "\n{:<32} {:>8} {:>8} {:>9} {:>6} {:>8}",
        "APP", "READS", "RA", "RESTORES", "HIT%", "CONV"
    );
    for app in &report.apps {
        let a = &app.total;
        let hit = a
            .hit_ratio()
            .map_or_else(|| "-".into(), |r| format!("{:.1}", r * 100.0));
        let name = crate::view::tui::label(&app.app);
        let _ = writeln!(
            out,
            "{name:<32} {:>8} {:>8} {:>9} {hit:>6} {:>8}",
            a.node_reads_demand, a.node_reads_readahead, a.restores, a.conversions
        );
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nknob changes and controller decisions:");
        for note in &report.notes {
            let _ = writeln!(
                out,
                "  {:>10.3}s {}: {}",
                note.ts_ns.saturating_sub(h.clock_origin_ns) as f64 / 1e9,
                note.kind,
                note.text
            );
        }
        if report.notes_omitted > 0 {
            let _ = writeln!(out, "  ... and {} more", report.notes_omitted);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use tracer_common::{Event, EventKind};

    use crate::record::{reader::Reader, writer::Writer, Header};

    #[test]
    fn nid_counts_counts_each_kind_and_nid() {
        let header = Header {
            window_ns: 1_000_000_000,
            ..Header::default()
        };
        let mut writer = Writer::new(Vec::new(), &header).unwrap();
        let events = [
            (EventKind::Restore, 7),
            (EventKind::Restore, 7),
            (EventKind::Restore, 9),
            (EventKind::Convert, 7),
        ];
        for (i, (kind, nid)) in events.into_iter().enumerate() {
            writer
                .event(&Event::new(kind, i as u64 * 1000).nid(nid))
                .unwrap();
        }
        let bytes = writer.finish(10_000).unwrap().0;
        let (found, damage) = super::nid_counts(Reader::new(bytes.as_slice()).unwrap());
        assert!(damage.is_none());
        assert_eq!(found.left_out, 0);
        let counts: Vec<_> = found.counts.into_iter().collect();
        assert_eq!(
            counts,
            [
                (("convert", 7), 1),
                (("restore", 7), 2),
                (("restore", 9), 1)
            ]
        );
    }
}
