//! Checkpoint anatomy (issue 19): what each checkpoint wrote, as F2FS engineers judge a change
//! to metadata caching (seed 002: node num, cp count, nodes/cp, NAT block writes saved by the
//! journal).
//!
//! A checkpoint's record holds what was written from the end of the previous checkpoint to the
//! end of this one ("finish checkpoint"): node blocks, metadata blocks by area (checkpoint
//! pack, SIT, NAT, SSA, from the device's superblock), the NAT and SIT entries it put into the
//! journal, and how long its two phases took (block_ops: start to finish of blocking
//! operations; write: from there to the end). Everything comes from events, so every source
//! fills it the same way; a source without metadata or journal events (the simulator) leaves
//! those columns at zero. Journal entries carry no device, so one record covers all devices.
use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use tracer_common::{CheckpointPhase, Decoded, Event, JournalEntry, MetaArea};

/// Completed checkpoints kept for views (top's panel shows the latest few).
pub(crate) const RECENT_CHECKPOINTS: usize = 64;

/// Blocks and entries written, over a checkpoint, a window or a whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub node_blocks: u64,
    /// Checkpoint pack blocks (CP blocks, orphan blocks, compacted summaries).
    pub cp_blocks: u64,
    pub sit_blocks: u64,
    pub nat_blocks: u64,
    pub ssa_blocks: u64,
    /// Metadata blocks outside those areas, or of a device whose layout was not known.
    pub other_meta_blocks: u64,
    /// NAT entries put into the current summary's journal instead of a NAT block.
    pub nat_journal: u64,
    pub sit_journal: u64,
}

impl Written {
    /// Count one event; false for kinds that write nothing.
    fn record(&mut self, event: &Decoded) -> bool {
        match event {
            Decoded::NodeWrite { .. } => self.node_blocks += 1,
            Decoded::MetaWrite { area, .. } => match area {
                MetaArea::Cp => self.cp_blocks += 1,
                MetaArea::Sit => self.sit_blocks += 1,
                MetaArea::Nat => self.nat_blocks += 1,
                MetaArea::Ssa => self.ssa_blocks += 1,
                MetaArea::Other | MetaArea::LayoutUnknown => self.other_meta_blocks += 1,
            },
            Decoded::JournalEntry(JournalEntry::Nat { .. }) => self.nat_journal += 1,
            Decoded::JournalEntry(JournalEntry::Sit { .. }) => self.sit_journal += 1,
            _ => return false,
        }
        true
    }

    /// Every metadata block, whatever its area.
    pub fn meta_blocks(&self) -> u64 {
        self.cp_blocks
            + self.sit_blocks
            + self.nat_blocks
            + self.ssa_blocks
            + self.other_meta_blocks
    }

    pub fn add(&mut self, other: &Written) {
        self.node_blocks += other.node_blocks;
        self.cp_blocks += other.cp_blocks;
        self.sit_blocks += other.sit_blocks;
        self.nat_blocks += other.nat_blocks;
        self.ssa_blocks += other.ssa_blocks;
        self.other_meta_blocks += other.other_meta_blocks;
        self.nat_journal += other.nat_journal;
        self.sit_journal += other.sit_journal;
    }
}

/// One completed checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// 1 for the first checkpoint the model saw.
    pub seq: u64,
    pub dev: u32,
    /// CP reason flags (the tracepoint's `reason`).
    pub reason: u8,
    pub end_ns: u64,
    pub written: Written,
    /// Start to finish of block_ops, and from there to the end; None when a phase event was
    /// not seen (the run began inside this checkpoint, or events were lost).
    pub block_ops_ns: Option<u64>,
    pub write_ns: Option<u64>,
}

/// Checkpoints over a window or a run: the stream's `checkpoint` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    /// Checkpoints completed.
    pub count: u64,
    /// Everything written (node and metadata blocks, journal entries), checkpoint or not.
    #[serde(flatten)]
    pub written: Written,
    /// The completed checkpoints' phases, summed.
    pub block_ops_ns: u64,
    pub write_ns: u64,
}

impl CheckpointSummary {
    /// Node blocks written per completed checkpoint (the seed's nodes/cp).
    pub fn nodes_per_checkpoint(&self) -> Option<f64> {
        (self.count > 0).then(|| self.written.node_blocks as f64 / self.count as f64)
    }

