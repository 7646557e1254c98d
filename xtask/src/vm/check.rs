//! The host side of the VM test: read what the guest left in /results and check it.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use anyhow::{Context as _, Result};
use serde_json::Value;

/// Per-process totals over one stream run (all its interval lines).
#[derive(Clone, Debug, Default)]
pub struct Proc {
    pub comm: String,
    pub demand: u64,
    pub readahead: u64,
    pub writes: u64,
    pub checkpoints: u64,
}

impl Proc {
    fn reads(&self) -> u64 {
        self.demand + self.readahead
    }
}

/// One stream run (phase), summed.
#[derive(Debug, Default)]
pub struct Phase {
    pub procs: BTreeMap<u64, Proc>,
    pub checkpoints: u64,
    pub node_writes: u64,
    pub events: u64,
    pub drops: u64,
    /// Increments the kernel's counter map could not take (`counter_drops`), summed.
    pub counter_drops: u64,
    pub lines: usize,
    pub rc: Option<i32>,
    /// iostat "fs node" read blocks and debugfs CP count, after minus before.
    pub iostat_delta: u64,
    pub cp_delta: u64,
    /// Per-kind counts of the RFC probes (`rfc` in the stream lines), summed.
    pub rfc: BTreeMap<String, u64>,
    /// NAT and SIT journal entries (`checkpoint.nat_journal` + `sit_journal`), summed.
    pub journal: u64,
}

impl Phase {
    pub fn reads(&self) -> u64 {
        self.procs.values().map(Proc::reads).sum()
    }

    /// Node reads by processes whose comm is not `comm`.
    pub fn reads_not_by(&self, comm: &str) -> u64 {
        self.procs
            .values()
            .filter(|p| p.comm != comm)
            .map(Proc::reads)
            .sum()
    }

    pub fn readahead(&self) -> u64 {
        self.procs.values().map(|p| p.readahead).sum()
    }

    pub fn load(dir: &Path, name: &str) -> Result<Phase> {
        let mut phase = Phase::default();
        let text = fs::read_to_string(dir.join(format!("stream_{name}.jsonl")))
            .with_context(|| format!("no stream output for phase {name}"))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v = serde_json::from_str::<Value>(line)
                .with_context(|| format!("phase {name}: bad line {line:?}"))?;
            phase.add_line(&v);
        }
        phase.rc = fs::read_to_string(dir.join(format!("stream_{name}.rc")))
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let before = read_counters(dir, &format!("{name}_before"))?;
        let after = read_counters(dir, &format!("{name}_after"))?;
        phase.iostat_delta = after.0.saturating_sub(before.0);
        phase.cp_delta = after.1.saturating_sub(before.1);
        Ok(phase)
    }

    fn add_line(&mut self, v: &Value) {
        self.lines += 1;
        self.events += v["events"].as_u64().unwrap_or(0);
        self.drops += v["drops"].as_u64().unwrap_or(0);
        self.counter_drops += v["counter_drops"].as_u64().unwrap_or(0);
        for d in v["devices"].as_array().into_iter().flatten() {
            self.checkpoints += d["checkpoints"].as_u64().unwrap_or(0);
            self.node_writes += d["node_writes"].as_u64().unwrap_or(0);
        }
        let checkpoint = &v["checkpoint"];
        self.journal += checkpoint["nat_journal"].as_u64().unwrap_or(0)
            + checkpoint["sit_journal"].as_u64().unwrap_or(0);
        for kind in ["restore", "convert"] {
            *self.rfc.entry(kind.to_string()).or_default() += v["rfc"][kind].as_u64().unwrap_or(0);
        }
        for p in v["processes"].as_array().into_iter().flatten() {
            let entry = self
                .procs
                .entry(p["pid"].as_u64().unwrap_or(0))
                .or_default();
            entry.comm = p["comm"].as_str().unwrap_or("").to_string();
            entry.demand += p["node_reads_demand"].as_u64().unwrap_or(0);
            entry.readahead += p["node_reads_readahead"].as_u64().unwrap_or(0);
            entry.writes += p["node_writes"].as_u64().unwrap_or(0);
            entry.checkpoints += p["checkpoints"].as_u64().unwrap_or(0);
        }
    }

    pub fn summary(&self) -> String {
        let mut busiest: Vec<(&u64, &Proc)> = self.procs.iter().collect();
        busiest.sort_by_key(|(_, p)| std::cmp::Reverse(p.reads() + p.writes));
        let top: Vec<String> = busiest
            .iter()
            .take(4)
            .map(|(pid, p)| {
                format!(
                    "{}[{pid}] d={} ra={} w={} cp={}",
                    p.comm, p.demand, p.readahead, p.writes, p.checkpoints
                )
            })
            .collect();
        format!(
            "reads={} (ra {}) iostat={} writes={} checkpoints={} cp_delta={} events={} drops={} lines={} rc={:?}; {}",
            self.reads(),
            self.readahead(),
            self.iostat_delta,
            self.node_writes,
            self.checkpoints,
            self.cp_delta,
            self.events,
            self.drops,
            self.lines,
            self.rc,
            top.join(", ")
        )
    }

    /// Phase `name` for a check that reports into `failures`: where it cannot be loaded, the
    /// error goes there (`name: error`) and there is none.
    pub fn load_or_fail(dir: &Path, name: &str, failures: &mut Vec<String>) -> Option<Phase> {
        Phase::load(dir, name)
            .map_err(|err| failures.push(format!("{name}: {err:#}")))
            .ok()
    }

    /// What every stream phase over cold reads owes, into `failures` (`name: ...`): node reads
    /// attributed equal iostat's, exactly, and some; no counter increment lost.
    pub fn expect_exact(&self, name: &str, failures: &mut Vec<String>) {
        expect(
            failures,
            self.reads() == self.iostat_delta && self.reads() > 0,
            format!(
                "{name}: attributed {} != iostat {}",
                self.reads(),
                self.iostat_delta
            ),
        );
        expect(
            failures,
            self.counter_drops == 0,
            format!("{name}: {} counter increments lost", self.counter_drops),
        );
    }
}

