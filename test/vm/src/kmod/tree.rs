//! Debian's headers, kbuild and source for the kernel the VM test boots, unpacked once into
//! target/vm-cache/kmod-<release>/ (usr/src/linux-headers-*, usr/lib/linux-kbuild-*, and from
//! the source tarball only what a module build and checkpatch need). `apt-get install` would
//! pull in the kernel image, initramfs-tools and a systemd upgrade: download and unpack instead.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use crate::{
    kernel::{self, Kernel},
    util,
};

/// What the tarball gives besides fs/f2fs/*: checkpatch and its data, extract-vmlinux (6.1's
/// BTF), the sysfs ABI doc (patches that add a sysfs node document it there) and the two
/// headers f2fs owns (so a patch can change them; -common's copies equal these).
const SOURCE_FILES: [&str; 8] = [
    "fs/f2fs/*",
    "scripts/checkpatch.pl",
    "scripts/spelling.txt",
    "scripts/const_structs.checkpatch",
    "scripts/extract-vmlinux",
    "Documentation/ABI/testing/sysfs-fs-f2fs",
    "include/trace/events/f2fs.h",
    "include/linux/f2fs_fs.h",
];

/// One kernel's unpacked build tree.
pub struct Tree {
    /// The VM test's label: 6.1 or 6.12.
    pub label: String,
    /// e.g. `6.12.117+deb12-amd64`.
    pub release: String,
    /// The Debian version of the headers and the source (equal), e.g. `6.12.117-1~deb12u1`.
    pub version: String,
    /// `make -C` here.
    pub headers: PathBuf,
    /// The extracted linux-source-<major.minor> dir (only [`SOURCE_FILES`]).
    pub source: PathBuf,
    /// Debian's own f2fs.ko's vermagic, which ours must have too.
    pub vermagic: String,
    /// kbuild ships no resolve_btfids (6.1): make gets `RESOLVE_BTFIDS=true`.
    pub(super) no_resolve_btfids: bool,
    /// target/vm-cache.
    pub(super) cache: PathBuf,
}

/// The packages a module build needs, as the headers' Depends name them.
#[derive(Debug, PartialEq, Eq)]
struct Packages {
    headers: String,
    /// The headers' Debian version; the others must have it too.
    version: String,
    common: String,
    kbuild: String,
    source: String,
}

/// Resolve, download and unpack (each once) the tree for the kernel `label` boots in the VM.
pub fn prepare(label: &str) -> Result<Tree> {
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == label)
        .with_context(|| format!("unknown kernel {label:?}: use 6.1 or 6.12"))?;
    let cache = util::target_dir().join("vm-cache");
    fs::create_dir_all(&cache)?;
    // The image itself: its vermagic is the one to match, and 6.1's BTF comes from its vmlinuz.
    let image = kernel::prepare(spec, &cache)?;
    let packages = resolve(&image.release)?;
    let root = cache.join(format!("kmod-{}", image.release));
    let marker = root.join(".complete");
    // The marker holds the version: a new upload with the same ABI name gets a fresh tree.
    if fs::read_to_string(&marker).ok().as_deref() != Some(packages.version.as_str()) {
        unpack_all(&packages, &image, &root, &cache.join("debs"))?;
    }
    let headers = root.join("usr/src").join(&packages.headers);
    rewrite_makefile(&headers.join("Makefile"), &root)?;
    Ok(Tree {
        label: label.to_string(),
        vermagic: debian_vermagic(&image)?,
        no_resolve_btfids: !headers
            .join("tools/bpf/resolve_btfids/resolve_btfids")
            .exists(),
        source: root.join("usr/src").join(&packages.source),
        headers,
        release: image.release,
        version: packages.version,
        cache,
    })
}

/// The headers' package, its -common and kbuild, and the source at the headers' version.
fn resolve(release: &str) -> Result<Packages> {
    let headers = format!("linux-headers-{release}");
    let packages = packages_from_show(release, &apt_show(&headers)?)?;
    let pinned = format!("{}={}", packages.source, packages.version);
    if util::output("apt-cache", &["show", &pinned]).is_none() {
        let known = util::output("apt-cache", &["show", &packages.source])
            .map(|text| field_values(&text, "Version").join(", "))
            .unwrap_or_default();
        bail!(
            "{} has no version {} (the version of {headers}, which the module must be built \
             against); apt knows: [{known}]. Run `apt-get update`, or the mirror has moved on",
            packages.source,
            packages.version
        );
    }
    Ok(packages)
}

