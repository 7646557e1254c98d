//! The documented rules: which function is which event kind, and where each value a kind needs
//! comes from. Nothing here guesses silently: a value with no rule that fits is returned as
//! unmapped, with the reason.
//!
//! Kinds by name (the C name, lowercase; the RFC's words):
//! - node_read: mainline's `read_node_page` / `read_node_folio` (the one function every node
//!   block read passes, readahead included). It returns LOCKED_PAGE (1) on a cache hit, 0
//!   when it submitted the read, < 0 on error: probed at return, `when = "ret == 0"`.
//! - node lookup (reported, no kind): `f2fs_get_node_page`, `f2fs_get_node_folio`,
//!   `__get_node_page`, `__get_node_folio`, with their nid argument.
//! - The RFC's kinds, only among functions named `*node_cache*` or taking a pointer to the
//!   node-cache entry type (so F2FS's file compression, `f2fs_compress_pages`, is never one):
//!   `referenced` or `second_chance` -> second_chance; `restore` with `nomem` -> restore_nomem,
//!   with `fail`/`invalid`/`corrupt` -> restore_fail, else restore; `compress` (not
//!   `decompress`) with `reject` -> convert_reject, with `abort`/`discard`/`cancel` ->
//!   convert_abort, else convert; `reclaim` -> reclaim; `insert` -> insert (a raw entry
//!   begins); `forget` -> forget (an entry dropped but by reclaim or a failed restore).
//! - Never tracing glue: `__traceiter_*`, `__probestub_*`, `__bpf_trace_*`, `perf_trace_*`,
//!   `trace_event_*`, `trace_raw_output_*`, `trace_*` (a patch's tracepoints are probed as
//!   tracepoints, tracepoints.rs).
//! - One event per call: a function named for a kind must take the entry type, a nid or a
//!   node page; one that takes none (a pass, a shrinker batch) is reported, never probed.
//! - The entry type: a struct with members naming `crc`, `len` and `slot` or `alloc` (the
//!   cover letter's CRC, payload length, private-slab allocation size) that an `f2fs*` or
//!   `*node_cache*` function takes a pointer to. Two such structs: none is used, both are
//!   listed.
//!
//! Values, first rule that fits:
//! - nid: a `nid_t` parameter; a parameter named `nid`; the entry's `nid_t`/`nid` member; for
//!   node_read and restore the page's or folio's `index` (the node inode maps nid to index;
//!   its low 32 bits, read little-endian): restore fills the node page of that nid.
//! - len: an integer parameter whose name has `len`; the entry's `*len*` member.
//! - queue: a parameter `queue`/`q`/`qid`; a parameter with `slot` (bytes, `|slot_queue`); the
//!   entry's `queue` member; its `*slot*` member (`|slot_queue`).
//! - reason: a parameter `reason`/`by`/`why`/`step`/`err`. When it is an enum, its values are
//!   nodescope's codes only by name: each enumerator ending in a reason's name (`NC_CHANCE_RACE`
//!   -> race, `NC_FAIL_LZ4_LEN` -> lz4_len) maps to that reason's code, through
//!   `|codes(RAW=CODE,...)` unless the numbering already agrees; an enum that names none of
//!   the kind's reasons leaves the reason unmapped.
//! - readahead: a parameter `ra`/`readahead`/`is_ra` (`|bool`).
//! - dev: a `dev_t` parameter; otherwise unmapped (sbi->sb->s_dev is two pointers deep).
//! - Only arguments 0..5 (registers on x86_64 and arm64).
use tracer_common::{EventKind, CODES_RAW_VALUES, RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS};

use super::btf::{Function, KernelBtf, Member, Param, Shape};

