//! `cargo xtask vm-variants [--save-test-data]` (issue 30): the variant modules
//! (kmod/variants.rs: Debian 6.12's stock F2FS reshaped like another kernel family's attach
//! points) in one boot of Debian's stock 6.12 kernel, loaded in turn (guest: variants.sh). For
//! each, the exact checks of the VM test on one stream with `--accesses` over a small workload:
//! node reads attributed = iostat's node reads, node writes = iostat's node writes, checkpoints
//! = debugfs's CP count, journal entries = a kprobe_events hist trigger's count of
//! f2fs_lookup_journal_in_cursum calls with alloc set (the registers of `type` and `alloc`
//! from the variant's own signature), node lookups (`--accesses`) = the hist triggers' counts
//! of every (sbi, nid) lookup function the variant has. One verdict line per variant:
//!
//! ```text
//! variant 6.12-folio attributed=N iostat=N writes=N checkpoints=N/N journal=N accesses=N/N PASS
//! ```
//!
//! The guest's tracepoint formats and f2fs symbols, and each module's BTF, are nodescope's
//! planner test data (tracer-user/tests/data/variants/<variant>/): `--save-test-data` writes
//! them there; every run compares the committed formats and symbol names with the guest's.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::{accesses, cp_anatomy, initramfs, kernel, qemu, results};
use crate::{
    kmod::{
        self,
        variants::{self, Variant},
    },
    util,
};

/// The workload: NDIRS directories of NFILES small files, read cold by one cat each.
const NDIRS: u64 = 8;
const NFILES: u64 = 64;
/// Four variants, each a module load, mkfs, file set and stream under TCG.
const VM_TIMEOUT: Duration = Duration::from_secs(900);
/// The tracepoint format files kept as test data (those the variant has).
const FORMATS: [&str; 5] = [
    "f2fs_submit_page_bio",
    "f2fs_submit_folio_bio",
    "f2fs_submit_page_write",
    "f2fs_submit_folio_write",
    "f2fs_write_checkpoint",
];
const KALLSYMS: &str = "kallsyms.txt";
const BTF: &str = "f2fs.btf";

/// One variant's verdict line and whether it passed.
pub struct Outcome {
    pub name: &'static str,
    pub line: String,
    pub pass: bool,
}

/// Build the variant modules (cached), boot once, check each variant; one outcome each. An
/// error is a failure of the phase as a whole (no module, no boot).
pub fn build_and_run(save_test_data: bool) -> Result<Vec<Outcome>> {
    let started = Instant::now();
    let tree = kmod::prepare(variants::LABEL)?;
    let built = variants::build(&tree)?;
    for (variant, module) in &built {
        println!("{}", module.summary(variants::LABEL, variant.short()));
    }
    let spec = kernel::KERNELS
        .iter()
        .find(|k| k.label == variants::LABEL)
        .context("no 6.12 kernel in vm::kernel::KERNELS")?;
    let cache = util::target_dir().join("vm-cache");
    let kernel = kernel::prepare(spec, &cache)?;
    let nodescope = util::build_nodescope()?;
    let mut files = qemu::GuestFiles::fresh(cache.join("run-variants"))?;
    // One CPU: this guest attaches and detaches nodescope's programs many times over, and each
    // time the kernel patches its static branches across CPUs. Under TCG (two vCPU threads)
    // one such patch once left a CPU running a stale int3 (`Oops: int3` at a tracepoint's
    // site in __set_task_comm, stop 42's CI); the counts checked here do not need two CPUs.
    files.cpus = 1;
    let modules: Vec<(String, &Path)> = built
        .iter()
        .map(|(v, m)| (format!("f2fs-{}.ko", v.short()), m.ko.as_path()))
        .collect();
    fs::write(&files.initrd, initramfs_for(&kernel, &nodescope, &modules)?)?;
    files.create_disks()?;
    let out =
        files.boot_and_unpack("variants", crate::Arch::X86_64, &kernel.vmlinuz, VM_TIMEOUT)?;
    let guest_errors = fs::read_to_string(out.join("guest_errors.txt")).unwrap_or_default();
    let mut outcomes = Vec::new();
    for (variant, module) in &built {
        let dir = out.join(variant.short());
        let data = test_data_dir(variant);
        if save_test_data {
            save(&dir, &module.ko, &data)?;
        }
        let mut problems: Vec<String> = guest_errors
            .lines()
            .filter(|l| is_about(l, variant.short()))
            .map(|l| format!("guest: {l}"))
            .collect();
        let (lines, line, pass) = verdict(variant, &out, &data, &mut problems);
        for l in lines {
            println!("{l}");
        }
        println!("{line}");
        outcomes.push(Outcome {
            name: variant.name,
            line,
            pass,
        });
    }
    println!(
        "vm-variants: {:.1} s in all (results in {})",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    if outcomes.iter().all(|o| o.pass) {
        files.remove_images();
    }
    Ok(outcomes)
}

/// The CLI: every outcome's line again at the end, and an error when one failed.
pub fn run(save_test_data: bool) -> Result<()> {
    let outcomes = build_and_run(save_test_data)?;
    for outcome in &outcomes {
        println!("{}", outcome.line);
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.pass)
        .map(|o| o.name)
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("vm-variants failed: {}", failed.join(", "));
    }
    Ok(())
}

