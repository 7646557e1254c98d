//! `cargo xtask vm-test --arch arm64 --kernel 6.1`: nodescope as a phone runs it, without a
//! phone. Debian's arm64 kernel (kernel.rs, ARM64_KERNELS) boots under qemu-system-aarch64 (TCG)
//! with the static aarch64 nodescope of `cargo xtask dist --arch aarch64`, whose eBPF object
//! reads kprobe arguments from arm64's pt_regs, and Debian's arm64 busybox-static. The host
//! formats the F2FS disk (the guest has no mkfs.f2fs). The guest keeps Android's conventions:
//! tracefs at /sys/kernel/tracing only (no debugfs: the CP count comes from sysfs),
//! /data/system/packages.list, readers running as app uids.
//!
//! Phases: names, glob, sync and the fallback variants with the x86 run's exact checks
//! (check.rs, `check_core`), then arm64.sh's own: per-package attribution through `stream` and
//! `report`, and the RFC probe's nid argument per nid against a kprobe_events hist trigger
//! keyed on x1 (`rfc=ours/kernel`). The x86 run's record, churn, discover and tune phases are
//! not run here: they check nothing arch-specific, and TCG emulating arm64 is slow.
use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use serde_json::Value;

use super::{android_image, check, initramfs, kernel, qemu, results, settings::Replay};
use crate::{util, Arch};

/// Android's packages.list: one package, app id 10123 (uid 10123 for user 0, 1010123 for
/// user 10).
const PACKAGES_LIST: &str =
    "com.example.reader 10123 0 /data/user/0/com.example.reader default:targetSdkVersion=34 3003 0 1\n";
/// The apps' readers log in through busybox su, which wants them in /etc/passwd (Android's
/// names for them).
const PASSWD: &str = "root:x:0:0:root:/:/bin/sh\n\
                      u0_a123:x:10123:10123::/:/bin/sh\n\
                      u10_a123:x:1010123:1010123::/:/bin/sh\n";
/// (uid, the name nodescope gives it from PACKAGES_LIST, first directory it reads).
const APP_READERS: [(u64, &str, u64); 2] = [
    (10123, "com.example.reader", 0),
    (1010123, "com.example.reader (user 10)", 16),
];
/// Directories each app reader reads.
const APP_DIRS: u64 = 16;
/// TCG emulating arm64 is slower than emulating x86_64.
const VM_TIMEOUT: Duration = Duration::from_secs(1500);

/// What the arm64 run needs of the host that the build tool provides (xtask: its setup and
/// dist tasks).
pub struct Host<'a> {
    /// Set the host up for arm64 guests (qemu-system-aarch64, the arm64 packages).
    pub set_up: &'a dyn Fn() -> Result<()>,
    /// Build nodescope statically for aarch64; the binary's path.
    pub build_nodescope: &'a dyn Fn() -> Result<PathBuf>,
}

/// The arm64 run on `which` kernel (6.1 or all).
pub fn run(which: &str, host: &Host) -> Result<()> {
    let specs: Vec<&kernel::KernelSpec> = kernel::ARM64_KERNELS
        .iter()
        .filter(|k| which == "all" || k.label == which)
        .collect();
    if specs.is_empty() {
        bail!("no arm64 kernel {which:?}: the arm64 run has 6.1 only");
    }
    (host.set_up)()?;
    let cache = util::target_dir().join("vm-cache");
    fs::create_dir_all(&cache)?;
    // The host's nodescope prints the simulator's line and reports the guest's recordings.
    let host_nodescope = util::build_nodescope()?;
    let guest_nodescope = (host.build_nodescope)()?;
    let sim_line = super::check::sim_stream_line(&host_nodescope, &cache)?;
    let mut failed = false;
    for spec in specs {
        let label = format!("arm64-{}", spec.label);
        let run = Run {
            label: &label,
            cache: &cache,
            host_nodescope: &host_nodescope,
            guest_nodescope: &guest_nodescope,
        };
        let (_, pass) = results::report(&label, format!("vm-test {label} FAIL"), || {
            run.boot_and_check(spec, &sim_line)
        });
        failed |= !pass;
    }
    if failed {
        bail!("vm-test failed");
    }
    Ok(())
}

