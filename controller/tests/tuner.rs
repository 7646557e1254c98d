//! One device under control, in virtual time: external changes, write-rate limit, read-back,
//! dry-run and restore, on in-memory knobs and on a directory of knob files.
use std::{fs, time::Duration};

use anyhow::Result;
use controller::{
    audit::{Event, Outcome},
    knobs::{KnobStore, MemoryKnobs, SysfsKnobs},
    law::Config,
    signals::Signals,
    tuner::{DeviceTuner, Status, TunerOptions},
};
use tempfile::TempDir;
use tracer_common::knobs::{Knob, Knobs, INTERVAL_FILE, THRESHOLD_FILE};

const ORIGINAL: Knobs = Knobs {
    threshold: 10,
    interval_ms: 1000,
};

/// Score 2 (PSI 10 % against the 5 % goal): the law halves the interval each window.
fn tight() -> Signals {
    Signals {
        memory_pressure: Some(10.0),
        ..Signals::default()
    }
}

fn options(dry_run: bool, gap_s: u64) -> TunerOptions {
    TunerOptions {
        dry_run,
        min_write_gap: Duration::from_secs(gap_s),
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn start(store: MemoryKnobs, opts: TunerOptions) -> DeviceTuner<MemoryKnobs> {
    let (tuner, record) = DeviceTuner::start("sim0", store, opts, Duration::ZERO).unwrap();
    assert_eq!(record.event, Event::Start);
    assert_eq!(record.old, Some(ORIGINAL));
    tuner
}

#[test]
fn applies_decisions_reads_them_back_and_restores_the_originals() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let mut tuner = start(device.clone(), options(false, 0));
    let record = tuner.tick(&tight(), secs(1), &Config::default()).unwrap();
    assert_eq!(record.outcome, Outcome::Applied);
    assert_eq!(record.old, Some(ORIGINAL));
    let wanted = Knobs {
        threshold: 20,
        interval_ms: 500,
    };
    assert_eq!(record.new, Some(wanted));
    assert_eq!(record.written, Some(wanted));
    assert_eq!(device.get(), wanted);

    let record = tuner.restore(secs(2)).unwrap();
    assert_eq!(record.event, Event::Restore);
    assert_eq!(record.outcome, Outcome::Restored);
    assert_eq!(device.get(), ORIGINAL);
    assert!(tuner.restore(secs(3)).is_none(), "restore runs once");
    assert!(tuner.tick(&tight(), secs(4), &Config::default()).is_none());
}

#[test]
fn an_external_change_stops_tuning_and_that_knob_is_not_restored() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let mut tuner = start(device.clone(), options(false, 0));
    tuner.tick(&tight(), secs(1), &Config::default()).unwrap();
    device.set(Knob::Threshold, 77);

    let record = tuner.tick(&tight(), secs(2), &Config::default()).unwrap();
    assert_eq!(record.event, Event::ExternalChange);
    assert_eq!(record.outcome, Outcome::Stopped);
    assert_eq!(
        record.reason,
        "sim0/node_compress_threshold is 77 but we last wrote or read 20: someone else changed \
         it; stopped tuning sim0 (a knob changed by someone else is not restored)"
    );
    assert!(matches!(
        tuner.status(),
        Status::Stopped { failed: false, .. }
    ));
    // No further decisions, no further writes.
    assert!(tuner.tick(&tight(), secs(3), &Config::default()).is_none());
    assert_eq!(device.get().interval_ms, 500);

    let record = tuner.restore(secs(4)).unwrap();
    assert_eq!(record.outcome, Outcome::Restored);
    assert!(record
        .reason
        .contains("changed by someone else, left alone"));
    assert_eq!(
        device.get(),
        Knobs {
            threshold: 77,
            interval_ms: 1000
        }
    );
}

#[test]
fn writes_are_limited_to_one_per_knob_per_gap() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let mut tuner = start(device.clone(), options(false, 10));
    let mut outcomes = Vec::new();
    for t in 1..=12 {
        let record = tuner.tick(&tight(), secs(t), &Config::default()).unwrap();
        outcomes.push((t, record.outcome, device.get().interval_ms));
    }
    // Written at 1 s; the next write waits until 11 s although the law asks every second.
    assert_eq!(outcomes[0], (1, Outcome::Applied, 500));
    for &(t, outcome, interval) in &outcomes[1..10] {
        assert_eq!((outcome, interval), (Outcome::RateLimited, 500), "at {t} s");
    }
    assert_eq!(outcomes[10], (11, Outcome::Applied, 250));
    assert_eq!(outcomes[11], (12, Outcome::RateLimited, 250));
    let record = tuner.tick(&tight(), secs(13), &Config::default()).unwrap();
    assert!(record
        .reason
        .contains("(node_compress_interval write deferred: last write 2.0 s ago, limit 10.0 s)"));
}

/// PSI `psi` %: the score is psi / 5.
fn psi(psi: f64) -> Signals {
    Signals {
        memory_pressure: Some(psi),
        ..Signals::default()
    }
}

