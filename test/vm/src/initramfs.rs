//! The guest's initramfs: busybox, mkfs.f2fs, nodescope (with the libraries ldd lists; a
//! foreign-arch guest gets its static nodescope alone), the f2fs module closure and the guest
//! script.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use super::{
    kernel::Kernel,
    newc::{Archive, Entry},
};
use crate::util;

/// Modules the guest needs; their dependencies are added from each module's .modinfo.
const ROOT_MODULES: [&str; 4] = ["virtio_pci", "virtio_blk", "f2fs", "crc32"];

/// The guest's programs: a static busybox with its applet list, and whether the guest runs
/// this host's own (dynamic) binaries.
pub struct Userland {
    pub busybox: PathBuf,
    /// What `busybox --list` printed for that busybox.
    pub applets: String,
    /// The host's architecture: nodescope and mkfs.f2fs come with the libraries ldd lists. A
    /// foreign guest (arm64) gets the static nodescope alone; the host formats its F2FS disk.
    pub host_arch: bool,
}

impl Userland {
    /// This host's busybox-static, mkfs.f2fs and dynamic nodescope.
    pub fn host() -> Result<Userland> {
        let busybox = which("busybox")?;
        let ldd = util::output("ldd", &[busybox.to_str().unwrap_or_default()]).unwrap_or_default();
        if ldd.contains("=>") {
            bail!(
                "{} is dynamically linked: install busybox-static",
                busybox.display()
            );
        }
        let applets = util::output(busybox.to_str().unwrap_or_default(), &["--list"])
            .context("busybox --list")?;
        Ok(Userland {
            busybox,
            applets,
            host_arch: true,
        })
    }
}

/// Modules in the guest that are not Debian's (`cargo xtask kmod` builds them).
#[derive(Clone, Copy, Default)]
pub struct ModuleOverrides<'a> {
    /// (module name, .ko or .ko.xz): loaded instead of Debian's module of that name, in its
    /// place in lib/modules/load-order; its own .modinfo names its dependencies.
    pub replace: &'a [(&'a str, &'a Path)],
    /// (file name ending in .ko, .ko or .ko.xz): put at lib/modules/<file name> but not in the
    /// load order, for a guest that swaps modules (rmmod f2fs; insmod /lib/modules/f2fs-stock.ko).
    pub extra: &'a [(&'a str, &'a Path)],
    /// More modules to load, with their dependencies (builtin ones are skipped): what a phase
    /// needs beyond ROOT_MODULES (fscrypt's cipher templates, say).
    pub roots: &'a [&'a str],
}

/// An initramfs for a guest that loads several F2FS modules in turn (`modules`: the name each
/// has in /lib/modules, and its file): Debian's f2fs.ko's place in the load order goes to the
/// first, which the guest skips, loading each `f2fs-<name>.ko` itself.
pub fn build_with_f2fs_modules(
    kernel: &Kernel,
    nodescope: &Path,
    guest_files: &[(&str, String)],
    helpers: &[&Path],
    modules: &[(String, &Path)],
) -> Result<Vec<u8>> {
    let extra: Vec<(&str, &Path)> = modules.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let first = extra.first().context("no module to load")?.1;
    let overrides = ModuleOverrides {
        replace: &[("f2fs", first)],
        extra: &extra,
        ..Default::default()
    };
    build_with_modules(kernel, nodescope, guest_files, helpers, overrides)
}

/// Build the archive. `guest_files` are (path in the guest, contents) for scripts and settings.
/// `helpers`: programs built for the test, each at bin/<its file name> with its `ldd` closure.
/// `modules`: some of Debian's replaced by ours, extra ones beside them, more to load.
pub fn build_with_modules(
    kernel: &Kernel,
    nodescope: &Path,
    guest_files: &[(&str, String)],
    helpers: &[&Path],
    modules: ModuleOverrides,
) -> Result<Vec<u8>> {
    let userland = Userland::host()?;
    let mut archive = archive_for(&userland, kernel, nodescope, guest_files, &[], modules)?;
    add_helpers(&mut archive, helpers, true)?;
    Ok(archive.to_bytes())
}

/// Each helper at bin/<its file name>: with its `ldd` closure for the host's architecture,
/// alone (static) for a foreign one.
fn add_helpers(archive: &mut Archive, helpers: &[&Path], host_arch: bool) -> Result<()> {
    for helper in helpers {
        let name = helper
            .file_name()
            .with_context(|| format!("{} has no file name", helper.display()))?;
        let at = format!("bin/{}", name.to_string_lossy());
        if !host_arch {
            archive.add(&at, read_file(helper, true)?);
            continue;
        }
        add_binary(archive, helper, &at)?;
        // tmux will not start without a UTF-8 locale ("need UTF-8 locale (LC_CTYPE)"; it
        // tries C.UTF-8 itself, which glibc reads from Debian's libc-bin directory) nor
        // without the terminfo entry of its client's TERM (Debian's ncurses-base).
        if name == "tmux" {
            add_tree(archive, Path::new(C_UTF8_LOCALE))?;
            add_tree(archive, Path::new(TERMINFO))?;
        }
    }
    Ok(())
}

