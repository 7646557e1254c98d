//! Access traces (`--accesses`, issue #13): every node lookup, from a kprobe on the node lookup
//! function this kernel has, and every node page that leaves the page cache, from
//! `filemap:mm_filemap_delete_from_page_cache` filtered in the kernel to F2FS's node inode.
//! The programs are tracer-ebpf/src/access.rs.
//!
//! Nothing is hard-coded: the device comes from `sbi->sb->s_dev` and the node inode from
//! `sbi->node_ino_num`, at offsets BTF gives (vmlinux + the f2fs module's split BTF); the
//! eviction record's fields at the offsets its format file gives. `plan` is pure so tests can
//! feed it other kernels' facts; `plan_this_kernel` gathers this kernel's.
use crate::source::bpf::ObjectMaps as _;
use std::{fmt::Write as _, path::Path};
use tracer_common::maps;

use anyhow::{bail, Context as _, Result};
use aya::{
    maps::{Array, PerCpuArray},
    programs::{KProbe, RawTracePoint, RawTracePointRunOptions, TestRun as _, TracePoint},
    Ebpf,
};
use serde::Serialize;
use tracer_common::{
    AccessBatch, AccessLayout, ACCESS_COUNT_DEVICE_READS, ACCESS_COUNT_EVICTIONS,
    ACCESS_COUNT_INODE_EVICTIONS, ACCESS_COUNT_LOCK_WAITS, ACCESS_COUNT_LOOKUPS,
    ACCESS_COUNT_SHRINKER_SCANS, ACCESS_COUNT_WAITS_NOTED,
};

use crate::source::bpf::{
    discover::kallsyms,
    trampoline::{self, BtfTarget, FunctionHook, Hook, TracingPrograms, TrampolineLink},
};

use super::attach::AttachOutcome;
use crate::{
    source::bpf::{
        self,
        discover::btf::{KernelBtf, Member, Shape},
        format::Format,
    },
    system,
};

/// Program names in the eBPF object (tracer-ebpf/src/access.rs).
pub(crate) const PROG_ACCESS: &str = "f2fs_node_access";
/// The same program as an fentry (BPF trampoline) program.
pub(crate) const PROG_ACCESS_FENTRY: &str = "f2fs_node_access_fentry";
/// A timed lookup's return (issue 51), as a kretprobe and as fexit.
pub(crate) const PROG_ACCESS_RETURN: &str = "f2fs_node_access_return";
pub(crate) const PROG_ACCESS_FEXIT: &str = "f2fs_node_access_fexit";
/// Marks a timed lookup that waits on a locked page (another's read in flight).
pub(crate) const PROG_LOCK_WAIT: &str = "f2fs_lookup_lock_wait";
/// Parks a timed lookup whose thread leaves its CPU (a raw tracepoint on `sched_switch`).
pub(crate) const PROG_SWITCH: &str = "f2fs_lookup_switch";
/// The same, also noting a blocking thread's wait, where `sched_switch` has `prev_state`.
pub(crate) const PROG_SWITCH_STATE: &str = "f2fs_lookup_switch_state";
pub(crate) const SWITCH_TRACEPOINT: &str = "sched_switch";
/// A timed lookup's read through the block layer: its request issued and completed.
pub(crate) const PROG_BLOCK_ISSUE: &str = "f2fs_lookup_block_issue";
pub(crate) const PROG_BLOCK_COMPLETE: &str = "f2fs_lookup_block_complete";
pub(crate) const BLOCK_CATEGORY: &str = "block";
pub(crate) const BLOCK_ISSUE: &str = "block_rq_issue";
pub(crate) const BLOCK_COMPLETE: &str = "block_rq_complete";
/// The page cache's sleeping page lock, the slow path of `folio_lock` (5.16+) / `lock_page`:
/// a lookup that finds its node page locked (being read by another task) waits in it.
pub(crate) const LOCK_WAIT_FUNCTIONS: [&str; 2] = ["__folio_lock", "__lock_page"];
pub(crate) const PROG_EVICT: &str = "f2fs_node_evict";
/// An F2FS inode leaving the inode cache, from F2FS's own tracepoint.
pub(crate) const PROG_INODE_EVICT: &str = "f2fs_inode_evict";
pub(crate) const INODE_EVICT_CATEGORY: &str = "f2fs";
pub(crate) const INODE_EVICT_TRACEPOINT: &str = "f2fs_evict_inode";
/// Reclaim's calls of F2FS's shrinker, from the shrinkers' common tracepoint.
pub(crate) const PROG_SHRINKER_SCAN: &str = "f2fs_shrinker_scan";
pub(crate) const SHRINKER_CATEGORY: &str = "vmscan";
pub(crate) const SHRINKER_TRACEPOINT: &str = "mm_shrink_slab_start";
/// F2FS's shrinker scan function (5.10 .. mainline), the tracepoint's `shrink` of F2FS's
/// calls; where the kernel is built with Clang's CFI (Android's 5.10 GKI), a function
/// pointer is its jump-table entry, `<name>.cfi_jt`, tried first.
pub(crate) const SHRINKER_SCAN_FUNCTIONS: [&str; 2] =
    ["f2fs_shrink_scan.cfi_jt", "f2fs_shrink_scan"];
