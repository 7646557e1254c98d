use super::*;

#[test]
fn trials_interleave_off_and_on_then_the_grid() {
    assert_eq!(
        trial_names(2),
        ["off1", "on1", "off2", "on2", "static_25_100", "controller"]
    );
}

fn paths() -> Vec<(String, bool)> {
    let manifest = AndroidFileSet::default().manifest();
    manifest
        .entries
        .iter()
        .map(|e| {
            (
                e.path.trim_end_matches('/').to_string(),
                e.content == Content::Dir,
            )
        })
        .collect()
}

/// Every app gets one media file long enough for an indirect node and an xattr on each of its
/// shared preferences, which its launch reads back.
#[test]
fn the_extra_recipe_gives_every_app_indirect_and_xattr_nodes() {
    let paths = paths();
    let recipe = extra_recipe(&paths, 7);
    let media: Vec<&str> = recipe.lines().filter(|l| l.starts_with("file ")).collect();
    assert_eq!(media.len(), APP_PACKAGES.len());
    assert!(media[0].starts_with("file data/data/com.tencent.mm/files/media.bin 600 10050 "));
    assert!(media[0].contains(" sparse 4608 64 "), "{}", media[0]);
    // The inode's addresses and two direct nodes' cover fewer than 923 + 2 x 1,018 blocks.
    const { assert!(MEDIA_BLOCKS > 923 + 2 * 1018) };
    let prefs = prefs_of(&paths, APP_PACKAGES[0]);
    let xattrs = recipe
        .lines()
        .filter(|l| l.starts_with("xattr data/data/com.tencent.mm/shared_prefs/"))
        .count();
    assert_eq!(xattrs, prefs.len());
    assert!(xattrs >= 8);
    let launch = launch_script(&paths, APP_PACKAGES[0]);
    let getxattr = launch
        .lines()
        .find(|l| l.starts_with("android_data getxattr nodescope "))
        .unwrap();
    assert_eq!(getxattr.matches("/shared_prefs/").count(), prefs.len());
    // One media read per direct node's range: 0, 512, ..., 4096.
    assert_eq!(launch.matches("files/media.bin of=/dev/null").count(), 9);
    assert!(launch.contains(" skip=4096 "));
}

/// Development: the verdict of a guest's results left on disk
/// (`PHONE_RESULTS=<dir> PHONE_TRIALS=<n> cargo test -p xtask verdict_of_results -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn verdict_of_results() {
    let Ok(dir) = std::env::var("PHONE_RESULTS") else {
        return;
    };
    let trials = std::env::var("PHONE_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let verdict = verdict::verdict("6.12", Path::new(&dir), trials).unwrap();
    for line in verdict.lines.iter().chain([&verdict.final_line]) {
        println!("{line}");
    }
    for problem in &verdict.problems {
        println!("problem: {problem}");
    }
}
