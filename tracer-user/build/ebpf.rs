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