/// `apt-cache show`, with one `apt-get update` when apt does not know the package (yet).
fn apt_show(package: &str) -> Result<String> {
    if let Some(text) = util::output("apt-cache", &["show", package]) {
        return Ok(text);
    }
    eprintln!("kmod: apt-cache does not know {package}; running apt-get update");
    util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    util::output("apt-cache", &["show", package])
        .with_context(|| format!("apt-cache show {package}: apt does not know it"))
}

/// From `apt-cache show linux-headers-<release>` (its first stanza, the candidate): the
/// version, the -common and linux-kbuild dependencies; the source is linux-source-<major.minor>.
fn packages_from_show(release: &str, show: &str) -> Result<Packages> {
    let stanza = show.split("\n\n").next().unwrap_or_default();
    let version = field_values(stanza, "Version")
        .into_iter()
        .next()
        .context("apt-cache show: no Version")?;
    let depends = field_values(stanza, "Depends").join(", ");
    // "a (= 1), b | c, d": first alternatives, without version constraints.
    let names: Vec<&str> = depends
        .split(',')
        .filter_map(|d| d.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .collect();
    let find = |pick: &dyn Fn(&str) -> bool, what: &str| {
        names
            .iter()
            .find(|n| pick(n))
            .map(|n| n.to_string())
            .with_context(|| format!("linux-headers-{release} depends on no {what}: {depends}"))
    };
    let common = find(
        &|n| n.starts_with("linux-headers-") && n.ends_with("-common"),
        "-common package",
    )?;
    let kbuild = find(&|n| n.starts_with("linux-kbuild-"), "linux-kbuild package")?;
    Ok(Packages {
        headers: format!("linux-headers-{release}"),
        version,
        common,
        kbuild,
        source: format!("linux-source-{}", major_minor(release)?),
    })
}

/// `6.12.117+deb12-amd64` -> `6.12`; `6.1.0-57-amd64` -> `6.1`.
fn major_minor(release: &str) -> Result<String> {
    let mut parts = release.split(['.', '-', '+']);
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) if [major, minor].iter().all(|p| p.parse::<u32>().is_ok()) => {
            Ok(format!("{major}.{minor}"))
        }
        _ => bail!("cannot read a kernel version from release {release:?}"),
    }
}

/// Every value of `field` in Debian control text (`Field: value`).
fn field_values(text: &str, field: &str) -> Vec<String> {
    let prefix = format!("{field}:");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_string())
        .collect()
}

/// Download the four packages, unpack them into `root` (through a .partial dir renamed at the
/// end), fix what the unpacked place needs, then drop the .debs (the tree is the cache).
fn unpack_all(packages: &Packages, image: &Kernel, root: &Path, debs: &Path) -> Result<()> {
    let wanted = [
        (&packages.headers, "the headers the module is built against"),
        (
            &packages.common,
            "the headers' common part: Makefiles, include/",
        ),
        (
            &packages.kbuild,
            "kbuild's host programs: modpost, fixdep, objtool",
        ),
        (&packages.source, "the F2FS source the fixture patches"),
    ];
    let mut downloaded = Vec::new();
    for (package, why) in wanted {
        let announce = format!("kmod: downloading {package} {} ({why})", packages.version);
        downloaded.push(kernel::download_deb(
            package,
            Some(&packages.version),
            debs,
            &announce,
        )?);
    }
    let partial = PathBuf::from(format!("{}.partial", root.display()));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial)?;
    let (source_deb, header_debs) = downloaded.split_last().context("no packages")?;
    for deb in header_debs {
        eprintln!("kmod: unpacking {}", deb.display());
        util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&partial))?;
    }
    extract_source(source_deb, &packages.source, &partial)?;
    let headers = partial.join("usr/src").join(&packages.headers);
    if !headers.join("vmlinux").exists() {
        btf_vmlinux(
            image,
            &partial.join("usr/src").join(&packages.source),
            &headers,
        )?;
    }
    fs::write(partial.join(".complete"), &packages.version)?;
    let _ = fs::remove_dir_all(root);
    fs::rename(&partial, root).context("moving the unpacked kmod tree into place")?;
    for deb in &downloaded {
        let _ = fs::remove_file(deb);
    }
    Ok(())
}