/// ("fs node" read blocks, CP count) from the guest's copies of iostat_info and debugfs status.
fn read_counters(dir: &Path, label: &str) -> Result<(u64, u64)> {
    let iostat = fs::read_to_string(dir.join(format!("iostat_{label}.txt")))
        .with_context(|| format!("no iostat_info copy for {label}"))?;
    Ok((
        fs_node_reads(&iostat)
            .with_context(|| format!("no [READ] fs node row in iostat_{label}"))?,
        read_cp_count(dir, label)?,
    ))
}

/// The CP count from the debugfs status copy, or where the guest mounts no debugfs (Android's
/// convention, the arm64 run) from its copy of /sys/fs/f2fs/<dev>/cp_foreground_calls: the
/// same counter as debugfs "CP calls" (stat_info's cp_count) on 6.1.
fn read_cp_count(dir: &Path, label: &str) -> Result<u64> {
    if let Ok(status) = fs::read_to_string(dir.join(format!("status_{label}.txt"))) {
        return cp_count(&status).with_context(|| format!("no CP count in status_{label}"));
    }
    let sysfs = fs::read_to_string(dir.join(format!("cp_{label}.txt")))
        .with_context(|| format!("no debugfs status nor sysfs CP count copy for {label}"))?;
    sysfs
        .trim()
        .parse()
        .with_context(|| format!("cp_{label}.txt: not a count: {:?}", sysfs.trim()))
}

/// The "fs node:" row of iostat_info's [READ] section, in blocks: its count column when the
/// kernel prints one (6.1+: io_bytes count avg_bytes), else bytes / 4096.
pub fn fs_node_reads(iostat: &str) -> Option<u64> {
    let read = iostat.split("[READ]").nth(1)?;
    let row = read
        .lines()
        .find_map(|l| l.trim().strip_prefix("fs node:"))?;
    let numbers: Vec<u64> = row
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    match numbers.as_slice() {
        [_, count, ..] => Some(*count),
        [bytes] => Some(bytes / 4096),
        _ => None,
    }
}

