//! What this kernel and this process can do: the collector behind `nodescope probe`
//! (privileges, BPF's self-test, tracefs, the F2FS probe plan, the RFC's symbols and whether
//! their probes attach, the access traces' plan). The report is data; `view::probe_table`
//! renders it and `probe --json` prints it.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use aya::programs::uprobe::UProbeScope;
use serde::Serialize;
use tracer_common::EventKind;

use crate::{
    source::bpf::{
        self, cache_counters,
        coverage::{self, Coverage},
        discover::startup,
        f2fs::planner,
        footprints::{self, FootprintPlan},
        manifest::{Manifest, Target, PROBE_KINDS},
        rfc,
        selftest::{self, SelfTest},
        trampoline::FunctionHook,
    },
    system::{self, android, F2fsDevice, Privileges},
};

mod accesses;

pub(crate) use accesses::AccessProbe;

/// Ring buffer of the object the probe loads to try the manifest's probes (no event is read).
const PROBE_RING_BYTES: u32 = 64 * 1024;

/// The manifest's symbols and whether this kernel has them.
#[derive(Debug, Serialize)]
pub(crate) struct RfcProbes {
    pub manifest: String,
    /// Where the symbols were looked up: /proc/kallsyms, or the uprobe target's ELF file
    /// (`in_kallsyms` then means "in that file").
    pub looked_up_in: String,
    pub symbols: Vec<RfcSymbol>,
    /// Invalid manifest entries, each naming its line.
    pub errors: Vec<String>,
    /// Event kinds the manifest does not map.
    pub unmapped_kinds: Vec<String>,
    /// Why the kernel's functions got kprobes rather than BPF trampolines, when attaching
    /// was tried and they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_trampolines: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RfcSymbol {
    pub kind: String,
    pub symbol: String,
    pub in_kallsyms: bool,
    /// "attached" (a probe was attached and detached again), "found" (the symbol exists but
    /// the probe did not attach, or attaching was not tried), or "missing".
    pub status: &'static str,
    /// Why the probe did not attach.
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ProbeReport {
    pub kernel: String,
    pub privileges: Privileges,
    /// From /sys/fs/selinux/enforce; absent without SELinux.
    pub selinux: Option<android::Selinux>,
    /// A program was loaded, attached, and its event came back through a ring buffer.
    pub bpf: bool,
    pub bpf_selftest: Option<SelfTest>,
    pub btf: bool,
    pub tracefs: Option<String>,
    pub tracefs_mounted_by_us: bool,
    pub kprobes: bool,
    pub uprobes: bool,
    pub f2fs: bool,
    pub f2fs_tracepoints: Vec<String>,
    pub f2fs_devices: Vec<F2fsDevice>,
    pub rfc_probes: RfcProbes,
    /// Where `rfc_probes` came from: `--probes`, start-up discovery (cached or not), or the
    /// built-in guesses.
    pub rfc_probes_from: String,
    /// Which F2FS probes `stream` and `top` would attach here, and why not the others.
    pub f2fs_plan: planner::Plan,
    /// What `--accesses` would attach here (node lookups and evictions), and whether it does.
    pub accesses: AccessProbe,
    /// On a kernel with the RFC's knobs: what each of its event kinds would be seen by (a
    /// probe of the manifest that attached, a footprint, the mechanism's counters), or why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rfc_kinds: Option<Coverage>,
    /// What is missing, in words, with what it prevents.
    pub missing: Vec<String>,
}

/// The whole report, with `manifest`'s probes tried; `rfc_probes_from` says where the
/// manifest came from.
pub(crate) fn collect(manifest: &Manifest, rfc_probes_from: String) -> Result<ProbeReport> {
    // Parsed once for the plan, the RFC's probes and the access traces.
    let _btf = bpf::discover::btf::hold_this_kernel();
    let privileges = Privileges::current()?;
    let mut missing = Vec::new();
    let (tracefs, mounted) = locate_tracefs(&privileges, &mut missing);
    let (bpf, bpf_selftest) = bpf_selftest(&privileges, &mut missing)?;
    let rfc_probes = rfc_probes(manifest, bpf)?;
    // One plan for both the plan's table and the RFC kinds' node_read row.
    let f2fs_plan = proven_plan(bpf);
    let rfc_kinds = startup::rfc_kernel().then(|| rfc_kinds(&rfc_probes, &f2fs_plan));
    let report = ProbeReport {
        kernel: system::kernel_release(),
        privileges,
        selinux: android::selinux(Path::new("/")),
        bpf,
        bpf_selftest,
        btf: system::has_btf(),
        tracefs: tracefs.as_ref().map(|p| p.display().to_string()),
        tracefs_mounted_by_us: mounted,
        kprobes: system::has_kprobes(),
        uprobes: system::has_uprobes(),
        f2fs: system::has_f2fs(),
        f2fs_tracepoints: system::f2fs_tracepoints(tracefs.as_deref()),
        f2fs_devices: system::f2fs_devices(Path::new("/sys/fs/f2fs")),
        rfc_probes,
        rfc_kinds,
        rfc_probes_from,
        f2fs_plan,
        accesses: accesses::access_probe(bpf),
        missing,
    };
    Ok(with_feature_gaps(report))
}

/// The F2FS plan as the kernel takes it: where BPF works, each chosen program is loaded and
/// attached (then detached when the object is dropped here), and a variant the kernel refuses
/// is rejected with its reason and the next one tried, as a source does at start-up.
fn proven_plan(bpf_works: bool) -> planner::Plan {
    let mut plan = planner::plan_this_kernel(None);
    if !bpf_works {
        return plan;
    }
    match bpf::load(PROBE_RING_BYTES) {
        Ok(mut ebpf) => {
            if let Err(err) = bpf::f2fs::attach::attach(&mut ebpf, &mut plan, false) {
                log::warn!("probe: attaching the F2FS plan: {err:#}");
            }
        }
        Err(err) => log::warn!("probe: loading the eBPF object: {err:#}"),
    }
    plan
}

/// What each RFC kind would be seen by: node reads by what `plan` chose for them, the
/// manifest's probes that attached, the footprints where this kernel has what they hook, the
/// counters files found.
fn rfc_kinds(probes: &RfcProbes, plan: &planner::Plan) -> Coverage {
    let (mut per_event, mut missing) = per_event_kinds(probes, plan);
    let footprints = FootprintPlan::this_kernel();
    if footprints.usable() {
        for kind in footprints::KINDS {
            if !per_event.iter().any(|(k, _)| *k == kind) {
                per_event.push((kind, footprints.describe()));
            }
        }
    } else {
        missing.push(footprints.describe());
    }
    let (files, notes) = cache_counters::find_for_rfc_devices();
    missing.extend(notes);
    Coverage::new(&per_event, &files, &missing)
}

/// The kinds seen one by one without footprints: node reads as `plan` has them (or why not,
/// in the second list), then the manifest's probes that attached. The manifest's node_read
/// entry is not what attaches for node reads (the plan's variant is), so it is left out.
fn per_event_kinds(
    probes: &RfcProbes,
    plan: &planner::Plan,
) -> (Vec<(EventKind, String)>, Vec<String>) {
    let mut per_event = Vec::new();
    let mut missing = Vec::new();
    match coverage::node_reads_seen(plan) {
        Ok(seen) => per_event.push(seen),
        Err(why) => missing.push(why),
    }
    for symbol in probes.symbols.iter().filter(|s| s.status == "attached") {
        if let Some(kind) = PROBE_KINDS.iter().find(|k| k.name() == symbol.kind) {
            if *kind != EventKind::NodeRead {
                per_event.push((*kind, symbol.symbol.clone()));
            }
        }
    }
    (per_event, missing)
}

/// Each probe of the manifest: its symbol in kallsyms (kprobes) or in the target binary
/// (uprobes), and (when BPF works) whether its probe attaches; the probes are detached again
/// when the object is dropped here.
fn rfc_probes(manifest: &Manifest, bpf_works: bool) -> Result<RfcProbes> {
    let (kallsyms, looked_up_in) = rfc::target_symbols(&manifest.target)?;
    let attached = if bpf_works {
        Some(try_attach(manifest))
    } else {
        None
    };
    let symbols = manifest
        .probes
        .iter()
        .map(|probe| {
            let kind = probe.kind.name();
            // A tracepoint is looked up in tracefs, by its format file.
            let in_kallsyms = match &probe.tracepoint {
                Some(point) => system::tracefs().is_some_and(|t| {
                    t.join("events")
                        .join(&point.category)
                        .join(&point.name)
                        .join("format")
                        .is_file()
                }),
                None => kallsyms.contains(&probe.symbol),
            };
            let (status, error) = match &attached {
                Some(Ok(report)) => attach_status(report, kind, &probe.symbol),
                Some(Err(err)) => ("found", Some(format!("{err:#}"))),
                None => ("found", None),
            };
            // A kernel symbol not in kallsyms is missing whatever attaching said.
            let status = match (&manifest.target, status) {
                (Target::Kernel, _) if !in_kallsyms => "missing",
                (Target::Binary(_), "found") if error.is_some() => "missing",
                (_, status) => status,
            };
            RfcSymbol {
                kind: kind.to_string(),
                symbol: probe.symbol.clone(),
                in_kallsyms,
                status,
                error,
            }
        })
        .collect();
    let unmapped_kinds = PROBE_KINDS
        .iter()
        .filter(|kind| !manifest.probes.iter().any(|p| p.kind == **kind))
        .map(|kind| kind.name().to_string())
        .collect();
    let no_trampolines = match &attached {
        Some(Ok(report)) => report.no_trampolines.clone(),
        _ => None,
    };
    Ok(RfcProbes {
        no_trampolines,
        looked_up_in,
        manifest: manifest.name.clone(),
        symbols,
        errors: manifest.errors.clone(),
        unmapped_kinds,
    })
}

/// Each probe attached as a source would attach it (trampolines where the kernel allows),
/// then detached.
fn try_attach(manifest: &Manifest) -> Result<rfc::AttachReport> {
    let mut ebpf = bpf::load(PROBE_RING_BYTES)?;
    rfc::attach_with(
        &mut ebpf,
        manifest,
        UProbeScope::AllProcesses,
        FunctionHook::Auto,
    )
    .map(|(report, _links)| report)
}

/// ("attached" | "found", error) for one probe, from what `rfc::attach` reported.
fn attach_status(
    report: &rfc::AttachReport,
    kind: &str,
    symbol: &str,
) -> (&'static str, Option<String>) {
    let ok = format!("{kind} -> {symbol} (");
    if report.attached.iter().any(|line| line.starts_with(&ok)) {
        return ("attached", None);
    }
    let failed = format!(": {kind} -> {symbol}: ");
    let error = report
        .failed
        .iter()
        .find_map(|line| line.split_once(&failed).map(|(_, why)| why.to_string()));
    ("found", error)
}

fn locate_tracefs(privileges: &Privileges, missing: &mut Vec<String>) -> (Option<PathBuf>, bool) {
    if let Some(path) = system::tracefs() {
        return (Some(path), false);
    }
    if !privileges.root {
        missing.push("tracefs is not mounted and only root may mount it".into());
        return (None, false);
    }
    match system::ensure_tracefs() {
        Ok((path, mounted)) => (Some(path), mounted),
        Err(err) => {
            missing.push(format!("tracefs: {err:#}"));
            (None, false)
        }
    }
}

fn bpf_selftest(
    privileges: &Privileges,
    missing: &mut Vec<String>,
) -> Result<(bool, Option<SelfTest>)> {
    if !privileges.may_trace() {
        missing.push("BPF: loading tracing programs needs root, or CAP_BPF and CAP_PERFMON".into());
        return Ok((false, None));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    match runtime.block_on(selftest::run()) {
        Ok(result) => Ok((true, Some(result))),
        Err(err) => {
            missing.push(android::explain_bpf_failure(Path::new("/"), &err));
            Ok((false, None))
        }
    }
}

fn with_feature_gaps(mut report: ProbeReport) -> ProbeReport {
    let gaps = [
        (report.btf, "BTF (/sys/kernel/btf/vmlinux): optional; nodescope reads tracepoint formats instead"),
        (report.kprobes, "kprobes (CONFIG_KPROBES): no probes on the patch's kernel functions; uprobes on the simulator still work"),
        (report.uprobes, "uprobes (CONFIG_UPROBES): the simulator cannot be observed through eBPF"),
        (report.f2fs, "F2FS: this kernel has no F2FS; use the simulator (`nodescope sim`, `nodescope top --source sim`)"),
    ];
    for (present, what) in gaps {
        if !present {
            report.missing.push(what.to_string());
        }
    }
    if report.f2fs {
        let plan_gaps = report.f2fs_plan.missing();
        report
            .missing
            .extend(plan_gaps.into_iter().map(|m| format!("F2FS probes: {m}")));
    }
    if report.f2fs && report.f2fs_tracepoints.is_empty() {
        report
            .missing
            .push("F2FS tracepoints: none of the known variants exist".into());
    }
    if !report.rfc_probes.symbols.iter().any(|s| s.in_kallsyms) {
        report.missing.push(format!(
            "RFC functions: none of the {} symbols of {} is in {}",
            report.rfc_probes.symbols.len(),
            report.rfc_probes.manifest,
            report.rfc_probes.looked_up_in
        ));
    }
    if report
        .f2fs_devices
        .iter()
        .any(|d| !d.node_compress_threshold)
    {
        report
            .missing
            .push("node_compress_threshold on a mounted F2FS: the RFC patch is not applied".into());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::bpf::coverage::KindState;
    use planner::{KernelView, NodeReadVariant};

    fn no_manifest_probes() -> RfcProbes {
        RfcProbes {
            manifest: "none".into(),
            looked_up_in: "/proc/kallsyms".into(),
            symbols: Vec::new(),
            errors: Vec::new(),
            unmapped_kinds: Vec::new(),
            no_trampolines: None,
        }
    }

    fn node_read_state(plan: &planner::Plan) -> KindState {
        let (per_event, missing) = per_event_kinds(&no_manifest_probes(), plan);
        let coverage = Coverage::new(&per_event, &[], &missing);
        coverage
            .kinds
            .iter()
            .find(|(kind, _)| *kind == EventKind::NodeRead)
            .map(|(_, state)| state.clone())
            .expect("node_read is an RFC kind")
    }

    /// The RFC kinds' node_read row and the F2FS plan are one answer: a kernel with no
    /// node-read variant (no tracepoints, no kprobes) must not be shown as seeing them per
    /// event, and the row says why, in the plan's words.
    #[test]
    fn node_reads_state_follows_the_plan() {
        let none = planner::plan(&KernelView::default(), None);
        assert!(none.node_reads.chosen.is_none());
        assert!(none.render().contains("node_reads   not available"));
        match node_read_state(&none) {
            KindState::Unavailable { why } => {
                assert!(why.contains("kprobes not available"), "{why}");
            }
            other => panic!("node reads are not available, yet: {other:?}"),
        }

        let kprobes = KernelView {
            kprobes: true,
            symbols: planner::find_symbols("0 t read_node_page\t[f2fs]\n"),
            ..KernelView::default()
        };
        let kprobe = planner::plan(&kprobes, Some(NodeReadVariant::Kprobe));
        assert!(kprobe.node_reads.chosen.is_some());
        match node_read_state(&kprobe) {
            KindState::PerEvent { via, .. } => {
                assert!(via.contains("kprobe read_node_page"), "{via}");
            }
            other => panic!("the plan attaches a kprobe, yet: {other:?}"),
        }
    }
}
