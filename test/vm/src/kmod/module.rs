//! One f2fs.ko: the tree's fs/f2fs copied, patched, built with the headers' kbuild, stripped,
//! and cached under target/vm-cache/kmod/<label>-<variant>-<hash16>/ by a hash of all that
//! went into it. Every module, cached or not, is checked: Debian's vermagic, a non-empty .BTF.
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use sha2::{Digest as _, Sha256};

use super::tree::{vermagic, Tree};
use crate::util;

/// Part of every cache key: bump it when the recipe below changes what a build produces.
const CACHE_VERSION: &str = "kmod-cache-1";

/// What the tree gives the copy a patch applies to: fs/f2fs and every other file a patch may
/// touch (relative to the source dir).
const COPIED: [&str; 4] = [
    "fs/f2fs",
    "Documentation/ABI/testing/sysfs-fs-f2fs",
    "include/trace/events/f2fs.h",
    "include/linux/f2fs_fs.h",
];

/// A built (or cached) and checked module.
pub struct Module {
    /// .../f2fs.ko, stripped of debug info (keeps .BTF).
    pub ko: PathBuf,
    /// kbuild's output, beside the module.
    #[allow(dead_code)] // For callers: the VM test points at it when the guest rejects ours.
    pub log: PathBuf,
    /// None: found in the cache.
    pub build_time: Option<Duration>,
    pub size: u64,
    /// Equal to Debian's own f2fs.ko's (checked).
    pub vermagic: String,
    /// Size of the module's .BTF section (checked non-empty).
    pub btf_bytes: u64,
}

impl Module {
    /// `kmod 6.12 patched: <path> 2.1 MiB built in 47.3 s vermagic ok btf 122780 bytes`.
    pub fn summary(&self, label: &str, variant: &str) -> String {
        let shown = self
            .ko
            .strip_prefix(util::workspace_root())
            .unwrap_or(&self.ko);
        let time = match self.build_time {
            Some(t) => format!("built in {:.1} s", t.as_secs_f64()),
            None => "cached".to_string(),
        };
        format!(
            "kmod {label} {variant}: {} {:.1} MiB {time} vermagic ok btf {} bytes",
            shown.display(),
            self.size as f64 / f64::from(1u32 << 20),
            self.btf_bytes
        )
    }
}

impl Tree {
    /// f2fs.ko with the `*.patch` files of `patch_dir` applied in name order (None: stock),
    /// under the output label `variant` ("stock", "patched", or any other variant's name).
    pub fn build_variant(&self, variant: &str, patch_dir: Option<&Path>) -> Result<Module> {
        let patches = match patch_dir {
            Some(dir) if !dir.is_dir() => bail!("patch dir {}: no such directory", dir.display()),
            Some(dir) => patch_files(dir)?,
            None => Vec::new(),
        };
        self.build_patches(variant, &patches)
    }

    /// f2fs.ko with `patches` applied in that order, under the output label `variant`; cached
    /// by the patches' names and contents like every build.
    pub fn build_patches(&self, variant: &str, patches: &[PathBuf]) -> Result<Module> {
        let mut inputs = Vec::new();
        for patch in patches {
            let name = patch.file_name().unwrap_or_default().to_string_lossy();
            let contents =
                fs::read(patch).with_context(|| format!("reading {}", patch.display()))?;
            inputs.push((name.into_owned(), contents));
        }
        let key = cache_key(&self.release, &self.version, &inputs);
        let out = self
            .cache
            .join("kmod")
            .join(format!("{}-{variant}-{}", self.label, &key[..16]));
        let build_time = if out.join("f2fs.ko").exists() {
            None
        } else {
            eprintln!(
                "kmod {} {variant}: building f2fs.ko ({} patches)",
                self.label,
                patches.len()
            );
            Some(self.compile(&out, patches)?)
        };
        self.checked(&out, build_time)
    }