/// Completed checkpoints from /sys/kernel/debug/f2fs/status: "CP count: N" where the kernel has
/// it (newer: "CP calls" counts calls then), else "CP calls: N (BG: M)".
pub fn cp_count(status: &str) -> Option<u64> {
    let number = |prefix: &str| {
        status.lines().find_map(|l| {
            let rest = l.trim().strip_prefix(prefix)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    };
    number("CP count:").or_else(|| number("CP calls:"))
}

/// Everything measured in one guest run, and the verdict.
pub struct Verdict {
    pub lines: Vec<String>,
    pub final_line: String,
    pub pass: bool,
}

pub fn check(
    label: &str,
    dir: &Path,
    ndirs: u64,
    nfiles: u64,
    variants: &[&str],
    sim_line: &Value,
    nodescope: &Path,
) -> Result<Verdict> {
    let mut core = check_core(dir, ndirs, nfiles, variants, sim_line)?;
    let (lines, failures) = (&mut core.lines, &mut core.failures);
    check_rfc_probes(dir, lines, failures);
    let churn = super::churn::check(dir, lines, failures);
    check_perfetto_export(dir, nodescope, lines, failures);
    let tune_steps = super::tune_check::check_tune(dir, lines, failures);
    let discover = super::discover::check(dir, lines, failures);
    let daemon = super::daemon::check(dir, lines, failures);
    let uids = super::uidswitch::check(dir, lines, failures);
    let disk = dir.parent().unwrap_or(dir).join(super::qemu::DISK_IMAGE);
    let accesses = super::accesses::check(
        dir,
        &disk,
        nodescope,
        super::accesses::LookupHook::Fentry,
        lines,
        failures,
    );
    let remount = super::remount::check(dir, lines, failures);
    let types = node_types::check_file(dir, &disk, lines, failures);
    super::cp_anatomy::check(label, dir, nodescope, lines, failures);
    Ok(core.verdict(
        label,
        &format!("tune_steps={tune_steps} {churn} {discover} {daemon} {uids} {accesses} {remount} {types}"),
    ))
}

/// The checks every architecture's run makes, and the figures of its VM line.
pub struct Core {
    pub lines: Vec<String>,
    pub failures: Vec<String>,
    attributed: u64,
    iostat: u64,
    cat_pids: u64,
    readahead: u64,
    checkpoints: u64,
}

impl Core {
    /// The failures listed after the lines, and the final line: the core figures, then `more`.
    pub fn verdict(mut self, label: &str, more: &str) -> Verdict {
        for failure in &self.failures {
            self.lines.push(format!("  FAILED: {failure}"));
        }
        let pass = self.failures.is_empty();
        let final_line = format!(
            "vm-test {label} attributed={} iostat={} cat_pids={} readahead={} checkpoints={} {more} {}",
            self.attributed,
            self.iostat,
            self.cat_pids,
            self.readahead,
            self.checkpoints,
            if pass { "PASS" } else { "FAIL" }
        );
        Verdict {
            lines: self.lines,
            final_line,
            pass,
        }
    }
}

/// The schema, the guest's errors, the names, glob and sync phases and the fallback variants.
pub fn check_core(
    dir: &Path,
    ndirs: u64,
    nfiles: u64,
    variants: &[&str],
    sim_line: &Value,
) -> Result<Core> {
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    check_schema(dir, sim_line, &mut lines, &mut failures);
    if let Ok(errors) = fs::read_to_string(dir.join("guest_errors.txt")) {
        failures.extend(errors.lines().map(|l| format!("guest: {l}")));
    }
    let names = Phase::load(dir, "names")?;
    let glob = Phase::load(dir, "glob")?;
    let sync = Phase::load(dir, "sync")?;
    for (name, phase) in [("names", &names), ("glob", &glob), ("sync", &sync)] {
        lines.push(format!("  {name:<8} {}", phase.summary()));
        check_phase(name, phase, &mut failures);
    }
    let cats: BTreeSet<u64> = names
        .procs
        .iter()
        .filter(|(_, p)| p.comm == "cat" && p.reads() > 0)
        .map(|(pid, _)| *pid)
        .collect();
    let cat_pids = cats.len() as u64;
    let non_cat = names.reads_not_by("cat");
    expect(
        &mut failures,
        non_cat == 0,
        format!("names: {non_cat} node reads not by cat"),
    );
    expect(
        &mut failures,
        cat_pids == ndirs,
        format!("names: cat over {cat_pids} pids, want {ndirs}"),
    );
    expect(
        &mut failures,
        names.readahead() == 0,
        format!("names: {} readahead reads, want 0", names.readahead()),
    );

    let shell_pid: u64 = read_number(dir, "shell_glob.pid").unwrap_or(0);
    let shell = glob.procs.get(&shell_pid).cloned().unwrap_or_default();
    let readahead = shell.readahead;
    lines.push(format!(
        "  glob     listing shell pid {shell_pid} ({}): demand={} readahead={}",
        shell.comm, shell.demand, shell.readahead
    ));
    expect(
        &mut failures,
        shell.reads() == glob.reads(),
        format!(
            "glob: the listing shell has {} of {} node reads",
            shell.reads(),
            glob.reads()
        ),
    );
    expect(
        &mut failures,
        readahead == glob.readahead(),
        format!(
            "glob: readahead by others: {}",
            glob.readahead() - readahead
        ),
    );
    expect(
        &mut failures,
        readahead >= ndirs * nfiles,
        format!("glob: readahead {readahead} < {} files", ndirs * nfiles),
    );
    node_types::check(dir, glob.reads(), &mut lines, &mut failures);

    let main = [&names, &glob, &sync];
    let attributed: u64 = main.iter().map(|p| p.reads()).sum();
    let iostat: u64 = main.iter().map(|p| p.iostat_delta).sum();
    let checkpoints: u64 = main.iter().map(|p| p.checkpoints).sum();
    let cp_delta: u64 = main.iter().map(|p| p.cp_delta).sum();
    expect(
        &mut failures,
        checkpoints == cp_delta && checkpoints > 0,
        format!("checkpoints {checkpoints} vs debugfs CP count delta {cp_delta}"),
    );

    for variant in variants {
        let name = format!("variant_{variant}");
        match Phase::load(dir, &name) {
            Ok(phase) => {
                lines.push(format!("  {variant:<8} {}", phase.summary()));
                check_phase(&name, &phase, &mut failures);
                let non_cat = phase.reads_not_by("cat");
                expect(
                    &mut failures,
                    non_cat == 0 && phase.readahead() == 0 && phase.reads() > 0,
                    format!("{name}: reads must all be demand reads by cat"),
                );
            }
            Err(err) => failures.push(format!("{name}: {err:#}")),
        }
    }
    Ok(Core {
        lines,
        failures,
        attributed,
        iostat,
        cat_pids,
        readahead,
        checkpoints,
    })
}

/// The fields of a stream line, nested ones by path: the schema two lines must share.
pub fn schema(line: &Value) -> Vec<String> {
    fn keys(value: &Value) -> impl Iterator<Item = &String> {
        value.as_object().into_iter().flat_map(|o| o.keys())
    }
    let mut paths: Vec<String> = keys(line).cloned().collect();
    for object in ["totals", "cumulative", "cache", "checkpoint"] {
        paths.extend(keys(&line[object]).map(|k| format!("{object}.{k}")));
    }
    for list in ["processes", "devices"] {
        if let Some(first) = line[list].as_array().and_then(|items| items.first()) {
            paths.extend(keys(first).map(|k| format!("{list}[].{k}")));
        }
    }
    paths.sort();
    paths
}

/// The kernel's busiest line in the names phase has exactly the fields of the simulator's.
fn check_schema(dir: &Path, sim_line: &Value, lines: &mut Vec<String>, failures: &mut Vec<String>) {
    // The glob phase's: it streams with --image, so its lines split node reads by node type
    // as the simulator's do.
    let text = fs::read_to_string(dir.join("stream_glob.jsonl")).unwrap_or_default();
    let Some(kernel_line) = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .max_by_key(|line| line["processes"].as_array().map_or(0, Vec::len))
    else {
        failures.push("schema: no stream line in the glob phase".into());
        return;
    };
    let (kernel, sim) = (schema(&kernel_line), schema(sim_line));
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|p| !b.contains(p)).cloned().collect()
    };
    lines.push(format!(
        "  schema   kernel {} fields, simulator {} fields, counts {} / {}",
        kernel.len(),
        sim.len(),
        kernel_line["counts"].as_str().unwrap_or(""),
        sim_line["counts"].as_str().unwrap_or("")
    ));
    expect(
        failures,
        kernel == sim && kernel.iter().any(|p| p.starts_with("devices[].")),
        format!(
            "schema: only the kernel's lines have {:?}, only the simulator's {:?}",
            only(&kernel, &sim),
            only(&sim, &kernel)
        ),
    );
}

