//! `cargo xtask vm-kmod [--kernel 6.12]`: the reference module (kmod/, our reconstruction of the
//! RFC's compressed node cache as a patch to Debian's F2FS) in the stock Debian kernel. The
//! guest (kmod.sh) writes the RFC's file set with the stock build, then loads the patched build
//! and runs the cover letter's two measurements (equal node count, about 3 MiB of attributed
//! memory) and every failure path; here the results become the two tables and one verdict line,
//! every number from the module's own counters (`<debugfs>/f2fs/<dev>/node_cache`) or iostat.
use std::{collections::BTreeMap, fs, path::Path, time::Duration};

use anyhow::{bail, Context as _, Result};

use super::{check, initramfs, kernel, qemu, NDIRS, NFILES};
use crate::util;

/// The RFC's settings for compression on (the controller's defaults agree).
const THRESHOLD: u32 = 25;
const INTERVAL_MS: u32 = 1000;
/// "An approximately 3 MiB attributed node-cache budget": the RFC's off row had 3,199,800.
const BUDGET_BYTES: u64 = 3_200_000;
/// The RFC's figures, beside ours in the tables.
const RFC_EQUAL: (u64, u64, u64) = (16_676, 69_792_344, 6_008_152);
const RFC_BUDGET_OFF: (u64, u64, u64, u64) = (3_199_800, 760, 15_668, 0);
const RFC_BUDGET_ON: (u64, u64, u64, u64) = (3_207_992, 9_208, 7_209, 9_175);
/// Restore failure reasons, in the order restore validates (the module's names).
const FAIL_REASONS: [&str; 7] = [
    "slot_size",
    "payload_len",
    "lz4_len",
    "crc",
    "footer",
    "inode_checksum",
    "node_type",
];
const VM_TIMEOUT: Duration = Duration::from_secs(1200);
/// The measured replay's manifest: a fixed permutation of the 16,384 small files. The RFC's
/// manifest order is not published. In creation order the replay walks the cache's own LRU
/// order, and a budget that holds part of the set keeps only what the replay reaches last:
/// measured here, 0 hits with compression off and 0 restores with it on. A fixed shuffle gives
/// each retained node its share of hits, which is what the RFC's rows show (716 hits of 760
/// retained nodes off, 9,175 restores of 9,208 on).
const MANIFEST_SEED: u64 = 0x5eed_000f_2f5c_0de5;
/// Files per cat line of the manifest script.
const MANIFEST_BATCH: usize = 64;

/// The two module files the guest loads.
pub struct Modules<'a> {
    pub stock: &'a Path,
    pub patched: &'a Path,
}

/// Build both modules (`cargo xtask kmod`, cached) and run the phase with them.
pub fn build_and_run(label: &str) -> Result<()> {
    let built = crate::kmod::build(label, None)?;
    let patched = built
        .patched
        .as_ref()
        .with_context(|| format!("kmod/patches/{label} has no patch: nothing to test"))?;
    println!("{}", built.stock.summary(label, "stock"));
    println!("{}", patched.summary(label, "patched"));
    run(
        label,
        &Modules {
            stock: &built.stock.ko,
            patched: &patched.ko,
        },
    )
}

pub fn run(label: &str, modules: &Modules) -> Result<()> {
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == label)
        .with_context(|| format!("unknown kernel {label:?}: use 6.12"))?;
    let cache = util::target_dir().join("vm-cache");
    let kernel = kernel::prepare(spec, &cache)?;
    let nodescope = util::build_nodescope()?;
    let work = cache.join(format!("run-kmod-{label}"));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    let files = qemu::GuestFiles::in_dir(&work);
    fs::write(&files.initrd, initramfs_for(&kernel, &nodescope, modules)?)?;
    files.create_disks()?;
    let boot_label = format!("kmod-{label}");
    let boot = files.boot(
        &boot_label,
        crate::dist::Arch::X86_64,
        &kernel.vmlinuz,
        VM_TIMEOUT,
    );
    let out = super::boot_and_unpack(&boot, &work)?;
    let verdict = verdict(label, &out)?;
    for line in &verdict.lines {
        println!("{line}");
    }
    println!("{}", verdict.final_line);
    if !verdict.pass {
        bail!("vm-kmod {label} failed (results in {})", out.display());
    }
    for image in [&files.disk, &files.results, &files.initrd] {
        let _ = fs::remove_file(image);
    }
    Ok(())
}

