//! The VM test's access-trace phase (issue 13; guest.sh: accesses_phase). In the guest
//! `nodescope record --accesses` recorded the RFC file-set replay while a kprobe_events hist
//! trigger counted calls of the same node lookup function (armed before nodescope attached,
//! read after it stopped). Here: the recording's node_access events (from `nodescope report
//! --json`), nodescope's own in-kernel count (record's closing note) and the hist trigger's
//! count are one number, with no event lost. The recording spans the cold replay of the file
//! set, a cache drop (every node page evicted: node_evict events) and a second pass over the
//! last directories, so the host's `nodescope whatif` on it with the guest's disk has memory
//! pressure to act on: off and on at 3 MiB differ in what the second pass finds cached. Then,
//! their node pages dropped and their inodes kept, two passes ask those files for an xattr at
//! once (`xattrpass`), so that lookups wait on each other's reads (the waited outcome, issue
//! 51). Two `cat`s of the same cold files would not: the second finds the inode in the inode
//! cache, or waits on the data page, never inside a node lookup.
use std::{fs, path::Path, process::Command};

use anyhow::{ensure, Context as _, Result};
use serde_json::Value;

/// The recording the guest leaves in /results, for the host's `nodescope whatif` with the
/// guest's disk image.
pub const RECORDING: &str = "accesses.nsr";

/// The second pass of the phase, after caches were dropped: the last VARIANT_DIRS
/// directories of the file set, the most recently read ones, which a cache held to a budget
/// at the drop would still hold in part (raw) or more of (compressed).
pub fn tail_replay() -> String {
    let (all, tail) = (super::settings::NDIRS, super::settings::VARIANT_DIRS);
    super::settings::replay_dirs(super::settings::Replay::Names, all - tail..all, "tail")
}

/// The xattr pass over the tail's files, by name (guest.sh; xattrpass.c).
pub fn xattr_tail() -> String {
    let all = super::settings::NDIRS;
    // Two directories: the passes' reads are throttled to 100 a second (guest.sh).
    let files: Vec<String> = (all - 2..all)
        .flat_map(|d| (0..super::settings::NFILES).map(move |f| format!("/mnt/t/d-{d}/f-{f}")))
        .collect();
    format!("#!/bin/sh\nexec xattrpass {}\n", files.join(" "))
}

/// Build xattrpass.c for `arch` into `dir`; its path.
pub fn build_xattrpass(arch: crate::Arch, dir: &Path) -> Result<std::path::PathBuf> {
    super::uidswitch::build_c_helper_for(
        arch,
        dir,
        "xattrpass",
        include_str!("../guest/xattrpass.c"),
    )
}

/// The budget of the host's what-if on the guest's recording (issue 13: off vs on at 3 MiB).
const WHATIF_BUDGET: &str = "3MiB";

/// Which hook the lookup function must get.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LookupHook {
    /// Its BPF trampoline (x86_64, trampolines from 5.5).
    Fentry,
    /// Its trampoline, or the kprobe with the kernel's refusal of the trampoline in the attach
    /// report (Debian's arm64 6.1 refuses trampolines on the f2fs module's functions:
    /// ENOTSUPP, seen in its VM run).
    FentryOrRefusal,
}