struct Run<'a> {
    label: &'a str,
    cache: &'a Path,
    host_nodescope: &'a Path,
    guest_nodescope: &'a Path,
}

impl Run<'_> {
    fn boot_and_check(
        &self,
        spec: &kernel::KernelSpec,
        sim_line: &Value,
    ) -> Result<results::Verdict> {
        let kernel = kernel::prepare(spec, self.cache)?;
        let files = qemu::GuestFiles::fresh(self.cache.join(format!("run-{}", self.label)))?;
        let userland = initramfs::Userland {
            busybox: arm64_busybox(self.cache)?,
            applets: busybox_applets(&arm64_busybox(self.cache)?)?,
            host_arch: false,
        };
        let xattrpass = super::accesses::build_xattrpass(crate::Arch::Aarch64, &files.work)?;
        let archive = initramfs::build_for(
            &userland,
            &kernel,
            self.guest_nodescope,
            &guest_files(),
            &[],
            &[&xattrpass],
            initramfs::ModuleOverrides::default(),
        )?;
        fs::write(&files.initrd, archive)?;
        format_f2fs(&files.disk, &files.work)?;
        files.create_results_disk()?;
        eprintln!(
            "vm-test {}: kernel {}, initramfs {} KiB",
            self.label,
            kernel.release,
            fs::metadata(&files.initrd)?.len() / 1024
        );
        let out = files.boot_and_unpack(self.label, Arch::Aarch64, &kernel.vmlinuz, VM_TIMEOUT)?;
        let mut core = check::check_core(
            &out,
            super::settings::NDIRS,
            super::settings::NFILES,
            &super::settings::VARIANTS,
            sim_line,
        )?;
        check_apps(
            &out,
            self.host_nodescope,
            &mut core.lines,
            &mut core.failures,
        );
        let rfc = check_rfc_nids(
            &out,
            self.host_nodescope,
            &mut core.lines,
            &mut core.failures,
        );
        let disk = out.parent().unwrap_or(&out).join(qemu::DISK_IMAGE);
        let accesses = super::accesses::check(
            &out,
            &disk,
            self.host_nodescope,
            super::accesses::LookupHook::FentryOrRefusal,
            &mut core.lines,
            &mut core.failures,
        );
        let fbe_apps = self.fbe_apps(&kernel).unwrap_or_else(|err| {
            core.failures
                .push(format!("apps on the encrypted tree: {err:#}"));
            "fbe_apps=?".to_string()
        });
        let verdict = core.verdict(self.label, &format!("{rfc} {accesses} {fbe_apps}"));
        if verdict.pass {
            files.remove_images();
        }
        Ok(verdict)
    }
}

impl Run<'_> {
    /// A second boot: two of the simulated phone's apps read their data on the encrypted,
    /// labelled Android image (android_image::apps), as on x86_64.
    fn fbe_apps(&self, kernel: &kernel::Kernel) -> Result<String> {
        let busybox = arm64_busybox(self.cache)?;
        let guest = android_image::apps::Guest {
            arch: Arch::Aarch64,
            kernel,
            nodescope: self.guest_nodescope,
            userland: initramfs::Userland {
                applets: busybox_applets(&busybox)?,
                busybox,
                host_arch: false,
            },
        };
        let work = self.cache.join(format!("run-{}-android-apps", self.label));
        android_image::apps_on(&guest, self.host_nodescope, &work)
    }
}

