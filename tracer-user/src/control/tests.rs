//! The controller on the model's windows: signals, decisions, polls, restores.
use std::fs;

use tracer_common::{
    knobs::{INTERVAL_FILE, THRESHOLD_FILE},
    Event, EventKind, FLAG_READAHEAD, QUEUE_256, QUEUE_RAW,
};

use super::*;
use crate::model::ModelConfig;

const SECOND: u64 = 1_000_000_000;

fn event(kind: EventKind, ts_ns: u64, queue: u8) -> Event {
    Event {
        kind: kind as u8,
        ts_ns,
        queue,
        tgid: 42,
        pid: 42,
        ..Event::ZERO
    }
}

/// Window 0: 10 demand and 2 readahead reads, 6 conversions (nids 0..6) to the 256-byte
/// queue. Window 1: 4 restores (nids 0..4, about a second after their conversions: eager),
/// 1 compressed and 3 raw entries reclaimed. Window 2: nothing.
fn model_with_three_windows() -> Model {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    let at = |ms: u64| ms * 1_000_000;
    for i in 0..10 {
        model.ingest(&event(EventKind::NodeRead, at(i), QUEUE_RAW));
    }
    for i in 10..12 {
        let mut read = event(EventKind::NodeRead, at(i), QUEUE_RAW);
        read.flags = FLAG_READAHEAD;
        model.ingest(&read);
    }
    for i in 20..26 {
        let mut convert = event(EventKind::Convert, at(i), QUEUE_256);
        convert.nid = (i - 20) as u32;
        model.ingest(&convert);
    }
    for i in 0..4 {
        let mut restore = event(EventKind::Restore, SECOND + at(i), QUEUE_256);
        restore.nid = i as u32;
        model.ingest(&restore);
    }
    model.ingest(&event(EventKind::Reclaim, SECOND + at(10), QUEUE_256));
    for i in 0..3 {
        model.ingest(&event(EventKind::Reclaim, SECOND + at(20 + i), QUEUE_RAW));
    }
    model.advance_to(3 * SECOND);
    model
}

#[test]
fn model_signals_are_rates_over_recent_windows_with_the_last_gauges() {
    let model = model_with_three_windows();
    let history = model.history();
    assert_eq!(history.len(), 3);
    let two = ModelSignals {
        rate_period: Duration::from_secs(2),
    };
    let signals = two.signals(history, 1, Some(7.5), Some(1 << 20)).unwrap();
    assert_eq!(
        signals,
        Signals {
            trailing_s: 2.0,
            node_reads_per_s: 6.0,
            restores_per_s: 2.0,
            conversions_per_s: 3.0,
            eager_restores_per_s: 2.0,
            wasted_per_s: 0.5,
            memory_pressure: Some(7.5),
            // 7 raw blocks, 1 slot of 256 B, 8 entries of 88 B.
            attributed_bytes: Some(7 * 4096 + 256 + 8 * 88),
            budget_bytes: Some(1 << 20),
        }
    );
    let later = two.signals(history, 2, None, None).unwrap();
    assert_eq!(later.trailing_s, 2.0);
    assert_eq!(later.node_reads_per_s, 0.0);
    assert_eq!(later.restores_per_s, 2.0);
    assert_eq!(later.conversions_per_s, 0.0);
    assert_eq!(later.wasted_per_s, 0.5);
    assert_eq!(later.memory_pressure, None);
    // The first window alone, even with room for five: 12 reads, 6 raw + 6 compressed.
    let first = ModelSignals::default()
        .signals(history, 0, None, None)
        .unwrap();
    assert_eq!(first.trailing_s, 1.0);
    assert_eq!(first.node_reads_per_s, 12.0);
    assert_eq!(first.conversions_per_s, 6.0);
    assert_eq!(first.attributed_bytes, Some(6 * 4096 + 6 * 256 + 12 * 88));
    assert_eq!(
        ModelSignals::default().signals(history, 9, None, None),
        None
    );
}

/// A knob directory with device vdb at 10 % and 1000 ms, removed even when a test fails.
fn knob_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("vdb")).unwrap();
    fs::write(dir.path().join("vdb").join(THRESHOLD_FILE), "10\n").unwrap();
    fs::write(dir.path().join("vdb").join(INTERVAL_FILE), "1000\n").unwrap();
    dir
}

fn knobs(root: &Path) -> (String, String) {
    let read = |name: &str| fs::read_to_string(root.join("vdb").join(name)).unwrap();
    (read(THRESHOLD_FILE), read(INTERVAL_FILE))
}

fn vdb() -> Vec<String> {
    vec!["vdb".to_string()]
}

fn no_psi() -> TuningOptions {
    TuningOptions {
        psi: None,
        ..TuningOptions::default()
    }
}

#[test]
fn top_tune_claims_its_device_like_tune_does() {
    let dir = knob_dir();
    let root = dir.path().to_path_buf();
    let state = tempfile::tempdir().unwrap();
    let options = TuningOptions {
        state_dir: Some(state.path().join("state")),
        ..no_psi()
    };
    let tuning = Tuning::start_with(&root, &vdb(), false, None, options.clone()).unwrap();
    let err = Tuning::start_with(&root, &vdb(), false, None, options.clone())
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains(&format!(
            "vdb is already tuned by pid {}",
            std::process::id()
        )),
        "{err:#}"
    );
    // A dry run writes nothing, so it claims nothing and may watch alongside.
    drop(Tuning::start_with(&root, &vdb(), true, None, options.clone()).unwrap());
    drop(tuning);
    drop(Tuning::start_with(&root, &vdb(), false, None, options).unwrap());
}