/// [`build`] with the given userland, plus host programs found by name (e.g. `bpftrace`,
/// `bpftool` for `vm-bench`; host architecture only), each at bin/<name> with its `ldd`
/// closure, `helpers` built for the guest, at bin/<file name> (static ones for a foreign
/// architecture), and `modules`.
pub fn build_for(
    userland: &Userland,
    kernel: &Kernel,
    nodescope: &Path,
    guest_files: &[(&str, String)],
    tools: &[&str],
    helpers: &[&Path],
    modules: ModuleOverrides,
) -> Result<Vec<u8>> {
    let mut archive = archive_for(userland, kernel, nodescope, guest_files, tools, modules)?;
    add_helpers(&mut archive, helpers, userland.host_arch)?;
    Ok(archive.to_bytes())
}

fn archive_for(
    userland: &Userland,
    kernel: &Kernel,
    nodescope: &Path,
    guest_files: &[(&str, String)],
    tools: &[&str],
    modules: ModuleOverrides,
) -> Result<Archive> {
    let mut archive = Archive::default();
    add_busybox(&mut archive, userland)?;
    if userland.host_arch {
        let mkfs = which("mkfs.f2fs")?;
        add_binary(&mut archive, &mkfs, "bin/mkfs.f2fs")?;
        add_binary(&mut archive, nodescope, "bin/nodescope")?;
        for tool in tools {
            add_binary(&mut archive, &which(tool)?, &format!("bin/{tool}"))?;
        }
    } else {
        anyhow::ensure!(
            tools.is_empty(),
            "host tools in a foreign-architecture guest"
        );
        archive.add("bin/nodescope", read_file(nodescope, true)?);
    }
    add_modules_to(&mut archive, kernel, modules)?;
    archive.add("dev/console", Entry::CharDevice { major: 5, minor: 1 });
    for dir in ["proc", "sys", "mnt", "results", "tmp", "run", "etc"] {
        archive.add(dir, Entry::Dir);
    }
    // Every /init sources it first (guest.sh, kmod.sh, bench.sh).
    archive.add(
        "prelude.sh",
        text_file(include_str!("../guest/prelude.sh").to_string()),
    );
    for (path, contents) in guest_files {
        archive.add(
            path,
            Entry::File {
                data: contents.as_bytes().to_vec(),
                executable: true,
            },
        );
    }
    Ok(archive)
}

fn text_file(text: String) -> Entry {
    Entry::File {
        data: text.into_bytes(),
        executable: false,
    }
}

fn which(program: &str) -> Result<PathBuf> {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let path = Path::new(dir).join(program);
        if path.exists() {
            return Ok(path);
        }
    }
    bail!("{program} not found on the host: run `cargo xtask setup`")
}

fn add_busybox(archive: &mut Archive, userland: &Userland) -> Result<()> {
    archive.add("bin/busybox", read_file(&userland.busybox, true)?);
    // The list names busybox itself, which must stay the binary.
    for applet in userland
        .applets
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox")
    {
        archive.add(&format!("bin/{applet}"), Entry::Symlink("busybox".into()));
    }
    // Busybox ash finds commands through PATH=/bin; some scripts say /sbin or /usr/bin.
    archive.add("sbin", Entry::Symlink("bin".into()));
    archive.add("usr/bin", Entry::Symlink("../bin".into()));
    archive.add("usr/sbin", Entry::Symlink("../bin".into()));
    Ok(())
}

fn read_file(path: &Path, executable: bool) -> Result<Entry> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Entry::File { data, executable })
}

const C_UTF8_LOCALE: &str = "/usr/lib/locale/C.utf8";
const TERMINFO: &str = "/lib/terminfo";

/// A host directory's files, at the same paths.
fn add_tree(archive: &mut Archive, dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            add_tree(archive, &path)?;
        } else {
            let at = path.to_string_lossy().trim_start_matches('/').to_string();
            archive.add(&at, read_file(&path, false)?);
        }
    }
    Ok(())
}

