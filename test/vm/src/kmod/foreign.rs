//! Foreign variants (issue 49): the reference module (kmod/patches/6.12/0001-*.patch) made to
//! look like the RFC's own patch would to a tool that knows only the reference: without its
//! tracepoints, then also under another author's names with its static functions inlined.
//! Each is the reference patch followed by one or two patches of
//! kmod/patches/6.12-variants/, built and cached like every module and checked with nm for
//! the symbols it must (and must not) have, so that nodescope's name-independent discovery is
//! tested against what the shape promises. The debugfs file names are here too: the counter
//! lines in them are the reference's, the ground truth the VM tests compare with.
use std::{collections::BTreeSet, path::PathBuf};

use anyhow::{bail, Result};

use super::{module::Module, tree::Tree, variants};
use crate::util;

/// The kernel whose F2FS they patch (the reference patch is 6.12's).
pub const LABEL: &str = variants::LABEL;

/// The reference patch, relative to kmod/patches/: every foreign variant applies it first.
pub const REFERENCE: &str = "6.12/0001-f2fs-retain-clean-node-blocks-in-a-compressed-cache.patch";

/// One foreign variant: its patches, its debugfs names, and what nm must (not) show.
#[allow(dead_code)] // The debugfs names and `imitates` are for the VM harness (issue 49).
pub struct Foreign {
    /// `6.12-foreign-notrace`: the verdict line's name, and its own patch's file stem.
    pub name: &'static str,
    /// What it imitates.
    pub imitates: &'static str,
    /// Patches relative to kmod/patches/, applied in this order to Debian's stock fs/f2fs
    /// (REFERENCE first; the last one is the variant's own).
    pub patches: &'static [&'static str],
    /// The counters file, relative to <debugfs>/f2fs/<dev>/ (its lines are the reference's:
    /// `inserts`, `raw_hits`, ... `attributed_bytes`, same names, order and meaning).
    pub counters_file: &'static str,
    /// The fault-injection control, relative to <debugfs>/f2fs/<dev>/ (`<fault> <count>`, the
    /// reference's fault words).
    pub fault_file: &'static str,
    /// The attributed-memory budget control (bytes, 0 = off), relative to <debugfs>/f2fs/<dev>/.
    pub budget_file: &'static str,
    /// printf format of the private slab caches' names, `<size>`, major, minor
    /// (/proc/slabinfo); the entry cache is separate and named in the patch.
    pub slot_slab_format: &'static str,
    /// Whether the module has the ten f2fs_node_cache_* tracepoints (never, here).
    pub tracepoints: bool,
    /// Functions the module must define (nm t/T): real, probe-able functions.
    pub present: &'static [&'static str],
    /// Symbols it must not have under this name, or as a GCC clone of it (`name.constprop.0`):
    /// inlined statics.
    pub absent: &'static [&'static str],
    /// No symbol may contain any of these where a word begins (at the start, or after a
    /// character that is not a letter or digit: `f2fs_inode_cachep` has no `node_cache`).
    pub absent_containing: &'static [&'static str],
}