pub(crate) const NODE_READ_FUNCTIONS: [&str; 2] = ["read_node_page", "read_node_folio"];
pub(crate) const NODE_LOOKUP_FUNCTIONS: [&str; 4] = [
    "f2fs_get_node_page",
    "f2fs_get_node_folio",
    "__get_node_page",
    "__get_node_folio",
];
/// Member-name words of the RFC's node-cache entry, one group per thing the cover letter says
/// it keeps: the CRC of the original block, the payload length, the private-slab allocation
/// (slot) size.
pub(crate) const ENTRY_WORDS: [&[&str]; 3] = [&["crc"], &["len"], &["slot", "alloc"]];

/// The fields each kind's events carry (as the simulator's manifest maps them).
pub(crate) fn fields_of(kind: EventKind) -> &'static [&'static str] {
    match kind {
        EventKind::NodeRead => &["dev", "nid", "readahead"],
        EventKind::Convert | EventKind::Restore => &["dev", "nid", "len", "queue"],
        EventKind::ConvertReject => &["dev", "nid", "len"],
        // The queue too: a failed restore ends its entry, and the cache's population must
        // know which queue lost it.
        EventKind::RestoreFail => &["dev", "nid", "queue", "reason"],
        EventKind::Reclaim | EventKind::Forget => &["dev", "nid", "queue"],
        EventKind::SecondChance => &["dev", "nid", "queue", "reason"],
        _ => &["dev", "nid"],
    }
}

/// Functions the kernel generates for a tracepoint (`__traceiter_f2fs_node_cache_compress`,
/// `perf_trace_...`, an out-of-line `trace_...` wrapper): named like the event, but they run
/// only while something is attached to the tracepoint, or are the tracepoint itself.
const TRACING_PREFIXES: [&str; 8] = [
    "__traceiter_",
    "__probestub_",
    "__bpf_trace_",
    "perf_trace_",
    "trace_event_raw_event_",
    "trace_raw_output_",
    "trace_event_",
    "trace_",
];

/// The RFC kind a function's name says, if any (see the module doc); never for tracing glue.
pub(crate) fn rfc_kind_of_function(name: &str) -> Option<EventKind> {
    if TRACING_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return None;
    }
    rfc_kind_of(name)
}

/// The RFC kind a name (a function's or a tracepoint's) says, if any (see the module doc).
pub(crate) fn rfc_kind_of(name: &str) -> Option<EventKind> {
    let name = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if has(&["referenced", "second_chance"]) {
        Some(EventKind::SecondChance)
    } else if has(&["restore"]) {
        Some(if has(&["nomem"]) {
            EventKind::RestoreNomem
        } else if has(&["fail", "invalid", "corrupt"]) {
            EventKind::RestoreFail
        } else {
            EventKind::Restore
        })
    } else if has(&["decompress"]) {
        None
    } else if has(&["compress"]) {
        Some(if has(&["reject"]) {
            EventKind::ConvertReject
        } else if has(&["abort", "discard", "cancel"]) {
            EventKind::ConvertAbort
        } else {
            EventKind::Convert
        })
    } else if has(&["reclaim"]) {
        Some(EventKind::Reclaim)
    } else if has(&["insert"]) {
        Some(EventKind::Insert)
    } else if has(&["forget"]) {
        Some(EventKind::Forget)
    } else {
        None
    }
}

/// Whether a function concerns one entry, so that each call is one event: it takes the entry
/// type, a nid or a node page. A function named for a kind that takes none of them is a pass
/// or a batch (`node_cache_compress_pass(nc, threshold)`), and counting its calls as events
/// would be wrong.
pub(crate) fn concerns_one_entry(function: &Function, entry: Option<&str>) -> bool {
    function.params.iter().any(|p| {
        entry.is_some_and(|e| p.shape.points_to(e))
            || p.shape.has_typedef("nid_t")
            || (p.shape.is_int() && p.name == "nid")
            || p.shape.points_to("page")
            || p.shape.points_to("folio")
    })
}

/// A value as the manifest writes it, or why there is none.
pub(crate) type Mapping = Result<String, String>;

