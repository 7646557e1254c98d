//! The VM test's tune phase, checked on the host: `nodescope tune` on the guest kernel's own
//! PSI, its steps and its restore.
use std::{fs, path::Path};

use serde_json::Value;

use super::results::{expect, read_number};

/// `nodescope tune` on the guest kernel's own PSI, in a knob directory of its own: the memory
/// hog's stalls make its polls compress more (urgent steps, no window falls in the phase), and
/// SIGTERM puts the original values back. The number of steps it took.
pub(super) fn check_tune(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> u64 {
    let audit = fs::read_to_string(dir.join("tune.jsonl")).unwrap_or_default();
    let records: Vec<Value> = match audit.lines().map(serde_json::from_str::<Value>).collect() {
        Ok(records) => records,
        Err(err) => {
            failures.push(format!("tune: bad audit line: {err:#}"));
            return 0;
        }
    };
    let of = |event: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["event"].as_str().unwrap_or("") == event)
            .collect()
    };
    let (starts, decisions, restores) = (of("start"), of("decision"), of("restore"));
    let knobs = |k: &Value| {
        (
            k["threshold"].as_u64().unwrap_or(0),
            k["interval_ms"].as_u64().unwrap_or(0),
        )
    };
    let original = starts.first().map(|s| knobs(&s["old"]));
    let after = fs::read_to_string(dir.join("knobs_after.txt")).unwrap_or_default();
    let after: Vec<u64> = after
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let stalled_ms = psi_total_us(dir, "psi_after.txt")
        .saturating_sub(psi_total_us(dir, "psi_before.txt"))
        / 1000;
    // Root in the guest, no budget, no counters file: the polls wait on a PSI trigger.
    let log = fs::read_to_string(dir.join("tune.err")).unwrap_or_default();
    let trigger = log
        .lines()
        .find_map(|l| {
            l.split_once("waiting on a PSI trigger (\"")
                .map(|(_, rest)| rest)
        })
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string);
    let pressures: Vec<f64> = decisions
        .iter()
        .filter_map(|d| d["signals"]["memory_pressure"].as_f64())
        .collect();
    lines.push(format!(
        "  tune     original={original:?} after={after:?} PSI stall {stalled_ms} ms, trigger \
         {trigger:?}, steps at pressure {pressures:.2?} % (goal {} %), rc={:?}",
        super::settings::TUNE_PSI_GOAL,
        read_number(dir, "tune.rc")
    ));
    expect(
        failures,
        read_number(dir, "tune.rc") == Some(0),
        "tune: exit status not 0".to_string(),
    );
    expect(
        failures,
        trigger.is_some(),
        "tune: no PSI trigger armed (see tune.err)".to_string(),
    );
    expect(
        failures,
        !decisions.is_empty()
            && decisions.iter().all(|d| {
                d["outcome"].as_str().unwrap_or("") == "applied"
                    && d["reason"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("urgent (between windows): ")
            }),
        format!(
            "tune: want applied urgent steps only, got {} decisions",
            decisions.len()
        ),
    );
    expect(
        failures,
        pressures.len() == decisions.len()
            && pressures
                .iter()
                .all(|&p| p >= super::settings::TUNE_PSI_GOAL * 1.1),
        format!("tune: every step needs pressure >= 1.1 x the goal: {pressures:?}"),
    );
    let restored = restores.last().map(|r| knobs(&r["written"]));
    expect(
        failures,
        original.is_some()
            && restored == original
            && original.map(|(t, i)| vec![t, i]).as_ref() == Some(&after),
        format!("tune: originals {original:?}, restore record {restored:?}, files after {after:?}"),
    );
    decisions.len() as u64
}

fn psi_total_us(dir: &Path, name: &str) -> u64 {
    let text = fs::read_to_string(dir.join(name)).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("some "))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
