//! What the guest (kmod.sh) left, read back: the module's counters, iostat's node reads,
//! any file trimmed; and the verdict a run prints. It imports no check.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{bail, Context as _, Result};

use crate::results;

/// Restore failure reasons, in the order restore validates (the module's names, which the
/// stream's JSON shares).
pub(super) const FAIL_REASONS: [&str; 7] = [
    "slot_size",
    "payload_len",
    "lz4_len",
    "crc",
    "footer",
    "inode_checksum",
    "node_type",
];

/// One snapshot of the module's counters file (debugfs `node_cache`, saved as `nc_<phase>.txt`).
pub(crate) struct ModuleCounters(BTreeMap<String, u64>);

impl ModuleCounters {
    pub(crate) fn parse(text: &str) -> ModuleCounters {
        ModuleCounters(
            text.lines()
                .filter_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    Some((k.to_string(), v.trim().parse().ok()?))
                })
                .collect(),
        )
    }

    /// `name value name value ...` on one line (the guest's trace lines).
    pub(super) fn pairs(line: &str) -> ModuleCounters {
        let words: Vec<&str> = line.split_whitespace().collect();
        ModuleCounters(
            words
                .chunks(2)
                .filter_map(|p| Some((p[0].to_string(), p.get(1)?.parse().ok()?)))
                .collect(),
        )
    }

    pub(crate) fn read(dir: &Path, phase: &str) -> Result<ModuleCounters> {
        let path = dir.join(format!("nc_{phase}.txt"));
        let text = fs::read_to_string(&path)
            .with_context(|| format!("the guest left no {}", path.display()))?;
        let counters = ModuleCounters::parse(&text);
        if counters.0.is_empty() {
            bail!("{} has no counters", path.display());
        }
        Ok(counters)
    }

    pub(crate) fn get(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// `key` after minus before.
    pub(crate) fn delta(&self, before: &ModuleCounters, key: &str) -> u64 {
        self.get(key).saturating_sub(before.get(key))
    }
}

pub(super) fn iostat_reads(dir: &Path, phase: &str) -> Result<u64> {
    let text = fs::read_to_string(dir.join(format!("iostat_{phase}.txt")))
        .with_context(|| format!("no iostat_{phase}.txt"))?;
    results::fs_node_reads(&text).with_context(|| format!("no fs node reads in iostat_{phase}"))
}

pub(super) fn read_trimmed(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("(no {name})"))
}

pub struct Verdict {
    pub lines: Vec<String>,
    pub final_line: String,
    pub pass: bool,
    /// What failed, one line each (also in `lines`): the error carries them, so that the
    /// tail of a CI log says why and not only where the results are.
    pub problems: Vec<String>,
}

impl Verdict {
    /// An error naming what failed and where the results are, unless it passed.
    pub fn ensure_pass(&self, phase: &str, results: &std::path::Path) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.pass,
            "{phase} failed: {} (results in {})",
            self.problems.join("; "),
            results.display()
        );
        Ok(())
    }
}
