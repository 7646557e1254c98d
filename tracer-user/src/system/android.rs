//! Android's conventions: SELinux, what to do when it refuses BPF, and the paths a phone has.
//!
//! Every function takes the root of the file system (`/` in the product, a directory standing
//! in for it in tests), so the phone's files can be faked on a PC.
use std::{
    io,
    path::{Path, PathBuf},
};

/// Where Android keeps uid -> package names.
pub(crate) const PACKAGES_LIST: &str = "data/system/packages.list";
/// The one directory a phone gives shell and root for scratch files (there is no /tmp).
pub(crate) const PHONE_SCRATCH: &str = "data/local/tmp";
const SELINUX_ENFORCE: &str = "sys/fs/selinux/enforce";
const BUILD_PROP: &str = "system/build.prop";

/// SELinux as /sys/fs/selinux/enforce says; absent when the kernel has no SELinux mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Selinux {
    Enforcing,
    Permissive,
}

impl std::fmt::Display for Selinux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Selinux::Enforcing => "enforcing",
            Selinux::Permissive => "permissive",
        })
    }
}

/// SELinux's mode under `root`, `None` when there is no readable enforce file (or it says
/// something other than 0 or 1).
pub(crate) fn selinux(root: &Path) -> Option<Selinux> {
    let text = read_small(&root.join(SELINUX_ENFORCE))?;
    match text.trim() {
        "1" => Some(Selinux::Enforcing),
        "0" => Some(Selinux::Permissive),
        _ => None,
    }
}

/// `ro.build.type` from /system/build.prop: "user", "userdebug" or "eng"; `None` off Android.
pub(crate) fn build_type(root: &Path) -> Option<String> {
    let text = read_small(&root.join(BUILD_PROP))?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix("ro.build.type="))
        .map(|value| value.trim().to_string())
}

/// Whether `root` looks like an Android system (it has /system/build.prop).
#[cfg(test)]
pub(crate) fn is_android(root: &Path) -> bool {
    root.join(BUILD_PROP).is_file()
}

/// The packages.list text under `root`, when the file is there (on a phone, as root).
pub(crate) fn packages_list(root: &Path) -> Option<String> {
    read_small(&root.join(PACKAGES_LIST))
}

/// A system file's text: a regular file only (never a wait on a FIFO), at most 16 MiB.
fn read_small(path: &Path) -> Option<String> {
    let bytes =
        tracer_common::files::read_regular(path, tracer_common::files::Symlinks::Follow, 16 << 20)
            .ok()?;
    String::from_utf8(bytes).ok()
}

/// Where scratch files and default outputs go: /tmp, else /data/local/tmp (a phone), else /tmp
/// all the same (so the error names the usual place).
pub(crate) fn scratch_dir(root: &Path) -> PathBuf {
    let tmp = root.join("tmp");
    let phone = root.join(PHONE_SCRATCH);
    if !tmp.is_dir() && phone.is_dir() {
        phone
    } else {
        tmp
    }
}

/// The errno of the first OS error in the chain when it is a refusal (EPERM or EACCES).
fn refusal(err: &anyhow::Error) -> Option<&'static str> {
    err.chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .find_map(|io_err| match io_err.raw_os_error() {
            Some(libc::EPERM) => Some("EPERM"),
            Some(libc::EACCES) => Some("EACCES"),
            _ => None,
        })
}

/// The line `nodescope probe` shows when loading or attaching BPF failed: what to do when
/// the kernel refused (EPERM/EACCES), else the error chain.
pub(crate) fn explain_bpf_failure(root: &Path, err: &anyhow::Error) -> String {
    let Some(errno) = refusal(err) else {
        return format!("BPF self-test failed: {err:#}");
    };
    let selinux = selinux(root);
    let mut line = format!("BPF refused ({errno})");
    if let Some(mode) = selinux {
        line.push_str(&format!(" with SELinux {mode}"));
    }
    line.push_str(": ");
    line.push_str(&what_to_do(selinux, build_type(root).as_deref()));
    line
}