/// Sends a CPU's batch of lookups when run there (never attached).
pub(crate) const PROG_FLUSH: &str = "f2fs_access_flush";
/// Counts F2FS teardowns, on the return of [`TEARDOWN_FUNCTION`].
pub(crate) const PROG_TEARDOWN: &str = "f2fs_sb_gone";
/// F2FS's `kill_sb` (5.10 .. mainline): it frees the `f2fs_sb_info` before it returns. A
/// function-pointer target, so never inlined.
pub(crate) const TEARDOWN_FUNCTION: &str = "kill_f2fs_super";

/// The node lookup entry points, each `(struct f2fs_sb_info *, nid_t or pgoff_t nid, ..)`: every
/// one the kernel has is traced, since none calls another. 6.1 .. 6.14 have
/// `f2fs_get_node_page` only; 6.15 added `f2fs_get_node_folio` beside it and split the inode
/// and xattr-node lookups out (`f2fs_get_inode_*`, `f2fs_get_xnode_*`, which go straight to
/// `__get_node_folio`, so a probe on `f2fs_get_node_*` alone misses them); 6.16 removed the
/// page names. Not seen: `f2fs_get_node_page_ra` (indirect node blocks of large files).
pub(crate) const LOOKUP_FUNCTIONS: [&str; 6] = [
    "f2fs_get_node_page",
    "f2fs_get_node_folio",
    "f2fs_get_inode_page",
    "f2fs_get_inode_folio",
    "f2fs_get_xnode_page",
    "f2fs_get_xnode_folio",
];

/// The shared inner lookup, used only where no entry point above exists: on Debian's 6.1 and
/// 6.12 GCC inlines the hot part of `__get_node_page` into `f2fs_get_node_page` (the rest is
/// `__get_node_page.part.0`), so the exact `__get_node_page` symbol saw 3 calls where the VM
/// test's replay made thousands of lookups. Only exact names anywhere: a GCC clone such as
/// `.part.0` is entered for part of the calls only.
pub(crate) const INNER_LOOKUP_FUNCTIONS: [&str; 2] = ["__get_node_page", "__get_node_folio"];

pub(crate) const EVICT_CATEGORY: &str = "filemap";
pub(crate) const EVICT_TRACEPOINT: &str = "mm_filemap_delete_from_page_cache";

/// Struct member offsets the lookup program reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructOffsets {
    pub sbi_sb: u32,
    pub sb_s_dev: u32,
    pub sbi_node_ino: u32,
}

/// What `--accesses` attaches on this kernel, and why not when it cannot.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AccessPlan {
    /// The lookup functions (empty when node lookups cannot be traced).
    pub lookup_functions: Vec<String>,
    /// "fentry" (each function's BPF trampoline; a kprobe where the kernel refuses one) or
    /// "kprobe".
    pub lookup_hook: &'static str,
    /// The functions' BTF ids, when the hook is fentry.
    #[serde(skip)]
    pub fentry_targets: Vec<BtfTarget>,
    /// `filemap:mm_filemap_delete_from_page_cache`, when evictions can be traced.
    pub evict_tracepoint: Option<String>,
    /// `f2fs:f2fs_evict_inode`, when inode evictions can be traced.
    pub inode_evict_tracepoint: Option<String>,
    /// `vmscan:mm_shrink_slab_start` and F2FS's scan function, when reclaim's calls of
    /// F2FS's shrinker can be traced.
    pub shrinker_tracepoint: Option<String>,
    /// Why a part is missing, one line each.
    pub missing: Vec<String>,
    /// Lookups are timed (`--lookup-latency`): a return program on each lookup function too.
    pub timed: bool,
    /// The page-lock function whose entry marks a timed lookup as waiting on another's read
    /// (`LOCK_WAIT_FUNCTIONS`), when timed and the kernel has one.
    pub lock_wait: Option<String>,
    /// The block layer's request tracepoints are hooked for the disk reads' device time.
    pub device_time: bool,
    /// `sched_switch` passes the task's state (BTF: `btf_trace_sched_switch` has
    /// `prev_state`), so a timed lookup whose thread blocks is noted as waiting there.
    pub switch_state: bool,
    #[serde(skip)]
    pub layout: AccessLayout,
}

