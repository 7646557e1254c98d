//! Probe manifests: for each event kind, the function to attach, entry or return, and where each
//! event field comes from. The RFC's function names are not public, so nothing is hard-wired:
//! a default manifest ships in the binary and `--probes FILE` replaces it.
//!
//! ```toml
//! target = "kernel"        # kprobes; "self" = uprobes on this binary; or a path to an ELF file
//!
//! [[probe]]
//! kind = "restore"          # node_read insert convert convert_reject convert_abort restore
//!                           # restore_fail restore_nomem reclaim second_chance forget
//! symbol = "f2fs_restore_compressed_node"
//! at = "return"             # "entry" (default) or "return" (adds latency from the entry)
//! when = "ret == 0"         # return probes: emit only when the test holds (== != < >=);
//!                           # "ret" alone: a bool return value is true
//! nid = "arg1"              # argN (0..5), ret, a number, or mem(argN+OFFSET):u8|u16|u32|u64
//! len = "arg2"
//! queue = "arg3|slot_queue" # transforms: |slot_queue (256/512/1024 -> queue), |neg, |bool
//! reason = "arg2|codes(0=1,1=2,2=3)"  # the kernel's numbering (0..7) -> nodescope's codes
//! ```
//! A patch's tracepoint instead of a function: its record's fields by name (offsets from its
//! format file when it attaches; no `at`, `when`, `argN` or `ret`):
//!
//! ```toml
//! [[probe]]
//! kind = "second_chance"
//! tracepoint = "f2fs/f2fs_node_cache_second_chance"
//! nid = "field(nid)"
//! reason = "field(by)|codes(0=1,1=2,2=3)"
//! ```
//! Fields: dev, nid, len, queue, reason, readahead, latency (ns; a return probe measures it when
//! none is given). An invalid probe is reported with its line
//! and skipped; the others still attach.
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use serde::Deserialize;

use super::format::Format;
use toml::Spanned;
use tracer_common::{
    EventKind, ProbeSpec, ValueSpec, CODES_MAX_CODE, CODES_RAW_VALUES, RET_FILTER_EQ,
    RET_FILTER_GE, RET_FILTER_LT, RET_FILTER_NE, RET_FILTER_TRUE, SPEC_FIELD_DEV,
    SPEC_FIELD_LATENCY, SPEC_FIELD_LEN, SPEC_FIELD_NID, SPEC_FIELD_QUEUE, SPEC_FIELD_READAHEAD,
    SPEC_FIELD_REASON, VALUE_ARG, VALUE_CONST, VALUE_MEM, VALUE_RET, XFORM_BOOL, XFORM_CODES,
    XFORM_NEG, XFORM_NONE, XFORM_SLOT_QUEUE,
};

/// The shipped manifest for a patched kernel: best guesses at the RFC's function names.
pub(crate) const DEFAULT_KERNEL_MANIFEST: &str = include_str!("../../../probes/rfc-kernel.toml");
/// The manifest that maps every kind to the simulator's hooks in this binary.
pub(crate) const SIM_MANIFEST: &str = include_str!("../../../probes/sim.toml");

/// The longest manifest read.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Event kinds that have probe programs (tracer-ebpf/src/rfc.rs).
pub(crate) const PROBE_KINDS: [EventKind; 11] = [
    EventKind::NodeRead,
    EventKind::Insert,
    EventKind::Convert,
    EventKind::ConvertReject,
    EventKind::ConvertAbort,
    EventKind::Restore,
    EventKind::RestoreFail,
    EventKind::RestoreNomem,
    EventKind::Reclaim,
    EventKind::SecondChance,
    EventKind::Forget,
];

/// What the probes attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// kprobes on kernel functions.
    Kernel,
    /// uprobes on an ELF binary (this one for "self").
    Binary(PathBuf),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Entry,
    Return,
}

/// One valid probe.
#[derive(Clone, Debug)]
pub struct Probe {
    pub kind: EventKind,
    /// The function (or, for a tracepoint, `category/name`) it attaches to.
    pub symbol: String,
    /// For a tracepoint of the patch: where it is and which fields its values read.
    pub tracepoint: Option<Tracepoint>,
    pub at: At,
    pub spec: ProbeSpec,
    /// 1-based line of the probe's `kind` in the manifest.
    pub line: usize,
}

