//! `cargo xtask vm-bench --kernel 6.12`: what one traced event costs, nodescope against
//! bpftrace, in one boot of a Debian kernel (issue 16). The guest (bench.sh) replays the RFC
//! file set cold four times, as the VM test's names phase does: with nothing attached, under
//! `nodescope stream`, under bpftrace counting the tracepoint nodescope's node-read program
//! takes, by pid, and under both at once (the same events, the same host load: the steadier
//! ratio, `ebpf-cost-together`). With kernel.bpf_stats_enabled=1 the kernel sums each program's
//! run time and run count; bpftool's JSON before and after each replay gives both per event.
//! The VM is emulated (TCG), so only the ratio means anything: the goal is ours <= 0.5 x.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{bail, Context as _, Result};

use super::progs::{cost, programs, read, Cost, Program};
use super::settings::{replay_script, Replay, NDIRS, NFILES, VM_TIMEOUT};
use super::{bench_lookups, initramfs, kernel, qemu};
use crate::util;

/// The tracepoint nodescope's node-read program takes on Debian's 6.1 and 6.12 (the guest's
/// `stream --plan` is checked against it), and so the one bpftrace counts.
const TRACEPOINT: &str = "f2fs:f2fs_submit_page_bio";
/// nodescope's node-read programs (f2fs_node_read_page, its counts-only f2fs_node_read_page_fast,
/// f2fs_node_read_bio); the kernel keeps 15 characters of a program's name.
const OUR_PROGRAM_PREFIX: &str = "f2fs_node_read";
const CASES: [&str; 5] = ["none", "ours", "bpftrace", "both", "rev"];

/// `lookups_only`: the node-lookup part alone (a quicker boot, for work on the lookup program).
pub fn run(which: &str, lookups_only: bool) -> Result<()> {
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == which)
        .with_context(|| format!("unknown kernel {which:?}: use 6.1 or 6.12"))?;
    let cache = util::target_dir().join("vm-cache");
    fs::create_dir_all(&cache)?;
    let nodescope = util::build_nodescope()?;
    let kernel = kernel::prepare(spec, &cache)?;
    let files = qemu::GuestFiles::fresh(cache.join(format!("bench-{}", spec.label)))?;
    let guest_files = [
        ("init", include_str!("../guest/bench.sh").to_string()),
        ("replay-names", replay_script(Replay::Names, NDIRS)),
        (
            "etc/vm-bench.conf",
            format!(
                "NDIRS={NDIRS}\nNFILES={NFILES}\nTRACEPOINT={TRACEPOINT}\nLOOKUPS_ONLY={}\n{}",
                u8::from(lookups_only),
                bench_lookups::guest_config()
            ),
        ),
    ];
    let lookuploop = bench_lookups::build_helper(&files.work)?;
    let archive = initramfs::build_for(
        &initramfs::Userland::host()?,
        &kernel,
        &nodescope,
        &guest_files,
        &["bpftrace", "bpftool"],
        &[&lookuploop],
        initramfs::ModuleOverrides::default(),
    )?;
    fs::write(&files.initrd, archive)?;
    files.create_disks()?;
    eprintln!(
        "vm-bench {}: kernel {}, initramfs {} MiB (bpftrace's libraries)",
        spec.label,
        kernel.release,
        fs::metadata(&files.initrd)?.len() >> 20
    );
    let took =
        qemu::run(&files.boot(spec.label, crate::Arch::X86_64, &kernel.vmlinuz, VM_TIMEOUT))?;
    eprintln!(
        "vm-bench {}: VM ran {:.1} s",
        spec.label,
        took.as_secs_f64()
    );
    let out = files.unpack()?;
    if !lookups_only {
        for line in report(spec.label, &out)? {
            println!("{line}");
        }
    }
    for line in bench_lookups::report(&out)? {
        println!("{line}");
    }
    files.remove_images();
    Ok(())
}

