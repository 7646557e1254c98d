//! Node reads by node type on the real kernel (guest.sh). The kernel source, given
//! `--image /dev/<its device>`, sends node reads as events and the model splits them by the
//! node type of each read nid's block on the mounted device.
//! - The glob phase: every node read the kernel counted must be typed (no drops), every nid
//!   must be on the device (the file set was synced before the phase), and the replay reads
//!   inodes (its files are small: their data is inline).
//! - The types phase: one file with direct nodes and an indirect one, read cold. It is runs of
//!   data with holes between, so that no extent maps it and each read walks its node blocks.
//!   The host reads that file's node blocks from the disk's image after the run (sim's
//!   NodeSet): the stream must give exactly that many direct and indirect node reads, and
//!   every node read is typed.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;
use sim::{
    f2fs::{NodeBlock, NodeType},
    nodes::NodeSet,
};

use super::super::results::{expect, Phase};

/// The types phase's file, in the test disk's root.
pub const TYPES_FILE: &str = "types-big";
/// 16 MiB (half of it holes): past the inode's block addresses and both direct nodes', so
/// that the rest hangs off the first indirect node. A multiple of 64 (guest.sh writes 32 of
/// every 64 blocks).
pub const TYPES_FILE_BLOCKS: u64 = 4096;

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
    let by_type = match typed_reads(dir, "glob") {
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

/// The types phase; the verdict's part `types=<inode>+<direct>+<indirect>/<iostat>`.
pub(super) fn check_file(
    dir: &Path,
    disk: &Path,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) -> String {
    match check_file_phase(dir, disk, lines) {
        Ok((part, problems)) => {
            failures.extend(problems.into_iter().map(|p| format!("types: {p}")));
            part
        }
        Err(err) => {
            failures.push(format!("types: {err:#}"));
            "types=?".into()
        }
    }
}

fn check_file_phase(
    dir: &Path,
    disk: &Path,
    lines: &mut Vec<String>,
) -> Result<(String, Vec<String>)> {
    let phase = Phase::load(dir, "types")?;
    let by_type = typed_reads(dir, "types")?;
    let nodes = NodeSet::load(disk).with_context(|| format!("reading {}", disk.display()))?;
    let file_nodes = nodes.nodes_of(TYPES_FILE);
    let mut expected: BTreeMap<&str, u64> = BTreeMap::new();
    for nid in &file_nodes {
        let block = nodes
            .block(*nid)
            .context("a node of the file without its block")?;
        let key = match NodeBlock(&block[..]).node_type() {
            NodeType::Inode => "inode",
            NodeType::Direct => "direct",
            NodeType::Indirect => "indirect",
            NodeType::DoubleIndirect => "double_indirect",
            NodeType::Xattr => "xattr",
        };
        *expected.entry(key).or_default() += 1;
    }
    let got = |name: &str| by_type.get(name).copied().unwrap_or(0);
    let want = |name: &str| expected.get(name).copied().unwrap_or(0);
    let typed: u64 = by_type.values().sum();
    lines.push(format!(
        "  types    {}; by node type (--image): inode {}, direct {}, indirect {}, not in the \
         image {}; the file's nodes in the disk image: {expected:?}",
        phase.summary(),
        got("inode"),
        got("direct"),
        got("indirect"),
        got("not_in_image")
    ));
    let mut problems = Vec::new();
    if want("direct") == 0 || want("indirect") == 0 {
        problems.push(format!(
            "{TYPES_FILE} has no direct or no indirect node: {expected:?}"
        ));
    }
    for name in ["direct", "indirect", "double_indirect", "xattr"] {
        if got(name) != want(name) {
            problems.push(format!(
                "{} {name} node reads, the file has {}",
                got(name),
                want(name)
            ));
        }
    }
    // Its own inode, and the root directory's when the lookup of its name read it.
    if !(1..=2).contains(&got("inode")) || got("not_in_image") != 0 {
        problems.push(format!(
            "{} inode reads and {} not in the image",
            got("inode"),
            got("not_in_image")
        ));
    }
    if typed != phase.iostat_delta || phase.reads() != phase.iostat_delta {
        problems.push(format!(
            "{typed} typed, {} attributed, iostat {}",
            phase.reads(),
            phase.iostat_delta
        ));
    }
    let part = format!(
        "types={}+{}+{}/{}",
        got("inode"),
        got("direct"),
        got("indirect"),
        phase.iostat_delta
    );
    Ok((part, problems))
}

/// Node reads per type over a phase's stream lines, demand and readahead together.
fn typed_reads(dir: &Path, phase: &str) -> Result<BTreeMap<String, u64>> {
    let file = format!("stream_{phase}.jsonl");
    let text = fs::read_to_string(dir.join(&file)).with_context(|| format!("no {file}"))?;
    let mut found = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value = serde_json::from_str::<Value>(line)
            .with_context(|| format!("bad stream line {line:?}"))?;
        let types = &value["node_types"];
        anyhow::ensure!(
            types.as_object().is_some_and(|t| !t.is_empty()),
            "a line without node_types: {line}"
        );
        for name in TYPES {
            let reads = &types[name];
            *found.entry(name.to_string()).or_default() +=
                reads["demand"].as_u64().unwrap_or(0) + reads["readahead"].as_u64().unwrap_or(0);
        }
    }
    Ok(found)
}
