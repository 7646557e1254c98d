//! Who an event belongs to: an Android app (uid -> package from packages.list), a kernel
//! thread group, or a program.
use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
};

use anyhow::{Context as _, Result};

/// Android: uid = user * 100000 + app id; apps are app ids 10000..19999.
const PER_USER_RANGE: u32 = 100_000;
const FIRST_APP_ID: u32 = 10_000;
const LAST_APP_ID: u32 = 19_999;

/// The longest packages list read.
const MAX_PACKAGES_BYTES: u64 = 16 << 20;
/// Packages named per uid. A sharedUserId group of apps is a handful of packages; a list
/// (or a recording's header) with thousands on one uid is crafted, and every one of them
/// would go into that app's name in every table and metric. The rest are only counted.
const MAX_PACKAGES_PER_UID: usize = 64;

/// uid (app id, user 0) -> package names, from /data/system/packages.list.
#[derive(Clone, Debug, Default)]
pub struct Packages {
    by_app_id: HashMap<u32, Shared>,
}

/// The packages of one uid: the first [`MAX_PACKAGES_PER_UID`] names in order, and how many
/// more lines named others.
#[derive(Clone, Debug, Default)]
struct Shared {
    names: BTreeSet<String>,
    more: usize,
}

impl Shared {
    /// O(log cap) whatever the list holds: the parse stays linear in its length.
    fn add(&mut self, name: &str) {
        if self.names.contains(name) {
            return;
        }
        if self.names.len() < MAX_PACKAGES_PER_UID {
            self.names.insert(name.to_string());
            return;
        }
        self.more += 1;
        // Keep the first names in order whatever the order of the lines.
        if self.names.last().is_some_and(|last| name < last.as_str()) {
            self.names.pop_last();
            self.names.insert(name.to_string());
        }
    }

    fn name(&self) -> String {
        let joined = self
            .names
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("+");
        if self.more == 0 {
            joined
        } else {
            format!("{joined} (+{} more)", self.more)
        }
    }
}

impl Packages {
    pub fn load(path: &Path) -> Result<Packages> {
        let context = || format!("reading packages list {}", path.display());
        // A packages.list is a few hundred KiB: a longer file (or /dev/zero) is not one, and a
        // FIFO is refused, never waited on.
        let bytes = tracer_common::files::read_regular(
            path,
            tracer_common::files::Symlinks::Follow,
            MAX_PACKAGES_BYTES,
        )
        .with_context(context)?;
        let text = String::from_utf8(bytes).with_context(context)?;
        Ok(Packages::parse(&text))
    }

    /// `name uid debuggable dataDir seinfo gids ...`, one package a line. Packages that share a
    /// uid (sharedUserId) are kept, up to [`MAX_PACKAGES_PER_UID`] names each; malformed lines
    /// are skipped.
    pub fn parse(text: &str) -> Packages {
        let mut by_app_id: HashMap<u32, Shared> = HashMap::new();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(name), Some(uid)) = (fields.next(), fields.next()) else {
                continue;
            };
            let Ok(uid) = uid.parse::<u32>() else {
                continue;
            };
            by_app_id.entry(uid % PER_USER_RANGE).or_default().add(name);
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
            Some(shared) => shared.name(),
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
pub(crate) fn is_kernel_thread(comm: &str) -> bool {
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

    /// 80,000 packages on one uid (issue 33, finding 5: a crafted list or recording header;
    /// this took 22 s of CPU when each insert scanned and sorted the uid's names): the first
    /// names in order are kept, the rest counted, and the other uids are unaffected.
    #[test]
    fn many_packages_on_one_uid_are_capped_and_counted() {
        let mut text = String::from("com.whatsapp 10123 0 /data x 3003\n");
        // Descending, so that every insert lands first (the worst case for a sorted vector).
        for i in (0..80_000).rev() {
            text.push_str(&format!("pkg.{i:05} 10200 0 /data x 3003\n"));
        }
        text.push_str("pkg.00000 10200 0 /data x 3003\n"); // a repeat, kept once
        let packages = Packages::parse(&text);
        assert_eq!(packages.len(), 2);
        let first: Vec<String> = (0..MAX_PACKAGES_PER_UID)
            .map(|i| format!("pkg.{i:05}"))
            .collect();
        let more = 80_000 - MAX_PACKAGES_PER_UID;
        assert_eq!(
            packages.app_name(10200),
            Some(format!("{} (+{more} more)", first.join("+")))
        );
        assert_eq!(packages.app_name(10123).as_deref(), Some("com.whatsapp"));
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
