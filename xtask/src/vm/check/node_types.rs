//! The glob phase streams with `--image /dev/<its device>` (guest.sh): the kernel source then
//! sends node reads as events and the model splits them by the node type of each read nid's
//! block on the mounted device. Every node read the kernel counted must be typed (no drops),
//! every nid must be on the device (the file set was synced before the phase), and the replay
//! reads inodes.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context as _, Result};

use super::{super::json::Json, expect};

/// The node types of the stream's `node_types`, in its order.
const TYPES: [&str; 6] = [
    "inode",
    "direct",
    "indirect",
    "double_indirect",
    "xattr",
    "not_in_image",
];

pub(super) fn check(dir: &Path, reads: u64, lines: &mut Vec<String>, failures: &mut Vec<String>) {
    let by_type = match typed_reads(dir) {
        Ok(found) => found,
        Err(err) => return failures.push(format!("glob node types: {err:#}")),
    };
    let typed: u64 = by_type.values().sum();
    let shown: Vec<String> = TYPES
        .iter()
        .map(|name| format!("{name} {}", by_type.get(*name).copied().unwrap_or(0)))
        .collect();
    lines.push(format!(
        "  glob     by node type (--image): {}, {typed} of {reads}",
        shown.join(", ")
    ));
    let missing = by_type.get("not_in_image").copied().unwrap_or(0);
    let inodes = by_type.get("inode").copied().unwrap_or(0);
    expect(
        failures,
        typed == reads && missing == 0 && inodes > 0,
        format!(
            "glob: {typed} node reads typed of the {reads} counted, {missing} not on the \
             device, {inodes} of inodes"
        ),
    );
}

/// Node reads per type over the phase's stream lines, demand and readahead together.
fn typed_reads(dir: &Path) -> Result<BTreeMap<String, u64>> {
    let text = fs::read_to_string(dir.join("stream_glob.jsonl")).context("no stream_glob.jsonl")?;
    let mut found = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value = Json::parse(line).with_context(|| format!("bad stream line {line:?}"))?;
        let types = value.get("node_types");
        anyhow::ensure!(
            !types.keys().is_empty(),
            "a line without node_types: {line}"
        );
        for name in TYPES {
            let reads = types.get(name);
            *found.entry(name.to_string()).or_default() +=
                reads.get("demand").u64() + reads.get("readahead").u64();
        }
    }
    Ok(found)
}
