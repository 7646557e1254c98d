//! Programs on the RFC's own functions, configured at run time by a probe manifest.
//!
//! The RFC's code is not public, so the function names and argument positions are not known:
//! userspace writes a `ProbeSpec` per event kind into `RFC_SPECS`, saying where each event field
//! comes from (an argument, the return value, a constant, or memory behind an argument). The
//! same programs attach as kprobes/kretprobes to a patched kernel and as uprobes/uretprobes to
//! the simulator's hook functions.
//!
//! A patch's own tracepoints (`f2fs:f2fs_node_cache_*`) are the fifth kind of attach point:
//! the tracepoint program hands the record's address to the spec as argument 0, and userspace
//! writes each field as `mem(arg0+OFFSET)` with the offsets of the tracepoint's format file.
//!
//! The event kind is baked into each program (one program per kind and probe type) rather than
//! passed as an attach cookie: aya 0.14 has no cookies for kprobes, and cookies need Linux 5.15,
//! newer than many Android kernels.
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
        generated::{bpf_get_func_arg, bpf_get_func_ret},
    },
    macros::{fentry, fexit, kprobe, kretprobe, map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext,
};
use tracer_common::{
    EventKind, ProbeSpec, ValueSpec, FLAG_READAHEAD, RFC_KIND_SLOTS, SPEC_FIELD_COUNT,
    SPEC_FIELD_DEV, SPEC_FIELD_LATENCY, SPEC_FIELD_LEN, SPEC_FIELD_NID, SPEC_FIELD_QUEUE,
    SPEC_FIELD_READAHEAD, SPEC_FIELD_REASON, VALUE_ARG, VALUE_CONST, VALUE_MEM, VALUE_NONE,
    VALUE_RET,
};

use crate::maps::{emit, fill_task};

/// Decoding specs, index = EventKind.
#[map(name = "RFC_SPECS")]
static RFC_SPECS: Array<ProbeSpec> = Array::with_max_entries(RFC_KIND_SLOTS, 0);

/// Events emitted per kind, counted before the ring buffer, so userspace can tell what the
/// probes saw from what reached it.
#[map(name = "RFC_COUNTS")]
static RFC_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(RFC_KIND_SLOTS, 0);

const ARG_COUNT: usize = 6;

#[repr(C)]
#[derive(Clone, Copy)]
struct StashKey {
    pid_tgid: u64,
    kind: u64,
}

/// What the entry probe saves for the return probe: the arguments are gone by then.
#[repr(C)]
#[derive(Clone, Copy)]
struct Stash {
    ts_ns: u64,
    args: [u64; ARG_COUNT],
}

#[map(name = "RFC_STASH")]
static RFC_STASH: HashMap<StashKey, Stash> = HashMap::with_max_entries(16384, 0);

fn spec_for(kind: EventKind) -> Option<&'static ProbeSpec> {
    RFC_SPECS.get(kind as u32).filter(|spec| spec.enabled != 0)
}

fn read_args(ctx: &ProbeContext) -> [u64; ARG_COUNT] {
    let mut args = [0u64; ARG_COUNT];
    for (n, slot) in args.iter_mut().enumerate() {
        *slot = ctx.arg::<u64>(n).unwrap_or(0);
    }
    args
}

/// A trampoline program's arguments (fentry, fexit). bpf_get_func_arg (Linux 5.17) knows the
/// traced function's argument count, so one program serves functions of any arity; past the
/// last argument it fails without writing and the slot stays 0, as a kprobe's extra registers
/// would be junk. Its status is not tested: a branch per argument multiplied the verifier's
/// states past 6.1's complexity limit (E2BIG), where 6.12's verifier still passed.
fn read_func_args(ctx: &impl EbpfContext) -> [u64; ARG_COUNT] {
    let mut args = [0u64; ARG_COUNT];
    for (n, slot) in args.iter_mut().enumerate() {
        // SAFETY: the helper writes one u64 into `slot`, or fails without writing.
        let _ = unsafe { bpf_get_func_arg(ctx.as_ptr(), n as u32, slot) };
    }
    args
}

/// An fexit program's view of the return value (bpf_get_func_ret, Linux 5.17).
fn read_func_ret(ctx: &FExitContext) -> i64 {
    let mut value = 0u64;
    // SAFETY: the helper writes one u64 into `value`, or fails without writing.
    let _ = unsafe { bpf_get_func_ret(ctx.as_ptr(), &mut value) };
    value as i64
}

