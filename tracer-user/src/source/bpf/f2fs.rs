//! F2FS node reads, node writes and checkpoints: which probe variant this kernel offers (the
//! planner), attaching the programs of tracer-ebpf/src/f2fs.rs, and reading their counters.
//!
//! The planner is pure (a `KernelView` in, a `Plan` out) so that tests can feed it the format
//! files of other kernels; `KernelView::gather` reads the running kernel.
use std::{
    collections::BTreeMap,
    fmt::{self, Write as _},
    fs,
    path::Path,
};

use anyhow::{bail, Context as _, Result};
use aya::{
    maps::{Array, PerCpuArray, PerCpuHashMap},
    programs::{KProbe, TracePoint},
    Ebpf,
};
use serde::Serialize;
use tracer_common::{
    TaskCounts, TaskKey, TracepointLayout, CONFIG_RAHEAD_BIT, FIELD_ABSENT, TP_SUBMIT_PAGE_BIO,
    TP_SUBMIT_PAGE_WRITE, TP_SUBMIT_READ_BIO, TP_WRITE_CHECKPOINT,
};

use super::format::Format;
use crate::system;

/// Program names in the eBPF object (tracer-ebpf/src/f2fs.rs).
const PROG_PAGE_BIO: &str = "f2fs_node_read_page";
const PROG_READ_BIO: &str = "f2fs_node_read_bio";
const PROG_WRITE: &str = "f2fs_node_write";
const PROG_CHECKPOINT: &str = "f2fs_checkpoint";
const PROG_READ_NODE_ENTRY: &str = "f2fs_read_node_page_entry";
const PROG_READ_NODE_RETURN: &str = "f2fs_read_node_page_return";
const PROG_RA_ENTRY: &str = "f2fs_ra_node_page_entry";
const PROG_RA_RETURN: &str = "f2fs_ra_node_page_return";

/// REQ_RAHEAD and REQ_SYNC bit numbers when no format file says (6.x kernels).
const DEFAULT_RAHEAD_BIT: u16 = 19;
const DEFAULT_SYNC_BIT: u16 = 11;

/// Kernel functions the planner looks for in /proc/kallsyms.
const SYM_READ_NODE_PAGE: &str = "read_node_page";
const SYM_RA_NODE_PAGE: &str = "f2fs_ra_node_page";
/// Present only on kernels whose node reads go through the metadata cache (F2FS dev-test).
const SYM_METADATA_CACHE: [&str; 2] = ["f2fs_submit_cache_read", "read_node_cache"];

/// Where node reads are seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum NodeReadVariant {
    /// Tracepoint f2fs_submit_page_bio (6.1 .. 6.12).
    PageBio,
    /// Tracepoint f2fs_submit_folio_bio (its newer name).
    FolioBio,
    /// Tracepoint f2fs_submit_read_bio (metadata-cache kernels; per bio).
    ReadBio,
    /// kprobe + kretprobe on read_node_page (and f2fs_ra_node_page); no device number.
    Kprobe,
}

impl NodeReadVariant {
    fn tracepoint(self) -> Option<&'static str> {
        match self {
            NodeReadVariant::PageBio => Some("f2fs_submit_page_bio"),
            NodeReadVariant::FolioBio => Some("f2fs_submit_folio_bio"),
            NodeReadVariant::ReadBio => Some("f2fs_submit_read_bio"),
            NodeReadVariant::Kprobe => None,
        }
    }
}

impl fmt::Display for NodeReadVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tracepoint() {
            Some(name) => f.write_str(name),
            None => f.write_str("kprobe read_node_page"),
        }
    }
}

/// What the running kernel offers, as far as the planner cares.
#[derive(Clone, Debug, Default)]
pub struct KernelView {
    /// F2FS tracepoint name -> its format file's text.
    pub formats: BTreeMap<String, String>,
    pub kprobes: bool,
    /// Wanted function name -> the symbol as the kernel names it (e.g. `read_node_page.isra.0`).
    pub symbols: BTreeMap<String, String>,
    /// Tracepoints that exist but whose format file could not be read, and why (not root).
    pub unreadable: BTreeMap<String, String>,
}

