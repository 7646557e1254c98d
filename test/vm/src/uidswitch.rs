//! The VM test's uid phase (guest.sh: uid_phase): one process reads a cold directory as root,
//! changes its uid with a raw setresuid (no exec, no rename), waits past a stream interval and
//! reads a second one. The counter slots keep a task's uid until some task's credentials
//! change (the commit_creds kprobe), so this is the case that would leave the second half on
//! uid 0 if a change went unseen. Here: the stream's rows for the helper give each half to its
//! uid, each exactly iostat's node reads over that half.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::results;

/// The uid the helper takes for its second half.
pub const UID: u64 = 10124;
/// The helper's comm, as the stream names it.
const COMM: &str = "uidswitch";
/// Its C source, built by the host's cc for the guest (it runs with the host's libraries).
const SOURCE: &str = include_str!("../guest/uidswitch.c");

/// Build the helper into `dir`; its path.
pub fn build(dir: &Path) -> Result<std::path::PathBuf> {
    build_c_helper(dir, COMM, SOURCE)
}

/// Build a guest helper from its C source with the host's cc (the guest runs with the host's
/// libraries): `dir`/`name`.
pub fn build_c_helper(dir: &Path, name: &str, source: &str) -> Result<std::path::PathBuf> {
    build_c_helper_for(crate::Arch::X86_64, dir, name, source)
}

/// [`build_c_helper`] for a guest of `arch`: an arm64 guest has no libraries, so its helper is
/// linked statically by the cross compiler (`cargo xtask setup`'s arm64 toolchain).
pub fn build_c_helper_for(
    arch: crate::Arch,
    dir: &Path,
    name: &str,
    source: &str,
) -> Result<std::path::PathBuf> {
    let source_path = dir.join(format!("{name}.c"));
    let binary = dir.join(name);
    fs::write(&source_path, source)
        .with_context(|| format!("writing {}", source_path.display()))?;
    let (compiler, link): (&str, &[&str]) = match arch {
        crate::Arch::X86_64 => ("cc", &[]),
        crate::Arch::Aarch64 => ("aarch64-linux-gnu-gcc", &["-static"]),
    };
    crate::util::run(
        std::process::Command::new(compiler)
            .args(["-O2", "-Wall"])
            .args(link)
            .arg("-o")
            .arg(&binary)
            .arg(&source_path),
    )
    .with_context(|| format!("building the guest helper {name} with {compiler}"))?;
    Ok(binary)
}

/// Check the phase; returns the VM line's `uids=<root reads>+<uid reads>/<iostat>` part.
pub fn check(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> String {
    match check_phase(dir, lines) {
        Ok((summary, problems)) => {
            failures.extend(problems.into_iter().map(|p| format!("uid: {p}")));
            summary
        }
        Err(err) => {
            failures.push(format!("uid: {err:#}"));
            "uids=?".to_string()
        }
    }
}

fn check_phase(dir: &Path, lines: &mut Vec<String>) -> Result<(String, Vec<String>)> {
    let phase = results::Phase::load(dir, "uid")?;
    lines.push(format!("  uid      {}", phase.summary()));
    let by_uid = helper_reads_by_uid(dir)?;
    let iostat = |label: &str| -> Result<u64> {
        let path = dir.join(format!("iostat_uid_{label}.txt"));
        let text = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
        results::fs_node_reads(&text).with_context(|| format!("no fs node reads in {label}"))
    };
    let (before, mid, after) = (iostat("before")?, iostat("mid")?, iostat("after")?);
    let halves = [(0, mid - before), (UID, after - mid)];
    let mut problems = Vec::new();
    for (uid, expected) in halves {
        let got = by_uid.get(&uid).copied().unwrap_or(0);
        lines.push(format!(
            "  uid      {COMM} as uid {uid}: {got} node reads, iostat {expected}"
        ));
        if got != expected || got == 0 {
            problems.push(format!(
                "{COMM} as uid {uid}: {got} node reads in the stream, iostat counted {expected}"
            ));
        }
    }
    let others: Vec<u64> = by_uid
        .keys()
        .copied()
        .filter(|u| *u != 0 && *u != UID)
        .collect();
    if !others.is_empty() {
        problems.push(format!("{COMM} counted under uids {others:?} too"));
    }
    if phase.reads() != phase.iostat_delta || phase.rc != Some(0) {
        problems.push(format!(
            "{} node reads attributed vs iostat {}, stream rc {:?}",
            phase.reads(),
            phase.iostat_delta,
            phase.rc
        ));
    }
    let rc = fs::read_to_string(dir.join("uidswitch.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        problems.push(format!("the helper's exit status {:?}", rc.trim()));
    }
    let root = by_uid.get(&0).copied().unwrap_or(0);
    let switched = by_uid.get(&UID).copied().unwrap_or(0);
    Ok((
        format!("uids={root}+{switched}/{}", after - before),
        problems,
    ))
}

/// The helper's node reads per uid, from the stream's process rows (one uid per row and
/// window: the halves are three seconds apart, the windows one).
fn helper_reads_by_uid(dir: &Path) -> Result<BTreeMap<u64, u64>> {
    let text = fs::read_to_string(dir.join("stream_uid.jsonl")).context("no stream_uid.jsonl")?;
    let mut found = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value = serde_json::from_str::<Value>(line)
            .with_context(|| format!("bad stream line {line:?}"))?;
        for process in value["processes"].as_array().into_iter().flatten() {
            if process["comm"].as_str().unwrap_or("") == COMM {
                *found
                    .entry(process["uid"].as_u64().unwrap_or(0))
                    .or_default() += process["node_reads_demand"].as_u64().unwrap_or(0)
                    + process["node_reads_readahead"].as_u64().unwrap_or(0);
            }
        }
    }
    Ok(found)
}