/// A dynamically linked host binary and every library `ldd` lists, at the same paths.
fn add_binary(archive: &mut Archive, binary: &Path, at: &str) -> Result<()> {
    archive.add(at, read_file(binary, true)?);
    let ldd = util::output("ldd", &[binary.to_str().unwrap_or_default()])
        .with_context(|| format!("ldd {}", binary.display()))?;
    for line in ldd.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x..)" or "/lib64/ld-linux-x86-64.so.2 (0x..)"
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue;
        };
        if !archive.contains(path) {
            archive.add(path, read_file(Path::new(path), true)?);
        }
    }
    Ok(())
}

/// The modules and lib/modules/load-order, then the extra modules outside the load order.
fn add_modules_to(archive: &mut Archive, kernel: &Kernel, modules: ModuleOverrides) -> Result<()> {
    let order = add_modules(archive, kernel, modules.replace, modules.roots)?;
    archive.add("lib/modules/load-order", text_file(order.join("\n") + "\n"));
    for (name, path) in modules.extra {
        if !name.ends_with(".ko") || name.contains('/') {
            bail!("extra module {name:?}: want a file name ending in .ko");
        }
        let data = decompress(path)?;
        let executable = false;
        archive.add(
            &format!("lib/modules/{name}"),
            Entry::File { data, executable },
        );
    }
    Ok(())
}

/// Add the closure of ROOT_MODULES and `roots`, decompressed, with `replace`'s modules instead of Debian's
/// of the same names; returns the load order (dependencies first).
fn add_modules(
    archive: &mut Archive,
    kernel: &Kernel,
    replace: &[(&str, &Path)],
    roots: &[&str],
) -> Result<Vec<String>> {
    let mut available = index_modules(&kernel.modules.join("kernel"))?;
    for (name, path) in replace {
        let name = name.replace('-', "_");
        if available.insert(name.clone(), path.to_path_buf()).is_none() {
            bail!("cannot replace module {name}: the kernel has no such module");
        }
    }
    let builtin = fs::read_to_string(kernel.modules.join("modules.builtin")).unwrap_or_default();
    let mut closure = Closure {
        available: &available,
        seen: BTreeSet::new(),
        order: Vec::new(),
    };
    for root in ROOT_MODULES.iter().chain(roots) {
        closure.visit(root, &builtin)?;
    }
    for (name, _) in replace {
        let name = name.replace('-', "_");
        if !closure.order.iter().any(|(n, _)| *n == name) {
            bail!("module {name} is not among the guest's modules: nothing to replace");
        }
    }
    let mut order = Vec::new();
    for (name, path) in closure.order {
        let file = format!("{name}.ko");
        archive.add(
            &format!("lib/modules/{file}"),
            Entry::File {
                data: decompress(&path)?,
                executable: false,
            },
        );
        order.push(file);
    }
    Ok(order)
}

/// Module name (dashes as underscores) -> file.
fn index_modules(dir: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if let Some((stem, _)) = name.split_once(".ko") {
                found.insert(stem.replace('-', "_"), path.clone());
            }
        }
    }
    Ok(found)
}

struct Closure<'a> {
    available: &'a BTreeMap<String, PathBuf>,
    seen: BTreeSet<String>,
    order: Vec<(String, PathBuf)>,
}

impl Closure<'_> {
    /// Post-order walk over depends= and softdep pre:, so that dependencies load first.
    fn visit(&mut self, name: &str, builtin: &str) -> Result<()> {
        let name = name.replace('-', "_");
        if !self.seen.insert(name.clone()) {
            return Ok(());
        }
        let generic = format!("{name}_generic");
        let Some((name, path)) = [name.clone(), generic]
            .into_iter()
            .find_map(|n| self.available.get(&n).map(|p| (n, p.clone())))
        else {
            let is_builtin = builtin.lines().any(|l| {
                l.ends_with(&format!("/{name}.ko"))
                    || l.ends_with(&format!("/{}.ko", name.replace('_', "-")))
            });
            if !is_builtin {
                eprintln!("vm-test: note: module {name} not found (built in?)");
            }
            return Ok(());
        };
        let modinfo = decompress(&path)?;
        for dependency in dependencies(&modinfo) {
            self.visit(&dependency, builtin)?;
        }
        self.order.push((name, path));
        Ok(())
    }
}

/// `depends=a,b` and `softdep=pre: c d post: e` from a module's .modinfo strings.
fn dependencies(module: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for string in module.split(|b| *b == 0) {
        let Ok(string) = std::str::from_utf8(string) else {
            continue;
        };
        if let Some(list) = string.strip_prefix("depends=") {
            out.extend(
                list.split(',')
                    .filter(|d| !d.is_empty())
                    .map(str::to_string),
            );
        } else if let Some(soft) = string.strip_prefix("softdep=") {
            let pre = soft.split("post:").next().unwrap_or_default();
            out.extend(
                pre.split_whitespace()
                    .filter(|w| *w != "pre:")
                    .map(str::to_string),
            );
        }
    }
    out
}

