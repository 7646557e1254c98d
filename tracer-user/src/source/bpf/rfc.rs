//! Attaching the RFC probe programs (tracer-ebpf/src/rfc.rs) as a manifest says: kprobes on a
//! patched kernel, uprobes on the simulator's hooks. Every probe is tried; failures are
//! reported per probe with the manifest line, and the others still attach. Also what those
//! programs counted in the kernel (`kernel_counts`), to compare with what reached userspace.
use crate::source::bpf::ObjectMaps as _;
use std::{collections::HashSet, path::Path};
use tracer_common::maps;

use anyhow::{Context as _, Result};
use aya::{
    maps::{Array, PerCpuArray},
    programs::{uprobe::UProbeScope, KProbe, TracePoint, UProbe},
    Ebpf,
};
use tracer_common::{EventKind, ProbeSpec, RFC_KIND_SLOTS};

use super::{
    load_once,
    manifest::{At, Manifest, Probe, Target, Tracepoint},
    trampoline::{FunctionHook, KernelTrampolines, TrampolineLink},
};

/// What attached and what did not.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct AttachReport {
    /// "kind -> symbol (entry|return, kprobe|uprobe)".
    pub attached: Vec<String>,
    /// The kinds that attached, each with its "symbol (how)".
    #[serde(skip)]
    pub kinds: Vec<(EventKind, String)>,
    /// One line per probe that did not attach (and per invalid manifest entry), with the line.
    pub failed: Vec<String>,
    /// Why the kernel's functions got kprobes rather than BPF trampolines, when they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_trampolines: Option<String>,
}

/// Program names in the object: k_<kind>, kr_<kind>, u_<kind>, ur_<kind> (and f_<kind>,
/// fx_<kind>, the trampoline ones, named in `attach_kernel`).
fn program_name(kind: EventKind, target: &Target, ret: bool) -> String {
    let prefix = match (target, ret) {
        (Target::Kernel, false) => "k",
        (Target::Kernel, true) => "kr",
        (Target::Binary(_), false) => "u",
        (Target::Binary(_), true) => "ur",
    };
    format!("{prefix}_{}", kind.name())
}

/// Attach every valid probe of `manifest` with kprobes (uprobes on a binary). `scope` limits
/// uprobes (e.g. to this process).
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    manifest: &Manifest,
    scope: UProbeScope,
) -> Result<AttachReport> {
    attach_with(ebpf, manifest, scope, FunctionHook::Kprobe).map(|(report, _)| report)
}

/// [`attach`], with the kernel's functions hooked as `hook` says: with `Auto`, by BPF
/// trampolines (fentry, and fexit for return probes) where the kernel allows, else by kprobes.
/// The trampolines stay attached while their links are held.
pub(crate) fn attach_with(
    ebpf: &mut Ebpf,
    manifest: &Manifest,
    scope: UProbeScope,
    hook: FunctionHook,
) -> Result<(AttachReport, Vec<TrampolineLink>)> {
    let mut report = AttachReport {
        failed: manifest.errors.clone(),
        ..AttachReport::default()
    };
    let kallsyms = match manifest.target {
        Target::Kernel => Some(kernel_symbols()?),
        Target::Binary(_) => None,
    };
    let hooks_functions = manifest.probes.iter().any(|p| p.tracepoint.is_none());
    let mut trampolines = match (&manifest.target, hooks_functions) {
        (Target::Kernel, true) => KernelTrampolines::for_this_kernel(hook, ebpf, &[])
            .map_err(|why| report.no_trampolines = Some(format!("{why:#}")))
            .ok(),
        _ => None,
    };
    for probe in &manifest.probes {
        let outcome = match &probe.tracepoint {
            Some(point) => attach_tracepoint(ebpf, probe, point),
            None => check_symbol(probe, kallsyms.as_ref())
                .and_then(|()| write_spec(ebpf, probe, probe.spec))
                .and_then(|()| match trampolines.as_mut() {
                    Some(trampolines) => attach_kernel(ebpf, trampolines, probe, scope),
                    None => attach_probe(ebpf, &manifest.target, probe, scope),
                }),
        };
        match outcome {
            Ok(how) => {
                report
                    .attached
                    .push(format!("{} -> {} ({how})", probe.kind.name(), probe.symbol));
                report
                    .kinds
                    .push((probe.kind, format!("{} ({how})", probe.symbol)));
            }
            Err(err) => report.failed.push(format!(
                "{}:{}: {} -> {}: {err:#}",
                manifest.name,
                probe.line,
                probe.kind.name(),
                probe.symbol
            )),
        }
    }
    let links = trampolines.map(|t| t.links).unwrap_or_default();
    Ok((report, links))
}