fn read_memory(address: u64, size: u8, user: bool) -> u64 {
    macro_rules! read {
        ($ty:ty) => {{
            let ptr = address as *const $ty;
            // SAFETY: the probe_read helpers validate the address and fail instead of faulting.
            let value = unsafe {
                if user {
                    bpf_probe_read_user(ptr)
                } else {
                    bpf_probe_read_kernel(ptr)
                }
            };
            value.map(|v| v as u64).unwrap_or(0)
        }};
    }
    match size {
        1 => read!(u8),
        2 => read!(u16),
        8 => read!(u64),
        _ => read!(u32),
    }
}

fn value_of(spec: &ValueSpec, args: &[u64; ARG_COUNT], ret: i64, user: bool) -> u64 {
    let arg = args.get(spec.arg as usize).copied().unwrap_or(0);
    let raw = match spec.source {
        VALUE_ARG => arg,
        VALUE_RET => ret as u64,
        VALUE_CONST => spec.offset as u64,
        VALUE_MEM => read_memory(arg.wrapping_add(spec.offset as u64), spec.size, user),
        _ => 0,
    };
    spec.apply(raw)
}

pub(crate) fn count(kind: EventKind) {
    // A restore on a thread inside a timed node lookup is that lookup's outcome (issue 51).
    if kind == EventKind::Restore {
        let _ = crate::access::lookup_saw(tracer_common::LOOKUP_SAW_RESTORE);
    }
    if let Some(slot) = RFC_COUNTS.get_ptr_mut(kind as u32) {
        // SAFETY: the pointer comes from the map; the slot is this CPU's and BPF programs are
        // not preempted on it.
        unsafe { *slot += 1 };
    }
}

fn emit_decoded(
    kind: EventKind,
    spec: &ProbeSpec,
    args: &[u64; ARG_COUNT],
    ret: i64,
    latency: u64,
) {
    let user = spec.user_memory != 0;
    let mut fields = [0u64; SPEC_FIELD_COUNT];
    for (value, field) in fields.iter_mut().zip(spec.fields.iter()) {
        *value = value_of(field, args, ret, user);
    }
    count(kind);
    emit(|event| {
        fill_task(event, kind);
        event.dev = fields[SPEC_FIELD_DEV] as u32;
        event.nid = fields[SPEC_FIELD_NID] as u32;
        event.len = fields[SPEC_FIELD_LEN] as u32;
        event.queue = fields[SPEC_FIELD_QUEUE] as u8;
        event.reason = fields[SPEC_FIELD_REASON] as u8;
        if fields[SPEC_FIELD_READAHEAD] != 0 {
            event.flags |= FLAG_READAHEAD;
        }
        // The kernel's own figure when the probe reads one, else the return probe's timing.
        event.latency_ns = if spec.fields[SPEC_FIELD_LATENCY].source != VALUE_NONE {
            fields[SPEC_FIELD_LATENCY]
        } else {
            latency
        };
    });
}

fn on_entry(ctx: &ProbeContext, kind: EventKind) {
    if let Some(spec) = spec_for(kind) {
        entered(spec, read_args(ctx), kind);
    }
}

fn on_fentry(ctx: &FEntryContext, kind: EventKind) {
    if let Some(spec) = spec_for(kind) {
        entered(spec, read_func_args(ctx), kind);
    }
}

/// A function was entered with `args`: emit (entry probes), or save the arguments and the
/// time for the return program (return probes).
fn entered(spec: &ProbeSpec, args: [u64; ARG_COUNT], kind: EventKind) {
    if spec.at_return == 0 {
        emit_decoded(kind, spec, &args, 0, 0);
        return;
    }
    let key = StashKey {
        pid_tgid: bpf_get_current_pid_tgid(),
        kind: kind as u64,
    };
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let stash = Stash {
        ts_ns: unsafe { bpf_ktime_get_ns() },
        args,
    };
    let _ = RFC_STASH.insert(&key, &stash, 0);
}

fn on_return(ctx: &RetProbeContext, kind: EventKind) {
    if let Some(spec) = spec_for(kind) {
        returned(spec, ctx.ret(), kind);
    }
}

fn on_fexit(ctx: &FExitContext, kind: EventKind) {
    if let Some(spec) = spec_for(kind) {
        returned(spec, read_func_ret(ctx), kind);
    }
}

