//! Static settings against the controller on the module (kmod.sh, part 4b; issue 32, point 4):
//! under the tune phase's hog, each run empties the cache and reads the file set twice, at one
//! static (threshold, interval) of [`GRID`] or with `nodescope daemon --tune` steering the real
//! knobs from the RFC's settings. Each run's node reads (iostat), restores and conversions (the
//! module's counters) and attributed memory (the module's `attributed_bytes`, sampled every
//! 0.5 s) go into the controller benchmark's cost (docs/CONTROLLER.md, "Cost, in node reads"),
//! so the controller's cost can be set against the best static one's. The daemon's steps must
//! change the knob files (read back) and SIGTERM must put the originals back; the grid itself is
//! a measurement, not a check.
use std::{fs, path::Path};

use serde_json::Value;

use super::{
    counters::{iostat_reads, read_trimmed as read, ModuleCounters},
    settings::GRID,
};

/// The benchmark's weights (bench/src/controller/cost.rs): a conversion costs 4/90 of a read,
/// holding 4 KiB for 60 s one read.
const CONVERSION_WEIGHT: f64 = 4.0 / 90.0;
const BYTE_SECONDS_PER_READ: f64 = 4096.0 * 60.0;

/// One run of the grid, from its snaps and memory samples.
#[derive(Debug, PartialEq)]
pub(super) struct Run {
    pub name: String,
    pub node_reads: u64,
    pub restores: u64,
    pub conversions: u64,
    pub seconds: f64,
    /// Attributed bytes integrated over the run (trapezoids between samples).
    pub byte_seconds: f64,
    pub peak_bytes: u64,
}

impl Run {
    fn read(dir: &Path, name: &str) -> Result<Run, String> {
        let phase = |edge: &str| format!("grid_{name}_{edge}");
        let (start, end) = match (
            ModuleCounters::read(dir, &phase("start")),
            ModuleCounters::read(dir, &phase("end")),
        ) {
            (Ok(start), Ok(end)) => (start, end),
            (Err(err), _) | (_, Err(err)) => return Err(format!("{err:#}")),
        };
        let reads = iostat_reads(dir, &phase("end"))
            .and_then(|end| Ok(end.saturating_sub(iostat_reads(dir, &phase("start"))?)))
            .map_err(|err| format!("{err:#}"))?;
        let samples = memory_samples(
            &fs::read_to_string(dir.join(format!("grid_{name}_memory.txt"))).unwrap_or_default(),
        );
        if samples.len() < 2 {
            return Err(format!(
                "fewer than two memory samples (grid_{name}_memory.txt)"
            ));
        }
        let byte_seconds = samples
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) as f64 / 2.0)
            .sum();
        Ok(Run {
            name: name.to_string(),
            node_reads: reads,
            restores: end.delta(&start, "restores"),
            conversions: end.delta(&start, "conversions"),
            seconds: samples[samples.len() - 1].0 - samples[0].0,
            byte_seconds,
            peak_bytes: samples.iter().map(|s| s.1).max().unwrap_or(0),
        })
    }

    /// The benchmark's cost, in node reads.
    pub fn cost(&self) -> f64 {
        self.node_reads as f64
            + self.byte_seconds / BYTE_SECONDS_PER_READ
            + self.conversions as f64 * CONVERSION_WEIGHT
    }

    fn mean_bytes(&self) -> f64 {
        if self.seconds > 0.0 {
            self.byte_seconds / self.seconds
        } else {
            0.0
        }
    }
}

/// `uptime attributed_bytes` lines; a line cut short by the sampler's kill is skipped.
fn memory_samples(text: &str) -> Vec<(f64, u64)> {
    text.lines()
        .filter_map(|l| {
            let (up, bytes) = l.split_once(' ')?;
            Some((up.parse().ok()?, bytes.trim().parse().ok()?))
        })
        .collect()
}

/// What the verdict line says of the daemon's controller.
pub(super) struct DaemonTune {
    pub ok: bool,
}

pub(super) fn grid_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> DaemonTune {
    let mut runs = Vec::new();
    let names = GRID
        .iter()
        .map(|(t, i)| format!("static_{t}_{i}"))
        .chain(["controller".to_string()]);
    for name in names {
        match Run::read(dir, &name) {
            Ok(run) => runs.push(run),
            Err(err) => problems.push(format!("grid {name}: {err}")),
        }
    }
    lines.extend(table(&runs));
    DaemonTune {
        ok: daemon_checks(dir, problems, lines),
    }
}

fn table(runs: &[Run]) -> Vec<String> {
    let best = runs
        .iter()
        .filter(|r| r.name != "controller")
        .min_by(|a, b| a.cost().total_cmp(&b.cost()));
    let mut lines = vec![
        "  static settings against daemon --tune, under the hog (file set read twice):".into(),
        format!(
            "    {:<16} {:>10} {:>9} {:>11} {:>13} {:>10} {:>7} {:>9} {:>7}",
            "setting",
            "node reads",
            "restores",
            "conversions",
            "mean attrib.",
            "peak",
            "s",
            "cost",
            "/ best"
        ),
    ];
    for run in runs {
        let ratio = best.map_or(f64::NAN, |b| run.cost() / b.cost());
        lines.push(format!(
            "    {:<16} {:>10} {:>9} {:>11} {:>13.0} {:>10} {:>7.1} {:>9.1} {:>7.3}",
            setting(&run.name),
            run.node_reads,
            run.restores,
            run.conversions,
            run.mean_bytes(),
            run.peak_bytes,
            run.seconds,
            run.cost(),
            ratio
        ));
    }
    if let (Some(best), Some(controller)) = (best, runs.iter().find(|r| r.name == "controller")) {
        lines.push(format!(
            "    controller / best static ({}): {:.3}",
            setting(&best.name),
            controller.cost() / best.cost()
        ));
    }
    lines
}