#[test]
fn urgent_polls_write_past_the_gap_only_when_memory_got_worse() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let mut tuner = start(device.clone(), options(false, 10));
    let cfg = Config::default();
    let ms = Duration::from_millis;
    // Calm: a poll does nothing and logs nothing.
    assert!(tuner.poll(&psi(3.0), ms(100), &cfg).is_none());
    // The crossing (score 2): written at once.
    let record = tuner.poll(&tight(), ms(200), &cfg).unwrap();
    assert_eq!(record.outcome, Outcome::Applied);
    assert!(record.reason.starts_with("urgent (between windows): "));
    assert_eq!(device.get().interval_ms, 500);
    // Not worse by 1.1 x: nothing, although the window would halve again.
    assert!(tuner.poll(&psi(10.9), ms(300), &cfg).is_none());
    // Score 4 (worse than 2.2): written 200 ms after the last write, past the 10 s gap.
    let record = tuner.poll(&psi(20.0), ms(400), &cfg).unwrap();
    assert_eq!(record.outcome, Outcome::Applied);
    assert_eq!(device.get().interval_ms, 125);
    // The window still respects the gap.
    let record = tuner.tick(&psi(40.0), ms(1000), &cfg).unwrap();
    assert_eq!(record.outcome, Outcome::RateLimited);
    assert_eq!(device.get().interval_ms, 125);
    // A poll that finds someone else's value stops tuning like a window does.
    device.set(Knob::Interval, 3000);
    let record = tuner.poll(&psi(100.0), ms(1100), &cfg).unwrap();
    assert_eq!(record.event, Event::ExternalChange);
    assert!(tuner.poll(&psi(100.0), ms(1200), &cfg).is_none());
    assert_eq!(device.get().interval_ms, 3000);
}

#[test]
fn dry_run_decides_and_logs_but_writes_nothing() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let mut tuner = start(device.clone(), options(true, 0));
    let mut proposed = Vec::new();
    for t in 1..=3 {
        let record = tuner.tick(&tight(), secs(t), &Config::default()).unwrap();
        assert_eq!(record.outcome, Outcome::DryRun);
        assert!(record.dry_run);
        assert_eq!(record.written, None);
        proposed.push(record.new.unwrap().interval_ms);
    }
    // The shadow state moves as the real one would, the device does not.
    assert_eq!(proposed, [500, 250, 125]);
    assert_eq!(device.get(), ORIGINAL);
    let record = tuner.restore(secs(4)).unwrap();
    assert_eq!(record.outcome, Outcome::Unchanged);
    assert_eq!(device.get(), ORIGINAL);
}

/// A device that keeps the interval at 1000 whatever is written (as a kernel that clamps).
struct Stubborn(MemoryKnobs);

impl KnobStore for Stubborn {
    fn origin(&self, knob: Knob) -> String {
        self.0.origin(knob)
    }
    fn read(&mut self, knob: Knob) -> Result<u32> {
        self.0.read(knob)
    }
    fn write(&mut self, knob: Knob, value: u32) -> Result<()> {
        let value = if knob == Knob::Interval { 1000 } else { value };
        self.0.write(knob, value)
    }
}

#[test]
fn a_read_back_mismatch_stops_tuning_that_device() {
    let device = MemoryKnobs::new("sim0", ORIGINAL);
    let opts = options(false, 0);
    let (mut tuner, _) =
        DeviceTuner::start("sim0", Stubborn(device.clone()), opts, secs(0)).unwrap();
    let record = tuner.tick(&tight(), secs(1), &Config::default()).unwrap();
    assert_eq!(record.event, Event::Failure);
    assert_eq!(
        record.reason,
        "sim0/node_compress_interval: wrote 500 but read back 1000; stopped tuning sim0"
    );
    assert!(matches!(
        tuner.status(),
        Status::Stopped { failed: true, .. }
    ));
    // The threshold was written before the interval failed: it still goes back.
    assert_eq!(device.get().threshold, 20);
    tuner.restore(secs(2)).unwrap();
    assert_eq!(device.get(), ORIGINAL);
}

/// A fresh `<root>/sim0/` with the two knob files, removed when dropped.
fn knob_dir(threshold: &str, interval: &str) -> TempDir {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("sim0")).unwrap();
    fs::write(root.join("sim0").join(THRESHOLD_FILE), threshold).unwrap();
    fs::write(root.join("sim0").join(INTERVAL_FILE), interval).unwrap();
    dir
}

#[test]
fn sysfs_knobs_refuse_bad_contents_naming_the_file_and_the_content() {
    let dir = knob_dir("150\n", "1000\n");
    let root = dir.path();
    let err = SysfsKnobs::open(root, "sim0", true)
        .unwrap_err()
        .to_string();
    let file = root.join("sim0").join(THRESHOLD_FILE);
    assert_eq!(
        err,
        format!(
            "{} contains \"150\", outside the valid range 0..=100",
            file.display()
        )
    );

    let dir = knob_dir("10\n", "fast\n");
    let root = dir.path();
    let err = SysfsKnobs::open(root, "sim0", true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node_compress_interval contains \"fast\\n\", which is not a whole number")
    );

    let dir = knob_dir("10\n", "1000\n");
    let root = dir.path();
    fs::remove_file(root.join("sim0").join(INTERVAL_FILE)).unwrap();
    let err = SysfsKnobs::open(root, "sim0", true)
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("node_compress_interval is missing (RFC patch \"f2fs: retain clean node blocks in a compressed cache\" not applied?)"), "{err}");
    let err = controller::knobs::discover_devices(root)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not applied?); devices seen: sim0"), "{err}");
}

#[test]
fn sysfs_knobs_write_read_back_and_restore() {
    let dir = knob_dir("10\n", "1000\n");
    let root = dir.path();
    let store = SysfsKnobs::open(root, "sim0", true).unwrap();
    let (mut tuner, _) = DeviceTuner::start("sim0", store, options(false, 0), secs(0)).unwrap();
    tuner.tick(&tight(), secs(1), &Config::default()).unwrap();
    let read = |name: &str| fs::read_to_string(root.join("sim0").join(name)).unwrap();
    assert_eq!(read(THRESHOLD_FILE), "20\n");
    assert_eq!(read(INTERVAL_FILE), "500\n");
    tuner.restore(secs(2)).unwrap();
    assert_eq!(read(THRESHOLD_FILE), "10\n");
    assert_eq!(read(INTERVAL_FILE), "1000\n");
}
