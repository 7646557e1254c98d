//! fentry programs on BPF trampolines, including on a module's functions (issue #30).
//!
//! A trampoline is a direct call from the traced function's entry into the program; a kprobe
//! on the same entry goes through ftrace's handler, saves every register, and looks its probe
//! up, on every call. The kernel needs the target's BTF id at load time, and for a function of a
//! module (Debian's F2FS) also the fd of that module's BTF object. aya 0.14's `FEntry::load`
//! resolves the id in one BTF and never passes a BTF object fd, so it reaches vmlinux's
//! functions only. This module loads the program itself: the same object aya loaded, relocated
//! against the maps aya created (so the program shares the ring buffer and the counters), then
//! `BPF_PROG_LOAD` with `attach_btf_obj_fd` and `BPF_RAW_TRACEPOINT_OPEN` to attach it.
//!
//! The caller falls back to a kprobe when anything here fails, and says why.
use std::{
    collections::HashSet,
    ffi::CString,
    os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
};

use anyhow::{bail, Context as _, Result};
use aya::{maps::Map, Ebpf};
use aya_obj::generated::{bpf_attach_type, bpf_btf_info, bpf_cmd, bpf_insn, bpf_prog_type};

use super::discover::btf::{BtfFiles, KernelBtf};
use crate::system;

/// How nodescope hooks kernel functions, the node lookups (`--accesses`) and the RFC's
/// functions (`--function-hook`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FunctionHook {
    /// BPF trampolines (fentry, fexit) where the kernel has BTF and trampolines, kprobes
    /// where not or where the kernel refuses one.
    #[default]
    Auto,
    /// Always kprobes and kretprobes (to compare the two: `cargo xtask vm-bench`).
    Kprobe,
}

/// Which end of a function a trampoline program runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hook {
    Entry,
    Exit,
}

impl Hook {
    fn attach_type(self) -> bpf_attach_type {
        match self {
            Hook::Entry => bpf_attach_type::BPF_TRACE_FENTRY,
            Hook::Exit => bpf_attach_type::BPF_TRACE_FEXIT,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::Entry => "fentry",
            Hook::Exit => "fexit",
        }
    }
}

/// Whether BPF trampolines can be used here: `hook` allows them, and the kernel of `machine`
/// and `release` has them (x86_64 from 5.5, arm64 from 6.0). The RFC's programs also read their
/// arguments with bpf_get_func_arg (5.17); where that is missing the kernel refuses them at
/// load, and they fall back to kprobes like any refused trampoline.
pub(crate) fn usable(hook: FunctionHook, machine: &str, release: &str) -> Result<()> {
    if hook == FunctionHook::Kprobe {
        bail!("not asked for (--function-hook kprobe)");
    }
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let since = match super::arch::bpf_arch_of_machine(machine) {
        "x86_64" => (5, 5),
        "aarch64" => (6, 0),
        _ => bail!("BPF trampolines are used on x86_64 and arm64 only, not {machine}"),
    };
    if version < since {
        bail!(
            "{machine} has BPF trampolines from {}.{}; this kernel is {release}",
            since.0,
            since.1
        );
    }
    Ok(())
}

/// Trampolines on this kernel's functions, found by name: its BTF, the relocated programs, and
/// what is attached (detached when dropped).
pub(crate) struct KernelTrampolines {
    /// This kernel's BTF, shared with whatever else holds it ([`super::discover::btf::this_kernel`]).
    btf: super::discover::btf::SharedBtf,
    programs: TracingPrograms,
    pub links: Vec<TrampolineLink>,
}

impl KernelTrampolines {
    /// Ready to attach, or why this kernel gets kprobes instead.
    pub(crate) fn for_this_kernel(
        hook: FunctionHook,
        ebpf: &Ebpf,
        taken: &[(&str, RawFd)],
    ) -> Result<KernelTrampolines> {
        usable(
            hook,
            &super::arch::kernel_machine(),
            &system::kernel_release(),
        )?;
        let btf = super::discover::btf::this_kernel()?;
        let programs = TracingPrograms::new(super::object(), ebpf, taken)?;
        Ok(KernelTrampolines {
            btf,
            programs,
            links: Vec::new(),
        })
    }