/// A kernel function's probe by trampolines (f_<kind>, and fx_<kind> for a return probe), or
/// by kprobes when the kernel refuses them, saying why.
fn attach_kernel(
    ebpf: &mut Ebpf,
    trampolines: &mut KernelTrampolines,
    probe: &Probe,
    scope: UProbeScope,
) -> Result<String> {
    let kind = probe.kind.name();
    let (entry, exit) = (format!("f_{kind}"), format!("fx_{kind}"));
    let at_return = probe.at == At::Return;
    let exit = at_return.then_some(exit.as_str());
    match trampolines.attach_pair(&probe.symbol, &entry, exit) {
        Ok(()) => Ok(if at_return {
            "fentry + fexit"
        } else {
            "fentry"
        }
        .into()),
        Err(refused) => {
            let how = attach_probe(ebpf, &Target::Kernel, probe, scope)?;
            Ok(format!("{how}; fentry refused: {refused:#}"))
        }
    }
}

/// The symbols a manifest's probes attach to, and where they were looked up: /proc/kallsyms
/// for kprobes, the ELF file's symbol tables for uprobes (never kallsyms: a user binary's
/// functions are not the kernel's).
pub(crate) fn target_symbols(target: &Target) -> Result<(HashSet<String>, String)> {
    match target {
        Target::Kernel => Ok((kernel_symbols()?, "/proc/kallsyms".into())),
        Target::Binary(path) => Ok((elf_symbols(path)?, path.display().to_string())),
    }
}

/// The largest binary whose symbols are read.
const MAX_ELF_BYTES: u64 = 1 << 30;

/// The names in an ELF file's symbol and dynamic symbol tables.
pub(crate) fn elf_symbols(path: &std::path::Path) -> Result<HashSet<String>> {
    use object::{Object as _, ObjectSymbol as _};
    // A regular file only (a FIFO is refused, never waited on), and not past 1 GiB.
    let data = tracer_common::files::read_regular(
        path,
        tracer_common::files::Symlinks::Follow,
        MAX_ELF_BYTES,
    )
    .with_context(|| format!("reading {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{}: not an ELF file", path.display()))?;
    Ok(file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter_map(|symbol| symbol.name().ok().map(str::to_string))
        .collect())
}

/// The names in /proc/kallsyms (module symbols included).
pub(crate) fn kernel_symbols() -> Result<HashSet<String>> {
    let text =
        super::discover::kallsyms::read(Path::new(super::discover::kallsyms::PROC_KALLSYMS))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .map(str::to_string)
        .collect())
}

fn check_symbol(probe: &Probe, kallsyms: Option<&HashSet<String>>) -> Result<()> {
    match kallsyms {
        Some(symbols) if !symbols.contains(&probe.symbol) => {
            anyhow::bail!("symbol not in /proc/kallsyms (not this kernel, or inlined)")
        }
        _ => Ok(()),
    }
}

