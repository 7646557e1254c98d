//! The Android file set as a phone's /data holds it: file-based encryption (fscrypt v2), owners,
//! modes and SELinux labels, on an F2FS made with Android's mkfs features. The host's
//! sload.f2fs can do none of the encryption, so a guest kernel writes this image
//! (`cargo xtask android-image`, test/vm/src/android_image.rs) from the [`recipe`] here; it
//! also writes an index of inode numbers, since every name on disk is ciphertext. Both are
//! cached beside the plain images, keyed by [`fingerprint`].
//!
//! The layout follows Android's: `/data` itself unencrypted; the system DE key's policy on
//! `data/app` and `data/system` (init sets it on the top-level directories); user 0's CE key on
//! `data/data` and its DE key on `data/user_de/0` (vold). App data is owned by the app's uid,
//! its cache directory's group is the app's cache gid, and app files carry `app_data_file`
//! with the MLS categories of SELinux's levelFrom=all (app id and user), code `apk_data_file`.
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};

use super::{android, cache_dir, Content, Fnv, Manifest};
use crate::rng::Rng;

mod audit;
pub use audit::{audit, Audit};

/// make_f2fs's arguments as AOSP's fs_mgr formats userdata (fs_mgr_format.cpp, format_f2fs)
/// on a device with `ro.emulated_storage.projid`, `ro.emulated_storage.casefold` and
/// `fscompress` in its fstab, as Pixels since the 6 have: `-g android` (encrypt,
/// project_quota, extra_attr, verity; 4 KiB sectors), then project quota, casefolding with
/// UTF-8 and compression. No inode_checksum or sb_checksum: Android does not ask for them.
pub const MKFS_ARGS: [&str; 13] = [
    "-g",
    "android",
    "-O",
    "project_quota,extra_attr",
    "-O",
    "casefold",
    "-C",
    "utf8",
    "-O",
    "compression",
    "-O",
    "extra_attr",
    "-q",
];
/// The superblock feature bits those arguments give (f2fs_fs.h): encrypt 0x1, extra_attr
/// 0x8, project_quota 0x10, quota_ino 0x80 (mkfs.f2fs adds it to every project-quota
/// filesystem: the quota files are hidden inodes), verity 0x400, casefold 0x1000,
/// compression 0x2000.
pub const MKFS_FEATURE_BITS: u32 = 0x1 | 0x8 | 0x10 | 0x80 | 0x400 | 0x1000 | 0x2000;
/// The mount options of a Pixel's userdata that a guest without inline encryption can use.
pub const MOUNT_OPTIONS: &str =
    "noatime,nosuid,nodev,fsync_mode=nobarrier,reserve_root=32768,resgid=1065";
/// Bumped when the way the image is written changes (the guest script, the writer, the
/// guest's modules).
const BUILD_FORMAT: u64 = 2;

/// Android's ids (system/core/libcutils/include/private/android_filesystem_config.h).
const AID_SYSTEM: u32 = 1000;
const AID_APP_START: u32 = 10_000;
const AID_CACHE_GID_START: u32 = 20_000;

/// The three keys of a phone with one user: the system's device-encrypted key, user 0's
/// device-encrypted and credential-encrypted keys. Their bytes come from the file set's seed:
/// this is a test image, not a secret.
const KEYS: [&str; 3] = ["system_de", "user0_de", "user0_ce"];

/// Who owns one entry, how it is labelled, and which key's policy is set on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// The security.selinux value (stored with a terminating NUL).
    pub label: String,
    pub policy: Option<&'static str>,
}

/// An app's SELinux label with levelFrom=all's categories (libselinux android_platform.c).
pub fn app_data_label(uid: u32) -> String {
    let user = uid / 100_000;
    let app_id = uid % 100_000 - AID_APP_START;
    format!(
        "u:object_r:app_data_file:s0:c{},c{},c{},c{}",
        app_id & 0xff,
        256 + (app_id >> 8 & 0xff),
        512 + (user & 0xff),
        768 + (user >> 8 & 0xff)
    )
}

fn system(mode: u32, kind: &str, policy: Option<&'static str>) -> Metadata {
    Metadata {
        uid: AID_SYSTEM,
        gid: AID_SYSTEM,
        mode,
        label: format!("u:object_r:{kind}:s0"),
        policy,
    }
}