impl AccessPlan {
    /// One line per part, for `nodescope probe` and `stream --plan`.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if self.lookup_functions.is_empty() {
            let _ = writeln!(out, "{:<12} not available", "node_access");
        } else {
            let probes: Vec<String> = self
                .lookup_functions
                .iter()
                .map(|f| format!("{} {f}", self.lookup_hook))
                .collect();
            let _ = writeln!(out, "{:<12} {}", "node_access", probes.join(" + "));
        }
        if self.timed {
            let exit = if self.lookup_hook == "fentry" {
                "fexit"
            } else {
                "kretprobe"
            };
            let wait = match &self.lock_wait {
                Some(function) => format!(" + waits kprobe {function}"),
                None => String::new(),
            };
            let device = if self.device_time {
                format!(
                    " + device time tracepoints {BLOCK_CATEGORY}:{BLOCK_ISSUE}, {BLOCK_COMPLETE}"
                )
            } else {
                String::new()
            };
            let _ = writeln!(out, "{:<12} timed: {exit} on each{wait}{device}", "");
        }
        match &self.evict_tracepoint {
            Some(tp) => drop(writeln!(out, "{:<12} tracepoint {tp}", "node_evict")),
            None => drop(writeln!(out, "{:<12} not available", "node_evict")),
        }
        match &self.inode_evict_tracepoint {
            Some(tp) => drop(writeln!(out, "{:<12} tracepoint {tp}", "inode_evict")),
            None => drop(writeln!(out, "{:<12} not available", "inode_evict")),
        }
        match &self.shrinker_tracepoint {
            Some(tp) => drop(writeln!(out, "{:<12} tracepoint {tp}", "shrinker")),
            None => drop(writeln!(out, "{:<12} not available", "shrinker")),
        }
        for why in &self.missing {
            let _ = writeln!(out, "{:<12}   not used: {why}", "");
        }
        out
    }
}

/// Plan from the kernel's facts: its kallsyms text, whether it has kprobes, F2FS's struct
/// offsets from BTF, and the eviction tracepoint's format file.
pub(crate) fn plan(
    kallsyms: &str,
    kprobes: bool,
    offsets: Result<StructOffsets>,
    evict_format: Result<String>,
) -> AccessPlan {
    let mut missing = Vec::new();
    let mut layout = AccessLayout::default();
    let lookup_functions = lookup_functions(kallsyms, kprobes).and_then(|functions| {
        let offsets = offsets.context("the device and node inode need F2FS's BTF")?;
        layout.sbi_sb = offsets.sbi_sb;
        layout.sb_s_dev = offsets.sb_s_dev;
        layout.sbi_node_ino = offsets.sbi_node_ino;
        Ok(functions)
    });
    let lookup_functions = lookup_functions
        .map_err(|err| missing.push(format!("node_access: {err:#}")))
        .unwrap_or_default();
    let evict = evict_format.and_then(|text| evict_offsets(&text, &mut layout));
    let evict_tracepoint = match (lookup_functions.is_empty(), evict) {
        (false, Ok(())) => Some(format!("{EVICT_CATEGORY}:{EVICT_TRACEPOINT}")),
        (true, Ok(())) => {
            missing.push("node_evict: the node inode is learnt from node lookups".into());
            None
        }
        (_, Err(err)) => {
            missing.push(format!("node_evict: {err:#}"));
            None
        }
    };
    AccessPlan {
        lookup_functions,
        lookup_hook: "kprobe",
        fentry_targets: Vec::new(),
        evict_tracepoint,
        inode_evict_tracepoint: None,
        shrinker_tracepoint: None,
        missing,
        timed: false,
        lock_wait: None,
        device_time: false,
        switch_state: false,
        layout,
    }
}

/// The plan with F2FS's inode evictions (`f2fs:f2fs_evict_inode`: its `dev` and `ino` offsets
/// from `format`), when node lookups are traced: the program keeps the devices whose lookups
/// it has seen. Without them, what is missing says why.
pub(crate) fn with_inode_evictions(mut plan: AccessPlan, format: Result<String>) -> AccessPlan {
    if plan.lookup_functions.is_empty() {
        plan.missing
            .push("inode_evict: the devices are learnt from node lookups".into());
        return plan;
    }
    let offsets = format.and_then(|text| {
        let format = Format::parse(&text).context("parsing its format file")?;
        Ok((
            field_offset(&format, "dev", 4)?,
            field_offset(&format, "ino", 8)?,
        ))
    });
    match offsets {
        Ok((dev, ino)) => {
            plan.layout.inode_evict_dev = dev;
            plan.layout.inode_evict_ino = ino;
            plan.inode_evict_tracepoint =
                Some(format!("{INODE_EVICT_CATEGORY}:{INODE_EVICT_TRACEPOINT}"));
        }
        Err(err) => plan.missing.push(format!("inode_evict: {err:#}")),
    }
    plan
}