/// Check the phase; `accesses=<recorded>/<kernel's hist count>` for the VM line (and the hook
/// the lookups got, unless it must be fentry). `disk` is the guest's F2FS image, which the
/// host's `nodescope whatif` reads the node blocks from.
pub fn check(
    dir: &Path,
    disk: &Path,
    nodescope: &Path,
    hook: LookupHook,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) -> String {
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    let function = read("accesses_plan.txt")
        .lines()
        .find_map(|l| l.strip_prefix("node_access").map(str::trim))
        .unwrap_or("")
        .to_string();
    let hist = super::results::hist_hits(&read("accesses_hist.txt"));
    let inode_hist = super::results::hist_hits(&read("inode_evict_hist.txt"));
    let record_err = read("accesses_record.err");
    let (counted, evictions_counted) = kernel_counts(&record_err).unzip();
    let inodes_counted = inode_evictions_counted(&record_err);
    let report = serde_json::from_str::<Value>(&read("accesses_report.json"));
    let (recorded, evicted, drops) = match &report {
        Ok(report) => recording_counts(report),
        Err(err) => {
            failures.push(format!("accesses: no report of {RECORDING}: {err:#}"));
            (0, 0, 0)
        }
    };
    let inodes_recorded = report
        .as_ref()
        .map_or(0, |r| device_sum(r, "inode_evictions"));
    if let Ok(report) = &report {
        let outside = reads_outside_lookups(nodescope, &dir.join(RECORDING));
        check_retrievals(dir, report, recorded, outside, lines, failures);
    }
    lines.push(format!(
        "  accesses {function}: recorded {recorded} node_access ({drops} lost), counted in the \
         kernel {counted:?}, kprobe_events hist {hist:?}; node_evict recorded {evicted}, \
         counted {evictions_counted:?}; inode_evict recorded {inodes_recorded}, counted \
         {inodes_counted:?}, f2fs_evict_inode hist {inode_hist:?}"
    ));
    let rc = read("accesses_record.rc");
    if rc.trim() != "0" {
        failures.push(format!("accesses: record exit status {:?}", rc.trim()));
    }
    // x86_64 has BPF trampolines from 5.5, arm64 from 6.0: the lookup function is hooked by
    // fentry, and the record attached it so (not the kprobe fallback).
    // 6.15 and later look nodes up through three functions (`fentry a + fentry b + ...`):
    // each one is checked.
    let mut got = String::new();
    for planned in function.split(" + ") {
        let Some(name) = planned.strip_prefix("fentry ") else {
            failures.push(format!("accesses: no lookup fentry planned: {function:?}"));
            continue;
        };
        let refused = refused_trampoline(&record_err, name);
        match (
            hook,
            on_trampolines(&record_err, &[name]).as_slice(),
            refused,
        ) {
            (_, [], _) => {}
            (LookupHook::FentryOrRefusal, _, Some(why)) => {
                lines.push(format!(
                    "  accesses {name}: the kernel refused its trampoline: {why}"
                ));
                got = " hook=kprobe(fentry refused)".into();
            }
            (_, problems, _) => failures.extend(problems.iter().map(|p| format!("accesses: {p}"))),
        }
    }
    if hist.is_none_or(|h| h == 0) || Some(recorded) != hist || counted != hist || drops != 0 {
        failures.push(format!(
            "accesses: recorded {recorded} (lost {drops}) and counted {counted:?} must equal \
             the hist trigger's {hist:?}"
        ));
    }
    // drop_caches 2 at the end evicts every unused inode: some, and each one recorded.
    if inode_hist.is_none_or(|h| h == 0)
        || Some(inodes_recorded) != inode_hist
        || inodes_counted != inode_hist
    {
        failures.push(format!(
            "accesses: inode_evict recorded {inodes_recorded} and counted {inodes_counted:?} \
             must equal the hist trigger's {inode_hist:?}"
        ));
    }
    if Some(evicted) != evictions_counted {
        failures.push(format!(
            "accesses: recorded {evicted} node_evict, counted {evictions_counted:?}"
        ));
    }
    if !dir.join(RECORDING).exists() {
        failures.push(format!("accesses: {RECORDING} missing"));
    } else if let Err(err) = check_whatif(dir, disk, nodescope, recorded, lines) {
        failures.push(format!("whatif: {err:#}"));
    }
    let shown = |n: Option<u64>| n.map_or_else(|| "?".into(), |h| h.to_string());
    format!(
        "accesses={recorded}/{}{got} inode_evictions={inodes_recorded}/{}",
        shown(hist),
        shown(inode_hist)
    )
}

