//! Choosing and opening a source from the command line (`--source auto|bpf|sim|replay`).
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use super::{bpf::live::BpfSource, replay::ReplaySource, sim::SimSource, Source};
use crate::source::bpf::trampoline::FunctionHook;
use controller::claim::{default_state_dir, StateDir};

use crate::{
    source::bpf::{
        discover::startup,
        f2fs::{self, planner::NodeReadVariant},
        manifest::Manifest,
    },
    system::{self, Privileges},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SourceChoice {
    /// eBPF when this kernel has F2FS and we may load programs, else the simulator.
    Auto,
    /// The kernel, through eBPF.
    Bpf,
    /// The simulator, in real time.
    Sim,
    /// A recording (`FILE`).
    Replay,
}

/// Source options shared by top, stream and record.
#[derive(Args, Clone, Debug)]
pub(crate) struct SourceArgs {
    /// Where events come from (each command has its own default).
    #[arg(long, value_enum)]
    pub source: Option<SourceChoice>,
    /// The recording to replay (with --source replay).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Replay and simulator speed: 1 = as recorded (real time), 10 = ten times faster, 0 = as
    /// fast as possible.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true,
          value_parser = parse_speed)]
    pub speed: f64,
    /// Simulator scenario (with --source sim).
    #[arg(long, default_value = "android-launch")]
    pub scenario: String,
    /// Simulator seed: the same seed gives the same events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory holding the simulator's knob files (<dir>/<dev>/node_compress_*).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Also capture every node lookup (node_access) and node-page eviction (node_evict), the
    /// trace `nodescope whatif` replays. On a kernel this probes the node lookup function: far
    /// more events than node reads.
    #[arg(long)]
    pub accesses: bool,
    /// Time every node lookup from its entry to its return and tell its outcome: a raw hit, a
    /// restore, a disk read of its own, a wait on another's read, an error (issue 51). Implies
    /// --accesses. The kernel source adds a return program on each lookup function and a
    /// kprobe on the page lock's slow path; the simulator times its lookups in virtual time.
    #[arg(long)]
    pub lookup_latency: bool,
    /// Kernel source: how kernel functions are hooked, the node lookups of --accesses and the
    /// RFC's functions of a probe manifest. `auto` takes BPF trampolines (fentry, fexit), the
    /// cheaper hook, where the kernel has BTF and trampolines, and kprobes where not or where
    /// the kernel refuses one; `kprobe` always takes kprobes.
    #[arg(long, value_enum, default_value_t = FunctionHook::Auto)]
    pub function_hook: FunctionHook,
    /// Probe manifest for the RFC's own functions (kprobes; see `nodescope probe`): their
    /// events are counted per window under "rfc" and, in a recording, kept as events. Only
    /// the kernel source reads it.
    #[arg(long, value_name = "FILE")]
    pub probes: Option<PathBuf>,
    /// Kernel source: also send every node read through the ring buffer as an event. Node-read
    /// counts come from the kernel's exact counters either way; without this flag the kernel
    /// only counts them (a fraction of the cost per read). `record`, `daemon --record` and
    /// `--probes` (the cache's population follows node reads) turn it on themselves.
    #[arg(long)]
    pub node_read_events: bool,
    /// The traced device's F2FS image, or the device itself (read-only): node reads are then
    /// told apart by node type (inode, direct, indirect, double indirect, xattr), read from
    /// each nid's block, per window and since the start. A node made after the image was read
    /// counts as "not in the image". A device counts only its own node reads; an image file
    /// counts every device's. The kernel source then sends node reads as events (for their
    /// nids); the simulator needs none: it tells them by its own image.
    #[arg(long, value_name = "IMG")]
    pub image: Option<PathBuf>,
    /// Kernel source: take node reads from this probe instead of the best one the kernel
    /// offers and takes (the planner's fallbacks; `nodescope probe` lists them).
    #[arg(long, value_enum, value_name = "VARIANT")]
    pub node_reads: Option<NodeReadVariant>,
}