/// The plan with reclaim's calls of F2FS's shrinker (`vmscan:mm_shrink_slab_start`: its
/// `shrink`, `cache_items`, `total_scan` and `priority` offsets from `format`, F2FS's scan
/// function's address from `kallsyms`), when node lookups are traced. The what-if replays the
/// kernel's reclaim from them (`sim::whatif`); without them it says what it falls back to.
pub(crate) fn with_shrinker(
    mut plan: AccessPlan,
    kallsyms: &str,
    format: Result<String>,
) -> AccessPlan {
    if plan.lookup_functions.is_empty() {
        plan.missing
            .push("shrinker: recorded with the node lookups only".into());
        return plan;
    }
    let function = SHRINKER_SCAN_FUNCTIONS.iter().find_map(|name| {
        kallsyms.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.next()?;
            fields.next()?;
            (fields.next()? == *name).then(|| (*name, u64::from_str_radix(address, 16).ok()))
        })
    });
    let address = match function {
        Some((name, Some(address))) if address != 0 => Ok((name, address)),
        Some((name, _)) => Err(anyhow::anyhow!(
            "{name}'s address is hidden in /proc/kallsyms (root, kptr_restrict)"
        )),
        None => Err(anyhow::anyhow!(
            "none of {} in /proc/kallsyms (is f2fs loaded?)",
            SHRINKER_SCAN_FUNCTIONS.join(", ")
        )),
    };
    let offsets = format.and_then(|text| {
        let format = Format::parse(&text).context("parsing its format file")?;
        Ok([
            field_offset(&format, "shrink", 8)?,
            field_offset(&format, "cache_items", 8)?,
            field_offset(&format, "total_scan", 8)?,
            field_offset(&format, "priority", 4)?,
        ])
    });
    match (address, offsets) {
        (Ok((name, address)), Ok([shrink, items, total, priority])) => {
            plan.layout.shrink_fn = shrink;
            plan.layout.shrink_items = items;
            plan.layout.shrink_total = total;
            plan.layout.shrink_priority = priority;
            plan.layout.shrink_scan_fn = address;
            plan.shrinker_tracepoint = Some(format!(
                "{SHRINKER_CATEGORY}:{SHRINKER_TRACEPOINT} ({name})"
            ));
        }
        (Err(err), _) | (_, Err(err)) => plan.missing.push(format!("shrinker: {err:#}")),
    }
    plan
}

/// The plan with its lookups timed (issue 51): a return program beside each entry, and the
/// page-lock function (`LOCK_WAIT_FUNCTIONS`, the first in kallsyms) that tells a lookup that
/// waited on another's read from a hit. Without one, such lookups count as hits (said).
/// The device time of timed lookups' reads: the block request tracepoints' `dev` and `sector`
/// offsets from their format files (issue, complete). Without them the reads are timed whole.
pub(crate) fn with_device_time(
    mut plan: AccessPlan,
    issue: Result<String>,
    complete: Result<String>,
) -> AccessPlan {
    if !plan.timed {
        return plan;
    }
    let offsets = |text: Result<String>| -> Result<(u16, u16)> {
        let format = Format::parse(&text?).context("parsing its format file")?;
        Ok((
            field_offset(&format, "dev", 4)?,
            field_offset(&format, "sector", 8)?,
        ))
    };
    match (offsets(issue), offsets(complete)) {
        (Ok((issue_dev, issue_sector)), Ok((complete_dev, complete_sector))) => {
            plan.device_time = true;
            plan.layout.time_device = 1;
            plan.layout.block_issue_dev = issue_dev;
            plan.layout.block_issue_sector = issue_sector;
            plan.layout.block_complete_dev = complete_dev;
            plan.layout.block_complete_sector = complete_sector;
        }
        (Err(err), _) | (_, Err(err)) => plan.missing.push(format!(
            "node_access: device time: {BLOCK_CATEGORY}:{BLOCK_ISSUE}/{BLOCK_COMPLETE}: {err:#}"
        )),
    }
    plan
}

pub(crate) fn with_timing(mut plan: AccessPlan, kallsyms: &str) -> AccessPlan {
    if plan.lookup_functions.is_empty() {
        return plan;
    }
    plan.timed = true;
    plan.layout.time_lookups = 1;
    let names: Vec<&str> = kallsyms
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    plan.lock_wait = LOCK_WAIT_FUNCTIONS
        .iter()
        .find(|f| names.contains(f))
        .map(|f| f.to_string());
    if plan.lock_wait.is_none() {
        plan.missing.push(format!(
            "node_access: none of {} in /proc/kallsyms: a lookup that waits on another's \
             read counts as a hit",
            LOCK_WAIT_FUNCTIONS.join(", ")
        ));
    }
    plan
}

/// The plan with fentry for every lookup function, when `targets` has each one's BTF id; else
/// with kprobes, and why not fentry among the missing parts.
pub(crate) fn with_fentry(mut plan: AccessPlan, targets: Result<Vec<BtfTarget>>) -> AccessPlan {
    if plan.lookup_functions.is_empty() {
        return plan;
    }
    match targets {
        Ok(targets) => {
            plan.lookup_hook = "fentry";
            plan.fentry_targets = targets;
        }
        Err(err) => plan
            .missing
            .push(format!("node_access: fentry: {err:#}; kprobes instead")),
    }
    plan
}

