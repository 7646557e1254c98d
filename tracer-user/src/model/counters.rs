//! Counters of node-cache activity, for a window, a process, an app or the whole run.
use serde::{Deserialize, Serialize};
use tracer_common::{CheckpointPhase, Decoded, Queue};

/// One count per node-cache queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerQueue {
    pub raw: u64,
    pub b256: u64,
    pub b512: u64,
    pub b1024: u64,
}

impl PerQueue {
    pub fn get_mut(&mut self, queue: Queue) -> &mut u64 {
        match queue {
            Queue::Raw => &mut self.raw,
            Queue::B256 => &mut self.b256,
            Queue::B512 => &mut self.b512,
            Queue::B1024 => &mut self.b1024,
        }
    }

    pub fn get(&self, queue: Queue) -> u64 {
        match queue {
            Queue::Raw => self.raw,
            Queue::B256 => self.b256,
            Queue::B512 => self.b512,
            Queue::B1024 => self.b1024,
        }
    }

    pub fn total(&self) -> u64 {
        self.raw + self.b256 + self.b512 + self.b1024
    }

    /// Compressed queues only.
    pub fn compressed(&self) -> u64 {
        self.b256 + self.b512 + self.b1024
    }

    fn add(&mut self, other: &PerQueue) {
        for queue in Queue::ALL {
            *self.get_mut(queue) += other.get(queue);
        }
    }
}

/// Everything the model counts from events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
    /// Compressed entries restored: node reads avoided.
    pub restores: u64,
    pub restore_fails: u64,
    pub restore_nomem: u64,
    pub conversions: u64,
    pub convert_rejects: u64,
    pub convert_aborts: u64,
    pub reclaims: PerQueue,
    pub second_chances: PerQueue,
    /// Events lost before they reached us.
    pub lost: u64,
}

impl Counters {
    pub fn record(&mut self, event: &Decoded) {
        match *event {
            Decoded::NodeRead {
                readahead: true, ..
            } => self.node_reads_readahead += 1,
            Decoded::NodeRead { .. } => self.node_reads_demand += 1,
            Decoded::NodeWrite { .. } => self.node_writes += 1,
            // A checkpoint is three events on a kernel (start and finish of block_ops, the
            // finish); it counts once, as the kernel's CP count does, at its finish.
            Decoded::Checkpoint {
                phase: CheckpointPhase::FinishCheckpoint,
                ..
            } => self.checkpoints += 1,
            Decoded::Checkpoint { .. } => {}
            Decoded::Restore { .. } => self.restores += 1,
            Decoded::RestoreFail { .. } => self.restore_fails += 1,
            Decoded::RestoreNomem { .. } => self.restore_nomem += 1,
            Decoded::Convert { .. } => self.conversions += 1,
            Decoded::ConvertReject { .. } => self.convert_rejects += 1,
            Decoded::ConvertAbort { .. } => self.convert_aborts += 1,
            Decoded::Reclaim { queue, .. } => *self.reclaims.get_mut(queue) += 1,
            Decoded::SecondChance { queue, .. } => *self.second_chances.get_mut(queue) += 1,
            Decoded::Lost { count } => self.lost += u64::from(count),
            // Access traces are what `whatif` replays; the live tables do not count them yet.
            Decoded::Hello | Decoded::NodeAccess { .. } | Decoded::NodeEvict { .. } => {}
            // Checkpoint anatomy: counted by `model::checkpoints`, not per process.
            Decoded::MetaWrite { .. } | Decoded::JournalEntry(_) => {}
            // A newer tracer's kind or code: nothing here knows what it would count as.
            Decoded::Unknown(_) => {}
        }
    }

    /// How many events these counters counted (lost-event markers aside).
    pub fn events(&self) -> u64 {
        self.node_reads()
            + self.node_writes
            + self.checkpoints
            + self.restores
            + self.restore_fails
            + self.restore_nomem
            + self.conversions
            + self.convert_rejects
            + self.convert_aborts
            + self.reclaims.total()
            + self.second_chances.total()
    }

    pub fn node_reads(&self) -> u64 {
        self.node_reads_demand + self.node_reads_readahead
    }

    /// restores / (restores + node reads): the share of node retrievals the compressed cache
    /// served. None when there were no retrievals.
    pub fn hit_ratio(&self) -> Option<f64> {
        let retrievals = self.restores + self.node_reads();
        (retrievals > 0).then(|| self.restores as f64 / retrievals as f64)
    }

    pub fn add(&mut self, other: &Counters) {
        self.node_reads_demand += other.node_reads_demand;
        self.node_reads_readahead += other.node_reads_readahead;
        self.node_writes += other.node_writes;
        self.checkpoints += other.checkpoints;
        self.restores += other.restores;
        self.restore_fails += other.restore_fails;
        self.restore_nomem += other.restore_nomem;
        self.conversions += other.conversions;
        self.convert_rejects += other.convert_rejects;
        self.convert_aborts += other.convert_aborts;
        self.reclaims.add(&other.reclaims);
        self.second_chances.add(&other.second_chances);
        self.lost += other.lost;
    }

    /// Whether anything at all happened.
    pub fn is_empty(&self) -> bool {
        *self == Counters::default()
    }
}