    /// Copy, patch, make, strip into `out` (a .partial dir renamed at the end: a module there
    /// is complete). A failed make keeps its .partial dir (objects and log) for a look, until
    /// the next build of the same variant; a patch that does not apply leaves nothing.
    fn compile(&self, out: &Path, patches: &[PathBuf]) -> Result<Duration> {
        let partial = PathBuf::from(format!("{}.partial", out.display()));
        remove_failed_builds(out)?;
        let src = partial.join("src");
        for relative in COPIED {
            copy_tree(&self.source.join(relative), &src.join(relative))?;
        }
        for patch in patches {
            if let Err(err) = apply(&src, patch) {
                let _ = fs::remove_dir_all(&partial);
                return Err(err);
            }
        }
        let names: Vec<_> = patches.iter().map(|p| p.display().to_string()).collect();
        fs::write(partial.join("patches.txt"), names.join("\n") + "\n")?;
        let log = partial.join("build.log");
        let started = Instant::now();
        self.make(&src, &log)?;
        let elapsed = started.elapsed();
        // Debug info is 16 of its 18 MB; --strip-debug keeps .BTF, which the guest needs.
        util::run(
            Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(partial.join("f2fs.ko"))
                .arg(src.join("fs/f2fs/f2fs.ko")),
        )?;
        // The objects and the unstripped module: hundreds of MB nobody reads again.
        fs::remove_dir_all(&src).context("removing the build copy")?;
        let _ = fs::remove_dir_all(out);
        fs::rename(&partial, out).context("moving the built module into place")?;
        Ok(elapsed)
    }

    /// `make modules` in the copy's fs/f2fs against the headers, at low priority (the machine
    /// runs other work), all output into `log`.
    fn make(&self, src: &Path, log: &Path) -> Result<()> {
        let file = crate::util::create_no_follow(log)
            .with_context(|| format!("creating {}", log.display()))?;
        let mut make = Command::new("nice");
        make.args(["-n", "19", "make", "-C"])
            .arg(&self.headers)
            .arg(format!("M={}", src.join("fs/f2fs").display()))
            // The copy's include/ ahead of the headers': a patch may change f2fs's trace
            // events or on-disk header. NOSTDINC_FLAGS comes before LINUXINCLUDE in kbuild's
            // flags; it is otherwise just -nostdinc.
            .arg(format!(
                "NOSTDINC_FLAGS=-nostdinc -I{}",
                src.join("include").display()
            ))
            .args(["-j2", "modules"]);
        if self.no_resolve_btfids {
            // 6.1's kbuild has no resolve_btfids; f2fs has no .BTF_ids for it to resolve.
            make.arg("RESOLVE_BTFIDS=true");
        }
        let status = make
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .status()
            .context("starting make")?;
        if !status.success() {
            let text = fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<_> = text.lines().collect();
            eprintln!("{}", lines[lines.len().saturating_sub(40)..].join("\n"));
            bail!("make {status}: the whole log is {}", log.display());
        }
        Ok(())
    }

    /// The module in `out`, checked against Debian's vermagic and for BTF.
    fn checked(&self, out: &Path, build_time: Option<Duration>) -> Result<Module> {
        let ko = out.join("f2fs.ko");
        let vermagic = vermagic(&ko)?;
        if vermagic != self.vermagic {
            bail!(
                "{}: vermagic {vermagic:?}, but Debian's f2fs.ko has {:?}",
                ko.display(),
                self.vermagic
            );
        }
        let btf_bytes = btf_bytes(&ko)?;
        if btf_bytes == 0 {
            bail!("{} has no .BTF section", ko.display());
        }
        Ok(Module {
            size: fs::metadata(&ko)?.len(),
            log: out.join("build.log"),
            ko,
            build_time,
            vermagic,
            btf_bytes,
        })
    }
}