/// What the guest gets besides busybox, nodescope and the modules.
fn guest_files() -> Vec<(&'static str, String)> {
    let config = super::guest_conf::guest_config()
        + "ANDROID=1\nMKFS_ON_HOST=1\nOWN_PHASES=/arm64-phases.sh\n";
    let mut files = vec![
        ("init", include_str!("../guest/guest.sh").to_string()),
        (
            "arm64-phases.sh",
            include_str!("../guest/arm64.sh").to_string(),
        ),
        (
            "replay-names",
            super::settings::replay_script(Replay::Names, super::settings::NDIRS),
        ),
        (
            "replay-glob",
            super::settings::replay_script(Replay::Glob, super::settings::NDIRS),
        ),
        (
            "replay-variant",
            super::settings::replay_script(Replay::Names, super::settings::VARIANT_DIRS),
        ),
        ("replay-tail", super::accesses::tail_replay()),
        ("xattr-tail", super::accesses::xattr_tail()),
        ("rfc-probes.toml", super::settings::RFC_PROBES.to_string()),
        ("etc/vm-test.conf", config),
        ("etc/passwd", PASSWD.to_string()),
        ("data/system/packages.list", PACKAGES_LIST.to_string()),
    ];
    for (index, (_, _, first_dir)) in APP_READERS.iter().enumerate() {
        let path = ["replay-app-0", "replay-app-1"][index];
        files.push((path, app_replay(*first_dir)));
    }
    files
}

/// One cat per directory over APP_DIRS directories from `first_dir`, as the names replay has
/// them (an app's reader cannot write the shell's pid into /results).
fn app_replay(first_dir: u64) -> String {
    let mut script = String::from("#!/bin/sh\n");
    for dir in first_dir..first_dir + APP_DIRS {
        script.push_str("cat");
        for file in 0..super::settings::NFILES {
            script.push_str(&format!(" /mnt/t/d-{dir}/f-{file}"));
        }
        script.push_str(" > /dev/null\n");
    }
    script
}

/// Debian's arm64 busybox-static, downloaded (apt-get download: no arm64 package is installed)
/// and unpacked once under the cache.
fn arm64_busybox(cache: &Path) -> Result<PathBuf> {
    let tree = cache.join("busybox-static-arm64");
    let busybox = tree.join("bin/busybox");
    if busybox.exists() {
        return Ok(busybox);
    }
    let debs = cache.join("debs");
    fs::create_dir_all(&debs)?;
    eprintln!("vm-test: downloading busybox-static:arm64 (the arm64 guest's shell and tools)");
    util::run(
        Command::new("apt-get")
            .args(["download", "-q", "busybox-static:arm64"])
            .current_dir(&debs),
    )
    .context("apt-get download busybox-static:arm64")?;
    let deb = fs::read_dir(&debs)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("busybox-static_") && n.ends_with("_arm64.deb"))
        })
        .context("apt-get download left no busybox-static arm64 .deb")?;
    let partial = cache.join("busybox-static-arm64.partial");
    let _ = fs::remove_dir_all(&partial);
    util::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&partial))?;
    let _ = fs::remove_dir_all(&tree);
    fs::rename(&partial, &tree).context("moving busybox-static:arm64 into place")?;
    let _ = fs::remove_file(&deb);
    Ok(busybox)
}

/// The arm64 busybox's own applet list, through qemu-aarch64-static (installed with the
/// arm64 toolchain).
fn busybox_applets(busybox: &Path) -> Result<String> {
    util::output(
        "qemu-aarch64-static",
        &[busybox.to_str().context("non-UTF-8 path")?, "--list"],
    )
    .context("qemu-aarch64-static busybox --list (cargo xtask setup installs qemu-user-static)")
}

