//! `nodescope whatif` end to end: vm-replay recorded with compression off (its access trace,
//! written with the project's recorder) and replayed by the binary at the scenario's own
//! settings gives exactly the on scenario's node reads, restores and retained nodes.
mod common;

use std::{fs::File, io::BufWriter, process::Command};

use common::write_recording;
use nodescope::record::{writer::Writer, Header};

fn nodescope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nodescope"))
}

#[test]
fn whatif_replays_the_vm_replay_recording_to_the_on_scenario_exactly() {
    let check = sim::whatif::vm_replay_check(1).unwrap();
    assert!(check.exact(), "{check:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("off.nsrec");
    let header = Header {
        source: "sim".into(),
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    write_recording(&path, &header, &check.events);
    let image = sim::scenario::vm_replay::rfc_nodes()
        .unwrap()
        .image_path
        .clone();
    let out = nodescope()
        .args([
            "whatif",
            path.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
        ])
        .args(["--budget", "3MiB", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let points: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let on = points
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["compression"] == true)
        .unwrap();
    let want = check.scenario_on;
    assert_eq!(on["outcome"]["node_reads"], want.node_reads);
    assert_eq!(on["outcome"]["restores"], want.restores);
    assert_eq!(on["outcome"]["retained_nodes"], want.retained_nodes);
    // Issue 51: the simulator times the lookups it traces, so the recording has a latency
    // table: its raw hits took RAW_HIT_NS, its disk reads NODE_READ_NS, and (compression off)
    // it timed no restore, which then takes the replay's simulated restore times. Each
    // point's predicted wait is its lookups per outcome at those times, exactly.
    for point in points.as_array().unwrap() {
        let outcome = &point["outcome"];
        let lookups = &outcome["lookups"];
        let n = |key: &str| lookups[key].as_u64().unwrap();
        assert_eq!(n("errors"), 0);
        assert_eq!(n("restores"), outcome["restores"].as_u64().unwrap());
        let want = n("hits") * sim::costs::RAW_HIT_NS
            + n("disk_reads") * sim::costs::NODE_READ_NS
            + outcome["restore_ns"].as_u64().unwrap();
        assert_eq!(point["predicted_wait_ns"].as_u64(), Some(want), "{point}");
    }
    let off = points
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["compression"] == false)
        .unwrap();
    assert!(
        on["predicted_wait_ns"].as_u64() < off["predicted_wait_ns"].as_u64(),
        "a restore is cheaper than a read: on waits less"
    );
    let text = nodescope()
        .args(["whatif", path.to_str().unwrap(), "--image"])
        .arg(&image)
        .args(["--budget", "3MiB"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "wait ms = the replay's lookups per outcome x the recording's mean lookup \
                       times: hit 0.3 us over "
        ),
        "{text}"
    );
    assert!(text.contains("restore simulated (sim::costs)"), "{text}");
    assert!(text.contains("  wait ms"), "{text}");
}

#[test]
fn whatif_refuses_a_recording_without_accesses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.nsrec");
    let header = Header {
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    let writer = Writer::new(BufWriter::new(File::create(&path).unwrap()), &header).unwrap();
    writer.finish(0).unwrap();
    let out = nodescope()
        .args(["whatif", path.to_str().unwrap(), "--image", "/dev/null"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("record with --accesses"), "{stderr}");
}

/// vm-replay's off run recorded as `header` says, at `path`.
fn record_vm_replay(path: &std::path::Path, header: &Header) {
    let check = sim::whatif::vm_replay_check(1).unwrap();
    write_recording(path, header, &check.events);
}

/// Without --image or --device (issue 31) the device comes from the events' device number, and
/// only on the host that recorded them, among the devices it recorded: elsewhere the refusal
/// says what to give instead.
#[test]
fn whatif_without_a_device_takes_the_recorded_one_only_where_it_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("elsewhere.nsrec");
    let header = Header {
        host: "a-phone-elsewhere".into(),
        source: "bpf".into(),
        devices: vec!["dm-8".into()],
        window_ns: 1_000_000_000,
        ..Header::default()
    };
    record_vm_replay(&path, &header);
    let refused_without_a_device = |path: &std::path::Path| {
        let out = nodescope()
            .args(["whatif", path.to_str().unwrap(), "--budget", "3MiB"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let stderr = refused_without_a_device(&path);
    assert!(
        stderr.contains(&format!(
            "elsewhere.nsrec was recorded on a-phone-elsewhere, this is {}: give --image IMG",
            here.trim()
        )),
        "{stderr}"
    );
    // Recorded here, but on a device this machine has no node of by that name: refused too,
    // naming the device number (vm-replay's events carry the simulator's).
    let header = Header {
        host: here.trim().into(),
        ..header
    };
    record_vm_replay(&path, &header);
    let stderr = refused_without_a_device(&path);
    assert!(
        stderr.contains("give --image IMG or --device /dev/X"),
        "{stderr}"
    );
    assert!(!stderr.contains("reading node blocks from"), "{stderr}");
}