/// The printed lines, from the guest's results directory.
fn report(label: &str, dir: &Path) -> Result<Vec<String>> {
    let errors = fs::read_to_string(dir.join("guest_errors.txt")).unwrap_or_default();
    if !errors.trim().is_empty() {
        bail!("the guest failed: {}", errors.trim());
    }
    check_plan(&read(dir, "plan.txt")?)?;
    let walls = wall_times(&read(dir, "marks.txt")?)?;
    let progs = |case: &str| -> Result<Vec<Program>> {
        programs(&read(dir, &format!("progs_{case}.json"))?)
            .with_context(|| format!("progs_{case}.json"))
    };
    let baseline_ids: Vec<u64> = progs("none_before")?.iter().map(|p| p.id).collect();
    let ours = cost(&progs("ours_before")?, &progs("ours_after")?, |p| {
        p.name.starts_with(OUR_PROGRAM_PREFIX)
    })
    .context("nodescope's node-read program did not run during its replay")?;
    let bpftrace = cost(&progs("bpftrace_before")?, &progs("bpftrace_after")?, |p| {
        p.kind == "tracepoint" && !baseline_ids.contains(&p.id)
    })
    .context("bpftrace's program did not run during its replay")?;
    let counted = bpftrace_total(&read(dir, "bpftrace.out")?);
    // Both at once: nodescope's programs are those its own replay added, by name.
    let ours_names: Vec<String> = progs("ours_after")?
        .into_iter()
        .filter(|p| !baseline_ids.contains(&p.id))
        .map(|p| p.name)
        .collect();
    let together = |case: &str| -> Result<(Cost, Cost)> {
        let (before, after) = (
            progs(&format!("{case}_before"))?,
            progs(&format!("{case}_after"))?,
        );
        let ours = cost(&before, &after, |p| p.name.starts_with(OUR_PROGRAM_PREFIX))
            .with_context(|| format!("nodescope's node-read program did not run in {case}"))?;
        let bpftrace = cost(&before, &after, |p| {
            p.kind == "tracepoint" && !baseline_ids.contains(&p.id) && !ours_names.contains(&p.name)
        })
        .with_context(|| format!("bpftrace's program did not run in {case}"))?;
        Ok((ours, bpftrace))
    };
    let (ours_both, bpftrace_both) = together("both")?;
    let (ours_rev, bpftrace_rev) = together("rev")?;
    let ratio_both = ours_both.ns_per_run() / bpftrace_both.ns_per_run();
    let ratio_rev = ours_rev.ns_per_run() / bpftrace_rev.ns_per_run();
    let counted_both = bpftrace_total(&read(dir, "bpftrace_both.out")?);
    let floor = floor_line(dir, &baseline_ids);
    let none = &walls["none"];
    let slower = |case: &str| 100.0 * (walls[case] / none - 1.0);
    let clocksource = read(dir, "clocksource.txt").unwrap_or_default();
    let sched_clock = read(dir, "clock_dmesg.txt").unwrap_or_default();
    let sched_clock = sched_clock
        .lines()
        .filter(|l| l.contains("sched_clock") || l.contains("tsc"))
        .map(|l| l.split_once("] ").map_or(l, |(_, text)| text).trim())
        .collect::<Vec<_>>()
        .join(" | ");
    Ok(vec![
        format!(
            "vm-bench {label}: clocksource {}; {sched_clock}",
            clocksource.trim()
        ),
        format!(
            "vm-bench {label}: both at once: wall={:.2} s ({:+.1} %), runs ours={} bpftrace={} \
             (bpftrace's map: {counted_both} by pid)",
            walls["both"],
            slower("both"),
            ours_both.runs,
            bpftrace_both.runs
        ),
        format!(
            "ebpf-cost-together ours_first: ours_ns={:.0} bpftrace_ns={:.0} ratio={ratio_both:.2}; \
             bpftrace_first (wall {:.2} s, runs ours={} bpftrace={}): ours_ns={:.0} \
             bpftrace_ns={:.0} ratio={ratio_rev:.2}; mean ratio={:.2}",
            ours_both.ns_per_run(),
            bpftrace_both.ns_per_run(),
            walls["rev"],
            ours_rev.runs,
            bpftrace_rev.runs,
            ours_rev.ns_per_run(),
            bpftrace_rev.ns_per_run(),
            (ratio_both + ratio_rev) / 2.0
        ),
        floor,
        format!(
            "vm-bench {label}: replay wall none={none:.2} s ours={:.2} s ({:+.1} %) \
             bpftrace={:.2} s ({:+.1} %)",
            walls["ours"],
            slower("ours"),
            walls["bpftrace"],
            slower("bpftrace")
        ),
        format!(
            "vm-bench {label}: tracepoint {TRACEPOINT} runs in the replay: ours={} bpftrace={} \
             (bpftrace's map: {counted} by pid)",
            ours.runs, bpftrace.runs
        ),
        format!(
            "ebpf-cost ours_ns={:.0} bpftrace_ns={:.0} ratio={:.2}",
            ours.ns_per_run(),
            bpftrace.ns_per_run(),
            ours.ns_per_run() / bpftrace.ns_per_run()
        ),
    ])
}

