//! `cargo xtask kmod [--kernel 6.12|6.1] [--patches DIR] [--checkpatch] [--variants]`: F2FS
//! built out of tree for the very Debian kernel the VM test boots, twice: stock (no patches)
//! and patched (kmod/patches/<label>/*.patch, or --patches), so that a test can tell the
//! patch's effect from the build's; with `--variants` also the four variant modules of
//! variants.rs and the two foreign variants of foreign.rs, the reference module without its
//! tracepoints and also renamed (6.12 only; `cargo xtask vm-variants` builds them itself). Nothing is installed: Debian's headers, kbuild and source packages are
//! downloaded and unpacked under target/vm-cache (tree.rs); each module is cached by a hash of
//! what went into it (module.rs). The facts behind this are in the steering repo's shared/notes/kmod.md.
mod checkpatch;
pub mod foreign;
mod module;
mod tree;
pub mod variants;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use module::patch_files;
pub use module::Module;
pub use tree::{prepare, Tree};

use crate::util;

/// Both modules of one kernel, and the trees they were built from.
pub struct Built {
    /// The kernel release the modules are for, e.g. `6.12.117+deb12-amd64`.
    pub release: String,
    pub stock: Module,
    /// None when there were no patches (the patched build is skipped).
    pub patched: Option<Module>,
    /// The unpacked headers (`make -C` there), with vmlinux (BTF only).
    pub headers: PathBuf,
    /// The extracted linux-source dir: fs/f2fs, the scripts checkpatch needs, the sysfs ABI doc.
    pub source_tree: PathBuf,
}

/// The stock module and, when `patches` (default: kmod/patches/<label>) holds patches, the
/// patched one, for the kernel `label` (6.1 or 6.12).
pub fn build(label: &str, patches: Option<&Path>) -> Result<Built> {
    build_on(&prepare(label)?, &patch_dir(label, patches))
}

/// The variant and foreign modules (variants.rs, foreign.rs) built into the cache, for a test
/// run to start beside another phase's VM: their phases then find them built (six builds of 18
/// to 25 s each, at nice 19 like every build, on a core the VM leaves mostly idle).
pub fn build_phase_modules() -> Result<()> {
    let tree = prepare(variants::LABEL)?;
    variants::build(&tree)?;
    foreign::build(&prepare(foreign::LABEL)?)?;
    Ok(())
}

fn build_on(tree: &Tree, dir: &Path) -> Result<Built> {
    let stock = tree.build_variant("stock", None)?;
    let patched = if patch_files(dir)?.is_empty() {
        eprintln!(
            "kmod {}: no patches in {}: the patched build is skipped",
            tree.label,
            dir.display()
        );
        None
    } else {
        Some(tree.build_variant("patched", Some(dir))?)
    };
    Ok(Built {
        release: tree.release.clone(),
        stock,
        patched,
        headers: tree.headers.clone(),
        source_tree: tree.source.clone(),
    })
}

/// The CLI: build (or find cached) both modules and print one line each; with `checkpatch`,
/// check the patches with the tree's checkpatch.pl too.
pub fn run(
    label: &str,
    patches: Option<&Path>,
    checkpatch: bool,
    with_variants: bool,
) -> Result<()> {
    let dir = patch_dir(label, patches);
    if patches.is_some() && !dir.is_dir() {
        bail!("--patches {}: no such directory", dir.display());
    }
    if with_variants && label != variants::LABEL {
        bail!(
            "--variants: the variant modules patch {}'s F2FS",
            variants::LABEL
        );
    }
    let tree = prepare(label)?;
    let built = build_on(&tree, &dir)?;
    println!(
        "kmod {label}: release {} (vermagic {:?}), headers {}, source {}",
        built.release,
        built.stock.vermagic,
        built.headers.display(),
        built.source_tree.display()
    );
    println!("{}", built.stock.summary(label, "stock"));
    if let Some(patched) = &built.patched {
        println!("{}", patched.summary(label, "patched"));
    }
    let mut checked = patch_files(&dir)?;
    if with_variants {
        for (variant, module) in variants::build(&tree)? {
            println!("{}", module.summary(label, variant.short()));
            checked.push(variant.patch());
        }
        for (foreign, module) in foreign::build(&tree)? {
            let added = foreign::added_functions(&module, &built.stock)?;
            println!(
                "{} counters {} {} functions out of line",
                module.summary(label, foreign.short()),
                foreign.counters_file,
                added.len()
            );
            checked.push(foreign.own_patch());
        }
    }
    if checkpatch {
        let errors = checkpatch::run(&built.source_tree, &checked)?;
        if errors > 0 {
            bail!("checkpatch found {errors} error(s)");
        }
    }
    Ok(())
}

/// `patches`, else the repository's kmod/patches/<label>.
pub fn patch_dir(label: &str, patches: Option<&Path>) -> PathBuf {
    patches.map_or_else(
        || util::workspace_root().join("kmod/patches").join(label),
        Path::to_path_buf,
    )
}