/// `static_25_100` as `25 %, 100 ms`.
fn setting(name: &str) -> String {
    let mut parts = name.split('_').skip(1);
    match (parts.next(), parts.next()) {
        (Some("0"), Some(_)) => "off".into(),
        (Some(t), Some(i)) => format!("{t} %, {i} ms"),
        _ => "daemon --tune".into(),
    }
}

/// The daemon's steps changed the knob files (its last applied step's read-back is what the
/// files held at the run's end), and SIGTERM put the originals back.
fn daemon_checks(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) -> bool {
    let before = problems.len();
    let audit = fs::read_to_string(dir.join("daemon_tune.jsonl")).unwrap_or_default();
    let records: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let applied: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["event"].as_str().unwrap_or("") == "decision"
                && r["outcome"].as_str().unwrap_or("") == "applied"
        })
        .collect();
    let knobs = |k: &Value| {
        format!(
            "{} {}",
            k["threshold"].as_u64().unwrap_or(0),
            k["interval_ms"].as_u64().unwrap_or(0)
        )
    };
    let steps: Vec<String> = applied.iter().map(|r| knobs(&r["written"])).collect();
    let (original, at_end, after) = (
        read(dir, "knobs_before_daemon.txt"),
        read(dir, "knobs_daemon_end.txt"),
        read(dir, "knobs_after_daemon.txt"),
    );
    if applied.is_empty() {
        problems.push(format!(
            "daemon --tune: no step applied under the hog (daemon_tune.jsonl: {} records)",
            records.len()
        ));
    } else if steps.last() != Some(&at_end) || at_end == original {
        problems.push(format!(
            "daemon --tune: its last step wrote {:?}, the knob files read {at_end} (originals \
             {original})",
            steps.last()
        ));
    }
    let restored = records.iter().any(|r| {
        r["event"].as_str().unwrap_or("") == "restore"
            && r["outcome"].as_str().unwrap_or("") == "restored"
    });
    let rc = read(dir, "daemon_tune.rc");
    if !restored || after != original || rc != "0" {
        problems.push(format!(
            "daemon --tune: after SIGTERM (rc {rc}, restore record: {restored}) the knobs were \
             {after}, originals {original}"
        ));
    }
    lines.push(format!(
        "  daemon --tune on the module's knobs: originals {original}, steps -> {}, at the run's \
         end {at_end}, after SIGTERM {after}",
        if steps.is_empty() {
            "none".to_string()
        } else {
            steps.join(", ")
        }
    ));
    problems.len() == before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_integrates_memory_and_costs_as_the_benchmark_does() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("nc_grid_x_start.txt", "restores 10\nconversions 100\n");
        write("nc_grid_x_end.txt", "restores 40\nconversions 1000\n");
        write("iostat_grid_x_start.txt", "[READ]\nfs node:  4096 1\n");
        write("iostat_grid_x_end.txt", "[READ]\nfs node:  40960 10001\n");
        // 245,760 bytes for 2 s, then a line the sampler's kill cut short.
        write(
            "grid_x_memory.txt",
            "10.0 245760\n11.0 245760\n12.0 245760\n12.5",
        );
        let run = Run::read(dir.path(), "x").unwrap();
        assert_eq!(
            (
                run.node_reads,
                run.restores,
                run.conversions,
                run.peak_bytes
            ),
            (10_000, 30, 900, 245_760)
        );
        assert_eq!((run.seconds, run.byte_seconds), (2.0, 491_520.0));
        // 10,000 reads + 2 reads' worth of memory + 900 x 4/90 = 40.
        assert!((run.cost() - 10_042.0).abs() < 1e-9, "{}", run.cost());
        write("grid_x_memory.txt", "10.0 1\n");
        assert!(Run::read(dir.path(), "x").is_err());
    }

    #[test]
    fn the_daemon_must_step_and_put_the_originals_back() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("knobs_before_daemon.txt", "25 1000\n");
        write("knobs_daemon_end.txt", "25 100\n");
        write("knobs_after_daemon.txt", "25 1000\n");
        write("daemon_tune.rc", "0\n");
        let audit = |outcome: &str| {
            format!(
                "{{\"event\":\"start\",\"outcome\":\"held\"}}\n\
                 {{\"event\":\"decision\",\"outcome\":\"{outcome}\",\"written\":\
                 {{\"threshold\":25,\"interval_ms\":100}}}}\n\
                 {{\"event\":\"restore\",\"outcome\":\"restored\"}}\n"
            )
        };
        write("daemon_tune.jsonl", &audit("applied"));
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        assert!(daemon_checks(dir.path(), &mut problems, &mut lines));
        assert_eq!(
            lines,
            ["  daemon --tune on the module's knobs: originals 25 1000, steps -> 25 100, at the \
              run's end 25 100, after SIGTERM 25 1000"]
        );
        write("daemon_tune.jsonl", &audit("held"));
        assert!(!daemon_checks(dir.path(), &mut problems, &mut lines));
        write("daemon_tune.jsonl", &audit("applied"));
        write("knobs_after_daemon.txt", "25 100\n");
        problems.clear();
        assert!(!daemon_checks(dir.path(), &mut problems, &mut lines));
        assert!(
            problems[0].starts_with("daemon --tune: after SIGTERM"),
            "{problems:?}"
        );
    }

    #[test]
    fn settings_are_named_as_people_say_them() {
        assert_eq!(setting("static_0_1000"), "off");
        assert_eq!(setting("static_25_100"), "25 %, 100 ms");
        assert_eq!(setting("controller"), "daemon --tune");
    }
}
