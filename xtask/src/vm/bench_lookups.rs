//! vm-bench's node lookup part (issue 30): what a hook on the node lookup costs per lookup,
//! nodescope's lookup program as a kprobe and as fentry (a BPF trampoline), against bpftrace's
//! `kprobe:f2fs_get_node_page { @[tid] = count(); }`, on the same loop of lookups.
//!
//! The guest (bench.sh) runs `lookuploop` (lookuploop.c): one file asked LOOKUP_CALLS times for
//! an xattr it lacks, each call one f2fs_get_node_page of a cached inode page. A calibration run
//! under a kprobe_events hist trigger counts the lookups per call. Then LOOKUP_RUNS timed runs
//! with nothing attached, under `nodescope stream --accesses --function-hook kprobe`, under
//! `--function-hook auto` (fentry), and under bpftrace. A hook's cost per lookup is what it adds to
//! the fastest run, over the lookups made: the whole hook, the kprobe's or the trampoline's way
//! into the program included. bpf_stats' figure (the program's own run time) is printed beside.
//! Under TCG only the ratios mean anything; the goal is fentry <= 0.5 x bpftrace's kprobe.
use std::path::Path;

use anyhow::{ensure, Context as _, Result};

use super::{
    accesses,
    bench::{cost, programs, read, Program},
    check,
};

/// The function hooked: Debian 6.1's and 6.12's node lookup entry point.
const LOOKUP_FUNCTION: &str = "f2fs_get_node_page";
/// Calls per run, and timed runs per case (the fastest counts).
const LOOKUP_CALLS: u64 = 100_000;
const LOOKUP_RUNS: u32 = 5;
/// The start of both lookup programs' names (f2fs_node_access, f2fs_node_access_fentry), as
/// bpftool shows them: in full from the program's BTF, else the kernel's 15 characters.
const OUR_PROGRAM: &str = "f2fs_node_acces";

/// The guest's part of /etc/vm-bench.conf.
pub fn guest_config() -> String {
    format!(
        "LOOKUP_FUNCTION={LOOKUP_FUNCTION}\nLOOKUP_CALLS={LOOKUP_CALLS}\nLOOKUP_RUNS={LOOKUP_RUNS}\n"
    )
}

/// Build lookuploop.c with the host's cc into `dir`; its path.
pub fn build_helper(dir: &Path) -> Result<std::path::PathBuf> {
    super::uidswitch::build_c_helper(dir, "lookuploop", include_str!("lookuploop.c"))
}

/// The fastest run's nanoseconds in a `lookup_<case>.txt` ("calls N ns T" per run).
fn fastest(text: &str) -> Result<u64> {
    let runs: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["calls", calls, "ns", ns] => Some((calls.parse().ok()?, ns.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    ensure!(
        runs.len() == LOOKUP_RUNS as usize,
        "{} runs, expected {LOOKUP_RUNS}",
        runs.len()
    );
    ensure!(
        runs.iter().all(|(calls, _)| *calls == LOOKUP_CALLS),
        "runs of another length than {LOOKUP_CALLS} calls"
    );
    Ok(runs.iter().map(|(_, ns)| *ns).min().unwrap_or(0))
}

/// The printed lines, from the guest's results directory.
pub fn report(dir: &Path) -> Result<Vec<String>> {
    let hist = check::hist_hits(&read(dir, "lookup_calibrate.hist")?)
        .context("the calibration's hist trigger counted nothing")?;
    let per_call = hist as f64 / LOOKUP_CALLS as f64;
    ensure!(
        (0.99..1.5).contains(&per_call),
        "the loop made {hist} lookups in {LOOKUP_CALLS} calls: not one per call"
    );
    let lookups = LOOKUP_CALLS as f64 * per_call;
    let fastest_of = |case: &str| -> Result<u64> {
        fastest(&read(dir, &format!("lookup_{case}.txt"))?)
            .with_context(|| format!("lookup_{case}.txt"))
    };
    let none = fastest_of("none")?;
    let (kprobe, fentry, bpftrace) = (
        fastest_of("kprobe")?,
        fastest_of("auto")?,
        fastest_of("bpftrace")?,
    );
    let added = |ns: u64| (ns as f64 - none as f64) / lookups;
    // Each stream attached the hook it was asked for.
    let attached = |hook: &str| {
        accesses::attached_targets(
            &read(dir, &format!("lookup_stream_{hook}.err")).unwrap_or_default(),
        )
    };
    ensure!(
        attached("kprobe").contains(&format!("kprobe {LOOKUP_FUNCTION}")),
        "--function-hook kprobe attached {:?}",
        attached("kprobe")
    );
    ensure!(
        accesses::on_trampolines(
            &read(dir, "lookup_stream_auto.err").unwrap_or_default(),
            &[LOOKUP_FUNCTION]
        )
        .is_empty(),
        "--function-hook auto attached {:?}",
        attached("auto")
    );
    let programs_of = |case: &str, chosen: &dyn Fn(&Program) -> bool| -> Result<String> {
        let before = programs(&read(dir, &format!("progs_lookup_{case}_before.json"))?)?;
        let after = programs(&read(dir, &format!("progs_lookup_{case}_after.json"))?)?;
        let ran = cost(&before, &after, chosen)
            .with_context(|| format!("no program ran in the {case} runs"))?;
        Ok(format!("{:.0} ns x {}", ran.ns_per_run(), ran.runs))
    };
    let baseline = programs(&read(dir, "progs_lookup_none_after.json")?)?;
    let new = |p: &Program| !baseline.iter().any(|b| b.id == p.id);
    let ours = |p: &Program| p.name.starts_with(OUR_PROGRAM);
    let ours_kprobe = programs_of("kprobe", &|p| p.kind == "kprobe" && ours(p))?;
    let ours_fentry = programs_of("auto", &|p| p.kind == "tracing" && ours(p))?;
    let theirs = programs_of("bpftrace", &|p| p.kind == "kprobe" && new(p))?;
    Ok(vec![
        format!(
            "vm-bench lookups: {LOOKUP_FUNCTION}, {LOOKUP_CALLS} calls x {LOOKUP_RUNS} runs, \
             {per_call:.3} lookups per call (hist {hist}); fastest run none={:.1} ms \
             kprobe={:.1} ms fentry={:.1} ms bpftrace={:.1} ms",
            none as f64 / 1e6,
            kprobe as f64 / 1e6,
            fentry as f64 / 1e6,
            bpftrace as f64 / 1e6
        ),
        format!(
            "vm-bench lookups: the programs alone (bpf_stats): kprobe {ours_kprobe}, fentry \
             {ours_fentry}, bpftrace {theirs}"
        ),
        format!(
            "lookup-cost kprobe_ns={:.0} fentry_ns={:.0} bpftrace_ns={:.0} \
             fentry/bpftrace={:.2} kprobe/bpftrace={:.2}",
            added(kprobe),
            added(fentry),
            added(bpftrace),
            added(fentry) / added(bpftrace),
            added(kprobe) / added(bpftrace)
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_of_the_runs_counts_and_short_or_odd_runs_are_refused() {
        let runs = "calls 100000 ns 900\ncalls 100000 ns 700\ncalls 100000 ns 800\ncalls 100000 ns 750\ncalls 100000 ns 1000\n";
        assert_eq!(fastest(runs).unwrap(), 700);
        assert!(fastest("calls 100000 ns 700\n").is_err());
        assert!(fastest(&runs.replace("calls 100000 ns 800", "calls 10 ns 800")).is_err());
        assert!(fastest("").is_err());
    }
}
