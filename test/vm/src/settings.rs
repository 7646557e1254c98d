//! The VM test's settings that the phases share: the file set, its replays, the pressure
//! phase's memory and PSI goal, the guest's time. It imports no phase.
use std::time::Duration;

/// The file set, as the RFC's VM replay has it.
pub(super) const NDIRS: u64 = 256;

pub(super) const NFILES: u64 = 64;

/// Fallback node-read probes checked too, on the first VARIANT_DIRS directories.
pub(super) const VARIANTS: [&str; 2] = ["kprobe", "read-bio"];

/// A probe manifest that maps RFC event kinds to a mainline function, so the RFC probe programs
/// run as a kprobe and a kretprobe on a real kernel, where their counts can be checked against
/// the kernel's own hist trigger.
pub(super) const RFC_PROBES: &str = r#"target = "kernel"

[[probe]]
kind = "restore"
symbol = "f2fs_get_node_page"   # (struct f2fs_sb_info *sbi, pgoff_t nid)
nid = "arg1"

[[probe]]
kind = "convert"
symbol = "f2fs_get_node_page"
at = "return"
nid = "arg1"
"#;

pub(super) const VARIANT_DIRS: u64 = 16;

/// Memory the pressure phase leaves outside its tmpfs (of the guest's 2 GiB): enough to run,
/// too little to keep the file set's 64 MiB of node pages cached.
pub(super) const HEADROOM_MB: u64 = 40;

/// `nodescope tune --psi-goal` in the pressure phase, percent. The replays through the hog's
/// headroom stall 114 to 269 ms in all (6.1 and 6.12, thirteen runs), 0.3 to 6 % of the second
/// before the highest step; the rest of the boot stalls under 0.2 ms. check.rs wants every
/// step at 1.1 x the goal or more (the PSI trigger's own share).
pub(super) const TUNE_PSI_GOAL: f64 = 0.1;

/// The whole guest run. With the churn phase (355 s of 6.12's run on a loaded 2-core host) the
/// 6.12 guest was still in its last phase at 600 s.
pub(super) const VM_TIMEOUT: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Replay {
    /// `cat /mnt/t/d-N/f-0 ... /mnt/t/d-N/f-63`: cat does every lookup.
    Names,
    /// `cat /mnt/t/d-N/*`: the shell lists the directory, and F2FS reads its inodes ahead.
    Glob,
}

/// One cat per directory, the names written out here so that no shell loop runs in the timed
/// window (a busybox loop building 16,384 names costs about 20 s under TCG). Absolute paths:
/// a `cd` would make the shell, not cat, read the root and /mnt/t inodes.
pub(super) fn replay_script(replay: Replay, ndirs: u64) -> String {
    let mode = if replay == Replay::Glob {
        "glob"
    } else {
        "names"
    };
    replay_dirs(replay, 0..ndirs, mode)
}

/// [`replay_script`] over the directories `dirs`; the shell's pid goes to shell_<mode>.pid.
pub(super) fn replay_dirs(replay: Replay, dirs: std::ops::Range<u64>, mode: &str) -> String {
    let mut script = format!("#!/bin/sh\necho $$ > /results/shell_{mode}.pid\n");
    for dir in dirs {
        script.push_str("cat");
        if replay == Replay::Glob {
            script.push_str(&format!(" /mnt/t/d-{dir}/*"));
        } else {
            for file in 0..NFILES {
                script.push_str(&format!(" /mnt/t/d-{dir}/f-{file}"));
            }
        }
        script.push_str(" > /dev/null\n");
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_scripts_have_one_cat_per_directory() {
        let names = replay_script(Replay::Names, 2);
        let lines: Vec<&str> = names.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1], "echo $$ > /results/shell_names.pid");
        assert!(lines[2].starts_with("cat /mnt/t/d-0/f-0 /mnt/t/d-0/f-1 "));
        assert!(lines[3].ends_with(" /mnt/t/d-1/f-63 > /dev/null"));
        assert_eq!(lines[3].matches("/mnt/t/").count() as u64, NFILES);
        let glob = replay_script(Replay::Glob, 256);
        assert_eq!(glob.lines().last(), Some("cat /mnt/t/d-255/* > /dev/null"));
    }
}
