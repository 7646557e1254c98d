//! What a recording says, aggregated through the model: the report `nodescope report` prints
//! (as text, `view::report_text`, or JSON) and the per-(kind, nid) counts of `report --nids`.
use std::collections::BTreeMap;

use tracer_common::{CheckpointPhase, Decoded, EventKind};

use anyhow::{Context as _, Result};

use super::{
    checkpoints::CheckpointReport, node_types::NodeTypeReads, ModelConfig, Packages, PerQueue,
};
pub(crate) use crate::schema::report::{DeviceReport, Report, TimeRange};
use crate::{
    pipeline::{Drained, Pipeline},
    record::{reader::Damage, Note},
    source::replay::ReplaySource,
};

/// The recorded device's node blocks and where they were read from: node reads are then told
/// apart by node type.
pub(crate) struct Image<'a> {
    pub nodes: &'a sim::nodes::NodeSet,
    pub name: String,
}

/// Build the report from a recording replayed through the pipeline at speed 0, one block at
/// a time. Damage ends the read; the report covers what comes before it and names it.
pub(crate) fn build(
    source: ReplaySource,
    packages: Packages,
    image: Option<Image<'_>>,
) -> Result<Report> {
    let header = source.header().clone();
    let config = ModelConfig::for_recording(&header, packages);
    let mut pipeline = Pipeline::offline(Box::new(source), config)?;
    let mut slot_mix = PerQueue::default();
    let mut devices: BTreeMap<String, DeviceReport> = BTreeMap::new();
    let mut last = header.clock_origin_ns;
    let mut node_types = image.as_ref().map(|i| NodeTypeReads::new(i.name.clone()));
    let mut lookup_times = super::lookup_times::LookupTimes::default();
    // The report needs totals, not windows: none are kept.
    pipeline.drain(|drained| {
        let Drained::Event(event) = drained else {
            return;
        };
        // Decoded once for the report's own tallies.
        let decoded = event.decode();
        tally(event, &decoded, &mut slot_mix, &mut devices);
        match decoded {
            Decoded::NodeAccess {
                nid,
                retrieval: Some(retrieval),
                ..
            } => lookup_times.add(event.dev, nid, retrieval.latency_ns.max(1)),
            Decoded::NodeRead { nid, readahead, .. } => {
                if let (Some(image), Some(types)) = (&image, &mut node_types) {
                    types.counts.count(image.nodes, nid, readahead);
                }
            }
            _ => {}
        }
        last = event.ts_ns;
    })?;
    let tail = pipeline
        .source()
        .recording_tail()
        .context("a replay keeps its recording's tail")?;
    let footer = tail.footer.as_ref();
    let damage = tail.damage.as_ref();
    // The clocks' pairs are for `export --perfetto`, not the reader.
    let notes: Vec<Note> = tail
        .notes
        .iter()
        .filter(|note| note.kind != crate::record::CLOCK_NOTE)
        .cloned()
        .collect();
    let notes_omitted = tail.notes_omitted;
    let model = pipeline.model();
    let end_ns = footer.map_or(last, |f| f.end_ns.max(last));
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
    let totals = model.totals();
    Ok(Report {
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
        cache: model.cache(),
        devices,
        checkpoints: CheckpointReport::from_tracker(model.checkpoints()),
        node_types,
        notes,
        notes_omitted,
        drops: totals.lost,
        complete: footer.is_some() && damage.is_none(),
        damage: damage.map(|d| d.to_string()),
        lookup_times,
    })
}

/// The (kind, nid) pairs `report --nids` keeps: a real recording has at most a few hundred
/// thousand (one F2FS's nids in use, a handful of kinds), and a crafted one with a new nid in
/// every event must not make the map grow with the file (10 M pairs used 888 MB). About 60
/// bytes each in the map: 64 MB at most.
pub const MAX_NID_PAIRS: usize = 1 << 20;

/// Events per (kind, nid), sorted by kind then nid, for at most [`MAX_NID_PAIRS`] pairs.
#[derive(Debug, Default)]
pub(crate) struct NidCounts {
    pub counts: BTreeMap<(&'static str, u32), u64>,
    /// Events of pairs met after the map was full.
    pub left_out: u64,
}

/// [`NidCounts`] over the whole recording, and the damage that ended it, if any.
pub(crate) fn nid_counts(source: &mut ReplaySource) -> Result<(NidCounts, Option<Damage>)> {
    let mut found = NidCounts::default();
    let damage = source.each_event_to_damage(|event| {
        found.add(event.kind().map_or("unknown", EventKind::name), event.nid);
        Ok(())
    })?;
    Ok((found, damage))
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

fn tally(
    event: &tracer_common::Event,
    decoded: &Decoded,
    slot_mix: &mut PerQueue,
    devices: &mut BTreeMap<String, DeviceReport>,
) {
    let device_count: fn(&mut DeviceReport) -> &mut u64 = match *decoded {
        Decoded::Convert { queue, .. } if queue.is_compressed() => {
            *slot_mix.get_mut(queue) += 1;
            return;
        }
        Decoded::NodeWrite { .. } => |device| &mut device.node_writes,
        Decoded::Checkpoint {
            phase: CheckpointPhase::FinishCheckpoint,
            ..
        } => |device| &mut device.checkpoints,
        Decoded::NodeAccess { .. } => |device| &mut device.node_accesses,
        Decoded::NodeEvict { .. } => |device| &mut device.node_evictions,
        Decoded::InodeEvict { .. } => |device| &mut device.inode_evictions,
        _ => return,
    };
    let device = devices
        .entry(crate::system::major_minor(event.dev))
        .or_default();
    *device_count(device) += 1;
}

#[cfg(test)]
mod tests {
    use tracer_common::{Event, EventKind};

    use crate::{
        record::{writer::Writer, Header},
        source::replay::ReplaySource,
    };

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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nids.nsr");
        std::fs::write(&path, bytes).unwrap();
        let mut source = ReplaySource::offline(&path).unwrap();
        let (found, damage) = super::nid_counts(&mut source).unwrap();
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
