//! Builds tracer-ebpf for bpfel-unknown-none (build/ebpf.rs) and leaves the object in OUT_DIR,
//! where `aya::include_bytes_aligned!` embeds it.
use std::{env, path::PathBuf};

use anyhow::Context as _;

// Shared with the bench's build script, which builds the same crate with its `bench` feature.
#[path = "build/ebpf.rs"]
mod ebpf;

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
    ebpf::build(&[])
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
