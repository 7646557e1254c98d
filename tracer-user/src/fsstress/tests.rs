use super::*;

fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap().flatten() {
            let meta = fs::symlink_metadata(entry.path()).unwrap();
            let rel = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            let size = if meta.is_file() { meta.len() } else { 0 };
            out.push(format!("{rel} {size}"));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("nodescope-fsstress-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn direct_io_buffers_are_page_aligned() {
    for len in [1, 4096, 5000, 131072] {
        let mut buffer = AlignedBuffer::new(len);
        let slice = buffer.as_mut_slice();
        assert_eq!(slice.len(), len);
        assert_eq!(slice.as_ptr() as usize % DIRECT_ALIGN as usize, 0);
    }
}

#[test]
fn the_mixes_have_the_seeds_frequencies() {
    assert_eq!(Mix::Metadata.total(), 4 * 6 + 5 * 3);
    assert_eq!(Mix::Metadata.frequency(Op::Write), 0);
    assert_eq!(Mix::Metadata.frequency(Op::Rename), 5);
    assert_eq!(Mix::Default.frequency(Op::Chown), 3);
    assert_eq!(Mix::Default.total(), 3 + 4 * 4 + 2 * 5 + 10);
    let picks: Vec<Op> = (0..Mix::Metadata.total())
        .map(|d| Mix::Metadata.pick(d))
        .collect();
    assert_eq!(picks.iter().filter(|op| **op == Op::Unlink).count(), 5);
    assert!(picks.iter().all(|op| Mix::Metadata.frequency(*op) > 0));
}

#[test]
fn a_seed_gives_the_same_tree_and_tally_twice_and_another_seed_does_not() {
    let run_once = |name: &str, seed: u64| {
        let dir = scratch(name);
        let config = Config {
            dir: dir.clone(),
            procs: 4,
            ops: 150,
            seed,
            mix: Mix::Default,
        };
        let tally = run(&config).unwrap();
        let shape = tree(&dir);
        fs::remove_dir_all(&dir).unwrap();
        (tally, shape)
    };
    let (a, tree_a) = run_once("a", 7);
    let (b, tree_b) = run_once("b", 7);
    let (c, tree_c) = run_once("c", 8);
    assert_eq!(a, b);
    assert_eq!(tree_a, tree_b);
    assert_eq!(a.total(), 4 * 150);
    assert_ne!(tree_a, tree_c);
    assert!(tree_a.len() > 20, "{tree_a:?}");
    let _ = c;
}

#[test]
fn the_metadata_mix_runs_only_its_operations() {
    let dir = scratch("meta");
    let config = Config {
        dir: dir.clone(),
        procs: 2,
        ops: 200,
        seed: 1,
        mix: Mix::Metadata,
    };
    let tally = run(&config).unwrap();
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(tally.total(), 400);
    for op in Op::ALL {
        if Mix::Metadata.frequency(op) == 0 {
            assert_eq!(tally.done[op as usize], 0, "{}", op.name());
        }
    }
    assert!(tally.done[Op::Mkdir as usize] > 0 && tally.done[Op::Rename as usize] > 0);
    assert!(tally.failures() < tally.total());
}
