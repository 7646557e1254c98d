//! `nodescope probe`: what this kernel and this process can do, as a table or JSON.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use aya::programs::uprobe::UProbeScope;
use clap::Args;
use serde::Serialize;
use tracer_common::text::escape_controls;

use crate::{
    output::OutputFile,
    source::{
        bpf::{
            self,
            discover::{self, btf::BtfFiles},
            f2fs::planner,
            manifest::{Manifest, Target, DEFAULT_KERNEL_MANIFEST, PROBE_KINDS},
            rfc,
            selftest::{self, SelfTest},
            trampoline::FunctionHook,
        },
        open,
    },
    system::{self, android, F2fsDevice, Privileges},
    view::stdout::{closed_is_success, print, print_line},
};

/// Ring buffer of the object `probe` loads to try the manifest's probes (no event is read).
const PROBE_RING_BYTES: u32 = 64 * 1024;

mod accesses;

#[derive(Args)]
pub(crate) struct ProbeArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Probe manifest for the RFC's functions (default: the one shipped in the binary).
    #[arg(long, value_name = "FILE")]
    probes: Option<PathBuf>,
    /// Find F2FS's functions for each event kind in BTF and kallsyms and write a manifest.
    #[arg(long)]
    discover: bool,
    /// With --discover: write the manifest here (default: print it).
    #[arg(short, long, value_name = "FILE", requires = "discover")]
    output: Option<PathBuf>,
    /// With --output: replace FILE when it exists (without it, an existing file is refused).
    #[arg(long, requires = "output")]
    force: bool,
    /// With --discover: F2FS's BTF (default /sys/kernel/btf/f2fs on /sys/kernel/btf/vmlinux,
    /// or vmlinux alone when F2FS is built in). Split BTF when --btf-base is given.
    #[arg(long, value_name = "FILE", requires = "discover")]
    btf: Option<PathBuf>,
    /// With --discover: the base BTF the --btf file is split from (vmlinux's).
    #[arg(long, value_name = "FILE", requires = "btf")]
    btf_base: Option<PathBuf>,
    /// With --discover: read BTF from nowhere (as on a kernel without it): kallsyms names only.
    #[arg(long, requires = "discover", conflicts_with = "btf")]
    no_btf: bool,
    /// With --discover: the kallsyms file (default /proc/kallsyms).
    #[arg(long, value_name = "FILE", requires = "discover")]
    kallsyms: Option<PathBuf>,
    /// With --discover: the tracefs directory whose events/f2fs/*node_cache*/format files
    /// describe the patch's tracepoints (default: this kernel's tracefs).
    #[arg(long, value_name = "DIR", requires = "discover")]
    tracefs: Option<PathBuf>,
}

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
    pub accesses: accesses::AccessProbe,
    /// What is missing, in words, with what it prevents.
    pub missing: Vec<String>,
}

pub(crate) fn run(args: ProbeArgs) -> Result<()> {
    if args.discover {
        return run_discover(&args);
    }
    let (manifest, source) = match &args.probes {
        Some(path) => (
            Manifest::load(path)?,
            format!("--probes {}", path.display()),
        ),
        None => startup_manifest()?,
    };
    let mut report = collect_with(&manifest)?;
    report.rfc_probes_from = source;
    let printed = if args.json {
        print_line(serde_json::to_string_pretty(&report)?)
    } else {
        // Manifest symbols and comms are anyone's text: escaped before they reach a terminal.
        print(&escape_controls(&render_table(&report)))
    };
    closed_is_success(printed)
}

/// `--discover`: the report, and the manifest printed or written to `--output`.
fn run_discover(args: &ProbeArgs) -> Result<()> {
    let btf = match (&args.btf, &args.btf_base) {
        _ if args.no_btf => None,
        (Some(module), Some(base)) => Some(BtfFiles {
            base: base.clone(),
            module: Some(module.clone()),
        }),
        (Some(own), None) => Some(BtfFiles {
            base: own.clone(),
            module: None,
        }),
        (None, _) => BtfFiles::this_kernel(),
    };
    if let Some(path) = &args.output {
        OutputFile::new(args.force).check(path)?;
    }
    let kallsyms = args
        .kallsyms
        .clone()
        .unwrap_or_else(|| PathBuf::from(discover::kallsyms::PROC_KALLSYMS));
    let text = discover::kallsyms::read(&kallsyms)?;
    let mut discovery = discover::discover(btf.as_ref(), &kallsyms.display().to_string(), &text)?;
    if let Some(tracefs) = args.tracefs.clone().or_else(system::tracefs) {
        let formats = discover::tracepoints::read_formats(&tracefs);
        discovery.prefer_tracepoints(&formats, &tracefs.display().to_string());
    }
    let manifest = discovery.manifest();
    // What we write must be what the loader accepts, every probe of it.
    let parsed = Manifest::parse("discovered manifest", &manifest)?;
    anyhow::ensure!(
        parsed.errors.is_empty() && parsed.probes.len() == discovery.found().count(),
        "the discovered manifest does not load: {:?}",
        parsed.errors
    );
    let printed = match &args.output {
        Some(path) => {
            OutputFile::new(args.force).write(path, manifest.as_bytes())?;
            print(&escape_controls(&format!(
                "{}# manifest written to {}\n",
                discovery.report(),
                path.display()
            )))
        }
        None => print(&escape_controls(&manifest)),
    };
    closed_is_success(printed)
}