/// Only [`SOURCE_FILES`] of the source tarball (the whole tree would be 1.5 GB), into
/// `<partial>/usr/src/<source>/`.
fn extract_source(deb: &Path, source: &str, partial: &Path) -> Result<()> {
    let scratch = partial.join(".source-deb");
    util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&scratch))?;
    let tarball = scratch.join(format!("usr/src/{source}.tar.xz"));
    eprintln!(
        "kmod: extracting fs/f2fs and checkpatch from {} (about 15 s)",
        tarball.display()
    );
    let dest = partial.join("usr/src");
    fs::create_dir_all(&dest)?;
    util::run(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dest)
            .arg("--wildcards")
            .args(SOURCE_FILES.iter().map(|f| format!("{source}/{f}"))),
    )?;
    fs::remove_dir_all(&scratch).context("removing the unpacked source .deb")
}

/// The headers' Makefile includes the -common one by its installed path, /usr/src/...: point
/// it at the unpacked place (`root`, where the tree ends up) instead. Run on every prepare,
/// so that a moved target/ still builds.
fn rewrite_makefile(makefile: &Path, root: &Path) -> Result<()> {
    let text =
        fs::read_to_string(makefile).with_context(|| format!("reading {}", makefile.display()))?;
    let new = rewritten_makefile(&text, root)?;
    if new != text {
        fs::write(makefile, new).with_context(|| format!("writing {}", makefile.display()))?;
    }
    Ok(())
}

/// `include <anything>/usr/src/<rest>` -> `include <root>/usr/src/<rest>`.
fn rewritten_makefile(text: &str, root: &Path) -> Result<String> {
    let mut out = String::new();
    let mut rewritten = 0;
    for line in text.lines() {
        let rest = line
            .strip_prefix("include ")
            .and_then(|path| path.rfind("/usr/src/").map(|at| &path[at..]));
        match rest {
            Some(rest) => {
                out.push_str(&format!("include {}{rest}\n", root.display()));
                rewritten += 1;
            }
            None => out.push_str(&format!("{line}\n")),
        }
    }
    if rewritten == 0 {
        bail!("the headers' Makefile includes nothing under /usr/src: {text:?}");
    }
    Ok(out)
}