    /// `entry` at `function`'s entry and, when given, `exit` at its exit: both or neither.
    pub(crate) fn attach_pair(
        &mut self,
        function: &str,
        entry: &str,
        exit: Option<&str>,
    ) -> Result<()> {
        let target = BtfTarget::find(&self.btf.1, &self.btf.0, function)?;
        let first = self.programs.attach(entry, &target, Hook::Entry)?;
        if let Some(exit) = exit {
            // On a refusal `first` is dropped here, which detaches it.
            let second = self.programs.attach(exit, &target, Hook::Exit)?;
            self.links.push(second);
        }
        self.links.push(first);
        Ok(())
    }
}

/// Where a function's BTF lives: its type id, in vmlinux's BTF or in a module's split BTF
/// (whose ids continue vmlinux's numbering).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BtfTarget {
    pub function: String,
    pub type_id: u32,
    /// The module whose BTF object holds `type_id`; None for vmlinux.
    pub module: Option<String>,
}

impl BtfTarget {
    /// `function` in this kernel's BTF: the f2fs module's split BTF first, then vmlinux's.
    pub(crate) fn find(btf: &KernelBtf, files: &BtfFiles, function: &str) -> Result<BtfTarget> {
        let (type_id, in_module) = btf
            .function_type_id(function)
            .with_context(|| format!("BTF describes no function {function}"))?;
        let module = match (in_module, &files.module) {
            (false, _) => None,
            (true, Some(path)) => Some(
                path.file_name()
                    .and_then(|name| name.to_str())
                    .context("a module BTF file without a name")?
                    .to_string(),
            ),
            (true, None) => bail!("{function}'s BTF id is in a split section with no module"),
        };
        Ok(BtfTarget {
            function: function.to_string(),
            type_id,
            module,
        })
    }
}

/// An attached fentry program: the program and its link, detached when dropped.
#[derive(Debug)]
pub(crate) struct TrampolineLink {
    /// Held for the program's life; read by the tests (its id).
    #[cfg_attr(not(test), allow(dead_code))]
    program: OwnedFd,
    _link: OwnedFd,
}

#[cfg(test)]
impl TrampolineLink {
    /// The kernel's id of the program (bpftool's, bpf_stats' key).
    pub(crate) fn program_id(&self) -> Result<u32> {
        program_id(self.program.as_raw_fd())
    }
}

/// The object's tracing programs, relocated against one loaded `Ebpf`'s maps.
pub(crate) struct TracingPrograms {
    object: aya_obj::Object,
    /// BTF object fds of modules, by name, found once.
    module_btf: Vec<(String, OwnedFd)>,
}

impl TracingPrograms {
    /// Parse `object` (the bytes `ebpf` was loaded from) and point its map references at
    /// `ebpf`'s maps, or at `taken`'s fds for maps taken out of it (the ring buffer's reader).
    pub(crate) fn new(
        object: &[u8],
        ebpf: &Ebpf,
        taken: &[(&str, RawFd)],
    ) -> Result<TracingPrograms> {
        let mut parsed = aya_obj::Object::parse(object).context("parsing the eBPF object")?;
        let maps = parsed.maps.clone();
        let mut fds = Vec::new();
        for name in maps.keys() {
            let fd = match taken.iter().find(|(taken, _)| taken == name) {
                Some((_, fd)) => *fd,
                None => map_fd(
                    ebpf.map(name)
                        .with_context(|| format!("map {name} was not created (or was taken)"))?,
                )?,
            };
            fds.push((name.as_str(), fd));
        }
        let text_sections: HashSet<usize> = parsed
            .functions
            .keys()
            .map(|(section, _)| *section)
            .collect();
        parsed
            .relocate_maps(
                fds.iter().map(|(name, fd)| (*name, *fd, &maps[*name])),
                &text_sections,
            )
            .context("relocating map references")?;
        parsed
            .relocate_calls(&text_sections)
            .context("relocating calls")?;
        Ok(TracingPrograms {
            object: parsed,
            module_btf: Vec::new(),
        })
    }

