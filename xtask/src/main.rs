//! `cargo xtask <task>`: everything around the code (install, test, VM tests, benchmarks).
mod bench;
mod dist;
mod setup;
mod soak;
mod test;
mod util;

use anyhow::Result;
use clap::{Parser, Subcommand};
use vm_harness::{self as vm, kmod};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what the project needs (apt packages, bpf-linker) when missing. Idempotent.
    Setup,
    /// Setup, then every check CI runs: fmt, clippy, all tests (eBPF tests need root).
    Test,
    /// Setup, build, the Android image when missing (root), then `nodescope top` (extra
    /// arguments go to nodescope).
    Top {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Boot Debian kernels with F2FS in QEMU and check nodescope's attribution there (root).
    VmTest {
        /// 6.1, 6.12, 7.3, 7.2 or all.
        #[arg(long, default_value = "all")]
        kernel: String,
        /// The guest's architecture: x86_64 (default) or arm64 (Debian's arm64 kernel under
        /// qemu-system-aarch64, Android's conventions; 6.1 only).
        #[arg(long, default_value = "x86_64")]
        arch: String,
    },
    /// The reference module (kmod/: the RFC's mechanism as a patch to Debian's F2FS) in the
    /// stock Debian kernel under QEMU: the cover letter's two tables from the module's own
    /// counters, every failure path, fsck and checksums (root).
    VmKmod {
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// Use these builds instead of `cargo xtask kmod`'s (development).
        #[arg(long, requires = "patched")]
        stock: Option<std::path::PathBuf>,
        #[arg(long, requires = "stock")]
        patched: Option<std::path::PathBuf>,
        /// Leave out the cover letter's phone trial (its second boot, about 18 minutes).
        #[arg(long, conflicts_with = "phone_only")]
        no_phone: bool,
        /// Phone trials of each mode (compression off, on).
        #[arg(long, default_value_t = vm::kmod_phase::phone::CI_TRIALS)]
        trials: u32,
        /// Only the phone trial's boot (development).
        #[arg(long)]
        phone_only: bool,
    },
    /// The variant modules (kmod/patches/6.12-variants: Debian 6.12's F2FS reshaped like other
    /// kernel families' attach points) loaded in turn in one boot of Debian's 6.12 under QEMU:
    /// one `variant <name> ... PASS` line each (root).
    VmVariants {
        /// Write the guest's tracepoint formats, kallsyms excerpt and each module's BTF to
        /// tracer-user/tests/data/variants/<variant>/ (the planner's test data).
        #[arg(long)]
        save_test_data: bool,
    },
    /// The foreign variants (issue 49: the reference module without its tracepoints, and
    /// renamed with its statics inlined) loaded in turn in one boot of Debian's 6.12 under QEMU,
    /// each held to its own counters through a stream, a recording and top with no flags: one
    /// `rfc-foreign 6.12 variant=<name> ... PASS` line each (root).
    VmForeign,
    /// The simulated phone's file set as Android writes /data (fscrypt v2, SELinux labels,
    /// Android's mkfs features), written by Debian's 6.12 in QEMU and cached; then checked from
    /// the image's own bytes (root).
    AndroidImage,
    /// What one traced event costs in the kernel, nodescope against bpftrace, on a Debian
    /// kernel in QEMU (prints `ebpf-cost ours_ns=.. bpftrace_ns=.. ratio=..`; root).
    VmBench {
        /// 6.1 or 6.12.
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// Only the node-lookup costs (kprobe, fentry, bpftrace's kprobe), not the replays.
        #[arg(long)]
        lookups_only: bool,
    },
    /// Build F2FS out of tree for the Debian kernel the VM test boots: stock and with the
    /// patches of kmod/patches/<kernel>/ (or --patches), each cached; print path, size,
    /// vermagic and BTF size. Downloads Debian's headers and source on first use.
    Kmod {
        /// 6.12 or 6.1.
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// A directory of *.patch files (applied in name order) instead of kmod/patches/<kernel>.
        #[arg(long)]
        patches: Option<std::path::PathBuf>,
        /// Also run the kernel's scripts/checkpatch.pl on each patch (errors fail the command).
        #[arg(long)]
        checkpatch: bool,
        /// Also build the variant modules (kmod/patches/6.12-variants: Debian's stock F2FS
        /// reshaped like other kernel families' attach points), each checked with nm.
        #[arg(long)]
        variants: bool,
    },
    /// Build a static release nodescope for one architecture (default: this host's) and
    /// print its path, size and what `file` says. aarch64 installs Debian's cross toolchain.
    Dist {
        /// aarch64 or x86_64.
        #[arg(long)]
        arch: Option<String>,
    },
    /// Run a benchmark and print its figures: sim, controller, ...
    Bench {
        name: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A day of the simulated phone through top's model, stream and record at full speed:
    /// RSS, file descriptors and recording size over time (extra arguments: --hours, ...).
    Soak {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::Setup => setup::run(),
        Task::Test => test::run(),
        Task::Top { args } => {
            setup::run()?;
            vm::android_image::ensure_for_top();
            util::run_nodescope("top", &args)
        }
        Task::Bench { name, args } => bench::run(&name, &args),
        Task::VmTest { kernel, arch } => match dist::Arch::parse(Some(&arch))? {
            dist::Arch::X86_64 => vm::run(&kernel),
            dist::Arch::Aarch64 => vm::arm64::run(
                &kernel,
                &vm::arm64::Host {
                    set_up: &setup::ensure_arm64_vm,
                    build_nodescope: &|| dist::build(dist::Arch::Aarch64),
                },
            ),
        },
        Task::VmBench {
            kernel,
            lookups_only,
        } => vm::bench::run(&kernel, lookups_only),
        Task::VmVariants { save_test_data } => vm::variants_phase::run(save_test_data),
        Task::VmForeign => vm::foreign_phase::run(),
        Task::VmKmod {
            kernel,
            stock,
            patched,
            no_phone,
            trials,
            phone_only,
        } => {
            let options = vm::kmod_phase::Options {
                trials,
                phone: !no_phone,
                phone_only,
            };
            if let (Some(stock), Some(patched)) = (stock, patched) {
                let modules = vm::kmod_phase::Modules {
                    stock: &stock,
                    patched: &patched,
                };
                vm::kmod_phase::run(&kernel, &modules, options)
            } else {
                vm::kmod_phase::build_and_run(&kernel, options)
            }
        }
        Task::AndroidImage => vm::android_image::run().map(|_| ()),
        Task::Soak { args } => soak::run(&args),
        Task::Dist { arch } => dist::run(arch.as_deref()),
        Task::Kmod {
            kernel,
            patches,
            checkpatch,
            variants,
        } => kmod::run(&kernel, patches.as_deref(), checkpatch, variants),
    }
}