impl KernelView {
    /// Read the format files under `tracefs` and the F2FS symbols in /proc/kallsyms.
    pub fn gather(tracefs: Option<&Path>) -> KernelView {
        let (mut formats, mut unreadable) = (BTreeMap::new(), BTreeMap::new());
        if let Some(root) = tracefs {
            for name in system::F2FS_TRACEPOINT_VARIANTS {
                let path = root.join("events/f2fs").join(name).join("format");
                match fs::read_to_string(&path) {
                    Ok(text) => drop(formats.insert(name.to_string(), text)),
                    Err(err) if path.parent().is_some_and(Path::is_dir) => {
                        unreadable.insert(name.to_string(), format!("{}: {err}", path.display()));
                    }
                    Err(_) => {}
                }
            }
        }
        let kallsyms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        KernelView {
            formats,
            kprobes: system::has_kprobes(),
            symbols: find_symbols(&kallsyms),
            unreadable,
        }
    }

    fn format(&self, tracepoint: &str) -> Result<Format> {
        if let Some(why) = self.unreadable.get(tracepoint) {
            bail!("cannot read the format of f2fs:{tracepoint}: {why}");
        }
        let text = self
            .formats
            .get(tracepoint)
            .with_context(|| format!("tracepoint f2fs:{tracepoint} not in this kernel"))?;
        Format::parse(text).with_context(|| format!("parsing the format of {tracepoint}"))
    }

    fn has_metadata_cache(&self) -> bool {
        SYM_METADATA_CACHE
            .iter()
            .any(|s| self.symbols.contains_key(*s))
    }
}

/// The wanted functions in /proc/kallsyms text; GCC may have renamed a static function to
/// `name.isra.0` and the like, which is the name kprobes need.
pub fn find_symbols(kallsyms: &str) -> BTreeMap<String, String> {
    let mut wanted = vec![SYM_READ_NODE_PAGE, SYM_RA_NODE_PAGE];
    wanted.extend(SYM_METADATA_CACHE);
    let mut found = BTreeMap::new();
    for line in kallsyms.lines() {
        let Some(symbol) = line.split_whitespace().nth(2) else {
            continue;
        };
        let base = symbol.split('.').next().unwrap_or(symbol);
        if let Some(w) = wanted.iter().find(|w| **w == base) {
            // An exact name beats a suffixed clone.
            if symbol == base || !found.contains_key(*w) {
                found.insert(w.to_string(), symbol.to_string());
            }
        }
    }
    found
}

/// Where a program attaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Target {
    Tracepoint { category: String, name: String },
    Kprobe { function: String },
    Kretprobe { function: String },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tracepoint { category, name } => write!(f, "tracepoint {category}:{name}"),
            Target::Kprobe { function } => write!(f, "kprobe {function}"),
            Target::Kretprobe { function } => write!(f, "kretprobe {function}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attachment {
    pub program: &'static str,
    pub target: Target,
}

fn f2fs_tracepoint(program: &'static str, name: &str) -> Attachment {
    Attachment {
        program,
        target: Target::Tracepoint {
            category: "f2fs".into(),
            name: name.into(),
        },
    }
}

/// The variant chosen for one thing to observe.
#[derive(Clone, Debug, Serialize)]
pub struct Choice {
    pub variant: String,
    pub attachments: Vec<Attachment>,
    /// `TP_*` slot and the layout to write there, for tracepoint variants.
    #[serde(skip)]
    pub layout: Option<(u32, TracepointLayout)>,
    /// What this variant cannot tell, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

/// One thing to observe: what was chosen, and why the others were not.
#[derive(Clone, Debug, Serialize)]
pub struct Part {
    pub what: &'static str,
    pub chosen: Option<Choice>,
    pub rejected: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub node_reads: Part,
    pub node_writes: Part,
    pub checkpoints: Part,
    /// REQ_RAHEAD's bit for the kprobe fallback.
    pub rahead_bit: u16,
}

impl Plan {
    pub fn parts(&self) -> [&Part; 3] {
        [&self.node_reads, &self.node_writes, &self.checkpoints]
    }