/// The VM test's initramfs with kmod.sh as init, fsck.f2fs, and both builds: the patched one
/// in Debian's f2fs place (lib/modules/f2fs.ko), the stock one beside it (f2fs-stock.ko).
fn initramfs_for(kernel: &kernel::Kernel, nodescope: &Path, modules: &Modules) -> Result<Vec<u8>> {
    let config = format!(
        "NDIRS={NDIRS}\nNFILES={NFILES}\nTHRESHOLD={THRESHOLD}\nINTERVAL={INTERVAL_MS}\n\
         BUDGET={BUDGET_BYTES}\n"
    );
    let replay_all = super::replay_script(super::Replay::Names, NDIRS)
        + "cat /mnt/shaped/* /mnt/sentinel > /dev/null\n";
    let files = [
        ("init", include_str!("kmod.sh").to_string()),
        ("replay-all", replay_all),
        ("replay-manifest", manifest_script(MANIFEST_SEED)),
        ("sums", sums_script()),
        ("etc/vm-test.conf", config),
    ];
    let fsck = Path::new("/usr/sbin/fsck.f2fs");
    let overrides = initramfs::ModuleOverrides {
        replace: &[("f2fs", modules.patched)],
        extra: &[("f2fs-stock.ko", modules.stock)],
    };
    initramfs::build_with_modules(kernel, nodescope, &files, &[fsck], overrides)
}

/// The small files in a seeded order, `MANIFEST_BATCH` per cat (no shell loop in the guest).
fn manifest_script(seed: u64) -> String {
    let mut files: Vec<(u64, u64)> = (0..NDIRS)
        .flat_map(|d| (0..NFILES).map(move |f| (d, f)))
        .collect();
    let mut state = seed;
    // Fisher-Yates with xorshift64*: the same permutation on every machine.
    for i in (1..files.len()).rev() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        files.swap(i, (r % (i as u64 + 1)) as usize);
    }
    let mut script = String::from("#!/bin/sh\n");
    for batch in files.chunks(MANIFEST_BATCH) {
        script.push_str("cat");
        for (d, f) in batch {
            script.push_str(&format!(" /mnt/t/d-{d}/f-{f}"));
        }
        script.push_str(" > /dev/null\n");
    }
    script
}

/// `md5sum` of every file of the set, one command per directory (no shell loop in the guest).
fn sums_script() -> String {
    let mut script = String::from("#!/bin/sh\n");
    for dir in 0..NDIRS {
        script.push_str("md5sum");
        for file in 0..NFILES {
            script.push_str(&format!(" /mnt/t/d-{dir}/f-{file}"));
        }
        script.push('\n');
    }
    script.push_str("md5sum /mnt/shaped/* /mnt/sentinel\n");
    script
}

/// One snapshot of the module's counters.
struct Counters(BTreeMap<String, u64>);