/// Every one of `LOOKUP_FUNCTIONS` this kernel has under its exact name, else the first of
/// `INNER_LOOKUP_FUNCTIONS`.
fn lookup_functions(kallsyms: &str, kprobes: bool) -> Result<Vec<String>> {
    if !kprobes {
        bail!("kprobes not available (CONFIG_KPROBES)");
    }
    let names: Vec<&str> = kallsyms
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    let present = |wanted: &&&str| names.contains(*wanted);
    let entries: Vec<String> = LOOKUP_FUNCTIONS
        .iter()
        .filter(present)
        .map(|name| name.to_string())
        .collect();
    if !entries.is_empty() {
        return Ok(entries);
    }
    INNER_LOOKUP_FUNCTIONS
        .iter()
        .find(|name| present(name))
        .map(|name| vec![name.to_string()])
        .with_context(|| {
            format!(
                "none of {}, {} in /proc/kallsyms (is f2fs loaded?)",
                LOOKUP_FUNCTIONS.join(", "),
                INNER_LOOKUP_FUNCTIONS.join(", ")
            )
        })
}

fn evict_offsets(text: &str, layout: &mut AccessLayout) -> Result<()> {
    let format = Format::parse(text).context("parsing its format file")?;
    layout.evict_ino = field_offset(&format, "i_ino", 8)?;
    layout.evict_index = field_offset(&format, "index", 8)?;
    layout.evict_dev = field_offset(&format, "s_dev", 4)?;
    Ok(())
}

/// A field's offset, checked to be `size` bytes (the program reads exactly that many).
fn field_offset(format: &Format, name: &str, size: u16) -> Result<u16> {
    let field = format
        .field(name)
        .with_context(|| format!("{} has no field `{name}`", format.name))?;
    if field.size != size {
        bail!(
            "{}: field `{name}` is {} bytes, expected {size}",
            format.name,
            field.size
        );
    }
    Ok(field.offset)
}

/// The three offsets from BTF, each checked for the type the program reads.
pub fn struct_offsets(btf: &KernelBtf) -> Result<StructOffsets> {
    let sbi = btf.members("f2fs_sb_info");
    let sb = btf.members("super_block");
    let find = |members: &[Member], owner: &str, name: &str| {
        members
            .iter()
            .find(|m| m.name == name)
            .cloned()
            .with_context(|| format!("BTF has no member {owner}.{name}"))
    };
    let sbi_sb = find(&sbi, "f2fs_sb_info", "sb")?;
    if !sbi_sb.shape.points_to("super_block") {
        bail!("f2fs_sb_info.sb is not a struct super_block pointer");
    }
    let node_ino = find(&sbi, "f2fs_sb_info", "node_ino_num")?;
    let s_dev = find(&sb, "super_block", "s_dev")?;
    for (member, what) in [
        (&node_ino, "f2fs_sb_info.node_ino_num"),
        (&s_dev, "super_block.s_dev"),
    ] {
        if !matches!(member.shape, Shape::Int { size: 4, .. }) {
            bail!("{what} is not a 4-byte integer");
        }
    }
    Ok(StructOffsets {
        sbi_sb: sbi_sb.offset,
        sb_s_dev: s_dev.offset,
        sbi_node_ino: node_ino.offset,
    })
}

/// The plan for the running kernel; `timed`: lookups timed (`--lookup-latency`).
pub(crate) fn plan_this_kernel(hook: FunctionHook, timed: bool) -> AccessPlan {
    let kallsyms = kallsyms::read(Path::new(kallsyms::PROC_KALLSYMS)).unwrap_or_default();
    let btf = bpf::discover::btf::this_kernel();
    let offsets = btf
        .as_ref()
        .map_err(|err| anyhow::anyhow!("{err:#}"))
        .and_then(|shared| struct_offsets(&shared.1));
    let evict_format = tracepoint_format(EVICT_CATEGORY, EVICT_TRACEPOINT);
    let plan = plan(&kallsyms, system::has_kprobes(), offsets, evict_format);
    let plan = with_inode_evictions(
        plan,
        tracepoint_format(INODE_EVICT_CATEGORY, INODE_EVICT_TRACEPOINT),
    );
    let plan = with_shrinker(
        plan,
        &kallsyms,
        tracepoint_format(SHRINKER_CATEGORY, SHRINKER_TRACEPOINT),
    );
    let release = system::kernel_release();
    // `(void *data, bool preempt, prev, next, unsigned int prev_state)` since Linux 5.18.
    let switch_state = btf.as_ref().is_ok_and(|shared| {
        shared
            .1
            .typedef_params(&format!("btf_trace_{SWITCH_TRACEPOINT}"))
            == Some(5)
    });
    let targets = trampoline::usable(hook, &bpf::arch::kernel_machine(), &release).and_then(|()| {
        let shared = btf.map_err(|err| anyhow::anyhow!("{err:#}"))?;
        let (files, btf) = &*shared;
        plan.lookup_functions
            .iter()
            .map(|function| BtfTarget::find(btf, files, function))
            .collect()
    });
    let plan = with_fentry(plan, targets);
    if !timed {
        return plan;
    }
    let mut plan = with_timing(plan, &kallsyms);
    plan.switch_state = switch_state;
    with_device_time(
        plan,
        tracepoint_format(BLOCK_CATEGORY, BLOCK_ISSUE),
        tracepoint_format(BLOCK_CATEGORY, BLOCK_COMPLETE),
    )
}

