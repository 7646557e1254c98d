//! `cargo xtask vm-foreign` (issue 49): nodescope on implementations of the RFC it has never
//! seen. The foreign variants (kmod/foreign.rs: the reference module without its tracepoints;
//! the same renamed as another author might, its statics inlined) in one boot of Debian's stock
//! 6.12, loaded in turn (guest: foreign.sh). For each, `nodescope stream` and `nodescope record`
//! with no flags over a workload that makes every kind of event, held to the module's own
//! counters over the same span: every count exact through the stream and through the report,
//! the kinds nodescope says it sees one by one exact per event, the entries per queue at the end,
//! `top` with no flags showing the panels. One line per variant:
//!
//! ```text
//! rfc-foreign 6.12 variant=renamed per_event=3/11 totals_only=8 unavailable=0 exact=42/42 gauges=ok top=ok drops=0 PASS
//! ```
use std::{
    fs,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::{
    initramfs, kernel,
    kmod_phase::{count_checks, gauge_checks, top_checks, Exact, ModuleCounters, Span},
    qemu,
};
use crate::{
    kmod::{
        self,
        foreign::{self, Foreign},
    },
    util,
};

/// The file set: a quarter of the RFC's small files (the shaped files and the sentinel whole).
const NDIRS: u64 = 64;
const NFILES: u64 = 64;
const THRESHOLD: u32 = 25;
/// The budget phase's attributed bytes: below what the file set takes raw.
const BUDGET_BYTES: u64 = 2_000_000;
const VM_TIMEOUT: Duration = Duration::from_secs(1500);

/// The kinds held to the module's counters: every RFC kind the counters count.
const KINDS: [&str; 10] = [
    "insert",
    "forget",
    "convert",
    "convert_reject",
    "convert_abort",
    "restore",
    "restore_nomem",
    "restore_fail",
    "reclaim",
    "second_chance",
];
/// (nodescope's kind, the module's counter of it), for the per-event checks.
const KIND_COUNTERS: [(&str, &[&str]); 10] = [
    ("insert", &["inserts"]),
    ("forget", &["forgets"]),
    ("convert", &["conversions"]),
    ("convert_reject", &["convert_rejects"]),
    ("convert_abort", &["convert_aborts"]),
    ("restore", &["restores"]),
    ("restore_nomem", &["restore_nomem"]),
    ("restore_fail", &["restore_fails"]),
    (
        "reclaim",
        &["reclaim_raw", "reclaim_256", "reclaim_512", "reclaim_1024"],
    ),
    (
        "second_chance",
        &[
            "second_chance_worker",
            "second_chance_shrinker",
            "second_chance_race",
        ],
    ),
];

/// One variant's verdict line and whether it passed.
pub struct Outcome {
    pub name: &'static str,
    pub line: String,
    pub pass: bool,
}

/// Build the foreign variants (cached), boot once, check each; an error is a failure of the
/// phase as a whole (no module, no boot).
pub fn build_and_run() -> Result<Vec<Outcome>> {
    let started = Instant::now();
    let tree = kmod::prepare(foreign::LABEL)?;
    let built = foreign::build(&tree)?;
    for (variant, module) in &built {
        println!("{}", module.summary(foreign::LABEL, variant.short()));
    }
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == foreign::LABEL)
        .context("no 6.12 kernel in vm::kernel::KERNELS")?;
    let cache = util::target_dir().join("vm-cache");
    let kernel = kernel::prepare(spec, &cache)?;
    let nodescope = util::build_nodescope()?;
    let files = qemu::GuestFiles::fresh(cache.join("run-foreign"))?;
    let modules: Vec<(String, &Path)> = built
        .iter()
        .map(|(v, m)| (format!("f2fs-{}.ko", v.short()), m.ko.as_path()))
        .collect();
    fs::write(&files.initrd, initramfs_for(&kernel, &nodescope, &modules)?)?;
    files.create_disks()?;
    let out = files.boot_and_unpack("foreign", crate::Arch::X86_64, &kernel.vmlinuz, VM_TIMEOUT)?;
    let guest_errors = fs::read_to_string(out.join("guest_errors.txt")).unwrap_or_default();
    let mut outcomes = Vec::new();
    for (variant, _) in &built {
        let mut problems: Vec<String> = guest_errors
            .lines()
            .filter(|l| {
                l.strip_prefix(variant.short())
                    .is_some_and(|r| r.starts_with(':'))
            })
            .map(|l| format!("guest: {l}"))
            .collect();
        let (lines, line, pass) = verdict(variant, &out.join(variant.short()), &mut problems);
        for l in lines {
            println!("{l}");
        }
        println!("{line}");
        outcomes.push(Outcome {
            name: variant.name,
            line,
            pass,
        });
    }
    println!(
        "vm-foreign: {:.1} s in all (results in {})",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    if outcomes.iter().all(|o| o.pass) {
        files.remove_images();
    }
    Ok(outcomes)
}

/// The CLI: every line again at the end, and an error when one failed.
pub fn run() -> Result<()> {
    let outcomes = build_and_run()?;
    for outcome in &outcomes {
        println!("{}", outcome.line);
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.pass)
        .map(|o| o.name)
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("vm-foreign failed: {}", failed.join(", "));
    }
    Ok(())
}