/// Where the values come from for one function.
pub(crate) struct Context<'a> {
    pub btf: &'a KernelBtf,
    pub function: &'a Function,
    /// The node-cache entry type, when BTF has one.
    pub entry: Option<&'a str>,
    pub kind: EventKind,
}

impl Context<'_> {
    pub(crate) fn map(&self, field: &str) -> Mapping {
        match field {
            "nid" => self.nid(),
            "len" => self.len(),
            "queue" => self.queue(),
            "reason" => self.reason(),
            "readahead" => self.readahead(),
            "dev" => self
                .param(|p| p.shape.has_typedef("dev_t"))
                .map(|(i, _)| arg(i))
                .unwrap_or_else(|| {
                    Err(
                        "the device is two pointers away (sbi->sb->s_dev); mem() follows one"
                            .into(),
                    )
                }),
            other => Err(format!("no rule for {other}")),
        }
    }

    fn reason(&self) -> Mapping {
        let (index, param) = self
            .param(|p| {
                p.shape.is_int()
                    && ["reason", "by", "why", "step", "err"].contains(&p.name.as_str())
            })
            .ok_or("no reason/by parameter")?;
        let source = arg(index)?;
        let enumerators = param.shape.enumerators();
        if enumerators.is_empty() {
            return Ok(source);
        }
        let table = reason_codes(self.kind, enumerators)?;
        if table.iter().all(|&(raw, code)| raw == u32::from(code)) {
            return Ok(source);
        }
        let pairs: Vec<String> = table
            .iter()
            .map(|(raw, code)| format!("{raw}={code}"))
            .collect();
        Ok(format!("{source}|codes({})", pairs.join(",")))
    }

    fn param(&self, test: impl Fn(&Param) -> bool) -> Option<(usize, &Param)> {
        self.function
            .params
            .iter()
            .enumerate()
            .find(|(_, p)| test(p))
    }

    /// The entry-pointer parameter and the entry's members.
    fn entry_param(&self) -> Option<(usize, Vec<Member>)> {
        let entry = self.entry?;
        let (index, _) = self.param(|p| p.shape.points_to(entry))?;
        Some((index, self.btf.members(entry)))
    }

    fn entry_member(&self, test: impl Fn(&Member) -> bool, transform: &str) -> Option<Mapping> {
        let (index, members) = self.entry_param()?;
        let member = members.iter().find(|m| test(m))?;
        Some(mem(index, member, transform))
    }

    fn nid(&self) -> Mapping {
        if let Some((i, _)) = self
            .param(|p| p.shape.has_typedef("nid_t"))
            .or_else(|| self.param(|p| p.shape.is_int() && p.name == "nid"))
        {
            return arg(i);
        }
        if let Some(found) =
            self.entry_member(|m| m.shape.has_typedef("nid_t") || m.name == "nid", "")
        {
            return found;
        }
        if matches!(self.kind, EventKind::NodeRead | EventKind::Restore) {
            if let Some(found) = self.page_index() {
                return found;
            }
            return Err("no nid_t or nid parameter, node-cache entry or node page".into());
        }
        Err("no nid_t or nid parameter, and no node-cache entry parameter".into())
    }

    /// nid from a `struct page *` / `struct folio *` argument: its index (low 32 bits).
    fn page_index(&self) -> Option<Mapping> {
        let (index, param) =
            self.param(|p| p.shape.points_to("page") || p.shape.points_to("folio"))?;
        let Shape::Ptr(Some(name)) = &param.shape else {
            return None;
        };
        let members = self.btf.members(name);
        let member = members.iter().find(|m| m.name == "index")?;
        if index > 5 {
            return Some(Err(stack(index)));
        }
        Some(Ok(format!("mem(arg{index}+{}):u32", member.offset)))
    }

    fn len(&self) -> Mapping {
        if let Some((i, _)) = self.param(|p| p.shape.is_int() && p.name.contains("len")) {
            return arg(i);
        }
        self.entry_member(|m| m.shape.is_int() && m.name.contains("len"), "")
            .unwrap_or_else(|| Err("no *len* parameter or entry member".into()))
    }

    fn queue(&self) -> Mapping {
        if let Some((i, _)) =
            self.param(|p| p.shape.is_int() && ["queue", "q", "qid"].contains(&p.name.as_str()))
        {
            return arg(i);
        }
        if let Some((i, _)) = self.param(|p| p.shape.is_int() && p.name.contains("slot")) {
            return arg(i).map(|a| format!("{a}|slot_queue"));
        }
        self.entry_member(|m| m.shape.is_int() && m.name == "queue", "")
            .or_else(|| {
                self.entry_member(
                    |m| m.shape.is_int() && m.name.contains("slot"),
                    "|slot_queue",
                )
            })
            .unwrap_or_else(|| Err("no queue or slot parameter or entry member".into()))
    }

    fn readahead(&self) -> Mapping {
        if let Some((i, _)) = self
            .param(|p| p.shape.is_int() && ["ra", "readahead", "is_ra"].contains(&p.name.as_str()))
        {
            return arg(i).map(|a| format!("{a}|bool"));
        }
        if self
            .param(|p| p.shape.has_typedef("blk_opf_t") || p.name == "op_flags")
            .is_some()
        {
            return Err(
                "readahead is one bit (REQ_RAHEAD) of op_flags; no transform tests a bit".into(),
            );
        }
        Err("no readahead parameter".into())
    }
}