/// What an empty program (bpftrace's `{ }`) costs per event on the same tracepoint, when the
/// guest could measure it.
fn floor_line(dir: &Path, baseline_ids: &[u64]) -> String {
    let measured = || -> Result<Cost> {
        let before = programs(&read(dir, "progs_floor_before.json")?)?;
        let after = programs(&read(dir, "progs_floor_after.json")?)?;
        cost(&before, &after, |p| {
            p.kind == "tracepoint" && !baseline_ids.contains(&p.id)
        })
        .context("the empty program did not run")
    };
    match measured() {
        Ok(floor) => format!(
            "ebpf-floor empty_program_ns={:.0} runs={}",
            floor.ns_per_run(),
            floor.runs
        ),
        Err(err) => format!("ebpf-floor not measured: {err:#}"),
    }
}

/// nodescope must count node reads on the tracepoint bpftrace counts, or the two costs are
/// not of the same events.
fn check_plan(plan: &str) -> Result<()> {
    let node_reads = plan
        .lines()
        .find(|l| l.starts_with("node_reads"))
        .context("stream --plan printed no node_reads line")?;
    if !node_reads
        .trim_end()
        .ends_with(&format!("tracepoint {TRACEPOINT}"))
    {
        bail!("nodescope's node reads are not on {TRACEPOINT} in this kernel: {node_reads:?}");
    }
    Ok(())
}

/// Seconds from `<case>_start` to `<case>_done` in the guest's marks (/proc/uptime).
fn wall_times(marks: &str) -> Result<BTreeMap<&'static str, f64>> {
    let at = |name: String| -> Result<f64> {
        marks
            .lines()
            .find_map(|l| l.strip_suffix(&format!(" {name}")))
            .with_context(|| format!("no mark {name}"))?
            .parse()
            .with_context(|| format!("mark {name}"))
    };
    let mut walls = BTreeMap::new();
    for case in CASES {
        walls.insert(
            case,
            at(format!("{case}_done"))? - at(format!("{case}_start"))?,
        );
    }
    Ok(walls)
}

/// The sum of bpftrace's `@[pid]: n` lines, printed when it stops.
fn bpftrace_total(out: &str) -> u64 {
    out.lines()
        .filter(|l| l.starts_with("@["))
        .filter_map(|l| l.rsplit_once(": ")?.1.trim().parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = r#"[{"id":7,"type":"tracepoint","name":"f2fs_node_read_","run_time_ns":5000,"run_cnt":10},
        {"id":8,"type":"tracepoint","name":"f2fs_node_write","run_time_ns":900,"run_cnt":3}]"#;

    #[test]
    fn cost_is_the_chosen_programs_difference() {
        let before = programs(LISTING).unwrap();
        let after = programs(&LISTING.replace("5000", "35000").replace(":10}", ":40}")).unwrap();
        let ours = cost(&before, &after, |p| p.name.starts_with(OUR_PROGRAM_PREFIX)).unwrap();
        assert_eq!(
            ours,
            Cost {
                ns: 30000,
                runs: 30
            }
        );
        assert_eq!(ours.ns_per_run(), 1000.0);
        assert_eq!(cost(&before, &before, |_| true), None);
    }

    #[test]
    fn walls_and_bpftrace_counts_are_read() {
        let marks = "1.00 none_start\n11.50 none_done\n12.00 ours_start\n23.00 ours_done\n\
                     30.00 bpftrace_start\n42.25 bpftrace_done\n50.00 both_start\n63.50 both_done\n\
                     70.00 rev_start\n80.00 rev_done\n";
        let walls = wall_times(marks).unwrap();
        assert_eq!(
            (
                walls["none"],
                walls["ours"],
                walls["bpftrace"],
                walls["both"]
            ),
            (10.5, 11.0, 12.25, 13.5)
        );
        assert!(wall_times("1.0 none_start\n").is_err());
        let out = "Attaching 1 probe...\n\n\n@[301]: 65\n@[302]: 66\n";
        assert_eq!(bpftrace_total(out), 131);
    }

    #[test]
    fn plan_must_name_the_counted_tracepoint() {
        let plan = "node_reads   tracepoint f2fs:f2fs_submit_page_bio\n  not used: ...\n";
        assert!(check_plan(plan).is_ok());
        assert!(check_plan("node_reads   kprobe read_node_page\n").is_err());
        assert!(check_plan("").is_err());
    }
}