fn initramfs_for(
    kernel: &kernel::Kernel,
    nodescope: &Path,
    modules: &[(String, &Path)],
) -> Result<Vec<u8>> {
    let replay_all = super::settings::replay_script(super::settings::Replay::Names, NDIRS)
        + "cat /mnt/shaped/* /mnt/sentinel > /dev/null\n";
    let files = [
        ("init", include_str!("../guest/foreign.sh").to_string()),
        ("replay-all", replay_all),
        (
            "replay-small",
            super::settings::replay_script(super::settings::Replay::Names, NDIRS),
        ),
        ("etc/vm-test.conf", guest_config()),
    ];
    let tmux = Path::new("/usr/bin/tmux");
    initramfs::build_with_f2fs_modules(kernel, nodescope, &files, &[tmux], modules)
}

/// /etc/vm-test.conf: the workload, the variants, and each one's debugfs files.
fn guest_config() -> String {
    let mut config =
        format!("NDIRS={NDIRS}\nNFILES={NFILES}\nTHRESHOLD={THRESHOLD}\nBUDGET={BUDGET_BYTES}\n");
    let names: Vec<&str> = foreign::FOREIGN.iter().map(Foreign::short).collect();
    config += &format!("FOREIGN=\"{}\"\n", names.join(" "));
    for v in &foreign::FOREIGN {
        let var = v.short().replace('-', "_");
        config += &format!(
            "NC_{var}={}\nFAULT_{var}={}\nBUDGET_{var}={}\n",
            v.counters_file, v.fault_file, v.budget_file
        );
    }
    config
}

/// The kinds in each state, and how many kinds there are.
#[derive(Clone, Debug, Default)]
struct States {
    per_event: Vec<String>,
    totals_only: Vec<String>,
    unavailable: Vec<String>,
    total: usize,
}

/// The states `RFC kinds: per event N/11 (a b); totals only K (c d); unavailable U (...)` of
/// the last such line in `text` (the stream's closing note says them at the end).
fn states(text: &str) -> Option<States> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("RFC kinds: per event"))?;
    let summary = &line[line.rfind("RFC kinds: per event")?..];
    let names = |label: &str| -> Vec<String> {
        let Some(at) = summary.find(label) else {
            return Vec::new();
        };
        let rest = &summary[at + label.len()..];
        let rest = rest.split(';').next().unwrap_or("");
        match (rest.find('('), rest.find(')')) {
            (Some(open), Some(close)) if open < close => rest[open + 1..close]
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        }
    };
    let total: usize = summary
        .split_once('/')?
        .1
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some(States {
        per_event: names("per event "),
        totals_only: names("totals only "),
        unavailable: names("unavailable "),
        total,
    })
}

/// The detail lines, the verdict line, and whether it passed.
fn verdict(
    variant: &Foreign,
    dir: &Path,
    problems: &mut Vec<String>,
) -> (Vec<String>, String, bool) {
    let mut lines = Vec::new();
    let name = variant.short().trim_start_matches("foreign-");
    let mut exact = Exact::default();
    let (start, end) = match (
        ModuleCounters::read(dir, "start"),
        ModuleCounters::read(dir, "end"),
    ) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(err), _) | (_, Err(err)) => {
            problems.push(format!("{err:#}"));
            let line = format!("rfc-foreign 6.12 variant={name} FAIL");
            return (lines, line, false);
        }
    };
    let kinds: Vec<String> = KINDS.iter().map(|k| k.to_string()).collect();
    let stream = fs::read_to_string(dir.join("exact.json")).unwrap_or_default();
    let windows: Vec<Value> = stream
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let err = fs::read_to_string(dir.join("exact.err")).unwrap_or_default();
    let states = states(&err);
    let States {
        per_event,
        totals_only,
        unavailable,
        total,
    } = states.clone().unwrap_or_default();
    if states.is_none() {
        problems.push("the stream did not say what it sees of each kind (exact.err)".into());
    }
    for line in err.lines().filter(|l| {
        l.starts_with("  ")
            && KINDS
                .iter()
                .chain(["node_read"].iter())
                .any(|k| l.trim_start().starts_with(k))
    }) {
        lines.push(format!("  {}", line.trim_start()));
    }
    let mut gauges_ok = false;
    let mut drops = 0;
    match windows.last() {
        Some(last) => {
            drops = windows
                .iter()
                .map(|w| w["drops"].as_u64().unwrap_or(0))
                .sum();
            let span = Span {
                label: "stream",
                start: &start,
                end: &end,
            };
            count_checks(
                &span,
                &kinds,
                false,
                &last["cumulative"],
                &mut exact,
                problems,
                &mut lines,
            );
            let before = problems.len();
            gauge_checks(&last["cache"], &start, &end, problems, &mut lines);
            gauges_ok = problems.len() == before;
            per_event_checks(&windows, &per_event, &start, &end, problems, &mut lines);
        }
        None => problems.push("the stream printed no window (exact.json, exact.err)".into()),
    }
    for (file, what) in [
        ("exact.rc", "the stream"),
        ("record.rc", "record"),
        ("report.rc", "report"),
    ] {
        let rc = fs::read_to_string(dir.join(file)).unwrap_or_default();
        if rc.trim() != "0" {
            problems.push(format!("{what} exited {:?}", rc.trim()));
        }
    }
    match serde_json::from_str::<Value>(
        &fs::read_to_string(dir.join("report.json")).unwrap_or_default(),
    ) {
        Ok(report) => {
            drops += report["drops"].as_u64().unwrap_or(0);
            let span = Span {
                label: "record + report",
                start: &start,
                end: &end,
            };
            count_checks(
                &span,
                &kinds,
                false,
                &report["totals"],
                &mut exact,
                problems,
                &mut lines,
            );
        }
        Err(_) => problems.push("no report (report.json, report.err)".into()),
    }
    if drops > 0 {
        problems.push(format!("{drops} events lost"));
    }
    if !unavailable.is_empty() {
        problems.push(format!("unavailable: {}", unavailable.join(" ")));
    }
    probe_checks(dir, &per_event, problems, &mut lines);
    let mut top_ok = top_checks(dir, problems, &mut lines);
    // Each kind's state in top's header, whatever the terminal's width leaves of the rest.
    let screen = fs::read_to_string(dir.join("top_screen_1.txt")).unwrap_or_default();
    if !screen.contains("RFC kinds: per event") {
        problems.push("top: its header does not say the RFC kinds' states".into());
        top_ok = false;
    }
    let pass = problems.is_empty();
    for problem in problems.iter() {
        lines.push(format!("  problem: {problem}"));
    }
    let line = format!(
        "rfc-foreign 6.12 variant={name} per_event={}/{total} totals_only={} unavailable={} \
         exact={}/{} gauges={} top={} drops={drops} {}",
        per_event.len(),
        totals_only.len(),
        unavailable.len(),
        exact.equal,
        exact.checks,
        if gauges_ok { "ok" } else { "bad" },
        if top_ok { "ok" } else { "bad" },
        if pass { "PASS" } else { "FAIL" }
    );
    (lines, line, pass)
}

