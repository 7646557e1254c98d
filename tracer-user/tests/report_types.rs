//! `nodescope report REC --image IMG` (issue 31): node reads told apart by node type, from the
//! image's blocks. An image made by mkfs.f2fs and sload.f2fs with one 16 MiB file (its inode
//! holds fewer than 923 block addresses, its two direct nodes 2,036 more, so the rest hangs off
//! its first indirect node), every node read once on demand and the big file's nodes once more
//! by readahead. The same recording replayed through `stream --image` gives the same split,
//! window by window.
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
        // A tenth of a second apart: the stream below cuts them into several windows.
        ts += 100_000_000;
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
    // A nid the image does not have.
    read(u32::MAX - 1, 0);
    // A node write a window later: a replay's stream prints whole windows only, and this
    // closes the one holding the last reads.
    ts += 1_000_000_000;
    let write = Event::new(EventKind::NodeWrite, ts).task(7).nid(3);
    writer.event(&write).unwrap();
    writer.finish(ts).unwrap();
    let out = stdout_of(
        Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args(["report", "--json", path.to_str().unwrap(), "--image"])
            .arg(&image),
    );
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let direct = big.len() as u64 - 2;
    let expected = [
        ("inode", (inodes as u64, 1)),
        ("direct", (direct, direct)),
        ("indirect", (1, 1)),
        ("double_indirect", (0, 0)),
        ("xattr", (0, 0)),
        ("not_in_image", (1, 0)),
    ];
    let types = &report["node_types"];
    for (name, reads) in expected {
        assert_eq!(demand_and_readahead(&types[name]), reads, "{name}: {types}");
    }
    assert_eq!(
        report["totals"]["node_reads"].as_u64().unwrap(),
        nodes.len() as u64 + big.len() as u64 + 1
    );
    // The live side: the same recording replayed through `stream --image` splits each
    // window's node reads the same way, and its windows add up to the report's figures.
    let out = stdout_of(
        Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args(["stream", "--json", "--speed", "0", "--source", "replay"])
            .arg(&path)
            .arg("--image")
            .arg(&image),
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(lines.len() > 1, "{lines:?}");
    for (name, reads) in expected {
        let mut summed = (0, 0);
        for line in &lines {
            let (demand, readahead) = demand_and_readahead(&line["node_types"][name]);
            summed = (summed.0 + demand, summed.1 + readahead);
        }
        assert_eq!(summed, reads, "{name} in the stream");
    }
    for line in &lines {
        let typed: u64 = line["node_types"]
            .as_object()
            .unwrap()
            .values()
            .map(|reads| reads["demand"].as_u64().unwrap() + reads["readahead"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(typed), line["totals"]["node_reads"].as_u64(), "{line}");
    }
}

/// The command's standard output; it must have succeeded.
fn stdout_of(command: &mut Command) -> Vec<u8> {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn demand_and_readahead(reads: &serde_json::Value) -> (u64, u64) {
    (
        reads["demand"].as_u64().unwrap(),
        reads["readahead"].as_u64().unwrap(),
    )
}

/// The simulator knows its disk's blocks: its stream splits every window's node reads by
/// node type without `--image`, all of them accounted for.
#[test]
fn the_simulators_stream_splits_each_windows_node_reads_by_type() {
    let out = stdout_of(
        Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args(["stream", "--json", "--source", "sim", "--speed", "20"])
            .args(["--duration", "3"]),
    );
    let text = String::from_utf8(out).unwrap();
    let mut inodes = 0;
    for line in text.lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        let types = line["node_types"]
            .as_object()
            .expect("node_types in every line");
        let typed: u64 = types
            .values()
            .map(|reads| {
                let (demand, readahead) = demand_and_readahead(reads);
                demand + readahead
            })
            .sum();
        assert_eq!(Some(typed), line["totals"]["node_reads"].as_u64(), "{line}");
        assert_eq!(
            demand_and_readahead(&types["not_in_image"]),
            (0, 0),
            "{line}"
        );
        inodes += demand_and_readahead(&types["inode"]).0;
    }
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(inodes > 0, "{text}");
}

/// What `--image` cannot do is said, before anything runs.
#[test]
fn an_image_that_is_no_f2fs_and_a_recording_with_an_image_are_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let not_an_image = dir.path().join("zeros.img");
    std::fs::write(&not_an_image, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args([
            "stream",
            "--json",
            "--source",
            "sim",
            "--duration",
            "1",
            "--image",
        ])
        .arg(&not_an_image)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("is not a readable F2FS image"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(["record", "--source", "sim", "--duration", "1", "-o"])
        .arg(dir.path().join("never.nsr"))
        .arg("--image")
        .arg(&not_an_image)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("nodescope report --image"), "{stderr}");
    assert!(!dir.path().join("never.nsr").exists());
    // A daemon's client opens no source: an image would be silently unused.
    for command in ["top", "stream"] {
        let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args([command, "--image"])
            .arg(&not_an_image)
            .arg("--connect")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("cannot be used with"),
            "{command}: {stderr}"
        );
    }
}
