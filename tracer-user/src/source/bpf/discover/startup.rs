//! Discovery at start (issue 32): on a kernel whose F2FS devices carry the RFC's knobs, `top`,
//! `stream`, `record` and `daemon` without `--probes` find the RFC's functions themselves, as
//! `probe --discover` would. The manifest is kept in the state directory under the kernel's
//! and the f2fs module's build ids, so a phone parses BTF once per kernel build, not at every
//! start; `--probes FILE` still overrides.
use std::{
    fmt::Write as _,
    fs,
    io::ErrorKind,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use tracer_common::files::{self, Symlinks};

use super::{btf::BtfFiles, discover, kallsyms};
use crate::{output::OutputFile, source::bpf::manifest::Manifest, system};

/// Where the kernel's and a module's build ids are (ELF notes, as /sys shows them).
const KERNEL_NOTES: &str = "/sys/kernel/notes";
const F2FS_NOTES: &str = "/sys/module/f2fs/notes/.note.gnu.build-id";
/// ELF `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;
/// A cached manifest is a few KiB; more is not ours.
const MAX_CACHED_BYTES: u64 = 1 << 20;

/// The manifest a source uses when none was given, and the line that says where it came from.
pub(crate) struct Discovered {
    pub manifest: Manifest,
    pub line: String,
}

/// Whether any F2FS device here has the RFC's knobs: only then is there anything to discover.
pub(crate) fn rfc_kernel() -> bool {
    system::f2fs_devices(Path::new("/sys/fs/f2fs"))
        .iter()
        .any(|d| d.node_compress_threshold || d.node_compress_interval)
}

/// The manifest for this kernel: from the cache in `state_dir` when this build's is there,
/// else discovered from BTF and kallsyms and cached.
pub(crate) fn for_this_kernel(state_dir: &Path) -> Result<Discovered> {
    let key = build_key().context("reading the kernel's build id")?;
    let cache = state_dir.join(format!("probes-{key}.toml"));
    match files::read_regular(&cache, Symlinks::Refuse, MAX_CACHED_BYTES) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).context("a cached manifest that is not text")?;
            let cached = Manifest::parse(&cache.display().to_string(), &text)?;
            // The kinds the discovery mapped, as the first start counted them.
            let kinds: std::collections::BTreeSet<_> =
                cached.probes.iter().map(|p| p.kind as u32).collect();
            let manifest = without_node_reads(cached);
            let line = format!(
                "probes: discovered for this kernel build ({} kinds, cached {})",
                kinds.len(),
                cache.display()
            );
            return Ok(Discovered { manifest, line });
        }
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => {
            return Err(err).with_context(|| format!("reading the cached {}", cache.display()))
        }
    }
    let text = kallsyms::read(Path::new(kallsyms::PROC_KALLSYMS))?;
    let btf = BtfFiles::this_kernel();
    let mut discovery = discover(btf.as_ref(), kallsyms::PROC_KALLSYMS, &text)?;
    if let Some(tracefs) = system::tracefs() {
        let formats = super::tracepoints::read_formats(&tracefs);
        discovery.prefer_tracepoints(&formats, &tracefs.display().to_string());
    }
    let manifest_text = discovery.manifest();
    let manifest = without_node_reads(Manifest::parse("the discovered manifest", &manifest_text)?);
    let mut line = format!(
        "probes: discovered from {} and kallsyms: {} of {} kinds",
        btf.as_ref()
            .map_or("no BTF".to_string(), |b| format!("BTF {}", b.describe())),
        discovery.found().count(),
        discovery.kinds.len()
    );
    match write_cache(&cache, &manifest_text) {
        Ok(()) => drop(write!(line, " (cached {})", cache.display())),
        Err(err) => drop(write!(line, " (not cached: {err:#})")),
    }
    Ok(Discovered { manifest, line })
}

