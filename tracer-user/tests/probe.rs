//! `nodescope probe` against the running kernel: a real program, a real ring buffer.
use std::process::{Command, Output};

use serde_json::Value;

mod common;

use common::{is_root, NODESCOPE};

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "probe failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("probe --json prints one JSON object")
}

#[test]
fn probe_loads_a_program_and_receives_its_event_through_the_ring_buffer() {
    if !is_root() {
        test_skip::skip("needs root to load eBPF programs");
        return;
    }
    let child = Command::new(NODESCOPE)
        .args(["probe", "--json"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start nodescope");
    let pid = child.id();
    let output = child.wait_with_output().expect("wait for nodescope");
    let report = json_of(&output);

    assert_eq!(report["bpf"], true, "{report:#}");
    let selftest = &report["bpf_selftest"];
    assert_eq!(selftest["events"], 1);
    assert_eq!(
        selftest["pid"], pid,
        "the event must come from the probing process"
    );
    assert_eq!(selftest["comm"], "nodescope");
    assert_eq!(selftest["drops"], 0);
    // No F2FS device here has the RFC's knobs: nothing is discovered, and probe says which
    // manifest it shows instead.
    let from = report["rfc_probes_from"].as_str().unwrap();
    assert!(
        from.starts_with("the built-in guesses (rfc-kernel.toml): no F2FS device"),
        "{from}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("hello from tgid {pid}")),
        "the kernel-side aya-log line must reach our log; stderr was:\n{stderr}"
    );
}

#[test]
fn probe_reports_kernel_features_as_the_kernel_exposes_them() {
    let report = json_of(
        &Command::new(NODESCOPE)
            .args(["probe", "--json"])
            .output()
            .unwrap(),
    );
    let exists = |path: &str| std::path::Path::new(path).exists();
    assert_eq!(
        report["uprobes"],
        exists("/sys/bus/event_source/devices/uprobe")
    );
    assert_eq!(
        report["kprobes"],
        exists("/sys/bus/event_source/devices/kprobe")
    );
    assert_eq!(report["btf"], exists("/sys/kernel/btf/vmlinux"));
    let has_f2fs = std::fs::read_to_string("/proc/filesystems")
        .unwrap()
        .contains("f2fs");
    assert_eq!(report["f2fs"], has_f2fs || exists("/sys/fs/f2fs"));
    assert!(report["f2fs_tracepoints"].is_array());
    if report["f2fs"] == false {
        assert_eq!(report["f2fs_tracepoints"].as_array().unwrap().len(), 0);
        let missing = report["missing"].to_string();
        assert!(
            missing.contains("F2FS"),
            "missing must name F2FS: {missing}"
        );
    }
}

#[test]
fn probe_without_privileges_still_reports_and_says_what_is_missing() {
    let mut command = if is_root() {
        // Drop every capability and become nobody, as an unprivileged user would run it.
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ]);
        c.args(["--bounding-set=-all", NODESCOPE]);
        c
    } else {
        Command::new(NODESCOPE)
    };
    let report = json_of(
        &command
            .args(["probe", "--json"])
            .output()
            .expect("run probe"),
    );
    assert_eq!(report["bpf"], false);
    assert_eq!(report["privileges"]["root"], false);
    assert_eq!(report["privileges"]["cap_bpf"], false);
    let missing = report["missing"].to_string();
    assert!(missing.contains("CAP_BPF and CAP_PERFMON"), "{missing}");
}

#[test]
fn probe_shows_each_manifest_kind_as_attached_found_or_missing() {
    if !is_root() {
        test_skip::skip("needs root to attach kprobes");
        return;
    }
    let dir = common::scratch("probe-status");
    let manifest = dir.path().join("status.toml");
    // vfs_read is in every kernel; the second name is in none.
    std::fs::write(
        &manifest,
        "target = \"kernel\"\n\n[[probe]]\nkind = \"restore\"\nsymbol = \"vfs_read\"\n\n\
         [[probe]]\nkind = \"reclaim\"\nsymbol = \"nodescope_no_such_function\"\n",
    )
    .unwrap();
    let output = Command::new(NODESCOPE)
        .args(["probe", "--json", "--probes"])
        .arg(&manifest)
        .output()
        .unwrap();
    let report = json_of(&output);
    assert_eq!(
        report["rfc_probes_from"],
        format!("--probes {}", manifest.display())
    );
    let symbols = report["rfc_probes"]["symbols"].as_array().unwrap();
    let status: Vec<(&str, &str)> = symbols
        .iter()
        .map(|s| (s["kind"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    // Without the kprobe PMU (this kernel may lack it) the symbol is found but cannot attach.
    let kprobes = std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists();
    let restore = if kprobes { "attached" } else { "found" };
    assert_eq!(status, [("restore", restore), ("reclaim", "missing")]);
    if !kprobes {
        let error = symbols[0]["error"].as_str().unwrap_or_default();
        assert!(error.contains("kprobe"), "{error}");
    }
    assert_eq!(
        report["rfc_probes"]["unmapped_kinds"],
        serde_json::json!([
            "node_read",
            "insert",
            "convert",
            "convert_reject",
            "convert_abort",
            "restore_fail",
            "restore_nomem",
            "second_chance",
            "forget"
        ])
    );
    let table = Command::new(NODESCOPE)
        .args(["probe", "--probes"])
        .arg(&manifest)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    let attached = usize::from(kprobes);
    assert!(
        text.contains(&format!(
            "1 of 2 symbols in /proc/kallsyms, {attached} attached"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("{restore:<9}restore        vfs_read")),
        "{text}"
    );
    assert!(
        text.contains("missing  reclaim        nodescope_no_such_function"),
        "{text}"
    );
}

#[test]
fn probe_attaches_every_kind_of_the_simulator_manifest_as_uprobes() {
    if !is_root() {
        test_skip::skip("needs root to attach uprobes");
        return;
    }
    let sim = concat!(env!("CARGO_MANIFEST_DIR"), "/probes/sim.toml");
    let report = json_of(
        &Command::new(NODESCOPE)
            .args(["probe", "--json", "--probes", sim])
            .output()
            .unwrap(),
    );
    let symbols = report["rfc_probes"]["symbols"].as_array().unwrap();
    assert_eq!(symbols.len(), 11);
    for symbol in symbols {
        assert_eq!(symbol["status"], "attached", "{symbol}");
    }
    assert_eq!(
        report["rfc_probes"]["unmapped_kinds"],
        serde_json::json!([])
    );
}
