//! Issue 50's checks of the module's fixes (kmod.sh): non-inode nodes restore, a rewrite of a
//! knob's current value does not hold the worker back, unmount under the status readers leaves
//! no oops, and what a memory cgroup below the cache's size does.
use std::path::Path;

use super::{
    counters::{iostat_reads, read_trimmed, ModuleCounters, FAIL_REASONS},
    settings::{MEMCG_MB, UNMOUNT_CYCLES},
};

/// Restores the sparse file's read must make: its inode, indirect and direct node.
const SPARSE_RESTORES: u64 = 3;
/// Worker passes the knob rewrites must leave, at least: about one a second for six seconds
/// (TCG's timers are late, never early), a margin of three. Before the fix: none.
const REWRITE_PASSES_AT_LEAST: u64 = 3;

/// What dmesg must not say: a kernel BUG, an oops, a KASAN report, a general protection fault.
pub(super) fn dmesg_problems(dmesg: &str) -> Vec<String> {
    dmesg
        .lines()
        .filter(|l| {
            l.contains("BUG:")
                || l.contains("kernel BUG")
                || l.contains("Oops")
                || l.contains("KASAN")
                || l.contains("general protection fault")
        })
        .take(3)
        .map(|l| format!("dmesg: {}", l.trim()))
        .collect()
}

/// `passes P0 P1 seconds T0 T1 writes N` (kmod.sh): the passes gained and the seconds it took.
pub(super) fn rewrite_passes(text: &str) -> Option<(u64, f64, u64)> {
    let w: Vec<&str> = text.split_whitespace().collect();
    if w.len() != 8 || w[0] != "passes" || w[3] != "seconds" || w[6] != "writes" {
        return None;
    }
    let p0: u64 = w[1].parse().ok()?;
    let p1: u64 = w[2].parse().ok()?;
    let t0: f64 = w[4].parse().ok()?;
    let t1: f64 = w[5].parse().ok()?;
    Some((p1.saturating_sub(p0), t1 - t0, w[7].parse().ok()?))
}