/// On Android, what lets bpf() and perf_event_open through, for this build type.
fn what_to_do(selinux: Option<Selinux>, build_type: Option<&str>) -> String {
    const ADB_ROOT: &str = "on a userdebug or eng build run `adb root`, then `adb shell` and \
                            nodescope again (adbd's root runs in a domain SELinux lets use BPF)";
    const SETENFORCE: &str = "on a rooted user build run `su -c setenforce 0` (until reboot; \
                              `setenforce 1` restores it)";
    match (selinux, build_type) {
        (Some(Selinux::Enforcing), Some("userdebug" | "eng")) => ADB_ROOT.into(),
        (Some(Selinux::Enforcing), Some("user")) => SETENFORCE.into(),
        (Some(Selinux::Enforcing), _) => format!("{ADB_ROOT}; {SETENFORCE}"),
        (Some(Selinux::Permissive), _) => {
            "SELinux is not the cause: run nodescope as root (`adb root` or `su`)".into()
        }
        (None, _) => "run nodescope as root, or with CAP_BPF and CAP_PERFMON; on a phone, \
                      `adb root` (userdebug) or `su` (rooted)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory standing in for a phone's root.
    fn phone(enforce: Option<&str>, build_type: Option<&str>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        if let Some(enforce) = enforce {
            std::fs::create_dir_all(root.path().join("sys/fs/selinux")).unwrap();
            std::fs::write(root.path().join(SELINUX_ENFORCE), enforce).unwrap();
        }
        if let Some(build_type) = build_type {
            std::fs::create_dir_all(root.path().join("system")).unwrap();
            let prop = format!("ro.build.version.sdk=34\nro.build.type={build_type}\n");
            std::fs::write(root.path().join(BUILD_PROP), prop).unwrap();
        }
        root
    }

    /// What aya's loader returns when the kernel refuses: an OS error under context lines.
    fn refused(errno: i32) -> anyhow::Error {
        anyhow::Error::new(io::Error::from_raw_os_error(errno))
            .context("`bpf_prog_load` failed")
            .context("loading the eBPF object into the kernel")
    }

    #[test]
    fn selinux_mode_comes_from_the_enforce_file() {
        assert_eq!(
            selinux(phone(Some("1"), None).path()),
            Some(Selinux::Enforcing)
        );
        assert_eq!(
            selinux(phone(Some("0\n"), None).path()),
            Some(Selinux::Permissive)
        );
        assert_eq!(selinux(phone(None, None).path()), None);
        assert_eq!(selinux(phone(Some("x"), None).path()), None);
    }

    #[test]
    fn refused_on_a_userdebug_phone_says_adb_root_and_no_error_chain() {
        let root = phone(Some("1"), Some("userdebug"));
        let line = explain_bpf_failure(root.path(), &refused(libc::EACCES));
        assert!(
            line.starts_with("BPF refused (EACCES) with SELinux enforcing: "),
            "{line}"
        );
        assert!(line.contains("`adb root`"), "{line}");
        assert!(!line.contains("setenforce"), "{line}");
        assert!(!line.contains("bpf_prog_load"), "{line}");
    }

    #[test]
    fn refused_on_a_rooted_user_build_says_setenforce() {
        let root = phone(Some("1"), Some("user"));
        let line = explain_bpf_failure(root.path(), &refused(libc::EPERM));
        assert!(
            line.starts_with("BPF refused (EPERM) with SELinux enforcing: "),
            "{line}"
        );
        assert!(line.contains("`su -c setenforce 0`"), "{line}");
        assert!(!line.contains("adb root"), "{line}");
    }

    #[test]
    fn refused_with_an_unknown_build_type_gives_both_ways() {
        let line = explain_bpf_failure(phone(Some("1"), None).path(), &refused(libc::EPERM));
        assert!(
            line.contains("`adb root`") && line.contains("setenforce 0"),
            "{line}"
        );
        let line = explain_bpf_failure(phone(Some("0"), None).path(), &refused(libc::EPERM));
        assert!(
            line.contains("SELinux permissive: SELinux is not the cause"),
            "{line}"
        );
    }

    #[test]
    fn other_failures_keep_their_error_chain() {
        let err = anyhow::Error::new(io::Error::from_raw_os_error(libc::EINVAL))
            .context("loading the eBPF object into the kernel");
        let line = explain_bpf_failure(phone(Some("1"), Some("user")).path(), &err);
        assert!(
            line.starts_with("BPF self-test failed: loading the eBPF object into the kernel: "),
            "{line}"
        );
    }

    #[test]
    fn phone_paths_packages_list_and_scratch() {
        let root = phone(Some("1"), Some("user"));
        assert!(is_android(root.path()));
        assert_eq!(build_type(root.path()).as_deref(), Some("user"));
        assert_eq!(packages_list(root.path()), None);
        std::fs::create_dir_all(root.path().join("data/system")).unwrap();
        std::fs::write(
            root.path().join(PACKAGES_LIST),
            "com.a 10123 0 /d default 3003\n",
        )
        .unwrap();
        assert_eq!(
            packages_list(root.path()).as_deref(),
            Some("com.a 10123 0 /d default 3003\n")
        );

        // No /tmp and no /data/local/tmp: /tmp all the same; a phone: /data/local/tmp.
        assert_eq!(scratch_dir(root.path()), root.path().join("tmp"));
        std::fs::create_dir_all(root.path().join(PHONE_SCRATCH)).unwrap();
        assert_eq!(scratch_dir(root.path()), root.path().join(PHONE_SCRATCH));
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        assert_eq!(scratch_dir(root.path()), root.path().join("tmp"));
        assert!(!is_android(phone(None, None).path()));
    }
}
