//! File sets, and the real F2FS images built from them with mkfs.f2fs + sload.f2fs.
//!
//! A [`Manifest`] lists a file set in creation order (the order a workload creates it, which
//! is also the order its nodes enter the cache). [`build_image`] writes the tree to a scratch
//! directory, formats a sparse image file and loads the tree into it, then caches the image
//! under `$XDG_CACHE_HOME/nodescope` (or `~/.cache/nodescope`), keyed by a fingerprint of the
//! manifest and the format options, so the next run reuses it. [`fbe`] is the Android file
//! set as a phone's /data holds it (encrypted names, fscrypt contexts, SELinux labels): a
//! QEMU guest writes that image (`cargo xtask android-image`), the same cache keeps it.
pub mod android;
pub mod fbe;
pub mod vm;

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::Instant,
};

use anyhow::{bail, Context as _, Result};

use crate::rng::Rng;

/// What one manifest entry holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Content {
    Dir,
    /// A small text file (F2FS keeps it inline in the inode).
    Text(String),
    /// `blocks` 4 KiB blocks of zeros, really written (not a sparse hole).
    Zeros {
        blocks: u32,
    },
    /// `len` pseudo-random bytes from `seed`.
    Random {
        len: u64,
        seed: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ManifestEntry {
    /// Relative to the filesystem root, '/'-separated, no leading slash.
    pub path: String,
    pub content: Content,
}

/// A file set in creation order.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Short name, part of the cached image's file name.
    pub name: String,
    pub entries: Vec<ManifestEntry>,
    pub image_bytes: u64,
}

/// mkfs.f2fs features: extra_attr + inode_checksum give inodes a checksum to verify on
/// restore; sb_checksum gives the superblock a CRC to check.
const MKFS_FEATURES: &str = "extra_attr,inode_checksum,sb_checksum";
/// A fixed UUID and timestamps make the image (and its inode checksums) reproducible.
const MKFS_UUID: &str = "6e6f6465-7363-6f70-6500-000000000001";
/// Bumped when the way images are built changes, so stale cached images are not reused.
const BUILD_FORMAT: u64 = 1;

impl Manifest {
    /// A fingerprint of everything that shapes the image (FNV-1a).
    pub fn fingerprint(&self) -> u64 {
        let mut hash = Fnv::default();
        hash.add(&BUILD_FORMAT.to_le_bytes());
        hash.add(MKFS_FEATURES.as_bytes());
        hash.add(&self.image_bytes.to_le_bytes());
        for entry in &self.entries {
            hash.add(entry.path.as_bytes());
            match &entry.content {
                Content::Dir => hash.add(b"d"),
                Content::Text(text) => hash.add(text.as_bytes()),
                Content::Zeros { blocks } => hash.add(&blocks.to_le_bytes()),
                Content::Random { len, seed } => {
                    hash.add(&len.to_le_bytes());
                    hash.add(&seed.to_le_bytes());
                }
            }
        }
        hash.0
    }

    /// The paths of the regular files under `prefix`, in manifest order.
    pub fn files_under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a ManifestEntry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.content != Content::Dir && e.path.starts_with(prefix))
    }
}

#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3);
        }
        // Separator, so ("ab", "c") and ("a", "bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x100_0000_01b3);
    }
}

/// Where cached images live: `$XDG_CACHE_HOME/nodescope`, else `~/.cache/nodescope`, else
/// `/tmp/nodescope-cache-<euid>`. Used only once [`private_cache`] accepted it.
pub fn cache_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    cache_dir_from(
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        euid,
    )
}

fn cache_dir_from(
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
    euid: u32,
) -> PathBuf {
    if let Some(dir) = xdg_cache_home.filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("nodescope");
    }
    if let Some(home) = home.filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".cache").join("nodescope");
    }
    std::env::temp_dir().join(format!("nodescope-cache-{euid}"))
}