/// A guest error line about `short`: variants.sh's (`<short>: ...`) or the prelude's stream
/// phases' (`stream <short> ...`, `stream <short>_kprobe ...`).
fn is_about(line: &str, short: &str) -> bool {
    line.strip_prefix(short).is_some_and(|r| r.starts_with(':'))
        || line
            .strip_prefix("stream ")
            .and_then(|r| r.strip_prefix(short))
            .is_some_and(|r| r.starts_with(' ') || r.starts_with('_'))
}

fn initramfs_for(
    kernel: &kernel::Kernel,
    nodescope: &Path,
    modules: &[(String, &Path)],
) -> Result<Vec<u8>> {
    let files = [
        ("init", include_str!("../guest/variants.sh").to_string()),
        (
            "replay-names",
            super::settings::replay_script(super::settings::Replay::Names, NDIRS),
        ),
        ("etc/vm-test.conf", guest_config()),
    ];
    initramfs::build_with_f2fs_modules(kernel, nodescope, &files, &[], modules)
}

/// /etc/vm-test.conf: the workload's size, the variants, and per variant its lookup
/// functions and the registers of the journal lookup's `type` and `alloc`.
fn guest_config() -> String {
    let mut config = format!("NDIRS={NDIRS}\nNFILES={NFILES}\n");
    let names: Vec<&str> = variants::VARIANTS.iter().map(Variant::short).collect();
    config += &format!("VARIANTS=\"{}\"\n", names.join(" "));
    let kprobe: Vec<&str> = variants::VARIANTS
        .iter()
        .filter(|v| v.kprobe_reads)
        .map(Variant::short)
        .collect();
    config += &format!("KPROBE_READS=\"{}\"\n", kprobe.join(" "));
    for v in &variants::VARIANTS {
        let var = v.short().replace('-', "_");
        config += &format!("LOOKUPS_{var}=\"{}\"\n", v.lookups.join(" "));
        config += &format!(
            "JOURNAL_{var}=\"{} {}\"\n",
            v.journal_regs.0, v.journal_regs.1
        );
    }
    config
}

/// What one variant's run measured.
#[derive(Debug, Default)]
struct Figures {
    attributed: u64,
    iostat: u64,
    writes: u64,
    write_delta: u64,
    checkpoints: u64,
    cp_delta: u64,
    journal: u64,
    journal_hist: Option<u64>,
    accesses: Option<u64>,
    lookups: Option<u64>,
}

