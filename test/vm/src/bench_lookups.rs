//! vm-bench's node lookup part (issue 30): what a hook on the node lookup costs per lookup,
//! nodescope's lookup program as a kprobe and as fentry (a BPF trampoline), against bpftrace's
//! `kprobe:f2fs_get_node_page { @[tid] = count(); }`, on the same loop of lookups.
//!
//! The guest (bench.sh) runs `lookuploop` (lookuploop.c): one file asked LOOKUP_CALLS times for
//! an xattr it lacks, each call one f2fs_get_node_page of a cached inode page. A calibration run
//! under a kprobe_events hist trigger counts the lookups per call. Then, for each hook,
//! LOOKUP_RUNS timed runs with nothing attached and LOOKUP_RUNS under the hook: `nodescope
//! stream --accesses --function-hook kprobe`, `--function-hook auto` (fentry), bpftrace. A
//! hook's cost per lookup is what its fastest run adds to the fastest of the runs just before
//! it with nothing attached (TCG's speed drifts over a boot), over the lookups made: the whole hook, the kprobe's or the trampoline's way
//! into the program included. The timed runs have kernel.bpf_stats_enabled off, as a user's
//! kernel does; one more run per case with it on gives the program's own run time, printed
//! beside.
//! Under TCG only the ratios mean anything; the goal is fentry <= 0.5 x bpftrace's kprobe.
//! Issue 51 adds a fourth hook, `timed`: `stream --lookup-latency` (fentry and fexit on the
//! lookup, the clock read at both), held to the same goal, and a fifth, `bpftrace_timed`: the
//! same times as a bpftrace user gets them (a kprobe keeping each thread's start in a map, a
//! kretprobe adding the time to a histogram), the like-for-like baseline of `timed`.
use std::path::Path;

use anyhow::{ensure, Context as _, Result};

use super::{
    accesses,
    progs::{cost, programs, read, Program},
    results,
};

/// The function hooked: Debian 6.1's and 6.12's node lookup entry point.
const LOOKUP_FUNCTION: &str = "f2fs_get_node_page";
/// Calls per run, and timed runs per case (the fastest counts).
const LOOKUP_CALLS: u64 = 100_000;
const LOOKUP_RUNS: u32 = 5;
/// Times the whole sequence (nothing, kprobe, nothing, fentry, nothing, bpftrace) is repeated.
const LOOKUP_ROUNDS: u32 = 5;
/// The start of both lookup programs' names (f2fs_node_access, f2fs_node_access_fentry), as
/// bpftool shows them: in full from the program's BTF, else the kernel's 15 characters.
const OUR_PROGRAM: &str = "f2fs_node_acces";

/// The guest's part of /etc/vm-bench.conf.
pub fn guest_config() -> String {
    format!(
        "LOOKUP_FUNCTION={LOOKUP_FUNCTION}\nLOOKUP_CALLS={LOOKUP_CALLS}\nLOOKUP_RUNS={LOOKUP_RUNS}\n\
         LOOKUP_ROUNDS={LOOKUP_ROUNDS}\n"
    )
}

/// Build lookuploop.c with the host's cc into `dir`; its path.
pub fn build_helper(dir: &Path) -> Result<std::path::PathBuf> {
    super::uidswitch::build_c_helper(dir, "lookuploop", include_str!("../guest/lookuploop.c"))
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

/// One round's costs per lookup (ns): what each hook's fastest run adds to the fastest of the
/// runs with nothing attached just before it.
#[derive(Clone, Copy, Debug)]
struct Round {
    kprobe: f64,
    fentry: f64,
    timed: f64,
    bpftrace: f64,
    /// bpftrace timing each lookup (kprobe + kretprobe, a histogram of the times).
    bpftrace_timed: f64,
    /// An fentry and an fexit program that do nothing (bpftrace's kfunc + kretfunc): the
    /// floor of any timed trampoline hook.
    pair_floor: f64,
}

/// The middle value (the lower middle of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() - 1) / 2]
}

