//! The background compression pass, run every `node_compress_interval` ms by the cache thread.
//!
//! One pass walks the raw LRU from its head up to the tail it remembered when it began, so
//! entries moved to the tail during the pass (second chances, rejections) and entries added
//! meanwhile are not revisited. Bounds: at most 1024 raw entries scanned, at most 256
//! candidates (clean, unreferenced entries it tries to compress), and a reschedule point after
//! every 32 scanned entries, where foreground work gets to run.
//!
//! Per entry: REFERENCED -> test, clear, move to the raw tail, skip (second chance); dirty or
//! busy -> skip in place; otherwise compress. A result within the threshold and 1024 bytes is
//! published after the compression finishes, unless an access came in between: then the new
//! object is discarded (ConvertAbort) and the entry gets the same second chance. A rejected
//! result leaves the entry raw; it moves to the raw tail so that the next passes reach the
//! entries behind it instead of compressing the same incompressible blocks again and again.
use tracer_common::{QUEUE_RAW, SECOND_CHANCE_BY_WORKER};

use super::{
    admission::{self, Admission},
    list::NIL,
    Compressed, NodeCache, Payload, WorkerMark,
};
use crate::{costs, events::Emitter};

pub const MAX_SCAN: u32 = 1024;
pub const MAX_CANDIDATES: u32 = 256;
pub const RESCHEDULE_BATCH: u32 = 32;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PassStats {
    pub scanned: u32,
    pub candidates: u32,
    pub converted: u32,
    pub rejected: u32,
    pub aborted: u32,
    pub second_chances: u32,
    pub skipped: u32,
    pub reschedules: u32,
}

/// Where the pass is after a step; `cost_ns` is the virtual time the step took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerStep {
    /// A block was compressed; its publication happens at the next step, so accesses that
    /// run before then race the conversion.
    Compressing {
        cost_ns: u64,
    },
    /// cond_resched() after a batch.
    Reschedule {
        cost_ns: u64,
    },
    Done {
        cost_ns: u64,
    },
}

enum Visit {
    /// Second chance or skipped: no compression.
    Passed,
    Rejected,
    /// Compressed and admitted: publication pending.
    InFlight,
}

struct Pending {
    slot: u32,
    nid: u32,
    compressed: Compressed,
    queue: u8,
}

pub struct WorkerPass {
    threshold: u32,
    pub stats: PassStats,
    pending: Option<Pending>,
    reschedule_due: bool,
    done: bool,
}

