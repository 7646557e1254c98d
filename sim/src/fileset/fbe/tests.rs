use std::{fmt::Write as _, fs};

use super::*;
use crate::fileset::android::AndroidFileSet;

fn recipe_lines() -> Vec<String> {
    let set = AndroidFileSet::default();
    recipe(&set.manifest(), set.seed)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn app_labels_carry_levelfrom_all_categories() {
    // App id 57 of user 0; app id 300 of user 10 (uid 1010300).
    assert_eq!(
        app_data_label(10_057),
        "u:object_r:app_data_file:s0:c57,c256,c512,c768"
    );
    assert_eq!(
        app_data_label(1_010_300),
        "u:object_r:app_data_file:s0:c44,c257,c522,c768"
    );
}

#[test]
fn keys_come_first_and_policies_sit_where_android_sets_them() {
    let lines = recipe_lines();
    let keys: Vec<&str> = lines
        .iter()
        .take_while(|l| l.starts_with("key "))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(keys, KEYS);
    for line in &lines[..3] {
        assert_eq!(line.split(' ').nth(2).unwrap().len(), 128, "{line}");
    }
    let policies: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l.starts_with("dir ") && l.split(' ').count() == 7)
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[1], f[6])
        })
        .collect();
    assert_eq!(
        policies,
        [
            ("data/app", "system_de"),
            ("data/data", "user0_ce"),
            ("data/user_de/0", "user0_de"),
            ("data/system", "system_de"),
        ]
    );
    assert!(lines[3].starts_with("dir data 771 1000 1000 u:object_r:system_data_root_file:s0"));
}

#[test]
fn app_data_belongs_to_the_app_and_its_cache_to_the_cache_gid() {
    let uid = android::app_uid(1);
    let package = android::APP_PACKAGES[1];
    let label = app_data_label(uid);
    let db = metadata(&format!("data/data/{package}/databases/db0.db"), false);
    assert_eq!((db.uid, db.gid, db.mode), (uid, uid, 0o600));
    assert_eq!(db.label, label);
    let top = metadata(&format!("data/data/{package}"), true);
    assert_eq!((top.uid, top.mode, top.policy), (uid, 0o700, None));
    let cache = metadata(&format!("data/data/{package}/cache"), true);
    let cache_gid = uid - 10_000 + 20_000;
    assert_eq!((cache.gid, cache.mode), (cache_gid, 0o2771));
    let cached = metadata(&format!("data/data/{package}/cache/0a/ff"), false);
    assert_eq!((cached.uid, cached.gid), (uid, cache_gid));
    let apk = metadata(&format!("data/app/{package}/base.apk"), false);
    assert_eq!(
        (apk.uid, apk.mode, apk.label.as_str()),
        (1000, 0o644, "u:object_r:apk_data_file:s0")
    );
    let de = metadata(&format!("data/user_de/0/{package}"), true);
    assert_eq!((de.uid, de.label), (uid, label));
}

#[test]
fn every_manifest_entry_is_in_the_recipe_once_with_the_layouts_own_dirs() {
    let set = AndroidFileSet::default();
    let manifest = set.manifest();
    let lines = recipe_lines();
    let paths: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with("key "))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    // Each app's lib/ and oat/ are made by the recipe, not listed by the manifest.
    assert_eq!(paths.len(), manifest.entries.len() + 2 + APP_COUNT * 3);
    let unique: BTreeSet<&&str> = paths.iter().collect();
    assert_eq!(unique.len(), paths.len());
    // Parents come before children.
    for (at, path) in paths.iter().enumerate() {
        if let Some((parent, _)) = path.rsplit_once('/') {
            assert!(paths[..at].contains(&parent), "{path} before {parent}");
        }
    }
    let prefs = lines
        .iter()
        .find(|l| l.contains("shared_prefs/pref0.xml"))
        .unwrap();
    assert!(prefs.contains(" text 3c3f786d6c"), "{prefs}");
}

const APP_COUNT: usize = android::APP_PACKAGES.len();

#[test]
fn fingerprints_follow_the_recipe_and_the_format() {
    let lines = recipe_lines().join("\n");
    let other = lines.replacen(" zeros ", " zeros 9", 1);
    assert_eq!(fingerprint(&lines, 1 << 30), fingerprint(&lines, 1 << 30));
    assert_ne!(fingerprint(&lines, 1 << 30), fingerprint(&other, 1 << 30));
    assert_ne!(fingerprint(&lines, 1 << 30), fingerprint(&lines, 2 << 30));
}

#[test]
fn a_bad_index_line_is_named() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("x.index");
    fs::write(&path, "3 data\nfour data/app\n").unwrap();
    let error = format!("{:#}", read_index(&path).unwrap_err());
    assert!(error.contains("x.index:2: not `INO PATH`"), "{error}");
    fs::write(&path, "3 data\n4 data\n").unwrap();
    let error = format!("{:#}", read_index(&path).unwrap_err());
    assert!(error.contains("data twice"), "{error}");
    fs::write(&path, "3 data\n4 data/app\n").unwrap();
    let index = read_index(&path).unwrap();
    assert_eq!(index.get("data/app"), Some(&4));
}

/// The audit must fail an image without encryption or labels: the plain image of the same
/// file set (sload.f2fs), indexed by the names its inodes keep.
#[test]
fn the_audit_fails_the_plain_image_of_the_same_file_set() {
    let set = AndroidFileSet::default();
    let image = crate::fileset::build_image(&set.manifest()).unwrap();
    let opened = crate::f2fs::Image::open(&image).unwrap();
    let inodes: Vec<_> = opened
        .nodes()
        .unwrap()
        .iter()
        .filter_map(|(nid, block)| crate::f2fs::image::inode_info(*nid, block))
        .collect();
    let dir = tempfile::TempDir::new().unwrap();
    let index = dir.path().join("plain.index");
    let mut text = String::new();
    for (nid, path) in crate::f2fs::Image::paths(&inodes, opened.superblock.root_ino) {
        if path != "/" {
            let _ = writeln!(text, "{nid} {}", path.trim_start_matches('/'));
        }
    }
    fs::write(&index, text).unwrap();
    let audit = audit(&EncryptedImage {
        image: image.clone(),
        index,
    })
    .unwrap();
    assert!(!audit.passes(), "{}", audit.summary());
    // sload's features, no context, no label, every name in plaintext.
    assert_eq!(audit.features, 0x0008 | 0x0020 | 0x0800);
    assert!(
        audit.files > 15_000 && audit.encrypted_names > 15_000,
        "{}",
        audit.summary()
    );
    assert_eq!(
        (
            audit.ciphertext_names_ok,
            audit.contexts_ok,
            audit.labels_ok
        ),
        (0, 0, 0)
    );
    assert_eq!(audit.files_with_context + audit.files_with_label, 0);
    assert_eq!(
        audit.problems.len(),
        8,
        "the first problems are kept: {:?}",
        audit.problems
    );
}
