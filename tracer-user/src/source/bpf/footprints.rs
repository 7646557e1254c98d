//! Footprints (issue 49): restores seen one by one on any implementation of the RFC, from what
//! it must leave in stable kernel interfaces rather than from its names: the kernel's LZ4
//! decompressor filling one node block inside mainline's node read function, which then returns
//! without a read (tracer-ebpf/src/footprint.rs says how each is told). Attached by the kernel
//! source on a kernel whose F2FS devices carry the RFC's knobs, for the restore kinds no probe
//! of the manifest already gives.
use std::{collections::HashSet, fmt::Write as _};

use anyhow::{bail, Context as _, Result};
use aya::{
    maps::Array,
    programs::{KProbe, ProgramError},
    Ebpf,
};
use tracer_common::{maps, EventKind, FootprintLayout};

use super::discover::btf::{KernelBtf, Member};
use crate::source::bpf::{self, ObjectMaps as _};

/// Mainline's node read function, by kernel: read_node_page to 6.15, read_node_folio since.
pub(crate) const NODE_READ_FUNCTIONS: [&str; 2] = ["read_node_page", "read_node_folio"];
/// The LZ4 decompressors a restore may call, with the program that reads their arguments.
const DECOMPRESSORS: [(&str, &str); 2] = [
    ("LZ4_decompress_safe", "footprint_lz4_safe_entry"),
    ("LZ4_decompress_safe_partial", "footprint_lz4_partial_entry"),
];
/// F2FS's LOCKED_PAGE (fs/f2fs/node.h, the same value since F2FS began): the node read was
/// served without a read.
const LOCKED_PAGE: i32 = 1;

/// The kinds the footprints can give one by one.
pub(crate) const KINDS: [EventKind; 2] = [EventKind::Restore, EventKind::RestoreFail];

