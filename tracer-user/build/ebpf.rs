//! Building tracer-ebpf for bpfel-unknown-none into OUT_DIR (object `tracer`), shared by
//! tracer-user's build script (the product's programs) and the bench's (the same crate with
//! its `bench` feature: the ring-buffer benchmark's producer, never in the product). The
//! toolchain is the one docs/ARCHITECTURE.md describes: Debian's rustc (with a prebuilt `core`
//! for the BPF target) and bpf-linker, with rustup kept off PATH so that aya-build does not
//! try `rustup run nightly ... -Z build-std`.
use std::{
    env,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};

/// Build tracer-ebpf with `features` into OUT_DIR.
pub fn build(features: &[&str]) -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let linker = find_bpf_linker()?;
    let tool_dir = out_dir.join("bpf-tools");
    std::fs::create_dir_all(&tool_dir).context("creating bpf-tools dir")?;
    let link = tool_dir.join("bpf-linker");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&linker, &link)
        .with_context(|| format!("linking {} into {}", linker.display(), tool_dir.display()))?;
    if !Path::new("/usr/bin/rustc").exists()
        || !Path::new("/usr/lib/rustlib/bpfel-unknown-none").exists()
    {
        bail!(
            "the eBPF toolchain is missing (Debian's rustc-web and libstd-rust-web-dev-bpf): \
             run `cargo xtask setup` first"
        );
    }

    // The inner cargo sees only bpf-linker and the system toolchain. Build scripts run in a
    // process of their own, single-threaded at this point, so changing our environment is safe.
    let path = format!("{}:/usr/bin:/bin", tool_dir.display());
    env::set_var("PATH", path);
    env::set_var("RUSTC_BOOTSTRAP", "aya_ebpf");
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTUP_HOME",
        "CARGO",
        "RUSTDOC",
        "RUSTFLAGS",
    ] {
        env::remove_var(var);
    }

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").context("manifest dir")?);
    // tracer-user and bench sit side by side in the workspace.
    let ebpf_dir = manifest_dir.join("../tracer-ebpf");
    let ebpf_dir = ebpf_dir.to_str().context("non-UTF-8 path")?;
    for source in ["src", "Cargo.toml", "build.rs"] {
        println!("cargo:rerun-if-changed={ebpf_dir}/{source}");
    }
    println!("cargo:rerun-if-changed=../tracer-common/src");
    share_target_dir(&out_dir, features)?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: ebpf_dir,
            features,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .context("building the eBPF programs (tracer-ebpf)")
}

/// aya-build builds in OUT_DIR/aya-build/target/tracer-ebpf, and every build script run has an
/// OUT_DIR of its own: clippy's, the tests', the bench's and the release build each built the
/// eBPF crate and its dependencies from nothing (five builds of 36 to 49 s in a clean-clone
/// test run of 2026-12-06). That directory is made a link to one directory per feature set
/// under the target directory, so the inner cargo finds what an earlier run built (its own
/// fingerprints decide what to rebuild, its lock serialises two runs). The inner build is
/// always `--release`, whatever the outer profile. One directory per feature set: the object
/// is copied out after the build, outside the inner cargo's lock.
fn share_target_dir(out_dir: &Path, features: &[&str]) -> anyhow::Result<()> {
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<package>-<hash>/out.
    let Some(shared_root) = out_dir.ancestors().nth(4) else {
        return Ok(());
    };
    let key = if features.is_empty() {
        "default".to_string()
    } else {
        features.join("+")
    };
    let shared = shared_root.join("ebpf-target").join(key);
    std::fs::create_dir_all(&shared).with_context(|| format!("creating {}", shared.display()))?;
    let parent = out_dir.join("aya-build/target");
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let link = parent.join("tracer-ebpf");
    match std::fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if std::fs::read_link(&link).ok().as_deref() == Some(shared.as_path()) {
                return Ok(());
            }
            std::fs::remove_file(&link)
        }
        // A directory of its own from before: its objects go, the shared ones count.
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&link),
        Ok(_) => std::fs::remove_file(&link),
        Err(_) => Ok(()),
    }
    .with_context(|| format!("removing {}", link.display()))?;
    std::os::unix::fs::symlink(&shared, &link)
        .with_context(|| format!("linking {} to {}", link.display(), shared.display()))
}

/// bpf-linker from $BPF_LINKER, PATH, or cargo's install directory.
fn find_bpf_linker() -> anyhow::Result<PathBuf> {
    if let Some(explicit) = env::var_os("BPF_LINKER") {
        return Ok(PathBuf::from(explicit));
    }
    if let Ok(found) = which::which("bpf-linker") {
        return Ok(found);
    }
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    if let Some(candidate) = cargo_home.map(|home| home.join("bin/bpf-linker")) {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!(
        "bpf-linker not found: run `cargo xtask setup` (it installs bpf-linker built for LLVM 22)"
    )
}
