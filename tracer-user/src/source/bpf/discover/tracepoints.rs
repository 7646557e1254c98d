//! A patch's own tracepoints (`f2fs:*node_cache*`), found by their format files: where a kind
//! has one, it is the probe, before any function. A tracepoint fires once per event by
//! construction (a function may be a pass, a test, or inlined at some of its calls), and its
//! format names its fields with their offsets, with or without BTF.
//!
//! Rules, as for functions (rules.rs): the kind by the event's name, only among events named
//! `*node_cache*`; the values by field name: dev = `dev`; nid = `nid` (or a `nid_t` field);
//! len = a `*len*` field; queue = `queue`, else a `*slot*` field (`|slot_queue`); reason =
//! `reason`/`by`/`why`/`step`/`err`, its values mapped to nodescope's codes by the names
//! `__print_symbolic` prints for them (never by their numbers).
use std::{fs, path::Path};

use tracer_common::{
    files::{self, Symlinks},
    EventKind,
};

use super::{rules, At, Discovery, Found, Outcome};
use crate::source::bpf::format::Format;

/// The category the patch's tracepoints are in.
pub(crate) const CATEGORY: &str = "f2fs";

/// The longest format file read: a few KiB in any kernel.
const MAX_FORMAT_BYTES: u64 = 64 << 10;

/// The formats of `events/f2fs/*node_cache*` under a tracefs directory (empty when there are
/// none, or no tracefs). Unreadable, oversized or malformed files are left out, and so is
/// anything that is not a regular file (a FIFO would block the read).
pub(crate) fn read_formats(tracefs: &Path) -> Vec<Format> {
    let Ok(entries) = fs::read_dir(tracefs.join("events").join(CATEGORY)) else {
        return Vec::new();
    };
    let mut formats: Vec<Format> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().contains("node_cache"))
        .filter_map(|entry| read_format(&entry.path().join("format")).ok())
        .collect();
    formats.sort_by(|a, b| a.name.cmp(&b.name));
    formats
}

/// One format file: a regular file (a FIFO would block the read) of at most
/// `MAX_FORMAT_BYTES`.
pub(crate) fn read_format(path: &Path) -> anyhow::Result<Format> {
    use anyhow::Context as _;
    let bytes = files::read_regular(path, Symlinks::Follow, MAX_FORMAT_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_FORMAT_BYTES,
        "{}: longer than {MAX_FORMAT_BYTES} bytes, not a format file",
        path.display()
    );
    let text = String::from_utf8(bytes).with_context(|| format!("{}: not text", path.display()))?;
    Format::parse(&text).with_context(|| format!("parsing {}", path.display()))
}

impl Discovery {
    /// Each kind with exactly one tracepoint named for it takes that tracepoint; two are never
    /// chosen between (the kind says so).
    pub(crate) fn prefer_tracepoints(&mut self, formats: &[Format], tracefs: &str) {
        if formats.is_empty() {
            return;
        }
        for (kind, outcome) in &mut self.kinds {
            if *kind == EventKind::NodeRead {
                continue; // F2FS's own read tracepoints are the planner's
            }
            let named: Vec<&Format> = formats
                .iter()
                .filter(|f| rules::rfc_kind_of(&f.name) == Some(*kind))
                .collect();
            match named.as_slice() {
                [] => {}
                [one] => *outcome = Outcome::Found(found(*kind, one)),
                many => {
                    let names: Vec<&str> = many.iter().map(|f| f.name.as_str()).collect();
                    *outcome = Outcome::Missing(format!(
                        "several tracepoints, pick one by hand: {}",
                        names.join(", ")
                    ));
                }
            }
        }
        self.notes
            .push(format!("tracepoints from {tracefs}/events/{CATEGORY}"));
    }
}

fn found(kind: EventKind, format: &Format) -> Found {
    let mut found = Found {
        function: format.name.clone(),
        signature: Some(format!("tracepoint {CATEGORY}:{}", format.name)),
        symbol: format!("{CATEGORY}/{}", format.name),
        tracepoint: true,
        at: At::Entry,
        when: None,
        values: Vec::new(),
        unmapped: Vec::new(),
    };
    for field in rules::fields_of(kind) {
        match map(kind, format, field) {
            Ok(value) => found.values.push((field.to_string(), value)),
            Err(why) => found.unmapped.push((field.to_string(), why)),
        }
    }
    // A tracepoint fires once, so nothing times it: a restore's latency comes only from a
    // field the kernel fills (the reference module's `latency_ns`).
    if kind == EventKind::Restore {
        match map(kind, format, "latency") {
            Ok(value) => found.values.push(("latency".to_string(), value)),
            Err(why) => found.unmapped.push(("latency".to_string(), why)),
        }
    }
    found
}