    /// Human-readable lines, one per part plus one per rejected alternative.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for part in self.parts() {
            match &part.chosen {
                Some(choice) => {
                    let targets: Vec<String> = choice
                        .attachments
                        .iter()
                        .map(|a| a.target.to_string())
                        .collect();
                    let _ = write!(out, "{:<12} {}", part.what, targets.join(" + "));
                    if let Some(caveat) = &choice.caveat {
                        let _ = write!(out, " ({caveat})");
                    }
                    out.push('\n');
                }
                None => {
                    let _ = writeln!(out, "{:<12} not available", part.what);
                }
            }
            for why in &part.rejected {
                let _ = writeln!(out, "{:<12}   not used: {why}", "");
            }
        }
        out
    }

    /// What cannot be observed, in words (empty when everything has a variant).
    pub fn missing(&self) -> Vec<String> {
        self.parts()
            .iter()
            .filter(|p| p.chosen.is_none())
            .map(|p| format!("{}: {}", p.what, p.rejected.join("; ")))
            .collect()
    }
}

/// Plan for the running kernel: what `nodescope probe` can show without loading anything.
pub fn plan_this_kernel(prefer: Option<NodeReadVariant>) -> Plan {
    let tracefs = system::tracefs();
    plan(&KernelView::gather(tracefs.as_deref()), prefer)
}

/// Choose a variant for node reads, node writes and checkpoints. `prefer` forces one node-read
/// variant (for tests of the fallbacks); `None` picks the best this kernel has.
pub fn plan(view: &KernelView, prefer: Option<NodeReadVariant>) -> Plan {
    let rahead_bit = [
        "f2fs_submit_page_bio",
        "f2fs_submit_folio_bio",
        "f2fs_submit_read_bio",
    ]
    .iter()
    .filter_map(|tp| view.format(tp).ok()?.flag_bit("R"))
    .next()
    .unwrap_or(DEFAULT_RAHEAD_BIT);
    Plan {
        node_reads: plan_node_reads(view, prefer),
        node_writes: plan_tracepoint(view, "node_writes", "f2fs_submit_page_write", |f| {
            Ok((TP_SUBMIT_PAGE_WRITE, page_write_layout(f)?, PROG_WRITE))
        }),
        checkpoints: plan_tracepoint(view, "checkpoints", "f2fs_write_checkpoint", |f| {
            Ok((TP_WRITE_CHECKPOINT, checkpoint_layout(f)?, PROG_CHECKPOINT))
        }),
        rahead_bit,
    }
}

fn plan_node_reads(view: &KernelView, prefer: Option<NodeReadVariant>) -> Part {
    use NodeReadVariant::*;
    let order = match prefer {
        Some(variant) => vec![variant],
        // Metadata-cache kernels read node blocks without f2fs_submit_page_bio.
        None if view.has_metadata_cache() => vec![ReadBio, FolioBio, PageBio, Kprobe],
        // f2fs_submit_read_bio fires for node reads too, but per bio and without the nid.
        None => vec![FolioBio, PageBio, ReadBio, Kprobe],
    };
    let mut rejected = Vec::new();
    for variant in order {
        match node_read_choice(view, variant) {
            Ok(choice) => {
                return Part {
                    what: "node_reads",
                    chosen: Some(choice),
                    rejected,
                }
            }
            Err(err) => rejected.push(format!("{variant}: {err:#}")),
        }
    }
    Part {
        what: "node_reads",
        chosen: None,
        rejected,
    }
}

fn node_read_choice(view: &KernelView, variant: NodeReadVariant) -> Result<Choice> {
    let Some(tracepoint) = variant.tracepoint() else {
        return kprobe_choice(view);
    };
    let format = view.format(tracepoint)?;
    let (slot, layout, program) = if variant == NodeReadVariant::ReadBio {
        (TP_SUBMIT_READ_BIO, read_bio_layout(&format)?, PROG_READ_BIO)
    } else {
        (TP_SUBMIT_PAGE_BIO, page_bio_layout(&format)?, PROG_PAGE_BIO)
    };
    Ok(Choice {
        variant: variant.to_string(),
        attachments: vec![f2fs_tracepoint(program, tracepoint)],
        layout: Some((slot, layout)),
        caveat: (variant == NodeReadVariant::ReadBio).then(|| "no nid per read".into()),
    })
}