fn write_spec(ebpf: &mut Ebpf, probe: &Probe, spec: ProbeSpec) -> Result<()> {
    let map = ebpf.named_map_mut(maps::RFC_SPECS)?;
    let mut specs: Array<_, ProbeSpec> = Array::try_from(map)?;
    specs
        .set(probe.kind as u32, spec, 0)
        .context("writing RFC_SPECS")
}

/// A tracepoint of the patch: its fields' offsets from its format file, then the program.
fn attach_tracepoint(ebpf: &mut Ebpf, probe: &Probe, point: &Tracepoint) -> Result<String> {
    let tracefs = crate::system::tracefs().context("tracefs is not mounted")?;
    let path = tracefs
        .join("events")
        .join(&point.category)
        .join(&point.name)
        .join("format");
    let format = super::discover::tracepoints::read_format(&path)
        .with_context(|| format!("no tracepoint {}/{}", point.category, point.name))?;
    let mut spec = probe.spec;
    point.resolve(&format, &mut spec)?;
    write_spec(ebpf, probe, spec)?;
    let name = format!("t_{}", probe.kind.name());
    let program: &mut TracePoint = ebpf
        .program_mut(&name)
        .with_context(|| format!("program {name} missing from the object"))?
        .try_into()?;
    load_once(program.fd().is_ok(), || program.load())?;
    program
        .attach(&point.category, &point.name)
        .with_context(|| format!("attaching {name} to {}/{}", point.category, point.name))?;
    Ok("tracepoint".into())
}

fn attach_probe(
    ebpf: &mut Ebpf,
    target: &Target,
    probe: &Probe,
    scope: UProbeScope,
) -> Result<String> {
    let mut how = Vec::new();
    // The entry program runs for both: it emits (entry probes) or saves arguments and time for
    // the return program (return probes).
    how.push(attach_one(ebpf, target, probe, false, scope)?);
    if probe.at == At::Return {
        how.push(attach_one(ebpf, target, probe, true, scope)?);
    }
    Ok(how.join(" + "))
}

fn attach_one(
    ebpf: &mut Ebpf,
    target: &Target,
    probe: &Probe,
    ret: bool,
    scope: UProbeScope,
) -> Result<String> {
    let name = program_name(probe.kind, target, ret);
    // Every RFC program reads its arguments from registers, kprobe or uprobe alike.
    super::arch::ensure_registers_match(&format!("{name} on {}", probe.symbol))?;
    let program = ebpf
        .program_mut(&name)
        .with_context(|| format!("program {name} missing from the object"))?;
    match target {
        Target::Kernel => {
            let program: &mut KProbe = program.try_into()?;
            load_once(program.fd().is_ok(), || program.load())?;
            program
                .attach(&probe.symbol, 0)
                .with_context(|| format!("attaching {name} as a kprobe"))?;
            Ok(if ret { "kretprobe" } else { "kprobe" }.into())
        }
        Target::Binary(path) => {
            let program: &mut UProbe = program.try_into()?;
            load_once(program.fd().is_ok(), || program.load())?;
            program
                .attach(probe.symbol.as_str(), path, scope)
                .with_context(|| format!("attaching {name} as a uprobe on {}", path.display()))?;
            Ok(if ret { "uretprobe" } else { "uprobe" }.into())
        }
    }
}

