//! `cargo xtask android-image`: the simulated phone's file set written the way a phone's
//! /data holds it (sim/src/fileset/fbe.rs has the layout and the recipe): a guest of Debian's
//! 6.12 formats a disk with Android's mkfs features and mounts it, and android_data.c adds the
//! fscrypt v2 keys, sets the policies, writes every entry with its owner, mode and SELinux
//! label and lists each one's inode number. The image and that index go to the image cache;
//! the next run finds them by the recipe's fingerprint. Then the image's own bytes are read
//! back and checked (fbe::audit): ciphertext names, a context per encrypted inode, labels,
//! owners, the superblock's feature bits.
use std::{fs, path::Path, process::Command, time::Duration};

use anyhow::{bail, Context as _, Result};
use sim::fileset::{android::AndroidFileSet, fbe};

use super::{initramfs, kernel, qemu};
use crate::util;

pub mod apps;
mod guest;

use guest::guest_config;
pub(crate) use guest::WRITER;

/// The guest formats and writes a few hundred MB under TCG, encrypting it all.
const VM_TIMEOUT: Duration = Duration::from_secs(900);
/// Modules in Debian's kernels that a phone's has built in: fscrypt's AES-256-XTS and
/// AES-256-CTS templates (AES, CBC, HMAC and SHA-512 are built in) and the quota format of
/// the quota inodes (without it the mount cannot turn quotas on: "Cannot turn on quotas").
const EXTRA_MODULES: [&str; 3] = ["xts", "cts", "quota_v2"];
const KERNEL: &str = "6.12";

/// Build the image when the cache lacks it, audit it, then let two apps read their data on
/// it under the stream; the verdict line.
pub fn run() -> Result<String> {
    let cache = util::target_dir().join("vm-cache");
    let kernel = kernel::prepare(kernel_spec()?, &cache)?;
    let nodescope = util::build_nodescope()?;
    let (built, summary) = audited_image(&kernel, &nodescope, &cache)?;
    let guest = apps::Guest {
        arch: crate::Arch::X86_64,
        kernel: &kernel,
        nodescope: &nodescope,
        userland: initramfs::Userland::host()?,
    };
    let apps = apps::run(&built, &guest, &cache.join("run-android-apps"));
    let line = format!(
        "android-image {summary} {} {}",
        apps.as_deref().unwrap_or("apps=?"),
        if apps.is_ok() { "PASS" } else { "FAIL" }
    );
    println!("{line}");
    apps?;
    Ok(line)
}

/// The arm64 run's app phase on the encrypted tree: the same two apps in `guest` (the arm64
/// kernel, busybox and nodescope); the image is written first (by the x86_64 6.12 guest,
/// with the host's nodescope) when the cache lacks it. The verdict's part
/// `fbe_apps=<reads>/<iostat>,<reads>/<iostat>`.
pub fn apps_on(guest: &apps::Guest, host_nodescope: &Path, work: &Path) -> Result<String> {
    let cache = util::target_dir().join("vm-cache");
    let writer_kernel = kernel::prepare(kernel_spec()?, &cache)?;
    let (built, summary) = audited_image(&writer_kernel, host_nodescope, &cache)?;
    println!("  android-image {summary}");
    let apps = apps::run(&built, guest, work)?;
    Ok(format!("fbe_{apps}"))
}

/// The cached image, written first when missing, and its audit's summary; an image that does
/// not hold what its recipe says is an error.
pub(crate) fn audited_image(
    kernel: &kernel::Kernel,
    nodescope: &Path,
    cache: &Path,
) -> Result<(fbe::EncryptedImage, String)> {
    let set = AndroidFileSet::default();
    let built = fbe::EncryptedImage::of(&set);
    if built.is_built() {
        println!("android-image: reusing {}", built.image.display());
    } else {
        build(&set, &built, kernel, nodescope, cache)?;
    }
    let audit = fbe::audit(&built)?;
    for problem in &audit.problems {
        println!("  android-image problem: {problem}");
    }
    if !audit.passes() {
        println!("android-image {} FAIL", audit.summary());
        bail!(
            "the Android image {} does not hold what its recipe says (expected features {:#x})",
            built.image.display(),
            fbe::MKFS_FEATURE_BITS
        );
    }
    Ok((built, audit.summary()))
}

fn kernel_spec() -> Result<&'static kernel::KernelSpec> {
    kernel::KERNELS
        .iter()
        .find(|k| k.label == KERNEL)
        .context("no 6.12 kernel spec")
}

