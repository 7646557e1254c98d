//! The host side of the VM test: what the guest left in /results, checked. The x86_64 run's
//! verdict calls every phase's own check in turn; reading the results is results.rs's.
use std::{collections::BTreeSet, fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::results::{expect, hist_hits, read_number, Phase, Verdict};

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

/// The RFC probes at entry and at return on f2fs_get_node_page (f2fs_get_inode_folio from 6.16),
/// by BPF trampolines (fentry,
/// fentry + fexit: x86_64 has them on both kernels), count exactly the calls the kernel's own
/// kprobe_events hist trigger counted.
fn check_rfc_probes(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) {
    let err = fs::read_to_string(dir.join("stream_rfc.err")).unwrap_or_default();
    // The guest's choice: f2fs_get_node_page, or f2fs_get_inode_folio where 6.16 removed it.
    let function = fs::read_to_string(dir.join("rfc_function.txt"))
        .map(|f| f.trim().to_string())
        .unwrap_or_else(|_| "f2fs_get_node_page".into());
    for said in [
        format!("rfc: restore -> {function} (fentry)"),
        format!("rfc: convert -> {function} (fentry + fexit)"),
    ] {
        expect(
            failures,
            err.lines().any(|l| l.ends_with(said.as_str())),
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
        "  rfc      fentry {function}={entry:?} fexit={ret:?} kprobe_events hist={hits:?}"
    ));
    expect(
        failures,
        hits.is_some_and(|h| h > 0) && entry == hits && ret == hits,
        format!("rfc: fentry {entry:?} and fexit {ret:?} must equal the hist trigger's {hits:?}"),
    );
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

#[cfg(test)]
mod tests;

mod node_types;
pub use node_types::{TYPES_FILE, TYPES_FILE_BLOCKS};

/// One `stream --json` line of the simulator (its phone scenario) on the host: the kernel's
/// lines in the guest must have its very fields (one schema for every source).
pub(super) fn sim_stream_line(nodescope: &Path, cache: &Path) -> Result<Value> {
    let knobs = cache.join("sim-knobs");
    let _ = fs::remove_dir_all(&knobs);
    fs::create_dir_all(&knobs)?;
    let output = std::process::Command::new(nodescope)
        .args([
            "stream",
            "--source",
            "sim",
            "--json",
            "--duration",
            "2",
            "--sysfs-root",
        ])
        .arg(&knobs)
        .output()
        .context("running nodescope stream --source sim")?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The busiest line: it has processes and devices to compare.
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .max_by_key(|line| line["processes"].as_array().map_or(0, Vec::len))
        .context("nodescope stream --source sim printed no line")
}
