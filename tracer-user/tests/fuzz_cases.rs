//! The manifest and packages fuzz targets' seeds (tracer-user/fuzz/seeds/<target>), read as
//! ordinary tests with what they must give, exactly. (Inputs that crash a target are kept
//! under tracer-user/fuzz/regressions/<target> and replayed by a test of the crate they
//! crashed: sim/tests/f2fs_fuzz_cases.rs.)
use std::path::{Path, PathBuf};

use nodescope::{model::Packages, source::bpf::Manifest};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `fuzz/seeds/<target>`, sorted.
fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join("seeds").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

#[test]
fn manifest_seeds_are_the_built_in_manifests_and_parse_without_errors() {
    let seeds = seeds("manifest");
    assert_eq!(seeds.len(), 2, "{seeds:?}");
    for (path, bytes) in seeds {
        let built_in = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("probes")
            .join(path.file_name().unwrap());
        assert_eq!(
            bytes,
            std::fs::read(&built_in).unwrap(),
            "{}",
            path.display()
        );
        let manifest = Manifest::parse("seed", std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert!(manifest.errors.is_empty(), "{:?}", manifest.errors);
        assert!(!manifest.probes.is_empty());
    }
}

#[test]
fn packages_seed_names_shared_uids_and_other_users() {
    let seeds = seeds("packages");
    assert_eq!(seeds.len(), 1);
    let packages = Packages::parse(std::str::from_utf8(&seeds[0].1).unwrap());
    // 10120, 10121, 1000, 2000, 10200 (two packages), 10150 (user 10).
    assert_eq!(packages.len(), 6);
    assert_eq!(
        packages.app_name(10_200).as_deref(),
        Some("com.shared.one+com.shared.two")
    );
    assert_eq!(
        packages.app_name(1_010_150).as_deref(),
        Some("com.work.profile (user 10)")
    );
    assert_eq!(packages.app_name(1000), None);
}