fn map(kind: EventKind, format: &Format, field: &str) -> rules::Mapping {
    let named = |test: &dyn Fn(&str, &str) -> bool| {
        format
            .fields
            .iter()
            .filter(|f| !f.name.starts_with("common_") && !f.is_data_loc())
            .find(|f| test(&f.name, &f.c_type))
            .map(|f| f.name.clone())
    };
    let value = |name: String, transform: &str| Ok(format!("field({name}){transform}"));
    match field {
        "dev" => {
            named(&|n, _| n == "dev").map_or_else(|| Err("no dev field".into()), |n| value(n, ""))
        }
        "nid" => named(&|n, t| n == "nid" || t.contains("nid_t"))
            .map_or_else(|| Err("no nid field".into()), |n| value(n, "")),
        "len" => named(&|n, _| n.contains("len"))
            .map_or_else(|| Err("no *len* field".into()), |n| value(n, "")),
        "queue" => match named(&|n, _| n == "queue") {
            Some(n) => value(n, ""),
            None => named(&|n, _| n.contains("slot")).map_or_else(
                || Err("no queue or *slot* field".into()),
                |n| value(n, "|slot_queue"),
            ),
        },
        "reason" => {
            let name = named(&|n, _| ["reason", "by", "why", "step", "err"].contains(&n))
                .ok_or("no reason/by field")?;
            let symbols = print_symbolic(&format.print_fmt, &name);
            if symbols.is_empty() {
                return value(name, "");
            }
            let table = rules::reason_codes(kind, &symbols)?;
            if table.iter().all(|&(raw, code)| raw == u32::from(code)) {
                return value(name, "");
            }
            let pairs: Vec<String> = table.iter().map(|(r, c)| format!("{r}={c}")).collect();
            value(name, &format!("|codes({})", pairs.join(",")))
        }
        "latency" => named(&|n, _| n == "latency" || n.ends_with("latency_ns") || n == "ns")
            .map_or_else(
                || Err("no latency/*latency_ns field: no restore latency".into()),
                |n| value(n, ""),
            ),
        other => Err(format!("no rule for {other} in a tracepoint")),
    }
}

/// The (name, value) pairs of `__print_symbolic(REC->field, { 0, "worker" }, ...)` in a print
/// format, for numeric values (a value the kernel left as an enum name is skipped).
fn print_symbolic(print_fmt: &str, field: &str) -> Vec<(String, u32)> {
    let needle = format!("__print_symbolic(REC->{field},");
    let Some(start) = print_fmt.find(&needle) else {
        return Vec::new();
    };
    let rest = &print_fmt[start + needle.len()..];
    let mut pairs = Vec::new();
    let mut depth = 1usize;
    let mut entry = String::new();
    for c in rest.chars() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            '{' => entry.clear(),
            '}' => {
                if let Some(pair) = symbol_pair(&entry) {
                    pairs.push(pair);
                }
                entry.clear();
                continue;
            }
            _ => {}
        }
        entry.push(c);
    }
    pairs
}

/// ` 0, "worker" ` -> ("worker", 0); also `(0)` and hexadecimal values.
fn symbol_pair(entry: &str) -> Option<(String, u32)> {
    let (value, name) = entry.trim_start_matches('{').split_once(',')?;
    let value = value
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    let value = match value.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => value.parse().ok()?,
    };
    let name = name.trim().trim_matches('"').to_string();
    (!name.is_empty()).then_some((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_read_from_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events/f2fs");
        for name in [
            "f2fs_node_cache_second_chance",
            "f2fs_node_cache_fifo",
            "f2fs_other",
        ] {
            fs::create_dir_all(events.join(name)).unwrap();
        }
        let good = events.join("f2fs_node_cache_second_chance/format");
        fs::write(&good, SECOND_CHANCE).unwrap();
        fs::write(events.join("f2fs_other/format"), SECOND_CHANCE).unwrap();
        let fifo =
            std::ffi::CString::new(events.join("f2fs_node_cache_fifo/format").to_str().unwrap())
                .unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let formats = read_formats(dir.path());
        let names: Vec<&str> = formats.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["f2fs_node_cache_second_chance"],
            "no FIFO read, no other event"
        );
    }

    const SECOND_CHANCE: &str = r#"name: f2fs_node_cache_second_chance