pub const FOREIGN: [Foreign; 2] = [
    Foreign {
        name: "6.12-foreign-notrace",
        imitates: "the RFC's patch without tracepoints (its diffstat has no trace header)",
        patches: &[REFERENCE, "6.12-variants/6.12-foreign-notrace.patch"],
        counters_file: "node_cache",
        fault_file: "node_cache_fault",
        budget_file: "node_cache_budget",
        slot_slab_format: "f2fs_node_cache_%u-%u:%u",
        tracepoints: false,
        present: &[
            "f2fs_node_cache_restore",
            "f2fs_node_cache_insert",
            "f2fs_node_cache_access",
            "f2fs_node_cache_dirty",
            "f2fs_node_cache_forget",
            "f2fs_node_cache_alloc_failed",
            "f2fs_node_cache_second_chance",
            "f2fs_node_cache_shrink",
            "f2fs_node_cache_shrink_count",
            "f2fs_node_cache_hold_budget",
            "__f2fs_node_cache_drop",
            "f2fs_node_cache_release",
        ],
        absent: &[],
        absent_containing: &[
            "__tracepoint_f2fs_node_cache",
            "__traceiter_f2fs_node_cache",
            "tp_func_f2fs_node_cache",
            "bpf_trace_f2fs_node_cache",
            "event_f2fs_node_cache",
            "trace_raw_output_f2fs_node_cache",
            "print_fmt_f2fs_node_cache",
        ],
    },
    Foreign {
        name: "6.12-foreign-renamed",
        imitates: "the RFC's patch as another author wrote it: no tracepoints, other names \
                   (ncc), static functions inlined",
        patches: &[
            REFERENCE,
            "6.12-variants/6.12-foreign-notrace.patch",
            "6.12-variants/6.12-foreign-renamed.patch",
        ],
        counters_file: "ncc_stats",
        fault_file: "ncc_inject",
        budget_file: "ncc_limit",
        slot_slab_format: "f2fs_ncc_s%u-%u:%u",
        tracepoints: false,
        present: &[
            // The reference's f2fs_node_cache_restore, _insert, _access, _dirty, _forget,
            // _alloc_failed, _second_chance, _shrink, _shrink_count, _hold_budget,
            // __f2fs_node_cache_drop, _release: called from other files, so out of line.
            "f2fs_ncc_decompress",
            "f2fs_ncc_attach",
            "f2fs_ncc_touch",
            "f2fs_ncc_dirtied",
            "f2fs_ncc_detach",
            "f2fs_ncc_no_page",
            "f2fs_ncc_referenced_rotate",
            "f2fs_ncc_shrink",
            "f2fs_ncc_count",
            "f2fs_ncc_enforce_limit",
            "__f2fs_ncc_unhash",
            "f2fs_ncc_put_list",
            // The worker (node_cache_worker): its address is taken.
            "ncc_pack_workfn",
        ],
        absent: &[
            // node_cache_compress.c's statics (reference names in the README's table).
            "F2FS_NCC",
            "ncc_lane_for",
            "__ncc_lane_add",
            "__ncc_lane_del",
            "__ncc_free_blob",
            "__ncc_detach_ent",
            "ncc_attach_page",
            "__ncc_inj_take",
            "__ncc_inj_take_decompress",
            "ncc_inj_blob",
            "ncc_decompress_check",
            "ncc_inj_block",
            "__ncc_inj_take_pack",
            "__ncc_pack_done",
            "ncc_lz4_pack",
            "ncc_drop_packed_page",
            "ncc_pack_one",
            "__ncc_collect",
            "ncc_pack_sweep",
            "ncc_caches_create",
            "ncc_caches_destroy",
            "ncc_ctx_free",
            // node_cache_policy.c's
            "__ncc_weigh",
            "ncc_spread_excess",
            "__ncc_quotas",
            "__ncc_evict_lane",
            "ncc_evict",
            // the memcg headroom (issue 50)
            "ncc_memcg_tight",
            "ncc_tight_memcg",
            "__ncc_evict_memcg",
            "ncc_enforce_memcg",
            // debug.c's
            "ncc_status",
        ],
        absent_containing: &["node_cache"],
    },
];

impl Foreign {
    /// `foreign-notrace` for `6.12-foreign-notrace`: the module's cache and guest name.
    pub fn short(&self) -> &'static str {
        self.name
            .strip_prefix(LABEL)
            .and_then(|s| s.strip_prefix('-'))
            .unwrap_or(self.name)
    }

    /// Every patch, in the order the build applies them.
    pub fn patch_paths(&self) -> Vec<PathBuf> {
        let dir = util::workspace_root().join("kmod/patches");
        self.patches.iter().map(|p| dir.join(p)).collect()
    }

    /// The variant's own patch (the last one; checkpatch checks it).
    pub fn own_patch(&self) -> PathBuf {
        self.patch_paths()
            .pop()
            .expect("a foreign variant has patches")
    }
}