/// What would attach on this kernel, and why not when it cannot.
#[derive(Clone, Debug)]
pub(crate) struct FootprintPlan {
    pub node_read: Option<String>,
    pub decompressors: Vec<(String, &'static str)>,
    pub layout: FootprintLayout,
    /// Why a part is missing (empty when everything is there).
    pub missing: Vec<String>,
}

impl FootprintPlan {
    /// The plan for kallsyms `symbols` and this kernel's `btf`.
    pub(crate) fn new(symbols: &HashSet<String>, btf: Option<&KernelBtf>) -> FootprintPlan {
        let mut missing = Vec::new();
        let node_read = NODE_READ_FUNCTIONS
            .iter()
            .find(|f| symbols.contains(**f))
            .map(|f| f.to_string());
        if node_read.is_none() {
            missing.push(format!(
                "no {} in kallsyms (inlined, or another kernel)",
                NODE_READ_FUNCTIONS.join(" or ")
            ));
        }
        let decompressors: Vec<(String, &'static str)> = DECOMPRESSORS
            .iter()
            .filter(|(f, _)| symbols.contains(*f))
            .map(|(f, program)| (f.to_string(), *program))
            .collect();
        if decompressors.is_empty() {
            missing.push("no LZ4 decompressor in kallsyms (LZ4_decompress_safe)".into());
        }
        let layout = match btf.map(layout_from) {
            Some(Ok(layout)) => layout,
            Some(Err(err)) => {
                missing.push(format!("{err:#}"));
                FootprintLayout::default()
            }
            None => {
                missing.push("no BTF: a node read's nid and device cannot be read".into());
                FootprintLayout::default()
            }
        };
        FootprintPlan {
            node_read,
            decompressors,
            layout,
            missing,
        }
    }

    /// The plan for the running kernel: its kallsyms and BTF (shared while held).
    pub(crate) fn this_kernel() -> FootprintPlan {
        let symbols = super::rfc::kernel_symbols().unwrap_or_default();
        let btf = super::discover::btf::this_kernel().ok();
        FootprintPlan::new(&symbols, btf.as_ref().map(|shared| &shared.1))
    }

    pub(crate) fn usable(&self) -> bool {
        self.missing.is_empty()
    }

    /// "footprint: LZ4_decompress_safe inside read_node_page", or why none.
    pub(crate) fn describe(&self) -> String {
        if !self.usable() {
            return format!("no footprint: {}", self.missing.join("; "));
        }
        let mut out = String::from("footprint: ");
        let names: Vec<&str> = self.decompressors.iter().map(|(f, _)| f.as_str()).collect();
        let _ = write!(
            out,
            "{} inside {}",
            names.join(", "),
            self.node_read.as_deref().unwrap_or("?")
        );
        out
    }
}

/// The offsets the programs read, from BTF.
fn layout_from(btf: &KernelBtf) -> Result<FootprintLayout> {
    let member = |owner: &str, name: &str| -> Result<Member> {
        btf.members(owner)
            .into_iter()
            .find(|m| m.name == name)
            .with_context(|| format!("BTF has no member {owner}.{name}"))
    };
    let s_dev = member("super_block", "s_dev")?;
    if !matches!(
        s_dev.shape,
        super::discover::btf::Shape::Int { size: 4, .. }
    ) {
        bail!("super_block.s_dev is not a 4-byte integer");
    }
    // page.index became page.__folio_index in 6.16; a folio's index is at the same place.
    let index = member("page", "index")
        .or_else(|_| member("page", "__folio_index"))
        .or_else(|_| member("folio", "index"))?;
    Ok(FootprintLayout {
        page_index: index.offset,
        page_mapping: member("page", "mapping")?.offset,
        mapping_host: member("address_space", "host")?.offset,
        inode_sb: member("inode", "i_sb")?.offset,
        sb_dev: s_dev.offset,
        block: page_size(),
        served: LOCKED_PAGE,
        emit_restore: 0,
        emit_fail: 0,
        _pad: [0; 2],
    })
}

/// F2FS's block is the page: 4 KiB, 16 KiB on a 16 KiB-page kernel.
fn page_size() -> u32 {
    // SAFETY: sysconf takes no pointers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).unwrap_or(4096)
}

/// Attach the footprints for `kinds` (a subset of [`KINDS`]). Returns the kinds now seen one
/// by one; an error when nothing could attach.
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    plan: &FootprintPlan,
    kinds: &[EventKind],
) -> Result<Vec<EventKind>> {
    if !plan.usable() {
        bail!("{}", plan.describe());
    }
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let mut layout = plan.layout;
    layout.emit_restore = u8::from(kinds.contains(&EventKind::Restore));
    layout.emit_fail = u8::from(kinds.contains(&EventKind::RestoreFail));
    let map = ebpf.named_map_mut(maps::FOOTPRINT_LAYOUT)?;
    let mut array: Array<_, FootprintLayout> = Array::try_from(map)?;
    array
        .set(0, layout, 0)
        .context("writing FOOTPRINT_LAYOUT")?;
    let node_read = plan.node_read.as_deref().unwrap_or_default();
    bpf::arch::ensure_registers_match(&format!("kprobe:{node_read}"))?;
    kprobe(ebpf, "footprint_node_read_entry", node_read)?;
    kprobe(ebpf, "footprint_node_read_return", node_read)?;
    for (function, program) in &plan.decompressors {
        kprobe(ebpf, program, function)?;
    }
    // One return program for every decompressor: aya attaches a program to several functions.
    for (function, _) in &plan.decompressors {
        kprobe(ebpf, "footprint_lz4_return", function)?;
    }
    Ok(kinds.to_vec())
}

fn kprobe(ebpf: &mut Ebpf, program: &str, function: &str) -> Result<()> {
    let probe: &mut KProbe = ebpf
        .program_mut(program)
        .with_context(|| format!("program {program} missing from the object"))?
        .try_into()?;
    bpf::load_once(probe.fd().is_ok(), || probe.load())?;
    probe
        .attach(function, 0)
        .map_err(|err: ProgramError| anyhow::anyhow!(err))
        .with_context(|| format!("{program} on {function}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_the_functions_says_what_is_missing() {
        let symbols: HashSet<String> = ["read_node_folio".to_string()].into();
        let plan = FootprintPlan::new(&symbols, None);
        assert_eq!(plan.node_read.as_deref(), Some("read_node_folio"));
        assert!(!plan.usable());
        let text = plan.describe();
        assert!(text.contains("no LZ4 decompressor"), "{text}");
        assert!(text.contains("no BTF"), "{text}");
    }

    #[test]
    fn the_footprint_programs_pass_the_verifier() {
        if !crate::system::is_root() {
            test_skip::skip("needs root to load eBPF programs");
            return;
        }
        let mut ebpf = bpf::load(64 * 1024).expect("load the object");
        for name in [
            "footprint_node_read_entry",
            "footprint_node_read_return",
            "footprint_lz4_safe_entry",
            "footprint_lz4_partial_entry",
            "footprint_lz4_return",
        ] {
            let probe: &mut KProbe = ebpf.program_mut(name).unwrap().try_into().unwrap();
            probe.load().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
    }

    /// This machine's BTF has the structs the programs read through.
    #[test]
    fn the_layout_comes_from_this_kernels_btf() {
        let Ok(shared) = super::super::discover::btf::this_kernel() else {
            test_skip::skip("no kernel BTF here");
            return;
        };
        let layout = layout_from(&shared.1).expect("page, address_space, inode, super_block");
        assert!(layout.page_mapping > 0 && layout.page_index > layout.page_mapping);
        assert_eq!(layout.block, page_size());
        assert_eq!(layout.served, LOCKED_PAGE);
    }
}