impl SourceArgs {
    /// Node lookups are traced: `--accesses`, or `--lookup-latency`, which times them.
    pub(crate) fn traces_accesses(&self) -> bool {
        self.accesses || self.lookup_latency
    }

    /// Whether the kernel source must send node reads as events: when asked, when the
    /// RFC's probes are attached (the cache's raw entries are counted from node-read events)
    /// and when an image tells node types by nid.
    pub(crate) fn wants_node_read_events(&self) -> bool {
        self.node_read_events || self.probes.is_some() || self.image.is_some()
    }

    /// `wants_node_read_events`, given the manifest the source will attach: one discovered at
    /// start needs node-read events as much as one named by `--probes`.
    pub(crate) fn node_read_events_with(&self, manifest: Option<&Manifest>) -> bool {
        self.wants_node_read_events() || manifest.is_some()
    }
}

/// Why `auto` chose what it chose, for the banner.
pub(crate) struct Opened {
    pub source: Box<dyn Source>,
    pub banner: Option<String>,
}

/// Open the source the arguments name, or `default` when they name none.
pub(crate) fn open(args: &SourceArgs, default: SourceChoice) -> Result<Opened> {
    let choice = args.source.unwrap_or(default);
    if args.probes.is_some() && matches!(choice, SourceChoice::Sim | SourceChoice::Replay) {
        bail!(
            "--probes attaches kprobes to this kernel: it needs the kernel source, not {choice:?}"
        );
    }
    match choice {
        SourceChoice::Bpf => open_bpf(args),
        SourceChoice::Sim => Ok(Opened {
            source: open_sim(args)?,
            banner: None,
        }),
        SourceChoice::Replay => {
            let Some(file) = &args.file else {
                bail!("--source replay needs the recording: nodescope ... --source replay FILE");
            };
            Ok(Opened {
                source: Box::new(ReplaySource::open(file, args.speed)?),
                banner: None,
            })
        }
        SourceChoice::Auto => open_auto(args),
    }
}

fn open_auto(args: &SourceArgs) -> Result<Opened> {
    let why_not_bpf = bpf_unavailable()?;
    match why_not_bpf {
        None => open_bpf(args),
        Some(reason) if args.probes.is_some() => {
            bail!("--probes needs the kernel source, which cannot run here: {reason}")
        }
        Some(reason) => Ok(Opened {
            source: open_sim(args)?,
            banner: Some(format!("SIMULATOR ({reason})")),
        }),
    }
}

/// None when the kernel source can run here, else why not.
fn bpf_unavailable() -> Result<Option<String>> {
    if !system::has_f2fs() {
        return Ok(Some(format!(
            "kernel {} has no F2FS",
            system::kernel_release()
        )));
    }
    if !Privileges::current()?.may_trace() {
        return Ok(Some("no privilege to load eBPF programs".into()));
    }
    Ok(None)
}

fn open_bpf(args: &SourceArgs) -> Result<Opened> {
    if let Some(reason) = bpf_unavailable()? {
        bail!("the eBPF source cannot run here: {reason}");
    }
    // A fresh machine often has tracefs unmounted: without it the planner sees no tracepoint
    // and the comm-change hook cannot attach. We may trace here, so we may mount it.
    if let Err(err) = system::ensure_tracefs() {
        log::warn!("tracefs: {err:#}; planning without tracepoints");
    }
    // The planner, the RFC's trampolines and the access traces all read this kernel's BTF:
    // parsed once for the three, let go when the source has started.
    let btf = crate::source::bpf::discover::btf::hold_this_kernel();
    let (manifest, banner) = rfc_probes(args)?;
    let mut plan = f2fs::planner::plan_this_kernel(args.node_reads);
    let node_read_events = args.node_read_events_with(manifest.as_ref());
    let mut source = BpfSource::start(
        &mut plan,
        manifest.as_ref(),
        node_read_events,
        args.function_hook,
    )?;
    // What the kernel refused is said wherever the source runs (record, top, daemon).
    for (what, refusal) in plan.refusals() {
        log::warn!("{what}: not used: {refusal}");
    }
    if args.traces_accesses() {
        source.attach_accesses(&f2fs::access::plan_this_kernel(
            args.function_hook,
            args.lookup_latency,
        ))?;
    }
    let banner = with_coverage(&mut source, banner);
    drop(btf);
    system::release_freed_memory();
    Ok(Opened {
        source: Box::new(source),
        banner,
    })
}