    fn complete(&mut self, record: &CheckpointRecord) {
        self.count += 1;
        self.block_ops_ns += record.block_ops_ns.unwrap_or(0);
        self.write_ns += record.write_ns.unwrap_or(0);
    }
}

/// Follows the checkpoints in an event stream.
#[derive(Clone, Debug, Default)]
pub struct CheckpointTracker {
    /// Written since the last checkpoint completed.
    open: Written,
    started_ns: Option<u64>,
    block_ops_done_ns: Option<u64>,
    window: CheckpointSummary,
    total: CheckpointSummary,
    recent: VecDeque<CheckpointRecord>,
}

impl CheckpointTracker {
    pub fn ingest(&mut self, event: &Event) {
        self.ingest_decoded(event, &event.decode());
    }

    /// `ingest` for a caller that has decoded the event already (the model, once per event).
    pub fn ingest_decoded(&mut self, event: &Event, decoded: &Decoded) {
        if let Decoded::Checkpoint {
            phase,
            reason_flags,
        } = *decoded
        {
            self.phase(phase, reason_flags, event);
            return;
        }
        let mut one = Written::default();
        if one.record(decoded) {
            self.open.add(&one);
            self.window.written.add(&one);
            self.total.written.add(&one);
        }
    }

    fn phase(&mut self, phase: CheckpointPhase, reason_flags: u8, event: &Event) {
        match phase {
            CheckpointPhase::StartBlockOps => {
                self.started_ns = Some(event.ts_ns);
                self.block_ops_done_ns = None;
            }
            CheckpointPhase::FinishBlockOps => self.block_ops_done_ns = Some(event.ts_ns),
            CheckpointPhase::FinishCheckpoint => self.complete(reason_flags, event),
        }
    }

    fn complete(&mut self, reason_flags: u8, event: &Event) {
        let (start, middle) = (self.started_ns.take(), self.block_ops_done_ns.take());
        let record = CheckpointRecord {
            seq: self.total.count + 1,
            dev: event.dev,
            reason: reason_flags,
            end_ns: event.ts_ns,
            written: std::mem::take(&mut self.open),
            block_ops_ns: start.zip(middle).map(|(s, m)| m.saturating_sub(s)),
            write_ns: middle.map(|m| event.ts_ns.saturating_sub(m)),
        };
        self.window.complete(&record);
        self.total.complete(&record);
        if self.recent.len() == RECENT_CHECKPOINTS {
            self.recent.pop_front();
        }
        self.recent.push_back(record);
    }

    /// This window's summary; the next window starts from zero.
    pub fn close_window(&mut self) -> CheckpointSummary {
        std::mem::take(&mut self.window)
    }

    /// Everything since the model started.
    pub fn total(&self) -> &CheckpointSummary {
        &self.total
    }

    /// Written since the last checkpoint completed (not in any record yet).
    pub fn pending(&self) -> &Written {
        &self.open
    }

    /// The latest completed checkpoints, oldest first.
    pub fn recent(&self) -> &VecDeque<CheckpointRecord> {
        &self.recent
    }
}

/// Rows of single checkpoints shown (the latest ones).
pub(crate) const ROWS_SHOWN: usize = 20;

/// What a report and the live view show of the checkpoints (the table of
/// `view::checkpoint_table`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointReport {
    /// Over the whole recording: every block written, checkpoints completed.
    pub summary: CheckpointSummary,
    pub nodes_per_checkpoint: Option<f64>,
    pub nat_blocks_per_checkpoint: Option<f64>,
    pub nat_journal_per_checkpoint: Option<f64>,
    /// Written after the last checkpoint completed (in no checkpoint's row).
    pub after_last_checkpoint: Written,
    /// The latest checkpoints, oldest first.
    pub latest: Vec<CheckpointRecord>,
}