impl Counters {
    fn parse(text: &str) -> Counters {
        Counters(
            text.lines()
                .filter_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    Some((k.to_string(), v.trim().parse().ok()?))
                })
                .collect(),
        )
    }

    /// `name value name value ...` on one line (the guest's trace lines).
    fn pairs(line: &str) -> Counters {
        let words: Vec<&str> = line.split_whitespace().collect();
        Counters(
            words
                .chunks(2)
                .filter_map(|p| Some((p[0].to_string(), p.get(1)?.parse().ok()?)))
                .collect(),
        )
    }

    fn read(dir: &Path, phase: &str) -> Result<Counters> {
        let path = dir.join(format!("nc_{phase}.txt"));
        let text = fs::read_to_string(&path)
            .with_context(|| format!("the guest left no {}", path.display()))?;
        let counters = Counters::parse(&text);
        if counters.0.is_empty() {
            bail!("{} has no counters", path.display());
        }
        Ok(counters)
    }

    fn get(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// `key` after minus before.
    fn delta(&self, before: &Counters, key: &str) -> u64 {
        self.get(key).saturating_sub(before.get(key))
    }
}

fn iostat_reads(dir: &Path, phase: &str) -> Result<u64> {
    let text = fs::read_to_string(dir.join(format!("iostat_{phase}.txt")))
        .with_context(|| format!("no iostat_{phase}.txt"))?;
    check::fs_node_reads(&text).with_context(|| format!("no fs node reads in iostat_{phase}"))
}

fn read_trimmed(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("(no {name})"))
}

pub struct Verdict {
    pub lines: Vec<String>,
    pub final_line: String,
    pub pass: bool,
}