/// `cargo xtask top`: the simulated phone reads the encrypted image when there is one. Build
/// it when missing and possible (root); whatever happens, top still runs (on the plain image).
pub fn ensure_for_top() {
    let set = AndroidFileSet::default();
    if fbe::EncryptedImage::of(&set).is_built() {
        return;
    }
    if !util::is_root() {
        println!(
            "note: the simulator's phone runs on the plain image: writing the encrypted one \
             (`cargo xtask android-image`, about a minute in QEMU) needs root"
        );
        return;
    }
    println!("android-image: writing the simulated phone's /data in QEMU (about a minute)");
    if let Err(err) = run() {
        println!("warning: no encrypted Android image ({err:#}); the simulator uses the plain one");
    }
}

fn build(
    set: &AndroidFileSet,
    built: &fbe::EncryptedImage,
    kernel: &kernel::Kernel,
    nodescope: &Path,
    cache: &Path,
) -> Result<()> {
    let manifest = set.manifest();
    let recipe = fbe::recipe(&manifest, set.seed);
    let files = qemu::GuestFiles::fresh(cache.join("run-android-image"))?;
    let helper = super::uidswitch::build_c_helper(&files.work, "android_data", WRITER)?;
    let guest_files = [
        (
            "init",
            include_str!("../guest/android_image.sh").to_string(),
        ),
        ("etc/android.recipe", recipe),
        ("etc/android-image.conf", guest_config()),
    ];
    let overrides = initramfs::ModuleOverrides {
        roots: &EXTRA_MODULES,
        ..Default::default()
    };
    let archive =
        initramfs::build_with_modules(kernel, nodescope, &guest_files, &[&helper], overrides)?;
    fs::write(&files.initrd, archive)?;
    qemu::sparse_file(&files.disk, manifest.image_bytes)?;
    files.create_results_disk()?;
    let out = files.boot_and_unpack(
        "android-image",
        crate::Arch::X86_64,
        &kernel.vmlinuz,
        VM_TIMEOUT,
    )?;
    check_guest(&out)?;
    println!(
        "android-image: {}",
        fs::read_to_string(out.join("android_data.txt"))?.trim()
    );
    store(&files.disk, &out.join("android.index"), built)?;
    files.remove_images();
    Ok(())
}

/// The guest's own account: no failure, the writer's exit status 0, an index.
fn check_guest(out: &Path) -> Result<()> {
    if let Ok(errors) = fs::read_to_string(out.join("guest_errors.txt")) {
        bail!("the guest failed: {} (in {})", errors.trim(), out.display());
    }
    let rc = fs::read_to_string(out.join("android_data.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        let said = fs::read_to_string(out.join("android_data.txt")).unwrap_or_default();
        bail!("android_data exited {:?}: {}", rc.trim(), said.trim());
    }
    Ok(())
}

/// Move the disk and the index into the image cache: a partial name first, so a run killed
/// halfway leaves nothing the next one would take for built; the index last (is_built).
fn store(disk: &Path, index: &Path, built: &fbe::EncryptedImage) -> Result<()> {
    let dir = built.image.parent().context("the image has no directory")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = built.image.with_extension("img.partial");
    if fs::rename(disk, &partial).is_err() {
        // Another filesystem: copy, keeping the 2 GiB image sparse.
        util::run(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(disk)
                .arg(&partial),
        )?;
    }
    fs::rename(&partial, &built.image)
        .with_context(|| format!("moving the image to {}", built.image.display()))?;
    let index_partial = built.index.with_extension("index.partial");
    fs::copy(index, &index_partial)
        .with_context(|| format!("copying the index to {}", index_partial.display()))?;
    fs::rename(&index_partial, &built.index)?;
    remove_older(dir, built);
    println!(
        "android-image: built {} and {}",
        built.image.display(),
        built.index.display()
    );
    Ok(())
}

/// Images of older recipes (2 GiB sparse each, about 650 MB written) are not used again.
fn remove_older(dir: &Path, built: &fbe::EncryptedImage) {
    let Some(stem) = built.image.file_stem().and_then(|s| s.to_str()) else {
        return;
    };
    let Some((prefix, _)) = stem.rsplit_once('-') else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let older = name.starts_with(&format!("{prefix}-"))
            && path != built.image
            && path != built.index
            && (name.ends_with(".img") || name.ends_with(".index"));
        if older && fs::remove_file(&path).is_ok() {
            println!(
                "android-image: removed {} (an older recipe's)",
                path.display()
            );
        }
    }
}