/// 6.1's headers have no vmlinux, so kbuild skips the module's BTF: give it one with only
/// .BTF and .BTF_ids, from the image's vmlinuz (pahole -J --btf_base reads just those).
fn btf_vmlinux(image: &Kernel, source: &Path, headers: &Path) -> Result<()> {
    eprintln!(
        "kmod: the headers have no vmlinux: extracting BTF from {}",
        image.vmlinuz.display()
    );
    let full = headers.join("vmlinux.full");
    let out = Command::new(source.join("scripts/extract-vmlinux"))
        .arg(&image.vmlinuz)
        .output()
        .context("starting scripts/extract-vmlinux")?;
    if !out.status.success() || out.stdout.is_empty() {
        bail!(
            "extract-vmlinux {} failed: {}",
            image.vmlinuz.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fs::write(&full, &out.stdout)?;
    util::run(
        Command::new("objcopy")
            .args(["-j", ".BTF", "-j", ".BTF_ids"])
            .arg(&full)
            .arg(headers.join("vmlinux")),
    )?;
    fs::remove_file(&full).context("removing the extracted vmlinux")
}

/// `modinfo -F vermagic` of Debian's f2fs.ko(.xz) in the unpacked image (modinfo reads .xz).
fn debian_vermagic(image: &Kernel) -> Result<String> {
    let dir = image.modules.join("kernel/fs/f2fs");
    let module = fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("f2fs.ko"))
        .with_context(|| format!("no f2fs.ko in {}", dir.display()))?;
    vermagic(&module)
}

/// `modinfo -F vermagic` (it reads .ko.xz too).
pub(super) fn vermagic(module: &Path) -> Result<String> {
    let path = module.to_str().context("module path is not UTF-8")?;
    util::output("modinfo", &["-F", "vermagic", path])
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .with_context(|| {
            format!("modinfo -F vermagic {path} failed (no modinfo? `cargo xtask setup`)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `apt-cache show linux-headers-6.12.117+deb12-amd64` on bookworm (two versions, the
    /// candidate first), shortened.
    const SHOW_612: &str = "Package: linux-headers-6.12.117+deb12-amd64
Source: linux-6.12
Version: 6.12.117-1~deb12u1
Installed-Size: 16385
Depends: linux-base (>= 4.12~), linux-headers-6.12.117+deb12-common (= 6.12.117-1~deb12u1), linux-image-6.12.117+deb12-amd64 (= 6.12.117-1~deb12u1) | linux-image-6.12.117+deb12-amd64-unsigned (= 6.12.117-1~deb12u1), linux-kbuild-6.12.117+deb12, gcc-12
Description-en: Header files for Linux 6.12.117+deb12-amd64

Package: linux-headers-6.12.117+deb12-amd64
Version: 6.12.117-0~old
Depends: linux-headers-6.12.117+deb12-common (= 6.12.117-0~old), linux-kbuild-6.12.117+deb12
";

    const SHOW_61: &str = "Package: linux-headers-6.1.0-57-amd64
Source: linux
Version: 6.1.192-3
Depends: linux-headers-6.1.0-57-common (= 6.1.192-3), linux-kbuild-6.1 (>= 6.1.192-3), linux-compiler-gcc-12-x86
";

    #[test]
    fn derives_the_packages_from_the_headers_depends() {
        assert_eq!(
            packages_from_show("6.12.117+deb12-amd64", SHOW_612).unwrap(),
            Packages {
                headers: "linux-headers-6.12.117+deb12-amd64".into(),
                version: "6.12.117-1~deb12u1".into(),
                common: "linux-headers-6.12.117+deb12-common".into(),
                kbuild: "linux-kbuild-6.12.117+deb12".into(),
                source: "linux-source-6.12".into(),
            }
        );
        let old = packages_from_show("6.1.0-57-amd64", SHOW_61).unwrap();
        assert_eq!(
            (
                old.version.as_str(),
                old.common.as_str(),
                old.kbuild.as_str()
            ),
            (
                "6.1.192-3",
                "linux-headers-6.1.0-57-common",
                "linux-kbuild-6.1"
            )
        );
        assert_eq!(old.source, "linux-source-6.1");
    }

    #[test]
    fn headers_without_common_or_kbuild_are_an_error() {
        let show = "Package: linux-headers-6.1.0-57-amd64\nVersion: 6.1.192-3\nDepends: gcc-12\n";
        assert!(packages_from_show("6.1.0-57-amd64", show).is_err());
        assert!(major_minor("amd64").is_err());
    }

    #[test]
    fn makefile_include_points_at_the_unpacked_tree() {
        let text = "include /usr/src/linux-headers-6.12.117+deb12-common/Makefile\n";
        let root = Path::new("/work/target/vm-cache/kmod-6.12.117+deb12-amd64");
        assert_eq!(
            rewritten_makefile(text, root).unwrap(),
            "include /work/target/vm-cache/kmod-6.12.117+deb12-amd64/usr/src/\
             linux-headers-6.12.117+deb12-common/Makefile\n"
        );
        // Idempotent, and a tree that moved is pointed at its new place.
        let once = rewritten_makefile(text, root).unwrap();
        assert_eq!(rewritten_makefile(&once, root).unwrap(), once);
        let moved = rewritten_makefile(&once, Path::new("/elsewhere")).unwrap();
        assert_eq!(
            moved,
            "include /elsewhere/usr/src/linux-headers-6.12.117+deb12-common/Makefile\n"
        );
        assert!(rewritten_makefile("all:\n\ttrue\n", root).is_err());
    }
}
