//! `cargo xtask dist [--arch aarch64|x86_64]`: a release `nodescope`, statically linked, for
//! one architecture, with its eBPF object compiled for that architecture's kprobe registers.
//!
//! Built with Debian's /usr/bin/cargo and /usr/bin/rustc (1.96): for aarch64 the only std at
//! hand is Debian's `libstd-rust-web-dev:arm64`, and rlibs of another rustc are refused. The
//! eBPF object follows the target: aya-build 0.2.0 passes `--cfg bpf_target_arch` from the
//! build script's `CARGO_CFG_TARGET_ARCH`, which is the architecture of `--target`.
//! Each architecture has its own target directory (target/dist-<arch>), so a dist build
//! leaves the normal build's artifacts alone.
use std::{path::PathBuf, process::Command};

use anyhow::{bail, Context as _, Result};
pub use vm_harness::Arch;

use crate::{setup, util};

fn triple(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "x86_64-unknown-linux-gnu",
        Arch::Aarch64 => "aarch64-unknown-linux-gnu",
    }
}

/// The C compiler that links for this target (cargo's default `cc` for the host).
fn linker(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "cc",
        Arch::Aarch64 => "aarch64-linux-gnu-gcc",
    }
}

pub fn run(arch: Option<&str>) -> Result<()> {
    let arch = Arch::parse(arch)?;
    let binary = build(arch)?;
    let size = std::fs::metadata(&binary)
        .with_context(|| format!("reading {}", binary.display()))?
        .len();
    let described = util::output("file", &["-b", binary.to_str().context("non-UTF-8 path")?])
        .unwrap_or_else(|| "(file(1) not available)".into());
    println!("{}", binary.display());
    println!(
        "size: {size} bytes ({:.1} MiB)",
        size as f64 / (1 << 20) as f64
    );
    println!("file: {}", described.trim());
    Ok(())
}

/// Build the static release binary for `arch`; its path.
pub fn build(arch: Arch) -> Result<PathBuf> {
    setup::run()?;
    if arch == Arch::Aarch64 {
        setup::ensure_arm64_toolchain()?;
    }
    let target_dir = util::workspace_root()
        .join("target")
        .join(format!("dist-{}", arch.name()));
    let triple = triple(arch);
    let env_triple = triple.to_uppercase().replace('-', "_");
    let started = std::time::Instant::now();
    util::run(
        Command::new("/usr/bin/cargo")
            .current_dir(util::workspace_root())
            .args(["build", "--release", "--locked", "--package", "tracer-user"])
            .args(["--bin", "nodescope", "--target", triple, "--target-dir"])
            .arg(&target_dir)
            // The rustup proxies (first on PATH) would pick rustup's rustc, whose version
            // differs from Debian's std for the target.
            .env("RUSTC", "/usr/bin/rustc")
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CARGO_TARGET_DIR")
            .env(format!("CARGO_TARGET_{env_triple}_LINKER"), linker(arch))
            // Static: Android has no glibc, so a dynamic glibc binary does not start there.
            .env(
                format!("CARGO_TARGET_{env_triple}_RUSTFLAGS"),
                "-C target-feature=+crt-static",
            )
            .env(format!("CC_{}", triple.replace('-', "_")), linker(arch)),
    )
    .with_context(|| format!("building nodescope for {triple}"))?;
    eprintln!(
        "dist: built for {triple} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let binary = target_dir.join(triple).join("release/nodescope");
    if !binary.exists() {
        bail!("{} missing after the build", binary.display());
    }
    Ok(binary)
}
