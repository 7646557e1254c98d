//! Files prepared by someone else (issue 21): a pre-created simulator knob directory with
//! symlinks inside must not make nodescope write or create anything outside it.
use std::{
    fs,
    os::unix::fs::{symlink, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Command, Output},
};

mod common;

use common::{is_root, recording_header, scratch, NODESCOPE};

/// `<dir>/vdb` with the traps an attacker would set: the stats temporary and the stats file
/// linked to `precious`, a knob linked (dangling) to `never-created`.
struct Traps {
    precious: PathBuf,
    never_created: PathBuf,
}

impl Traps {
    fn set(knob_root: &Path, outside: &Path, dangling_knob: bool) -> Traps {
        let traps = Traps {
            precious: outside.join("precious"),
            never_created: outside.join("never-created"),
        };
        fs::create_dir_all(outside).unwrap();
        fs::write(&traps.precious, "precious\n").unwrap();
        let dev = knob_root.join("vdb");
        fs::create_dir_all(&dev).unwrap();
        symlink(&traps.precious, dev.join(".nodescope_stats.new")).unwrap();
        symlink(&traps.precious, dev.join("nodescope_stats")).unwrap();
        if dangling_knob {
            symlink(&traps.never_created, dev.join("node_compress_threshold")).unwrap();
        }
        traps
    }

    fn assert_untouched(&self, output: &Output) {
        assert_eq!(
            fs::read_to_string(&self.precious).unwrap(),
            "precious\n",
            "a file outside was written: {output:?}"
        );
        assert!(
            !self.never_created.exists(),
            "a file outside was created: {output:?}"
        );
    }
}

fn stream_sim(extra: &[&str], xdg_runtime_dir: &Path) -> Output {
    Command::new(NODESCOPE)
        .args(["stream", "--source", "sim", "--json", "--duration", "1"])
        .args(["--speed", "10"])
        .args(extra)
        .env("XDG_RUNTIME_DIR", xdg_runtime_dir)
        .output()
        .expect("run nodescope stream")
}

#[test]
fn a_knob_directory_prepared_by_another_user_is_refused_and_nothing_outside_is_written() {
    if !is_root() {
        test_skip::skip("needs root to chown");
        return;
    }
    let scratch = scratch("hostile-default");
    let runtime = scratch.path().join("runtime");
    let knob_root = runtime.join("nodescope-sim");
    let traps = Traps::set(&knob_root, &scratch.path().join("outside"), true);
    for path in [&knob_root, &knob_root.join("vdb")] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    let output = stream_sim(&[], &runtime);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "refusing the simulator's knob directory {}: it belongs to uid 65534",
            knob_root.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("rm -r"),
        "the message says the fix: {stderr}"
    );
    traps.assert_untouched(&output);
}

/// The simulator with its knobs in `<dir>/knobs`, our own directory, set with [`Traps`].
fn stream_sim_over_traps(dir: &Path, dangling_knob: bool) -> (PathBuf, Traps, Output) {
    let knob_root = dir.join("knobs");
    let traps = Traps::set(&knob_root, &dir.join("outside"), dangling_knob);
    let output = stream_sim(&["--sysfs-root", knob_root.to_str().unwrap()], dir);
    (knob_root, traps, output)
}

#[test]
fn a_dangling_knob_symlink_in_our_own_directory_is_refused_not_followed() {
    let scratch = scratch("hostile-dangling");
    let (_, traps, output) = stream_sim_over_traps(scratch.path(), true);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    traps.assert_untouched(&output);
}

#[test]
fn stats_symlinks_are_replaced_not_written_through() {
    let scratch = scratch("hostile-stats");
    let (knob_root, traps, output) = stream_sim_over_traps(scratch.path(), false);
    assert!(output.status.success(), "{output:?}");
    traps.assert_untouched(&output);
    let stats = knob_root.join("vdb/nodescope_stats");
    assert!(fs::symlink_metadata(&stats).unwrap().is_file());
    assert!(fs::read_to_string(stats).unwrap().contains("node_reads "));
}