/// A tracepoint's format file, from tracefs.
fn tracepoint_format(category: &str, name: &str) -> Result<String> {
    let root = system::tracefs().context("tracefs is not mounted")?;
    let path = root.join("events").join(category).join(name).join("format");
    super::planner::read_format(&path).with_context(|| format!("reading {}", path.display()))
}

/// What `attach` attached: each attachment's outcome, and the trampolines' links, which
/// detach when dropped (the kprobes and the tracepoint live as long as the `Ebpf`).
pub(crate) struct Attached {
    pub outcomes: Vec<AttachOutcome>,
    pub trampolines: Vec<TrampolineLink>,
}

/// Write the layout, then attach what the plan chose. Each attachment's outcome is returned;
/// the caller decides what it cannot live without. A lookup function whose trampoline the
/// kernel refuses gets the kprobe, and its outcome says why. `taken`: the fds of maps taken
/// out of `ebpf` (the ring buffer, by its reader), by name.
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    plan: &AccessPlan,
    taken: &[(&str, std::os::fd::RawFd)],
) -> Result<Attached> {
    let mut outcomes = Vec::new();
    let mut layout = plan.layout;
    if !plan.lookup_functions.is_empty() {
        let teardowns = attach_teardowns(ebpf);
        layout.cache_device = u16::from(teardowns.is_ok());
        outcomes.push(AttachOutcome::of(
            "node_access_devices",
            format!("kretprobe {TEARDOWN_FUNCTION}"),
            teardowns,
        ));
    }
    if plan.timed && !plan.lookup_functions.is_empty() {
        // Before the lookups: no lookup may wait in a CPU's slot unless its thread's leaving
        // the CPU moves it out. Without the hook, every timed lookup goes through the map.
        let program = if plan.switch_state {
            PROG_SWITCH_STATE
        } else {
            PROG_SWITCH
        };
        let switch = attach_switch(ebpf, program);
        layout.lookup_slots = u16::from(switch.is_ok());
        layout.switch_state = u16::from(switch.is_ok() && plan.switch_state);
        outcomes.push(AttachOutcome::of(
            "node_access_slots",
            format!("raw_tracepoint {SWITCH_TRACEPOINT}"),
            switch,
        ));
    }
    let map = ebpf.named_map_mut(maps::ACCESS_LAYOUT)?;
    let mut layouts: Array<_, AccessLayout> = Array::try_from(map)?;
    layouts.set(0, layout, 0).context("writing ACCESS_LAYOUT")?;
    super::attach::write_config(
        ebpf,
        tracer_common::CONFIG_TIME_LOOKUPS,
        u32::from(plan.timed),
    )?;
    load_flush(ebpf)?;
    if plan.device_time {
        for (program, tracepoint) in [
            (PROG_BLOCK_ISSUE, BLOCK_ISSUE),
            (PROG_BLOCK_COMPLETE, BLOCK_COMPLETE),
        ] {
            let result = attach_tracepoint(ebpf, program, BLOCK_CATEGORY, tracepoint);
            outcomes.push(AttachOutcome::of(
                "node_access_device",
                format!("tracepoint {BLOCK_CATEGORY}:{tracepoint}"),
                result,
            ));
        }
    }
    if let Some(function) = plan.lock_wait.as_deref().filter(|_| plan.timed) {
        let result = attach_kprobe(ebpf, PROG_LOCK_WAIT, function);
        outcomes.push(AttachOutcome::of(
            "node_access_waits",
            format!("kprobe {function}"),
            result,
        ));
    }
    let mut trampolines = Vec::new();
    let mut programs: Option<Result<TracingPrograms>> = None;
    for function in &plan.lookup_functions {
        let refused = match plan.fentry_targets.iter().find(|t| t.function == *function) {
            None => None,
            Some(target) => {
                let programs = programs
                    .get_or_insert_with(|| TracingPrograms::new(bpf::object(), ebpf, taken));
                // Timed: the return first, so that no entry is kept without its return.
                let linked = match programs {
                    Ok(programs) => {
                        let exit = if plan.timed {
                            programs
                                .attach(PROG_ACCESS_FEXIT, target, Hook::Exit)
                                .map(Some)
                        } else {
                            Ok(None)
                        };
                        exit.and_then(|exit| {
                            let entry = programs.attach(PROG_ACCESS_FENTRY, target, Hook::Entry)?;
                            Ok((entry, exit))
                        })
                    }
                    Err(err) => Err(anyhow::anyhow!("{err:#}")),
                };
                match linked {
                    Ok((link, exit)) => {
                        trampolines.push(link);
                        if let Some(exit) = exit {
                            trampolines.push(exit);
                            outcomes.push(AttachOutcome::of(
                                "node_access_return",
                                format!("fexit {function}"),
                                Ok(()),
                            ));
                        }
                        outcomes.push(AttachOutcome::of(
                            "node_access",
                            format!("fentry {function}"),
                            Ok(()),
                        ));
                        continue;
                    }
                    Err(err) => Some(format!("{err:#}")),
                }
            }
        };
        let result = attach_lookup(ebpf, function, plan.timed);
        let target = match refused {
            Some(why) => format!("kprobe {function} (fentry refused: {why})"),
            None => format!("kprobe {function}"),
        };
        outcomes.push(AttachOutcome::of("node_access", target, result));
    }
    if let Some(tracepoint) = &plan.evict_tracepoint {
        let result = attach_evict(ebpf);
        outcomes.push(AttachOutcome::of(
            "node_evict",
            format!("tracepoint {tracepoint}"),
            result,
        ));
    }
    if let Some(tracepoint) = &plan.inode_evict_tracepoint {
        let result = attach_tracepoint(
            ebpf,
            PROG_INODE_EVICT,
            INODE_EVICT_CATEGORY,
            INODE_EVICT_TRACEPOINT,
        );
        outcomes.push(AttachOutcome::of(
            "inode_evict",
            format!("tracepoint {tracepoint}"),
            result,
        ));
    }
    if let Some(tracepoint) = &plan.shrinker_tracepoint {
        let result = attach_tracepoint(
            ebpf,
            PROG_SHRINKER_SCAN,
            SHRINKER_CATEGORY,
            SHRINKER_TRACEPOINT,
        );
        outcomes.push(AttachOutcome::of(
            "shrinker",
            format!("tracepoint {tracepoint}"),
            result,
        ));
    }
    Ok(Attached {
        outcomes,
        trampolines,
    })
}

