//! One access trace across unmounts (guest.sh: remount_phase). The lookup program keeps each
//! CPU's device per `f2fs_sb_info` address and drops it when `kill_f2fs_super` returns, since
//! a later mount may be given the freed address (the slab hands back its latest free object).
//! Here one `record --accesses` sees three parts: the test disk's lookups, a second F2FS's on a
//! loop device (the test disk unmounted), the test disk's again. A kprobe_events hist keyed on
//! the lookup's sbi argument, read and cleared between the parts while nothing is mounted,
//! counts each part in the kernel. The recording must give the loop device exactly the second
//! part's lookups and the test disk the others, nothing to any other device, nothing lost.
use std::{collections::BTreeMap, fs, path::Path};

use serde_json::Value;

/// Files on the second F2FS, each read once in the second part.
pub const FILES: u64 = 64;
/// The guest's loop devices.
pub const MODULES: [&str; 1] = ["loop"];

/// The verdict line's part `remount=<ours>/<kernel>+<ours>/<kernel>` (test disk, loop device).
pub fn check(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> String {
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    let parts: Vec<BTreeMap<String, u64>> = (1..=3)
        .map(|n| hits_by_sbi(&read(&format!("remount_hist_{n}.txt"))))
        .collect();
    let kernel: Vec<u64> = parts.iter().map(|p| p.values().sum()).collect();
    let (disk_kernel, loop_kernel) = (kernel[0] + kernel[2], kernel[1]);
    let reused = parts[1].keys().any(|sbi| parts[0].contains_key(sbi))
        || parts[2].keys().any(|sbi| parts[1].contains_key(sbi));
    let report = match serde_json::from_str::<Value>(&read("remount_report.json")) {
        Ok(report) => report,
        Err(err) => {
            failures.push(format!("remount: no report of remount.nsr: {err:#}"));
            return "remount=?".into();
        }
    };
    let by_device: BTreeMap<&str, u64> = report["devices"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(dev, d)| (dev.as_str(), d["node_accesses"].as_u64().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    // Loop devices have major 7.
    let ours_loop: u64 = by_device
        .iter()
        .filter(|(dev, _)| dev.starts_with("7:"))
        .map(|(_, n)| *n)
        .sum();
    let others: Vec<&str> = by_device
        .keys()
        .copied()
        .filter(|dev| !dev.starts_with("7:"))
        .collect();
    let ours_disk: u64 = others.iter().map(|dev| by_device[dev]).sum();
    let device_reads = read("remount_record.err")
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once("evictions; ")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or_else(|| "?".to_string(), |n| n.to_string());
    lines.push(format!(
        "  remount  kernel per part {kernel:?} (sbi addresses {}), recorded {by_device:?}, {device_reads} \
         lookups read their device; {}",
        parts
            .iter()
            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(","))
            .collect::<Vec<_>>()
            .join(" | "),
        if reused {
            "an unmounted F2FS's sbi address came back in the next mount"
        } else {
            "no sbi address came back"
        }
    ));
    let problems = [
        (
            others.len() == 1,
            format!("the test disk's lookups under {others:?}"),
        ),
        (
            ours_disk == disk_kernel && disk_kernel > 0,
            format!("the test disk: {ours_disk} recorded, {disk_kernel} in the kernel"),
        ),
        (
            ours_loop == loop_kernel && loop_kernel >= FILES,
            format!("the loop device: {ours_loop} recorded, {loop_kernel} in the kernel"),
        ),
        (
            report["drops"].as_u64().unwrap_or(0) == 0,
            format!("{} events lost", report["drops"].as_u64().unwrap_or(0)),
        ),
        (
            read("remount_record.rc").trim() == "0",
            format!(
                "record's exit status {:?}",
                read("remount_record.rc").trim()
            ),
        ),
    ];
    for (ok, problem) in problems {
        if !ok {
            failures.push(format!("remount: {problem}"));
        }
    }
    format!(
        "remount={ours_disk}/{disk_kernel}+{ours_loop}/{loop_kernel}{}",
        if reused { "(sbi reused)" } else { "" }
    )
}

/// `{ sbi: ffff888004a3c000 } hitcount: 123` lines: hits per sbi address.
fn hits_by_sbi(hist: &str) -> BTreeMap<String, u64> {
    let mut found = BTreeMap::new();
    for line in hist.lines() {
        let Some((key, hits)) = line.split_once("hitcount:") else {
            continue;
        };
        let Some(sbi) = key
            .split_once("sbi:")
            .map(|(_, s)| s.trim_matches([' ', '}']))
        else {
            continue;
        };
        if let Ok(hits) = hits.trim().parse::<u64>() {
            *found.entry(hex_address(sbi)).or_default() += hits;
        }
    }
    found
}

/// The hist prints a numeric key in decimal (seen on 6.12) or hex: an address is shown in hex.
fn hex_address(key: &str) -> String {
    let parsed = match key.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => key.parse::<u64>().ok(),
    };
    parsed.map_or_else(|| key.to_string(), |address| format!("{address:#x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hist_is_read_per_sbi_address() {
        let hist = "# event histogram\n#\n# trigger info: hist:keys=sbi:vals=hitcount:size=2048 [active]\n#\n\n\
                    { sbi: 18382688508460769280 } hitcount:        417\n\
                    { sbi: 0xff1c8c4e0a1c8000 } hitcount:          3\n\nTotals:\n    Hits: 420\n";
        let found = hits_by_sbi(hist);
        assert_eq!(found.len(), 2);
        assert_eq!(found["0xff1c6dcd8375a000"], 417, "{found:?}");
        assert_eq!(found["0xff1c8c4e0a1c8000"], 3);
    }
}
