//! Facts about the running system: privileges, tracefs, kernel features, F2FS devices.
use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use tracer_common::knobs::{INTERVAL_FILE, THRESHOLD_FILE};

pub(crate) mod android;
pub(crate) mod block;

/// "major:minor" from the kernel's dev_t encoding as F2FS tracepoints print it
/// (major << 20 | minor).
pub(crate) fn major_minor(dev: u32) -> String {
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The effective capabilities that matter for tracing.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub(crate) struct Privileges {
    pub root: bool,
    pub cap_bpf: bool,
    pub(crate) cap_perfmon: bool,
    pub(crate) cap_sys_admin: bool,
}

impl Privileges {
    pub(crate) fn current() -> Result<Privileges> {
        let status =
            fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
        let cap_eff = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .map(|hex| u64::from_str_radix(hex.trim(), 16))
            .transpose()
            .context("parsing CapEff in /proc/self/status")?
            .unwrap_or(0);
        let has = |cap: u32| cap_eff & (1u64 << cap) != 0;
        Ok(Privileges {
            root: is_root(),
            cap_bpf: has(CAP_BPF),
            cap_perfmon: has(CAP_PERFMON),
            cap_sys_admin: has(CAP_SYS_ADMIN),
        })
    }

    /// Loading tracing programs needs CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN on older kernels.
    pub(crate) fn may_trace(&self) -> bool {
        (self.cap_bpf && self.cap_perfmon) || self.cap_sys_admin
    }
}

/// This process's effective user id: the one the kernel checks permissions against.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process runs as root (loading eBPF programs, writing the RFC's knobs).
pub fn is_root() -> bool {
    euid() == 0
}

const TRACEFS_CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The mounted tracefs, if any (a mount point with an `events` directory).
pub fn tracefs() -> Option<PathBuf> {
    TRACEFS_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|path| path.join("events").is_dir())
}

/// Find tracefs, mounting it at /sys/kernel/tracing when it exists but is not mounted (a fresh
/// machine often has it unmounted; we need it to attach tracepoints). Returns the path and
/// whether we mounted it.
pub fn ensure_tracefs() -> Result<(PathBuf, bool)> {
    if let Some(path) = tracefs() {
        return Ok((path, false));
    }
    let target = Path::new(TRACEFS_CANDIDATES[0]);
    mount_pseudo("tracefs", target)?;
    anyhow::ensure!(
        target.join("events").is_dir(),
        "tracefs mounted but has no events/"
    );
    Ok((target.to_path_buf(), true))
}

fn mount_pseudo(fstype: &str, target: &Path) -> Result<()> {
    let c_type = std::ffi::CString::new(fstype)?;
    let c_target = std::ffi::CString::new(target.as_os_str().as_encoded_bytes())?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; data is null.
    let rc = unsafe {
        libc::mount(
            c_type.as_ptr(),
            c_target.as_ptr(),
            c_type.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mounting {fstype} at {}", target.display()));
    }
    Ok(())
}

pub(crate) fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn has_btf() -> bool {
    Path::new("/sys/kernel/btf/vmlinux").exists()
}

/// A perf PMU for kprobes exists only when the kernel has CONFIG_KPROBES (+ KPROBE_EVENTS).
pub(crate) fn has_kprobes() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

pub(crate) fn has_uprobes() -> bool {
    Path::new("/sys/bus/event_source/devices/uprobe").exists()
}

/// F2FS is usable when the kernel has registered the filesystem (built in or module loaded).
pub fn has_f2fs() -> bool {
    let registered = fs::read_to_string("/proc/filesystems")
        .map(|list| {
            list.lines()
                .any(|line| line.split_whitespace().last() == Some("f2fs"))
        })
        .unwrap_or(false);
    registered || Path::new("/sys/fs/f2fs").is_dir()
}

/// The F2FS tracepoint names nodescope knows, across kernel versions.
pub(crate) const F2FS_TRACEPOINT_VARIANTS: [&str; 7] = [
    "f2fs_submit_page_bio",
    "f2fs_submit_folio_bio",
    "f2fs_submit_read_bio",
    "f2fs_submit_page_write",
    "f2fs_submit_folio_write",
    "f2fs_write_checkpoint",
    "f2fs_iostat",
];

/// Which of the known F2FS tracepoints this kernel has (needs tracefs).
pub fn f2fs_tracepoints(tracefs: Option<&Path>) -> Vec<String> {
    let Some(tracefs) = tracefs else {
        return Vec::new();
    };
    F2FS_TRACEPOINT_VARIANTS
        .iter()
        .filter(|name| tracefs.join("events/f2fs").join(name).is_dir())
        .map(|name| name.to_string())
        .collect()
}

/// One mounted F2FS device as /sys/fs/f2fs/<dev> shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct F2fsDevice {
    pub name: String,
    pub node_compress_threshold: bool,
    pub node_compress_interval: bool,
}

pub(crate) fn f2fs_devices(sysfs_root: &Path) -> Vec<F2fsDevice> {
    let Ok(entries) = fs::read_dir(sysfs_root) else {
        return Vec::new();
    };
    let mut devices: Vec<F2fsDevice> = entries
        .flatten()
        .filter(|entry| entry.path().join("cp_interval").exists())
        .map(|entry| F2fsDevice {
            name: entry.file_name().to_string_lossy().into_owned(),
            node_compress_threshold: entry.path().join(THRESHOLD_FILE).exists(),
            node_compress_interval: entry.path().join(INTERVAL_FILE).exists(),
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

/// Give the heap's free pages back to the kernel: glibc keeps what a source's start freed (a
/// parsed vmlinux BTF, 40 MB resident, left 14 MB after it was dropped and 2 MB after this,
/// measured on this machine's 5.5 MB BTF). Where the C library has no malloc_trim, nothing.
pub(crate) fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers; it walks the allocator's own free lists, under
    // the allocator's locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `clock` now, in nanoseconds (CLOCK_MONOTONIC, the eBPF programs' clock; CLOCK_BOOTTIME).
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid, owned timespec; the clocks nodescope reads
    // (MONOTONIC, BOOTTIME) always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec as u64) * 1_000_000_000 + now.tv_nsec as u64
}

pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Create `dir` as 0700 or accept it only when it already is ours and private: a predictable
/// name in a shared /tmp may have been prepared by someone else, with symlinks inside that
/// would make us (perhaps root) write their targets. `what` names the directory in the
/// refusal.
pub(crate) fn private_dir(dir: &Path, what: &str) -> Result<()> {
    let problem = tracer_common::files::private_dir_problem(dir)
        .with_context(|| format!("preparing {what} {}", dir.display()))?;
    match problem {
        None => Ok(()),
        Some(problem) => bail!(
            "refusing {what} {}: it {problem}; remove it (rm -r {0}) \
             if you do not know who made it, or set XDG_RUNTIME_DIR to a private directory",
            dir.display()
        ),
    }
}
