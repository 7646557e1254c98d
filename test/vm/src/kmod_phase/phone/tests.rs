use std::fs;

use super::*;

#[test]
fn the_static_settings_come_first_then_off_and_on_interleaved() {
    assert_eq!(
        trial_names(2),
        ["static_25_100", "off1", "on1", "off2", "on2", "controller"]
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

/// The module's row comes from the final snapshot and the trial's deltas; the stream's from its
/// last line; one value apart is one problem, named.
#[test]
fn the_table_is_the_final_snapshot_and_nodescope_must_equal_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
    let iostat = |reads: u64| {
        format!(
            "[WRITE]\nfs node:  0 0\n[READ]\nfs node:  {} {reads}\n",
            reads * 4096
        )
    };
    write("nc_on1_start.txt", "entries 4\nconversions 10\n");
    write(
        "nc_on1_final.txt",
        "entries 100\nentries_raw 40\nentries_256 10\nentries_512 45\nentries_1024 5\n\
         raw_bytes 163840\nslot_bytes 30720\nattributed_bytes 225360\nfixed_bytes 22000\n\
         conversions 130\n",
    );
    write("iostat_on1_start.txt", &iostat(7));
    write("iostat_on1_final.txt", &iostat(507));
    let module = verdict::module_figures(dir.path(), "on1").unwrap();
    assert_eq!(
        module,
        verdict::Figures {
            attached: 100,
            compressed: 60,
            raw_bytes: 163_840,
            slot_bytes: 30_720,
            logical: 203_360,
            slots: [10, 45, 5],
            node_reads: 500,
            conversions: 120,
        }
    );
    // 100 entries x 88 + 163,840 + 30,720 = 203,360: the module's figure without its context.
    let line = |reads: u64| {
        format!(
            "{{\"cache\":{{\"raw_entries\":40,\"slots\":{{\"raw\":0,\"b256\":10,\"b512\":45,\
             \"b1024\":5}},\"raw_bytes\":163840,\"compressed_bytes\":30720,\
             \"attributed_bytes\":203360}},\"cumulative\":{{\"node_reads\":{reads},\
             \"conversions\":120}}}}\n"
        )
    };
    write("on1_stream.jsonl", &format!("{{}}\n{}", line(500)));
    let mut problems = Vec::new();
    let ours = verdict::stream_figures(dir.path(), "on1").unwrap();
    assert_eq!(
        verdict::compare_rows("stream", "on1", &ours, &module, &mut problems),
        (10, 10)
    );
    write("on1_stream.jsonl", &line(499));
    let ours = verdict::stream_figures(dir.path(), "on1").unwrap();
    assert_eq!(
        verdict::compare_rows("stream", "on1", &ours, &module, &mut problems),
        (9, 10)
    );
    assert_eq!(problems, ["stream on1: node reads 499, the module's 500"]);
}

/// Each phase's memory is charged over one span for all runs: a run whose phase took twice as
/// long at the same mean costs the same, and memory held in a long phase weighs more.
#[test]
fn memory_is_charged_per_phase_over_one_span() {
    let parts = |seconds: f64, bytes: [f64; 5]| verdict::CostParts {
        node_reads: 1000,
        phases: bytes.map(|mean_bytes| verdict::PhaseMemory {
            mean_bytes,
            seconds,
        }),
        conversions: 90,
    };
    let spans = [30.0; 5];
    // 1,000 reads + 4 KiB held over the five 30 s spans (2.5 reads) + 90 conversions x 4/90.
    let held = [4096.0; 5];
    assert!((parts(15.0, held).cost(&spans) - 1006.5).abs() < 1e-9);
    assert_eq!(
        parts(15.0, held).cost(&spans),
        parts(60.0, held).cost(&spans)
    );
    // 16 KiB in the seed phase only: the same two reads' worth over one 30 s span.
    let seed_only = [16_384.0, 0.0, 0.0, 0.0, 0.0];
    assert!((parts(15.0, seed_only).cost(&spans) - 1006.0).abs() < 1e-9);
    let long_seed = [60.0, 20.0, 20.0, 20.0, 20.0];
    assert!((parts(15.0, seed_only).cost(&long_seed) - 1008.0).abs() < 1e-9);
}

/// A trial's samples split at its marks: each interval in the phase its middle falls in.
#[test]
fn samples_are_split_into_phases_at_the_marks() {
    let samples = [
        (0.0, 0.0),
        (1.0, 2.0),
        (2.0, 2.0),
        (3.0, 4.0),
        (4.0, 4.0),
        (5.5, 6.0),
    ];
    let phases = verdict::phase_memory(&samples, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.5]);
    let got: Vec<(f64, f64)> = phases.iter().map(|p| (p.mean_bytes, p.seconds)).collect();
    assert_eq!(
        got,
        [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0), (5.0, 1.5)]
    );
}

/// The what-ifs' pairs: summed, their means rounded to the nearest, each count shown with its
/// error against the measured one; no mean without a pair.
#[test]
fn whatif_pairs_are_compared_on_their_rounded_means() {
    let mut sums = verdict::PairSums::default();
    assert_eq!(sums.means(), None);
    sums.add([100, 10, 7], [110, 10, 0]);
    sums.add([201, 11, 8], [110, 20, 0]);
    let (predicted, measured) = sums.means().unwrap();
    assert_eq!((predicted, measured), ([151, 11, 8], [110, 15, 0]));
    assert_eq!(
        verdict::compared(predicted, measured),
        "node reads 151 / 110 (+37.3 %), restores 11 / 15 (-26.7 %), entries at the end 8 / 0 (-)"
    );
}
