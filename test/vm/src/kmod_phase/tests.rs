use serde_json::Value;

use super::{
    counters::ModuleCounters,
    verdict::{nomem_outcome, startup_discovery_checks},
    *,
};

fn discovery_problems(first: &str, second: &str, probe: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("autodiscover_1.err", first),
        ("autodiscover_2.err", second),
        ("autodiscover_probe.txt", probe),
        ("autodiscover_1.rc", "0"),
        ("autodiscover_2.rc", "0"),
    ] {
        fs::write(dir.path().join(name), text).unwrap();
    }
    let (mut problems, mut lines) = (Vec::new(), Vec::new());
    startup_discovery_checks(dir.path(), &mut problems, &mut lines);
    assert_eq!(lines.len(), 1);
    problems
}

#[test]
fn start_up_discovery_wants_a_cached_discovery_then_a_cache_hit() {
    let first = "nodescope stream: probes: discovered from BTF /sys/kernel/btf/f2fs (split) \
                 on /sys/kernel/btf/vmlinux and kallsyms: 11 of 11 kinds (cached \
                 /run/nodescope/probes-ab-cd.toml)\nnodescope stream: ready";
    let second = "nodescope stream: probes: discovered for this kernel build (11 kinds, \
                  cached /run/nodescope/probes-ab-cd.toml)";
    let probe = "rfc probes from  probes: discovered for this kernel build (11 kinds, ...)";
    assert!(discovery_problems(first, second, probe).is_empty());
    let fewer = first.replace("11 of 11", "10 of 11");
    assert_eq!(discovery_problems(&fewer, second, probe).len(), 1);
    let uncached = first.replace("(cached", "(not cached:");
    assert_eq!(discovery_problems(&uncached, second, probe).len(), 1);
    assert_eq!(discovery_problems(first, "", "").len(), 2);
}

#[test]
fn counters_parse_key_value_lines() {
    let c = ModuleCounters::parse("threshold 25\nrestores 7\nbad line here\nentries_raw 3\n");
    assert_eq!(c.get("threshold"), 25);
    assert_eq!(c.get("restores"), 7);
    assert_eq!(c.get("entries_raw"), 3);
    assert_eq!(c.get("missing"), 0);
    let before = ModuleCounters::parse("restores 2\n");
    assert_eq!(c.delta(&before, "restores"), 5);
}

#[test]
fn the_nomem_trace_names_the_read_that_took_the_fault() {
    let trace = "armed inserts 5 restores 16 restore_nomem 0  fs node: 0 0 0\n\
                 /mnt/t/d-5/f-1 rc=0 inserts 5 restores 16 restore_nomem 0\n\
                 /mnt/t/d-5/f-2 rc=0 inserts 5 restores 18 restore_nomem 1\n";
    let outcome = nomem_outcome(trace).expect("taken");
    assert_eq!(outcome.file, "/mnt/t/d-5/f-2");
    assert_eq!(outcome.rc, "0");
    assert_eq!(outcome.restores, 2);
    assert!(nomem_outcome(
        "armed restores 1 restore_nomem 0\n/f rc=0 restores 2 restore_nomem 0\n"
    )
    .is_none());
}

#[test]
fn the_manifest_is_a_fixed_permutation_of_every_small_file() {
    let script = manifest_script(MANIFEST_SEED);
    assert_eq!(script, manifest_script(MANIFEST_SEED));
    let mut names: Vec<&str> = script
        .split_whitespace()
        .filter(|w| w.starts_with("/mnt/t/"))
        .collect();
    assert_eq!(names.len() as u64, NDIRS * NFILES);
    assert_ne!(names[0], "/mnt/t/d-0/f-0", "not creation order");
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len() as u64, NDIRS * NFILES, "each file once");
}

#[test]
fn the_sums_script_names_every_file_once() {
    let script = sums_script();
    assert_eq!(script.matches("/mnt/t/d-").count() as u64, NDIRS * NFILES);
    assert!(script.contains(" /mnt/t/d-255/f-63\n"));
    assert!(script.ends_with("md5sum /mnt/shaped/* /mnt/sentinel\n"));
}

/// The stream may count fewer entries than the module only by those cached before it
/// attached, never more; a queue off by more is a problem.
#[test]
fn gauges_may_miss_only_the_entries_cached_before_the_stream() {
    let start = ModuleCounters::parse("entries 1\n");
    let end =
        ModuleCounters::parse("entries_raw 10\nentries_256 4\nentries_512 0\nentries_1024 2\n");
    let problems_for = |cache: &str| {
        let cache = serde_json::from_str::<Value>(cache).unwrap();
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        super::exact::gauge_checks(&cache, &start, &end, &mut problems, &mut lines);
        assert_eq!(lines.len(), 1);
        problems
    };
    let slots = r#""slots":{"b256":4,"b512":0,"b1024":2}"#;
    assert!(problems_for(&format!(r#"{{"raw_entries":10,{slots}}}"#)).is_empty());
    assert!(problems_for(&format!(r#"{{"raw_entries":9,{slots}}}"#)).is_empty());
    assert_eq!(
        problems_for(&format!(r#"{{"raw_entries":8,{slots}}}"#)).len(),
        1
    );
    assert_eq!(
        problems_for(&format!(r#"{{"raw_entries":11,{slots}}}"#)).len(),
        1
    );
    let over = r#"{"raw_entries":10,"slots":{"b256":5,"b512":0,"b1024":2}}"#;
    assert_eq!(problems_for(over).len(), 1);
}

/// The next tune after SIGKILL must have a `recover` record that restored and the originals
/// on the device from its start to after its SIGTERM.
#[test]
fn the_next_tune_must_recover_and_hold_the_originals() {
    let ok_with = |audit: &str, started: &str| {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("tune_next.jsonl", audit),
            ("knobs_after_next.txt", started),
            ("knobs_after_next_term.txt", "25 1000\n"),
            ("tune_next.rc", "0\n"),
        ] {
            fs::write(dir.path().join(name), text).unwrap();
        }
        let mut problems = Vec::new();
        let ok = super::tune::next_tune_restored(dir.path(), "25 1000", "25 100", &mut problems);
        assert_eq!(ok, problems.is_empty());
        ok
    };
    let recovered = r#"{"event":"recover","outcome":"restored"}
{"event":"start","outcome":"unchanged"}"#;
    assert!(ok_with(recovered, "25 1000\n"));
    assert!(!ok_with(
        r#"{"event":"start","outcome":"unchanged"}"#,
        "25 1000\n"
    ));
    assert!(!ok_with(recovered, "25 100\n"));
}