/// A function returned `ret`: emit with the arguments and the time the entry saved.
fn returned(spec: &ProbeSpec, ret: i64, kind: EventKind) {
    let key = StashKey {
        pid_tgid: bpf_get_current_pid_tgid(),
        kind: kind as u64,
    };
    // SAFETY: the value is copied out before the entry is removed below.
    let stash = unsafe { RFC_STASH.get(&key) }.copied();
    let _ = RFC_STASH.remove(&key);
    if !spec.accepts_ret(ret) {
        return;
    }
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let (args, latency) = match stash {
        Some(stash) => (stash.args, now.saturating_sub(stash.ts_ns)),
        None => ([0; ARG_COUNT], 0),
    };
    emit_decoded(kind, spec, &args, ret, latency);
}

/// A tracepoint of the patch: one hit is one event; its fields are read from the record.
fn on_tracepoint(ctx: &TracePointContext, kind: EventKind) {
    let Some(spec) = spec_for(kind) else {
        return;
    };
    let mut args = [0u64; ARG_COUNT];
    args[0] = ctx.as_ptr() as u64;
    emit_decoded(kind, spec, &args, 0, 0);
}

/// Seven programs per kind: kernel entry/return as kprobes and as trampolines (fentry/fexit),
/// user entry/return, and a tracepoint.
macro_rules! probe_programs {
    ($kind:expr, $k:ident, $kret:ident, $f:ident, $fx:ident, $u:ident, $uret:ident, $t:ident) => {
        #[fentry]
        pub fn $f(ctx: FEntryContext) -> u32 {
            on_fentry(&ctx, $kind);
            0
        }
        #[fexit]
        pub fn $fx(ctx: FExitContext) -> u32 {
            on_fexit(&ctx, $kind);
            0
        }
        #[tracepoint]
        pub fn $t(ctx: TracePointContext) -> u32 {
            on_tracepoint(&ctx, $kind);
            0
        }
        #[kprobe]
        pub fn $k(ctx: ProbeContext) -> u32 {
            on_entry(&ctx, $kind);
            0
        }
        #[kretprobe]
        pub fn $kret(ctx: RetProbeContext) -> u32 {
            on_return(&ctx, $kind);
            0
        }
        #[uprobe]
        pub fn $u(ctx: ProbeContext) -> u32 {
            on_entry(&ctx, $kind);
            0
        }
        #[uretprobe]
        pub fn $uret(ctx: RetProbeContext) -> u32 {
            on_return(&ctx, $kind);
            0
        }
    };
}

probe_programs!(
    EventKind::NodeRead,
    k_node_read,
    kr_node_read,
    f_node_read,
    fx_node_read,
    u_node_read,
    ur_node_read,
    t_node_read
);
probe_programs!(
    EventKind::Convert,
    k_convert,
    kr_convert,
    f_convert,
    fx_convert,
    u_convert,
    ur_convert,
    t_convert
);
probe_programs!(
    EventKind::ConvertReject,
    k_convert_reject,
    kr_convert_reject,
    f_convert_reject,
    fx_convert_reject,
    u_convert_reject,
    ur_convert_reject,
    t_convert_reject
);
probe_programs!(
    EventKind::ConvertAbort,
    k_convert_abort,
    kr_convert_abort,
    f_convert_abort,
    fx_convert_abort,
    u_convert_abort,
    ur_convert_abort,
    t_convert_abort
);
probe_programs!(
    EventKind::Restore,
    k_restore,
    kr_restore,
    f_restore,
    fx_restore,
    u_restore,
    ur_restore,
    t_restore
);
probe_programs!(
    EventKind::RestoreFail,
    k_restore_fail,
    kr_restore_fail,
    f_restore_fail,
    fx_restore_fail,
    u_restore_fail,
    ur_restore_fail,
    t_restore_fail
);
probe_programs!(
    EventKind::RestoreNomem,
    k_restore_nomem,
    kr_restore_nomem,
    f_restore_nomem,
    fx_restore_nomem,
    u_restore_nomem,
    ur_restore_nomem,
    t_restore_nomem
);
probe_programs!(
    EventKind::Reclaim,
    k_reclaim,
    kr_reclaim,
    f_reclaim,
    fx_reclaim,
    u_reclaim,
    ur_reclaim,
    t_reclaim
);
probe_programs!(
    EventKind::SecondChance,
    k_second_chance,
    kr_second_chance,
    f_second_chance,
    fx_second_chance,
    u_second_chance,
    ur_second_chance,
    t_second_chance
);
probe_programs!(
    EventKind::Insert,
    k_insert,
    kr_insert,
    f_insert,
    fx_insert,
    u_insert,
    ur_insert,
    t_insert
);
probe_programs!(
    EventKind::Forget,
    k_forget,
    kr_forget,
    f_forget,
    fx_forget,
    u_forget,
    ur_forget,
    t_forget
);