fn attach_lookup(ebpf: &mut Ebpf, function: &str, timed: bool) -> Result<()> {
    bpf::arch::ensure_registers_match(&format!("kprobe {function}"))?;
    if timed {
        // The return first, so that no entry is kept without its return.
        attach_kprobe(ebpf, PROG_ACCESS_RETURN, function)?;
    }
    // One program, as many attachments as the kernel has lookup functions.
    attach_kprobe(ebpf, PROG_ACCESS, function)
}

/// Load `name` (a kprobe or kretprobe program) unless it is loaded, and attach it to `function`.
fn attach_kprobe(ebpf: &mut Ebpf, name: &str, function: &str) -> Result<()> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the object"))?;
    let kp: &mut KProbe = program.try_into()?;
    bpf::load_once(kp.fd().is_ok(), || kp.load())?;
    kp.attach(function, 0)
        .with_context(|| format!("attaching {name} to {function}"))?;
    Ok(())
}

/// Load `name` (a tracepoint program) unless it is loaded, and attach it to `category:event`.
fn attach_tracepoint(ebpf: &mut Ebpf, name: &str, category: &str, event: &str) -> Result<()> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the object"))?;
    let tp: &mut TracePoint = program.try_into()?;
    bpf::load_once(tp.fd().is_ok(), || tp.load())?;
    tp.attach(category, event)
        .with_context(|| format!("attaching tracepoint {category}:{event}"))?;
    Ok(())
}

fn attach_evict(ebpf: &mut Ebpf) -> Result<()> {
    let program = ebpf
        .program_mut(PROG_EVICT)
        .with_context(|| format!("program {PROG_EVICT} missing from the object"))?;
    let tp: &mut TracePoint = program.try_into()?;
    bpf::load_once(tp.fd().is_ok(), || tp.load())?;
    tp.attach(EVICT_CATEGORY, EVICT_TRACEPOINT)
        .with_context(|| format!("attaching tracepoint {EVICT_CATEGORY}:{EVICT_TRACEPOINT}"))?;
    Ok(())
}

/// Count F2FS teardowns (`SB_GENERATION`): a lookup may then take its device from its CPU's
/// cache, which a teardown invalidates (a new mount can reuse the freed `f2fs_sb_info`). Not
/// fatal: without it every lookup reads the device through `sbi->sb`.
fn attach_teardowns(ebpf: &mut Ebpf) -> Result<()> {
    attach_kprobe(ebpf, PROG_TEARDOWN, TEARDOWN_FUNCTION)
}

