//! `cargo xtask vm-kmod [--kernel 6.12]`: the reference module (kmod/, our reconstruction of the
//! RFC's compressed node cache as a patch to Debian's F2FS) in the stock Debian kernel. The
//! guest (kmod.sh) writes the RFC's file set with the stock build, then loads the patched build
//! and runs the cover letter's two measurements (equal node count, about 3 MiB of attributed
//! memory) and every failure path; here the results become the two tables and one verdict line,
//! every number from the module's own counters (`<debugfs>/f2fs/<dev>/node_cache`) or iostat.
//!
//! Here: the run and the guest's scripts; the verdict from the module's counters is verdict.rs.
use std::{fs, path::Path, time::Duration};

use anyhow::{bail, Context as _, Result};

use super::{
    initramfs, kernel, qemu,
    settings::{NDIRS, NFILES},
};
use crate::util;

mod counters;
mod exact;
mod fixes;
mod functions;
mod grid;
pub mod phone;
mod recorded;
mod settings;
mod simulator;
mod top;
mod tune;
mod verdict;
mod whatif;

pub use settings::Modules;
use settings::{BUDGET_BYTES, GRID, INTERVAL_MS, MEMCG_MB, THRESHOLD, UNMOUNT_CYCLES};
use verdict::verdict;
pub(super) use {
    counters::ModuleCounters,
    exact::{count_checks, gauge_checks, Exact, Span},
    top::top_checks,
};

/// The simulator's vm-replay budget (sim::scenario::vm_replay::BUDGET_BYTES, "exactly 3 MiB"),
/// for the module's run of the simulator's procedure (kmod.sh, 2b).
const SIM_BUDGET_BYTES: u64 = 3 << 20;
/// The grid's memory (kmod.sh, 4b): before each run a tmpfs leaves this much free plus
/// `ARRIVING_MB`, and a hog of `ARRIVING_MB` then arrives. With the tune phase's 40 MB the
/// shrinker drained the compressed queues as well and every setting read every node twice
/// (32,150 to 32,175 reads); 64 MB is below the 65 MiB of raw node pages, above what the file
/// set takes compressed.
const GRID_HEADROOM_MB: u64 = 64;
const ARRIVING_MB: u64 = 256;
/// The static run `nodescope top` watches in tmux.
const TOP_AT: (u32, u32) = (25, 100);
const VM_TIMEOUT: Duration = Duration::from_secs(1200);
/// The measured replay's manifest: a fixed permutation of the 16,384 small files. The RFC's
/// manifest order is not published. In creation order the replay walks the cache's own LRU
/// order, and a budget that holds part of the set keeps only what the replay reaches last:
/// measured here, 0 hits with compression off and 0 restores with it on. A fixed shuffle gives
/// each retained node its share of hits, which is what the RFC's rows show (716 hits of 760
/// retained nodes off, 9,175 restores of 9,208 on).
const MANIFEST_SEED: u64 = 0x5eed_000f_2f5c_0de5;
/// Files per cat line of the manifest script.
const MANIFEST_BATCH: usize = 64;

/// What `cargo xtask vm-kmod` runs besides its defaults.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Phone trials of each mode (phone.rs).
    pub trials: u32,
    /// The phone trial too, after the module's phase (the default).
    pub phone: bool,
    /// Only the phone trial's boot.
    pub phone_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            trials: phone::CI_TRIALS,
            phone: true,
            phone_only: false,
        }
    }
}

/// Build both modules (`cargo xtask kmod`, cached) and run the phase with them.
pub fn build_and_run(label: &str, options: Options) -> Result<()> {
    build_and_run_beside(label, options, || ())
}

/// [`build_and_run`], with `beside` run in a thread of its own from the end of the builds to
/// the end of the phase (`cargo xtask test` builds the next phases' modules there).
pub fn build_and_run_beside(
    label: &str,
    options: Options,
    beside: impl FnOnce() + Send + 'static,
) -> Result<()> {
    let built = crate::kmod::build(label, None)?;
    let beside = std::thread::spawn(beside);
    let outcome = run_built(label, &built, options);
    if beside.join().is_err() {
        eprintln!("kmod {label}: the work beside the phase panicked");
    }
    outcome
}

fn run_built(label: &str, built: &crate::kmod::Built, options: Options) -> Result<()> {
    let patched = built
        .patched
        .as_ref()
        .with_context(|| format!("kmod/patches/{label} has no patch: nothing to test"))?;
    println!("{}", built.stock.summary(label, "stock"));
    println!("{}", patched.summary(label, "patched"));
    run(
        label,
        &Modules {
            stock: &built.stock.ko,
            patched: &patched.ko,
        },
        options,
    )
}

/// The module's phase, then (when asked) the phone trial in a boot of its own (phone.rs).
pub fn run(label: &str, modules: &Modules, options: Options) -> Result<()> {
    if !options.phone_only {
        run_module(label, modules)?;
    }
    if options.phone || options.phone_only {
        phone::run(label, modules, options.trials)?;
    }
    Ok(())
}

