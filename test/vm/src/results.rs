//! What a guest run leaves in /results, read back on the host: its stream phases summed, the
//! kernel's counters (iostat "fs node" reads, the CP count), and the verdict a run prints.
//! Every phase's check reads through here; it imports no phase.
use std::{collections::BTreeMap, fs, path::Path, time::Instant};

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
    pub fn reads(&self) -> u64 {
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

/// "Hits: N" from a hist trigger's output, summed over every hist in `hist` (the guest puts
/// one per probed function in one file: 6.15 and later look nodes up through three).
pub fn hist_hits(hist: &str) -> Option<u64> {
    let hits: Vec<u64> = hist
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Hits:"))
        .map(|n| n.trim().parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    (!hits.is_empty()).then(|| hits.iter().sum())
}

/// Everything measured in one guest run, and the verdict.
pub struct Verdict {
    pub lines: Vec<String>,
    pub final_line: String,
    pub pass: bool,
}

pub(super) fn expect(failures: &mut Vec<String>, ok: bool, what: String) {
    if !ok {
        failures.push(what);
    }
}

pub(super) fn read_number(dir: &Path, file: &str) -> Option<u64> {
    fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

/// uid -> (the app name the stream gave it, its node reads over the phase), from the stream
/// lines in `dir`/`file`.
pub(super) fn stream_reads_by_uid(dir: &Path, file: &str) -> Result<BTreeMap<u64, (String, u64)>> {
    let text = fs::read_to_string(dir.join(file)).with_context(|| format!("no {file}"))?;
    let mut found: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value = serde_json::from_str::<Value>(line)
            .with_context(|| format!("bad stream line {line:?}"))?;
        for process in value["processes"].as_array().into_iter().flatten() {
            let entry = found
                .entry(process["uid"].as_u64().unwrap_or(0))
                .or_default();
            entry.0 = process["app"].as_str().unwrap_or("").to_string();
            entry.1 += process["node_reads_demand"].as_u64().unwrap_or(0)
                + process["node_reads_readahead"].as_u64().unwrap_or(0);
        }
    }
    Ok(found)
}

/// One kernel's run, printed as every vm-test prints it: the verdict's lines (or
/// `  FAILED: <error>`, and `failed` as the final line), the time it took, the final line. That
/// line and whether the run passed.
pub(super) fn report(
    label: &str,
    failed: String,
    run: impl FnOnce() -> Result<Verdict>,
) -> (String, bool) {
    let started = Instant::now();
    let (line, pass) = match run() {
        Ok(verdict) => {
            for l in &verdict.lines {
                println!("{l}");
            }
            (verdict.final_line, verdict.pass)
        }
        Err(err) => {
            println!("  FAILED: {err:#}");
            (failed, false)
        }
    };
    println!("vm-test {label}: {:.1} s", started.elapsed().as_secs_f64());
    println!("{line}");
    (line, pass)
}

#[cfg(test)]
mod tests;
