//! `nodescope probe`'s table: the report of `crate::probe`, one row per capability, then the
//! F2FS probe plan, the access traces and what is missing.
use std::fmt::Write as _;

use crate::{
    probe::{AccessProbe, ProbeReport, RfcProbes},
    system::F2fsDevice,
};

fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "no"
    }
}

pub(crate) fn render(report: &ProbeReport) -> String {
    let mut out = String::new();
    let p = &report.privileges;
    let rows = [
        ("kernel", report.kernel.clone()),
        (
            "privileges",
            format!(
                "root={} CAP_BPF={} CAP_PERFMON={} CAP_SYS_ADMIN={}",
                yes_no(p.root),
                yes_no(p.cap_bpf),
                yes_no(p.cap_perfmon),
                yes_no(p.cap_sys_admin)
            ),
        ),
        (
            "selinux",
            report.selinux.map_or("none".into(), |m| m.to_string()),
        ),
        ("bpf", bpf_cell(report)),
        ("btf", yes_no(report.btf).into()),
        ("tracefs", tracefs_cell(report)),
        ("kprobes", yes_no(report.kprobes).into()),
        ("uprobes", yes_no(report.uprobes).into()),
        ("f2fs", yes_no(report.f2fs).into()),
        ("f2fs tracepoints", list_or_none(&report.f2fs_tracepoints)),
        ("f2fs devices", devices_cell(&report.f2fs_devices)),
        ("rfc probes", rfc_cell(&report.rfc_probes)),
        ("rfc probes from", report.rfc_probes_from.clone()),
    ];
    for (name, value) in rows {
        let _ = writeln!(out, "{name:<18} {value}");
    }
    if let Some(coverage) = &report.rfc_kinds {
        let _ = write!(
            out,
            "\nThe RFC's event kinds ({}):\n{}",
            coverage.summary(),
            coverage.table()
        );
    }
    let _ = write!(out, "\nF2FS probe plan:\n{}", report.f2fs_plan.render());
    let _ = write!(
        out,
        "\nAccess traces (--accesses):\n{}",
        render_accesses(&report.accesses)
    );
    if !report.missing.is_empty() {
        let _ = writeln!(out, "\nmissing:");
        for line in &report.missing {
            let _ = writeln!(out, "  - {line}");
        }
    }
    out
}

fn bpf_cell(report: &ProbeReport) -> String {
    match &report.bpf_selftest {
        Some(t) => format!(
            "yes ({} -> 1 event via ring buffer from pid {} '{}' in {} us)",
            t.attached, t.pid, t.comm, t.micros
        ),
        None => "no".into(),
    }
}

fn tracefs_cell(report: &ProbeReport) -> String {
    match &report.tracefs {
        Some(path) if report.tracefs_mounted_by_us => format!("{path} (mounted by nodescope)"),
        Some(path) => path.clone(),
        None => "no".into(),
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn rfc_cell(probes: &RfcProbes) -> String {
    let present = probes.symbols.iter().filter(|s| s.in_kallsyms).count();
    let attached = probes
        .symbols
        .iter()
        .filter(|s| s.status == "attached")
        .count();
    let mut cell = format!(
        "{present} of {} symbols in {}, {attached} attached ({})",
        probes.symbols.len(),
        probes.looked_up_in,
        probes.manifest
    );
    for symbol in &probes.symbols {
        let _ = write!(
            cell,
            "\n{:<19}{:<9}{:<14} {}",
            "", symbol.status, symbol.kind, symbol.symbol
        );
        if let Some(error) = &symbol.error {
            let _ = write!(cell, ": {error}");
        }
    }
    if let Some(why) = &probes.no_trampolines {
        let _ = write!(cell, "\n{:<19}kprobes, not BPF trampolines: {why}", "");
    }
    if !probes.unmapped_kinds.is_empty() {
        let _ = write!(
            cell,
            "\n{:<19}not in the manifest: {}",
            "",
            probes.unmapped_kinds.join(", ")
        );
    }
    for error in &probes.errors {
        let _ = write!(cell, "\n{:<19}error: {error}", "");
    }
    cell
}

fn devices_cell(devices: &[F2fsDevice]) -> String {
    let described: Vec<String> = devices
        .iter()
        .map(|d| {
            format!(
                "{} (node_compress_threshold {}, node_compress_interval {})",
                d.name,
                yes_no(d.node_compress_threshold),
                yes_no(d.node_compress_interval)
            )
        })
        .collect();
    list_or_none(&described)
}

fn render_accesses(probe: &AccessProbe) -> String {
    let mut out = probe.plan.render();
    for outcome in &probe.outcomes {
        match &outcome.error {
            None => drop(writeln!(
                out,
                "{:<12} attached {}",
                outcome.what, outcome.target
            )),
            Some(err) => drop(writeln!(
                out,
                "{:<12} NOT attached {}: {err}",
                outcome.what, outcome.target
            )),
        }
    }
    if let Some(err) = &probe.error {
        let _ = writeln!(out, "{:<12} not tried: {err}", "");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::RfcSymbol;

    /// The table says why the RFC's functions got kprobes, as `probe --json` does.
    #[test]
    fn the_rfc_cell_says_why_kprobes_and_not_trampolines() {
        let probes = RfcProbes {
            manifest: "rfc-kernel.toml".into(),
            looked_up_in: "/proc/kallsyms".into(),
            symbols: vec![RfcSymbol {
                kind: "restore".into(),
                symbol: "f2fs_node_cache_restore".into(),
                in_kallsyms: true,
                status: "attached",
                error: None,
            }],
            errors: Vec::new(),
            unmapped_kinds: vec!["node_read".into()],
            no_trampolines: Some("BPF trampolines need arm64 6.0 or later (5.15.0 here)".into()),
        };
        assert_eq!(
            rfc_cell(&probes),
            "1 of 1 symbols in /proc/kallsyms, 1 attached (rfc-kernel.toml)\n\
             \x20                  attached restore        f2fs_node_cache_restore\n\
             \x20                  kprobes, not BPF trampolines: BPF trampolines need arm64 6.0 \
             or later (5.15.0 here)\n\
             \x20                  not in the manifest: node_read"
        );
    }
}
