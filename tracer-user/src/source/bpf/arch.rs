//! Which architecture the embedded object's register-reading code was compiled for, and the
//! refusal to attach it on another.
//!
//! aya-ebpf picks the `pt_regs` layout behind `ProbeContext::arg` and `RetProbeContext::ret`
//! when the object is compiled (`bpf_target_arch`): an object built for x86_64 reads `di`,
//! `si`, ... where arm64 keeps `regs[0..]`, so on the wrong kernel every kprobe argument (nid,
//! length, slot) and return value would be silently wrong. What is refused: kprobes and
//! kretprobes (F2FS node reads, RFC probes on the kernel) and the RFC uprobes, which read
//! arguments the same way. Tracepoints (run-time format offsets) are arch-neutral and never
//! checked.
use anyhow::{bail, Result};

/// `bpf_target_arch` of the embedded object, baked in by tracer-user/build.rs.
pub(crate) const OBJECT_ARCH: &str = env!("NODESCOPE_BPF_TARGET_ARCH");

/// Fail with a clear message when `what` (e.g. "kprobe f2fs_get_node_info") would read
/// registers laid out for another architecture than the running kernel's.
pub(crate) fn ensure_registers_match(what: &str) -> Result<()> {
    check(OBJECT_ARCH, &kernel_machine(), what)
}

/// The running kernel's machine (`uname -m`): "x86_64", "aarch64", ...
pub(crate) fn kernel_machine() -> String {
    // SAFETY: utsname is plain old data; zeroed is a valid value and uname only writes into it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname for the duration of the call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return std::env::consts::ARCH.to_string();
    }
    // SAFETY: the kernel NUL-terminates every utsname field.
    let machine = unsafe { std::ffi::CStr::from_ptr(uts.machine.as_ptr()) };
    machine.to_string_lossy().into_owned()
}

/// The `bpf_target_arch` whose `pt_regs` a kernel of `machine` has.
pub(crate) fn bpf_arch_of_machine(machine: &str) -> &str {
    match machine {
        "arm64" | "aarch64" | "aarch64_be" => "aarch64",
        "amd64" => "x86_64",
        m if m.starts_with("armv") || m == "arm" => "arm",
        m if m.starts_with("ppc64") => "powerpc64",
        m if m.starts_with("riscv64") => "riscv64",
        m => m,
    }
}

/// The decision, apart from where the facts come from (so it can be tested on any host).
pub(crate) fn check(object_arch: &str, machine: &str, what: &str) -> Result<()> {
    let kernel_arch = bpf_arch_of_machine(machine);
    if object_arch == kernel_arch {
        return Ok(());
    }
    bail!(
        "refusing to attach {what}: this nodescope's eBPF object reads probe arguments from \
         {object_arch} registers, but the kernel is {machine}, so every argument would be \
         wrong. Use a nodescope built for {kernel_arch} (`cargo xtask dist --arch \
         {kernel_arch}`); tracepoints are not affected"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_for_the_kernels_architecture_attaches() {
        check("x86_64", "x86_64", "kprobe f").unwrap();
        check("aarch64", "aarch64", "kprobe f").unwrap();
        check("aarch64", "arm64", "kprobe f").unwrap();
        check("arm", "armv7l", "kprobe f").unwrap();
    }

    #[test]
    fn an_object_for_another_architecture_is_refused_saying_both_and_the_fix() {
        let err = check("x86_64", "aarch64", "kprobe f2fs_get_node_info")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("refusing to attach kprobe f2fs_get_node_info:"),
            "{err}"
        );
        assert!(err.contains("x86_64 registers"), "{err}");
        assert!(err.contains("the kernel is aarch64"), "{err}");
        assert!(err.contains("cargo xtask dist --arch aarch64"), "{err}");

        let err = check("aarch64", "x86_64", "uprobe u")
            .unwrap_err()
            .to_string();
        assert!(err.contains("aarch64 registers"), "{err}");
        assert!(err.contains("--arch x86_64"), "{err}");
    }

    #[test]
    fn this_build_matches_the_machine_it_was_built_for() {
        // tests run on the build host, whose kernel is the target's architecture
        assert_eq!(OBJECT_ARCH, std::env::consts::ARCH);
        assert_eq!(bpf_arch_of_machine(&kernel_machine()), OBJECT_ARCH);
        ensure_registers_match("kprobe f").unwrap();
    }
}
