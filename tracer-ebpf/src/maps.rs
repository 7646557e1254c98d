//! Maps shared by every program. Userspace finds them by these names.
use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{Array, PerCpuArray, RingBuf},
};
use tracer_common::{Event, EventKind, COMM_LEN, CONFIG_COUNT};

/// Individual events for the detailed stream. Userspace may resize it before load.
#[map(name = "EVENTS")]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(4 * 1024 * 1024, 0);

/// Events that did not fit in EVENTS (index 0), per CPU so no atomics are needed; userspace
/// sums the CPUs. Counted so the user sees drops, never guesses.
#[map(name = "DROPS")]
pub static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Small run-time settings written by userspace (index = CONFIG_*).
#[map(name = "CONFIG")]
pub static CONFIG: Array<u32> = Array::with_max_entries(CONFIG_COUNT, 0);

pub fn config(index: u32) -> u32 {
    CONFIG.get(index).copied().unwrap_or(0)
}

/// Count one lost event in this CPU's slot.
pub fn count_drop() {
    count_drops(1);
}

/// Count `events` lost events (a batch of them) in this CPU's slot.
pub fn count_drops(events: u64) {
    if let Some(slot) = DROPS.get_ptr_mut(0) {
        // SAFETY: the pointer comes from the map and stays valid for the program's run; the
        // slot belongs to this CPU and BPF programs are not preempted on it.
        unsafe { *slot += events };
    }
}

/// Reserve, fill and submit one event; count a drop when the ring buffer is full.
#[inline(always)]
pub fn emit(fill: impl FnOnce(&mut Event)) {
    match EVENTS.reserve::<Event>(0) {
        Some(mut entry) => {
            let mut event = Event::ZERO;
            fill(&mut event);
            entry.write(event);
            entry.submit(0);
        }
        None => count_drop(),
    }
}

/// Unread bytes in EVENTS at which [`emit_batched`] wakes the reader: `RING_WAKEUP_EVENTS` events.
pub const WAKEUP_BYTES: u64 =
    tracer_common::maps::RING_WAKEUP_EVENTS * core::mem::size_of::<Event>() as u64;

/// [`emit`] for the F2FS programs' frequent events: the reader is woken only once WAKEUP_BYTES
/// wait, not per event. A wakeup is an irq_work and a task wakeup inside the traced call;
/// measured under `cargo xtask vm-bench` it was most of the program's run time. The reader
/// drains the ring on its own every 100 ms too (`EventReader::read_batch`), so a quiet ring's
/// events are late by that at most.
#[inline(always)]
pub fn emit_batched(fill: impl FnOnce(&mut Event)) {
    match EVENTS.reserve::<Event>(0) {
        Some(mut entry) => {
            let mut event = Event::ZERO;
            fill(&mut event);
            entry.write(event);
            let wakeup = if EVENTS.query(BPF_RB_AVAIL_DATA.into()) >= WAKEUP_BYTES {
                BPF_RB_FORCE_WAKEUP
            } else {
                BPF_RB_NO_WAKEUP
            };
            entry.submit(wakeup.into());
        }
        None => count_drop(),
    }
}

/// The current task as an event and its counter need it. Read once per traced event and
/// shared by both, so that the helpers behind it run once, not twice (per-event cost).
#[derive(Clone, Copy)]
pub struct Current {
    pub pid_tgid: u64,
    pub uid: u32,
    pub comm: [u8; COMM_LEN],
    pub ts_ns: u64,
}

impl Current {
    #[inline(always)]
    pub fn read() -> Current {
        Current {
            pid_tgid: aya_ebpf::helpers::bpf_get_current_pid_tgid(),
            uid: aya_ebpf::helpers::bpf_get_current_uid_gid() as u32,
            comm: aya_ebpf::helpers::bpf_get_current_comm().unwrap_or([0; COMM_LEN]),
            // SAFETY: bpf_ktime_get_ns has no preconditions.
            ts_ns: unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() },
        }
    }

    pub fn tgid(&self) -> u32 {
        (self.pid_tgid >> 32) as u32
    }

    /// Fill the task identity fields (pid, tgid, uid, comm, time) of an event.
    #[inline(always)]
    pub fn fill(&self, event: &mut Event, kind: EventKind) {
        event.ts_ns = self.ts_ns;
        event.pid = self.pid_tgid as u32;
        event.tgid = self.tgid();
        event.uid = self.uid;
        event.kind = kind as u8;
        event.comm = self.comm;
    }
}

/// Fill the task identity fields (pid, tgid, uid, comm, time) of an event.
pub fn fill_task(event: &mut Event, kind: EventKind) {
    Current::read().fill(event, kind);
}

/// The time, thread and process of an event, and its kind: no uid and no comm. For the access
/// trace's events (a node lookup is the most frequent event there is, and nothing attributes
/// lookups or evictions to a uid or a name): the two helpers behind those were a third of the
/// lookup program's run time under `cargo xtask vm-bench`.
#[inline(always)]
pub fn fill_thread(event: &mut Event, kind: EventKind) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    event.ts_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    event.pid = pid_tgid as u32;
    event.tgid = (pid_tgid >> 32) as u32;
    event.kind = kind as u8;
}