/// The detail lines, the verdict line, and whether it passed.
fn verdict(
    variant: &Variant,
    out: &Path,
    data: &Path,
    problems: &mut Vec<String>,
) -> (Vec<String>, String, bool) {
    let dir = out.join(variant.short());
    let mut lines = Vec::new();
    let figures = match measure(variant, out, &mut lines) {
        Ok(f) => f,
        Err(err) => {
            problems.push(format!("{err:#}"));
            Figures::default()
        }
    };
    judge(&figures, problems);
    let err = fs::read_to_string(out.join(format!("stream_{}.err", variant.short())));
    problems.extend(accesses::on_trampolines(
        &err.unwrap_or_default(),
        variant.lookups,
    ));
    if variant.kprobe_reads {
        kprobe_reads(variant, out, &mut lines, problems);
    }
    lines.push(format!("  {} planned: {}", variant.name, planned(&dir)));
    lines.push(format!(
        "  {} kernel: {} tracepoints {}",
        variant.name,
        variant.imitates,
        present_formats(&dir).join(" ")
    ));
    check_shape(variant, &dir, problems);
    compare_test_data(&dir, data, problems);
    for p in problems.iter() {
        lines.push(format!("  FAILED: {} {p}", variant.name));
    }
    let pass = problems.is_empty();
    let opt = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let f = &figures;
    let line = format!(
        "variant {} attributed={} iostat={} writes={} checkpoints={}/{} journal={} accesses={}/{} {}",
        variant.name,
        f.attributed,
        f.iostat,
        f.writes,
        f.checkpoints,
        f.cp_delta,
        f.journal,
        opt(f.accesses),
        opt(f.lookups),
        if pass { "PASS" } else { "FAIL" }
    );
    (lines, line, pass)
}

fn measure(variant: &Variant, out: &Path, lines: &mut Vec<String>) -> Result<Figures> {
    let name = variant.short();
    let dir = out.join(name);
    let phase = results::Phase::load(out, name)?;
    lines.push(format!("  {:<16} {}", variant.name, phase.summary()));
    anyhow::ensure!(
        phase.rc == Some(0),
        "nodescope stream exit status {:?} (stream_{name}.err)",
        phase.rc
    );
    anyhow::ensure!(phase.lines > 0, "no stream lines");
    let iostat = |when: &str| -> Result<u64> {
        let file = format!("iostat_{name}_{when}.txt");
        let text = fs::read_to_string(out.join(&file)).with_context(|| format!("no {file}"))?;
        cp_anatomy::write_blocks(&text, &cp_anatomy::NODE_WRITE_ROWS)
            .with_context(|| format!("no node write rows in {file}"))
    };
    let read = |file: &str| fs::read_to_string(dir.join(file)).unwrap_or_default();
    let err = fs::read_to_string(out.join(format!("stream_{name}.err"))).unwrap_or_default();
    let mut lookups = Some(0);
    let mut per_function = Vec::new();
    for function in variant.lookups {
        let hits = results::hist_hits(&read(&format!("lookup_{function}.hist")));
        per_function.push(format!(
            "{function}={}",
            hits.map_or("?".into(), |h| h.to_string())
        ));
        lookups = lookups.zip(hits).map(|(a, b)| a + b);
    }
    let figures = Figures {
        attributed: phase.reads(),
        iostat: phase.iostat_delta,
        writes: phase.node_writes,
        write_delta: iostat("after")?.saturating_sub(iostat("before")?),
        checkpoints: phase.checkpoints,
        cp_delta: phase.cp_delta,
        journal: phase.journal,
        journal_hist: results::hist_hits(&read("journal.hist")),
        accesses: accesses::kernel_counts(&err).map(|(lookups, _)| lookups),
        lookups,
    };
    lines.push(format!(
        "  {:<16} node writes {} (iostat {}), journal {} (hist {:?}), lookups by function {}",
        variant.name,
        figures.writes,
        figures.write_delta,
        figures.journal,
        figures.journal_hist,
        per_function.join(" ")
    ));
    Ok(figures)
}