/// A tracepoint probe (`tracepoint = "f2fs/f2fs_node_cache_compress"`): its values are
/// `field(NAME)`, read from the record at the offsets of the tracepoint's format file, which
/// [`Tracepoint::resolve`] fills in when the probe attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracepoint {
    pub category: String,
    pub name: String,
    /// (`SPEC_FIELD_*` index, the record field it reads).
    pub fields: Vec<(usize, String)>,
}

impl Tracepoint {
    /// Write the record fields' offsets and sizes into `spec`, from the tracepoint's format.
    pub fn resolve(&self, format: &Format, spec: &mut ProbeSpec) -> Result<()> {
        for (index, field) in &self.fields {
            let found = format.field(field).with_context(|| {
                let names: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
                format!(
                    "{}/{} has no field {field:?} (it has {})",
                    self.category,
                    self.name,
                    names.join(", ")
                )
            })?;
            anyhow::ensure!(
                matches!(found.size, 1 | 2 | 4 | 8) && !found.is_data_loc(),
                "{}/{}: field {field} is {} bytes of {}, not an integer",
                self.category,
                self.name,
                found.size,
                found.c_type
            );
            let value = &mut spec.fields[*index];
            value.offset = u32::from(found.offset);
            value.size = found.size as u8;
        }
        Ok(())
    }
}

/// A parsed manifest: the valid probes, and one error (naming its line) per invalid one.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub name: String,
    pub target: Target,
    pub probes: Vec<Probe>,
    pub errors: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    target: Spanned<String>,
    #[serde(default)]
    probe: Vec<RawProbe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    kind: Spanned<String>,
    symbol: Option<Spanned<String>>,
    tracepoint: Option<Spanned<String>>,
    at: Option<Spanned<String>>,
    when: Option<Spanned<String>>,
    dev: Option<Spanned<String>>,
    nid: Option<Spanned<String>>,
    len: Option<Spanned<String>>,
    queue: Option<Spanned<String>>,
    reason: Option<Spanned<String>>,
    readahead: Option<Spanned<String>>,
    latency: Option<Spanned<String>>,
}

impl Manifest {
    pub fn load(path: &std::path::Path) -> Result<Manifest> {
        let context = || format!("reading probe manifest {}", path.display());
        // A manifest is a few KiB: a longer file (or /dev/zero) is not one, and a FIFO is
        // refused, never waited on.
        let bytes = tracer_common::files::read_regular(
            path,
            tracer_common::files::Symlinks::Follow,
            MAX_MANIFEST_BYTES,
        )
        .with_context(context)?;
        let text = String::from_utf8(bytes).with_context(context)?;
        Manifest::parse(&path.display().to_string(), &text)
    }

    /// Parse a manifest. A malformed file is an error (with its line); an invalid probe is
    /// recorded in `errors` and skipped.
    pub fn parse(name: &str, text: &str) -> Result<Manifest> {
        let raw: RawManifest = toml::from_str(text)
            .map_err(|err| anyhow::anyhow!("{name}: {}", describe_toml_error(text, &err)))?;
        let lines = Lines::new(text);
        let target = parse_target(&raw.target)
            .map_err(|msg| anyhow::anyhow!("{name}:{}: {msg}", lines.of(&raw.target)))?;
        let user_memory = target != Target::Kernel;
        let mut manifest = Manifest {
            name: name.to_string(),
            target,
            probes: Vec::new(),
            errors: Vec::new(),
        };
        for raw_probe in &raw.probe {
            let line = lines.of(&raw_probe.kind);
            match parse_probe(&lines, raw_probe, user_memory, &manifest.probes) {
                Ok(probe) => manifest.probes.push(probe),
                Err((at_line, msg)) => manifest.errors.push(format!("{name}:{at_line}: {msg}")),
            }
            debug_assert!(line > 0);
        }
        Ok(manifest)
    }
}

fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    match err.span() {
        Some(span) => format!("line {}: {}", line_at(text, span.start), err.message()),
        None => err.message().to_string(),
    }
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Line numbers of byte offsets, by binary search over the newlines found once: looking a
/// line up by counting from the start for every probe made a 1 MB manifest take 15 s.
struct Lines {
    newlines: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let newlines = text
            .bytes()
            .enumerate()
            .filter_map(|(at, byte)| (byte == b'\n').then_some(at))
            .collect();
        Lines { newlines }
    }

    /// 1-based line of the byte at `offset`.
    fn at(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&newline| newline < offset) + 1
    }

    fn of<T>(&self, spanned: &Spanned<T>) -> usize {
        self.at(spanned.span().start)
    }
}

fn parse_target(raw: &Spanned<String>) -> Result<Target, String> {
    match raw.get_ref().as_str() {
        "kernel" => Ok(Target::Kernel),
        "self" => std::env::current_exe()
            .map(Target::Binary)
            .map_err(|err| format!("cannot find this binary for target \"self\": {err}")),
        "" => Err("target must be \"kernel\", \"self\" or a path".into()),
        path => Ok(Target::Binary(PathBuf::from(path))),
    }
}

type LineError = (usize, String);

fn parse_probe(
    lines: &Lines,
    raw: &RawProbe,
    user_memory: bool,
    earlier: &[Probe],
) -> Result<Probe, LineError> {
    let line = lines.of(&raw.kind);
    let kind = parse_kind(raw.kind.get_ref()).map_err(|msg| (line, msg))?;
    if let Some(previous) = earlier.iter().find(|p| p.kind == kind) {
        let msg = format!(
            "kind {} is already mapped at line {}",
            kind.name(),
            previous.line
        );
        return Err((line, msg));
    }
    let (symbol, tracepoint) = match (&raw.symbol, &raw.tracepoint) {
        (Some(symbol), None) => {
            let name = symbol.get_ref().trim().to_string();
            if name.is_empty() {
                return Err((lines.of(symbol), "symbol is empty".into()));
            }
            (name, None)
        }
        (None, Some(tracepoint)) => {
            let (category, name) = tracepoint
                .get_ref()
                .trim()
                .split_once(['/', ':'])
                .filter(|(c, n)| !c.is_empty() && !n.is_empty())
                .ok_or_else(|| {
                    let msg = "tracepoint must look like \"f2fs/f2fs_node_cache_compress\"";
                    (lines.of(tracepoint), msg.to_string())
                })?;
            let point = Tracepoint {
                category: category.to_string(),
                name: name.to_string(),
                fields: Vec::new(),
            };
            (format!("{category}/{name}"), Some(point))
        }
        (Some(_), Some(tracepoint)) => {
            let msg = "a probe has a symbol or a tracepoint, not both";
            return Err((lines.of(tracepoint), msg.into()));
        }
        (None, None) => return Err((line, "a probe needs a symbol or a tracepoint".into())),
    };
    let at = match raw.at.as_ref().map(|a| a.get_ref().as_str()) {
        None | Some("entry") => At::Entry,
        Some("return") if tracepoint.is_none() => At::Return,
        Some(other) => {
            let at_line = raw.at.as_ref().map_or(line, |a| lines.of(a));
            let msg = if tracepoint.is_some() {
                "a tracepoint has no return: leave `at` out".to_string()
            } else {
                format!("at must be \"entry\" or \"return\", not {other:?}")
            };
            return Err((at_line, msg));
        }
    };
    let mut tracepoint = tracepoint;
    let spec = build_spec(lines, raw, at, user_memory, tracepoint.as_mut())?;
    Ok(Probe {
        kind,
        symbol,
        tracepoint,
        at,
        spec,
        line,
    })
}

fn parse_kind(name: &str) -> Result<EventKind, String> {
    PROBE_KINDS
        .iter()
        .copied()
        .find(|kind| kind.name() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = PROBE_KINDS.iter().map(|k| k.name()).collect();
            format!("unknown kind {name:?}; known: {}", known.join(", "))
        })
}

