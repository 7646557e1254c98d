//! The F2FS probe planner: which variant of node reads, node writes and checkpoints this kernel
//! offers, and where each of the programs in tracer-ebpf/src/f2fs.rs should attach.
//!
//! The planner is pure (a `KernelView` in, a `Plan` out) so that tests can feed it the format
//! files of other kernels; `KernelView::gather` reads the running kernel.
mod layout;
#[cfg(test)]
pub(crate) mod tests;

use std::{
    collections::BTreeMap,
    fmt::{self, Write as _},
    path::Path,
};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use tracer_common::{
    JournalArgs, TracepointLayout, TP_SUBMIT_PAGE_BIO, TP_SUBMIT_PAGE_WRITE, TP_SUBMIT_READ_BIO,
    TP_WRITE_CHECKPOINT,
};

use self::layout::{
    checkpoint_layout, page_bio_layout, page_write_layout, read_bio_layout, DEFAULT_RAHEAD_BIT,
};
use crate::{
    source::bpf::{
        discover::{btf::Function, kallsyms},
        format::Format,
    },
    system,
};

/// Program names in the eBPF object (tracer-ebpf/src/f2fs.rs); attach.rs's test loads each one.
pub(super) const PROG_PAGE_BIO: &str = "f2fs_node_read_page";
/// The same at the mainline layout's constant offsets: counts only, and only where the format
/// file says those offsets.
pub(super) const PROG_PAGE_BIO_FAST: &str = "f2fs_node_read_page_fast";
pub(super) const PROG_READ_BIO: &str = "f2fs_node_read_bio";
pub(super) const PROG_WRITE: &str = "f2fs_node_write";
pub(super) const PROG_CHECKPOINT: &str = "f2fs_checkpoint";
pub(super) const PROG_READ_NODE_ENTRY: &str = "f2fs_read_node_page_entry";
pub(super) const PROG_READ_NODE_RETURN: &str = "f2fs_read_node_page_return";
pub(super) const PROG_RA_ENTRY: &str = "f2fs_ra_node_page_entry";
pub(super) const PROG_RA_RETURN: &str = "f2fs_ra_node_page_return";
/// Checkpoint anatomy (tracer-ebpf/src/checkpoint_anatomy.rs).
pub(super) const PROG_META_WRITE: &str = "f2fs_meta_write";
pub(super) const PROG_JOURNAL_ENTRY: &str = "f2fs_journal_entry";

/// Kernel functions the planner looks for in /proc/kallsyms.
/// `read_node_page(page, op_flags)`, `read_node_folio(folio, op_flags)` from 6.16: same
/// arguments, same returns (0: a read went to disk, LOCKED_PAGE: cached).
const SYM_READ_NODE: [&str; 2] = ["read_node_page", "read_node_folio"];
const SYM_RA_NODE_PAGE: &str = "f2fs_ra_node_page";
/// Called with `alloc = 1` once per NAT or SIT entry a checkpoint puts into the journal.
const SYM_JOURNAL_IN_CURSUM: &str = "f2fs_lookup_journal_in_cursum";
/// Present only on kernels whose node reads go through the metadata cache (F2FS dev-test).
const SYM_METADATA_CACHE: [&str; 2] = ["f2fs_submit_cache_read", "read_node_cache"];

/// Node and metadata writes, newest name first: 6.14 renamed the page tracepoints after folios
/// (87e2a15bc008), and Android's 6.6 and 6.12 trees carry the rename.
const TP_NODE_WRITES: [&str; 2] = ["f2fs_submit_folio_write", "f2fs_submit_page_write"];

/// Where node reads are seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NodeReadVariant {
    /// Tracepoint f2fs_submit_page_bio (6.1 .. 6.12).
    PageBio,
    /// Tracepoint f2fs_submit_folio_bio (its newer name).
    FolioBio,
    /// Tracepoint f2fs_submit_read_bio (metadata-cache kernels; per bio).
    ReadBio,
    /// kprobe + kretprobe on read_node_page or read_node_folio (and f2fs_ra_node_page); no
    /// device number.
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
            None => f.write_str("kprobe read_node_page/read_node_folio"),
        }
    }
}