ID: 1234
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:nid_t nid;	offset:12;	size:4;	signed:0;
	field:unsigned int queue;	offset:16;	size:4;	signed:0;
	field:int by;	offset:20;	size:4;	signed:1;

print fmt: "dev = (%d,%d), nid = %u, queue = %s, by = %s", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->nid, __print_symbolic(REC->queue, { 0, "raw" }, { 1, "256" }, { 2, "512" }, { 3, "1024" }), __print_symbolic(REC->by, { 0, "worker" }, { 1, "shrinker" }, { 2, "race" })
"#;

    #[test]
    fn a_tracepoints_fields_and_symbolic_reasons_map_by_name() {
        let format = Format::parse(SECOND_CHANCE).unwrap();
        assert_eq!(
            print_symbolic(&format.print_fmt, "by"),
            [
                ("worker".to_string(), 0),
                ("shrinker".to_string(), 1),
                ("race".to_string(), 2)
            ]
        );
        let found = found(EventKind::SecondChance, &format);
        assert!(found.tracepoint);
        assert_eq!(found.symbol, "f2fs/f2fs_node_cache_second_chance");
        assert_eq!(
            found.values,
            [
                ("dev".to_string(), "field(dev)".to_string()),
                ("nid".to_string(), "field(nid)".to_string()),
                ("queue".to_string(), "field(queue)".to_string()),
                (
                    "reason".to_string(),
                    "field(by)|codes(0=1,1=2,2=3)".to_string()
                ),
            ]
        );
        assert!(found.unmapped.is_empty(), "{:?}", found.unmapped);
    }

    #[test]
    fn a_slot_size_field_becomes_a_queue_and_a_missing_field_is_said() {
        let text = SECOND_CHANCE
            .replace("f2fs_node_cache_second_chance", "f2fs_node_cache_compress")
            .replace("unsigned int queue;", "unsigned int slot_size;")
            .replace("REC->queue", "REC->slot_size");
        let format = Format::parse(&text).unwrap();
        let found = found(EventKind::Convert, &format);
        assert!(found.values.contains(&(
            "queue".to_string(),
            "field(slot_size)|slot_queue".to_string()
        )));
        assert_eq!(
            found.unmapped,
            [("len".to_string(), "no *len* field".to_string())]
        );
    }

    const RESTORE: &str = r#"name: f2fs_node_cache_restore
ID: 1235
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:nid_t nid;	offset:12;	size:4;	signed:0;
	field:unsigned int clen;	offset:16;	size:4;	signed:0;
	field:unsigned int slot_size;	offset:20;	size:4;	signed:0;
	field:u64 latency_ns;	offset:24;	size:8;	signed:0;

print fmt: "dev = (%d,%d), nid = %u, clen = %u, slot_size = %u, latency_ns = %llu", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->nid, REC->clen, REC->slot_size, REC->latency_ns
"#;

    #[test]
    fn a_restores_latency_comes_from_the_kernels_field_or_is_said_missing() {
        let found_in = |text: &str| found(EventKind::Restore, &Format::parse(text).unwrap());
        let with = found_in(RESTORE);
        assert_eq!(
            with.values.last(),
            Some(&("latency".to_string(), "field(latency_ns)".to_string()))
        );
        assert!(with.unmapped.is_empty(), "{:?}", with.unmapped);
        let without = found_in(
            &RESTORE
                .replace(
                    "\tfield:u64 latency_ns;\toffset:24;\tsize:8;\tsigned:0;\n",
                    "",
                )
                .replace(", latency_ns = %llu", "")
                .replace(", REC->latency_ns", ""),
        );
        assert!(without.values.iter().all(|(field, _)| field != "latency"));
        assert_eq!(
            without.unmapped,
            [(
                "latency".to_string(),
                "no latency/*latency_ns field: no restore latency".to_string()
            )]
        );
        // Only a restore has one.
        let compress = found(
            EventKind::Convert,
            &Format::parse(&RESTORE.replace("f2fs_node_cache_restore", "f2fs_node_cache_compress"))
                .unwrap(),
        );
        assert!(compress.values.iter().all(|(field, _)| field != "latency"));
    }
}