fn build_spec(
    lines: &Lines,
    raw: &RawProbe,
    at: At,
    user_memory: bool,
    mut tracepoint: Option<&mut Tracepoint>,
) -> Result<ProbeSpec, LineError> {
    let mut spec = ProbeSpec {
        enabled: 1,
        user_memory: user_memory as u8,
        at_return: (at == At::Return) as u8,
        ..ProbeSpec::default()
    };
    let fields = [
        (SPEC_FIELD_DEV, &raw.dev),
        (SPEC_FIELD_NID, &raw.nid),
        (SPEC_FIELD_LEN, &raw.len),
        (SPEC_FIELD_QUEUE, &raw.queue),
        (SPEC_FIELD_REASON, &raw.reason),
        (SPEC_FIELD_READAHEAD, &raw.readahead),
        (SPEC_FIELD_LATENCY, &raw.latency),
    ];
    for (index, value) in fields {
        let Some(value) = value else { continue };
        let text = value.get_ref();
        let parsed = match tracepoint.as_deref_mut() {
            Some(point) => parse_field_value(text).map(|(name, spec)| {
                point.fields.push((index, name));
                spec
            }),
            None if text.trim_start().starts_with("field(") => {
                Err("field(NAME) reads a tracepoint's record: this probe has a symbol".into())
            }
            None => parse_value(text, at),
        };
        spec.fields[index] = parsed.map_err(|msg| (lines.of(value), msg))?;
    }
    if let Some(when) = &raw.when {
        let when_line = lines.of(when);
        if at != At::Return {
            return Err((
                when_line,
                "`when` tests the return value: use at = \"return\"".into(),
            ));
        }
        let (op, value) = parse_when(when.get_ref()).map_err(|msg| (when_line, msg))?;
        spec.ret_filter = op;
        spec.ret_filter_value = value;
    }
    Ok(spec)
}

/// A tracepoint probe's value: `field(NAME)` or a number, optionally with `|transform`. The
/// field's offset and size come from the format file when the probe attaches.
fn parse_field_value(text: &str) -> Result<(String, ValueSpec), String> {
    let (source, rest) = match text.split_once('|') {
        Some((source, transform)) => (source.trim(), Some(transform)),
        None => (text.trim(), None),
    };
    let name = source
        .strip_prefix("field(")
        .and_then(|n| n.strip_suffix(')'))
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| {
            format!("a tracepoint's values are field(NAME) of its record, not {source:?}")
        })?;
    let (transform, codes) = match rest {
        Some(transform) => parse_transform(transform.trim())?,
        None => (XFORM_NONE, 0),
    };
    let spec = ValueSpec {
        source: VALUE_MEM,
        arg: 0,
        transform,
        codes,
        ..ValueSpec::default()
    };
    Ok((name.to_string(), spec))
}

/// `argN`, `ret`, a number, or `mem(argN+OFFSET):SIZE`, optionally followed by `|transform`.
pub(crate) fn parse_value(text: &str, at: At) -> Result<ValueSpec, String> {
    let (source, (transform, codes)) = match text.split_once('|') {
        Some((source, transform)) => (source.trim(), parse_transform(transform.trim())?),
        None => (text.trim(), (XFORM_NONE, 0)),
    };
    let mut spec = if let Some(index) = source.strip_prefix("arg") {
        ValueSpec {
            source: VALUE_ARG,
            arg: parse_arg_index(index)?,
            ..ValueSpec::default()
        }
    } else if source == "ret" {
        if at != At::Return {
            return Err("`ret` is only known to a return probe: use at = \"return\"".into());
        }
        ValueSpec {
            source: VALUE_RET,
            ..ValueSpec::default()
        }
    } else if let Some(rest) = source.strip_prefix("mem(") {
        parse_mem(rest)?
    } else {
        ValueSpec {
            source: VALUE_CONST,
            offset: parse_number(source)?,
            ..ValueSpec::default()
        }
    };
    spec.transform = transform;
    spec.codes = codes;
    Ok(spec)
}