/// Why the kernel refused `function`'s trampoline, when the attach report has it on the kprobe
/// fallback: `kprobe f (fentry refused: why)`.
fn refused_trampoline(err: &str, function: &str) -> Option<String> {
    let prefix = format!("kprobe {function} (fentry refused: ");
    attached_targets(err).iter().find_map(|target| {
        target
            .strip_prefix(&prefix)
            .and_then(|why| why.strip_suffix(')'))
            .map(str::to_string)
    })
}

/// The targets a `nodescope stream` or `record` said it attached, from its stderr's
/// `... ready (attached: a, b, ...)` line.
pub fn attached_targets(err: &str) -> Vec<String> {
    err.lines()
        .find_map(|line| line.split_once("ready (attached: ").map(|(_, rest)| rest))
        .and_then(|rest| rest.rsplit_once(')').map(|(list, _)| list))
        .map(|list| list.split(", ").map(str::to_string).collect())
        .unwrap_or_default()
}

/// Each of `functions` attached on its BPF trampoline (`fentry <function>`); one problem per
/// function that was not, with what was attached instead.
pub fn on_trampolines(err: &str, functions: &[&str]) -> Vec<String> {
    let attached = attached_targets(err);
    functions
        .iter()
        .filter(|f| !attached.contains(&format!("fentry {f}")))
        .map(|f| {
            let instead: Vec<&String> = attached.iter().filter(|t| t.contains(*f)).collect();
            format!("{f} not attached by fentry (attached: {instead:?})")
        })
        .collect()
}

/// `nodescope whatif` on the guest's recording and disk at 3 MiB, compression off and on at
/// the RFC's defaults: both replay every recorded access, and off restores nothing. The rows
/// (node reads, restores, retained nodes) go into the VM test's lines.
fn check_whatif(
    dir: &Path,
    disk: &Path,
    nodescope: &Path,
    recorded: u64,
    lines: &mut Vec<String>,
) -> Result<()> {
    let output = Command::new(nodescope)
        .arg("whatif")
        .arg(dir.join(RECORDING))
        .arg("--image")
        .arg(disk)
        .args(["--budget", WHATIF_BUDGET, "--json"])
        .output()
        .context("running nodescope whatif")?;
    ensure!(
        output.status.success(),
        "nodescope whatif: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let points = serde_json::from_str::<Value>(String::from_utf8_lossy(&output.stdout).trim())
        .context("nodescope whatif --json: not JSON")?;
    let mut seen = (false, false);
    for point in points.as_array().into_iter().flatten() {
        let compression = point["compression"] == true;
        let outcome = &point["outcome"];
        let (reads, restores) = (
            outcome["node_reads"].as_u64().unwrap_or(0),
            outcome["restores"].as_u64().unwrap_or(0),
        );
        lines.push(format!(
            "  whatif {WHATIF_BUDGET} compression {}: node reads {reads}, restores {restores}, \
             retained nodes {} ({} bytes), {} accesses, {} pressure episodes",
            if compression { "on " } else { "off" },
            outcome["retained_nodes"].as_u64().unwrap_or(0),
            outcome["retained_bytes"].as_u64().unwrap_or(0),
            outcome["accesses"].as_u64().unwrap_or(0),
            outcome["pressure_episodes"].as_u64().unwrap_or(0),
        ));
        ensure!(
            outcome["accesses"].as_u64().unwrap_or(0) == recorded,
            "replayed {} accesses, the recording holds {recorded}",
            outcome["accesses"].as_u64().unwrap_or(0)
        );
        ensure!(
            outcome["pressure_episodes"].as_u64().unwrap_or(0) > 0,
            "no pressure episode: the cache drop's node_evict events are missing"
        );
        ensure!(
            compression || (restores == 0 && outcome["conversions"].as_u64().unwrap_or(0) == 0),
            "compression off restored {restores} nodes"
        );
        if compression {
            seen.1 = true;
        } else {
            seen.0 = true;
        }
    }
    ensure!(
        seen == (true, true),
        "want an off and an on point, got {seen:?}"
    );
    Ok(())
}

/// Node reads of nids no traced lookup asked for, from `nodescope report --nids` of the
/// recording: (reads, those nids). On Debian's 6.12 the root inode (nid 3) was read twice so
/// during the replay, through no `f2fs_get_node_page` call (the hist trigger on it agrees with
/// the recorded lookups); None when the listing cannot be had.
fn reads_outside_lookups(nodescope: &Path, recording: &Path) -> Option<(u64, Vec<u32>)> {
    let output = Command::new(nodescope)
        .arg("report")
        .arg("--nids")
        .arg(recording)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut reads = std::collections::BTreeMap::new();
    let mut looked_up = std::collections::BTreeSet::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [kind, nid, count] = words.as_slice() {
            let (Ok(nid), Ok(count)) = (nid.parse::<u32>(), count.parse::<u64>()) else {
                continue;
            };
            match *kind {
                "node_read" => drop(reads.insert(nid, count)),
                "node_access" => drop(looked_up.insert(nid)),
                _ => {}
            }
        }
    }
    let outside: Vec<u32> = reads
        .keys()
        .copied()
        .filter(|nid| !looked_up.contains(nid))
        .collect();
    Some((outside.iter().map(|nid| reads[nid]).sum(), outside))
}

