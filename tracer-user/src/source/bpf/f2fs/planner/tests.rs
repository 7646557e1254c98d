//! The planner on the format files of real kernels (tests/data/formats: exact copies of the
//! 6.1 and 6.12 files, plus synthetic newer variants), and on /proc/kallsyms text.
use tracer_common::FIELD_ABSENT;

use super::*;
use crate::source::bpf::discover::btf::{Param, Shape};

macro_rules! formats {
    ($dir:literal: $($name:literal),*) => {
        [$((
            $name.to_string(),
            include_str!(concat!("../../../../../tests/data/formats/", $dir, "/format_", $name, ".txt"))
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
        symbols: find_symbols(
            "0 t read_node_page\t[f2fs]\n0 t f2fs_ra_node_page\t[f2fs]\n\
             0 t f2fs_lookup_journal_in_cursum\t[f2fs]\n",
        ),
        unreadable: BTreeMap::new(),
        ..KernelView::default()
    }
}

/// Every node-read layout the project knows, as the planner sees each kernel: Debian's 6.1
/// and 6.12, the folio rename at 6.12's offsets (Android's trees, 6.14 .. 6.19, the variant
/// modules), and Debian's 7.3 and 7.2 (`ino` first: a 52-byte record).
pub(crate) fn known_layouts() -> Vec<(&'static str, KernelView)> {
    let newer = |formats| KernelView {
        formats,
        ..KernelView::default()
    };
    vec![
        ("6.1", debian("6.1")),
        ("6.12", debian("6.12")),
        (
            "folio at 6.12's offsets",
            newer(formats!("synthetic": "f2fs_submit_folio_bio")),
        ),
        (
            "7.3",
            newer(formats!("7.3": "f2fs_submit_folio_bio", "f2fs_submit_read_bio")),
        ),
        (
            "7.2",
            newer(formats!("7.2": "f2fs_submit_folio_bio", "f2fs_submit_read_bio")),
        ),
    ]
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

fn targets(choice: &Choice) -> Vec<String> {
    choice
        .attachments
        .iter()
        .map(|a| a.target.to_string())
        .collect()
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
fn newer_kernels_use_the_folio_names_and_the_numeric_phase() {
    let view = KernelView {
        formats: formats!("synthetic": "f2fs_submit_folio_bio", "f2fs_submit_folio_write",
            "f2fs_write_checkpoint"),
        ..KernelView::default()
    };
    let plan = plan(&view, None);
    let reads = chosen(&plan.node_reads);
    assert_eq!(reads.variant, "f2fs_submit_folio_bio");
    assert_eq!(reads.layout.unwrap().1.type_, 52);
    let (_, cp) = chosen(&plan.checkpoints).layout.unwrap();
    assert_eq!(
        (cp.phase, cp.msg_loc, cp.msg_ptr),
        (16, FIELD_ABSENT, FIELD_ABSENT)
    );
    for part in [&plan.node_writes, &plan.meta_writes] {
        let writes = chosen(part);
        assert_eq!(writes.variant, "f2fs_submit_folio_write", "{}", part.what);
        assert_eq!(
            writes.attachments[0].target.to_string(),
            "tracepoint f2fs:f2fs_submit_folio_write"
        );
        let (slot, l) = writes.layout.unwrap();
        assert_eq!(
            (slot, l.dev, l.index, l.type_),
            (TP_SUBMIT_PAGE_WRITE, 8, 24, 52)
        );
    }
    // Journal entries need a kprobe; this view has none.
    assert_eq!(plan.missing().len(), 1, "{:?}", plan.missing());
    assert!(plan.missing()[0].starts_with("journal: kprobes not available"));
}

#[test]
fn older_kernels_keep_the_page_write_name_and_say_the_folio_one_is_missing() {
    let plan = plan(&debian("6.12"), None);
    let writes = chosen(&plan.node_writes);
    assert_eq!(writes.variant, "f2fs_submit_page_write");
    assert_eq!(
        plan.node_writes.rejected,
        ["f2fs_submit_folio_write: tracepoint f2fs:f2fs_submit_folio_write not in this kernel"]
    );
}

/// 5.10 and 5.15 store the message's address (`char * msg`): the program reads through it.
#[test]
fn a_checkpoint_message_pointer_is_read_through() {
    let view = KernelView {
        formats: formats!("synthetic-5.10": "f2fs_write_checkpoint"),
        ..KernelView::default()
    };
    let plan = plan(&view, None);
    let (slot, l) = chosen(&plan.checkpoints).layout.unwrap();
    assert_eq!(slot, TP_WRITE_CHECKPOINT);
    assert_eq!(
        (l.dev, l.reason, l.msg_ptr, l.msg_loc, l.phase),
        (8, 12, 16, FIELD_ABSENT, FIELD_ABSENT)
    );
    // A 4-byte `char *` is not an address this program can read.
    let text = include_str!(
        "../../../../../tests/data/formats/synthetic-5.10/format_f2fs_write_checkpoint.txt"
    )
    .replace("offset:16;\tsize:8;", "offset:16;\tsize:4;");
    let err = checkpoint_layout(&Format::parse(&text).unwrap()).unwrap_err();
    assert!(
        format!("{err:#}").contains("neither a __data_loc string nor"),
        "{err:#}"
    );
}

fn journal_function(params: &[(&str, Shape)]) -> Function {
    Function {
        name: "f2fs_lookup_journal_in_cursum".into(),
        params: params
            .iter()
            .map(|(name, shape)| Param {
                name: name.to_string(),
                shape: shape.clone(),
            })
            .collect(),
        returns_signed: true,
        returns_bool: false,
    }
}

fn int() -> Shape {
    Shape::Int {
        size: 4,
        typedefs: Vec::new(),
        enumerators: Vec::new(),
    }
}

fn pointer_to(name: &str) -> Shape {
    Shape::Ptr(Some(name.into()))
}

#[test]
fn journal_arguments_come_from_btf_names_then_the_first_parameter() {
    let mut view = debian("6.12");
    let old = journal_function(&[
        ("journal", pointer_to("f2fs_journal")),
        ("type", int()),
        ("val", int()),
        ("alloc", int()),
    ]);
    let new = journal_function(&[
        ("sbi", pointer_to("f2fs_sb_info")),
        ("journal", pointer_to("f2fs_journal")),
        ("type", int()),
        ("val", int()),
        ("alloc", int()),
    ]);
    for (function, expected) in [
        (old, JournalArgs::WITHOUT_SBI),
        (new, JournalArgs::WITH_SBI),
    ] {
        view.signatures
            .insert(SYM_JOURNAL_IN_CURSUM.into(), function.clone());
        let plan = plan(&view, None);
        assert_eq!(plan.journal_args, expected, "{}", function.signature());
        let caveat = chosen(&plan.journal).caveat.clone().unwrap();
        assert!(
            caveat.contains(&format!("from BTF {}", function.signature())),
            "{caveat}"
        );
        // Without names (a BTF that dropped them), the first parameter's type tells.
        let unnamed: Vec<(&str, Shape)> = function
            .params
            .iter()
            .map(|p| ("", p.shape.clone()))
            .collect();
        view.signatures
            .insert(SYM_JOURNAL_IN_CURSUM.into(), journal_function(&unnamed));
        assert_eq!(plan_journal(&view).1, expected);
    }
    // Neither names nor a known first argument: refused, not guessed.
    view.signatures.insert(
        SYM_JOURNAL_IN_CURSUM.into(),
        journal_function(&[("", int()), ("", int())]),
    );
    let (part, _) = plan_journal(&view);
    assert!(part.chosen.is_none());
    assert!(
        part.rejected[0].contains("no type/val/alloc names"),
        "{:?}",
        part.rejected
    );
}

#[test]
fn without_btf_the_journal_positions_are_assumed_and_said_so() {
    let mut view = debian("6.1");
    view.no_btf = Some("no BTF (/sys/kernel/btf/vmlinux)".into());
    let plan = plan(&view, None);
    assert_eq!(plan.journal_args, JournalArgs::WITHOUT_SBI);
    let caveat = chosen(&plan.journal).caveat.clone().unwrap();
    assert_eq!(
        caveat,
        "type=arg1 val=arg2 alloc=arg3, assumed (no BTF (/sys/kernel/btf/vmlinux)): wrong from \
         6.18.13, where sbi comes first; device unknown (dev 0)"
    );
}

/// 6.16 renamed read_node_page to read_node_folio (same arguments and returns).
#[test]
fn the_kprobe_fallback_finds_read_node_folio() {
    let mut view = debian("6.12");
    view.formats.clear();
    view.symbols = find_symbols("0 t read_node_folio\t[f2fs]\n0 t f2fs_ra_node_page\t[f2fs]\n");
    let plan = plan(&view, None);
    let reads = chosen(&plan.node_reads);
    assert_eq!(reads.variant, "kprobe read_node_folio");
    let targets = targets(reads);
    assert_eq!(
        &targets[..2],
        ["kprobe read_node_folio", "kretprobe read_node_folio"]
    );
    view.symbols.clear();
    let plan = super::plan(&view, None);
    let why = plan.node_reads.rejected.join("\n");
    assert!(
        why.contains("none of read_node_page, read_node_folio in /proc/kallsyms"),
        "{why}"
    );
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
    let targets = targets(reads);
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
        3,
        "writes, checkpoints and metadata writes need their tracepoints"
    );
    assert_eq!(
        chosen(&plan.journal).attachments[0].target.to_string(),
        "kprobe f2fs_lookup_journal_in_cursum"
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
    let text =
        include_str!("../../../../../tests/data/formats/6.1/format_f2fs_submit_page_bio.txt")
            .replace(
                "field:int type;\toffset:52;\tsize:4;",
                "field:short type;\toffset:52;\tsize:2;",
            );
    let err = page_bio_layout(&Format::parse(&text).unwrap()).unwrap_err();
    assert!(format!("{err:#}").contains("`type` is 2 bytes"), "{err:#}");
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

/// A variant module's files as the VM phase saved them (tests/data/variants/<name>: its
/// tracepoint format files and its f2fs lines of /proc/kallsyms; test/vm/src/variants_phase.rs
/// compares them with the guest's on every run).
fn variant(name: &str) -> KernelView {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/variants")
        .join(name);
    let mut formats = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "format") {
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            formats.insert(stem, std::fs::read_to_string(&path).unwrap());
        }
    }
    let kallsyms = std::fs::read_to_string(dir.join("kallsyms.txt")).unwrap();
    KernelView {
        formats,
        kprobes: true,
        symbols: find_symbols(&kallsyms),
        ..KernelView::default()
    }
}

/// What the planner chose for each part, by variant name.
fn chosen_variants(plan: &Plan) -> Vec<String> {
    plan.parts()
        .iter()
        .map(|p| format!("{}={}", p.what, chosen(p).variant))
        .collect()
}

#[test]
fn each_variant_modules_files_get_the_variant_they_need() {
    let cases = [
        (
            "6.12-folio",
            "f2fs_submit_folio_bio",
            "f2fs_submit_folio_write",
        ),
        (
            "6.12-node-folio",
            "f2fs_submit_page_bio",
            "f2fs_submit_page_write",
        ),
        (
            "6.12-cp-charmsg",
            "f2fs_submit_page_bio",
            "f2fs_submit_page_write",
        ),
        (
            "6.12-journal-sbi",
            "f2fs_submit_page_bio",
            "f2fs_submit_page_write",
        ),
    ];
    for (name, reads, writes) in cases {
        let plan = plan(&variant(name), None);
        assert_eq!(
            chosen_variants(&plan),
            [
                format!("node_reads={reads}"),
                format!("node_writes={writes}"),
                "checkpoints=f2fs_write_checkpoint".into(),
                format!("meta_writes={writes}"),
                "journal=kprobe f2fs_lookup_journal_in_cursum".into(),
            ],
            "{name}"
        );
        let (_, cp) = chosen(&plan.checkpoints).layout.unwrap();
        let expected = match name {
            "6.12-cp-charmsg" => (FIELD_ABSENT, 16),
            _ => (16, FIELD_ABSENT),
        };
        assert_eq!((cp.msg_loc, cp.msg_ptr), expected, "{name}");
        assert!(plan.missing().is_empty(), "{name}: {:?}", plan.missing());
    }
}

#[test]
fn the_node_folio_variants_kprobe_fallback_is_read_node_folio() {
    let plan = plan(&variant("6.12-node-folio"), Some(NodeReadVariant::Kprobe));
    assert_eq!(chosen(&plan.node_reads).variant, "kprobe read_node_folio");
}
