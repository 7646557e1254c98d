//! Attribution on encrypted names: two of the simulated phone's apps read their own data on
//! the cached Android image, each as its uid (guest: android_apps.sh), while `nodescope stream`
//! runs; each app's node reads in the stream, named from packages.list, must equal iostat's
//! over its turn. The image is a copy: the mount writes checkpoints, the cache stays as built.
use std::{fs, path::Path, process::Command, time::Duration};

use anyhow::{bail, Context as _, Result};
use sim::{
    fileset::{android, fbe},
    scenario::android::packages_list,
};

use super::super::{initramfs, kernel::Kernel, qemu, results};
use crate::{util, Arch};

/// The readers: indexes into android::APP_PACKAGES (a messenger, a short-video app).
const READERS: [usize; 2] = [0, 3];
/// TCG emulating arm64 is slower than emulating x86_64.
const VM_TIMEOUT: Duration = Duration::from_secs(600);
const VM_TIMEOUT_ARM64: Duration = Duration::from_secs(1200);
/// The image's modules (android_image::EXTRA_MODULES) and what Debian's arm64 kernel has as
/// modules where the x86 one has them built in (skipped there): ECB, under XTS, and SHA-512,
/// under the HKDF of v2 keys. The guest has no modprobe to fetch them on demand.
const MODULES: [&str; 5] = ["xts", "cts", "quota_v2", "ecb", "sha512_generic"];

/// The guest the apps run in: the image writer's x86_64 6.12, or the arm64 run's 6.1.
pub struct Guest<'a> {
    pub arch: Arch,
    pub kernel: &'a Kernel,
    /// nodescope built for `arch` (static for arm64).
    pub nodescope: &'a Path,
    pub userland: initramfs::Userland,
}

/// Boot `guest` with a copy of `built`, run the readers, check them; the verdict line's part
/// `apps=<reads>/<iostat>,<reads>/<iostat>`.
pub fn run(built: &fbe::EncryptedImage, guest: &Guest, work: &Path) -> Result<String> {
    let files = qemu::GuestFiles::fresh(work.to_path_buf())?;
    util::run(
        Command::new("cp")
            .arg("--sparse=always")
            .arg(&built.image)
            .arg(&files.disk),
    )
    .context("copying the Android image for the guest")?;
    files.create_results_disk()?;
    let helper = super::super::uidswitch::build_c_helper_for(
        guest.arch,
        &files.work,
        "android_data",
        super::guest::WRITER,
    )?;
    let guest_files = guest_files();
    let guest_files: Vec<(&str, String)> = guest_files
        .iter()
        .map(|(path, text)| (path.as_str(), text.clone()))
        .collect();
    let overrides = initramfs::ModuleOverrides {
        roots: &MODULES,
        ..Default::default()
    };
    let archive = initramfs::build_for(
        &guest.userland,
        guest.kernel,
        guest.nodescope,
        &guest_files,
        &[],
        &[&helper],
        overrides,
    )?;
    fs::write(&files.initrd, archive)?;
    let (label, timeout) = match guest.arch {
        Arch::X86_64 => ("android-apps", VM_TIMEOUT),
        Arch::Aarch64 => ("android-apps-arm64", VM_TIMEOUT_ARM64),
    };
    let out = files.boot_and_unpack(label, guest.arch, &guest.kernel.vmlinuz, timeout)?;
    let verdict = check_readers(&out, label)?;
    files.remove_images();
    Ok(verdict)
}

/// The init script, the keys, the config, the readers' accounts, packages.list and one
/// script per reader.
fn guest_files() -> Vec<(String, String)> {
    let set = android::AndroidFileSet::default();
    let recipe = fbe::recipe(&set.manifest(), set.seed);
    let keys: String = recipe
        .lines()
        .filter(|l| l.starts_with("key "))
        .map(|l| format!("{l}\n"))
        .collect();
    let config =
        super::guest::guest_config() + &format!("ANDROID=1\nAPP_USERS=\"{}\"\n", users().join(" "));
    let mut files = vec![
        (
            "init".to_string(),
            include_str!("../../guest/android_apps.sh").to_string(),
        ),
        ("etc/keys.recipe".to_string(), keys),
        ("etc/android-image.conf".to_string(), config),
        ("etc/passwd".to_string(), passwd()),
        ("data/system/packages.list".to_string(), packages_list()),
    ];
    for (n, &app) in READERS.iter().enumerate() {
        files.push((format!("read-app-{n}"), read_script(app)));
    }
    files
}

fn users() -> Vec<String> {
    READERS
        .iter()
        .map(|&app| format!("u0_a{}", android::app_uid(app) - 10_000))
        .collect()
}

/// busybox su finds the readers here (Android's names: u<user>_a<app id>).
fn passwd() -> String {
    let mut text = String::from("root:x:0:0:root:/:/bin/sh\n");
    for (&app, user) in READERS.iter().zip(users()) {
        let uid = android::app_uid(app);
        text.push_str(&format!("{user}:x:{uid}:{uid}::/:/bin/sh\n"));
    }
    text
}

/// The app's files and shared preferences, by their plaintext names (the guest holds the keys).
fn read_script(app: usize) -> String {
    let data = format!("/mnt/{}", android::app_data_dir(android::APP_PACKAGES[app]));
    format!("#!/bin/sh\ncat {data}files/* {data}shared_prefs/* > /dev/null\n")
}

/// Each reader's node reads in the stream (its uid's rows, named as its package) against
/// iostat's over its turn.
fn check_readers(out: &Path, label: &str) -> Result<String> {
    if let Ok(errors) = fs::read_to_string(out.join("guest_errors.txt")) {
        bail!("the guest failed: {} (in {})", errors.trim(), out.display());
    }
    let iostat = |name: &str| -> Result<u64> {
        let path = out.join(format!("iostat_{name}.txt"));
        let text = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
        results::fs_node_reads(&text).with_context(|| format!("no fs node reads in {name}"))
    };
    let stream = super::super::results::stream_reads_by_uid(out, "stream_apps.jsonl")?;
    let mut before = iostat("apps_before")?;
    let mut parts = Vec::new();
    let mut problems = Vec::new();
    for (n, &app) in READERS.iter().enumerate() {
        let after = iostat(&format!("apps_{n}"))?;
        let (uid, package) = (android::app_uid(app), android::APP_PACKAGES[app]);
        let (name, reads) = stream.get(&u64::from(uid)).cloned().unwrap_or_default();
        let expected = after - before;
        println!("  {label} uid {uid}: stream app {name:?} reads {reads}, iostat {expected}");
        if reads != expected || reads == 0 || name != package {
            problems.push(format!(
                "uid {uid} must be {package:?} with iostat's {expected} node reads: the stream \
                 has {name:?} with {reads}"
            ));
        }
        parts.push(format!("{reads}/{expected}"));
        before = after;
    }
    let others: Vec<u64> = stream
        .iter()
        .filter(|(uid, (_, reads))| {
            *reads > 0
                && !READERS
                    .iter()
                    .any(|&a| u64::from(android::app_uid(a)) == **uid)
        })
        .map(|(uid, _)| *uid)
        .collect();
    if !others.is_empty() {
        problems.push(format!("node reads under other uids too: {others:?}"));
    }
    let rc = fs::read_to_string(out.join("stream_apps.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        problems.push(format!("the stream's exit status {:?}", rc.trim()));
    }
    if !problems.is_empty() {
        bail!("{label}: {}", problems.join("; "));
    }
    Ok(format!("apps={}", parts.join(",")))
}