/// On a kernel with the RFC's knobs: the footprints and counters too, and the banner says what
/// each kind is seen by (one line; `nodescope probe` has the table).
pub(crate) fn with_coverage(source: &mut BpfSource, banner: Option<String>) -> Option<String> {
    if !startup::rfc_kernel() {
        return banner;
    }
    // First, and short: top's header line is as wide as the terminal.
    let coverage = source.watch_rfc_kernel().short();
    Some(match banner {
        Some(banner) => format!("{coverage}; {banner}"),
        None => coverage,
    })
}

/// The RFC's probes for the kernel source: `--probes FILE`, else those discovered at start on a
/// kernel with the RFC's knobs; with the line that says where they came from, if any.
pub(crate) fn rfc_probes(args: &SourceArgs) -> Result<(Option<Manifest>, Option<String>)> {
    match &args.probes {
        Some(path) => Ok((Some(Manifest::load(path)?), None)),
        None => Ok(discovered_probes()),
    }
}

/// Without `--probes`, on a kernel with the RFC's knobs: the probes discovered at start (or
/// cached for this kernel build), and the line that says so. A failed discovery is said, and
/// the source runs without the RFC's probes.
pub(crate) fn discovered_probes() -> (Option<Manifest>, Option<String>) {
    if !startup::rfc_kernel() {
        return (None, None);
    }
    let found = StateDir::open(&default_state_dir())
        .and_then(|state| startup::for_this_kernel(state.path()));
    match found {
        Ok(found) => (Some(found.manifest), Some(found.line)),
        Err(err) => (None, Some(format!("probes: discovery failed: {err:#}"))),
    }
}

fn open_sim(args: &SourceArgs) -> Result<Box<dyn Source>> {
    let source = SimSource::start(
        &args.scenario,
        args.seed,
        args.sysfs_root.clone(),
        args.speed,
        args.traces_accesses(),
    )?;
    Ok(Box::new(source))
}

/// `--speed`: 0 (as fast as possible) or a positive, finite factor.
fn parse_speed(text: &str) -> Result<f64, String> {
    let speed: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|speed: &f64| !speed.is_nan())
        .ok_or_else(|| format!("{text:?} is not a number"))?;
    if !(speed.is_finite() && speed >= 0.0) {
        return Err(format!(
            "{speed}: the speed is 0 (as fast as possible) or a positive factor"
        ));
    }
    Ok(speed)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        source: SourceArgs,
    }

    fn wants(args: &[&str]) -> bool {
        let cli = Cli::try_parse_from(std::iter::once("nodescope").chain(args.iter().copied()))
            .expect("valid arguments");
        cli.source.wants_node_read_events()
    }

    #[test]
    fn node_read_events_only_when_asked_or_the_rfc_probes_need_them() {
        assert!(!wants(&[]));
        assert!(!wants(&["--source", "bpf", "--accesses"]));
        assert!(wants(&["--node-read-events"]));
        assert!(wants(&["--probes", "rfc.toml"]));
        assert!(wants(&["--image", "userdata.img"]));
    }

    #[test]
    fn a_speed_is_zero_or_a_positive_finite_factor() {
        assert_eq!(parse_speed("0"), Ok(0.0));
        assert_eq!(parse_speed("1e300"), Ok(1e300));
        for bad in ["-1", "inf", "-inf"] {
            assert!(
                parse_speed(bad).unwrap_err().contains("positive factor"),
                "{bad}"
            );
        }
        for bad in ["NaN", "fast"] {
            assert!(
                parse_speed(bad).unwrap_err().contains("not a number"),
                "{bad}"
            );
        }
    }
}