/// `dir` as an image cache: the state directory's rule (`files::private_dir_problem`: made
/// 0700 when missing, else ours, not a symlink, nobody else's to read or write), since an image
/// found there is used as it is (root's `sim` once used one another user had planted in a
/// shared /tmp). A cache of ours that only others could read (0755, as earlier versions made
/// it) cannot hold a planted image: it is made 0700, not refused.
pub fn private_cache(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if let Ok(meta) = fs::symlink_metadata(dir) {
        let mode = meta.mode() & 0o7777;
        if meta.is_dir() && meta.uid() == euid && mode & 0o022 == 0 && mode & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("making the image cache {} private", dir.display()))?;
        }
    }
    let problem = tracer_common::files::private_dir_problem(dir)
        .with_context(|| format!("creating the image cache {}", dir.display()))?;
    if let Some(problem) = problem {
        bail!(
            "refusing the image cache {}: it {problem}; remove it if you do not know who made \
             it, or set XDG_CACHE_HOME to a private directory",
            dir.display()
        );
    }
    Ok(())
}

/// Builds in one process are serialised: parallel tests share one build.
static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// The cached image for `manifest`, built first when missing.
pub fn build_image(manifest: &Manifest) -> Result<PathBuf> {
    build_image_in(manifest, &cache_dir())
}

/// [`build_image`] with the cache in `dir`, checked private first.
pub fn build_image_in(manifest: &Manifest, dir: &Path) -> Result<PathBuf> {
    private_cache(dir)?;
    let image = dir.join(format!(
        "{}-{:016x}.img",
        manifest.name,
        manifest.fingerprint()
    ));
    let _guard = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if image.exists() {
        return Ok(image);
    }
    let dir = dir.to_path_buf();
    fs::create_dir_all(&dir)
        .with_context(|| format!("creating the image cache {}", dir.display()))?;
    // A build killed before (SIGKILL, a closed terminal) left its half-written image (hundreds
    // of MB) and its source tree: remove those of processes that are gone.
    remove_stale(&dir, &format!("{}.", manifest.name), ".partial");
    remove_stale(
        &scratch_root(&dir),
        &format!("nodescope-{}-src.", manifest.name),
        "",
    );
    let tools = Tools::find()?;
    let started = Instant::now();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let unique = format!("{}.{nanos}", std::process::id());
    let scratch = scratch_root(&dir).join(format!("nodescope-{}-src.{unique}", manifest.name));
    let partial = dir.join(format!("{}.{unique}.partial", manifest.name));
    let result = write_tree(manifest, &scratch)
        .and_then(|()| tools.make_image(manifest, &scratch, &partial));
    let _ = fs::remove_dir_all(&scratch);
    if let Err(e) = result {
        let _ = fs::remove_file(&partial);
        return Err(e);
    }
    fs::rename(&partial, &image)
        .with_context(|| format!("moving the new image to {}", image.display()))?;
    log::info!(
        "built F2FS image {} ({} entries) in {:.1} s",
        image.display(),
        manifest.entries.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(image)
}

/// Remove the entries of `dir` named `<prefix><pid>.<nanos><suffix>` whose process no longer
/// runs: what a killed build left. A live build's (another process's) are kept.
fn remove_stale(dir: &Path, prefix: &str, suffix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(prefix))
            .and_then(|rest| rest.strip_suffix(suffix))
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(pid, nanos)| nanos.parse::<u128>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => log::info!(
                "removed {}, left by a build that was killed",
                path.display()
            ),
            Err(err) => log::warn!("cannot remove {}: {err}", path.display()),
        }
    }
}

/// The source tree is throwaway: on tmpfs (/dev/shm) when there is one, it costs no disk I/O.
fn scratch_root(cache: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = fs::metadata(shm)
        .map(|m| m.is_dir() && !m.permissions().readonly())
        .unwrap_or(false);
    if writable {
        shm.to_path_buf()
    } else {
        cache.to_path_buf()
    }
}