/// `nodescope probe` says what each kind would be seen by: a line per kind, and the kinds the
/// stream saw one by one to the end among its per-event ones.
fn probe_checks(
    dir: &Path,
    per_event: &[String],
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let probe = fs::read_to_string(dir.join("probe.txt")).unwrap_or_default();
    let Some(at) = probe.find("The RFC's event kinds") else {
        problems.push("probe: no \"The RFC's event kinds\" table (probe.txt)".into());
        return;
    };
    let table: Vec<&str> = probe[at..].lines().skip(1).take(KINDS.len() + 1).collect();
    let state_of = |kind: &str| {
        table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(kind))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
    };
    for kind in KINDS.iter().chain(["node_read"].iter()) {
        match state_of(kind).as_deref() {
            None => problems.push(format!("probe: no line for {kind}")),
            Some("unavailable") => problems.push(format!("probe: {kind} unavailable")),
            Some(_) => {}
        }
    }
    for kind in per_event {
        if state_of(kind).as_deref() != Some("per") {
            problems.push(format!(
                "probe: {kind}, per event in the stream, is not per event"
            ));
        }
    }
    lines.push(format!(
        "  probe: {}",
        probe[at..].lines().next().unwrap_or("")
    ));
}

/// Each kind the stream says it sees one by one: its events (the kernel's count of them,
/// `rfc`, summed over the windows) must be the module's count.
fn per_event_checks(
    windows: &[Value],
    per_event: &[String],
    start: &ModuleCounters,
    end: &ModuleCounters,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    for kind in per_event.iter().filter(|k| *k != "node_read") {
        let Some((_, counters)) = KIND_COUNTERS.iter().find(|(k, _)| k == kind) else {
            continue;
        };
        let events: u64 = windows
            .iter()
            .map(|w| w["rfc"][kind].as_u64().unwrap_or(0))
            .sum();
        let module: u64 = counters.iter().map(|c| end.delta(start, c)).sum();
        let verdict = if events == module { "ok" } else { "DIFFERS" };
        if events != module {
            problems.push(format!(
                "per event: {kind}: {events} events, the module counted {module}"
            ));
        }
        lines.push(format!(
            "  per event {kind:<14} events {events:>8}  module {module:>8}  {verdict}"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closing_summary_gives_each_kinds_state() {
        let err = "nodescope stream: probes: ...; RFC kinds: per event 2/11 (node_read insert); \
                   totals only 9 (convert x); unavailable 0\n\
                   nodescope stream: counter map ...; at the end: RFC kinds: per event 1/11 \
                   (node_read); totals only 10 (insert convert); unavailable 0\n";
        let said = states(err).unwrap();
        assert_eq!(said.per_event, ["node_read"]);
        assert_eq!(said.totals_only, ["insert", "convert"]);
        assert!(said.unavailable.is_empty());
        assert_eq!(said.total, 11);
        assert!(states("nothing").is_none());
    }
}
