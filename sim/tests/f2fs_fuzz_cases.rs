//! The f2fs_image fuzz target's committed inputs (tracer-user/fuzz), replayed as ordinary
//! tests: the seed, a real image made by mkfs.f2fs + sload.f2fs, loads with exactly its node
//! blocks; every input that once crashed the reader (tracer-user/fuzz/regressions/f2fs_image)
//! is now refused with an error.
use std::path::{Path, PathBuf};

use sim::{f2fs::sparse::write_image, nodes::NodeSet};

fn fuzz_inputs(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tracer-user/fuzz")
        .join(kind)
        .join("f2fs_image");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
}

/// Load the image `input` describes, as the fuzz target does.
fn load(input: &Path) -> anyhow::Result<NodeSet> {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("image");
    let file = std::fs::File::create(&path).unwrap();
    assert!(write_image(&std::fs::read(input).unwrap(), &file).unwrap());
    NodeSet::load(&path)
}

#[test]
fn the_seed_image_loads_with_its_seven_inodes() {
    let seeds = fuzz_inputs("seeds");
    assert_eq!(seeds.len(), 1, "{seeds:?}");
    let nodes = load(&seeds[0]).unwrap();
    // /, a.txt, dir, dir/b.bin, dir/sub, dir/sub/c, link: one inode block each.
    assert_eq!(nodes.len(), 7);
    assert!(nodes.nid_of("dir/sub/c").is_some());
    assert!(nodes.inode_checksums);
}

#[test]
fn inputs_that_once_crashed_the_reader_are_refused_with_an_error() {
    let inputs = fuzz_inputs("regressions");
    assert!(!inputs.is_empty());
    for input in inputs {
        match load(&input) {
            Ok(nodes) => panic!("{} loaded {} nodes", input.display(), nodes.len()),
            Err(err) => eprintln!("{}: {err:#}", input.display()),
        }
    }
}