/// Events the probes emitted per kind (before the ring buffer), summed over CPUs.
pub(crate) fn kernel_counts(ebpf: &Ebpf) -> Result<Vec<(EventKind, u64)>> {
    let map = ebpf.named_map(maps::RFC_COUNTS)?;
    let counts: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
    let mut out = Vec::new();
    for slot in 0..RFC_KIND_SLOTS {
        let Some(kind) = EventKind::from_u8(slot as u8) else {
            continue;
        };
        let per_cpu = counts.get(&slot, 0).context("reading RFC_COUNTS")?;
        out.push((kind, per_cpu.iter().sum()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    /// A manifest with one good probe, one naming a symbol this binary lacks and one with a bad
    /// argument index: the good one attaches, the others are reported with their lines.
    #[test]
    fn a_bad_probe_is_reported_by_line_and_the_rest_attach() {
        if !crate::system::is_root() {
            test_skip::skip("attaching uprobes needs root");
            return;
        }
        sim::hooks::all(); // keep the hooks in this test binary
        let text = r#"target = "self"

[[probe]]
kind = "convert"
symbol = "nodescope_sim_convert"
len = "arg2"

[[probe]]
kind = "restore"
symbol = "nodescope_no_such_function"

[[probe]]
kind = "reclaim"
symbol = "nodescope_sim_reclaim"
queue = "arg7"
"#;
        let manifest = Manifest::parse("test.toml", text).unwrap();
        let mut ebpf = crate::source::bpf::load(64 * 1024).unwrap();
        let pid = NonZeroU32::new(std::process::id()).unwrap();
        let report = attach(&mut ebpf, &manifest, UProbeScope::OneProcess(pid)).unwrap();
        assert_eq!(
            report.attached,
            ["convert -> nodescope_sim_convert (uprobe)"]
        );
        assert_eq!(report.failed.len(), 2, "{:?}", report.failed);
        assert!(
            report.failed[0].starts_with("test.toml:15: bad argument index"),
            "{:?}",
            report.failed
        );
        assert!(
            report.failed[1].starts_with("test.toml:9: restore -> nodescope_no_such_function"),
            "{:?}",
            report.failed
        );
        assert!(report.failed[1].contains("nodescope_no_such_function"));
    }

    /// A tracepoint probe reads its values from the record at the format file's offsets: this
    /// kernel's sched/sched_process_fork stands in for a patch's tracepoint (nid = the child's
    /// pid, len = the parent's). A field the record lacks is reported with the fields it has.
    #[test]
    fn a_tracepoint_probe_reads_its_fields_from_the_record() {
        if !crate::system::is_root() {
            test_skip::skip("attaching tracepoints needs root");
            return;
        }
        crate::system::ensure_tracefs().unwrap();
        let text = r#"target = "kernel"

[[probe]]
kind = "convert"
tracepoint = "sched/sched_process_fork"
nid = "field(child_pid)"
len = "field(parent_pid)"

[[probe]]
kind = "reclaim"
tracepoint = "sched/sched_process_fork"
nid = "field(no_such_field)"
"#;
        let manifest = Manifest::parse("tp.toml", text).unwrap();
        assert!(manifest.errors.is_empty(), "{:?}", manifest.errors);
        let mut ebpf = crate::source::bpf::load(256 * 1024).unwrap();
        let report = attach(&mut ebpf, &manifest, UProbeScope::AllProcesses).unwrap();
        assert_eq!(
            report.attached,
            ["convert -> sched/sched_process_fork (tracepoint)"]
        );
        assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
        assert!(
            report.failed[0].contains("has no field \"no_such_field\" (it has")
                && report.failed[0].contains("child_pid"),
            "{:?}",
            report.failed
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let _in_runtime = runtime.enter();
        let mut reader = crate::source::bpf::EventReader::new(&mut ebpf).unwrap();
        let child = std::process::Command::new("true").spawn().unwrap();
        let child_pid = child.id();
        let mut child = child;
        child.wait().unwrap();
        let mut seen = Vec::new();
        reader.take_waiting(|event| seen.push(event));
        let ours: Vec<_> = seen
            .iter()
            .filter(|e| e.kind == EventKind::Convert as u8 && e.nid == child_pid)
            .collect();
        assert_eq!(ours.len(), 1, "one fork of pid {child_pid}: {seen:?}");
        // The record's parent_pid is the forking thread, which is the task current at the event.
        assert_eq!(
            ours[0].tgid,
            std::process::id(),
            "forked by this test process"
        );
        assert_eq!(ours[0].len, ours[0].pid, "parent_pid read from the record");
    }
}