/// Issue 51: the phase records with `--lookup-latency`, so every lookup is timed and in exactly
/// one outcome. The outcomes add up to the timed lookups, which are the recorded node_access
/// events (themselves the hist trigger's count, checked above); the disk-read outcomes are the
/// recording's demand node reads (the replay reads small files: every demand node read is a
/// lookup's own, no `f2fs_get_node_page_ra`). Prints each outcome's count, mean, p50 and p99,
/// and the wait per app.
fn check_retrievals(
    dir: &Path,
    report: &Value,
    recorded: u64,
    outside: Option<(u64, Vec<u32>)>,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    const OUTCOMES: [&str; 5] = ["hit", "restore", "disk_read", "waited", "error"];
    let totals = &report["totals"];
    let retrievals = &totals["retrievals"];
    let timed = retrievals["count"].as_u64().unwrap_or(0);
    let wait_ns = retrievals["wait_ns"].as_u64().unwrap_or(0);
    let mut sum = 0;
    let mut sum_ns = 0;
    let mut parts = Vec::new();
    for outcome in OUTCOMES {
        let h = &retrievals[outcome];
        let count = h["count"].as_u64().unwrap_or(0);
        sum += count;
        sum_ns += h["total_ns"].as_u64().unwrap_or(0);
        parts.push(format!(
            "{outcome} {count} (mean {} p50 {} p99 {} ns)",
            h["mean_ns"].as_u64().unwrap_or(0),
            h["p50_ns"].as_u64().unwrap_or(0),
            h["p99_ns"].as_u64().unwrap_or(0)
        ));
    }
    let disk_reads = retrievals["disk_read"]["count"].as_u64().unwrap_or(0);
    let own_reads = retrievals["node_reads"].as_u64().unwrap_or(0);
    let demand = totals["node_reads_demand"].as_u64().unwrap_or(0);
    lines.push(format!(
        "  retrievals: timed {timed} = {} ; waited {:.3} ms in all",
        parts.join(", "),
        wait_ns as f64 / 1e6
    ));
    lines.push(format!(
        "  retrievals: outcomes sum {sum}, node_access recorded {recorded}; disk_read {disk_reads} \
         lookups made {own_reads} demand node reads of their own, the recording's demand node \
         reads {demand}"
    ));
    let device = &retrievals["device"];
    let device_count = device["count"].as_u64().unwrap_or(0);
    lines.push(format!(
        "  retrievals: device time (block_rq_issue to complete) of {device_count} of the \
         lookups' reads: mean {} p50 {} p99 {} ns, {:.3} ms in all",
        device["mean_ns"].as_u64().unwrap_or(0),
        device["p50_ns"].as_u64().unwrap_or(0),
        device["p99_ns"].as_u64().unwrap_or(0),
        device["total_ns"].as_u64().unwrap_or(0) as f64 / 1e6
    ));
    // Timed where the read's request was issued on the lookup's thread: at most every lookup
    // that read, and (virtio-blk issues directly) some.
    if device_count == 0 || device_count > disk_reads {
        failures.push(format!(
            "retrievals: device time for {device_count} lookups, want 1..={disk_reads}"
        ));
    }
    let mut unnamed = 0;
    for app in report["apps"].as_array().into_iter().flatten() {
        let by_outcome = &app["total"]["retrievals"]["by_outcome"];
        if app["app"]["name"].as_str().unwrap_or("").is_empty() {
            unnamed += by_outcome
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| h["count"].as_u64().unwrap_or(0))
                .sum::<u64>();
        }
        let (count, ns) = by_outcome
            .as_array()
            .into_iter()
            .flatten()
            .fold((0, 0), |(c, t), h| {
                (
                    c + h["count"].as_u64().unwrap_or(0),
                    t + h["total_ns"].as_u64().unwrap_or(0),
                )
            });
        if count > 0 {
            lines.push(format!(
                "  retrievals app {}: {count} lookups, waited {:.3} ms",
                app["app"]["name"].as_str().unwrap_or(""),
                ns as f64 / 1e6
            ));
        }
    }
    // The guest's two xattr passes over the same inodes (guest.sh): some lookup of one waited
    // on the other's read.
    let waited = retrievals["waited"]["count"].as_u64().unwrap_or(0);
    let hist = fs::read_to_string(dir.join("xattr_folio_lock_hist.txt")).unwrap_or_default();
    let per_task: Vec<&str> = hist
        .lines()
        .filter(|line| line.trim_start().starts_with("{ common_pid:"))
        .map(str::trim)
        .collect();
    let record_err = fs::read_to_string(dir.join("accesses_record.err")).unwrap_or_default();
    let noted = record_err
        .split("; ")
        .find(|part| part.contains("page-lock waits"))
        .unwrap_or("(no page-lock counts)");
    lines.push(format!(
        "  retrievals: waited {waited}; __folio_lock's slow path entered {:?} times during the \
         xattr passes (kprobe_events hist): {}; the lock-wait program counted {}",
        super::results::hist_hits(&hist),
        per_task.join("; "),
        noted.trim()
    ));
    if waited == 0 {
        failures.push(
            "retrievals: no waited outcome, though two xattr passes read the same node pages \
             at once"
                .into(),
        );
    }
    if timed == 0 || sum != timed || timed != recorded || sum_ns != wait_ns {
        failures.push(format!(
            "retrievals: outcomes sum {sum} ({sum_ns} ns) must equal the timed lookups {timed} \
             ({wait_ns} ns) and the recorded node_access {recorded}"
        ));
    }
    // Every demand node read is a lookup's own, but reads of nids no traced lookup asked for
    // (the replay has no readahead: they are demand reads); a lookup that read twice (its page
    // changed under it) is one disk-read outcome and two reads.
    let (outside_reads, outside_nids) = outside.unwrap_or_default();
    lines.push(format!(
        "  retrievals: demand node reads outside any traced lookup: {outside_reads} (nids \
         {outside_nids:?}, never looked up through the lookup functions)"
    ));
    let readahead = report["totals"]["node_reads_readahead"]
        .as_u64()
        .unwrap_or(0);
    if readahead != 0
        || own_reads + outside_reads != demand
        || disk_reads > own_reads
        || disk_reads == 0
    {
        failures.push(format!(
            "retrievals: the lookups' own reads {own_reads} and the {outside_reads} reads of \
             nids never looked up must add up to the demand node reads {demand} (readahead \
             {readahead}), and the disk_read outcomes {disk_reads} be at most the own reads"
        ));
    }
    // Each lookup counts for its process's app (batched lookups named by their process).
    if unnamed > 0 {
        failures.push(format!(
            "retrievals: {unnamed} lookups without a process name"
        ));
    }
}