/// The kprobe fallback's stream: its node reads attributed = iostat's, all demand reads by cat.
fn kprobe_reads(
    variant: &Variant,
    out: &Path,
    lines: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    let name = format!("{}_kprobe", variant.short());
    match results::Phase::load(out, &name) {
        Ok(phase) => {
            lines.push(format!(
                "  {:<16} --node-reads kprobe: {}",
                variant.name,
                phase.summary()
            ));
            if phase.rc != Some(0) || phase.reads() != phase.iostat_delta || phase.iostat_delta == 0
            {
                problems.push(format!(
                    "--node-reads kprobe: attributed {} != iostat node reads {} (exit {:?})",
                    phase.reads(),
                    phase.iostat_delta,
                    phase.rc
                ));
            }
        }
        Err(err) => problems.push(format!("--node-reads kprobe: {err:#}")),
    }
}

/// Every figure against its kernel count, exactly, and none of them zero.
fn judge(f: &Figures, problems: &mut Vec<String>) {
    let mut expect = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    expect(
        f.attributed == f.iostat && f.iostat > 0,
        format!(
            "attributed {} != iostat node reads {}",
            f.attributed, f.iostat
        ),
    );
    expect(
        f.writes == f.write_delta && f.write_delta > 0,
        format!(
            "node writes {} != iostat node writes {}",
            f.writes, f.write_delta
        ),
    );
    expect(
        f.checkpoints == f.cp_delta && f.cp_delta > 0,
        format!(
            "checkpoints {} != debugfs CP count delta {}",
            f.checkpoints, f.cp_delta
        ),
    );
    expect(
        Some(f.journal) == f.journal_hist && f.journal > 0,
        format!(
            "journal entries {} != the hist trigger's {:?}",
            f.journal, f.journal_hist
        ),
    );
    expect(
        f.accesses.is_some() && f.accesses == f.lookups && f.lookups.is_some_and(|l| l > 0),
        format!(
            "node lookups counted by nodescope {:?} != the hist triggers' {:?}",
            f.accesses, f.lookups
        ),
    );
}

/// The parts of `nodescope probe --json`'s `f2fs_plan`, in the order it prints them (its
/// `Plan` struct's, tracer-user's f2fs planner): serde_json's objects keep their keys sorted.
const PLAN_PARTS: [&str; 5] = [
    "node_reads",
    "node_writes",
    "checkpoints",
    "meta_writes",
    "journal",
];

/// `nodescope probe --json`'s plan: each event's chosen variant (or why none), and the
/// access plan's lookup function(s), as one line.
fn planned(dir: &Path) -> String {
    let text = fs::read_to_string(dir.join("probe.json")).unwrap_or_default();
    let Ok(probe) = serde_json::from_str::<Value>(text.trim()) else {
        return "(no probe.json)".into();
    };
    let plan = &probe["f2fs_plan"];
    let mut parts = Vec::new();
    for what in PLAN_PARTS {
        let part = &plan[what];
        if part["chosen"]
            .as_object()
            .is_none_or(|chosen| chosen.is_empty())
        {
            continue;
        }
        let chosen = part["chosen"]["variant"].as_str().unwrap_or("");
        parts.push(format!(
            "{what}={}",
            if chosen.is_empty() { "none" } else { chosen }
        ));
    }
    let access = probe["accesses"]["plan"].as_object().into_iter().flatten();
    for (key, value) in access {
        if key.starts_with("lookup") {
            let names: Vec<&str> = match value.as_array() {
                Some(items) if !items.is_empty() => {
                    items.iter().map(|v| v.as_str().unwrap_or("")).collect()
                }
                _ => vec![value.as_str().unwrap_or("")],
            };
            parts.push(format!("{key}={}", names.join(",")));
        }
    }
    let missing: Vec<&str> = probe["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or(""))
        .collect();
    if !missing.is_empty() {
        parts.push(format!("missing: {}", missing.join("; ")));
    }
    parts.join(" ")
}

/// The kernel shows the variant's shape: its read and write tracepoints, and the checkpoint
/// reason's field.
fn check_shape(variant: &Variant, dir: &Path, problems: &mut Vec<String>) {
    let formats = present_formats(dir);
    for tp in [variant.read_tracepoint, variant.write_tracepoint] {
        if !formats.contains(&tp) {
            problems.push(format!("tracefs has no {tp}: {formats:?}"));
        }
    }
    let checkpoint =
        fs::read_to_string(dir.join("f2fs_write_checkpoint.format")).unwrap_or_default();
    if !checkpoint.contains(&format!("field:{}", variant.checkpoint_field)) {
        problems.push(format!(
            "f2fs_write_checkpoint's format has no `field:{}`",
            variant.checkpoint_field
        ));
    }
}

fn present_formats(dir: &Path) -> Vec<&'static str> {
    FORMATS
        .into_iter()
        .filter(|f| dir.join(format!("{f}.format")).exists())
        .collect()
}