/// Written under a temporary name and renamed, so that a reader never sees half a manifest.
/// The sources count node reads from F2FS's own tracepoints; a discovered node_read probe
/// (read_node_page) beside them would count every read twice, so the sources leave it out.
/// The cached file keeps it, as `probe --discover` writes it.
fn without_node_reads(mut manifest: Manifest) -> Manifest {
    manifest
        .probes
        .retain(|probe| probe.kind != tracer_common::EventKind::NodeRead);
    manifest
}

fn write_cache(cache: &Path, text: &str) -> Result<()> {
    let partial = PathBuf::from(format!(
        "{}.partial-{}",
        cache.display(),
        std::process::id()
    ));
    OutputFile::private(false).write(&partial, text.as_bytes())?;
    fs::rename(&partial, cache).with_context(|| format!("renaming to {}", cache.display()))
}

/// `<kernel build id>` or `<kernel build id>-<f2fs module build id>`, in hex.
fn build_key() -> Result<String> {
    let kernel = build_id(Path::new(KERNEL_NOTES))?;
    Ok(match build_id(Path::new(F2FS_NOTES)) {
        Ok(module) => format!("{kernel}-{module}"),
        Err(_) => kernel, // F2FS built in: the kernel's id covers it
    })
}

fn build_id(notes: &Path) -> Result<String> {
    let bytes = files::read_regular(notes, Symlinks::Refuse, MAX_CACHED_BYTES)
        .with_context(|| format!("reading {}", notes.display()))?;
    gnu_build_id(&bytes).with_context(|| format!("no GNU build id in {}", notes.display()))
}

/// The GNU build id among ELF notes: (namesz, descsz, type, name, desc), each part padded to
/// 4 bytes, native endian.
pub(crate) fn gnu_build_id(mut notes: &[u8]) -> Option<String> {
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let padded = |n: u32| (n as usize).div_ceil(4) * 4;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + namesz as usize)?;
        let desc_at = 12 + padded(namesz);
        let desc = notes.get(desc_at..desc_at + descsz as usize)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = notes.get(desc_at + padded(descsz)..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sources_leave_a_discovered_node_read_probe_out() {
        let text = "target = \"kernel\"\n\n[[probe]]\nkind = \"node_read\"\n\
                    symbol = \"read_node_page\"\n\n[[probe]]\nkind = \"restore\"\n\
                    symbol = \"f2fs_node_cache_restore\"\n";
        let manifest = without_node_reads(Manifest::parse("m", text).unwrap());
        let kinds: Vec<&str> = manifest.probes.iter().map(|p| p.kind.name()).collect();
        assert_eq!(kinds, ["restore"]);
    }

    fn note(kind: u32, name: &[u8], desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for word in [name.len() as u32, desc.len() as u32, kind] {
            out.extend(word.to_ne_bytes());
        }
        out.extend(name);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out.extend(desc);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out
    }

    #[test]
    fn the_gnu_build_id_is_found_among_other_notes() {
        let mut notes = note(6, b"Linux\0", &[1, 2, 3, 4, 5]);
        notes.extend(note(
            NT_GNU_BUILD_ID,
            b"GNU\0",
            &[0xde, 0xad, 0xbe, 0xef, 0x01],
        ));
        assert_eq!(gnu_build_id(&notes).as_deref(), Some("deadbeef01"));
        // Cut short, or another owner's type 3: no id, never a wrong one.
        assert_eq!(gnu_build_id(&notes[..notes.len() - 8]), None);
        assert_eq!(gnu_build_id(&note(NT_GNU_BUILD_ID, b"Xen\0", &[1])), None);
        assert_eq!(gnu_build_id(&[]), None);
    }

    /// This machine's own kernel has a build id (every distribution kernel does).
    #[test]
    fn this_kernels_build_id_is_read() {
        let id = build_id(Path::new(KERNEL_NOTES)).expect("/sys/kernel/notes has one");
        assert!(
            id.len() >= 16 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
}
