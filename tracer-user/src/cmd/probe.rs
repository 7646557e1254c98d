//! `nodescope probe`: what this kernel and this process can do, as a table or JSON.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tracer_common::text::escape_controls;

use crate::{
    output::OutputFile,
    probe,
    source::{
        bpf::{
            discover::{self, btf::BtfFiles},
            manifest::{Manifest, DEFAULT_KERNEL_MANIFEST},
        },
        open,
    },
    system,
    view::{
        probe_table,
        stdout::{closed_is_success, print, print_line},
    },
};

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
    let report = probe::collect(&manifest, source)?;
    let printed = if args.json {
        print_line(serde_json::to_string_pretty(&report)?)
    } else {
        // Manifest symbols and comms are anyone's text: escaped before they reach a terminal.
        print(&escape_controls(&probe_table::render(&report)))
    };
    closed_is_success(printed)?;
    // A kernel with F2FS whose node reads no variant can observe: nothing nodescope does works
    // here, and scripts must be able to tell.
    if report.f2fs && report.bpf && report.f2fs_plan.node_reads.chosen.is_none() {
        std::process::exit(1);
    }
    Ok(())
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
