//! The controller on the module's real knobs (kmod.sh, part 4): steps under the guest's own
//! memory pressure that change the knob files, SIGTERM restoring the originals, someone else's
//! write stopping it and left alone, and after SIGKILL `tune --restore` putting them back, as
//! the next `tune` does at its start from the same leftovers.
use std::{fs, path::Path};

use serde_json::Value;

use super::counters::read_trimmed as read;
use crate::{results::expect, tune_check::check_tune};

/// What the verdict line says.
pub(super) struct Tune {
    pub steps: u64,
    pub ok: bool,
    /// The knobs after SIGKILL and `tune --restore` are the originals, and so are they after
    /// the next `tune` started from the same leftovers.
    pub sigkill_restored: bool,
}

pub(super) fn tune_checks(dir: &Path, lines: &mut Vec<String>, problems: &mut Vec<String>) -> Tune {
    let before = problems.len();
    let steps = check_tune(dir, lines, problems);
    let original = read(dir, "knobs_before_tune.txt");
    let under_pressure = read(dir, "knobs_under_pressure.txt");
    expect(
        problems,
        steps == 0 || under_pressure != original,
        format!(
            "tune: {steps} steps, yet the knob files read {under_pressure} (originals {original})"
        ),
    );
    let saw_external = audit_has(dir, "tune_external.jsonl", "external-change", None);
    let after_external = read(dir, "knobs_after_external.txt");
    expect(
        problems,
        saw_external
            && read(dir, "tune_external.rc") == "0"
            && after_external.split_whitespace().next() == Some("40"),
        format!(
            "tune: an external write of 40 must stop it (audit external-change: {saw_external}, \
             rc {}) and stay (knobs {after_external})",
            read(dir, "tune_external.rc")
        ),
    );
    let stepped = audit_has(dir, "tune_kill.jsonl", "decision", Some("applied"));
    let (after_kill, after_restore) = (
        read(dir, "knobs_after_kill.txt"),
        read(dir, "knobs_after_restore.txt"),
    );
    let sigkill_restored = stepped
        && after_kill != original
        && after_restore == original
        && read(dir, "tune_restore.rc") == "0";
    expect(
        problems,
        sigkill_restored,
        format!(
            "tune: after a step ({stepped}) and SIGKILL the knobs were {after_kill}, after tune \
             --restore {after_restore} (rc {}), originals {original}",
            read(dir, "tune_restore.rc")
        ),
    );
    let next_restored = next_tune_restored(dir, &original, &after_kill, problems);
    lines.push(format!(
        "  tune on the module's knobs: originals {original}, under pressure {under_pressure}; \
         external write -> {after_external}; SIGKILL -> {after_kill}, tune --restore -> \
         {after_restore}, the next tune -> {}",
        read(dir, "knobs_after_next.txt")
    ));
    Tune {
        steps,
        ok: problems.len() == before,
        sigkill_restored: sigkill_restored && next_restored,
    }
}

/// The next `tune` after a SIGKILL, from the killed one's leftovers (knobs at `after_kill`):
/// a `recover` record that restored, the originals on the device once it has started and
/// after its SIGTERM, exit status 0.
pub(super) fn next_tune_restored(
    dir: &Path,
    original: &str,
    after_kill: &str,
    problems: &mut Vec<String>,
) -> bool {
    let recovered = audit_has(dir, "tune_next.jsonl", "recover", Some("restored"));
    let (started, ended) = (
        read(dir, "knobs_after_next.txt"),
        read(dir, "knobs_after_next_term.txt"),
    );
    let ok = recovered
        && after_kill != original
        && started == original
        && ended == original
        && read(dir, "tune_next.rc") == "0";
    expect(
        problems,
        ok,
        format!(
            "tune: the next tune after SIGKILL (knobs {after_kill}) must recover (audit recover \
             restored: {recovered}) and hold the originals {original} (at its start {started}, \
             after SIGTERM {ended}, rc {})",
            read(dir, "tune_next.rc")
        ),
    );
    ok
}

/// Whether the audit log `file` has a record of `event` (with `outcome`, when given).
fn audit_has(dir: &Path, file: &str, event: &str, outcome: Option<&str>) -> bool {
    let audit = fs::read_to_string(dir.join(file)).unwrap_or_default();
    audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|r| {
            r["event"].as_str().unwrap_or("") == event
                && outcome.is_none_or(|o| r["outcome"].as_str().unwrap_or("") == o)
        })
}