/// Write the file set as an ordinary directory tree for sload.f2fs.
fn write_tree(manifest: &Manifest, root: &Path) -> Result<()> {
    fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let zero_block = vec![0u8; 4096];
    for entry in &manifest.entries {
        let path = root.join(&entry.path);
        match &entry.content {
            Content::Dir => fs::create_dir_all(&path),
            Content::Text(text) => fs::write(&path, text),
            Content::Zeros { blocks } => write_zeros(&path, *blocks, &zero_block),
            Content::Random { len, seed } => {
                let mut bytes = vec![0u8; *len as usize];
                Rng::new(*seed).fill(&mut bytes);
                fs::write(&path, bytes)
            }
        }
        .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn write_zeros(path: &Path, blocks: u32, zero_block: &[u8]) -> std::io::Result<()> {
    let mut file = fs::File::create(path)?;
    for _ in 0..blocks {
        file.write_all(zero_block)?;
    }
    Ok(())
}

struct Tools {
    mkfs: PathBuf,
    sload: PathBuf,
}

impl Tools {
    /// mkfs.f2fs and sload.f2fs live in sbin, which a user's PATH may lack.
    fn find() -> Result<Tools> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs: Vec<PathBuf> = std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
            .collect();
        Tools::find_in(&dirs)
    }

    fn find_in(dirs: &[PathBuf]) -> Result<Tools> {
        let find = |name: &str| dirs.iter().map(|dir| dir.join(name)).find(|c| c.is_file());
        match (find("mkfs.f2fs"), find("sload.f2fs")) {
            (Some(mkfs), Some(sload)) => Ok(Tools { mkfs, sload }),
            (mkfs, sload) => {
                let missing: Vec<&str> = [
                    ("mkfs.f2fs", mkfs.is_none()),
                    ("sload.f2fs", sload.is_none()),
                ]
                .iter()
                .filter(|(_, absent)| *absent)
                .map(|(name, _)| *name)
                .collect();
                bail!(
                    "{} not found (looked in PATH, /usr/sbin, /sbin): the simulator builds a real \
                     F2FS image with them; install f2fs-tools (`apt-get install f2fs-tools`, or \
                     `cargo xtask setup`)",
                    missing.join(" and ")
                )
            }
        }
    }

    fn make_image(&self, manifest: &Manifest, source: &Path, image: &Path) -> Result<()> {
        let file =
            fs::File::create(image).with_context(|| format!("creating {}", image.display()))?;
        file.set_len(manifest.image_bytes)
            .with_context(|| format!("sizing {}", image.display()))?;
        drop(file);
        run(Command::new(&self.mkfs)
            .args([
                "-q",
                "-f",
                "-O",
                MKFS_FEATURES,
                "-U",
                MKFS_UUID,
                "-T",
                "0",
                "-r",
            ])
            .arg(image))?;
        run(Command::new(&self.sload)
            .arg("-f")
            .arg(source)
            .args(["-T", "0"])
            .arg(image))
    }
}

fn run(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .with_context(|| format!("running {shown}"))?;
    if !output.status.success() {
        bail!(
            "{shown} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    /// What a killed build left (a dead pid) goes; a running build's (ours) and other files stay.
    #[test]
    fn leftovers_of_killed_builds_are_removed_and_live_ones_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let dead = dir.path().join("phone.999999999.123.partial");
        let live = dir
            .path()
            .join(format!("phone.{}.456.partial", std::process::id()));
        let image = dir.path().join("phone-0123456789abcdef.img");
        let other = dir.path().join("tablet.999999999.123.partial");
        for file in [&dead, &live, &image, &other] {
            fs::write(file, "x").unwrap();
        }
        let dead_tree = dir.path().join("nodescope-phone-src.999999999.7");
        fs::create_dir_all(dead_tree.join("sub")).unwrap();
        remove_stale(dir.path(), "phone.", ".partial");
        remove_stale(dir.path(), "nodescope-phone-src.", "");
        assert!(!dead.exists() && !dead_tree.exists());
        assert!(live.exists() && image.exists() && other.exists());
    }
}

#[cfg(test)]
mod cache_tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    use super::*;

    /// Issue 52, item 5: without HOME and XDG_CACHE_HOME the cache is per user, and an image
    /// found in a cache that is not ours alone (another user's directory, one others may
    /// write, a symlink) is never used: root's `sim` once used an image planted there.
    #[test]
    fn an_image_in_a_cache_that_is_not_ours_alone_is_never_used() {
        assert_eq!(
            cache_dir_from(None, Some("".into()), 1234),
            std::env::temp_dir().join("nodescope-cache-1234")
        );
        assert_eq!(
            cache_dir_from(Some("/c".into()), Some("/h".into()), 0),
            Path::new("/c/nodescope")
        );
        let scratch = tempfile::TempDir::new().unwrap();
        let manifest = vm::VmFileSet {
            dirs: 1,
            ..vm::VmFileSet::default()
        }
        .manifest();
        let plant = |dir: &Path| {
            fs::create_dir_all(dir).unwrap();
            let image = dir.join(format!(
                "{}-{:016x}.img",
                manifest.name,
                manifest.fingerprint()
            ));
            fs::write(&image, "planted").unwrap();
        };
        let shared = scratch.path().join("shared");
        plant(&shared);
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
        let err = format!("{:#}", build_image_in(&manifest, &shared).unwrap_err());
        assert!(err.contains("has mode 1777"), "{err}");

        let link = scratch.path().join("link");
        std::os::unix::fs::symlink(&shared, &link).unwrap();
        let err = format!("{:#}", build_image_in(&manifest, &link).unwrap_err());
        assert!(err.contains("is a symlink"), "{err}");

        // Ours, readable by others only (as earlier versions made it): nothing could be
        // planted, so it is made private and used.
        let ours = scratch.path().join("ours");
        plant(&ours);
        fs::set_permissions(&ours, fs::Permissions::from_mode(0o755)).unwrap();
        private_cache(&ours).unwrap();
        assert_eq!(fs::metadata(&ours).unwrap().mode() & 0o7777, 0o700);
    }

    #[test]
    fn a_cache_owned_by_another_user_is_refused() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            test_skip::skip("a directory owned by another user needs root to make");
            return;
        }
        let scratch = tempfile::TempDir::new().unwrap();
        let manifest = vm::VmFileSet {
            dirs: 1,
            ..vm::VmFileSet::default()
        }
        .manifest();
        let theirs = scratch.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        let image = theirs.join(format!(
            "{}-{:016x}.img",
            manifest.name,
            manifest.fingerprint()
        ));
        fs::write(&image, "planted").unwrap();
        fs::set_permissions(&theirs, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let err = format!("{:#}", build_image_in(&manifest, &theirs).unwrap_err());
        assert!(err.contains("belongs to uid 65534"), "{err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_are_named() {
        let error = Tools::find_in(&[PathBuf::from("/nonexistent")])
            .err()
            .expect("no tools there");
        let message = format!("{error:#}");
        assert!(
            message.contains("mkfs.f2fs and sload.f2fs not found"),
            "{message}"
        );
        assert!(message.contains("f2fs-tools"), "{message}");
    }

    #[test]
    fn fingerprints_follow_the_file_set() {
        let rfc = vm::VmFileSet::default();
        let smaller = vm::VmFileSet {
            dirs: 255,
            ..rfc.clone()
        };
        assert_eq!(rfc.manifest().fingerprint(), rfc.manifest().fingerprint());
        assert_ne!(
            rfc.manifest().fingerprint(),
            smaller.manifest().fingerprint()
        );
        assert_eq!(rfc.manifest().entries.len(), 16_384 + 256 + 1 + 1 + 32 + 1);
    }
}