/// A transform and, for `codes(...)`, its table.
fn parse_transform(name: &str) -> Result<(u8, u32), String> {
    match name {
        "slot_queue" => Ok((XFORM_SLOT_QUEUE, 0)),
        "neg" => Ok((XFORM_NEG, 0)),
        "bool" => Ok((XFORM_BOOL, 0)),
        other => match other
            .strip_prefix("codes(")
            .and_then(|t| t.strip_suffix(')'))
        {
            Some(pairs) => Ok((XFORM_CODES, parse_codes(pairs)?)),
            None => Err(format!(
                "unknown transform {other:?}; known: slot_queue, neg, bool, codes(RAW=CODE,...)"
            )),
        },
    }
}

/// `0=1,1=2,2=3`: raw values 0..7, each once, to codes 0..15 (`XFORM_CODES`' table).
fn parse_codes(pairs: &str) -> Result<u32, String> {
    let usage = || {
        format!(
            "codes(...) maps raw values 0..{} to codes 0..{CODES_MAX_CODE}, each raw value once, \
             like codes(0=1,1=2); not codes({pairs})",
            CODES_RAW_VALUES - 1
        )
    };
    let mut table = 0u32;
    let mut seen = 0u32;
    for pair in pairs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (raw, code) = pair.split_once('=').ok_or_else(usage)?;
        let raw: u32 = raw.trim().parse().map_err(|_| usage())?;
        let code: u8 = code.trim().parse().map_err(|_| usage())?;
        if raw >= CODES_RAW_VALUES || code > CODES_MAX_CODE || seen & (1 << raw) != 0 {
            return Err(usage());
        }
        seen |= 1 << raw;
        table |= u32::from(code) << (raw * 4);
    }
    if seen == 0 {
        return Err(usage());
    }
    Ok(table)
}

fn parse_arg_index(text: &str) -> Result<u8, String> {
    match text.parse::<u8>() {
        Ok(index) if index <= 5 => Ok(index),
        _ => Err(format!(
            "bad argument index {text:?}: arguments are arg0..arg5 (registers on x86_64/arm64)"
        )),
    }
}

/// `argN+OFFSET):SIZE` (the part after `mem(`).
fn parse_mem(rest: &str) -> Result<ValueSpec, String> {
    let usage = "memory values look like mem(arg0+16):u32";
    let (inside, size) = rest.split_once("):").ok_or(usage)?;
    let (arg, offset) = match inside.split_once('+') {
        Some((arg, offset)) => (arg.trim(), parse_number(offset.trim())?),
        None => (inside.trim(), 0),
    };
    let index = arg.strip_prefix("arg").ok_or(usage)?;
    let size = match size.trim() {
        "u8" => 1,
        "u16" => 2,
        "u32" => 4,
        "u64" => 8,
        other => return Err(format!("unknown size {other:?}: use u8, u16, u32 or u64")),
    };
    Ok(ValueSpec {
        source: VALUE_MEM,
        arg: parse_arg_index(index)?,
        size,
        offset,
        ..ValueSpec::default()
    })
}

fn parse_number(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse::<u32>(),
    };
    parsed.map_err(|_| format!("expected argN, ret, mem(...) or a number, found {text:?}"))
}

/// `ret == 0`, `ret != 0`, `ret < 0`, `ret >= 0` (any i32 on the right), or `ret` alone: a
/// bool return value is true (its low byte is not 0).
fn parse_when(text: &str) -> Result<(u8, i32), String> {
    let usage = || {
        format!("`when` must look like \"ret == 0\" (== != < >=) or \"ret\" (a bool), not {text:?}")
    };
    let rest = text.trim().strip_prefix("ret").ok_or_else(usage)?.trim();
    if rest.is_empty() {
        return Ok((RET_FILTER_TRUE, 0));
    }
    let (op, value) = [
        ("==", RET_FILTER_EQ),
        ("!=", RET_FILTER_NE),
        (">=", RET_FILTER_GE),
        ("<", RET_FILTER_LT),
    ]
    .iter()
    .find_map(|(token, op)| rest.strip_prefix(token).map(|value| (*op, value)))
    .ok_or_else(usage)?;
    let value = value.trim().parse::<i32>().map_err(|_| usage())?;
    Ok((op, value))
}

#[cfg(test)]
mod tests;
