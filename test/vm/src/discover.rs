//! The VM test's `probe --discover` phase (guest.sh: discover_phase). In the guest nodescope
//! reads the stock kernel's BTF (/sys/kernel/btf/vmlinux, f2fs's split BTF) and kallsyms and
//! writes a manifest; it and HAND_WRITTEN are streamed side by side over one cold replay. Here:
//! discover found the node lookup and the node read functions with their nid argument, both
//! streams ran, the generated manifest counted exactly what the hand-written one did, and its
//! node reads (read_node_page returning 0) are iostat's "fs node" reads, exactly.
use std::{collections::BTreeMap, fs, path::Path};

use serde_json::Value;

/// What a person writes for mainline's node read path (6.1 and 6.12 both have
/// read_node_page(struct page *page, blk_opf_t op_flags); page->index is the nid, at offset
/// 32 in struct page on x86_64): read_node_page returns 0 when it submitted a read.
pub const HAND_WRITTEN: &str = r#"target = "kernel"

[[probe]]
kind = "node_read"
symbol = "read_node_page"
at = "return"
when = "ret == 0"
nid = "mem(arg0+32):u32"
"#;

/// Check the phase; the `discover=<generated>/<hand-written>` node_read counts for the VM line.
pub fn check(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> String {
    let report = fs::read_to_string(dir.join("discover.txt")).unwrap_or_default();
    let line_of = |label: &str| {
        report
            .lines()
            .find(|l| l.trim_start_matches("# ").starts_with(label))
            .unwrap_or("")
            .trim_start_matches("# ")
            .to_string()
    };
    let (lookup, read) = (line_of("node lookup"), line_of("node_read"));
    let btf = fs::read_to_string(dir.join("discover_btf.txt")).unwrap_or_default();
    lines.push(format!(
        "  discover BTF files: {}",
        btf.split_whitespace().collect::<Vec<_>>().join(" ")
    ));
    lines.push(format!("  discover {lookup}"));
    lines.push(format!("  discover {read}"));
    let lookup_ok = lookup.contains(" found ")
        && [
            "f2fs_get_node_page",
            "__get_node_page",
            "f2fs_get_node_folio",
            "__get_node_folio",
        ]
        .iter()
        .any(|name| lookup.contains(&format!("-> {name}")))
        && lookup.contains("nid=arg1");
    if !lookup_ok {
        failures.push(format!(
            "discover: no node lookup with nid=arg1: {lookup:?}"
        ));
    }
    if !(read.contains(" found ") && read.contains("nid=")) {
        failures.push(format!("discover: no node read with its nid: {read:?}"));
    }
    let generated = stream_counts(dir, "gen", failures);
    let hand = stream_counts(dir, "hand", failures);
    let (g, h) = (
        generated.get("node_read").copied().unwrap_or(0),
        hand.get("node_read").copied().unwrap_or(0),
    );
    let iostat = iostat_delta(dir);
    lines.push(format!(
        "  discover counts generated {generated:?} hand-written {hand:?}; iostat fs node reads {iostat:?}"
    ));
    if generated != hand || h == 0 {
        failures.push(format!(
            "discover: generated manifest counted {generated:?}, hand-written {hand:?}"
        ));
    }
    // read_node_page returns 0 exactly when it submitted a read: what iostat counts.
    if iostat != Some(g) {
        failures.push(format!(
            "discover: node_read at return (ret == 0) counted {g}, iostat {iostat:?}"
        ));
    }
    format!("discover={g}/{h}")
}

/// Per-kind RFC probe counts summed over a stream's lines; its exit status must be 0.
fn stream_counts(dir: &Path, which: &str, failures: &mut Vec<String>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let text =
        fs::read_to_string(dir.join(format!("stream_discover_{which}.jsonl"))).unwrap_or_default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            failures.push(format!("discover {which}: bad stream line {line:?}"));
            continue;
        };
        for (kind, count) in value["rfc"].as_object().into_iter().flatten() {
            *counts.entry(kind.to_string()).or_default() += count.as_u64().unwrap_or(0);
        }
    }
    let rc =
        fs::read_to_string(dir.join(format!("stream_discover_{which}.rc"))).unwrap_or_default();
    if rc.trim() != "0" {
        failures.push(format!(
            "discover {which}: stream exit status {:?}",
            rc.trim()
        ));
    }
    counts
}

/// iostat's "fs node" reads over the replay (the streams run a little longer, idle).
fn iostat_delta(dir: &Path) -> Option<u64> {
    let read = |label: &str| {
        fs::read_to_string(dir.join(format!("iostat_discover_{label}.txt")))
            .ok()
            .and_then(|t| super::results::fs_node_reads(&t))
    };
    Some(read("after")?.saturating_sub(read("before")?))
}