/// Every foreign variant's module, built or found in the cache, each checked for its symbols.
pub fn build(tree: &Tree) -> Result<Vec<(&'static Foreign, Module)>> {
    if tree.label != LABEL {
        bail!(
            "the foreign variants patch {LABEL}'s F2FS, not {}",
            tree.label
        );
    }
    let mut built = Vec::new();
    for foreign in &FOREIGN {
        let module = tree.build_patches(foreign.short(), &foreign.patch_paths())?;
        check_symbols(foreign, &module)?;
        built.push((foreign, module));
    }
    Ok(built)
}

/// The functions (nm t/T, `__pfx_` padding symbols left out) that `module` has and `stock`
/// has not: what the patches added and the compiler kept out of line, sorted.
pub fn added_functions(module: &Module, stock: &Module) -> Result<Vec<String>> {
    let theirs: BTreeSet<String> = variants::functions(stock)?.into_iter().collect();
    Ok(variants::functions(module)?
        .into_iter()
        .filter(|f| !f.starts_with("__pfx_") && !theirs.contains(f))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect())
}

fn check_symbols(foreign: &Foreign, module: &Module) -> Result<()> {
    let path = module.ko.display();
    let symbols = variants::symbols(module)?;
    let functions: BTreeSet<&str> = symbols
        .iter()
        .filter(|(kind, _)| kind.eq_ignore_ascii_case("t"))
        .map(|(_, name)| name.as_str())
        .collect();
    for want in foreign.present {
        if !functions.contains(want) {
            bail!(
                "{}: {path} has no function {want} (inlined or renamed?)",
                foreign.name
            );
        }
    }
    for (_, name) in &symbols {
        let base = name.split('.').next().unwrap_or(name);
        if foreign.absent.contains(&base) {
            bail!("{}: {path} has {name}: not inlined", foreign.name);
        }
        if let Some(part) = foreign
            .absent_containing
            .iter()
            .find(|part| contains_word(name, part))
        {
            bail!("{}: {path} has {name} (contains {part:?})", foreign.name);
        }
    }
    if !foreign.tracepoints
        && symbols
            .iter()
            .any(|(_, name)| name.starts_with("__tracepoint_f2fs_node_cache_"))
    {
        bail!("{}: {path} has node-cache tracepoints", foreign.name);
    }
    Ok(())
}

/// `part` in `name` at the start or after a character that is not alphanumeric.
fn contains_word(name: &str, part: &str) -> bool {
    name.match_indices(part).any(|(at, _)| {
        name[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_part_must_begin_a_word() {
        assert!(contains_word("f2fs_node_cache_restore", "node_cache"));
        assert!(contains_word("node_cache_worker", "node_cache"));
        assert!(contains_word(
            "__tracepoint_f2fs_node_cache_insert",
            "__tracepoint_f2fs_node_cache"
        ));
        assert!(contains_word("f2fs_inode_cachep.node_cache", "node_cache"));
        assert!(!contains_word("f2fs_inode_cachep", "node_cache"));
        assert!(!contains_word("f2fs_ncc_attach", "node_cache"));
    }

    #[test]
    fn every_foreign_variant_has_its_patches() {
        for foreign in &FOREIGN {
            assert_eq!(foreign.patches[0], REFERENCE, "{}", foreign.name);
            for patch in foreign.patch_paths() {
                assert!(patch.is_file(), "{}: {}", foreign.name, patch.display());
            }
            assert_eq!(
                foreign.own_patch().file_stem().unwrap().to_str(),
                Some(foreign.name)
            );
            assert!(!foreign.short().starts_with(LABEL), "{}", foreign.name);
            assert!(!foreign.present.is_empty());
        }
        assert_eq!(FOREIGN[1].short(), "foreign-renamed");
    }

    #[test]
    fn the_renamed_variant_keeps_no_reference_name() {
        let renamed = &FOREIGN[1];
        for name in renamed.present.iter().chain(renamed.absent) {
            assert!(!name.contains("node_cache"), "{name}");
        }
        for file in [
            renamed.counters_file,
            renamed.fault_file,
            renamed.budget_file,
        ] {
            assert!(!file.contains("node_cache"), "{file}");
        }
        // Each foreign variant's own patch is part of the next one's build.
        assert!(renamed.patches.contains(&FOREIGN[0].patches[1]));
    }
}