impl WorkerPass {
    /// Begin a pass: remember the raw head and tail.
    pub fn start(cache: &mut NodeCache, threshold_percent: u32) -> WorkerPass {
        let raw = cache.queues[QUEUE_RAW as usize];
        cache.worker_mark = (raw.len > 0).then_some(WorkerMark {
            next: raw.head,
            stop: raw.tail,
        });
        WorkerPass {
            threshold: threshold_percent,
            stats: PassStats::default(),
            pending: None,
            reschedule_due: false,
            done: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Run the pass to its next yield point.
    pub fn step(&mut self, cache: &mut NodeCache, em: &mut Emitter) -> WorkerStep {
        let mut cost_ns = 0;
        if let Some(pending) = self.pending.take() {
            self.finish(cache, pending, em);
        }
        loop {
            if self.reschedule_due {
                self.reschedule_due = false;
                self.stats.reschedules += 1;
                return WorkerStep::Reschedule {
                    cost_ns: cost_ns + costs::RESCHEDULE_NS,
                };
            }
            if self.done
                || self.stats.scanned >= MAX_SCAN
                || self.stats.candidates >= MAX_CANDIDATES
            {
                return self.end(cache, cost_ns);
            }
            let Some(slot) = cache.worker_next() else {
                return self.end(cache, cost_ns);
            };
            self.stats.scanned += 1;
            self.reschedule_due = self.stats.scanned.is_multiple_of(RESCHEDULE_BATCH);
            cost_ns += costs::WORKER_SCAN_NS;
            match self.visit(cache, slot, em) {
                Visit::Passed => {}
                Visit::Rejected => cost_ns += costs::COMPRESS_NS,
                Visit::InFlight => {
                    return WorkerStep::Compressing {
                        cost_ns: cost_ns + costs::COMPRESS_NS,
                    }
                }
            }
        }
    }

    fn end(&mut self, cache: &mut NodeCache, cost_ns: u64) -> WorkerStep {
        if !self.done {
            self.done = true;
            cache.worker_mark = None;
            cache.stats.worker_passes += 1;
        }
        WorkerStep::Done { cost_ns }
    }

    /// Examine one raw entry.
    fn visit(&mut self, cache: &mut NodeCache, slot: u32, em: &mut Emitter) -> Visit {
        let entry = &cache.entries[slot as usize];
        if entry.referenced {
            self.stats.second_chances += 1;
            cache.give_second_chance(slot, SECOND_CHANCE_BY_WORKER, em);
            return Visit::Passed;
        }
        if entry.dirty || entry.converting {
            self.stats.skipped += 1;
            return Visit::Passed;
        }
        self.stats.candidates += 1;
        let nid = entry.nid;
        let slots = &cache.config.slots;
        let admission = match &cache.payload {
            Payload::Sizes(sizes) => match sizes.get(nid) {
                Some(clen) => admission::admit_size(clen, self.threshold, slots),
                None => admission::compress(
                    entry.raw().expect("raw list holds raw entries"),
                    self.threshold,
                    slots,
                ),
            },
            Payload::Lz4 => admission::compress(
                entry.raw().expect("raw list holds raw entries"),
                self.threshold,
                slots,
            ),
        };
        let sized = matches!(cache.payload, Payload::Sizes(_));
        match admission {
            Admission::Admit {
                slot: object,
                clen,
                slot_bytes,
                queue,
                crc,
            } => {
                cache.entries[slot as usize].converting = true;
                let held_bytes = if sized && object.is_empty() {
                    slot_bytes
                } else {
                    object.len() as u32
                };
                let compressed = Compressed {
                    slot: object,
                    slot_bytes,
                    clen,
                    crc,
                    held_bytes,
                };
                self.pending = Some(Pending {
                    slot,
                    nid,
                    compressed,
                    queue,
                });
                Visit::InFlight
            }
            Admission::Reject { clen } => {
                self.stats.rejected += 1;
                cache.stats.events.convert_rejects += 1;
                em.convert_reject(nid, clen);
                cache.unlink(slot);
                cache.push_tail(slot, QUEUE_RAW);
                Visit::Rejected
            }
        }
    }

    /// Publish the pending conversion, or abort it when an access raced it.
    fn finish(&mut self, cache: &mut NodeCache, pending: Pending, em: &mut Emitter) {
        let still_ours = cache.slot_of(pending.nid) == Some(pending.slot)
            && cache.entries[pending.slot as usize].converting;
        if !still_ours {
            return;
        }
        if cache.entries[pending.slot as usize].raced {
            self.stats.aborted += 1;
            cache.abort_conversion(pending.slot, em);
            return;
        }
        let (clen, slot_bytes) = (pending.compressed.clen, pending.compressed.slot_bytes);
        cache.publish(pending.slot, pending.compressed, pending.queue);
        self.stats.converted += 1;
        let queue = cache.config.event_queue(pending.queue);
        em.convert(pending.nid, clen, slot_bytes, queue);
    }

    /// Stop early (the feature was switched off, the simulation ends): drop the pending object.
    pub fn cancel(&mut self, cache: &mut NodeCache) {
        if let Some(pending) = self.pending.take() {
            if cache.slot_of(pending.nid) == Some(pending.slot) {
                let entry = &mut cache.entries[pending.slot as usize];
                entry.converting = false;
                entry.raced = false;
            }
        }
        self.end(cache, 0);
    }
}

impl NodeCache {
    /// The next raw entry of the running pass, advancing the pass's position.
    fn worker_next(&mut self) -> Option<u32> {
        let mark = self.worker_mark.as_mut()?;
        let slot = mark.next;
        if slot == NIL {
            return None;
        }
        mark.next = if slot == mark.stop {
            NIL
        } else {
            self.entries[slot as usize].links.next
        };
        Some(slot)
    }
}
