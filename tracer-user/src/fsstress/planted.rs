//! Symlinks planted where the workload will create its files (issue 33): nothing outside the
//! worker's directory may change, however the names are laid.
use std::os::unix::fs::{symlink, MetadataExt as _};

use super::*;

const SEED: u64 = 7;

fn config(dir: &Path) -> Config {
    Config {
        dir: dir.to_path_buf(),
        procs: 1,
        ops: 400,
        seed: SEED,
        mix: Mix::Default,
    }
}

/// The names worker 0 leaves at its root in a run of `config` in a scratch directory.
fn names_the_workload_uses(scratch: &Path) -> Vec<String> {
    let dir = scratch.join("dry-run");
    run(&config(&dir)).unwrap();
    let names: Vec<String> = fs::read_dir(dir.join("p0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.len() > 10, "{names:?}");
    names
}

/// Size, content, owner and mode of every file in `dir`.
fn snapshot(dir: &Path) -> Vec<(String, u64, u32, u32, u32, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let content = fs::read(&path).unwrap();
            (
                name,
                meta.len(),
                meta.uid(),
                meta.gid(),
                meta.mode(),
                content,
            )
        })
        .collect();
    files.sort();
    files
}

/// The worker's code in a directory that already exists, bypassing `run`'s refusal, so the
/// operations' own guards are what is tested.
fn run_worker_in_existing(dir: &Path, config: &Config) -> Result<Tally> {
    let root = rfs::openat(rfs::CWD, dir.join("p0"), DIR_FLAGS, Mode::empty())?;
    Worker::new(root, config, 0).run(config)
}

#[test]
fn symlinks_at_the_workloads_names_are_not_followed_by_any_operation() {
    if !crate::system::is_root() {
        say!("note: not root: the workload's chown and mknod fail anyway; size and content are still checked");
    }
    let scratch = tempfile::tempdir().unwrap();
    let names = names_the_workload_uses(scratch.path());
    let outside = scratch.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let dir = scratch.path().join("run");
    let root = dir.join("p0");
    fs::create_dir_all(&root).unwrap();
    for name in &names {
        let target = outside.join(name);
        fs::write(&target, format!("precious {name}\n")).unwrap();
        symlink(&target, root.join(name)).unwrap();
    }
    let before = snapshot(&outside);
    let tally = run_worker_in_existing(&dir, &config(&dir)).unwrap();
    assert_eq!(tally.total(), 400);
    let after = snapshot(&outside);
    let changed: Vec<String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, a)| {
            format!(
                "{}: {} bytes uid {} -> {} bytes uid {}",
                b.0, b.1, b.2, a.1, a.2
            )
        })
        .collect();
    assert!(
        changed.is_empty() && before.len() == after.len(),
        "files outside changed: {changed:?}"
    );
}