/// The printed lines, from the guest's results directory.
pub fn report(dir: &Path) -> Result<Vec<String>> {
    let hist = results::hist_hits(&read(dir, "lookup_calibrate.hist")?)
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
    let added = |case: &str, round: u32| -> Result<f64> {
        let hooked = fastest_of(&format!("{case}_{round}"))?;
        let none = fastest_of(&format!("none_{case}_{round}"))?;
        Ok((hooked as f64 - none as f64) / lookups)
    };
    let mut rounds = Vec::new();
    let mut lines = Vec::new();
    for round in 1..=LOOKUP_ROUNDS {
        check_hooks(dir, round)?;
        let costs = Round {
            kprobe: added("kprobe", round)?,
            fentry: added("auto", round)?,
            timed: added("timed", round)?,
            bpftrace: added("bpftrace", round)?,
            bpftrace_timed: added("bpftrace_timed", round)?,
            pair_floor: added("pair_floor", round)?,
        };
        lines.push(format!(
            "vm-bench lookups round {round}: kprobe {:.0} ns, fentry {:.0} ns, timed {:.0} ns, \
             bpftrace {:.0} ns, bpftrace timed {:.0} ns, empty pair {:.0} ns per lookup: \
             fentry/bpftrace={:.2} kprobe/bpftrace={:.2} timed/bpftrace={:.2} \
             timed/bpftrace_timed={:.2}",
            costs.kprobe,
            costs.fentry,
            costs.timed,
            costs.bpftrace,
            costs.bpftrace_timed,
            costs.pair_floor,
            costs.fentry / costs.bpftrace,
            costs.kprobe / costs.bpftrace,
            costs.timed / costs.bpftrace,
            costs.timed / costs.bpftrace_timed
        ));
        rounds.push(costs);
    }
    lines.push(format!(
        "vm-bench lookups: {LOOKUP_FUNCTION}, {LOOKUP_CALLS} calls x {LOOKUP_RUNS} runs per case \
         x {LOOKUP_ROUNDS} rounds, {per_call:.3} lookups per call (hist {hist}); the programs \
         alone (bpf_stats, one more run, round 1): {}",
        programs_alone(dir)?
    ));
    let kprobe = median(rounds.iter().map(|r| r.kprobe).collect());
    let fentry = median(rounds.iter().map(|r| r.fentry).collect());
    let timed = median(rounds.iter().map(|r| r.timed).collect());
    let bpftrace = median(rounds.iter().map(|r| r.bpftrace).collect());
    let ratios = median(rounds.iter().map(|r| r.fentry / r.bpftrace).collect());
    let timed_ratios = median(rounds.iter().map(|r| r.timed / r.bpftrace).collect());
    let bpftrace_timed = median(rounds.iter().map(|r| r.bpftrace_timed).collect());
    let timed_timed_ratios = median(rounds.iter().map(|r| r.timed / r.bpftrace_timed).collect());
    lines.push(format!(
        "lookup-cost kprobe_ns={kprobe:.0} fentry_ns={fentry:.0} bpftrace_ns={bpftrace:.0} \
         fentry/bpftrace={:.2} kprobe/bpftrace={:.2} (medians over {LOOKUP_ROUNDS} rounds; \
         median of the rounds' fentry/bpftrace {ratios:.2})",
        fentry / bpftrace,
        kprobe / bpftrace
    ));
    lines.push(format!(
        "lookup-cost timed_ns={timed:.0} bpftrace_ns={bpftrace:.0} timed/bpftrace={:.2} \
         (issue 51: fentry+fexit, --lookup-latency; medians over {LOOKUP_ROUNDS} rounds; \
         median of the rounds' timed/bpftrace {timed_ratios:.2}; goal <= 0.50)",
        timed / bpftrace
    ));
    lines.push(format!(
        "lookup-cost timed_ns={timed:.0} bpftrace_timed_ns={bpftrace_timed:.0} \
         timed/bpftrace_timed={:.2} (the same times from bpftrace: a kprobe and a kretprobe, \
         the start per thread in a map, a histogram; median of the rounds' ratios \
         {timed_timed_ratios:.2})",
        timed / bpftrace_timed
    ));
    let floor = median(rounds.iter().map(|r| r.pair_floor).collect());
    let floor_ratios = median(rounds.iter().map(|r| r.pair_floor / r.bpftrace).collect());
    lines.push(format!(
        "lookup-cost pair_floor_ns={floor:.0} bpftrace_ns={bpftrace:.0} \
         pair_floor/bpftrace={:.2} (an empty fentry + fexit pair: what any timed trampoline \
         hook pays before its programs run; median of the rounds' ratios {floor_ratios:.2})",
        floor / bpftrace
    ));
    Ok(lines)
}