/// (node lookups, node evictions) from record's closing note: "accesses counted in the kernel:
/// N node lookups, M node evictions".
pub(super) fn kernel_counts(record_err: &str) -> Option<(u64, u64)> {
    let rest = record_err
        .lines()
        .find_map(|l| l.split_once("accesses counted in the kernel: "))?
        .1;
    let (lookups, rest) = rest.split_once(" node lookups, ")?;
    let evictions = rest.split_whitespace().next()?;
    Some((lookups.parse().ok()?, evictions.parse().ok()?))
}

/// Inode evictions from record's closing note: "..., M node evictions, K inode evictions; ...".
pub(super) fn inode_evictions_counted(record_err: &str) -> Option<u64> {
    let rest = record_err
        .lines()
        .find_map(|l| l.split_once("accesses counted in the kernel: "))?
        .1;
    let (_, rest) = rest.split_once(" node evictions, ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// A per-device count of `nodescope report --json`, summed over the devices.
pub(crate) fn device_sum(report: &Value, key: &str) -> u64 {
    report["devices"]
        .as_object()
        .into_iter()
        .flat_map(|d| d.values())
        .map(|dev| dev[key].as_u64().unwrap_or(0))
        .sum()
}

/// (node accesses, node evictions, lost events) from `nodescope report --json`.
fn recording_counts(report: &Value) -> (u64, u64, u64) {
    (
        device_sum(report, "node_accesses"),
        device_sum(report, "node_evictions"),
        report["drops"].as_u64().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arm64 run's record (Debian 6.1): the lookup on its kprobe, with why.
    #[test]
    fn a_refused_trampoline_is_read_with_the_kernels_reason() {
        let err = "nodescope record: ready (attached: kretprobe kill_f2fs_super, kprobe \
                   f2fs_get_node_page (fentry refused: attaching f2fs_node_access_fentry to \
                   f2fs_get_node_page (BTF id 111557 in f2fs): BPF_RAW_TRACEPOINT_OPEN: Unknown \
                   error 524 (os error 524)), tracepoint \
                   filemap:mm_filemap_delete_from_page_cache)\n";
        assert_eq!(
            refused_trampoline(err, "f2fs_get_node_page").as_deref(),
            Some(
                "attaching f2fs_node_access_fentry to f2fs_get_node_page (BTF id 111557 in \
                 f2fs): BPF_RAW_TRACEPOINT_OPEN: Unknown error 524 (os error 524)"
            )
        );
        assert_eq!(refused_trampoline(err, "f2fs_get_node_folio"), None);
        let on_trampoline = "x: ready (attached: fentry f2fs_get_node_page)\n";
        assert_eq!(
            refused_trampoline(on_trampoline, "f2fs_get_node_page"),
            None
        );
    }

    #[test]
    fn reads_the_kernel_counts_from_the_closing_note() {
        let err = "recorded 9 events\nnodescope record: counter map: peak 3 of 8192 entries; 0 \
                   entries of exited processes folded into the totals and deleted; accesses \
                   counted in the kernel: 49412 node lookups, 7 node evictions, 3 inode \
                   evictions; 12 lookups read their device\n";
        assert_eq!(kernel_counts(err), Some((49412, 7)));
        assert_eq!(inode_evictions_counted(err), Some(3));
        assert_eq!(kernel_counts("recorded 9 events\n"), None);
        assert_eq!(inode_evictions_counted("recorded 9 events\n"), None);
    }

    #[test]
    fn sums_the_report_devices() {
        let report = serde_json::from_str::<Value>(
            r#"{"drops": 2, "devices": {"254:0": {"node_writes": 1, "node_accesses": 40,
                "node_evictions": 3}, "254:16": {"node_accesses": 2}}}"#,
        )
        .unwrap();
        assert_eq!(recording_counts(&report), (42, 3, 2));
    }
}