/// What `top`, `stream`, `record` and `daemon` would use without `--probes`: the probes
/// discovered at start on a kernel with the RFC's knobs, else the built-in guesses.
fn startup_manifest() -> Result<(Manifest, String)> {
    Ok(match open::discovered_probes() {
        (Some(manifest), Some(line)) => (manifest, line),
        (_, Some(line)) => (
            default_manifest()?,
            format!("{line}; shown: the built-in guesses (rfc-kernel.toml)"),
        ),
        _ => (
            default_manifest()?,
            "the built-in guesses (rfc-kernel.toml): no F2FS device here has the RFC's knobs, \
             so the sources attach none"
                .into(),
        ),
    })
}

fn default_manifest() -> Result<Manifest> {
    Manifest::parse("rfc-kernel.toml (built in)", DEFAULT_KERNEL_MANIFEST)
}

fn collect_with(manifest: &Manifest) -> Result<ProbeReport> {
    let privileges = Privileges::current()?;
    let mut missing = Vec::new();
    let (tracefs, mounted) = locate_tracefs(&privileges, &mut missing);
    let (bpf, bpf_selftest) = bpf_selftest(&privileges, &mut missing)?;
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
        rfc_probes: rfc_probes(manifest, bpf)?,
        rfc_probes_from: String::new(),
        f2fs_plan: planner::plan_this_kernel(None),
        accesses: accesses::access_probe(bpf),
        missing,
    };
    Ok(with_feature_gaps(report))
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
    Ok(RfcProbes {
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

fn locate_tracefs(
    privileges: &Privileges,
    missing: &mut Vec<String>,
) -> (Option<std::path::PathBuf>, bool) {
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

fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "no"
    }
}

pub(crate) fn render_table(report: &ProbeReport) -> String {
    let mut out = String::new();
    let p = &report.privileges;
    let rows = [
        ("kernel", report.kernel.clone()),
        (
            "privileges",
            format!(
                "root={} CAP_BPF={} CAP_PERFMON={} CAP_SYS_ADMIN={}",
                yes_no(p.root),
                yes_no(p.cap_bpf),
                yes_no(p.cap_perfmon),
                yes_no(p.cap_sys_admin)
            ),
        ),
        (
            "selinux",
            report.selinux.map_or("none".into(), |m| m.to_string()),
        ),
        ("bpf", bpf_cell(report)),
        ("btf", yes_no(report.btf).into()),
        ("tracefs", tracefs_cell(report)),
        ("kprobes", yes_no(report.kprobes).into()),
        ("uprobes", yes_no(report.uprobes).into()),
        ("f2fs", yes_no(report.f2fs).into()),
        ("f2fs tracepoints", list_or_none(&report.f2fs_tracepoints)),
        ("f2fs devices", devices_cell(&report.f2fs_devices)),
        ("rfc probes", rfc_cell(&report.rfc_probes)),
        ("rfc probes from", report.rfc_probes_from.clone()),
    ];
    for (name, value) in rows {
        let _ = writeln!(out, "{name:<18} {value}");
    }
    let _ = write!(out, "\nF2FS probe plan:\n{}", report.f2fs_plan.render());
    let _ = write!(
        out,
        "\nAccess traces (--accesses):\n{}",
        accesses::render_accesses(&report.accesses)
    );
    if !report.missing.is_empty() {
        let _ = writeln!(out, "\nmissing:");
        for line in &report.missing {
            let _ = writeln!(out, "  - {line}");
        }
    }
    out
}

fn bpf_cell(report: &ProbeReport) -> String {
    match &report.bpf_selftest {
        Some(t) => format!(
            "yes ({} -> 1 event via ring buffer from pid {} '{}' in {} us)",
            t.attached, t.pid, t.comm, t.micros
        ),
        None => "no".into(),
    }
}

fn tracefs_cell(report: &ProbeReport) -> String {
    match &report.tracefs {
        Some(path) if report.tracefs_mounted_by_us => format!("{path} (mounted by nodescope)"),
        Some(path) => path.clone(),
        None => "no".into(),
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn rfc_cell(probes: &RfcProbes) -> String {
    let present = probes.symbols.iter().filter(|s| s.in_kallsyms).count();
    let attached = probes
        .symbols
        .iter()
        .filter(|s| s.status == "attached")
        .count();
    let mut cell = format!(
        "{present} of {} symbols in {}, {attached} attached ({})",
        probes.symbols.len(),
        probes.looked_up_in,
        probes.manifest
    );
    for symbol in &probes.symbols {
        let _ = write!(
            cell,
            "\n{:<19}{:<9}{:<14} {}",
            "", symbol.status, symbol.kind, symbol.symbol
        );
        if let Some(error) = &symbol.error {
            let _ = write!(cell, ": {error}");
        }
    }
    if !probes.unmapped_kinds.is_empty() {
        let _ = write!(
            cell,
            "\n{:<19}not in the manifest: {}",
            "",
            probes.unmapped_kinds.join(", ")
        );
    }
    for error in &probes.errors {
        let _ = write!(cell, "\n{:<19}error: {error}", "");
    }
    cell
}

fn devices_cell(devices: &[F2fsDevice]) -> String {
    let described: Vec<String> = devices
        .iter()
        .map(|d| {
            format!(
                "{} (node_compress_threshold {}, node_compress_interval {})",
                d.name,
                yes_no(d.node_compress_threshold),
                yes_no(d.node_compress_interval)
            )
        })
        .collect();
    list_or_none(&described)
}