/// The reasons a kind's events carry: (code, name).
fn reasons_of(kind: EventKind) -> &'static [(u8, &'static str)] {
    match kind {
        EventKind::RestoreFail => &RESTORE_FAIL_REASONS,
        EventKind::SecondChance => &SECOND_CHANCE_REASONS,
        _ => &[],
    }
}

/// (raw value, code) for each enumerator that names one of the kind's reasons, by the longest
/// reason name it ends in (`_PAYLOAD_LEN` before a shorter name).
pub(crate) fn reason_codes(
    kind: EventKind,
    enumerators: &[(String, u32)],
) -> Result<Vec<(u32, u8)>, String> {
    let reasons = reasons_of(kind);
    let mut table = Vec::new();
    for (name, raw) in enumerators {
        let lower = name.to_ascii_lowercase();
        let named = reasons
            .iter()
            .filter(|(_, reason)| lower == *reason || lower.ends_with(&format!("_{reason}")))
            .max_by_key(|(_, reason)| reason.len());
        let Some(&(code, _)) = named else { continue };
        if *raw >= CODES_RAW_VALUES {
            return Err(format!(
                "enumerator {name} = {raw}: codes() maps the values 0..{} only",
                CODES_RAW_VALUES - 1
            ));
        }
        table.push((*raw, code));
    }
    if table.is_empty() {
        let names: Vec<&str> = enumerators.iter().map(|(n, _)| n.as_str()).collect();
        let wanted: Vec<&str> = reasons.iter().map(|(_, r)| *r).collect();
        return Err(format!(
            "the reason is an enum ({}) naming none of {}: its numbering would be a guess",
            names.join(", "),
            wanted.join(", ")
        ));
    }
    table.sort_unstable();
    Ok(table)
}

fn arg(index: usize) -> Mapping {
    if index > 5 {
        Err(stack(index))
    } else {
        Ok(format!("arg{index}"))
    }
}

fn stack(index: usize) -> String {
    format!("argument {index} is passed on the stack; probes read arg0..arg5")
}

