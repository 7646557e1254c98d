use which::which;

/// Rebuild the programs when bpf-linker changes (a new LLVM changes the bitcode it accepts).
fn main() {
    if let Ok(bpf_linker) = which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", bpf_linker.display());
    }
}