fn decompress(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    let Some(tool) = tool else {
        return fs::read(path).with_context(|| format!("reading {name}"));
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("starting {tool}"))?;
    if !out.status.success() {
        bail!(
            "{tool} -dc {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in module: only its .modinfo strings matter to the closure.
    fn fake_module(path: &Path, modinfo: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, modinfo.replace(';', "\0")).unwrap();
    }

    #[test]
    fn a_replaced_module_takes_debians_place_with_its_own_dependencies() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("lib/modules/6.12.0-test");
        let kernel = Kernel {
            release: "6.12.0-test".into(),
            vmlinuz: dir.path().join("vmlinuz"),
            modules: modules.clone(),
        };
        let debian = modules.join("kernel");
        fs::create_dir_all(&debian).unwrap();
        fs::write(
            modules.join("modules.builtin"),
            "kernel/drivers/virtio/virtio_pci.ko\n",
        )
        .unwrap();
        fake_module(
            &debian.join("drivers/block/virtio_blk.ko"),
            "name=virtio_blk;",
        );
        fake_module(&debian.join("lib/lz4_compress.ko"), "name=lz4_compress;");
        fake_module(
            &debian.join("lib/lz4hc_compress.ko"),
            "name=lz4hc_compress;",
        );
        fake_module(
            &debian.join("crypto/crc32_generic.ko"),
            "name=crc32_generic;",
        );
        fake_module(
            &debian.join("fs/f2fs/f2fs.ko"),
            "debian-f2fs;depends=lz4_compress;softdep=pre: crc32;",
        );
        // Ours depends on one module more, which must come into the closure (and crc32, a
        // softdep, must load before it: crc32_generic, as Debian has it).
        let ours = dir.path().join("ours/f2fs.ko");
        fake_module(
            &ours,
            "our-f2fs;depends=lz4hc_compress,lz4_compress;softdep=pre: crc32;",
        );
        let stock = dir.path().join("stock/f2fs.ko");
        fake_module(&stock, "stock-f2fs;");

        let mut archive = Archive::default();
        let replace = [("f2fs", ours.as_path())];
        let order = add_modules(&mut archive, &kernel, &replace, &[]).unwrap();
        assert_eq!(
            order,
            [
                "virtio_blk.ko",
                "lz4hc_compress.ko",
                "lz4_compress.ko",
                "crc32_generic.ko",
                "f2fs.ko"
            ]
        );
        let bytes = archive.to_bytes();
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"our-f2fs") && !has(b"debian-f2fs"));

        let mut archive = Archive::default();
        let extra = [("f2fs-stock.ko", stock.as_path())];
        let modules = ModuleOverrides {
            replace: &replace,
            extra: &extra,
            ..Default::default()
        };
        add_modules_to(&mut archive, &kernel, modules).unwrap();
        assert!(archive.contains("lib/modules/f2fs-stock.ko"));
        assert!(archive.contains("lib/modules/load-order"));

        // Without overrides: Debian's module, its own dependencies.
        let mut archive = Archive::default();
        let order = add_modules(&mut archive, &kernel, &[], &[]).unwrap();
        assert_eq!(
            order,
            [
                "virtio_blk.ko",
                "lz4_compress.ko",
                "crc32_generic.ko",
                "f2fs.ko"
            ]
        );
        // More roots (fscrypt's cipher templates, say) come after, with their dependencies; a
        // builtin one adds nothing.
        fake_module(
            &debian.join("crypto/xts.ko"),
            "name=xts;depends=lz4hc_compress;",
        );
        let mut archive = Archive::default();
        let order = add_modules(&mut archive, &kernel, &[], &["xts", "virtio_pci"]).unwrap();
        assert_eq!(
            order,
            [
                "virtio_blk.ko",
                "lz4_compress.ko",
                "crc32_generic.ko",
                "f2fs.ko",
                "lz4hc_compress.ko",
                "xts.ko"
            ]
        );
        // A module the kernel lacks cannot be replaced.
        let missing = [("no_such_module", ours.as_path())];
        assert!(add_modules(&mut Archive::default(), &kernel, &missing, &[]).is_err());
    }

    #[test]
    fn reads_depends_and_softdep_pre() {
        let modinfo = b"license=GPL\0softdep=pre: crc32 post: foo\0depends=zstd_compress,lz4_compress\0name=f2fs\0";
        assert_eq!(
            dependencies(modinfo),
            ["crc32", "zstd_compress", "lz4_compress"]
        );
    }
}
