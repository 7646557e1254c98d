//! The VM harness: nodescope and the reference module against real F2FS in Debian's kernels
//! under QEMU, each phase's guest side (guest/*.sh, *.c) and its check here on the host. xtask
//! dispatches its tasks here (`cargo xtask vm-test`, `vm-kmod`, `vm-variants`, `vm-foreign`,
//! `vm-bench`, `android-image`, `kmod`); this crate imports nothing of xtask.
//!
//! `cargo xtask vm-test [--kernel 6.1|6.12|all]`: boot Debian's kernels (F2FS as a module)
//! under QEMU, run nodescope against a real F2FS there, and check its attribution against the
//! kernel's own counters (iostat "fs node" reads, debugfs CP count): in every phase the node
//! reads nodescope attributes to processes must equal iostat's exactly (check.rs). The stream
//! lines are described in docs/STREAM.md; the guest side is guest/guest.sh. `--arch arm64` boots
//! Debian's arm64 kernel instead, with Android's conventions (arm64.rs).
mod accesses;
pub mod android_image;
mod arch;
pub mod arm64;
pub mod bench;
mod bench_lookups;
mod check;
mod churn;
mod cp_anatomy;
mod daemon;
mod discover;
pub mod foreign_phase;
mod guest_conf;
mod initramfs;
pub(crate) mod kernel;
pub mod kmod;
pub mod kmod_phase;
mod newc;
mod progs;
mod qemu;
mod remount;
mod results;
mod settings;
mod tune_check;
pub(crate) mod uidswitch;
pub mod util;
pub mod variants_phase;

use std::{fs, path::Path};

use anyhow::{bail, Result};
use serde_json::Value;

use check::sim_stream_line;
use guest_conf::guest_config;
use settings::{
    replay_script, Replay, NDIRS, NFILES, RFC_PROBES, VARIANTS, VARIANT_DIRS, VM_TIMEOUT,
};

pub use arch::Arch;

/// The x86_64 run on `which` kernel (6.1, 6.12 or all); arm64's is [`arm64::run`].
pub fn run(which: &str) -> Result<()> {
    let specs: Vec<&kernel::KernelSpec> = match which {
        "all" => kernel::KERNELS.iter().collect(),
        label => kernel::KERNELS
            .iter()
            .filter(|k| k.label == label)
            .collect(),
    };
    if specs.is_empty() {
        bail!("unknown kernel {which:?}: use 6.1, 6.12, 7.3, 7.2 or all");
    }
    let cache = util::target_dir().join("vm-cache");
    fs::create_dir_all(&cache)?;
    let nodescope = util::build_nodescope()?;
    let sim_line = sim_stream_line(&nodescope, &cache)?;
    let mut finals = Vec::new();
    for spec in specs {
        finals.push(results::report(spec.label, fail_line(spec.label), || {
            run_kernel(spec, &cache, &nodescope, &sim_line)
        }));
    }
    if finals.len() > 1 {
        for (line, _) in &finals {
            println!("{line}");
        }
    }
    if finals.iter().any(|(_, pass)| !pass) {
        bail!("vm-test failed");
    }
    Ok(())
}

fn fail_line(label: &str) -> String {
    format!("vm-test {label} attributed=0 iostat=0 cat_pids=0 readahead=0 checkpoints=0 FAIL")
}

fn run_kernel(
    spec: &kernel::KernelSpec,
    cache: &Path,
    nodescope: &Path,
    sim_line: &Value,
) -> Result<results::Verdict> {
    let kernel = kernel::prepare(spec, cache)?;
    let files = qemu::GuestFiles::fresh(cache.join(format!("run-{}", spec.label)))?;
    let config = guest_config();
    let guest_files = [
        ("init", include_str!("../guest/guest.sh").to_string()),
        ("replay-names", replay_script(Replay::Names, NDIRS)),
        ("replay-glob", replay_script(Replay::Glob, NDIRS)),
        ("replay-variant", replay_script(Replay::Names, VARIANT_DIRS)),
        ("replay-tail", accesses::tail_replay()),
        ("xattr-tail", accesses::xattr_tail()),
        ("rfc-probes.toml", RFC_PROBES.to_string()),
        ("discover-hand.toml", discover::HAND_WRITTEN.to_string()),
        ("etc/vm-test.conf", config),
    ];
    let uidswitch = uidswitch::build(&files.work)?;
    let xattrpass = accesses::build_xattrpass(Arch::X86_64, &files.work)?;
    fs::write(
        &files.initrd,
        initramfs::build_with_modules(
            &kernel,
            nodescope,
            &guest_files,
            &[&uidswitch, &xattrpass],
            initramfs::ModuleOverrides {
                roots: &remount::MODULES,
                ..Default::default()
            },
        )?,
    )?;
    files.create_disks()?;
    eprintln!(
        "vm-test {}: kernel {}, initramfs {} KiB",
        spec.label,
        kernel.release,
        fs::metadata(&files.initrd)?.len() / 1024
    );
    let out =
        files.boot_and_unpack(spec.label, crate::Arch::X86_64, &kernel.vmlinuz, VM_TIMEOUT)?;
    let verdict = check::check(
        spec.label, &out, NDIRS, NFILES, &VARIANTS, sim_line, nodescope,
    )?;
    if verdict.pass {
        files.remove_images();
    }
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    /// A guest script that does not parse fails only after a boot, minutes in: `sh -n` each
    /// here (the host's POSIX sh; the guest's is busybox ash, which accepts what it accepts).
    #[test]
    fn every_guest_script_parses() {
        let scripts = [
            ("guest.sh", include_str!("../guest/guest.sh")),
            ("kmod.sh", include_str!("../guest/kmod.sh")),
            ("variants.sh", include_str!("../guest/variants.sh")),
            ("arm64.sh", include_str!("../guest/arm64.sh")),
            ("bench.sh", include_str!("../guest/bench.sh")),
            ("prelude.sh", include_str!("../guest/prelude.sh")),
        ];
        for (name, text) in scripts {
            let out = std::process::Command::new("sh")
                .args(["-n", "-c", text])
                .output()
                .expect("running sh -n");
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let broken = std::process::Command::new("sh")
            .args(["-n", "-c", "for a in b; do\n  :\ndone\ndone\n"])
            .status()
            .unwrap();
        assert!(!broken.success(), "sh -n must refuse a stray done");
    }
}
