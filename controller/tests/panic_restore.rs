//! The restore guard on panics: a panic on another thread (the panic hook restores while the
//! guard is still alive) and a panic while the session is locked (Drop restores on unwind).
//! Its own test binary, because the panic hook is process-wide.
use std::{fs, panic, path::Path, thread, time::Duration};

use controller::{
    audit::AuditLog,
    knobs::SysfsKnobs,
    law::Config,
    safety::RestoreGuard,
    session::Session,
    signals::{SignalSource, Signals},
    tuner::TunerOptions,
};
use tempfile::TempDir;
use tracer_common::knobs::{INTERVAL_FILE, THRESHOLD_FILE};

struct Tight;

impl SignalSource for Tight {
    fn sample(&mut self, _device: &str, _now: Duration) -> anyhow::Result<Signals> {
        Ok(Signals {
            memory_pressure: Some(20.0),
            ..Signals::default()
        })
    }
}

/// A fresh `<root>/sim0/` with the two knob files, removed when dropped.
fn knob_dir() -> TempDir {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("sim0")).unwrap();
    fs::write(root.join("sim0").join(THRESHOLD_FILE), "10\n").unwrap();
    fs::write(root.join("sim0").join(INTERVAL_FILE), "1000\n").unwrap();
    dir
}

fn knobs_on_disk(root: &Path) -> (String, String) {
    let read = |name: &str| fs::read_to_string(root.join("sim0").join(name)).unwrap();
    (read(THRESHOLD_FILE), read(INTERVAL_FILE))
}

/// A session on `root` that has already written once (threshold 20, interval 250).
fn tuned_session(root: &Path) -> Session<SysfsKnobs> {
    let store = SysfsKnobs::open(root, "sim0", true).unwrap();
    let opts = TunerOptions {
        dry_run: false,
        min_write_gap: Duration::ZERO,
    };
    let audit = AuditLog::to_file(&root.join("audit.jsonl")).unwrap();
    let mut session =
        Session::start(vec![("sim0".into(), store)], opts, Config::default(), audit).unwrap();
    session.tick(&mut Tight, Duration::from_secs(1)).unwrap();
    assert_eq!(knobs_on_disk(root), ("20\n".into(), "250\n".into()));
    session
}

#[test]
fn panics_restore_the_original_values() {
    // One test function: the two cases must not run in parallel under one process-wide hook.
    let dir = knob_dir();
    let root = dir.path();
    let guard = RestoreGuard::arm(tuned_session(root));
    let worker = thread::spawn(|| panic!("worker thread panics (expected by this test)"));
    assert!(worker.join().is_err());
    assert!(!guard.is_armed(), "the panic hook restored");
    assert_eq!(knobs_on_disk(root), ("10\n".into(), "1000\n".into()));
    let audit = fs::read_to_string(root.join("audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .last()
            .unwrap()
            .contains("\"event\":\"restore\""),
        "{audit}"
    );
    drop(guard);

    let dir = knob_dir();
    let root = dir.path();
    let session = tuned_session(root);
    let unwound = panic::catch_unwind(panic::AssertUnwindSafe(|| {
        let guard = RestoreGuard::arm(session);
        let _locked = guard.lock();
        panic!("panics while holding the session (expected by this test)");
    }));
    assert!(unwound.is_err());
    assert_eq!(knobs_on_disk(root), ("10\n".into(), "1000\n".into()));
}