fn kprobe_choice(view: &KernelView) -> Result<Choice> {
    if !view.kprobes {
        bail!("kprobes not available (CONFIG_KPROBES)");
    }
    let function = view
        .symbols
        .get(SYM_READ_NODE_PAGE)
        .with_context(|| format!("{SYM_READ_NODE_PAGE} not in /proc/kallsyms"))?;
    let mut attachments = vec![
        kprobe(PROG_READ_NODE_ENTRY, function, false),
        kprobe(PROG_READ_NODE_RETURN, function, true),
    ];
    if let Some(ra) = view.symbols.get(SYM_RA_NODE_PAGE) {
        attachments.push(kprobe(PROG_RA_ENTRY, ra, false));
        attachments.push(kprobe(PROG_RA_RETURN, ra, true));
    }
    Ok(Choice {
        variant: NodeReadVariant::Kprobe.to_string(),
        attachments,
        layout: None,
        caveat: Some("device unknown (dev 0), no nid".into()),
    })
}

fn kprobe(program: &'static str, function: &str, ret: bool) -> Attachment {
    let function = function.to_string();
    let target = if ret {
        Target::Kretprobe { function }
    } else {
        Target::Kprobe { function }
    };
    Attachment { program, target }
}

type LayoutFn = fn(&Format) -> Result<(u32, TracepointLayout, &'static str)>;

fn plan_tracepoint(view: &KernelView, what: &'static str, tp: &str, layout: LayoutFn) -> Part {
    let chosen = view
        .format(tp)
        .and_then(|f| layout(&f))
        .map(|(slot, l, program)| Choice {
            variant: tp.to_string(),
            attachments: vec![f2fs_tracepoint(program, tp)],
            layout: Some((slot, l)),
            caveat: None,
        });
    match chosen {
        Ok(choice) => Part {
            what,
            chosen: Some(choice),
            rejected: Vec::new(),
        },
        Err(err) => Part {
            what,
            chosen: None,
            rejected: vec![format!("{tp}: {err:#}")],
        },
    }
}

fn absent_layout() -> TracepointLayout {
    TracepointLayout {
        dev: FIELD_ABSENT,
        ino: FIELD_ABSENT,
        index: FIELD_ABSENT,
        op: FIELD_ABSENT,
        op_flags: FIELD_ABSENT,
        type_: FIELD_ABSENT,
        reason: FIELD_ABSENT,
        phase: FIELD_ABSENT,
        msg_loc: FIELD_ABSENT,
        rahead_bit: DEFAULT_RAHEAD_BIT,
        sync_bit: DEFAULT_SYNC_BIT,
        _pad: 0,
        size: FIELD_ABSENT,
    }
}

/// The offset of a field the programs read as one of `sizes` bytes; an error when it is missing
/// or has another size (the program would read the wrong bytes).
fn required(format: &Format, name: &str, sizes: &[u16]) -> Result<u16> {
    let field = format
        .field(name)
        .with_context(|| format!("{} has no field `{name}`", format.name))?;
    if !sizes.contains(&field.size) {
        bail!(
            "{}: field `{name}` is {} bytes, expected {sizes:?}",
            format.name,
            field.size
        );
    }
    Ok(field.offset)
}

fn optional(format: &Format, name: &str, sizes: &[u16]) -> Result<u16> {
    if format.field(name).is_none() {
        return Ok(FIELD_ABSENT);
    }
    required(format, name, sizes)
}

fn with_flag_bits(format: &Format, mut layout: TracepointLayout) -> TracepointLayout {
    layout.rahead_bit = format.flag_bit("R").unwrap_or(DEFAULT_RAHEAD_BIT);
    layout.sync_bit = format.flag_bit("S").unwrap_or(DEFAULT_SYNC_BIT);
    layout
}

/// f2fs_submit_page_bio / f2fs_submit_folio_bio.
pub fn page_bio_layout(format: &Format) -> Result<TracepointLayout> {
    let layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        ino: optional(format, "ino", &[4, 8])?,
        index: optional(format, "index", &[8])?,
        op: required(format, "op", &[4])?,
        op_flags: required(format, "op_flags", &[4])?,
        type_: required(format, "type", &[4])?,
        ..absent_layout()
    };
    Ok(with_flag_bits(format, layout))
}

