//! `cargo xtask setup`: install what is missing, say what, and do nothing when all is there.
use std::{path::PathBuf, process::Command};

use anyhow::{bail, Context as _, Result};

use crate::util::{self, output};

/// Debian packages the project needs, and why.
const APT_PACKAGES: [(&str, &str); 24] = [
    ("rustc-web", "rustc 1.96 on LLVM 22 for the eBPF build"),
    ("cargo-web", "cargo for the eBPF build"),
    (
        "libstd-rust-web-dev-bpf",
        "prebuilt core for bpfel-unknown-none",
    ),
    ("llvm-22-dev", "bpf-linker links against LLVM 22"),
    ("clang-22", "LLVM 22 toolchain for bpf-linker"),
    (
        "bpftool",
        "inspecting programs and maps; vm-bench reads run_time_ns/run_cnt with it",
    ),
    (
        "bpftrace",
        "vm-bench's yardstick: its per-event cost against nodescope's, in the guest",
    ),
    ("qemu-system-x86", "VM tests on Debian kernels with F2FS"),
    ("busybox-static", "the VM tests' initramfs"),
    (
        "f2fs-tools",
        "mkfs.f2fs and sload.f2fs for real F2FS images",
    ),
    ("xz-utils", "unpacking kernel modules"),
    ("tmux", "driving the terminal UI in tests"),
    (
        "liblz4-dev",
        "the C LZ4 library the benchmarks compare against",
    ),
    ("util-linux", "setpriv for the unprivileged probe test"),
    (
        "clang",
        "clang -g builds the BTF fixture of the probe --discover test",
    ),
    (
        "dwarves",
        "pahole -J turns the discover fixture's DWARF into BTF (and `xtask kmod`'s f2fs.ko's)",
    ),
    (
        "prometheus",
        "the test that scrapes nodescope's OpenMetrics endpoint",
    ),
    (
        "fonts-dejavu-core",
        "a TrueType font for the labels of the what-if picture (plotters)",
    ),
    (
        "make",
        "`xtask kmod`: kbuild builds the out-of-tree f2fs.ko",
    ),
    (
        "gcc-12",
        "`xtask kmod`: the compiler Debian's kernel headers name (x86_64-linux-gnu-gcc-12)",
    ),
    (
        "patch",
        "`xtask kmod`: applies the kernel patches to fs/f2fs",
    ),
    (
        "kmod",
        "`xtask kmod`: modinfo compares our f2fs.ko's vermagic with Debian's",
    ),
    (
        "binutils",
        "`xtask kmod`: strip --strip-debug, objcopy and readelf for the module's BTF",
    ),
    (
        "perl",
        "`xtask kmod --checkpatch`: the kernel's checkpatch.pl",
    ),
];

pub fn run() -> Result<()> {
    let missing = missing_packages();
    if !missing.is_empty() {
        install_packages(&missing)?;
    }
    ensure_bpf_linker()?;
    ensure_cargo_fuzz()?;
    ensure_perfetto_protos()?;
    Ok(())
}

/// The PyPI `perfetto` package: its protobuf classes (`perfetto_trace_pb2`) let
/// tracer-user/tests/perfetto.rs parse `nodescope export --perfetto` with Perfetto's own
/// definitions. Only the classes are used, never its trace processor (which downloads a binary).
fn ensure_perfetto_protos() -> Result<()> {
    let import = "from perfetto.protos.perfetto.trace import perfetto_trace_pb2";
    if output("python3", &["-c", import]).is_some() {
        return Ok(());
    }
    eprintln!("setup: installing the perfetto Python package (Perfetto's trace protos, for tests)");
    util::run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "perfetto"]))
        .context("pip install perfetto")
}

/// cargo-fuzz drives the recording reader's fuzz target (with rustup's nightly toolchain).
fn ensure_cargo_fuzz() -> Result<()> {
    if cargo_bin_dir().join("cargo-fuzz").exists() {
        return Ok(());
    }
    eprintln!("setup: installing cargo-fuzz (fuzzing the recording reader)");
    util::run(Command::new("cargo").args(["install", "--locked", "cargo-fuzz"]))
        .context("cargo install cargo-fuzz")
}

fn missing_packages() -> Vec<&'static str> {
    APT_PACKAGES
        .iter()
        .filter(|(name, _)| !is_installed(name))
        .map(|(name, _)| *name)
        .collect()
}

fn is_installed(package: &str) -> bool {
    output("dpkg-query", &["-W", "-f=${Status}", package])
        .is_some_and(|status| status.contains("install ok installed"))
}

fn install_packages(missing: &[&str]) -> Result<()> {
    for (name, why) in APT_PACKAGES.iter().filter(|(n, _)| missing.contains(n)) {
        eprintln!("setup: installing {name} ({why})");
    }
    if !util::is_root() {
        bail!(
            "setup needs root to install: apt-get install {}",
            missing.join(" ")
        );
    }
    util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    util::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .context("apt-get install")
}

fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"))
        .join("bin")
}

/// bpf-linker must link LLVM 22, the LLVM of Debian's rustc-web, or the bitcode will not match.
fn ensure_bpf_linker() -> Result<()> {
    let linker = cargo_bin_dir().join("bpf-linker");
    let linked_llvm = output("ldd", &[linker.to_str().unwrap_or("bpf-linker")]).unwrap_or_default();
    if linked_llvm.contains("libLLVM.so.22") {
        return Ok(());
    }
    eprintln!("setup: installing bpf-linker built against LLVM 22 (about 70 s)");
    util::run(
        Command::new("cargo")
            .args(["install", "--locked", "--force", "bpf-linker"])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("LLVM_SYS_221_PREFIX", "/usr/lib/llvm-22")
            .env("LLVM_PREFIX", "/usr/lib/llvm-22"),
    )
    .context("cargo install bpf-linker")
}

/// What `cargo xtask dist --arch aarch64` (and the arm64 VM test) need on top of the base set.
/// Debian's, not rustup's: no rustup download is reachable, and Debian's arm64 `std` matches
/// /usr/bin/rustc (1.96) exactly, which a cross build needs (rlibs of another rustc are refused).
const ARM64_PACKAGES: [(&str, &str); 4] = [
    (
        "libstd-rust-web-dev:arm64",
        "Rust std for aarch64-unknown-linux-gnu, same version as /usr/bin/rustc",
    ),
    ("gcc-aarch64-linux-gnu", "the linker for aarch64 binaries"),
    (
        "libc6-dev-arm64-cross",
        "the aarch64 glibc a static nodescope links",
    ),
    (
        "qemu-user-static",
        "running the aarch64 nodescope on this host",
    ),
];

/// Install the aarch64 cross toolchain when missing: the arm64 dpkg architecture, then
/// [`ARM64_PACKAGES`]. Not part of [`run`]: only `dist --arch aarch64` needs it, and the first
/// install fetches 209 MB and takes 1 GB of disk (the arm64 std pulls in libllvm22:arm64),
/// which CI, building for the host only, would pay for nothing.
pub fn ensure_arm64_toolchain() -> Result<()> {
    let missing: Vec<_> = ARM64_PACKAGES
        .iter()
        .filter(|(name, _)| !is_installed(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !util::is_root() {
        let names: Vec<_> = missing.iter().map(|(name, _)| *name).collect();
        bail!(
            "building for aarch64 needs root once to install: dpkg --add-architecture arm64; \
             apt-get install {}",
            names.join(" ")
        );
    }
    let foreign = output("dpkg", &["--print-foreign-architectures"]).unwrap_or_default();
    if !foreign.lines().any(|arch| arch.trim() == "arm64") {
        eprintln!("setup: adding the arm64 dpkg architecture (for libstd-rust-web-dev:arm64)");
        util::run(Command::new("dpkg").args(["--add-architecture", "arm64"]))
            .context("dpkg --add-architecture arm64")?;
    }
    let mut install = Vec::new();
    for (name, why) in missing {
        eprintln!("setup: installing {name} ({why})");
        install.push(pinned_to_host_rust(name)?);
    }
    util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    util::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&install)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .context("apt-get install (arm64 toolchain)")
}

/// `libstd-rust-web-dev:arm64` pinned to the installed amd64 version: both are Multi-Arch
/// `same`, and the arm64 std must be built by the very rustc that compiles against it.
fn pinned_to_host_rust(package: &str) -> Result<String> {
    let Some(base) = package.strip_suffix(":arm64") else {
        return Ok(package.to_string());
    };
    let version = output(
        "dpkg-query",
        &["-W", "-f=${Version}", &format!("{base}:amd64")],
    )
    .filter(|version| !version.trim().is_empty())
    .with_context(|| format!("{base}:amd64 is not installed: run `cargo xtask setup` first"))?;
    Ok(format!("{package}={}", version.trim()))
}

/// What `vm-test --arch arm64` needs on top of the arm64 toolchain (whose qemu-user-static
/// lists the arm64 busybox's applets): qemu-system-arm, Debian's package of
/// qemu-system-aarch64, which boots the arm64 kernel. Not part of [`run`] either: only the
/// arm64 VM test needs it.
pub fn ensure_arm64_vm() -> Result<()> {
    ensure_arm64_toolchain()?;
    if is_installed("qemu-system-arm") {
        return Ok(());
    }
    eprintln!("setup: installing qemu-system-arm (qemu-system-aarch64 for the arm64 VM test)");
    if !util::is_root() {
        bail!("the arm64 VM test needs root once to install: apt-get install qemu-system-arm");
    }
    util::run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    util::run(
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "qemu-system-arm",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .context("apt-get install qemu-system-arm")
}