#[test]
fn tuning_steps_on_closed_windows_writes_logs_and_restores_on_drop() {
    let dir = knob_dir();
    let root = dir.path().to_path_buf();
    let audit = root.join("audit.jsonl");
    let mut tuning =
        Tuning::start_with(&root, &vdb(), false, Some(audit.clone()), no_psi()).unwrap();
    let mut decisions: Vec<String> = Vec::new();
    let mut model = model_with_three_windows();
    // 29,632 B attributed against 95 % of a 16 KiB budget: score 1.90, compress more
    // (threshold + 10, interval / 1.90).
    model.observe_gauges(Some(16 << 10), None);
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(tuning.mode(), "on vdb");
    assert_eq!(knobs(&root), ("20\n".into(), "525\n".into()));
    let lines: Vec<&String> = decisions.iter().collect();
    assert_eq!(
        lines.len(),
        1,
        "only the newest window on the first refresh"
    );
    assert!(
        lines[0].starts_with("window 3: applied: memory score 1.90"),
        "{}",
        lines[0]
    );
    // Nothing new closed: no new decision.
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(decisions.len(), 1);
    // Two more windows: two more decisions, oldest first.
    model.advance_to(5 * SECOND);
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(decisions.len(), 3);
    assert!(decisions[1].starts_with("window 4: "));
    assert!(decisions[2].starts_with("window 5: "));

    drop(tuning);
    assert_eq!(knobs(&root), ("10\n".into(), "1000\n".into()));
    let log = fs::read_to_string(&audit).unwrap();
    let events: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|line| line["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        events,
        ["start", "decision", "decision", "decision", "restore"]
    );
}

#[test]
fn polls_between_windows_compress_more_when_memory_crosses_or_grows() {
    let dir = knob_dir();
    let root = dir.path().to_path_buf();
    let mut tuning = Tuning::start_with(&root, &vdb(), false, None, no_psi()).unwrap();
    let mut decisions: Vec<String> = Vec::new();
    let mut model = Model::new(ModelConfig::default());
    model.observe_gauges(Some(16 << 10), None);
    model.start_at(0);
    let read = |model: &mut Model, ms: u64| {
        model.ingest(&event(EventKind::NodeRead, ms * 1_000_000, QUEUE_RAW));
    };
    // 10 raw entries inside window 1: 41,840 B against 95 % of 16 KiB, score 2.69.
    (1..=10).for_each(|ms| read(&mut model, ms));
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(knobs(&root), ("20\n".into(), "372\n".into()));
    assert_eq!(decisions.len(), 1);
    assert!(
        decisions[0]
            .starts_with("window 1 (poll): applied: urgent (between windows): memory score 2.69"),
        "{}",
        decisions[0]
    );
    // Same score: nothing. Twice the memory (5.38 >= 1.1 x 2.69): the next step at once.
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(decisions.len(), 1);
    (11..=20).for_each(|ms| read(&mut model, ms));
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(knobs(&root), ("25\n".into(), "100\n".into()));
    assert_eq!(decisions.len(), 2);
    drop(tuning);
    assert_eq!(knobs(&root), ("10\n".into(), "1000\n".into()));
}

#[test]
fn the_sources_own_pressure_replaces_psi() {
    let dir = knob_dir();
    let root = dir.path().to_path_buf();
    let psi = root.join("psi");
    fs::write(&psi, "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
    let options = TuningOptions {
        psi: Some(psi),
        ..TuningOptions::default()
    };
    let mut tuning = Tuning::start_with(&root, &vdb(), false, None, options).unwrap();
    let mut decisions: Vec<String> = Vec::new();
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    // The machine is calm (PSI 0 %), the simulated phone is not (20 %, score 4).
    model.observe_gauges(None, Some(20.0));
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(knobs(&root), ("20\n".into(), "250\n".into()));
    assert!(
        decisions[0].contains("pressure 20.00 %"),
        "{}",
        decisions[0]
    );
    drop(tuning);
}

#[test]
fn dry_run_decides_and_writes_nothing_and_bad_knobs_refuse_to_start() {
    let dir = knob_dir();
    let root = dir.path().to_path_buf();
    let mut tuning = Tuning::start_with(&root, &vdb(), true, None, no_psi()).unwrap();
    let mut decisions: Vec<String> = Vec::new();
    let mut model = model_with_three_windows();
    model.observe_gauges(Some(16 << 10), None);
    decisions.extend(tuning.step(&model).unwrap());
    assert_eq!(tuning.mode(), "dry-run vdb");
    assert!(decisions[0].contains(": dry-run: "), "{}", decisions[0]);
    drop(tuning);
    assert_eq!(knobs(&root), ("10\n".into(), "1000\n".into()));

    fs::write(root.join("vdb").join(INTERVAL_FILE), "50\n").unwrap();
    let err = Tuning::start(&root, &vdb(), false, None).err().unwrap();
    assert!(
        format!("{err:#}").contains("outside the valid range 100..=30000"),
        "{err:#}"
    );
    let err = Tuning::start(&root, &["vdc".to_string()], false, None)
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("no device directory"),
        "{err:#}"
    );
    let err = Tuning::start(&root, &vdb(), true, Some("-".into()))
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("stdout is the screen"),
        "{err:#}"
    );
}