/// A recording whose only process named itself with a screen-clearing escape, and whose note
/// sets the terminal's title.
fn recording_with_escapes(path: &Path) {
    let header = recording_header(1_000_000_000);
    let file = fs::File::create(path).unwrap();
    let mut writer = nodescope::record::writer::Writer::new(file, &header).unwrap();
    for i in 0..10 {
        let event = tracer_common::Event::new(tracer_common::EventKind::NodeRead, i * 1000)
            .task(4242)
            .nid(i as u32)
            .comm("evil\x1b[2J");
        writer.event(&event).unwrap();
    }
    let note = nodescope::record::Note {
        ts_ns: 5000,
        kind: "knobs".into(),
        text: "\x1b]0;pwned\x07".into(),
    };
    writer.note(&note).unwrap();
    writer.finish(20_000).unwrap();
}

#[test]
fn report_text_escapes_control_characters_from_the_recording() {
    let scratch = scratch("escapes");
    let file = scratch.path().join("escapes.nsr");
    recording_with_escapes(&file);
    let output = common::nodescope(&["report", file.to_str().unwrap()]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("evil\\x1b[2J"), "{text}");
    assert!(text.contains("\\x1b]0;pwned\\x07"), "{text}");
}

/// Issue 52, item 7: `stream` without `--json` printed comms raw, so a process named
/// `\e]52;c;...\a` wrote the terminal's clipboard. Every text output escapes them, through
/// the one function: stream's lines as report's tables.
#[test]
fn every_text_output_escapes_a_process_name() {
    let scratch = scratch("escapes-stream");
    let file = scratch.path().join("clipboard.nsr");
    let header = recording_header(1_000_000_000);
    let mut writer =
        nodescope::record::writer::Writer::new(fs::File::create(&file).unwrap(), &header).unwrap();
    for i in 0..10 {
        let event = tracer_common::Event::new(tracer_common::EventKind::NodeRead, i * 300_000_000)
            .task(4242)
            .nid(i as u32)
            .comm("\x1b]52;c;cHdu\x07");
        writer.event(&event).unwrap();
    }
    writer.finish(3_000_000_000).unwrap();
    let path = file.to_str().unwrap();
    for args in [
        &["stream", "--source", "replay", "--speed", "0", path][..],
        &["report", path],
        &["report", "--compare", path, path],
    ] {
        let output = common::nodescope(args);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("\\x1b]52;c;cHdu\\x07"), "{args:?}: {text}");
    }
}

/// `nodescope fsstress DIR` where DIR's worker directories are already there (issue 33): `p0`
/// a symlink to a directory outside, `p1` a directory of symlinks to files outside. Both are
/// refused, and nothing outside changes.
#[test]
fn fsstress_refuses_worker_directories_that_exist_and_changes_nothing_outside() {
    let scratch = scratch("fsstress-planted");
    let outside = scratch.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("precious"), "precious data\n").unwrap();
    let dir = scratch.path().join("run");
    fs::create_dir(&dir).unwrap();
    symlink(&outside, dir.join("p0")).unwrap();
    fs::create_dir(dir.join("p1")).unwrap();
    for name in ["f1", "f2", "f3", "d4", "c5"] {
        symlink(outside.join("precious"), dir.join("p1").join(name)).unwrap();
    }
    let listing = |d: &Path| {
        let mut names: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = listing(&outside);
    for (procs, refused) in [("1", "p0"), ("2", "p0")] {
        let output = Command::new(NODESCOPE)
            .args(["fsstress", dir.to_str().unwrap(), "-p", procs, "-n", "300"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!("refusing {}: it exists", dir.join(refused).display());
        assert!(stderr.contains(&expected), "{stderr}");
    }
    // p1 alone: the p0 symlink removed.
    fs::remove_file(dir.join("p0")).unwrap();
    let output = Command::new(NODESCOPE)
        .args(["fsstress", dir.to_str().unwrap(), "-p", "2", "-n", "300"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("refusing {}: it exists", dir.join("p1").display())),
        "{stderr}"
    );
    assert_eq!(listing(&outside), before, "something was created outside");
    assert_eq!(
        fs::read_to_string(outside.join("precious")).unwrap(),
        "precious data\n"
    );
}