/// f2fs_submit_read_bio: per bio, with its byte size.
pub fn read_bio_layout(format: &Format) -> Result<TracepointLayout> {
    let layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        op: required(format, "op", &[4])?,
        op_flags: required(format, "op_flags", &[4])?,
        type_: required(format, "type", &[4])?,
        size: required(format, "size", &[4])?,
        ..absent_layout()
    };
    Ok(with_flag_bits(format, layout))
}

/// f2fs_submit_page_write.
pub fn page_write_layout(format: &Format) -> Result<TracepointLayout> {
    Ok(TracepointLayout {
        dev: required(format, "dev", &[4])?,
        index: optional(format, "index", &[8])?,
        op: optional(format, "op", &[4])?,
        type_: required(format, "type", &[4])?,
        ..absent_layout()
    })
}

/// f2fs_write_checkpoint: a numeric `phase` (newer kernels) or a `__data_loc` message string
/// (`dest_msg` on 6.1 .. 6.12, `msg` before).
pub fn checkpoint_layout(format: &Format) -> Result<TracepointLayout> {
    let mut layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        reason: optional(format, "reason", &[4])?,
        phase: optional(format, "phase", &[1, 2, 4])?,
        ..absent_layout()
    };
    if layout.phase == FIELD_ABSENT {
        let msg = ["dest_msg", "msg"]
            .iter()
            .find_map(|name| format.field(name).filter(|f| f.is_data_loc()))
            .with_context(|| format!("{} has neither `phase` nor a message string", format.name))?;
        layout.msg_loc = msg.offset;
    }
    Ok(layout)
}

/// What happened when one attachment was tried.
#[derive(Clone, Debug, Serialize)]
pub struct AttachOutcome {
    pub what: &'static str,
    pub target: String,
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Write the layouts and settings, then load and attach every chosen program. An attachment
/// that fails is reported, not fatal: the caller decides what it can live without.
pub fn attach(ebpf: &mut Ebpf, plan: &Plan) -> Result<Vec<AttachOutcome>> {
    write_layouts(ebpf, plan)?;
    let mut outcomes = Vec::new();
    for part in plan.parts() {
        let Some(choice) = &part.chosen else {
            continue;
        };
        for attachment in &choice.attachments {
            let result = attach_one(ebpf, attachment);
            outcomes.push(AttachOutcome {
                what: part.what,
                target: attachment.target.to_string(),
                attached: result.is_ok(),
                error: result.err().map(|e| format!("{e:#}")),
            });
        }
    }
    Ok(outcomes)
}

fn write_layouts(ebpf: &mut Ebpf, plan: &Plan) -> Result<()> {
    let map = ebpf.map_mut("TP_LAYOUT").context("TP_LAYOUT map missing")?;
    let mut layouts: Array<_, TracepointLayout> = Array::try_from(map)?;
    for part in plan.parts() {
        if let Some((slot, layout)) = part.chosen.as_ref().and_then(|c| c.layout) {
            layouts.set(slot, layout, 0).context("writing TP_LAYOUT")?;
        }
    }
    let map = ebpf.map_mut("CONFIG").context("CONFIG map missing")?;
    let mut config: Array<_, u32> = Array::try_from(map)?;
    config
        .set(CONFIG_RAHEAD_BIT, u32::from(plan.rahead_bit), 0)
        .context("writing CONFIG")
}

fn attach_one(ebpf: &mut Ebpf, attachment: &Attachment) -> Result<()> {
    let name = attachment.program;
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the object"))?;
    match &attachment.target {
        Target::Tracepoint { category, name } => {
            let tp: &mut TracePoint = program.try_into()?;
            if tp.fd().is_err() {
                tp.load().context("the verifier rejected the program")?;
            }
            tp.attach(category, name)?;
        }
        Target::Kprobe { function } | Target::Kretprobe { function } => {
            let kp: &mut KProbe = program.try_into()?;
            if kp.fd().is_err() {
                kp.load().context("the verifier rejected the program")?;
            }
            kp.attach(function, 0)?;
        }
    }
    Ok(())
}

/// The in-kernel counters, summed over CPUs: one entry per (device, tgid, uid).
pub fn read_counts(ebpf: &Ebpf) -> Result<Vec<(TaskKey, TaskCounts)>> {
    let map = ebpf.map("NODE_COUNTS").context("NODE_COUNTS map missing")?;
    let counts: PerCpuHashMap<_, TaskKey, TaskCounts> = PerCpuHashMap::try_from(map)?;
    let mut out = Vec::new();
    for item in counts.iter() {
        let (key, per_cpu) = item.context("reading NODE_COUNTS")?;
        out.push((key, sum_cpus(per_cpu.iter())));
    }
    Ok(out)
}

fn sum_cpus<'a>(values: impl Iterator<Item = &'a TaskCounts>) -> TaskCounts {
    let mut total = TaskCounts::default();
    for v in values {
        total.node_reads_demand += v.node_reads_demand;
        total.node_reads_readahead += v.node_reads_readahead;
        total.node_writes += v.node_writes;
        total.checkpoints += v.checkpoints;
        // Each CPU has its own copy of the comm: the newest one is the process's name now.
        if v.comm[0] != 0 && (total.comm[0] == 0 || v.comm_ns > total.comm_ns) {
            total.comm = v.comm;
            total.comm_ns = v.comm_ns;
        }
    }
    total
}

