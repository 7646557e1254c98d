//! Builds tracer-ebpf for bpfel-unknown-none and leaves the object in OUT_DIR, where
//! `aya::include_bytes_aligned!` embeds it. The toolchain is the one
//! docs/ARCHITECTURE.md describes: Debian's rustc (with a prebuilt `core` for the BPF target)
//! and bpf-linker, with rustup kept off PATH so that aya-build does not try
//! `rustup run nightly ... -Z build-std`.
use std::{
    env,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=BPF_LINKER");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    bake_object_arch()?;
    // cargo fuzz builds with `--cfg fuzzing`: the fuzz targets parse recordings, manifests,
    // package lists and images and never load a program, so they embed no object (an empty
    // one, which aya refuses to load), and the build skips the inner eBPF build (over a
    // minute of a clean fuzz build).
    if env::var_os("CARGO_CFG_FUZZING").is_some() {
        std::fs::write(out_dir.join("tracer"), b"").context("writing the empty object")?;
        return Ok(());
    }
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

/// Tell the binary which `bpf_target_arch` its object's kprobe and uprobe code reads registers
/// for (source/bpf/arch.rs refuses to attach them on another architecture). aya-build 0.2.0
/// passes `--cfg bpf_target_arch` from this build script's CARGO_CFG_TARGET_ARCH (the target of
/// the build, not the host), with riscv64* folded to riscv64; AYA_BPF_TARGET_ARCH only matters
/// to aya-ebpf when that cfg is absent, which aya-build never leaves it.
fn bake_object_arch() -> anyhow::Result<()> {
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").context("CARGO_CFG_TARGET_ARCH not set")?;
    let bpf_target_arch = if target_arch.starts_with("riscv64") {
        "riscv64"
    } else {
        target_arch.as_str()
    };
    println!("cargo:rustc-env=NODESCOPE_BPF_TARGET_ARCH={bpf_target_arch}");
    Ok(())
}