/// The guest's recording of the kernel source, reported and exported to Perfetto here: the
/// trace parses with Perfetto's own proto classes and its per-app node reads and restores equal
/// the report's (tracer-user/tests/data/check_perfetto.py).
fn check_perfetto_export(
    dir: &Path,
    nodescope: &Path,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    match export_and_check(dir, nodescope) {
        Ok(summary) => lines.push(format!("  perfetto {summary}")),
        Err(err) => failures.push(format!("perfetto: {err:#}")),
    }
}

fn export_and_check(dir: &Path, nodescope: &Path) -> Result<String> {
    let recording = dir.join("variant.nsr");
    let rc = read_number(dir, "record.rc");
    anyhow::ensure!(
        rc == Some(0),
        "nodescope record in the guest ended with {rc:?}"
    );
    let report = std::process::Command::new(nodescope)
        .args(["report", "--json"])
        .arg(&recording)
        .output()
        .context("running nodescope report")?;
    anyhow::ensure!(report.status.success(), "nodescope report failed");
    let report_path = dir.join("variant-report.json");
    fs::write(&report_path, &report.stdout)?;
    let reads = serde_json::from_str::<Value>(String::from_utf8_lossy(&report.stdout).trim())
        .map(|r| r["totals"]["node_reads_demand"].as_u64().unwrap_or(0))
        .unwrap_or(0);
    anyhow::ensure!(reads > 0, "the guest's recording holds no node read");
    let trace = dir.join("variant.perfetto-trace");
    let export = std::process::Command::new(nodescope)
        .args(["export", "--perfetto"])
        .arg(&recording)
        .arg("-o")
        .arg(&trace)
        .output()
        .context("running nodescope export")?;
    anyhow::ensure!(
        export.status.success(),
        "nodescope export failed: {}",
        String::from_utf8_lossy(&export.stderr).trim()
    );
    let checker = crate::util::workspace_root().join("tracer-user/tests/data/check_perfetto.py");
    let check = std::process::Command::new("python3")
        .arg(&checker)
        .arg(&trace)
        .arg(&report_path)
        .output()
        .context("running the Perfetto checker (cargo xtask setup installs its package)")?;
    let said = String::from_utf8_lossy(&check.stdout).trim().to_string();
    anyhow::ensure!(
        check.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&check.stderr).trim()
    );
    Ok(format!("demand reads {reads}: {said}"))
}