/// Increments the kernel side could not make because NODE_COUNTS was full.
pub fn count_failures(ebpf: &Ebpf) -> Result<u64> {
    let map = ebpf.map("COUNT_FAILS").context("COUNT_FAILS map missing")?;
    let fails: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
    Ok(fails
        .get(&0, 0)
        .context("reading COUNT_FAILS")?
        .iter()
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summing_cpus_adds_counts_and_keeps_the_newest_comm() {
        let cpu = |demand, comm: &[u8], comm_ns| {
            let mut c = TaskCounts {
                node_reads_demand: demand,
                comm_ns,
                ..TaskCounts::default()
            };
            c.comm[..comm.len()].copy_from_slice(comm);
            c
        };
        let cpus = [cpu(2, b"cat", 20), cpu(0, b"", 0), cpu(1, b"sh", 10)];
        let total = sum_cpus(cpus.iter());
        assert_eq!(total.node_reads_demand, 3);
        assert_eq!(&total.comm[..4], b"cat\0");
    }

    #[test]
    fn f2fs_programs_pass_the_verifier() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED f2fs_programs_pass_the_verifier: needs root to load eBPF programs");
            return;
        }
        let mut ebpf = super::super::load(64 * 1024).expect("load the object");
        for name in [PROG_PAGE_BIO, PROG_READ_BIO, PROG_WRITE, PROG_CHECKPOINT] {
            let tp: &mut TracePoint = ebpf.program_mut(name).unwrap().try_into().unwrap();
            tp.load().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        for name in [
            PROG_READ_NODE_ENTRY,
            PROG_READ_NODE_RETURN,
            PROG_RA_ENTRY,
            PROG_RA_RETURN,
        ] {
            let kp: &mut KProbe = ebpf.program_mut(name).unwrap().try_into().unwrap();
            kp.load().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
    }

    #[test]
    fn finds_exact_and_cloned_symbols() {
        let kallsyms = "ffffffffc063c710 t read_node_page.isra.0\t[f2fs]\n\
                        ffffffffc063d8d0 t f2fs_ra_node_page\t[f2fs]\n\
                        ffffffffc063d990 t f2fs_ra_node_pages\t[f2fs]\n";
        let found = find_symbols(kallsyms);
        assert_eq!(found["read_node_page"], "read_node_page.isra.0");
        assert_eq!(found["f2fs_ra_node_page"], "f2fs_ra_node_page");
        assert_eq!(found.len(), 2);
    }
}

/// The planner on the format files of real kernels (tests/data/formats: exact copies of the
/// 6.1 and 6.12 files, plus synthetic newer variants).
#[cfg(test)]
mod plan_tests {
    use super::*;

    macro_rules! formats {
        ($dir:literal: $($name:literal),*) => {
            [$((
                $name.to_string(),
                include_str!(concat!("../../../tests/data/formats/", $dir, "/format_", $name, ".txt"))
                    .to_string(),
            )),*]
            .into_iter()
            .collect::<BTreeMap<String, String>>()
        };
    }

    fn debian(version: &str) -> KernelView {
        let formats = match version {
            "6.1" => formats!("6.1": "f2fs_submit_page_bio", "f2fs_submit_read_bio",
                "f2fs_submit_page_write", "f2fs_write_checkpoint", "f2fs_iostat"),
            _ => formats!("6.12": "f2fs_submit_page_bio", "f2fs_submit_read_bio",
                "f2fs_submit_page_write", "f2fs_write_checkpoint", "f2fs_iostat"),
        };
        KernelView {
            formats,
            kprobes: true,
            symbols: find_symbols("0 t read_node_page\t[f2fs]\n0 t f2fs_ra_node_page\t[f2fs]\n"),
            unreadable: BTreeMap::new(),
        }
    }

    #[test]
    fn an_unreadable_format_is_said_so_not_called_absent() {
        let mut view = debian("6.1");
        view.formats.remove("f2fs_submit_page_bio");
        view.unreadable
            .insert("f2fs_submit_page_bio".into(), "Permission denied".into());
        let plan = plan(&view, None);
        assert_eq!(chosen(&plan.node_reads).variant, "f2fs_submit_read_bio");
        let why = plan.node_reads.rejected.join("\n");
        assert!(
            why.contains("cannot read the format of f2fs:f2fs_submit_page_bio: Permission denied"),
            "{why}"
        );
    }

    fn chosen(part: &Part) -> &Choice {
        part.chosen
            .as_ref()
            .unwrap_or_else(|| panic!("{}: {:?}", part.what, part.rejected))
    }

    #[test]
    fn debian_kernels_use_submit_page_bio_with_their_offsets() {
        for version in ["6.1", "6.12"] {
            let plan = plan(&debian(version), None);
            let reads = chosen(&plan.node_reads);
            assert_eq!(reads.variant, "f2fs_submit_page_bio", "{version}");
            let (slot, l) = reads.layout.unwrap();
            assert_eq!(slot, TP_SUBMIT_PAGE_BIO);
            let offsets = (l.dev, l.ino, l.index, l.op, l.op_flags, l.type_);
            assert_eq!(offsets, (8, 16, 24, 40, 44, 52), "{version}");
            assert_eq!((l.rahead_bit, l.sync_bit, plan.rahead_bit), (19, 11, 19));
            assert_eq!(l.size, FIELD_ABSENT);
            // The folio name does not exist there: said so, not hidden.
            assert!(plan.node_reads.rejected[0].contains("f2fs_submit_folio_bio"));
            assert!(plan.missing().is_empty(), "{:?}", plan.missing());
        }
    }

    #[test]
    fn checkpoints_on_6_1_and_6_12_read_the_message_string() {
        for version in ["6.1", "6.12"] {
            let plan = plan(&debian(version), None);
            let (slot, l) = chosen(&plan.checkpoints).layout.unwrap();
            assert_eq!(slot, TP_WRITE_CHECKPOINT);
            assert_eq!(
                (l.dev, l.reason, l.msg_loc, l.phase),
                (8, 12, 16, FIELD_ABSENT)
            );
        }
    }

    #[test]
    fn newer_kernels_use_the_folio_name_and_the_numeric_phase() {
        let view = KernelView {
            formats: formats!("synthetic": "f2fs_submit_folio_bio", "f2fs_write_checkpoint"),
            ..KernelView::default()
        };
        let plan = plan(&view, None);
        let reads = chosen(&plan.node_reads);
        assert_eq!(reads.variant, "f2fs_submit_folio_bio");
        assert_eq!(reads.layout.unwrap().1.type_, 52);
        let (_, cp) = chosen(&plan.checkpoints).layout.unwrap();
        assert_eq!((cp.phase, cp.msg_loc), (16, FIELD_ABSENT));
        assert!(plan.node_writes.chosen.is_none());
        assert_eq!(plan.missing().len(), 1);
        assert!(plan.missing()[0].contains("f2fs_submit_page_write"));
    }

    #[test]
    fn metadata_cache_kernels_count_node_reads_per_bio() {
        let mut view = debian("6.12");
        view.symbols.insert(
            "f2fs_submit_cache_read".into(),
            "f2fs_submit_cache_read".into(),
        );
        let plan = plan(&view, None);
        let reads = chosen(&plan.node_reads);
        assert_eq!(reads.variant, "f2fs_submit_read_bio");
        let (slot, l) = reads.layout.unwrap();
        assert_eq!(slot, TP_SUBMIT_READ_BIO);
        assert_eq!(
            (l.dev, l.op, l.op_flags, l.type_, l.size),
            (8, 16, 20, 24, 40)
        );
        assert_eq!(reads.attachments[0].program, PROG_READ_BIO);
    }

    #[test]
    fn without_tracepoints_kprobes_take_over_and_say_what_they_lack() {
        let mut view = debian("6.1");
        view.formats.clear();
        let plan = plan(&view, None);
        let reads = chosen(&plan.node_reads);
        assert_eq!(reads.variant, "kprobe read_node_page");
        let targets: Vec<String> = reads
            .attachments
            .iter()
            .map(|a| a.target.to_string())
            .collect();
        assert_eq!(
            targets,
            [
                "kprobe read_node_page",
                "kretprobe read_node_page",
                "kprobe f2fs_ra_node_page",
                "kretprobe f2fs_ra_node_page"
            ]
        );
        assert!(reads.caveat.as_deref().unwrap().contains("dev 0"));
        assert_eq!(plan.rahead_bit, 19);
        assert_eq!(
            plan.missing().len(),
            2,
            "writes and checkpoints need their tracepoints"
        );
    }

    #[test]
    fn nothing_available_names_every_reason() {
        let plan = plan(&KernelView::default(), None);
        assert!(plan.node_reads.chosen.is_none());
        let why = plan.node_reads.rejected.join("\n");
        assert!(
            why.contains("f2fs_submit_page_bio not in this kernel"),
            "{why}"
        );
        assert!(why.contains("kprobes not available"), "{why}");
        assert!(plan.render().contains("node_reads   not available"));
    }

    #[test]
    fn a_forced_variant_is_the_only_one_tried() {
        let view = debian("6.1");
        let kprobe = plan(&view, Some(NodeReadVariant::Kprobe));
        assert_eq!(chosen(&kprobe.node_reads).variant, "kprobe read_node_page");
        let read_bio = plan(&view, Some(NodeReadVariant::ReadBio));
        assert_eq!(chosen(&read_bio.node_reads).variant, "f2fs_submit_read_bio");
        let folio = plan(&view, Some(NodeReadVariant::FolioBio));
        assert!(folio.node_reads.chosen.is_none());
        assert_eq!(folio.node_reads.rejected.len(), 1);
    }

    #[test]
    fn a_field_of_the_wrong_size_is_refused() {
        let text = include_str!("../../../tests/data/formats/6.1/format_f2fs_submit_page_bio.txt")
            .replace(
                "field:int type;\toffset:52;\tsize:4;",
                "field:short type;\toffset:52;\tsize:2;",
            );
        let err = page_bio_layout(&Format::parse(&text).unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains("`type` is 2 bytes"), "{err:#}");
    }

    #[test]
    fn format_parser_reads_the_reference_files() {
        let f = Format::parse(include_str!(
            "../../../tests/data/formats/6.12/format_f2fs_write_checkpoint.txt"
        ))
        .unwrap();
        assert_eq!(
            (f.name.as_str(), f.id),
            ("f2fs_write_checkpoint", Some(1528))
        );
        assert_eq!(f.fields.len(), 7);
        let msg = f.field("dest_msg").unwrap();
        assert!(msg.is_data_loc());
        assert_eq!((msg.offset, msg.size, msg.signed), (16, 4, false));
        let f = Format::parse(include_str!(
            "../../../tests/data/formats/6.1/format_f2fs_iostat.txt"
        ))
        .unwrap();
        assert_eq!(f.field("fs_nrio").unwrap().offset, 208);
        let bio = Format::parse(include_str!(
            "../../../tests/data/formats/6.1/format_f2fs_submit_read_bio.txt"
        ))
        .unwrap();
        assert_eq!(bio.field("sector").unwrap().c_type, "sector_t");
        assert_eq!(
            (bio.flag_bit("R"), bio.flag_bit("S"), bio.flag_bit("FUA")),
            (Some(19), Some(11), Some(17))
        );
        assert_eq!(bio.flag_bit("nope"), None);
    }
}
