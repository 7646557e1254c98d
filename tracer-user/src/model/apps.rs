//! Who an event belongs to: an Android app (uid -> package from packages.list), a kernel
//! thread group, or a program.
use std::{collections::HashMap, path::Path};

use anyhow::{Context as _, Result};

/// Android: uid = user * 100000 + app id; apps are app ids 10000..19999.
const PER_USER_RANGE: u32 = 100_000;
const FIRST_APP_ID: u32 = 10_000;
const LAST_APP_ID: u32 = 19_999;

/// The longest packages list read.
const MAX_PACKAGES_BYTES: u64 = 16 << 20;

/// uid (app id, user 0) -> package names, from /data/system/packages.list.
#[derive(Clone, Debug, Default)]
pub struct Packages {
    by_app_id: HashMap<u32, Vec<String>>,
}

impl Packages {
    pub fn load(path: &Path) -> Result<Packages> {
        use std::io::Read as _;
        let context = || format!("reading packages list {}", path.display());
        let file = std::fs::File::open(path).with_context(context)?;
        // A packages.list is a few hundred KiB: a longer file (or /dev/zero) is not one.
        let mut text = String::new();
        file.take(MAX_PACKAGES_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(context)?;
        anyhow::ensure!(
            text.len() as u64 <= MAX_PACKAGES_BYTES,
            "{}: longer than {} MiB, not a packages list",
            context(),
            MAX_PACKAGES_BYTES >> 20
        );
        Ok(Packages::parse(&text))
    }

    /// `name uid debuggable dataDir seinfo gids ...`, one package a line. Packages that share a
    /// uid (sharedUserId) are all kept; malformed lines are skipped.
    pub fn parse(text: &str) -> Packages {
        let mut by_app_id: HashMap<u32, Vec<String>> = HashMap::new();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(name), Some(uid)) = (fields.next(), fields.next()) else {
                continue;
            };
            let Ok(uid) = uid.parse::<u32>() else {
                continue;
            };
            let names = by_app_id.entry(uid % PER_USER_RANGE).or_default();
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
                names.sort();
            }
        }
        Packages { by_app_id }
    }

    /// The packages from `path` when given, else from `fallback` (the text a source brought),
    /// else none.
    /// The packages file's own name is in any error (not the recording's or the source's).
    pub fn from_file_or(path: Option<&Path>, fallback: Option<String>) -> Result<Packages> {
        let packages = match (path, fallback) {
            (Some(path), _) => Packages::load(path)?,
            (None, Some(text)) => Packages::parse(&text),
            (None, None) => return Ok(Packages::default()),
        };
        log::debug!("{} apps in packages.list", packages.len());
        Ok(packages)
    }

    pub fn len(&self) -> usize {
        self.by_app_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_app_id.is_empty()
    }

    /// The app name for a uid: its package (or the packages sharing it), with the Android user
    /// when it is not user 0. None for uids that are not apps.
    pub fn app_name(&self, uid: u32) -> Option<String> {
        let app_id = uid % PER_USER_RANGE;
        if !(FIRST_APP_ID..=LAST_APP_ID).contains(&app_id) {
            return None;
        }
        let user = uid / PER_USER_RANGE;
        let base = match self.by_app_id.get(&app_id) {
            Some(names) => names.join("+"),
            None => format!("app {app_id}"),
        };
        Some(if user == 0 {
            base
        } else {
            format!("{base} (user {user})")
        })
    }
}

/// How processes are grouped in the per-app table.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(tag = "kind", content = "name", rename_all = "lowercase")]
pub enum AppKey {
    /// An Android app (package name, or several for a shared uid).
    App(String),
    /// Kernel threads, grouped by name without their instance suffix (kworker, f2fs_ckpt ...).
    Kernel(String),
    /// Any other process, grouped by program name.
    Program(String),
}

impl AppKey {
    pub fn name(&self) -> &str {
        match self {
            AppKey::App(name) | AppKey::Kernel(name) | AppKey::Program(name) => name,
        }
    }
}

/// Kernel threads that do node I/O; their comms carry instance suffixes.
const KERNEL_THREAD_PREFIXES: [&str; 9] = [
    "kworker/",
    "f2fs_",
    "kswapd",
    "kcompactd",
    "jbd2/",
    "ksoftirqd/",
    "writeback",
    "khugepaged",
    "kthreadd",
];

/// Whether a comm names a kernel thread.
pub fn is_kernel_thread(comm: &str) -> bool {
    KERNEL_THREAD_PREFIXES.iter().any(|p| comm.starts_with(p))
}

/// The group name of a kernel thread: `kworker/u8:2` -> `kworker`, `f2fs_ckpt-254:0` -> `f2fs_ckpt`.
fn kernel_group(comm: &str) -> &str {
    let end = comm.find(['/', '-']).unwrap_or(comm.len());
    &comm[..end]
}

pub fn classify(packages: &Packages, uid: u32, comm: &str) -> AppKey {
    if is_kernel_thread(comm) {
        return AppKey::Kernel(kernel_group(comm).to_string());
    }
    match packages.app_name(uid) {
        Some(app) => AppKey::App(app),
        None => AppKey::Program(comm.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKAGES_LIST: &str = "\
com.whatsapp 10123 0 /data/user/0/com.whatsapp default:targetSdkVersion=34 3003 0 452
com.android.chrome 10087 0 /data/user/0/com.android.chrome default:targetSdkVersion=34 3003 0 5
com.google.android.gms 10045 0 /data/user/0/com.google.android.gms default 3002,3003 0 1
com.google.android.gsf 10045 0 /data/user/0/com.google.android.gsf default 3002,3003 0 1
broken-line
also.broken notanumber 0
";

    #[test]
    fn packages_list_maps_uids_to_apps_with_users_and_shared_uids() {
        let packages = Packages::parse(PACKAGES_LIST);
        assert_eq!(packages.len(), 3);
        assert_eq!(packages.app_name(10123).as_deref(), Some("com.whatsapp"));
        assert_eq!(
            packages.app_name(1_010_123).as_deref(),
            Some("com.whatsapp (user 10)")
        );
        assert_eq!(
            packages.app_name(10045).as_deref(),
            Some("com.google.android.gms+com.google.android.gsf")
        );
        assert_eq!(packages.app_name(10999).as_deref(), Some("app 10999"));
        assert_eq!(packages.app_name(1000), None, "system uid is not an app");
        assert_eq!(packages.app_name(0), None);
    }

    #[test]
    fn kernel_threads_are_kept_apart_from_apps_and_programs() {
        let packages = Packages::parse(PACKAGES_LIST);
        assert_eq!(
            classify(&packages, 0, "kworker/u8:2"),
            AppKey::Kernel("kworker".into())
        );
        assert_eq!(
            classify(&packages, 0, "f2fs_ckpt-254:0"),
            AppKey::Kernel("f2fs_ckpt".into())
        );
        assert_eq!(
            classify(&packages, 0, "f2fs_gc-254:0"),
            AppKey::Kernel("f2fs_gc".into())
        );
        assert_eq!(
            classify(&packages, 10087, "Chrome_IOThread"),
            AppKey::App("com.android.chrome".into())
        );
        assert_eq!(classify(&packages, 0, "cat"), AppKey::Program("cat".into()));
    }
}
