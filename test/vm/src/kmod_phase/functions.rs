//! The RFC's functions on BPF trampolines (issue 30): a second stream ran over the exact span
//! (kmod.sh) with a manifest of two of the module's functions (rfc-functions.toml):
//! f2fs_node_cache_restore at return (0: restored) and f2fs_node_cache_second_chance at return
//! (true: one given, with its reason). It must have hooked both by fentry + fexit, not by the
//! kprobe fallback, and its counts must equal the module's over the span.
use std::{fs, path::Path};

use serde_json::Value;

use super::counters::ModuleCounters;

/// (the stream's count under `cumulative`, the module's counter).
const CHECKS: [(&[&str], &str); 4] = [
    (&["restores"], "restores"),
    (&["second_chance_reasons", "worker"], "second_chance_worker"),
    (
        &["second_chance_reasons", "shrinker"],
        "second_chance_shrinker",
    ),
    (&["second_chance_reasons", "race"], "second_chance_race"),
];

/// The functions and how the stream must have said it attached them.
const ATTACHED: [&str; 2] = [
    "restore -> f2fs_node_cache_restore (fentry + fexit)",
    "second_chance -> f2fs_node_cache_second_chance (fentry + fexit)",
];

/// Compare; `(equal, compared)` for the verdict line, a line per count, a problem per
/// difference.
pub(super) fn function_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> (usize, usize) {
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    let err = read("functions.err");
    for attached in ATTACHED {
        if !err
            .lines()
            .any(|l| l.ends_with(&format!("rfc: {attached}")))
        {
            problems.push(format!(
                "functions: the stream did not say `rfc: {attached}` (functions.err)"
            ));
        }
    }
    if read("functions.rc").trim() != "0" {
        problems.push(format!(
            "functions: the stream exited {:?}",
            read("functions.rc").trim()
        ));
    }
    let (start, end) = match (
        ModuleCounters::read(dir, "exact_start"),
        ModuleCounters::read(dir, "exact_end"),
    ) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(err), _) | (_, Err(err)) => {
            problems.push(format!("functions: {err:#}"));
            return (0, CHECKS.len());
        }
    };
    let windows = read("functions.json");
    let Some(last) = windows
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .next_back()
    else {
        problems.push("functions: the stream printed no window (functions.json)".into());
        return (0, CHECKS.len());
    };
    let cumulative = &last["cumulative"];
    let mut equal = 0;
    for (path, counter) in CHECKS {
        let ours = path
            .iter()
            .fold(cumulative, |value, key| &value[key])
            .as_u64()
            .unwrap_or(0);
        let theirs = end.delta(&start, counter);
        let verdict = if ours == theirs {
            equal += 1;
            "ok"
        } else {
            problems.push(format!(
                "functions: {counter}: nodescope (fentry + fexit) {ours}, the module {theirs}"
            ));
            "DIFFERS"
        };
        lines.push(format!(
            "  fentry {counter:<28} nodescope {ours:>8}  module {theirs:>8}  {verdict}  \
             (functions stream: {})",
            path.join(".")
        ));
    }
    (equal, CHECKS.len())
}
