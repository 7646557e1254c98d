//! `cargo xtask vm-test [--kernel 6.1|6.12|all]`: boot Debian's kernels (F2FS as a module)
//! under QEMU, run nodescope against a real F2FS there, and check its attribution against the
//! kernel's own counters (iostat "fs node" reads, debugfs CP count): in every phase the node
//! reads nodescope attributes to processes must equal iostat's exactly (check.rs). The stream
//! lines are described in docs/STREAM.md; the guest side is guest.sh. `--arch arm64` boots
//! Debian's arm64 kernel instead, with Android's conventions (arm64.rs).
mod accesses;
pub mod android_image;
mod arm64;
pub mod bench;
mod bench_lookups;
mod check;
mod churn;
mod cp_anatomy;
mod daemon;
mod discover;
pub mod foreign_phase;
mod initramfs;
pub(crate) mod kernel;
pub mod kmod_phase;
mod newc;
mod qemu;
mod remount;
mod tune_check;
pub(crate) mod uidswitch;
pub mod variants_phase;

use std::{
    fs,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use serde_json::Value;

use crate::util;

/// The file set, as the RFC's VM replay has it.
const NDIRS: u64 = 256;
const NFILES: u64 = 64;
/// Fallback node-read probes checked too, on the first VARIANT_DIRS directories.
const VARIANTS: [&str; 2] = ["kprobe", "read-bio"];
/// A probe manifest that maps RFC event kinds to a mainline function, so the RFC probe programs
/// run as a kprobe and a kretprobe on a real kernel, where their counts can be checked against
/// the kernel's own hist trigger.
const RFC_PROBES: &str = r#"target = "kernel"

[[probe]]
kind = "restore"
symbol = "f2fs_get_node_page"   # (struct f2fs_sb_info *sbi, pgoff_t nid)
nid = "arg1"

[[probe]]
kind = "convert"
symbol = "f2fs_get_node_page"
at = "return"
nid = "arg1"
"#;
const VARIANT_DIRS: u64 = 16;
/// Memory the pressure phase leaves outside its tmpfs (of the guest's 2 GiB): enough to run,
/// too little to keep the file set's 64 MiB of node pages cached.
const HEADROOM_MB: u64 = 40;
/// `nodescope tune --psi-goal` in the pressure phase, percent. The replays through the hog's
/// headroom stall 114 to 269 ms in all (6.1 and 6.12, thirteen runs), 0.3 to 6 % of the second
/// before the highest step; the rest of the boot stalls under 0.2 ms. check.rs wants every
/// step at 1.1 x the goal or more (the PSI trigger's own share).
pub const TUNE_PSI_GOAL: f64 = 0.1;
/// The whole guest run. With the churn phase (355 s of 6.12's run on a loaded 2-core host) the
/// 6.12 guest was still in its last phase at 600 s.
const VM_TIMEOUT: Duration = Duration::from_secs(900);

pub fn run(which: &str, arch: crate::dist::Arch) -> Result<()> {
    if arch == crate::dist::Arch::Aarch64 {
        return arm64::run(which);
    }
    let specs: Vec<&kernel::KernelSpec> = match which {
        "all" => kernel::KERNELS.iter().collect(),
        label => kernel::KERNELS
            .iter()
            .filter(|k| k.label == label)
            .collect(),
    };
    if specs.is_empty() {
        bail!("unknown kernel {which:?}: use 6.1, 6.12 or all");
    }
    let cache = util::target_dir().join("vm-cache");
    fs::create_dir_all(&cache)?;
    let nodescope = util::build_nodescope()?;
    let sim_line = sim_stream_line(&nodescope, &cache)?;
    let mut finals = Vec::new();
    for spec in specs {
        finals.push(report(spec.label, fail_line(spec.label), || {
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

/// One kernel's run, printed as every vm-test prints it: the verdict's lines (or
/// `  FAILED: <error>`, and `failed` as the final line), the time it took, the final line. That
/// line and whether the run passed.
fn report(
    label: &str,
    failed: String,
    run: impl FnOnce() -> Result<check::Verdict>,
) -> (String, bool) {
    let started = Instant::now();
    let (line, pass) = match run() {
        Ok(verdict) => {
            for l in &verdict.lines {
                println!("{l}");
            }
            (verdict.final_line, verdict.pass)
        }
        Err(err) => {
            println!("  FAILED: {err:#}");
            (failed, false)
        }
    };
    println!("vm-test {label}: {:.1} s", started.elapsed().as_secs_f64());
    println!("{line}");
    (line, pass)
}

fn fail_line(label: &str) -> String {
    format!("vm-test {label} attributed=0 iostat=0 cat_pids=0 readahead=0 checkpoints=0 FAIL")
}

/// One `stream --json` line of the simulator (its phone scenario) on the host: the kernel's
/// lines in the guest must have its very fields (one schema for every source).
fn sim_stream_line(nodescope: &Path, cache: &Path) -> Result<Value> {
    let knobs = cache.join("sim-knobs");
    let _ = fs::remove_dir_all(&knobs);
    fs::create_dir_all(&knobs)?;
    let output = std::process::Command::new(nodescope)
        .args([
            "stream",
            "--source",
            "sim",
            "--json",
            "--duration",
            "2",
            "--sysfs-root",
        ])
        .arg(&knobs)
        .output()
        .context("running nodescope stream --source sim")?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The busiest line: it has processes and devices to compare.
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .max_by_key(|line| line["processes"].as_array().map_or(0, Vec::len))
        .context("nodescope stream --source sim printed no line")
}

fn run_kernel(
    spec: &kernel::KernelSpec,
    cache: &Path,
    nodescope: &Path,
    sim_line: &Value,
) -> Result<check::Verdict> {
    let kernel = kernel::prepare(spec, cache)?;
    let files = qemu::GuestFiles::fresh(cache.join(format!("run-{}", spec.label)))?;
    let config = guest_config();
    let guest_files = [
        ("init", include_str!("guest.sh").to_string()),
        ("replay-names", replay_script(Replay::Names, NDIRS)),
        ("replay-glob", replay_script(Replay::Glob, NDIRS)),
        ("replay-variant", replay_script(Replay::Names, VARIANT_DIRS)),
        ("replay-tail", accesses::tail_replay()),
        ("rfc-probes.toml", RFC_PROBES.to_string()),
        ("discover-hand.toml", discover::HAND_WRITTEN.to_string()),
        ("etc/vm-test.conf", config),
    ];
    let uidswitch = uidswitch::build(&files.work)?;
    fs::write(
        &files.initrd,
        initramfs::build_with_modules(
            &kernel,
            nodescope,
            &guest_files,
            &[&uidswitch],
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
    let out = files.boot_and_unpack(
        spec.label,
        crate::dist::Arch::X86_64,
        &kernel.vmlinuz,
        VM_TIMEOUT,
    )?;
    let verdict = check::check(
        spec.label, &out, NDIRS, NFILES, &VARIANTS, sim_line, nodescope,
    )?;
    if verdict.pass {
        files.remove_images();
    }
    Ok(verdict)
}

/// /etc/vm-test.conf, the guest script's settings.
fn guest_config() -> String {
    format!(
        "NDIRS={NDIRS}\nNFILES={NFILES}\nVARIANTS=\"{}\"\nVARIANT_DIRS={VARIANT_DIRS}\n\
         HEADROOM_MB={HEADROOM_MB}\nTUNE_PSI_GOAL={TUNE_PSI_GOAL}\nCHURN={}\n\
         CPANAT_MIXES=\"{}\"\nCPANAT_ARGS=\"-p {} -n {} -s {}\"\nUID_SWITCH={}\n\
         REMOUNT_FILES={}\nTYPES_FILE={}\nTYPES_FILE_BLOCKS={}\n",
        VARIANTS.join(" "),
        churn::CHURN,
        cp_anatomy::MIXES.join(" "),
        cp_anatomy::PROCS,
        cp_anatomy::OPS,
        cp_anatomy::SEED,
        uidswitch::UID,
        remount::FILES,
        check::TYPES_FILE,
        check::TYPES_FILE_BLOCKS
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Replay {
    /// `cat /mnt/t/d-N/f-0 ... /mnt/t/d-N/f-63`: cat does every lookup.
    Names,
    /// `cat /mnt/t/d-N/*`: the shell lists the directory, and F2FS reads its inodes ahead.
    Glob,
}

/// One cat per directory, the names written out here so that no shell loop runs in the timed
/// window (a busybox loop building 16,384 names costs about 20 s under TCG). Absolute paths:
/// a `cd` would make the shell, not cat, read the root and /mnt/t inodes.
fn replay_script(replay: Replay, ndirs: u64) -> String {
    let mode = if replay == Replay::Glob {
        "glob"
    } else {
        "names"
    };
    replay_dirs(replay, 0..ndirs, mode)
}

/// [`replay_script`] over the directories `dirs`; the shell's pid goes to shell_<mode>.pid.
fn replay_dirs(replay: Replay, dirs: std::ops::Range<u64>, mode: &str) -> String {
    let mut script = format!("#!/bin/sh\necho $$ > /results/shell_{mode}.pid\n");
    for dir in dirs {
        script.push_str("cat");
        if replay == Replay::Glob {
            script.push_str(&format!(" /mnt/t/d-{dir}/*"));
        } else {
            for file in 0..NFILES {
                script.push_str(&format!(" /mnt/t/d-{dir}/f-{file}"));
            }
        }
        script.push_str(" > /dev/null\n");
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_scripts_have_one_cat_per_directory() {
        let names = replay_script(Replay::Names, 2);
        let lines: Vec<&str> = names.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1], "echo $$ > /results/shell_names.pid");
        assert!(lines[2].starts_with("cat /mnt/t/d-0/f-0 /mnt/t/d-0/f-1 "));
        assert!(lines[3].ends_with(" /mnt/t/d-1/f-63 > /dev/null"));
        assert_eq!(lines[3].matches("/mnt/t/").count() as u64, NFILES);
        let glob = replay_script(Replay::Glob, 256);
        assert_eq!(glob.lines().last(), Some("cat /mnt/t/d-255/* > /dev/null"));
    }

    /// A guest script that does not parse fails only after a boot, minutes in: `sh -n` each
    /// here (the host's POSIX sh; the guest's is busybox ash, which accepts what it accepts).
    #[test]
    fn every_guest_script_parses() {
        let scripts = [
            ("guest.sh", include_str!("guest.sh")),
            ("kmod.sh", include_str!("kmod.sh")),
            ("variants.sh", include_str!("variants.sh")),
            ("arm64.sh", include_str!("arm64.sh")),
            ("bench.sh", include_str!("bench.sh")),
            ("prelude.sh", include_str!("prelude.sh")),
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