fn verdict(label: &str, dir: &Path) -> Result<Verdict> {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let errors = read_trimmed(dir, "guest_errors.txt");
    if !errors.starts_with("(no ") {
        problems.push(format!("guest: {errors}"));
    }
    knob_checks(dir, &mut problems);
    startup_discovery_checks(dir, &mut problems, &mut lines);
    lines.extend(equal_table(dir)?);
    lines.extend(budget_table(dir)?);
    let last = Counters::read(dir, "faults_done")?;
    failure_checks(dir, &last, &mut problems, &mut lines);

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
    let final_line = format!(
        "kmod {label} conversions={} rejects={} aborts={} restores={} restore_fails={fails} \
         nomem={} reclaims={} second_chances={second_chances} fsck={} files={} {}",
        last.get("conversions"),
        last.get("convert_rejects"),
        last.get("convert_aborts"),
        last.get("restores"),
        last.get("restore_nomem"),
        last.get("reclaims"),
        if fsck_clean { "clean" } else { "dirty" },
        if files_ok { "ok" } else { "bad" },
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(Verdict {
        lines,
        final_line,
        pass,
    })
}

/// Kinds `probe --discover` maps on this module from its BTF and kallsyms (of the nine): node
/// read, the conversion pass, restore, the reclaim batch and second chance (README, "Patched
/// kernels"). Fewer is a regression of the rules.
const DISCOVERED_KINDS_AT_LEAST: u64 = 5;

/// Start-up discovery: the first `stream` without `--probes` discovers and caches the RFC's
/// probes and says so, the second reads the cache, and `probe` names where they came from.
fn startup_discovery_checks(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) {
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
    let kinds = discovered.as_deref().and_then(|l| {
        l.split(": ")
            .nth(2)?
            .split(" of ")
            .next()?
            .parse::<u64>()
            .ok()
    });
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
    let off = Counters::read(dir, "equal_off")?;
    let on = Counters::read(dir, "equal_on")?;
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
        let before = Counters::read(dir, &format!("budget_{mode}_before"))?;
        let after = Counters::read(dir, &format!("budget_{mode}_after"))?;
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
    last: &Counters,
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
struct NomemOutcome {
    file: String,
    rc: String,
    /// Restores during that read.
    restores: u64,
}

fn nomem_outcome(trace: &str) -> Option<NomemOutcome> {
    let mut lines = trace.lines();
    let armed = lines.next()?.strip_prefix("armed ")?;
    let mut before = Counters::pairs(armed);
    for line in lines {
        let mut words = line.splitn(3, ' ');
        let (file, rc, rest) = (words.next()?, words.next()?, words.next()?);
        let after = Counters::pairs(rest);
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
        let restores = |name: &str| Counters::parse(&read_trimmed(dir, name)).get("restores");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn discovery_problems(first: &str, second: &str, probe: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("autodiscover_1.err", first),
            ("autodiscover_2.err", second),
            ("autodiscover_probe.txt", probe),
            ("autodiscover_1.rc", "0"),
            ("autodiscover_2.rc", "0"),
        ] {
            fs::write(dir.path().join(name), text).unwrap();
        }
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        startup_discovery_checks(dir.path(), &mut problems, &mut lines);
        assert_eq!(lines.len(), 1);
        problems
    }

    #[test]
    fn start_up_discovery_wants_a_cached_discovery_then_a_cache_hit() {
        let first = "nodescope stream: probes: discovered from BTF /sys/kernel/btf/f2fs (split) \
                     on /sys/kernel/btf/vmlinux and kallsyms: 5 of 9 kinds (cached \
                     /run/nodescope/probes-ab-cd.toml)\nnodescope stream: ready";
        let second = "nodescope stream: probes: discovered for this kernel build (5 kinds, \
                      cached /run/nodescope/probes-ab-cd.toml)";
        let probe = "rfc probes from  probes: discovered for this kernel build (5 kinds, ...)";
        assert!(discovery_problems(first, second, probe).is_empty());
        let fewer = first.replace("5 of 9", "4 of 9");
        assert_eq!(discovery_problems(&fewer, second, probe).len(), 1);
        let uncached = first.replace("(cached", "(not cached:");
        assert_eq!(discovery_problems(&uncached, second, probe).len(), 1);
        assert_eq!(discovery_problems(first, "", "").len(), 2);
    }

    #[test]
    fn counters_parse_key_value_lines() {
        let c = Counters::parse("threshold 25\nrestores 7\nbad line here\nentries_raw 3\n");
        assert_eq!(c.get("threshold"), 25);
        assert_eq!(c.get("restores"), 7);
        assert_eq!(c.get("entries_raw"), 3);
        assert_eq!(c.get("missing"), 0);
        let before = Counters::parse("restores 2\n");
        assert_eq!(c.delta(&before, "restores"), 5);
    }

    #[test]
    fn the_nomem_trace_names_the_read_that_took_the_fault() {
        let trace = "armed inserts 5 restores 16 restore_nomem 0  fs node: 0 0 0\n\
                     /mnt/t/d-5/f-1 rc=0 inserts 5 restores 16 restore_nomem 0\n\
                     /mnt/t/d-5/f-2 rc=0 inserts 5 restores 18 restore_nomem 1\n";
        let outcome = nomem_outcome(trace).expect("taken");
        assert_eq!(outcome.file, "/mnt/t/d-5/f-2");
        assert_eq!(outcome.rc, "0");
        assert_eq!(outcome.restores, 2);
        assert!(nomem_outcome(
            "armed restores 1 restore_nomem 0\n/f rc=0 restores 2 restore_nomem 0\n"
        )
        .is_none());
    }

    #[test]
    fn the_manifest_is_a_fixed_permutation_of_every_small_file() {
        let script = manifest_script(MANIFEST_SEED);
        assert_eq!(script, manifest_script(MANIFEST_SEED));
        let mut names: Vec<&str> = script
            .split_whitespace()
            .filter(|w| w.starts_with("/mnt/t/"))
            .collect();
        assert_eq!(names.len() as u64, NDIRS * NFILES);
        assert_ne!(names[0], "/mnt/t/d-0/f-0", "not creation order");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len() as u64, NDIRS * NFILES, "each file once");
    }

    #[test]
    fn the_sums_script_names_every_file_once() {
        let script = sums_script();
        assert_eq!(script.matches("/mnt/t/d-").count() as u64, NDIRS * NFILES);
        assert!(script.contains(" /mnt/t/d-255/f-63\n"));
        assert!(script.ends_with("md5sum /mnt/shaped/* /mnt/sentinel\n"));
    }
}