fn run_module(label: &str, modules: &Modules) -> Result<()> {
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == label)
        .with_context(|| format!("unknown kernel {label:?}: use 6.12"))?;
    let cache = util::target_dir().join("vm-cache");
    let kernel = kernel::prepare(spec, &cache)?;
    let nodescope = util::build_nodescope()?;
    let files = qemu::GuestFiles::fresh(cache.join(format!("run-kmod-{label}")))?;
    fs::write(&files.initrd, initramfs_for(&kernel, &nodescope, modules)?)?;
    files.create_disks()?;
    let boot_label = format!("kmod-{label}");
    let out = files.boot_and_unpack(
        &boot_label,
        crate::Arch::X86_64,
        &kernel.vmlinuz,
        VM_TIMEOUT,
    )?;
    simulate_vm_replay(&nodescope, &out)?;
    let verdict = verdict(label, &out)?;
    for line in &verdict.lines {
        println!("{line}");
    }
    println!("{}", verdict.final_line);
    verdict.ensure_pass(&format!("vm-kmod {label}"), &out)?;
    files.remove_images();
    Ok(())
}

/// The simulator's run of the procedure kmod.sh's part 2b runs on the module, for the verdict
/// to set beside it (kmod_phase/simulator.rs): `nodescope sim --scenario vm-replay --json`.
fn simulate_vm_replay(nodescope: &Path, out: &Path) -> Result<()> {
    let output = std::process::Command::new(nodescope)
        .args(["sim", "--scenario", "vm-replay", "--json"])
        .output()
        .with_context(|| format!("running {} sim", nodescope.display()))?;
    if !output.status.success() {
        bail!(
            "nodescope sim --scenario vm-replay: {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    fs::write(out.join("sim_vm_replay.json"), &output.stdout).context("writing sim_vm_replay.json")
}

/// The VM test's initramfs with kmod.sh as init, fsck.f2fs, and both builds: the patched one
/// in Debian's f2fs place (lib/modules/f2fs.ko), the stock one beside it (f2fs-stock.ko).
fn initramfs_for(kernel: &kernel::Kernel, nodescope: &Path, modules: &Modules) -> Result<Vec<u8>> {
    let grid: Vec<String> = GRID.iter().map(|(t, i)| format!("{t}/{i}")).collect();
    let config = format!(
        "NDIRS={NDIRS}\nNFILES={NFILES}\nTHRESHOLD={THRESHOLD}\nINTERVAL={INTERVAL_MS}\n\
         BUDGET={BUDGET_BYTES}\nSIM_BUDGET={SIM_BUDGET_BYTES}\nHEADROOM_MB={}\nTUNE_PSI_GOAL={}\n\
         GRID=\"{}\"\nTOP_AT={}/{}\nGRID_HEADROOM_MB={GRID_HEADROOM_MB}\nARRIVING_MB={ARRIVING_MB}\n\
         MEMCG_MB={MEMCG_MB}\nUNMOUNT_CYCLES={UNMOUNT_CYCLES}\n",
        super::settings::HEADROOM_MB,
        super::settings::TUNE_PSI_GOAL,
        grid.join(" "),
        TOP_AT.0,
        TOP_AT.1
    );
    let replay_all = super::settings::replay_script(super::settings::Replay::Names, NDIRS)
        + "cat /mnt/shaped/* /mnt/sentinel > /dev/null\n";
    let files = [
        ("init", include_str!("../guest/kmod.sh").to_string()),
        ("replay-all", replay_all),
        (
            "replay-small",
            super::settings::replay_script(super::settings::Replay::Names, NDIRS),
        ),
        ("replay-manifest", manifest_script(MANIFEST_SEED)),
        ("sums", sums_script()),
        ("etc/vm-test.conf", config),
        (
            "etc/rfc-functions.toml",
            include_str!("../guest/rfc-functions.toml").to_string(),
        ),
    ];
    let fsck = Path::new("/usr/sbin/fsck.f2fs");
    // For `nodescope top` on this kernel, captured as a person would see it (kmod.sh, 4b).
    let tmux = Path::new("/usr/bin/tmux");
    let overrides = initramfs::ModuleOverrides {
        replace: &[("f2fs", modules.patched)],
        extra: &[("f2fs-stock.ko", modules.stock)],
        ..Default::default()
    };
    initramfs::build_with_modules(kernel, nodescope, &files, &[fsck, tmux], overrides)
}

/// The small files in a seeded order, `MANIFEST_BATCH` per cat (no shell loop in the guest).
fn manifest_script(seed: u64) -> String {
    let mut files: Vec<(u64, u64)> = (0..NDIRS)
        .flat_map(|d| (0..NFILES).map(move |f| (d, f)))
        .collect();
    let mut state = seed;
    // Fisher-Yates with xorshift64*: the same permutation on every machine.
    for i in (1..files.len()).rev() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        files.swap(i, (r % (i as u64 + 1)) as usize);
    }
    let mut script = String::from("#!/bin/sh\n");
    for batch in files.chunks(MANIFEST_BATCH) {
        script.push_str("cat");
        for (d, f) in batch {
            script.push_str(&format!(" /mnt/t/d-{d}/f-{f}"));
        }
        script.push_str(" > /dev/null\n");
    }
    script
}

/// `md5sum` of every file of the set, one command per directory (no shell loop in the guest).
fn sums_script() -> String {
    let mut script = String::from("#!/bin/sh\n");
    for dir in 0..NDIRS {
        script.push_str("md5sum");
        for file in 0..NFILES {
            script.push_str(&format!(" /mnt/t/d-{dir}/f-{file}"));
        }
        script.push('\n');
    }
    script.push_str("md5sum /mnt/shaped/* /mnt/sentinel\n");
    script
}

#[cfg(test)]
mod tests;
