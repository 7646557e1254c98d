//! Maps shared by every program. Userspace finds them by these names.
use aya_ebpf::{
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
    if let Some(slot) = DROPS.get_ptr_mut(0) {
        // SAFETY: the pointer comes from the map and stays valid for the program's run; the
        // slot belongs to this CPU and BPF programs are not preempted on it.
        unsafe { *slot += 1 };
    }
}

/// Reserve, fill and submit one event; count a drop when the ring buffer is full.
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

/// Fill the task identity fields (pid, tgid, uid, comm, time) of an event.
pub fn fill_task(event: &mut Event, kind: EventKind) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let uid_gid = aya_ebpf::helpers::bpf_get_current_uid_gid();
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    event.ts_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    event.pid = pid_tgid as u32;
    event.tgid = (pid_tgid >> 32) as u32;
    event.uid = uid_gid as u32;
    event.kind = kind as u8;
    event.comm = aya_ebpf::helpers::bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
}