fn test_data_dir(variant: &Variant) -> PathBuf {
    util::workspace_root()
        .join("tracer-user/tests/data/variants")
        .join(variant.name)
}

/// The guest's formats and kallsyms excerpt and the module's .BTF into `data`.
fn save(dir: &Path, ko: &Path, data: &Path) -> Result<()> {
    fs::create_dir_all(data)?;
    for format in present_formats(dir) {
        let name = format!("{format}.format");
        copy_readable(&dir.join(&name), &data.join(&name))?;
    }
    copy_readable(&dir.join(KALLSYMS), &data.join(KALLSYMS))?;
    util::run(
        Command::new("objcopy")
            .arg(format!("--dump-section=.BTF={}", data.join(BTF).display()))
            .arg(ko)
            .arg(std::env::temp_dir().join("nodescope-variant-objcopy.ko")),
    )?;
    let _ = fs::remove_file(std::env::temp_dir().join("nodescope-variant-objcopy.ko"));
    println!("vm-variants: test data written to {}", data.display());
    Ok(())
}

/// A copy that anyone may read (tracefs's format files are 0440 in the guest's tar).
fn copy_readable(from: &Path, to: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::write(
        to,
        fs::read(from).with_context(|| format!("reading {}", from.display()))?,
    )?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o644))
        .with_context(|| format!("chmod {}", to.display()))
}

/// The committed test data must be what this kernel shows: the same format files (their
/// event ID aside, which depends on load order) and the same symbols (addresses aside).
fn compare_test_data(dir: &Path, data: &Path, problems: &mut Vec<String>) {
    let fix = "run `cargo xtask vm-variants --save-test-data` and commit";
    if !data.join(BTF).is_file() {
        problems.push(format!("no {} ({fix})", data.join(BTF).display()));
    }
    let mut names: Vec<String> = FORMATS.iter().map(|f| format!("{f}.format")).collect();
    names.push(KALLSYMS.to_string());
    for name in names {
        let (guest, committed) = (dir.join(&name), data.join(&name));
        let normal = |path: &Path| {
            fs::read_to_string(path).ok().map(|text| {
                if name == KALLSYMS {
                    normal_kallsyms(&text)
                } else {
                    normal_format(&text)
                }
            })
        };
        if normal(&guest) != normal(&committed) {
            problems.push(format!(
                "test data {} differs from the guest's ({fix})",
                committed.display()
            ));
        }
    }
}

/// A format file without its `ID:` line.
fn normal_format(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("ID:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// kallsyms lines without their addresses, sorted.
fn normal_kallsyms(text: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .collect();
    lines.sort();
    lines.join("\n")
}

#[cfg(test)]
mod tests;