/// sha256 (hex) of everything a build depends on, each part length-prefixed so that no two
/// different inputs run together into the same bytes.
fn cache_key(release: &str, version: &str, patches: &[(String, Vec<u8>)]) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(CACHE_VERSION.as_bytes());
    part(release.as_bytes());
    part(version.as_bytes());
    for (name, contents) in patches {
        part(name.as_bytes());
        part(contents);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Earlier failed builds of `out`'s variant: `<label>-<variant>-<any hash>.partial`.
fn remove_failed_builds(out: &Path) -> Result<()> {
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    let (variant, _hash) = name.rsplit_once('-').context("output dir without a hash")?;
    let Some(parent) = out.parent() else {
        return Ok(());
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return Ok(());
    };
    for path in entries.flatten().map(|e| e.path()) {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let stale = name
            .strip_suffix(".partial")
            .and_then(|n| n.rsplit_once('-'))
            .is_some_and(|(v, _)| v == variant);
        if stale {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Copy a file, or a directory recursively (fs/f2fs is flat, but need not stay so).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    if from.is_file() {
        fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
        return Ok(());
    }
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// `patch -p1 --forward --batch`: a patch that does not apply (or was applied already) fails.
fn apply(src: &Path, patch: &Path) -> Result<()> {
    let out = Command::new("patch")
        .args(["-p1", "--forward", "--batch", "-i"])
        .arg(patch)
        .current_dir(src)
        .stdin(Stdio::null())
        .output()
        .context("starting patch")?;
    if !out.status.success() {
        bail!(
            "{} does not apply to the {} tree:\n{}{}",
            patch.display(),
            src.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn btf_bytes(module: &Path) -> Result<u64> {
    let path = module.to_str().context("module path is not UTF-8")?;
    let sections = util::output("readelf", &["-S", "-W", path])
        .with_context(|| format!("readelf -S {path}"))?;
    Ok(section_size(&sections, ".BTF").unwrap_or(0))
}

/// A section's size from `readelf -S -W`:
/// `  [52] .BTF              PROGBITS        0000000000000000 1d9fa8 01dfdc 00      0   0  1`.
fn section_size(readelf: &str, name: &str) -> Option<u64> {
    readelf.lines().find_map(|line| {
        let (_, rest) = line.split_once(']')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        match fields.as_slice() {
            [found, _type, _addr, _off, size, ..] if *found == name => {
                u64::from_str_radix(size, 16).ok()
            }
            _ => None,
        }
    })
}

/// The `*.patch` files in `dir`, sorted by name (the order they apply in); none when `dir`
/// does not exist.
pub fn patch_files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "patch") {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(name: &str, text: &str) -> (String, Vec<u8>) {
        (name.to_string(), text.as_bytes().to_vec())
    }

    #[test]
    fn cache_key_is_stable_and_tracks_every_input() {
        let patches = [patch("0001-a.patch", "+x\n"), patch("0002-b.patch", "+y\n")];
        let key = cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &patches);
        // Pinned: a key that changes between builds of xtask would rebuild every module.
        assert_eq!(
            key,
            cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &patches)
        );
        assert_eq!(key.len(), 64);
        let changed = [patch("0001-a.patch", "+x\n"), patch("0002-b.patch", "+z\n")];
        let renamed = [patch("0001-a.patch", "+x\n"), patch("0003-b.patch", "+y\n")];
        let others = [
            cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &changed),
            cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &renamed),
            cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &patches[..1]),
            cache_key("6.12.117+deb12-amd64", "6.12.117-2~deb12u1", &patches),
            cache_key("6.1.0-57-amd64", "6.12.117-1~deb12u1", &patches),
        ];
        for other in others {
            assert_ne!(key, other);
        }
        // Moving bytes from one patch's name into its contents is a different input.
        assert_ne!(
            cache_key("r", "v", &[patch("ab", "c")]),
            cache_key("r", "v", &[patch("a", "bc")])
        );
    }

    #[test]
    fn cache_key_is_sha256_of_the_framed_inputs() {
        // sha256 is the same on every machine and release of Rust, unlike DefaultHasher.
        assert_eq!(
            &cache_key("6.12.117+deb12-amd64", "6.12.117-1~deb12u1", &[])[..16],
            STOCK_612_KEY16
        );
    }
    /// Computed once; if CACHE_VERSION is bumped, this changes with it.
    const STOCK_612_KEY16: &str = "2787906ae6de6f2f";

    #[test]
    fn reads_the_btf_section_size() {
        let readelf = "There are 54 section headers, starting at offset 0x213a00:

Section Headers:
  [Nr] Name              Type            Address          Off    Size   ES Flg Lk Inf Al
  [ 0]                   NULL            0000000000000000 000000 000000 00      0   0  0
  [ 1] .text             PROGBITS        0000000000000000 000040 000000 00  AX  0   0  4
  [51] .BTF_ids          PROGBITS        0000000000000000 1d9f00 000010 00   A  0   0  1
  [52] .BTF              PROGBITS        0000000000000000 1d9fa8 01dfdc 00      0   0  1
";
        assert_eq!(section_size(readelf, ".BTF"), Some(0x1dfdc));
        assert_eq!(section_size(readelf, ".BTF_ids"), Some(0x10));
        assert_eq!(section_size(readelf, ".data"), None);
    }
}