    /// Load `program` (an `#[fentry]` or `#[fexit]` program of the object, as `hook` says)
    /// against `target` and attach it.
    pub(crate) fn attach(
        &mut self,
        program: &str,
        target: &BtfTarget,
        hook: Hook,
    ) -> Result<TrampolineLink> {
        let prog = self
            .object
            .programs
            .get(program)
            .with_context(|| format!("program {program} missing from the object"))?;
        let license = prog.license.clone();
        let function = self
            .object
            .functions
            .get(&prog.function_key())
            .with_context(|| format!("program {program} has no code"))?;
        let instructions = function.instructions.clone();
        let btf_obj = match &target.module {
            None => None,
            Some(module) => Some(self.module_btf_fd(module)?),
        };
        let loaded = load_tracing(
            program,
            &instructions,
            &license,
            hook.attach_type(),
            target.type_id,
            btf_obj,
        )
        .with_context(|| {
            format!(
                "loading {program} ({}) on {}",
                hook.name(),
                describe(target)
            )
        })?;
        let link = raw_tracepoint_open(loaded.as_raw_fd())
            .with_context(|| format!("attaching {program} to {}", describe(target)))?;
        Ok(TrampolineLink {
            program: loaded,
            _link: link,
        })
    }

    fn module_btf_fd(&mut self, module: &str) -> Result<RawFd> {
        if let Some((_, fd)) = self.module_btf.iter().find(|(name, _)| name == module) {
            return Ok(fd.as_raw_fd());
        }
        let fd = find_kernel_btf(module)?
            .with_context(|| format!("the kernel lists no BTF object named {module}"))?;
        let raw = fd.as_raw_fd();
        self.module_btf.push((module.to_string(), fd));
        Ok(raw)
    }
}

fn describe(target: &BtfTarget) -> String {
    match &target.module {
        Some(module) => format!(
            "{} (BTF id {} in {module})",
            target.function, target.type_id
        ),
        None => format!("{} (BTF id {} in vmlinux)", target.function, target.type_id),
    }
}

/// The fd of a map aya created (every kind the object uses).
fn map_fd(map: &Map) -> Result<RawFd> {
    let data = match map {
        Map::Array(data)
        | Map::HashMap(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::RingBuf(data)
        | Map::PerfEventArray(data)
        | Map::StackTraceMap(data)
        | Map::Unsupported(data) => data,
        other => bail!("a map of a kind this loader does not handle: {other:?}"),
    };
    Ok(data.fd().as_fd().as_raw_fd())
}

/// bpf(2) with `attr`, whose size the kernel is told (it zero-extends a shorter one).
fn sys_bpf<T>(cmd: bpf_cmd, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: `attr` is a valid, initialised repr(C) value of the size passed, matching the
    // prefix of union bpf_attr that `cmd` reads; the kernel writes only inside it.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T,
            std::mem::size_of::<T>(),
        )
    };
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A file descriptor bpf(2) returned.
fn owned_fd(ret: i64) -> OwnedFd {
    // SAFETY: the syscall succeeded and returned a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(ret as RawFd) }
}

/// union bpf_attr's BPF_PROG_LOAD part, up to attach_btf_obj_fd (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    core_relo_cnt: u32,
}