/// Each stream of `round` attached the hook it was asked for.
fn check_hooks(dir: &Path, round: u32) -> Result<()> {
    let err =
        |hook: &str| read(dir, &format!("lookup_stream_{hook}_{round}.err")).unwrap_or_default();
    let kprobe = accesses::attached_targets(&err("kprobe"));
    ensure!(
        kprobe.contains(&format!("kprobe {LOOKUP_FUNCTION}")),
        "round {round}: --function-hook kprobe attached {kprobe:?}"
    );
    ensure!(
        accesses::on_trampolines(&err("auto"), &[LOOKUP_FUNCTION]).is_empty(),
        "round {round}: --function-hook auto attached {:?}",
        accesses::attached_targets(&err("auto"))
    );
    let timed = accesses::attached_targets(&err("timed"));
    for hook in ["fentry", "fexit"] {
        ensure!(
            timed.contains(&format!("{hook} {LOOKUP_FUNCTION}")),
            "round {round}: --lookup-latency attached {timed:?}"
        );
    }
    Ok(())
}

/// bpf_stats' run time per run of each program in round 1's extra run.
fn programs_alone(dir: &Path) -> Result<String> {
    let programs_of = |case: &str, chosen: &dyn Fn(&Program) -> bool| -> Result<String> {
        let before = programs(&read(dir, &format!("progs_lookup_{case}_before.json"))?)?;
        let after = programs(&read(dir, &format!("progs_lookup_{case}_after.json"))?)?;
        let ran = cost(&before, &after, chosen)
            .with_context(|| format!("no program ran in the {case} runs"))?;
        Ok(format!("{:.0} ns x {}", ran.ns_per_run(), ran.runs))
    };
    let baseline = programs(&read(dir, "progs_lookup_none_bpftrace_1_after.json")?)?;
    let new = |p: &Program| !baseline.iter().any(|b| b.id == p.id);
    let timed_baseline = programs(&read(dir, "progs_lookup_none_bpftrace_timed_1_after.json")?)?;
    let new_timed = |p: &Program| !timed_baseline.iter().any(|b| b.id == p.id);
    let ours = |p: &Program| p.name.starts_with(OUR_PROGRAM);
    Ok(format!(
        "kprobe {}, fentry {}, timed (fentry + fexit) {}, bpftrace {}, bpftrace timed \
         (kprobe + kretprobe) {}",
        programs_of("kprobe_1", &|p| p.kind == "kprobe" && ours(p))?,
        programs_of("auto_1", &|p| p.kind == "tracing" && ours(p))?,
        programs_of("timed_1", &|p| p.kind == "tracing" && ours(p))?,
        programs_of("bpftrace_1", &|p| p.kind == "kprobe" && new(p))?,
        programs_of("bpftrace_timed_1", &|p| p.kind == "kprobe" && new_timed(p))?
    ))
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

    #[test]
    fn the_median_is_the_middle_round() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.0);
        assert_eq!(median(vec![5.0]), 5.0);
    }
}