/// The guest's F2FS disk, formatted here as the x86 guest formats its own.
fn format_f2fs(disk: &Path, work: &Path) -> Result<()> {
    qemu::sparse_file(disk, qemu::DISK_BYTES)?;
    let output = Command::new("mkfs.f2fs")
        .args(["-f", "-l", "vmtest"])
        .arg(disk)
        .output()
        .context("starting mkfs.f2fs (cargo xtask setup installs f2fs-tools)")?;
    fs::write(work.join("mkfs.txt"), &output.stdout)?;
    if !output.status.success() {
        bail!(
            "mkfs.f2fs {} failed: {}",
            disk.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Per app reader: its node reads in the stream (by uid, named from packages.list) equal
/// iostat's over its half of the phase, nothing else read, and the recording's report names
/// the same apps with the same counts.
fn check_apps(dir: &Path, nodescope: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) {
    let phase = match results::Phase::load(dir, "apps") {
        Ok(phase) => phase,
        Err(err) => return failures.push(format!("apps: {err:#}")),
    };
    lines.push(format!("  apps     {}", phase.summary()));
    let stream = match results::stream_reads_by_uid(dir, "stream_apps.jsonl") {
        Ok(found) => found,
        Err(err) => return failures.push(format!("apps: {err:#}")),
    };
    let iostat = |label: &str| {
        fs::read_to_string(dir.join(format!("iostat_apps_{label}.txt")))
            .ok()
            .and_then(|t| results::fs_node_reads(&t))
    };
    let (before, mid, after) = (iostat("before"), iostat("mid"), iostat("after"));
    let halves = [
        mid.zip(before).map(|(m, b)| m - b),
        after.zip(mid).map(|(a, m)| a - m),
    ];
    let report = report_apps(dir, nodescope).unwrap_or_else(|err| {
        failures.push(format!("apps: report: {err:#}"));
        BTreeMap::new()
    });
    for ((uid, name, _), iostat) in APP_READERS.iter().zip(halves) {
        let (app, reads) = stream.get(uid).cloned().unwrap_or_default();
        let reported = report.get(*name).copied();
        lines.push(format!(
            "  apps     uid {uid}: stream app {app:?} reads {reads}, iostat {iostat:?}, report {reported:?}"
        ));
        if app != *name || iostat != Some(reads) || reads == 0 || reported != Some(reads) {
            failures.push(format!(
                "apps: uid {uid} must be {name:?} with iostat's {iostat:?} reads in the stream \
                 and the report: stream {app:?} {reads}, report {reported:?}"
            ));
        }
    }
    let others = phase.reads()
        - APP_READERS
            .iter()
            .map(|(uid, _, _)| stream.get(uid).map_or(0, |(_, r)| *r))
            .sum::<u64>();
    if others != 0 || phase.reads() != phase.iostat_delta || phase.rc != Some(0) {
        failures.push(format!(
            "apps: {others} reads by other uids, {} attributed vs iostat {}, stream rc {:?}",
            phase.reads(),
            phase.iostat_delta,
            phase.rc
        ));
    }
    let rc = fs::read_to_string(dir.join("record_apps.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        failures.push(format!("apps: record exit status {:?}", rc.trim()));
    }
}

/// App name -> node reads, from `nodescope report --json` of the guest's recording (which
/// carries the guest's packages.list).
fn report_apps(dir: &Path, nodescope: &Path) -> Result<BTreeMap<String, u64>> {
    let output = Command::new(nodescope)
        .args(["report", "--json"])
        .arg(dir.join("apps.nsr"))
        .output()
        .context("running nodescope report")?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let report = serde_json::from_str::<Value>(String::from_utf8_lossy(&output.stdout).trim())
        .context("nodescope report --json printed no JSON")?;
    let mut apps = BTreeMap::new();
    for row in report["apps"].as_array().into_iter().flatten() {
        let total = &row["total"];
        apps.insert(
            row["app"]["name"].as_str().unwrap_or("").to_string(),
            total["node_reads_demand"].as_u64().unwrap_or(0)
                + total["node_reads_readahead"].as_u64().unwrap_or(0),
        );
    }
    Ok(apps)
}

/// nodescope's restore (kprobe) and convert (kretprobe) events per nid, from the recording,
/// equal the hist trigger's hitcount per nid; `rfc=<ours>/<kernel>` (restores / hist hits).
fn check_rfc_nids(
    dir: &Path,
    nodescope: &Path,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) -> String {
    let hist = fs::read_to_string(dir.join("rfc_nid_hist.txt")).unwrap_or_default();
    let kernel = hist_by_nid(&hist);
    let hits = results::hist_hits(&hist);
    let ours = match report_nids(dir, nodescope) {
        Ok(ours) => ours,
        Err(err) => {
            failures.push(format!("rfc: {err:#}"));
            BTreeMap::new()
        }
    };
    let of = |kind: &str| -> BTreeMap<u32, u64> {
        ours.iter()
            .filter(|((k, _), _)| k == kind)
            .map(|((_, nid), count)| (*nid, *count))
            .collect()
    };
    let (restores, converts) = (of("restore"), of("convert"));
    let total = |counts: &BTreeMap<u32, u64>| counts.values().sum::<u64>();
    lines.push(format!(
        "  rfc      kprobe f2fs_get_node_page nid=arg1: {} events over {} nids, kretprobe {} over {}; \
         hist on x1: {} hits over {} nids (Hits: {hits:?}, dropped {:?})",
        total(&restores),
        restores.len(),
        total(&converts),
        converts.len(),
        total(&kernel),
        kernel.len(),
        hist_dropped(&hist)
    ));
    let differing = |ours: &BTreeMap<u32, u64>| {
        kernel
            .keys()
            .chain(ours.keys())
            .filter(|nid| kernel.get(nid) != ours.get(nid))
            .take(5)
            .map(|nid| {
                format!(
                    "nid {nid}: ours {:?} kernel {:?}",
                    ours.get(nid),
                    kernel.get(nid)
                )
            })
            .collect::<Vec<_>>()
    };
    for (kind, counts) in [("kprobe", &restores), ("kretprobe", &converts)] {
        let diff = differing(counts);
        if !diff.is_empty() || kernel.is_empty() {
            failures.push(format!(
                "rfc: {kind} per nid differs from the hist trigger: {diff:?}"
            ));
        }
    }
    if hits != Some(total(&kernel)) || hist_dropped(&hist) != Some(0) {
        failures.push(format!(
            "rfc: the hist trigger's Hits {hits:?} (dropped {:?}) != its entries' sum {}",
            hist_dropped(&hist),
            total(&kernel)
        ));
    }
    let rc = fs::read_to_string(dir.join("record_rfc.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        failures.push(format!("rfc: record exit status {:?}", rc.trim()));
    }
    format!("rfc={}/{}", total(&restores), total(&kernel))
}

/// (kind, nid) -> events, from `nodescope report --nids` of the guest's rfc recording.
fn report_nids(dir: &Path, nodescope: &Path) -> Result<BTreeMap<(String, u32), u64>> {
    let output = Command::new(nodescope)
        .args(["report", "--nids"])
        .arg(dir.join("rfc.nsr"))
        .output()
        .context("running nodescope report --nids")?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let mut counts = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [kind, nid, count] = fields[..] else {
            bail!("report --nids: bad line {line:?}");
        };
        counts.insert(
            (kind.to_string(), nid.parse().context("nid")?),
            count.parse().context("count")?,
        );
    }
    Ok(counts)
}

/// `{ nid:       1234 } hitcount:          2` lines of a hist trigger keyed on nid.
fn hist_by_nid(hist: &str) -> BTreeMap<u32, u64> {
    hist.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("{ nid:")?;
            let (nid, rest) = rest.split_once('}')?;
            let count = rest.trim().strip_prefix("hitcount:")?;
            Some((nid.trim().parse().ok()?, count.trim().parse().ok()?))
        })
        .collect()
}

/// "Dropped: N" from a hist trigger's totals.
fn hist_dropped(hist: &str) -> Option<u64> {
    hist.lines()
        .find_map(|line| line.trim().strip_prefix("Dropped:"))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_hist_keyed_on_nid() {
        let hist =
            "# trigger info: hist:keys=nid:vals=hitcount:sort=hitcount:size=8192 [active]\n\n\
                    { nid:          5 } hitcount:          1\n\
                    { nid:       1234 } hitcount:          3\n\n\
                    Totals:\n    Hits: 4\n    Entries: 2\n    Dropped: 0\n";
        assert_eq!(hist_by_nid(hist), BTreeMap::from([(5, 1), (1234, 3)]));
        assert_eq!(results::hist_hits(hist), Some(4));
        assert_eq!(hist_dropped(hist), Some(0));
    }

    #[test]
    fn app_replays_read_their_own_directories() {
        let script = app_replay(16);
        assert_eq!(script.lines().count() as u64, 1 + APP_DIRS);
        assert!(script
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("cat /mnt/t/d-16/f-0 "));
        assert!(script.ends_with("/mnt/t/d-31/f-63 > /dev/null\n"));
        assert!(!script.contains("/results"));
    }
}