/// What the running kernel offers, as far as the planner cares.
#[derive(Clone, Debug, Default)]
pub(crate) struct KernelView {
    /// F2FS tracepoint name -> its format file's text.
    pub formats: BTreeMap<String, String>,
    pub kprobes: bool,
    /// Wanted function name -> the symbol as the kernel names it (e.g. `read_node_page.isra.0`).
    pub symbols: BTreeMap<String, String>,
    /// Tracepoints that exist but whose format file could not be read, and why (not root).
    pub unreadable: BTreeMap<String, String>,
    /// BTF's signatures of the wanted functions (base name -> function), where the kernel has
    /// BTF: argument positions come from there.
    pub signatures: BTreeMap<String, Function>,
    /// Why `signatures` is empty, when no BTF could be read.
    pub no_btf: Option<String>,
}

impl KernelView {
    /// Read the format files under `tracefs` and the F2FS symbols in /proc/kallsyms.
    pub(crate) fn gather(tracefs: Option<&Path>) -> KernelView {
        let (mut formats, mut unreadable) = (BTreeMap::new(), BTreeMap::new());
        if let Some(root) = tracefs {
            for name in system::F2FS_TRACEPOINT_VARIANTS {
                let path = root.join("events/f2fs").join(name).join("format");
                match read_format(&path) {
                    Ok(text) => drop(formats.insert(name.to_string(), text)),
                    Err(err) if path.parent().is_some_and(Path::is_dir) => {
                        unreadable.insert(name.to_string(), format!("{}: {err}", path.display()));
                    }
                    Err(_) => {}
                }
            }
        }
        let kallsyms = kallsyms::read(Path::new(kallsyms::PROC_KALLSYMS)).unwrap_or_default();
        let symbols = find_symbols(&kallsyms);
        let (signatures, no_btf) = match signatures(&symbols) {
            Ok(signatures) => (signatures, None),
            Err(err) => (BTreeMap::new(), Some(format!("{err:#}"))),
        };
        KernelView {
            formats,
            kprobes: system::has_kprobes(),
            symbols,
            unreadable,
            signatures,
            no_btf,
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

/// BTF's signatures of the found functions whose arguments the programs read by position.
fn signatures(symbols: &BTreeMap<String, String>) -> Result<BTreeMap<String, Function>> {
    if !symbols.contains_key(SYM_JOURNAL_IN_CURSUM) {
        return Ok(BTreeMap::new());
    }
    let shared = crate::source::bpf::discover::btf::this_kernel()?;
    let (_, btf) = &*shared;
    Ok(btf
        .function(SYM_JOURNAL_IN_CURSUM)
        .map(|f| (SYM_JOURNAL_IN_CURSUM.to_string(), f))
        .into_iter()
        .collect())
}

/// The wanted functions in /proc/kallsyms text; GCC may have renamed a static function to
/// `name.isra.0` and the like, which is the name kprobes need.
pub(crate) fn find_symbols(kallsyms: &str) -> BTreeMap<String, String> {
    let mut wanted = vec![SYM_RA_NODE_PAGE, SYM_JOURNAL_IN_CURSUM];
    wanted.extend(SYM_READ_NODE);
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

/// What a variant's rejection says when the kernel refused it (not the planner).
pub(crate) const REFUSED: &str = "refused by the kernel";

/// Where a program attaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Target {
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
pub(crate) struct Attachment {
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
pub(crate) struct Choice {
    pub variant: String,
    pub attachments: Vec<Attachment>,
    /// `TP_*` slot and the layout to write there, for tracepoint variants.
    #[serde(skip)]
    pub layout: Option<(u32, TracepointLayout)>,
    /// What this variant cannot tell, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
    /// It can only count node reads, not send them as events (the fast program).
    #[serde(skip)]
    pub counts_only: bool,
}

impl Choice {
    /// Where its programs attach, `a + b`.
    pub(crate) fn targets(&self) -> String {
        let targets: Vec<String> = self
            .attachments
            .iter()
            .map(|a| a.target.to_string())
            .collect();
        targets.join(" + ")
    }
}

/// One thing to observe: what was chosen, and why the others were not. A plan is a proposal
/// until it is attached (`attach::attach`, `probe`): a choice the kernel refuses is rejected
/// with the kernel's reason and the next of `fallbacks` takes its place.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Part {
    pub what: &'static str,
    pub chosen: Option<Choice>,
    pub rejected: Vec<String>,
    /// The usable variants after `chosen`, best first, tried when it is refused.
    #[serde(skip)]
    pub fallbacks: Vec<Choice>,
}

impl Part {
    /// From every usable choice, best first, and why the others are not usable.
    fn of(what: &'static str, mut usable: Vec<Choice>, rejected: Vec<String>) -> Part {
        let chosen = (!usable.is_empty()).then(|| usable.remove(0));
        Part {
            what,
            chosen,
            rejected,
            fallbacks: usable,
        }
    }

    /// The chosen variant was refused (`why`): the next one takes its place, if any.
    pub(crate) fn refuse_chosen(&mut self, why: &str) {
        if let Some(refused) = self.chosen.take() {
            let targets: Vec<String> = refused
                .attachments
                .iter()
                .map(|a| a.target.to_string())
                .collect();
            self.rejected.push(format!(
                "{} ({}): {why}",
                refused.variant,
                targets.join(" + ")
            ));
        }
        if !self.fallbacks.is_empty() {
            self.chosen = Some(self.fallbacks.remove(0));
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Plan {
    pub node_reads: Part,
    pub node_writes: Part,
    pub checkpoints: Part,
    /// Metadata block writes sorted by area (checkpoint anatomy).
    pub meta_writes: Part,
    /// NAT and SIT entries a checkpoint puts into the journal (checkpoint anatomy).
    pub journal: Part,
    /// REQ_RAHEAD's bit for the kprobe fallback.
    pub rahead_bit: u16,
    /// Where the journal kprobe finds its arguments.
    #[serde(skip)]
    pub journal_args: JournalArgs,
}

impl Plan {
    pub(crate) fn parts(&self) -> [&Part; 5] {
        [
            &self.node_reads,
            &self.node_writes,
            &self.checkpoints,
            &self.meta_writes,
            &self.journal,
        ]
    }

    pub(crate) fn parts_mut(&mut self) -> [&mut Part; 5] {
        [
            &mut self.node_reads,
            &mut self.node_writes,
            &mut self.checkpoints,
            &mut self.meta_writes,
            &mut self.journal,
        ]
    }

    /// Human-readable lines, one per part plus one per rejected alternative.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for part in self.parts() {
            match &part.chosen {
                Some(choice) => {
                    let _ = write!(out, "{:<12} {}", part.what, choice.targets());
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

    /// The variants the kernel refused when the plan was attached, per part.
    pub(crate) fn refusals(&self) -> Vec<(&'static str, &str)> {
        self.parts()
            .iter()
            .flat_map(|p| {
                p.rejected
                    .iter()
                    .filter(|why| why.contains(REFUSED))
                    .map(|why| (p.what, why.as_str()))
            })
            .collect()
    }

    /// What cannot be observed, in words (empty when everything has a variant).
    pub(crate) fn missing(&self) -> Vec<String> {
        self.parts()
            .iter()
            .filter(|p| p.chosen.is_none())
            .map(|p| format!("{}: {}", p.what, p.rejected.join("; ")))
            .collect()
    }
}

/// Plan for the running kernel: what `nodescope probe` can show without loading anything.
pub(crate) fn plan_this_kernel(prefer: Option<NodeReadVariant>) -> Plan {
    let tracefs = system::tracefs();
    plan(&KernelView::gather(tracefs.as_deref()), prefer)
}

/// Choose a variant for node reads, node writes and checkpoints. `prefer` forces one node-read
/// variant (for tests of the fallbacks); `None` picks the best this kernel has.
pub(crate) fn plan(view: &KernelView, prefer: Option<NodeReadVariant>) -> Plan {
    let rahead_bit = [
        "f2fs_submit_page_bio",
        "f2fs_submit_folio_bio",
        "f2fs_submit_read_bio",
    ]
    .iter()
    .filter_map(|tp| view.format(tp).ok()?.flag_bit("R"))
    .next()
    .unwrap_or(DEFAULT_RAHEAD_BIT);
    let (journal, journal_args) = plan_journal(view);
    Plan {
        node_reads: plan_node_reads(view, prefer),
        node_writes: plan_tracepoint(view, "node_writes", &TP_NODE_WRITES, |f| {
            Ok((TP_SUBMIT_PAGE_WRITE, page_write_layout(f)?, PROG_WRITE))
        }),
        checkpoints: plan_tracepoint(view, "checkpoints", &["f2fs_write_checkpoint"], |f| {
            Ok((TP_WRITE_CHECKPOINT, checkpoint_layout(f)?, PROG_CHECKPOINT))
        }),
        meta_writes: plan_tracepoint(view, "meta_writes", &TP_NODE_WRITES, |f| {
            Ok((TP_SUBMIT_PAGE_WRITE, page_write_layout(f)?, PROG_META_WRITE))
        }),
        journal,
        rahead_bit,
        journal_args,
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
    let mut usable = Vec::new();
    let mut rejected = Vec::new();
    for variant in order {
        match node_read_choices(view, variant) {
            Ok(choices) => usable.extend(choices),
            Err(err) => rejected.push(format!("{variant}: {err:#}")),
        }
    }
    Part::of("node_reads", usable, rejected)
}

/// The programs that can take node reads from `variant`, best first: on a page-bio tracepoint
/// of the mainline layout the constant-offset program (counts only), then the one that reads
/// the record where its format file says.
fn node_read_choices(view: &KernelView, variant: NodeReadVariant) -> Result<Vec<Choice>> {
    let Some(tracepoint) = variant.tracepoint() else {
        return Ok(vec![kprobe_choice(view)?]);
    };
    let format = view.format(tracepoint)?;
    if variant == NodeReadVariant::ReadBio {
        return Ok(vec![Choice {
            variant: variant.to_string(),
            attachments: vec![f2fs_tracepoint(PROG_READ_BIO, tracepoint)],
            layout: Some((TP_SUBMIT_READ_BIO, read_bio_layout(&format)?)),
            caveat: Some("no nid per read".into()),
            counts_only: false,
        }]);
    }
    let layout = page_bio_layout(&format)?;
    let choice = |program, counts_only| Choice {
        variant: variant.to_string(),
        attachments: vec![f2fs_tracepoint(program, tracepoint)],
        layout: Some((TP_SUBMIT_PAGE_BIO, layout)),
        caveat: None,
        counts_only,
    };
    let mut choices = Vec::new();
    // The fast program loads the mainline offsets from the record, up to `type`'s end: only
    // where this format puts every field there (and so the record reaches that far).
    if layout.is_mainline_page_bio() {
        choices.push(choice(PROG_PAGE_BIO_FAST, true));
    }
    choices.push(choice(PROG_PAGE_BIO, false));
    Ok(choices)
}

fn kprobe_choice(view: &KernelView) -> Result<Choice> {
    if !view.kprobes {
        bail!("kprobes not available (CONFIG_KPROBES)");
    }
    let function = SYM_READ_NODE
        .iter()
        .find_map(|name| view.symbols.get(*name))
        .with_context(|| format!("none of {} in /proc/kallsyms", SYM_READ_NODE.join(", ")))?;
    let mut attachments = vec![
        kprobe(PROG_READ_NODE_ENTRY, function, false),
        kprobe(PROG_READ_NODE_RETURN, function, true),
    ];
    if let Some(ra) = view.symbols.get(SYM_RA_NODE_PAGE) {
        attachments.push(kprobe(PROG_RA_ENTRY, ra, false));
        attachments.push(kprobe(PROG_RA_RETURN, ra, true));
    }
    Ok(Choice {
        variant: format!("kprobe {function}"),
        attachments,
        layout: None,
        caveat: Some("device unknown (dev 0), no nid".into()),
        counts_only: false,
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

/// The journal entries' kprobe; where the symbol is missing (inlined, renamed) the checkpoint
/// table's journal column stays 0, and `probe` and `stream` say why.
fn plan_journal(view: &KernelView) -> (Part, JournalArgs) {
    let found = if !view.kprobes {
        Err("kprobes not available (CONFIG_KPROBES)".to_string())
    } else {
        view.symbols
            .get(SYM_JOURNAL_IN_CURSUM)
            .ok_or_else(|| format!("{SYM_JOURNAL_IN_CURSUM} not in /proc/kallsyms"))
    };
    let found = found.and_then(|function| {
        let (args, how) = journal_args(view).map_err(|e| format!("{e:#}"))?;
        Ok((function, args, how))
    });
    match found {
        Ok((function, args, how)) => {
            let part = Part {
                what: "journal",
                chosen: Some(Choice {
                    variant: format!("kprobe {function}"),
                    attachments: vec![kprobe(PROG_JOURNAL_ENTRY, function, false)],
                    layout: None,
                    caveat: Some(format!(
                        "type=arg{} val=arg{} alloc=arg{}, {how}; device unknown (dev 0)",
                        args.type_, args.val, args.alloc
                    )),
                    counts_only: false,
                }),
                rejected: Vec::new(),
                fallbacks: Vec::new(),
            };
            (part, args)
        }
        Err(why) => {
            let part = Part {
                what: "journal",
                chosen: None,
                rejected: vec![format!("{why}: NAT/SIT journal entries are not counted")],
                fallbacks: Vec::new(),
            };
            (part, JournalArgs::WITHOUT_SBI)
        }
    }
}

/// Where f2fs_lookup_journal_in_cursum takes `type`, `val` and `alloc`, and how that is known:
/// from BTF's parameter names, else from its first parameter's type (6.18.13 put a
/// `struct f2fs_sb_info *` before the journal), else (no BTF) the positions of 5.10 .. 6.18.12.
fn journal_args(view: &KernelView) -> Result<(JournalArgs, String)> {
    let Some(function) = view.signatures.get(SYM_JOURNAL_IN_CURSUM) else {
        let why = view.no_btf.as_deref().unwrap_or("BTF does not describe it");
        return Ok((
            JournalArgs::WITHOUT_SBI,
            format!("assumed ({why}): wrong from 6.18.13, where sbi comes first"),
        ));
    };
    let position = |name: &str| {
        function
            .params
            .iter()
            .position(|p| p.name == name)
            .and_then(|at| u8::try_from(at).ok())
    };
    let signature = function.signature();
    if let (Some(type_), Some(val), Some(alloc)) =
        (position("type"), position("val"), position("alloc"))
    {
        return Ok((
            JournalArgs { type_, val, alloc },
            format!("from BTF {signature}"),
        ));
    }
    match function.params.first().map(|p| &p.shape) {
        Some(shape) if shape.points_to("f2fs_sb_info") => Ok((
            JournalArgs::WITH_SBI,
            format!("from BTF {signature}: sbi first"),
        )),
        Some(shape) if shape.points_to("f2fs_journal") => Ok((
            JournalArgs::WITHOUT_SBI,
            format!("from BTF {signature}: journal first"),
        )),
        _ => bail!("BTF's {signature} has no type/val/alloc names and no known first argument"),
    }
}

type LayoutFn = fn(&Format) -> Result<(u32, TracepointLayout, &'static str)>;

/// The first of `names` (newest first) this kernel has with a usable format; every one tried
/// and not used is named with why.
fn plan_tracepoint(
    view: &KernelView,
    what: &'static str,
    names: &[&str],
    layout: LayoutFn,
) -> Part {
    let mut usable = Vec::new();
    let mut rejected = Vec::new();
    for tp in names {
        let choice = view
            .format(tp)
            .and_then(|f| layout(&f))
            .map(|(slot, l, program)| Choice {
                variant: tp.to_string(),
                attachments: vec![f2fs_tracepoint(program, tp)],
                layout: Some((slot, l)),
                caveat: None,
                counts_only: false,
            });
        match choice {
            Ok(choice) => usable.push(choice),
            Err(err) => rejected.push(format!("{tp}: {err:#}")),
        }
    }
    Part::of(what, usable, rejected)
}

/// A tracepoint's format file: a regular file (a FIFO under a `--tracefs` is refused, never
/// waited on) of at most 64 KiB.
pub(crate) fn read_format(path: &Path) -> std::io::Result<String> {
    let bytes =
        tracer_common::files::read_regular(path, tracer_common::files::Symlinks::Follow, 64 << 10)?;
    String::from_utf8(bytes)
        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
}