fn mem(index: usize, member: &Member, transform: &str) -> Mapping {
    if index > 5 {
        return Err(stack(index));
    }
    let size = match &member.shape {
        Shape::Int { size: 1, .. } => "u8",
        Shape::Int { size: 2, .. } => "u16",
        Shape::Int { size: 4, .. } => "u32",
        Shape::Int { size: 8, .. } => "u64",
        other => {
            return Err(format!(
                "member {} is {other:?}, not an integer",
                member.name
            ))
        }
    };
    Ok(format!(
        "mem(arg{index}+{}):{size}{transform}",
        member.offset
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_their_kind() {
        for (name, kind) in [
            ("f2fs_node_cache_compress_entry", Some(EventKind::Convert)),
            (
                "f2fs_node_cache_compress_reject",
                Some(EventKind::ConvertReject),
            ),
            ("nc_discard_compressed", Some(EventKind::ConvertAbort)),
            ("f2fs_node_cache_restore", Some(EventKind::Restore)),
            ("f2fs_node_cache_restore_fail", Some(EventKind::RestoreFail)),
            (
                "f2fs_node_cache_restore_nomem",
                Some(EventKind::RestoreNomem),
            ),
            ("f2fs_node_cache_reclaim_entry", Some(EventKind::Reclaim)),
            (
                "f2fs_node_cache_clear_referenced",
                Some(EventKind::SecondChance),
            ),
            ("f2fs_node_cache_insert", Some(EventKind::Insert)),
            ("f2fs_node_cache_forget", Some(EventKind::Forget)),
            ("f2fs_decompress_cluster", None),
            ("f2fs_get_node_page", None),
        ] {
            assert_eq!(rfc_kind_of(name), kind, "{name}");
        }
        // A tracepoint's generated functions are named like it; they are not its events.
        for glue in [
            "__traceiter_f2fs_node_cache_compress",
            "__bpf_trace_f2fs_node_cache_reclaim",
            "perf_trace_f2fs_node_cache_restore",
            "trace_event_raw_event_f2fs_node_cache_second_chance",
            "trace_f2fs_node_cache_compress_abort",
        ] {
            assert_eq!(rfc_kind_of_function(glue), None, "{glue}");
        }
        assert_eq!(
            rfc_kind_of_function("f2fs_node_cache_restore"),
            Some(EventKind::Restore)
        );
    }

    fn enumerators(names: &[&str]) -> Vec<(String, u32)> {
        names
            .iter()
            .zip(0..)
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    }

    #[test]
    fn reason_enums_map_by_their_names_not_their_numbers() {
        // The reference module numbers its second chances from 0 and ends with a _MAX.
        let chance = enumerators(&[
            "NC_CHANCE_WORKER",
            "NC_CHANCE_SHRINKER",
            "NC_CHANCE_RACE",
            "NC_CHANCE_MAX",
        ]);
        assert_eq!(
            reason_codes(EventKind::SecondChance, &chance).unwrap(),
            [(0, 1), (1, 2), (2, 3)]
        );
        // Another order: race first.
        let reordered = enumerators(&["BY_RACE", "BY_WORKER", "BY_SHRINKER"]);
        assert_eq!(
            reason_codes(EventKind::SecondChance, &reordered).unwrap(),
            [(0, 3), (1, 1), (2, 2)]
        );
        // Restore failures: the longest name wins (payload_len, lz4_len), NONE maps to nothing.
        let fail = enumerators(&[
            "NC_FAIL_NONE",
            "NC_FAIL_SLOT_SIZE",
            "NC_FAIL_PAYLOAD_LEN",
            "NC_FAIL_LZ4_LEN",
            "NC_FAIL_CRC",
            "NC_FAIL_FOOTER",
            "NC_FAIL_INODE_CHECKSUM",
            "NC_FAIL_NODE_TYPE",
        ]);
        let table = reason_codes(EventKind::RestoreFail, &fail).unwrap();
        assert_eq!(table, (1..=7).map(|v| (v, v as u8)).collect::<Vec<_>>());
        let unknown = enumerators(&["A", "B"]);
        assert!(reason_codes(EventKind::SecondChance, &unknown)
            .unwrap_err()
            .contains("naming none of worker, shrinker, race"));
        let high = vec![("NC_CHANCE_RACE".to_string(), 9)];
        assert!(reason_codes(EventKind::SecondChance, &high)
            .unwrap_err()
            .contains("0..7 only"));
    }
}
