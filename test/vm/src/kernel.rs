//! Debian's kernel packages, downloaded with apt and unpacked with dpkg-deb: nothing is
//! installed on the host. Both the .deb and the unpacked tree are cached between runs.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use crate::util;

/// A kernel the VM test knows: its label and the meta package that names the exact one.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    pub label: &'static str,
    meta: &'static str,
    /// The exact package's version must start with this (guards a meta package that moved on).
    version_prefix: &'static str,
}

pub const KERNELS: [KernelSpec; 2] = [
    KernelSpec {
        label: "6.1",
        meta: "linux-image-amd64",
        version_prefix: "6.1.",
    },
    KernelSpec {
        label: "6.12",
        meta: "linux-image-6.12-amd64",
        version_prefix: "6.12.",
    },
];

/// Debian's arm64 kernel (not the cloud flavour, which has no f2fs), for
/// `vm-test --arch arm64`: apt resolves it through the arm64 dpkg architecture.
pub const ARM64_KERNELS: [KernelSpec; 1] = [KernelSpec {
    label: "6.1",
    meta: "linux-image-arm64:arm64",
    version_prefix: "6.1.",
}];

/// An unpacked kernel: its release string and where its image and modules are.
pub struct Kernel {
    pub release: String,
    pub vmlinuz: PathBuf,
    pub modules: PathBuf,
}

/// Resolve, download (once) and unpack (once) the kernel of `spec` under `cache`.
pub fn prepare(spec: &KernelSpec, cache: &Path) -> Result<Kernel> {
    let package = resolve(spec)?;
    let release = package.trim_start_matches("linux-image-").to_string();
    let tree = cache.join(format!("kernel-{release}"));
    if !tree.join(".complete").exists() {
        let deb = download(&package, &cache.join("debs"))?;
        unpack(&deb, &tree)?;
        // The unpacked tree is the cache; the .deb would only double the kernel's disk use.
        let _ = fs::remove_file(&deb);
    }
    let kernel = Kernel {
        vmlinuz: tree.join(format!("boot/vmlinuz-{release}")),
        modules: tree.join(format!("lib/modules/{release}")),
        release,
    };
    if !kernel.vmlinuz.exists() || !kernel.modules.is_dir() {
        bail!("{} has no kernel image or modules", tree.display());
    }
    Ok(kernel)
}

/// `linux-image-amd64` -> `linux-image-6.1.0-57-amd64` (the ABI number moves: never hard-coded).
fn resolve(spec: &KernelSpec) -> Result<String> {
    if let Some(found) = depends_of(spec.meta) {
        return check_version(spec, found);
    }
    eprintln!(
        "vm-test: apt-cache does not know {}; running apt-get update",
        spec.meta
    );
    util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    let found = depends_of(spec.meta)
        .with_context(|| format!("cannot resolve the kernel package from {}", spec.meta))?;
    check_version(spec, found)
}

fn depends_of(meta: &str) -> Option<String> {
    let text = util::output("apt-cache", &["depends", meta])?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .find(|p| {
            p.starts_with("linux-image-") && p.as_bytes().get(12).is_some_and(u8::is_ascii_digit)
        })
        // A foreign architecture's dependency is spelled `linux-image-6.1.0-57-arm64:arm64`.
        .map(|p| p.split(':').next().unwrap_or(p).to_string())
}

fn check_version(spec: &KernelSpec, package: String) -> Result<String> {
    let version = package.trim_start_matches("linux-image-");
    if !version.starts_with(spec.version_prefix) {
        bail!(
            "{} now points at {package}, not a {} kernel",
            spec.meta,
            spec.label
        );
    }
    Ok(package)
}

/// A .deb of `package` in `debs` (of `version` when given), as `apt-get download` names it:
/// `<package>_<version>_<arch>.deb`, an epoch's colon spelled `%3a`.
fn cached_deb(package: &str, version: Option<&str>, debs: &Path) -> Option<PathBuf> {
    let prefix = match version {
        Some(version) => format!("{package}_{}_", version.replace(':', "%3a")),
        None => format!("{package}_"),
    };
    fs::read_dir(debs)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
}

fn download(package: &str, debs: &Path) -> Result<PathBuf> {
    download_deb(
        package,
        None,
        debs,
        &format!("vm-test: downloading {package}"),
    )
}

/// `apt-get download` of `package` (exactly `version` when given) into `debs`, unless a .deb
/// of it is there already; `announce` is printed before a download. Runs `apt-get update` once
/// when apt does not know the package (yet).
pub(crate) fn download_deb(
    package: &str,
    version: Option<&str>,
    debs: &Path,
    announce: &str,
) -> Result<PathBuf> {
    if let Some(deb) = cached_deb(package, version, debs) {
        return Ok(deb);
    }
    fs::create_dir_all(debs)?;
    eprintln!("{announce}");
    let wanted = match version {
        Some(version) => format!("{package}={version}"),
        None => package.to_string(),
    };
    let fetch = || {
        util::run(
            Command::new("apt-get")
                .args(["download", "-q", &wanted])
                .current_dir(debs),
        )
    };
    if fetch().is_err() {
        util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
        fetch().with_context(|| format!("apt-get download {wanted}"))?;
    }
    cached_deb(package, version, debs)
        .with_context(|| format!("apt-get download left no {wanted} .deb"))
}

fn unpack(deb: &Path, tree: &Path) -> Result<()> {
    eprintln!("vm-test: unpacking {}", deb.display());
    let partial = tree.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial)?;
    util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&partial))?;
    fs::write(partial.join(".complete"), b"")?;
    let _ = fs::remove_dir_all(tree);
    fs::rename(&partial, tree).context("moving the unpacked kernel into place")
}
