//! The self-test `nodescope probe` runs: one event from a real tracepoint through the ring
//! buffer proves that this kernel loads our programs and that we may run them.
use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use aya_log_ebpf::info;
use tracer_common::{EventKind, CONFIG_TARGET_TGID};

use crate::maps::{config, emit, fill_task};

#[tracepoint]
pub fn hello_getpid(ctx: TracePointContext) -> u32 {
    let target = config(CONFIG_TARGET_TGID);
    let tgid = (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32;
    if target == 0 || tgid != target {
        return 0;
    }
    info!(&ctx, "hello from tgid {}", tgid);
    emit(|event| fill_task(event, EventKind::Hello));
    0
}