/// The metadata of the entry at `path` (a manifest path, or one of [`EXTRA_DIRS`]).
pub fn metadata(path: &str, is_dir: bool) -> Metadata {
    let file_mode = |dir, file| if is_dir { dir } else { file };
    match path {
        "data" => return system(0o771, "system_data_root_file", None),
        "data/app" | "data/system" => {
            let kind = if path == "data/app" {
                "apk_data_file"
            } else {
                "system_data_file"
            };
            return system(0o771, kind, Some("system_de"));
        }
        "data/data" => return system(0o771, "system_data_file", Some("user0_ce")),
        "data/user_de" => return system(0o711, "system_data_file", None),
        "data/user_de/0" => return system(0o771, "system_data_file", Some("user0_de")),
        _ => {}
    }
    if path.starts_with("data/app/") {
        return system(file_mode(0o755, 0o644), "apk_data_file", None);
    }
    if path.starts_with(android::SYSTEM_DIR) {
        return system(0o600, "system_data_file", None);
    }
    let package_path = path
        .strip_prefix("data/data/")
        .or_else(|| path.strip_prefix("data/user_de/0/"));
    if let Some(rest) = package_path {
        let package = rest.split('/').next().unwrap_or_default();
        if let Some(index) = android::APP_PACKAGES.iter().position(|p| *p == package) {
            let uid = android::app_uid(index);
            // installd makes cache/ setgid to the app's cache gid: all below it has that group.
            let cache = rest == format!("{package}/cache")
                || rest.starts_with(&format!("{package}/cache/"));
            let mode = match (rest == package, is_dir) {
                (true, _) => 0o700,
                (false, true) if rest == format!("{package}/cache") => 0o2771,
                (false, true) => 0o771,
                (false, false) => 0o600,
            };
            return Metadata {
                uid,
                gid: if cache {
                    uid - AID_APP_START + AID_CACHE_GID_START
                } else {
                    uid
                },
                mode,
                label: app_data_label(uid),
                policy: None,
            };
        }
    }
    system(file_mode(0o771, 0o600), "system_data_file", None)
}

/// Directories of the phone's layout that the simulator's file set does not use: user 0's
/// device-encrypted storage, one directory per app.
fn extra_dirs() -> Vec<String> {
    let mut dirs = vec!["data/user_de".to_string(), "data/user_de/0".to_string()];
    dirs.extend(
        android::APP_PACKAGES
            .iter()
            .map(|p| format!("data/user_de/0/{p}")),
    );
    dirs
}

fn key_bytes(seed: u64, name: &str) -> String {
    let mut fnv = Fnv::default();
    fnv.add(name.as_bytes());
    let mut rng = Rng::new(seed ^ fnv.0);
    let mut hex = String::new();
    for _ in 0..8 {
        let _ = write!(hex, "{:016x}", rng.next_u64());
    }
    hex
}

/// The guest writer's recipe for `manifest` (test/vm/guest/android_data.c reads it): the keys,
/// then every entry in creation order with its metadata; the layout's own directories come
/// after `data/data` is made, before the apps' files.
pub fn recipe(manifest: &Manifest, seed: u64) -> String {
    let mut out = String::new();
    for key in KEYS {
        let _ = writeln!(out, "key {key} {}", key_bytes(seed, key));
    }
    let line = |out: &mut String, path: &str, is_dir: bool, content: String| {
        let meta = metadata(path, is_dir);
        let _ = write!(
            out,
            "{} {path} {:o} {} {} {}",
            if is_dir { "dir" } else { "file" },
            meta.mode,
            meta.uid,
            meta.gid,
            meta.label
        );
        if let Some(key) = meta.policy {
            let _ = write!(out, " {key}");
        }
        let _ = writeln!(out, "{content}");
    };
    // The manifest may skip a parent (sload's tree is made with create_dir_all): the writer
    // makes each directory itself, so the recipe names every one, parents first.
    let mut made = BTreeSet::new();
    let mut dir_once = |out: &mut String, path: &str| {
        if made.insert(path.to_string()) {
            line(out, path, true, String::new());
        }
    };
    for entry in &manifest.entries {
        let content = match &entry.content {
            Content::Dir => String::new(),
            Content::Text(text) => {
                let mut hex = String::from(" text ");
                for byte in text.as_bytes() {
                    let _ = write!(hex, "{byte:02x}");
                }
                hex
            }
            Content::Zeros { blocks } => format!(" zeros {blocks}"),
            Content::Random { len, seed } => format!(" random {len} {seed}"),
        };
        // Manifest directories may end in '/'; the recipe and the index name them without.
        let path = entry.path.trim_end_matches('/');
        for (at, _) in path.match_indices('/') {
            dir_once(&mut out, &path[..at]);
        }
        if entry.content == Content::Dir {
            dir_once(&mut out, path);
        } else {
            line(&mut out, path, false, content);
        }
        if path == "data/data" {
            for dir in extra_dirs() {
                dir_once(&mut out, &dir);
            }
        }
    }
    out
}

