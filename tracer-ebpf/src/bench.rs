//! The ring buffer benchmark's producer (`cargo xtask bench ringbuf`): one getpid by the bench
//! process emits a whole burst of Events through the same reserve/fill/submit path and the same
//! EVENTS ring buffer as the real programs, so that what is measured is the ring buffer and
//! its consumer, not the syscall that triggers the burst.
//!
//! A bounded loop rather than bpf_loop: aya 0.14 cannot relocate the callback address
//! (BPF_PSEUDO_FUNC) that bpf_loop takes, and the verifier walks 256 iterations easily.
use aya_ebpf::{macros::map, macros::tracepoint, maps::Array, programs::TracePointContext};
use tracer_common::{Event, EventKind};

use crate::maps::{emit, fill_task};

/// The longest burst one trigger emits.
pub const BENCH_BURST_MAX: u32 = 256;

/// Index 0: the bench's tgid (0 = off); index 1: events per trigger (at most BENCH_BURST_MAX).
#[map(name = "BENCH_SETTINGS")]
static BENCH_SETTINGS: Array<u32> = Array::with_max_entries(2, 0);

#[tracepoint]
pub fn bench_burst(_ctx: TracePointContext) -> u32 {
    let target = BENCH_SETTINGS.get(0).copied().unwrap_or(0);
    let tgid = (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32;
    if target == 0 || tgid != target {
        return 0;
    }
    let burst = BENCH_SETTINGS.get(1).copied().unwrap_or(0);
    // The task fields once per burst: the verifier walks every iteration, so the loop body is
    // kept to the reserve, a copy and the submit.
    let mut template = Event::ZERO;
    fill_task(&mut template, EventKind::Hello);
    for index in 0..BENCH_BURST_MAX {
        if index >= burst {
            break;
        }
        emit(|event| {
            *event = template;
            event.nid = index;
        });
    }
    0
}