/// `key value` lines (memory.events).
fn value(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

pub(super) fn fix_checks(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) {
    // 1. The sparse file's nodes, read from disk, converted, restored.
    match (
        ModuleCounters::read(dir, "sparse_before"),
        ModuleCounters::read(dir, "sparse_after"),
    ) {
        (Ok(before), Ok(after)) => {
            let restores = after.delta(&before, "restores");
            let fails: u64 = FAIL_REASONS
                .iter()
                .map(|r| after.delta(&before, &format!("restore_fail_{r}")))
                .sum();
            let node_type = after.delta(&before, "restore_fail_node_type");
            let reads = match (
                iostat_reads(dir, "sparse_before"),
                iostat_reads(dir, "sparse_after"),
            ) {
                (Ok(b), Ok(a)) => a.saturating_sub(b).to_string(),
                _ => "?".into(),
            };
            lines.push(format!(
                "  non-inode restores: sparse file restores={restores} restore_fails={fails} \
                 (node_type {node_type}) node_reads={reads}"
            ));
            if fails > 0 {
                problems.push(format!(
                    "the sparse file's nodes failed {fails} restores ({node_type} on node_type)"
                ));
            }
            if restores < SPARSE_RESTORES {
                problems.push(format!(
                    "the sparse file's read restored {restores} nodes, not its {SPARSE_RESTORES} \
                     (inode, indirect, direct)"
                ));
            }
        }
        (Err(e), _) | (_, Err(e)) => problems.push(format!("sparse file: {e:#}")),
    }

    // 4. Rewriting the knobs' current values.
    let rewrites = read_trimmed(dir, "knob_rewrites.txt");
    match rewrite_passes(&rewrites) {
        Some((passes, seconds, writes)) => {
            lines.push(format!(
                "  knob rewrites: {writes} writes of each knob's current value in {seconds:.1} s, \
                 worker passes {passes}"
            ));
            if passes < REWRITE_PASSES_AT_LEAST {
                problems.push(format!(
                    "rewriting the interval's current value held the worker back: {passes} \
                     passes in {seconds:.1} s"
                ));
            }
        }
        None => problems.push(format!("knob_rewrites.txt: {rewrites:?}")),
    }

    // 2. Unmounts raced by the status readers, then dmesg.
    let status = read_trimmed(dir, "reads_status.txt");
    let counters = read_trimmed(dir, "reads_counters.txt");
    let cycles = read_trimmed(dir, "unmount_cycles.txt");
    lines.push(format!(
        "  unmount under readers: {cycles} of {UNMOUNT_CYCLES} cycles, status reads {status}, \
         counters reads {counters}"
    ));
    if cycles != UNMOUNT_CYCLES.to_string() {
        problems.push(format!(
            "{cycles} of {UNMOUNT_CYCLES} mount/unmount cycles under the status readers"
        ));
    }
    for (what, reads) in [("status", &status), ("counters", &counters)] {
        if reads.parse::<u64>().map_or(true, |n| n == 0) {
            problems.push(format!("the {what} reader read nothing ({reads})"));
        }
    }
    let dmesg = std::fs::read_to_string(dir.join("dmesg.txt")).unwrap_or_default();
    if dmesg.is_empty() {
        problems.push("no dmesg.txt".into());
    }
    problems.extend(dmesg_problems(&dmesg));

    // 5. The memory cgroup's run.
    let events = read_trimmed(dir, "memcg_events.txt");
    let rc = read_trimmed(dir, "memcg_replay.rc");
    match (
        ModuleCounters::read(dir, "memcg_start"),
        ModuleCounters::read(dir, "memcg_end"),
    ) {
        (Ok(start), Ok(end)) => {
            let reclaimed = end.delta(&start, "reclaim_raw");
            let oom_kills = value(&events, "oom_kill");
            lines.push(format!(
                "  memcg {MEMCG_MB} MiB: replay rc={rc} max={} oom={} oom_kill={oom_kills} \
                 inserts={} reclaim_raw={reclaimed} raw at end={} ({} MiB)",
                value(&events, "max"),
                value(&events, "oom"),
                end.delta(&start, "inserts"),
                end.get("entries_raw"),
                end.get("raw_bytes") >> 20,
            ));
            // The module lets go of raw entries charged to a cgroup near its limit: the
            // replay must finish without an OOM kill, and the cache must have given back.
            if oom_kills > 0 || rc != "0" {
                problems.push(format!(
                    "the memory cgroup's replay: exit {rc}, {oom_kills} OOM kills \
                     (memcg_events.txt)"
                ));
            }
            if reclaimed == 0 {
                problems.push("no raw entry reclaimed for the memory cgroup".into());
            }
        }
        (Err(e), _) | (_, Err(e)) => problems.push(format!("memcg: {e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_line_parses() {
        assert_eq!(
            rewrite_passes("passes 3 9 seconds 20.5 27.0 writes 30"),
            Some((6, 6.5, 30))
        );
        assert_eq!(rewrite_passes("passes 3 seconds"), None);
    }

    #[test]
    fn dmesg_oopses_are_problems() {
        let clean = "[ 1.0] f2fs: loading out-of-tree module taints kernel.\n\
                     [ 2.0] Memory cgroup out of memory: Killed process 12 (cat)";
        assert!(dmesg_problems(clean).is_empty());
        let oops = "[ 3.0] BUG: unable to handle page fault for address: 0000\n\
                    [ 3.1] Oops: 0000 [#1] PREEMPT SMP NOPTI";
        assert_eq!(dmesg_problems(oops).len(), 2);
        assert_eq!(
            dmesg_problems("[ 4.0] BUG: KASAN: slab-use-after-free in x").len(),
            1
        );
    }
}
