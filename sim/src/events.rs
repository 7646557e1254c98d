//! Event emission. Every event the simulator emits goes through [`Emitter`], which calls the
//! matching uprobe hook (`hooks.rs`) with the documented arguments and records a
//! `tracer_common::Event` stamped with the virtual clock and the current simulated task.
use std::sync::atomic::{AtomicU64, Ordering};

use tracer_common::{Event, EventKind, COMM_LEN, FLAG_READAHEAD};

use crate::hooks;

/// A simulated task: what `current` would be in the kernel when the event fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    pub comm: [u8; COMM_LEN],
}

impl Task {
    /// A single-threaded process; `comm` is cut to 15 bytes as the kernel does.
    pub fn process(pid: u32, uid: u32, comm: &str) -> Task {
        let mut bytes = [0u8; COMM_LEN];
        let cut = comm.len().min(COMM_LEN - 1);
        bytes[..cut].copy_from_slice(&comm.as_bytes()[..cut]);
        Task {
            pid,
            tgid: pid,
            uid,
            comm: bytes,
        }
    }

    /// A kernel thread (uid 0).
    pub fn kthread(pid: u32, comm: &str) -> Task {
        Task::process(pid, 0, comm)
    }

    pub fn comm_str(&self) -> String {
        let end = self.comm.iter().position(|b| *b == 0).unwrap_or(COMM_LEN);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// Simulated device number, as F2FS tracepoints print it (major << 20 | minor): 254:16, a
/// virtio disk's second device ("vdb").
pub const DEFAULT_DEV: u32 = (254 << 20) | 16;

/// Events emitted per kind (index = `EventKind as usize`) by every engine in this process,
/// recorded or not: the simulator's own count, which `nodescope sim --via-bpf` sets beside what
/// eBPF saw of the same run.
pub static EMITTED: [AtomicU64; KIND_SLOTS] = [const { AtomicU64::new(0) }; KIND_SLOTS];

/// Slots of [`EMITTED`]: every `EventKind` value fits (the recording format reserves them up
/// to 31 today).
pub const KIND_SLOTS: usize = tracer_common::RFC_KIND_SLOTS as usize;
const _: () = assert!((EventKind::ALL[EventKind::ALL.len() - 1] as usize) < KIND_SLOTS);

/// A copy of [`EMITTED`].
pub fn emitted() -> [u64; KIND_SLOTS] {
    std::array::from_fn(|kind| EMITTED[kind].load(Ordering::Relaxed))
}

/// `NodeAccess` flags, defined with the event (readers decode them as `tracer_common::Access`).
pub use tracer_common::{ACCESS_DIRTY, ACCESS_NEW};

/// Builds events, calls hooks, keeps them when recording.
pub struct Emitter {
    pub dev: u32,
    pub task: Task,
    pub now_ns: u64,
    record: bool,
    /// Also emit the access trace (`NodeAccess`, `NodeEvict`, checkpoints): `--accesses`.
    accesses: bool,
    events: Vec<Event>,
}

impl Emitter {
    pub fn new(dev: u32, record: bool) -> Emitter {
        Emitter {
            dev,
            task: Task::kthread(1, "init"),
            now_ns: 0,
            record,
            accesses: false,
            events: Vec::new(),
        }
    }

    /// Emit the access trace as well (every lookup, raw page drops, checkpoints).
    pub fn set_accesses(&mut self, accesses: bool) {
        self.accesses = accesses;
    }

    pub fn accesses(&self) -> bool {
        self.accesses
    }

    pub fn set_recording(&mut self, record: bool) {
        self.record = record;
    }

    /// Move the recorded events out.
    pub fn drain_into(&mut self, out: &mut Vec<Event>) {
        out.append(&mut self.events);
    }

    fn push(&mut self, kind: EventKind, nid: u32, fill: impl FnOnce(&mut Event)) {
        EMITTED[kind as usize].fetch_add(1, Ordering::Relaxed);
        if !self.record {
            return;
        }
        let mut event = Event::ZERO;
        event.ts_ns = self.now_ns;
        event.dev = self.dev;
        event.pid = self.task.pid;
        event.tgid = self.task.tgid;
        event.uid = self.task.uid;
        event.comm = self.task.comm;
        event.kind = kind as u8;
        event.nid = nid;
        fill(&mut event);
        self.events.push(event);
    }

    /// A node lookup (`flags`: 0, [`ACCESS_NEW`] or [`ACCESS_DIRTY`]), when tracing accesses.
    /// Returns where the recorded event sits, for [`Emitter::time_access`].
    pub fn node_access(&mut self, nid: u32, flags: u8) -> Option<usize> {
        if self.accesses {
            self.push(EventKind::NodeAccess, nid, |e| e.flags = flags);
            if self.record {
                return Some(self.events.len() - 1);
            }
        }
        None
    }

    /// The lookup recorded at `at` took `latency_ns` of virtual time and ended in `outcome`
    /// (`tracer_common::RETRIEVAL_*`), as the kernel's timed lookups tell (issue 51). The
    /// event stays where the lookup began, before what the lookup caused.
    pub fn time_access(&mut self, at: Option<usize>, outcome: u8, latency_ns: u64) {
        if let Some(event) = at.and_then(|at| self.events.get_mut(at)) {
            event.reason = outcome;
            event.latency_ns = latency_ns.max(1);
            // The lookup's own demand reads: one for a disk read.
            event.len = u32::from(outcome == tracer_common::RETRIEVAL_DISK_READ);
        }
    }

    /// A raw node page dropped from memory, when tracing accesses.
    pub fn node_evict(&mut self, nid: u32) {
        if self.accesses {
            self.push(EventKind::NodeEvict, nid, |_| {});
        }
    }

    /// A finished checkpoint (every dirty node written back), when tracing accesses.
    pub fn checkpoint_done(&mut self) {
        if self.accesses {
            self.push(EventKind::Checkpoint, 0, |e| {
                e.queue = tracer_common::CP_PHASE_FINISH_CHECKPOINT
            });
        }
    }

    pub fn node_read(&mut self, nid: u32, readahead: bool) {
        hooks::nodescope_sim_node_read(self.dev, nid, u32::from(readahead));
        self.push(EventKind::NodeRead, nid, |e| {
            // read_node_page sets REQ_RAHEAD for readahead and no flag for demand reads.
            e.flags = if readahead { FLAG_READAHEAD } else { 0 };
            e.len = 4096;
        });
    }

    /// A raw entry began (`NodeCache::insert_raw`): with `forget`, `reclaim` and
    /// `restore_fail` a consumer counts each queue's population from the events alone.
    pub fn insert(&mut self, nid: u32) {
        hooks::nodescope_sim_insert(self.dev, nid);
        self.push(EventKind::Insert, nid, |_| {});
    }

    pub fn convert(&mut self, nid: u32, clen: u32, slot_bytes: u32, queue: u8) {
        hooks::nodescope_sim_convert(self.dev, nid, clen, slot_bytes);
        self.push(EventKind::Convert, nid, |e| {
            e.len = clen;
            e.queue = queue;
        });
    }

    pub fn convert_reject(&mut self, nid: u32, clen: u32) {
        hooks::nodescope_sim_convert_reject(self.dev, nid, clen);
        self.push(EventKind::ConvertReject, nid, |e| e.len = clen);
    }

    pub fn convert_abort(&mut self, nid: u32) {
        hooks::nodescope_sim_convert_abort(self.dev, nid);
        self.push(EventKind::ConvertAbort, nid, |_| {});
    }

    /// Record a successful restore. The hook (`nodescope_sim_restore`) already ran around the
    /// restore work itself, so it is not called again here.
    pub fn restored(&mut self, nid: u32, clen: u32, queue: u8, latency_ns: u64) {
        self.push(EventKind::Restore, nid, |e| {
            e.len = clen;
            e.queue = queue;
            e.latency_ns = latency_ns;
        });
    }

    pub fn restore_fail(&mut self, nid: u32, reason: u8, clen: u32, queue: u8) {
        hooks::nodescope_sim_restore_fail(self.dev, nid, u32::from(reason), u32::from(queue));
        self.push(EventKind::RestoreFail, nid, |e| {
            e.reason = reason;
            e.len = clen;
            e.queue = queue;
        });
    }

    pub fn restore_nomem(&mut self, nid: u32, queue: u8) {
        hooks::nodescope_sim_restore_nomem(self.dev, nid);
        self.push(EventKind::RestoreNomem, nid, |e| e.queue = queue);
    }

    pub fn reclaim(&mut self, nid: u32, queue: u8) {
        hooks::nodescope_sim_reclaim(self.dev, nid, u32::from(queue));
        self.push(EventKind::Reclaim, nid, |e| e.queue = queue);
    }

    /// An entry of `queue` dropped, neither reclaimed nor a failed restore.
    pub fn forget(&mut self, nid: u32, queue: u8) {
        hooks::nodescope_sim_forget(self.dev, nid, u32::from(queue));
        self.push(EventKind::Forget, nid, |e| e.queue = queue);
    }

    pub fn second_chance(&mut self, nid: u32, queue: u8, by: u8) {
        hooks::nodescope_sim_second_chance(self.dev, nid, u32::from(queue), u32::from(by));
        self.push(EventKind::SecondChance, nid, |e| {
            e.queue = queue;
            e.reason = by;
        });
    }
}
