//! `nodescope report REC --image IMG` (issue 31): node reads told apart by node type, from the
//! image's blocks. An image made by mkfs.f2fs and sload.f2fs with one 16 MiB file (its inode
//! holds fewer than 923 block addresses, its two direct nodes 2,036 more, so the rest hangs off
//! its first indirect node), every node read once on demand and the big file's nodes once more
//! by readahead.
use std::{fs::File, io::BufWriter, process::Command};

use nodescope::record::{writer::Writer, Header};
use sim::{fileset::vm::VmFileSet, nodes::NodeSet};
use tracer_common::{Event, EventKind, FLAG_READAHEAD};

/// Blocks of the big file: past the inode's and both direct nodes' addresses, within the
/// first indirect node's.
const BIG_FILE_BLOCKS: u32 = 4096;

#[test]
fn node_reads_are_split_by_the_node_type_of_their_blocks() {
    let files = VmFileSet {
        dirs: 2,
        files_per_dir: 3,
        shaped_blocks: vec![BIG_FILE_BLOCKS],
        shaped_copies: 1,
        image_bytes: 128 << 20,
    };
    let image = sim::fileset::build_image(&files.manifest()).unwrap();
    let nodes = NodeSet::load(&image).unwrap();
    let big = nodes.nodes_of(&format!("shaped/b-{BIG_FILE_BLOCKS}-0"));
    // The inode, two direct nodes, the indirect node and the direct nodes under it.
    assert!(big.len() >= 5, "{big:?}");
    let inodes = nodes.len() - (big.len() - 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reads.nsr");
    let header = Header {
        source: "sim".into(),
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    let mut writer = Writer::new(BufWriter::new(File::create(&path).unwrap()), &header).unwrap();
    let mut ts = 1_000;
    let mut read = |nid: u32, flags: u8| {
        ts += 1_000;
        let event = Event::new(EventKind::NodeRead, ts)
            .task(7)
            .nid(nid)
            .flags(flags);
        writer.event(&event).unwrap();
    };
    for &nid in nodes.nids() {
        read(nid, 0);
    }
    for &nid in &big {
        read(nid, FLAG_READAHEAD);
    }
    read(u32::MAX - 1, 0); // a nid the image does not have
    writer.finish(ts).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(["report", "--json", path.to_str().unwrap(), "--image"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let types = &report["node_types"];
    let reads = |name: &str| {
        let of = &types[name];
        (
            of["demand"].as_u64().unwrap(),
            of["readahead"].as_u64().unwrap(),
        )
    };
    let direct = big.len() as u64 - 2;
    assert_eq!(reads("inode"), (inodes as u64, 1), "{types}");
    assert_eq!(reads("direct"), (direct, direct), "{types}");
    assert_eq!(reads("indirect"), (1, 1), "{types}");
    assert_eq!(reads("double_indirect"), (0, 0), "{types}");
    assert_eq!(reads("xattr"), (0, 0), "{types}");
    assert_eq!(reads("not_in_image"), (1, 0), "{types}");
    assert_eq!(
        report["totals"]["node_reads"].as_u64().unwrap(),
        nodes.len() as u64 + big.len() as u64 + 1
    );
}