/// The RFC probes at entry and at return on f2fs_get_node_page, by BPF trampolines (fentry,
/// fentry + fexit: x86_64 has them on both kernels), count exactly the calls the kernel's own
/// kprobe_events hist trigger counted.
fn check_rfc_probes(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) {
    let err = fs::read_to_string(dir.join("stream_rfc.err")).unwrap_or_default();
    for said in [
        "rfc: restore -> f2fs_get_node_page (fentry)",
        "rfc: convert -> f2fs_get_node_page (fentry + fexit)",
    ] {
        expect(
            failures,
            err.lines().any(|l| l.ends_with(said)),
            format!("rfc: the stream did not say `{said}` (stream_rfc.err)"),
        );
    }
    let phase = match Phase::load(dir, "rfc") {
        Ok(phase) => phase,
        Err(err) => return failures.push(format!("rfc: {err:#}")),
    };
    let hist = fs::read_to_string(dir.join("rfc_hist.txt")).unwrap_or_default();
    let hits = hist_hits(&hist);
    let (entry, ret) = (
        phase.rfc.get("restore").copied(),
        phase.rfc.get("convert").copied(),
    );
    lines.push(format!(
        "  rfc      fentry f2fs_get_node_page={entry:?} fexit={ret:?} kprobe_events hist={hits:?}"
    ));
    expect(
        failures,
        hits.is_some_and(|h| h > 0) && entry == hits && ret == hits,
        format!("rfc: fentry {entry:?} and fexit {ret:?} must equal the hist trigger's {hits:?}"),
    );
}

/// "Hits: N" from a hist trigger's output.
pub fn hist_hits(hist: &str) -> Option<u64> {
    hist.lines()
        .find_map(|line| line.trim().strip_prefix("Hits:"))
        .and_then(|n| n.trim().parse().ok())
}

fn check_phase(name: &str, phase: &Phase, failures: &mut Vec<String>) {
    expect(
        failures,
        phase.reads() == phase.iostat_delta,
        format!(
            "{name}: attributed {} != iostat {}",
            phase.reads(),
            phase.iostat_delta
        ),
    );
    expect(
        failures,
        phase.rc == Some(0),
        format!("{name}: nodescope stream exit status {:?}", phase.rc),
    );
    expect(
        failures,
        phase.lines > 0,
        format!("{name}: no stream lines"),
    );
}

pub(super) fn expect(failures: &mut Vec<String>, ok: bool, what: String) {
    if !ok {
        failures.push(what);
    }
}

pub(super) fn read_number(dir: &Path, file: &str) -> Option<u64> {
    fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests;

mod node_types;
pub use node_types::{TYPES_FILE, TYPES_FILE_BLOCKS};