/// Hook `sched_switch` with the program that parks a leaving thread's timed lookup. Not fatal:
/// without it the timed lookups keep their starts in the per-thread map only.
fn attach_switch(ebpf: &mut Ebpf, name: &str) -> Result<()> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the object"))?;
    let switch: &mut RawTracePoint = program.try_into()?;
    bpf::load_once(switch.fd().is_ok(), || switch.load())?;
    switch
        .attach(SWITCH_TRACEPOINT)
        .with_context(|| format!("attaching raw tracepoint {SWITCH_TRACEPOINT}"))?;
    Ok(())
}

fn load_flush(ebpf: &mut Ebpf) -> Result<()> {
    let program = ebpf
        .program_mut(PROG_FLUSH)
        .with_context(|| format!("program {PROG_FLUSH} missing from the object"))?;
    let flush: &mut RawTracePoint = program.try_into()?;
    bpf::load_once(flush.fd().is_ok(), || flush.load())
}

/// Have every online CPU whose batch of lookups is not empty send it to the ring buffer now
/// (the flush program, run on that CPU by BPF_PROG_TEST_RUN). Returns how many CPUs were asked.
/// CPUs with nothing waiting are not disturbed: an idle phone's cores stay asleep. A CPU taken
/// offline (phones do, for power) keeps its batch until it is back and its lookups send it.
pub(crate) fn flush_batches(ebpf: &Ebpf) -> Result<usize> {
    let map = ebpf.named_map(maps::ACCESS_BATCH)?;
    let batches: PerCpuArray<_, AccessBatch> =
        PerCpuArray::try_from(map).context("ACCESS_BATCH type")?;
    let waiting = batches.get(&0, 0).context("reading ACCESS_BATCH")?;
    let program = ebpf
        .program(PROG_FLUSH)
        .with_context(|| format!("program {PROG_FLUSH} missing from the object"))?;
    let flush: &RawTracePoint = program.try_into()?;
    let online =
        aya::util::online_cpus().map_err(|(path, err)| anyhow::anyhow!("reading {path}: {err}"))?;
    let mut asked = 0;
    for (cpu, batch) in waiting.iter().enumerate() {
        let cpu = u32::try_from(cpu).context("CPU number")?;
        if batch.len == 0 || !online.contains(&cpu) {
            continue;
        }
        let options = RawTracePointRunOptions {
            cpu: Some(cpu),
            ..RawTracePointRunOptions::new()
        };
        flush
            .test_run(options)
            .with_context(|| format!("running {PROG_FLUSH} on CPU {cpu}"))?;
        asked += 1;
    }
    Ok(asked)
}

/// Watch `ino` on device `dev` (kernel encoding) for evictions before any lookup has named
/// that device's node inode (tests; a device mounted before the trace started).
#[cfg(test)]
pub(crate) fn watch_inode(ebpf: &mut Ebpf, dev: u32, ino: u32) -> Result<()> {
    let map = ebpf.named_map_mut(maps::NODE_INO)?;
    let mut node_ino: aya::maps::HashMap<_, u32, u32> = aya::maps::HashMap::try_from(map)?;
    node_ino.insert(dev, ino, 0).context("writing NODE_INO")
}

/// What the access programs counted since attaching, summed over the CPUs (exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AccessCounts {
    pub lookups: u64,
    pub evictions: u64,
    /// Lookups that read their device through `sbi->sb`, not from their CPU's cache.
    pub device_reads: u64,
    /// Entries of the page lock's slow path (timed lookups), and those noted in a lookup.
    pub lock_waits: u64,
    pub waits_noted: u64,
    /// Inodes of traced devices that left the inode cache.
    pub inode_evictions: u64,
    /// Reclaim's calls of F2FS's shrinker.
    pub shrinker_scans: u64,
}

pub(crate) fn counts(ebpf: &Ebpf) -> Result<AccessCounts> {
    let map = ebpf.named_map(maps::ACCESS_COUNTS)?;
    let counts: PerCpuArray<_, u64> = PerCpuArray::try_from(map).context("ACCESS_COUNTS type")?;
    let sum = |index| -> Result<u64> {
        Ok(counts
            .get(&index, 0)
            .context("reading ACCESS_COUNTS")?
            .iter()
            .sum())
    };
    Ok(AccessCounts {
        lookups: sum(ACCESS_COUNT_LOOKUPS)?,
        evictions: sum(ACCESS_COUNT_EVICTIONS)?,
        device_reads: sum(ACCESS_COUNT_DEVICE_READS)?,
        lock_waits: sum(ACCESS_COUNT_LOCK_WAITS)?,
        waits_noted: sum(ACCESS_COUNT_WAITS_NOTED)?,
        inode_evictions: sum(ACCESS_COUNT_INODE_EVICTIONS)?,
        shrinker_scans: sum(ACCESS_COUNT_SHRINKER_SCANS)?,
    })
}

#[cfg(test)]
mod tests;