/// Load a BPF_PROG_TYPE_TRACING program; on a refusal the verifier's log is in the error.
fn load_tracing(
    name: &str,
    instructions: &[bpf_insn],
    license: &CString,
    attach: bpf_attach_type,
    btf_id: u32,
    btf_obj_fd: Option<RawFd>,
) -> Result<OwnedFd> {
    let mut attr = ProgLoadAttr {
        prog_type: bpf_prog_type::BPF_PROG_TYPE_TRACING as u32,
        insn_cnt: u32::try_from(instructions.len()).context("program too long")?,
        insns: instructions.as_ptr() as u64,
        license: license.as_ptr() as u64,
        expected_attach_type: attach as u32,
        attach_btf_id: btf_id,
        attach_btf_obj_fd: btf_obj_fd.map_or(0, |fd| fd as u32),
        ..ProgLoadAttr::default()
    };
    // The kernel keeps 15 characters and a NUL.
    for (slot, byte) in attr.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *slot = byte;
    }
    match sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(owned_fd(fd)),
        // The verifier gave up after its instruction budget: a second pass for its log would
        // take as long again, and the log would only say so.
        Err(err) if err.raw_os_error() == Some(libc::E2BIG) => {
            bail!("BPF_PROG_LOAD: {err}: too complex for this kernel's verifier")
        }
        Err(first) => {
            // Again with the verifier's log, which says why.
            let mut log = vec![0u8; 1 << 20];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            let again = sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr);
            if let Ok(fd) = again {
                return Ok(owned_fd(fd));
            }
            let text = String::from_utf8_lossy(&log);
            let tail: Vec<&str> = text.trim_end_matches('\0').lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("BPF_PROG_LOAD: {first}: {}", tail.join(" / "))
        }
    }
}

/// union bpf_attr's BPF_RAW_TRACEPOINT_OPEN part.
#[repr(C)]
#[derive(Default)]
struct RawTracepointAttr {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

/// Attach a loaded fentry program at the target it was loaded for: the link's fd.
fn raw_tracepoint_open(prog_fd: RawFd) -> Result<OwnedFd> {
    let mut attr = RawTracepointAttr {
        prog_fd: prog_fd as u32,
        ..RawTracepointAttr::default()
    };
    let fd =
        sys_bpf(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr).context("BPF_RAW_TRACEPOINT_OPEN")?;
    Ok(owned_fd(fd))
}

/// union bpf_attr's BPF_*_GET_NEXT_ID and BPF_*_GET_FD_BY_ID part.
#[repr(C)]
#[derive(Default)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// union bpf_attr's BPF_OBJ_GET_INFO_BY_FD part.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The kernel's BTF object called `name` (a module's; kernel BTF only), if it has one.
fn find_kernel_btf(name: &str) -> Result<Option<OwnedFd>> {
    let mut id = 0;
    loop {
        let mut next = IdAttr {
            id,
            ..IdAttr::default()
        };
        match sys_bpf(bpf_cmd::BPF_BTF_GET_NEXT_ID, &mut next) {
            Ok(_) => id = next.next_id,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(err) => return Err(err).context("BPF_BTF_GET_NEXT_ID"),
        }
        let mut by_id = IdAttr {
            id,
            ..IdAttr::default()
        };
        let fd = match sys_bpf(bpf_cmd::BPF_BTF_GET_FD_BY_ID, &mut by_id) {
            Ok(fd) => owned_fd(fd),
            // Gone between the two calls.
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(err) => return Err(err).context("BPF_BTF_GET_FD_BY_ID"),
        };
        let mut object_name = [0u8; 64];
        // SAFETY: bpf_btf_info is plain old data; all zeroes is a valid value.
        let mut info: bpf_btf_info = unsafe { std::mem::zeroed() };
        info.name = object_name.as_mut_ptr() as u64;
        info.name_len = object_name.len() as u32;
        let mut attr = InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: std::mem::size_of::<bpf_btf_info>() as u32,
            info: &mut info as *mut bpf_btf_info as u64,
        };
        sys_bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).context("BTF object info")?;
        let len = object_name.iter().position(|b| *b == 0).unwrap_or(0);
        if info.kernel_btf != 0 && &object_name[..len] == name.as_bytes() {
            return Ok(Some(fd));
        }
    }
}

/// bpf_prog_info's first two fields: all the tests read.
#[cfg(test)]
#[repr(C)]
#[derive(Default)]
struct ProgInfoHead {
    prog_type: u32,
    id: u32,
}

#[cfg(test)]
fn program_id(fd: RawFd) -> Result<u32> {
    let mut info = ProgInfoHead::default();
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    sys_bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).context("program info")?;
    Ok(info.id)
}

#[cfg(test)]
mod tests;
