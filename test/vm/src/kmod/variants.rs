//! Variant modules (issue 30): Debian 6.12's stock F2FS reshaped, one small patch each
//! (kmod/patches/6.12-variants/<name>.patch), the way another kernel family shapes nodescope's
//! attach points. Each is built and cached like the stock and patched modules; here the build
//! is also checked for the symbols the shape must have (and must not), so that a function the
//! compiler inlined or folded is caught before a VM boots (vm/variants_phase.rs runs them).
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};

use super::{module::Module, tree::Tree};
use crate::util;

/// The kernel whose stock F2FS the variants patch.
pub const LABEL: &str = "6.12";

/// One variant: its patch, what it imitates, and what the VM test needs to know about it
/// (independently of nodescope: these are the patch's facts, the test's ground truth).
pub struct Variant {
    /// `6.12-folio`: the verdict line's name, and the patch's file stem.
    pub name: &'static str,
    /// The kernel family whose shape it has.
    pub imitates: &'static str,
    /// Symbols the module must define (nm), real functions a kprobe can attach to.
    pub present: &'static [&'static str],
    /// Symbols it must not have (renamed away).
    pub absent: &'static [&'static str],
    /// The tracepoints it defines for node reads and writes.
    pub read_tracepoint: &'static str,
    pub write_tracepoint: &'static str,
    /// The checkpoint reason's field as f2fs_write_checkpoint's format file declares it.
    pub checkpoint_field: &'static str,
    /// Every node lookup taking (sbi, nid) as arguments 0 and 1: the kernel's own count of
    /// lookups is the sum of these functions' calls.
    pub lookups: &'static [&'static str],
    /// x86_64 registers of f2fs_lookup_journal_in_cursum's `type` and `alloc` arguments.
    pub journal_regs: (&'static str, &'static str),
    /// The variant renames the node read function: the VM test also streams node reads with
    /// the kprobe fallback.
    pub kprobe_reads: bool,
}

const STOCK_LOOKUPS: &[&str] = &["f2fs_get_node_page"];
/// 6.1+'s copy of the string (`__string(dest_msg, msg)`).
const STOCK_CHECKPOINT: &str = "__data_loc char[] dest_msg;";
/// (journal, type, val, alloc): type in the second argument register, alloc in the fourth.
const STOCK_JOURNAL: (&str, &str) = ("%si", "%cx");

pub const VARIANTS: [Variant; 4] = [
    Variant {
        name: "6.12-folio",
        imitates: "mainline 6.14+ (87e2a15bc008), GKI android15-6.6 and android16-6.12",
        present: &["read_node_page", "f2fs_get_node_page"],
        absent: &[],
        read_tracepoint: "f2fs_submit_folio_bio",
        write_tracepoint: "f2fs_submit_folio_write",
        checkpoint_field: STOCK_CHECKPOINT,
        lookups: STOCK_LOOKUPS,
        journal_regs: STOCK_JOURNAL,
        kprobe_reads: false,
    },
    Variant {
        name: "6.12-node-folio",
        imitates: "mainline 6.15/6.16+ (f2fs-for-6.15, f2fs-for-6.16)",
        present: &[
            "read_node_folio",
            "f2fs_get_node_folio",
            "f2fs_get_inode_folio",
            "f2fs_get_xnode_folio",
            "f2fs_ra_node_page",
        ],
        absent: &["read_node_page", "f2fs_get_node_page"],
        read_tracepoint: "f2fs_submit_page_bio",
        write_tracepoint: "f2fs_submit_page_write",
        checkpoint_field: STOCK_CHECKPOINT,
        lookups: &[
            "f2fs_get_node_folio",
            "f2fs_get_inode_folio",
            "f2fs_get_xnode_folio",
        ],
        journal_regs: STOCK_JOURNAL,
        kprobe_reads: true,
    },
    Variant {
        name: "6.12-cp-charmsg",
        imitates: "upstream 5.10 and 5.15 (before 0db18eec0d9a)",
        present: &["read_node_page", "f2fs_get_node_page"],
        absent: &[],
        read_tracepoint: "f2fs_submit_page_bio",
        write_tracepoint: "f2fs_submit_page_write",
        checkpoint_field: "const char * msg;",
        lookups: STOCK_LOOKUPS,
        journal_regs: STOCK_JOURNAL,
        kprobe_reads: false,
    },
    Variant {
        name: "6.12-journal-sbi",
        imitates: "mainline 6.19 and 6.18.13+ (e48e16f3e37f)",
        present: &["f2fs_lookup_journal_in_cursum", "f2fs_get_node_page"],
        absent: &[],
        read_tracepoint: "f2fs_submit_page_bio",
        write_tracepoint: "f2fs_submit_page_write",
        checkpoint_field: STOCK_CHECKPOINT,
        lookups: STOCK_LOOKUPS,
        // (sbi, journal, type, val, alloc): type third, alloc fifth.
        journal_regs: ("%dx", "%r8"),
        kprobe_reads: false,
    },
];