/// A fingerprint of everything that shapes the encrypted image.
pub fn fingerprint(recipe: &str, image_bytes: u64) -> u64 {
    let mut fnv = Fnv::default();
    fnv.add(&BUILD_FORMAT.to_le_bytes());
    for arg in MKFS_ARGS {
        fnv.add(arg.as_bytes());
    }
    fnv.add(MOUNT_OPTIONS.as_bytes());
    fnv.add(&image_bytes.to_le_bytes());
    fnv.add(recipe.as_bytes());
    fnv.0
}

/// Which image of the Android file set the simulator runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AndroidImage {
    /// As a phone writes /data (this module): the default when it is built.
    Encrypted,
    /// The same file set loaded by sload.f2fs from a plain tree: no encryption, no labels.
    Plain,
}

/// `NODESCOPE_ANDROID_IMAGE`: `fbe` or `plain` pins the image (tests, comparisons).
pub const IMAGE_ENV: &str = "NODESCOPE_ANDROID_IMAGE";

impl AndroidImage {
    pub fn name(self) -> &'static str {
        match self {
            AndroidImage::Encrypted => "fbe",
            AndroidImage::Plain => "plain",
        }
    }

    pub fn parse(text: &str) -> Result<AndroidImage> {
        match text {
            "fbe" => Ok(AndroidImage::Encrypted),
            "plain" => Ok(AndroidImage::Plain),
            other => bail!("unknown Android image {other:?}: fbe or plain"),
        }
    }

    /// The image to run on: [`IMAGE_ENV`] when set, else the encrypted image when it is
    /// built, else the plain one (say so once: the simulator must run on any machine, and
    /// only a QEMU guest can write the encrypted one).
    pub fn choose(set: &android::AndroidFileSet) -> Result<AndroidImage> {
        if let Some(value) = std::env::var_os(IMAGE_ENV) {
            let text = value.to_string_lossy();
            return AndroidImage::parse(&text).with_context(|| format!("{IMAGE_ENV}={text}"));
        }
        if EncryptedImage::of(set).is_built() {
            return Ok(AndroidImage::Encrypted);
        }
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            log::warn!(
                "the encrypted Android image is not built (`cargo xtask android-image` writes \
                 it): the simulator runs on the plain one"
            );
        });
        Ok(AndroidImage::Plain)
    }
}

/// The encrypted image of a recipe and its index, in the image cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncryptedImage {
    pub image: PathBuf,
    pub index: PathBuf,
}

impl EncryptedImage {
    /// Where the image of the Android file set lives (it may not be built yet).
    pub fn of(set: &android::AndroidFileSet) -> EncryptedImage {
        let manifest = set.manifest();
        let recipe = recipe(&manifest, set.seed);
        let stem = format!(
            "{}-fbe-{:016x}",
            manifest.name,
            fingerprint(&recipe, manifest.image_bytes)
        );
        let dir = cache_dir();
        EncryptedImage {
            image: dir.join(format!("{stem}.img")),
            index: dir.join(format!("{stem}.index")),
        }
    }

    /// Built, in a cache that is ours alone ([`super::private_cache`]: an image another user
    /// put in a shared cache directory is never used; the refusal is said once).
    pub fn is_built(&self) -> bool {
        if let Some(dir) = self.image.parent() {
            if let Err(err) = super::private_cache(dir) {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| log::warn!("{err:#}"));
                return false;
            }
        }
        self.image.is_file() && self.index.is_file()
    }

    /// path -> inode number, from the index the guest wrote.
    pub fn read_index(&self) -> Result<BTreeMap<String, u32>> {
        read_index(&self.index)
    }
}

/// Parse an index: one `INO PATH` line per entry.
pub fn read_index(path: &Path) -> Result<BTreeMap<String, u32>> {
    // A regular file only (never a wait on a FIFO), at most 64 MiB.
    let bytes =
        tracer_common::files::read_regular(path, tracer_common::files::Symlinks::Follow, 64 << 20)
            .with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8(bytes).with_context(|| format!("reading {}", path.display()))?;
    let mut index = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let parsed = line
            .split_once(' ')
            .and_then(|(ino, path)| Some((ino.parse::<u32>().ok()?, path)));
        let Some((ino, entry)) = parsed else {
            bail!(
                "{}:{}: not `INO PATH`: {line:?}",
                path.display(),
                number + 1
            );
        };
        if index.insert(entry.to_string(), ino).is_some() {
            bail!("{}:{}: {entry} twice", path.display(), number + 1);
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests;
