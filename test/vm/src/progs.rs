//! What both benchmarks (bench.rs, bench_lookups.rs) read back: the guest's files, and BPF
//! programs' run time and runs from `bpftool -j prog show` listings.
use std::{fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;

pub(super) fn read(dir: &Path, name: &str) -> Result<String> {
    fs::read_to_string(dir.join(name))
        .with_context(|| format!("the guest wrote no {name} (see console.log)"))
}

/// One BPF program as `bpftool -j prog show` lists it.
#[derive(Debug, PartialEq)]
pub(super) struct Program {
    pub id: u64,
    pub kind: String,
    pub name: String,
    run_time_ns: u64,
    run_cnt: u64,
}

pub(super) fn programs(text: &str) -> Result<Vec<Program>> {
    let list = serde_json::from_str::<Value>(text.trim())?;
    Ok(list
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Program {
            id: p["id"].as_u64().unwrap_or(0),
            kind: p["type"].as_str().unwrap_or("").to_string(),
            name: p["name"].as_str().unwrap_or("").to_string(),
            run_time_ns: p["run_time_ns"].as_u64().unwrap_or(0),
            run_cnt: p["run_cnt"].as_u64().unwrap_or(0),
        })
        .collect())
}

/// Run time and runs of the chosen programs between two listings.
#[derive(Debug, PartialEq)]
pub(super) struct Cost {
    pub(super) ns: u64,
    pub runs: u64,
}

impl Cost {
    pub fn ns_per_run(&self) -> f64 {
        self.ns as f64 / self.runs as f64
    }
}

/// The chosen programs' run time and count in `after` less `before`; None if they never ran.
pub(super) fn cost(
    before: &[Program],
    after: &[Program],
    chosen: impl Fn(&Program) -> bool,
) -> Option<Cost> {
    let mut total = Cost { ns: 0, runs: 0 };
    for program in after.iter().filter(|p| chosen(p)) {
        let earlier = before.iter().find(|p| p.id == program.id);
        total.ns += program.run_time_ns - earlier.map_or(0, |p| p.run_time_ns);
        total.runs += program.run_cnt - earlier.map_or(0, |p| p.run_cnt);
    }
    (total.runs > 0).then_some(total)
}