impl Variant {
    /// `folio` for `6.12-folio`: the module's cache and guest name.
    pub fn short(&self) -> &'static str {
        self.name
            .strip_prefix(LABEL)
            .and_then(|s| s.strip_prefix('-'))
            .unwrap_or(self.name)
    }

    pub fn patch(&self) -> PathBuf {
        util::workspace_root()
            .join("kmod/patches")
            .join(format!("{LABEL}-variants"))
            .join(format!("{}.patch", self.name))
    }
}

/// Every variant's module, built or found in the cache, each checked for its symbols.
pub fn build(tree: &Tree) -> Result<Vec<(&'static Variant, Module)>> {
    if tree.label != LABEL {
        bail!(
            "the variant modules patch {LABEL}'s F2FS, not {}",
            tree.label
        );
    }
    let mut built = Vec::new();
    for variant in &VARIANTS {
        let module = tree.build_patches(variant.short(), &[variant.patch()])?;
        check_symbols(variant, &module)?;
        built.push((variant, module));
    }
    Ok(built)
}

/// `nm` of the module: (kind, name) of every defined symbol (`T`, `t`, `D`, `r`, ...).
pub(super) fn symbols(module: &Module) -> Result<Vec<(String, String)>> {
    let path = module.ko.to_str().context("module path is not UTF-8")?;
    let nm = util::output("nm", &[path]).with_context(|| format!("nm {path}"))?;
    Ok(nm
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, kind, name] => Some((kind.to_string(), name.to_string())),
            _ => None,
        })
        .collect())
}

/// The module's functions (nm t/T).
pub(super) fn functions(module: &Module) -> Result<Vec<String>> {
    Ok(symbols(module)?
        .into_iter()
        .filter(|(kind, _)| kind.eq_ignore_ascii_case("t"))
        .map(|(_, name)| name)
        .collect())
}

/// `nm` of the module: every `present` symbol a function (t/T), no `absent` one.
fn check_symbols(variant: &Variant, module: &Module) -> Result<()> {
    let path = module.ko.display();
    let functions = functions(module)?;
    let has = |name: &str| functions.iter().any(|f| f == name);
    for want in variant.present {
        if !has(want) {
            bail!(
                "{}: {path} has no function {want} (inlined or renamed?)",
                variant.name
            );
        }
    }
    for gone in variant.absent {
        if has(gone) {
            bail!("{}: {path} still has {gone}", variant.name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_its_patch_and_a_short_name() {
        for variant in &VARIANTS {
            assert!(variant.patch().is_file(), "{}", variant.patch().display());
            assert!(!variant.short().starts_with(LABEL), "{}", variant.name);
            assert!(!variant.lookups.is_empty());
        }
        assert_eq!(VARIANTS[1].short(), "node-folio");
    }
}