impl CheckpointReport {
    pub fn from_tracker(tracker: &CheckpointTracker) -> CheckpointReport {
        let summary = *tracker.total();
        let per = |n: u64| (summary.count > 0).then(|| n as f64 / summary.count as f64);
        let skip = tracker.recent().len().saturating_sub(ROWS_SHOWN);
        CheckpointReport {
            nodes_per_checkpoint: summary.nodes_per_checkpoint(),
            nat_blocks_per_checkpoint: per(summary.written.nat_blocks),
            nat_journal_per_checkpoint: per(summary.written.nat_journal),
            after_last_checkpoint: *tracker.pending(),
            latest: tracker.recent().iter().skip(skip).copied().collect(),
            summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{
        EventKind, CP_PHASE_FINISH_BLOCK_OPS, CP_PHASE_FINISH_CHECKPOINT, CP_PHASE_START_BLOCK_OPS,
        JOURNAL_NAT, JOURNAL_SIT, META_AREA_CP, META_AREA_NAT, META_AREA_OTHER, META_AREA_SIT,
        META_AREA_SSA, META_AREA_UNKNOWN,
    };

    use super::*;

    fn phase(ts: u64, phase: u8) -> Event {
        Event::new(EventKind::Checkpoint, ts).queue(phase).dev(7)
    }

    fn meta(ts: u64, area: u8) -> Event {
        Event::new(EventKind::MetaWrite, ts).queue(area).dev(7)
    }

    #[test]
    fn each_checkpoint_gets_what_was_written_since_the_previous_one() {
        let mut cp = CheckpointTracker::default();
        let mut events = vec![Event::new(EventKind::NodeWrite, 1); 3];
        events.extend([
            phase(10, CP_PHASE_START_BLOCK_OPS),
            phase(25, CP_PHASE_FINISH_BLOCK_OPS),
            meta(26, META_AREA_NAT),
            meta(27, META_AREA_NAT),
            meta(28, META_AREA_SIT),
            meta(29, META_AREA_SSA),
            meta(30, META_AREA_CP),
            meta(31, META_AREA_UNKNOWN),
            meta(32, META_AREA_OTHER),
            Event::new(EventKind::JournalEntry, 33).queue(JOURNAL_NAT),
            Event::new(EventKind::JournalEntry, 34).queue(JOURNAL_SIT),
            phase(70, CP_PHASE_FINISH_CHECKPOINT),
            Event::new(EventKind::NodeWrite, 80),
            // Not writes: ignored.
            Event::new(EventKind::NodeRead, 81),
        ]);
        for event in &events {
            cp.ingest(event);
        }
        let first = cp.recent()[0];
        assert_eq!(first.seq, 1);
        assert_eq!(first.dev, 7);
        let w = first.written;
        assert_eq!(
            (
                w.node_blocks,
                w.nat_blocks,
                w.sit_blocks,
                w.ssa_blocks,
                w.cp_blocks
            ),
            (3, 2, 1, 1, 1)
        );
        assert_eq!(
            (w.other_meta_blocks, w.nat_journal, w.sit_journal),
            (2, 1, 1)
        );
        assert_eq!(w.meta_blocks(), 7);
        assert_eq!((first.block_ops_ns, first.write_ns), (Some(15), Some(45)));
        assert_eq!(cp.pending().node_blocks, 1);
        let window = cp.close_window();
        assert_eq!(window.count, 1);
        assert_eq!(window.written.node_blocks, 4);
        assert_eq!(window.nodes_per_checkpoint(), Some(4.0));
        assert_eq!((window.block_ops_ns, window.write_ns), (15, 45));
        assert_eq!(cp.close_window(), CheckpointSummary::default());
        assert_eq!(cp.total().written.node_blocks, 4);
    }

    #[test]
    fn a_checkpoint_begun_before_the_run_has_no_phase_times() {
        let mut cp = CheckpointTracker::default();
        cp.ingest(&phase(5, CP_PHASE_FINISH_CHECKPOINT));
        let record = cp.recent()[0];
        assert_eq!((record.block_ops_ns, record.write_ns), (None, None));
        assert_eq!(cp.total().count, 1);
        assert_eq!(cp.total().nodes_per_checkpoint(), Some(0.0));
    }

    #[test]
    fn only_the_latest_checkpoints_are_kept() {
        let mut cp = CheckpointTracker::default();
        for i in 0..(RECENT_CHECKPOINTS as u64 + 5) {
            cp.ingest(&phase(i, CP_PHASE_FINISH_CHECKPOINT));
        }
        assert_eq!(cp.recent().len(), RECENT_CHECKPOINTS);
        assert_eq!(cp.recent()[0].seq, 6);
        assert_eq!(cp.total().count, RECENT_CHECKPOINTS as u64 + 5);
    }
}
