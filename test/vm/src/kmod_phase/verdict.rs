//! The phase's verdict: the two tables and the checks, every number from the module's own
//! counters (`<debugfs>/f2fs/<dev>/node_cache`) or iostat, as the guest (kmod.sh) left them.
use std::path::Path;

use anyhow::Result;

use super::{
    counters::{iostat_reads, read_trimmed, ModuleCounters, Verdict, FAIL_REASONS},
    settings::{BUDGET_BYTES, THRESHOLD},
};

/// The RFC's figures, beside ours in the tables.
const RFC_EQUAL: (u64, u64, u64) = (16_676, 69_792_344, 6_008_152);
const RFC_BUDGET_OFF: (u64, u64, u64, u64) = (3_199_800, 760, 15_668, 0);
const RFC_BUDGET_ON: (u64, u64, u64, u64) = (3_207_992, 9_208, 7_209, 9_175);

fn ok(pass: bool) -> &'static str {
    if pass {
        "ok"
    } else {
        "FAIL"
    }
}

pub(super) fn verdict(label: &str, dir: &Path) -> Result<Verdict> {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let errors = read_trimmed(dir, "guest_errors.txt");
    if !errors.starts_with("(no ") {
        problems.push(format!("guest: {errors}"));
    }
    knob_checks(dir, &mut problems);
    let discovered = startup_discovery_checks(dir, &mut problems, &mut lines);
    let mut exact = super::exact::exact_checks(dir, &mut problems, &mut lines);
    let functions = super::functions::function_checks(dir, &mut problems, &mut lines);
    super::recorded::record_checks(dir, &mut exact, &mut problems, &mut lines);
    lines.extend(equal_table(dir)?);
    lines.extend(budget_table(dir)?);
    let (compare_equal, compared) = super::exact::compare_checks(dir, &mut problems, &mut lines);
    let whatif = super::whatif::whatif_checks(dir, &mut problems, &mut lines);
    super::simulator::simulator_lines(dir, &mut problems, &mut lines);
    let tune = super::tune::tune_checks(dir, &mut lines, &mut problems);
    let daemon = super::grid::grid_checks(dir, &mut problems, &mut lines);
    let top = super::top::top_checks(dir, &mut problems, &mut lines);
    let last = ModuleCounters::read(dir, "faults_done")?;
    failure_checks(dir, &last, &mut problems, &mut lines);
    super::fixes::fix_checks(dir, &mut problems, &mut lines);

    let fsck_rc = read_trimmed(dir, "fsck.rc");
    let fsck = read_trimmed(dir, "fsck.txt");
    let fsck_clean = fsck_rc == "0" && !fsck.contains("[Fail]");
    if !fsck_clean {
        problems.push(format!("fsck.f2fs exit {fsck_rc}"));
    }
    let files_ok = read_trimmed(dir, "files_mounted.txt") == "ok"
        && read_trimmed(dir, "files_remounted.txt") == "ok";
    if !files_ok {
        problems.push("a file's checksum differs (md5_mounted.txt, md5_remounted.txt)".into());
    }
    if read_trimmed(dir, "rmmod.txt") != "ok" {
        problems.push("the patched module did not unload".into());
    }
    let fails: u64 = FAIL_REASONS
        .iter()
        .map(|r| last.get(&format!("restore_fail_{r}")))
        .sum();
    let second_chances = last.get("second_chances");
    for (what, value) in [
        ("conversions", last.get("conversions")),
        ("rejects", last.get("convert_rejects")),
        ("restores", last.get("restores")),
        (
            "shrinker reclaims",
            last.get("reclaims")
                .saturating_sub(last.get("budget_reclaims")),
        ),
        ("second chances", second_chances),
    ] {
        if value == 0 {
            problems.push(format!("no {what}"));
        }
    }
    for line in &problems {
        lines.push(format!("  problem: {line}"));
    }
    let pass = problems.is_empty();
    lines.push(format!(
        "kmod {label} conversions={} rejects={} aborts={} restores={} restore_fails={fails} \
         nomem={} reclaims={} second_chances={second_chances} exact={}/{} drops={} \
         compare={compare_equal}/{compared} tune={} steps={} sigkill={} daemon_tune={} top={} \
         fsck={} files={} {}",
        last.get("conversions"),
        last.get("convert_rejects"),
        last.get("convert_aborts"),
        last.get("restores"),
        last.get("restore_nomem"),
        last.get("reclaims"),
        exact.equal,
        exact.checks,
        exact.drops,
        if tune.ok { "ok" } else { "FAIL" },
        tune.steps,
        if tune.sigkill_restored {
            "restored"
        } else {
            "not-restored"
        },
        ok(daemon.ok),
        ok(top),
        if fsck_clean { "clean" } else { "dirty" },
        if files_ok { "ok" } else { "bad" },
        if pass { "PASS" } else { "FAIL" }
    ));
    // The line: the kinds discovered, the checks made, the what-if's node reads.
    let final_line = format!(
        "rfc-kernel {label} discover={}/{} exact={}/{} drops={} fentry={}/{} \
         compare={compare_equal}/{compared} tune={} sigkill={} daemon_tune={} top={} \
         whatif_reads={} {}",
        discovered.map_or(0, |d| d.0),
        discovered.map_or(0, |d| d.1),
        exact.equal,
        exact.checks,
        exact.drops,
        functions.0,
        functions.1,
        if tune.ok { "ok" } else { "FAIL" },
        if tune.sigkill_restored {
            "restored"
        } else {
            "not-restored"
        },
        ok(daemon.ok),
        ok(top),
        whatif.map_or_else(
            || "none".to_string(),
            |w| format!("{}/{}", w.predicted, w.measured)
        ),
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(Verdict {
        lines,
        final_line,
        pass,
        problems,
    })
}

/// Kinds `probe --discover` maps on this module (of the eleven): node read (read_node_page)
/// and the ten the module has a tracepoint for (README, "Discovering the RFC's functions").
/// Fewer is a regression of the rules.
const DISCOVERED_KINDS_AT_LEAST: u64 = 11;

/// Start-up discovery: the first `stream` without `--probes` discovers and caches the RFC's
/// probes and says so, the second reads the cache, and `probe` names where they came from.
/// Returns the first start's (kinds mapped, kinds known).
pub(super) fn startup_discovery_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> Option<(u64, u64)> {
    let first = read_trimmed(dir, "autodiscover_1.err");
    let second = read_trimmed(dir, "autodiscover_2.err");
    let said = |text: &str, want: &str| {
        text.lines()
            .find(|l| l.starts_with("nodescope stream: probes: ") && l.contains(want))
            .map(|l| l.trim_start_matches("nodescope stream: ").to_string())
    };
    let discovered = said(&first, "discovered from BTF");
    let cached = said(&second, "discovered for this kernel build");
    lines.push(format!(
        "  start-up discovery: first start {}; second start {}",
        discovered.as_deref().unwrap_or("(no line)"),
        cached.as_deref().unwrap_or("(no line)")
    ));
    let counts = discovered.as_deref().and_then(|l| {
        let (mapped, rest) = l.split(": ").nth(2)?.split_once(" of ")?;
        let known = rest.split(' ').next()?;
        Some((mapped.parse::<u64>().ok()?, known.parse::<u64>().ok()?))
    });
    let kinds = counts.map(|c| c.0);
    match kinds {
        Some(n) if n >= DISCOVERED_KINDS_AT_LEAST => {}
        _ => problems.push(format!(
            "start-up discovery: {kinds:?} kinds mapped, want at least {DISCOVERED_KINDS_AT_LEAST} \
             (autodiscover_1.err)"
        )),
    }
    if !discovered
        .as_deref()
        .is_some_and(|l| l.contains("(cached /run/nodescope/probes-"))
    {
        problems.push("start-up discovery: the first start did not cache its manifest".into());
    }
    if cached.is_none() {
        problems.push("start-up discovery: the second start did not read the cache".into());
    }
    for n in [1, 2] {
        let rc = read_trimmed(dir, &format!("autodiscover_{n}.rc"));
        if rc != "0" {
            problems.push(format!("start-up discovery: stream {n} exited {rc}"));
        }
    }
    let probe = read_trimmed(dir, "autodiscover_probe.txt");
    if !probe
        .lines()
        .any(|l| l.contains("rfc probes from") && l.contains("discovered for"))
    {
        problems.push("start-up discovery: probe does not say it uses the cached probes".into());
    }
    counts
}

/// Knobs present with their defaults, every out-of-range write refused, every in-range one
/// taken; the stock build has none.
fn knob_checks(dir: &Path, problems: &mut Vec<String>) {
    let knobs = read_trimmed(dir, "knobs.txt");
    let expect = [
        "threshold_default 0",
        "interval_default 1000",
        "threshold_final 0",
        "interval_final 1000",
    ];
    for want in expect {
        if !knobs.lines().any(|l| l == want) {
            problems.push(format!("knobs: no `{want}` in knobs.txt"));
        }
    }
    for line in knobs.lines() {
        if line.contains("_accepted") || line.contains("_refused") {
            problems.push(format!("knobs: {line}"));
        }
    }
    if read_trimmed(dir, "stock_knobs.txt") != "absent" {
        problems.push("the stock build has the knobs".into());
    }
}

/// The cover letter's first table: every node of the file set cached, raw then compressed.
fn equal_table(dir: &Path) -> Result<Vec<String>> {
    let off = ModuleCounters::read(dir, "equal_off")?;
    let on = ModuleCounters::read(dir, "equal_on")?;
    let (off_bytes, on_bytes) = (off.get("attributed_bytes"), on.get("attributed_bytes"));
    let reduction = |a: u64, b: u64| 100.0 * (1.0 - b as f64 / a.max(1) as f64);
    let mut lines = vec![
        "  equal node count  | nodes  | attributed off | attributed on | reduction".to_string(),
    ];
    lines.push(format!(
        "  RFC               | {:>6} | {:>14} | {:>13} | {:.3} %",
        RFC_EQUAL.0,
        RFC_EQUAL.1,
        RFC_EQUAL.2,
        reduction(RFC_EQUAL.1, RFC_EQUAL.2)
    ));
    lines.push(format!(
        "  module            | {:>6} | {off_bytes:>14} | {on_bytes:>13} | {:.3} %  (on: {} nodes, {} raw, {} rejected at {THRESHOLD} %)",
        off.get("entries"),
        reduction(off_bytes, on_bytes),
        on.get("entries"),
        on.get("entries_raw"),
        on.get("convert_rejects"),
    ));
    Ok(lines)
}

/// The second table: about 3 MiB, a one-pass replay of the 16,384 small files.
fn budget_table(dir: &Path) -> Result<Vec<String>> {
    let mut lines = vec![format!(
        "  budget {BUDGET_BYTES} B | attributed | nodes | node reads (bytes)   | restores | reads + restores"
    )];
    for (mode, rfc) in [("off", RFC_BUDGET_OFF), ("on", RFC_BUDGET_ON)] {
        lines.push(format!(
            "  RFC {mode:<3}          | {:>10} | {:>5} | {:>6} ({:>10}) | {:>8} | {}",
            rfc.0,
            rfc.1,
            rfc.2,
            rfc.2 * 4096,
            rfc.3,
            rfc.2 + rfc.3
        ));
        let before = ModuleCounters::read(dir, &format!("budget_{mode}_before"))?;
        let after = ModuleCounters::read(dir, &format!("budget_{mode}_after"))?;
        let reads = iostat_reads(dir, &format!("budget_{mode}_after"))?
            .saturating_sub(iostat_reads(dir, &format!("budget_{mode}_before"))?);
        let restores = after.delta(&before, "restores");
        lines.push(format!(
            "  module {mode:<3}       | {:>10} | {:>5} | {reads:>6} ({:>10}) | {restores:>8} | {}",
            before.get("attributed_bytes"),
            before.get("entries"),
            reads * 4096,
            reads + restores
        ));
    }
    Ok(lines)
}

/// Every restore failure reason and the raw-buffer failure ran at least once, and the nomem
/// read's retry was served by a restore.
fn failure_checks(
    dir: &Path,
    last: &ModuleCounters,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let by_reason: Vec<String> = FAIL_REASONS
        .iter()
        .map(|r| format!("{r}={}", last.get(&format!("restore_fail_{r}"))))
        .collect();
    lines.push(format!(
        "  restore failures: {} nomem={}",
        by_reason.join(" "),
        last.get("restore_nomem")
    ));
    for reason in FAIL_REASONS {
        if last.get(&format!("restore_fail_{reason}")) == 0 {
            problems.push(format!("no restore failed on {reason}"));
        }
    }
    if last.get("restore_nomem") == 0 {
        problems.push("no raw-buffer allocation failed".into());
    }
    match nomem_outcome(&read_trimmed(dir, "nomem_trace.txt")) {
        Some(outcome) => {
            lines.push(format!("  nomem: {}", outcome.describe(dir)));
            if !outcome.restored(dir) {
                problems.push(
                    "the lookup after a raw-buffer failure was not served by a restore".into(),
                );
            }
        }
        None => problems.push("the nomem fault was never taken (nomem_trace.txt)".into()),
    }
}

/// The read during which the nomem fault was taken, from the guest's trace: each line is a
/// file, its `cat` exit code and counters after it, the first line the counters when armed.
pub(super) struct NomemOutcome {
    pub(super) file: String,
    pub(super) rc: String,
    /// Restores during that read.
    pub(super) restores: u64,
}

pub(super) fn nomem_outcome(trace: &str) -> Option<NomemOutcome> {
    let mut lines = trace.lines();
    let armed = lines.next()?.strip_prefix("armed ")?;
    let mut before = ModuleCounters::pairs(armed);
    for line in lines {
        let mut words = line.splitn(3, ' ');
        let (file, rc, rest) = (words.next()?, words.next()?, words.next()?);
        let after = ModuleCounters::pairs(rest);
        if after.delta(&before, "restore_nomem") > 0 {
            return Some(NomemOutcome {
                file: file.to_string(),
                rc: rc.trim_start_matches("rc=").to_string(),
                restores: after.delta(&before, "restores"),
            });
        }
        before = after;
    }
    None
}

impl NomemOutcome {
    /// The copy stayed: the same read restored it (F2FS's caller retried -ENOMEM itself), or
    /// the read failed and reading the file again restored it.
    fn restored(&self, dir: &Path) -> bool {
        if self.rc == "0" {
            return self.restores > 0;
        }
        read_trimmed(dir, "nomem_retry.txt") == "ok" && self.retried(dir) > 0
    }

    fn retried(&self, dir: &Path) -> u64 {
        let restores = |name: &str| ModuleCounters::parse(&read_trimmed(dir, name)).get("restores");
        restores("nomem_restores_after.txt").saturating_sub(restores("nomem_restores_before.txt"))
    }

    fn describe(&self, dir: &Path) -> String {
        if self.rc == "0" {
            format!(
                "taken while reading {}, which succeeded with {} restore(s) in the same read \
                 (the caller retried -ENOMEM)",
                self.file, self.restores
            )
        } else {
            format!(
                "the read of {} failed (exit {}); reading it again: {}, {} restore(s)",
                self.file,
                self.rc,
                read_trimmed(dir, "nomem_retry.txt"),
                self.retried(dir)
            )
        }
    }
}
