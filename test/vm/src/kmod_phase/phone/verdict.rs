//! The phone trial's verdict: the cover letter's table from the module's counters (each
//! trial's final snapshot, taken after the policy was put back; node reads are iostat's
//! FS_NODE_READ_IO over the trial), the same from nodescope (the stream's last line, and
//! `report` and `report --compare` of the trials' recordings), equal value by value; per app
//! reads and restores per pass; node reads by node type; the what-if; the controller's grid;
//! the audits; the one line.
use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::trials::{trial_names, XATTR_NAME};
use crate::{
    kmod_phase::{counters::ModuleCounters, whatif},
    results,
};

/// The cover letter's phone figures (final snapshot means per trial), off and on.
const RFC_OFF: Figures = Figures {
    attached: 14_509,
    compressed: 0,
    raw_bytes: 59_430_229,
    slot_bytes: 0,
    logical: 60_823_125,
    slots: [0, 0, 0],
    node_reads: 309_360,
    conversions: 0,
};
const RFC_ON: Figures = Figures {
    attached: 25_331,
    compressed: 16_402,
    raw_bytes: 36_573_184,
    slot_bytes: 8_769_877,
    logical: 47_774_805,
    slots: [373, 15_116, 913],
    node_reads: 287_417,
    // "about 70,441--76,786 conversions per trial": a range, shown as such (RFC_CONVERSIONS).
    conversions: 0,
};
const RFC_CONVERSIONS: &str = "70441-76786";
/// The what-if's bound on node reads, restores and entries at the end (issue 50).
pub(super) const WHATIF_PERCENT: f64 = 5.0;
const SLOT_SIZES: [u64; 3] = [256, 512, 1024];
const PASSES: [&str; 3] = ["seed", "pass1", "pass2"];
const NODE_TYPES: [&str; 4] = ["inode", "direct", "indirect", "xattr"];
/// The benchmark's cost weights (grid.rs, bench/src/controller/cost.rs).
const CONVERSION_WEIGHT: f64 = 4.0 / 90.0;
const BYTE_SECONDS_PER_READ: f64 = 4096.0 * 60.0;

/// The module phase's verdict type: lines, the final line, pass, problems.
pub(super) use super::super::counters::Verdict;

/// One trial's row of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Figures {
    pub attached: u64,
    pub compressed: u64,
    pub raw_bytes: u64,
    pub slot_bytes: u64,
    pub logical: u64,
    /// Compressed entries in the 256, 512 and 1024-byte slots.
    pub slots: [u64; 3],
    pub node_reads: u64,
    pub conversions: u64,
}

impl Figures {
    fn values(&self) -> [(&'static str, u64); 10] {
        [
            ("attached entries", self.attached),
            ("compressed entries", self.compressed),
            ("attached raw bytes", self.raw_bytes),
            ("compressed slot bytes", self.slot_bytes),
            ("logical bytes", self.logical),
            ("256-byte slots", self.slots[0]),
            ("512-byte slots", self.slots[1]),
            ("1024-byte slots", self.slots[2]),
            ("node reads", self.node_reads),
            ("conversions", self.conversions),
        ]
    }

    fn mean(rows: &[Figures]) -> Figures {
        let n = rows.len().max(1) as u64;
        let avg = |f: &dyn Fn(&Figures) -> u64| (rows.iter().map(f).sum::<u64>() + n / 2) / n;
        Figures {
            attached: avg(&|r| r.attached),
            compressed: avg(&|r| r.compressed),
            raw_bytes: avg(&|r| r.raw_bytes),
            slot_bytes: avg(&|r| r.slot_bytes),
            logical: avg(&|r| r.logical),
            slots: [
                avg(&|r| r.slots[0]),
                avg(&|r| r.slots[1]),
                avg(&|r| r.slots[2]),
            ],
            node_reads: avg(&|r| r.node_reads),
            conversions: avg(&|r| r.conversions),
        }
    }
}

/// The module's counters and iostat's node reads at one snap.
pub(super) struct Snap {
    pub nc: ModuleCounters,
    pub reads: u64,
}

pub(super) fn snap(dir: &Path, name: &str) -> Result<Snap> {
    let nc = ModuleCounters::read(dir, name)?;
    let path = dir.join(format!("iostat_{name}.txt"));
    let text = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    let reads = results::fs_node_reads(&text).with_context(|| format!("no fs node in {name}"))?;
    Ok(Snap { nc, reads })
}

/// The module's row: the final snapshot's gauges, node reads and conversions over the trial.
pub(super) fn module_figures(dir: &Path, trial: &str) -> Result<Figures> {
    let start = snap(dir, &format!("{trial}_start"))?;
    let end = snap(dir, &format!("{trial}_final"))?;
    let slots = [
        end.nc.get("entries_256"),
        end.nc.get("entries_512"),
        end.nc.get("entries_1024"),
    ];
    Ok(Figures {
        attached: end.nc.get("entries"),
        compressed: slots.iter().sum(),
        raw_bytes: end.nc.get("raw_bytes"),
        slot_bytes: end.nc.get("slot_bytes"),
        // nodescope attributes entries, raw buffers and slots: the module's figure less its
        // fixed context, which no event or counter line tells of.
        logical: end
            .nc
            .get("attributed_bytes")
            .saturating_sub(end.nc.get("fixed_bytes")),
        slots,
        node_reads: end.reads.saturating_sub(start.reads),
        conversions: end.nc.delta(&start.nc, "conversions"),
    })
}

/// A row from nodescope's cache gauges (`cache` of a stream line or a report) and counts.
fn gauge_figures(cache: &Value, counts: &Value) -> Figures {
    let slots = [
        cache["slots"]["b256"].as_u64().unwrap_or(0),
        cache["slots"]["b512"].as_u64().unwrap_or(0),
        cache["slots"]["b1024"].as_u64().unwrap_or(0),
    ];
    Figures {
        attached: cache["raw_entries"].as_u64().unwrap_or(0) + slots.iter().sum::<u64>(),
        compressed: slots.iter().sum(),
        raw_bytes: cache["raw_bytes"].as_u64().unwrap_or(0),
        slot_bytes: cache["compressed_bytes"].as_u64().unwrap_or(0),
        logical: cache["attributed_bytes"].as_u64().unwrap_or(0),
        slots,
        node_reads: counts["node_reads"].as_u64().unwrap_or(0),
        conversions: counts["conversions"].as_u64().unwrap_or(0),
    }
}

/// The stream's row: its last line's cache and cumulative counts.
pub(super) fn stream_figures(dir: &Path, trial: &str) -> Result<Figures> {
    let path = dir.join(format!("{trial}_stream.jsonl"));
    let text = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    let last = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .with_context(|| format!("no JSON line in {}", path.display()))?;
    Ok(gauge_figures(&last["cache"], &last["cumulative"]))
}

fn report(dir: &Path, trial: &str) -> Result<Value> {
    let path = dir.join(format!("{trial}_report.json"));
    let text = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    serde_json::from_str::<Value>(&text).with_context(|| format!("{} is no report", path.display()))
}

/// `report`'s row of a trial's recording.
fn report_figures(dir: &Path, trial: &str) -> Result<Figures> {
    let report = report(dir, trial)?;
    Ok(gauge_figures(&report["cache"], &report["totals"]))
}

/// Each value of `ours` against the module's; (equal, compared).
pub(super) fn compare_rows(
    who: &str,
    trial: &str,
    ours: &Figures,
    module: &Figures,
    problems: &mut Vec<String>,
) -> (usize, usize) {
    let mut equal = 0;
    for ((what, a), (_, b)) in ours.values().into_iter().zip(module.values()) {
        if a == b {
            equal += 1;
        } else {
            problems.push(format!("{who} {trial}: {what} {a}, the module's {b}"));
        }
    }
    (equal, ours.values().len())
}

fn change(off: u64, on: u64) -> String {
    if off == 0 {
        return "-".into();
    }
    format!("{:+.2} %", (on as f64 / off as f64 - 1.0) * 100.0)
}

/// The table: off and on means with the change, beside the cover letter's.
fn table(title: &str, off: &Figures, on: &Figures) -> Vec<String> {
    let mut lines = vec![
        format!("  {title}"),
        format!(
            "    {:<22} {:>12} {:>12} {:>9}   {:>12} {:>12} {:>9}",
            "", "off", "on", "change", "RFC off", "RFC on", "change"
        ),
    ];
    let rows = off.values().into_iter().zip(on.values());
    for (((what, a), (_, b)), ((_, ra), (_, rb))) in
        rows.zip(RFC_OFF.values().into_iter().zip(RFC_ON.values()))
    {
        let (rfc_on, rfc_change) = match what {
            "conversions" => (RFC_CONVERSIONS.to_string(), "-".to_string()),
            _ => (rb.to_string(), change(ra, rb)),
        };
        lines.push(format!(
            "    {what:<22} {a:>12} {b:>12} {:>9}   {ra:>12} {rfc_on:>12} {rfc_change:>9}",
            change(a, b)
        ));
    }
    let mix = |f: &Figures| {
        let total = f.compressed.max(1) as f64;
        f.slots
            .iter()
            .zip(SLOT_SIZES)
            .map(|(n, size)| format!("{size} B {:.2} %", *n as f64 * 100.0 / total))
            .collect::<Vec<_>>()
            .join(", ")
    };
    lines.push(format!(
        "    slot mix on: {}; the cover letter's: {}",
        mix(on),
        mix(&RFC_ON)
    ));
    lines
}

/// Per mode (off, on) and pass (seed, 1, 2): (node reads, restores).
type AppPasses = [[(u64, u64); 3]; 2];

/// Per app, node reads and restores of each pass (the module's counters and iostat around
/// each launch), means over the mode's trials.
fn per_app(dir: &Path, trials: &[String]) -> Result<BTreeMap<usize, AppPasses>> {
    let mut sums: BTreeMap<usize, AppPasses> = BTreeMap::new();
    for trial in trials {
        let mode = usize::from(trial.starts_with("on"));
        for (p, pass) in PASSES.iter().enumerate() {
            let first = match *pass {
                "seed" => format!("{trial}_start"),
                "pass1" => format!("{trial}_released"),
                _ => format!("{trial}_pass1"),
            };
            let mut before = snap(dir, &first)?;
            for app in 0..sim::fileset::android::APP_PACKAGES.len() {
                let after = snap(dir, &format!("{trial}_{pass}_app{app}"))?;
                let row = &mut sums.entry(app).or_default()[mode][p];
                row.0 += after.reads.saturating_sub(before.reads);
                row.1 += after.nc.delta(&before.nc, "restores");
                before = after;
            }
        }
    }
    Ok(sums)
}

/// Per app (package), node reads and restores the stream gave its processes over a trial.
fn stream_apps(dir: &Path, trial: &str) -> BTreeMap<String, (u64, u64)> {
    let text = fs::read_to_string(dir.join(format!("{trial}_stream.jsonl"))).unwrap_or_default();
    let mut apps: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        for process in line["processes"].as_array().into_iter().flatten() {
            let entry = apps
                .entry(process["app"].as_str().unwrap_or("").to_string())
                .or_default();
            entry.0 += process["node_reads_demand"].as_u64().unwrap_or(0)
                + process["node_reads_readahead"].as_u64().unwrap_or(0);
            entry.1 += process["restores"].as_u64().unwrap_or(0);
        }
    }
    apps
}

/// Per trial and app: the stream's reads and restores for the app's uid against the counters'
/// around its three launches; (equal, compared). The launches are the only tasks of the app's
/// uid, and the trials mount with background GC off, so nothing else reads in their windows.
fn per_app_exact(dir: &Path, trials: &[String], problems: &mut Vec<String>) -> (usize, usize) {
    let (mut equal, mut compared) = (0, 0);
    for trial in trials {
        let Ok(counted) = per_app(dir, std::slice::from_ref(trial)) else {
            problems.push(format!("per app {trial}: snaps missing"));
            continue;
        };
        let mode = usize::from(trial.starts_with("on"));
        let streamed = stream_apps(dir, trial);
        for (app, passes) in &counted {
            let package = sim::fileset::android::APP_PACKAGES[*app];
            let module = passes[mode]
                .iter()
                .fold((0, 0), |(r, s), (pr, ps)| (r + pr, s + ps));
            let ours = streamed.get(package).copied().unwrap_or_default();
            compared += 2;
            equal += usize::from(ours.0 == module.0) + usize::from(ours.1 == module.1);
            if ours != module {
                problems.push(format!(
                    "per app {trial} {package}: the stream's reads/restores {}/{}, around its \
                     launches {}/{}",
                    ours.0, ours.1, module.0, module.1
                ));
            }
        }
    }
    (equal, compared)
}

fn per_app_lines(dir: &Path, offs: &[String], ons: &[String]) -> Result<Vec<String>> {
    let trials: Vec<String> = offs.iter().chain(ons).cloned().collect();
    let sums = per_app(dir, &trials)?;
    let counts = [offs.len().max(1) as u64, ons.len().max(1) as u64];
    let mut streamed: [BTreeMap<String, (u64, u64)>; 2] = Default::default();
    for (mode, trials) in [offs, ons].into_iter().enumerate() {
        for trial in trials {
            for (app, (reads, restores)) in stream_apps(dir, trial) {
                let entry = streamed[mode].entry(app).or_default();
                entry.0 += reads;
                entry.1 += restores;
            }
        }
    }
    let mut lines = vec![
        "  per app, node reads / restores per pass (seed, pass 1, pass 2: iostat and the module's \
         counters around each launch, other tasks' I/O meanwhile included) and the stream's for \
         the app's uid over the trial; means per trial:"
            .into(),
        format!(
            "    {:<28} {:>24} {:>11} {:>30} {:>11}",
            "app", "compression off", "stream", "compression on", "stream"
        ),
    ];
    for (app, modes) in &sums {
        let shown = |mode: usize| {
            modes[mode]
                .iter()
                .map(|(r, s)| format!("{}/{}", r / counts[mode], s / counts[mode]))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let package = sim::fileset::android::APP_PACKAGES[*app];
        let stream = |mode: usize| {
            let (reads, restores) = streamed[mode].get(package).copied().unwrap_or_default();
            format!("{}/{}", reads / counts[mode], restores / counts[mode])
        };
        lines.push(format!(
            "    {package:<28} {:>24} {:>11} {:>30} {:>11}",
            shown(0),
            stream(0),
            shown(1),
            stream(1)
        ));
    }
    Ok(lines)
}

/// Node reads by node type in the on trials (`report --image` of each recording).
fn node_types(dir: &Path, ons: &[String]) -> Result<BTreeMap<String, u64>> {
    let mut by_type = BTreeMap::new();
    for trial in ons {
        let report = report(dir, trial)?;
        let types = &report["node_types"];
        let reads = &types["reads"];
        let source = if reads == &Value::Null { types } else { reads };
        for name in [
            "inode",
            "direct",
            "indirect",
            "double_indirect",
            "xattr",
            "not_in_image",
        ] {
            let count = &source[name];
            *by_type.entry(name.to_string()).or_default() +=
                count["demand"].as_u64().unwrap_or(0) + count["readahead"].as_u64().unwrap_or(0);
        }
    }
    Ok(by_type)
}

/// The counts a what-if is compared on, in [`on_measured`]'s order.
const WHATIF_COUNTS: [&str; 3] = ["node reads", "restores", "entries at the end"];

/// "node reads p / m (e %), restores .., entries at the end ..".
pub(super) fn compared(predicted: [u64; 3], measured: [u64; 3]) -> String {
    let shown: Vec<String> = (0..3)
        .map(|i| {
            let (p, m) = (predicted[i], measured[i]);
            let err = whatif::shown(whatif::error(p, m));
            format!("{} {p} / {m} ({err})", WHATIF_COUNTS[i])
        })
        .collect();
    shown.join(", ")
}

/// Predicted and measured counts summed over the pairs of trials.
#[derive(Default)]
pub(super) struct PairSums {
    predicted: [u64; 3],
    measured: [u64; 3],
    pairs: u64,
}

impl PairSums {
    pub(super) fn add(&mut self, predicted: [u64; 3], measured: [u64; 3]) {
        for i in 0..3 {
            self.predicted[i] += predicted[i];
            self.measured[i] += measured[i];
        }
        self.pairs += 1;
    }

    /// The rounded means (predicted, measured); None without a pair.
    pub(super) fn means(&self) -> Option<([u64; 3], [u64; 3])> {
        let n = self.pairs;
        let mean = |sums: [u64; 3]| sums.map(|sum| (sum + n / 2) / n);
        (n > 0).then(|| (mean(self.predicted), mean(self.measured)))
    }
}

/// The what-if of each off trial's recording at the on settings (`whatif<k>.json`) against the
/// on trial of the same number; the means of the predictions against the means of what the on
/// trials measured, each within `WHATIF_PERCENT`. One trial of a setting varies from the next
/// by more than that bound (the off trials' node reads after the pressure ran from 1,278 to
/// 2,211 in one run: what the kernel's other caches kept), so the bound is held by the means
/// over the trials, and each pair is shown. (reads, restores) as p/m for the line.
fn whatif_check(
    dir: &Path,
    trials: u32,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> (String, String) {
    let mut sums = PairSums::default();
    for k in 1..=trials {
        let Some(point) = whatif_point(dir, "whatif", k, problems) else {
            continue;
        };
        let Ok(measured) = on_measured(dir, k) else {
            problems.push(format!("whatif: no counters of on{k}"));
            continue;
        };
        let outcome = &point["outcome"];
        let predicted = predicted_counts(outcome);
        let evicted = |name: String| {
            inode_evictions(dir, &name).map_or_else(|| "?".to_string(), |n| n.to_string())
        };
        let reloads = &outcome["reloads"];
        lines.push(format!(
            "  what-if: off{k}'s recording at {} %, {} ms against on{k} (predicted / measured): \
             {}; pressure episodes {}; inodes evicted off{k} {} / on{k} {}, the replay's \
             reloads after the pressure {} lookups, {} node reads; its F2FS shrinker {} \
             calls, {} objects scanned, {} node cache entries",
            point["settings"]["knobs"]["threshold"]
                .as_u64()
                .unwrap_or(0),
            point["settings"]["knobs"]["interval_ms"]
                .as_u64()
                .unwrap_or(0),
            compared(predicted, measured),
            outcome["pressure_episodes"].as_u64().unwrap_or(0),
            evicted(format!("off{k}")),
            evicted(format!("on{k}")),
            reloads["lookups"].as_u64().unwrap_or(0),
            reloads["node_reads"].as_u64().unwrap_or(0),
            outcome["shrinker"]["calls"].as_u64().unwrap_or(0),
            outcome["shrinker"]["scanned"].as_u64().unwrap_or(0),
            outcome["shrinker"]["node_scanned"].as_u64().unwrap_or(0),
        ));
        sums.add(predicted, measured);
    }
    let Some((predicted, measured)) = sums.means() else {
        problems.push("whatif: no trial to compare".into());
        return ("?".to_string(), "?".to_string());
    };
    for i in 0..3 {
        let (p, m) = (predicted[i], measured[i]);
        let err = whatif::error(p, m);
        if !err.is_some_and(|e| e.abs() <= WHATIF_PERCENT) {
            problems.push(format!(
                "whatif: {} {p} predicted, {m} measured ({}; means over {} trials), bound \
                 {WHATIF_PERCENT} %",
                WHATIF_COUNTS[i],
                whatif::shown(err),
                sums.pairs
            ));
        }
    }
    lines.push(format!(
        "  what-if, means over {} pairs (predicted / measured): {}",
        sums.pairs,
        compared(predicted, measured)
    ));
    (
        format!("{}/{}", predicted[0], measured[0]),
        format!("{}/{}", predicted[1], measured[1]),
    )
}

/// What on<k>'s counters measured: node reads, restores, entries at the end.
fn on_measured(dir: &Path, k: u32) -> Result<[u64; 3]> {
    let on = format!("on{k}");
    let (start, end) = (
        snap(dir, &format!("{on}_start"))?,
        snap(dir, &format!("{on}_final"))?,
    );
    Ok([
        end.reads.saturating_sub(start.reads),
        end.nc.delta(&start.nc, "restores"),
        end.nc.get("entries"),
    ])
}

/// A what-if point's node reads, restores and entries at the end (the whole trace's).
fn predicted_counts(outcome: &Value) -> [u64; 3] {
    [
        outcome["total_node_reads"].as_u64().unwrap_or(0),
        outcome["total_restores"].as_u64().unwrap_or(0),
        outcome["end_nodes"].as_u64().unwrap_or(0),
    ]
}

/// The what-if given each on trial's inode evictions (`whatif_given<k>.json`: off<k>'s
/// recording with `--inode-evictions`, as many as on<k>'s kernel evicted): the node cache's
/// model without the kernel's choice of how many inodes its reclaim takes, which no recording
/// shows. Shown beside the check, not part of it: it uses what the on trial measured.
fn whatif_given_lines(dir: &Path, trials: u32, lines: &mut Vec<String>) {
    let mut sums = PairSums::default();
    for k in 1..=trials {
        let mut why = Vec::new();
        let point = whatif_point(dir, "whatif_given", k, &mut why);
        let (Some(point), Ok(measured)) = (point, on_measured(dir, k)) else {
            lines.push(format!(
                "  what-if given on{k}'s inode evictions: none ({})",
                why.join("; ")
            ));
            continue;
        };
        let predicted = predicted_counts(&point["outcome"]);
        lines.push(format!(
            "  what-if given on{k}'s {} inode evictions: {}",
            point["outcome"]["inode_evictions"].as_u64().unwrap_or(0),
            compared(predicted, measured)
        ));
        sums.add(predicted, measured);
    }
    if let Some((predicted, measured)) = sums.means() {
        lines.push(format!(
            "  what-if given the on trials' inode evictions, means over {} pairs: {}",
            sums.pairs,
            compared(predicted, measured)
        ));
    }
}

/// Inodes the trial's recording saw evicted (`inode_evictions` of `<name>_report.json`, every
/// device), when its report is there.
fn inode_evictions(dir: &Path, name: &str) -> Option<u64> {
    let text = fs::read_to_string(dir.join(format!("{name}_report.json"))).ok()?;
    let report: Value = serde_json::from_str(&text).ok()?;
    report["devices"]
        .is_object()
        .then(|| crate::accesses::device_sum(&report, "inode_evictions"))
}

/// The compression-on point of `<stem><k>.json`, or a problem.
fn whatif_point(dir: &Path, stem: &str, k: u32, problems: &mut Vec<String>) -> Option<Value> {
    let rc = fs::read_to_string(dir.join(format!("{stem}{k}.rc"))).unwrap_or_default();
    let text = fs::read_to_string(dir.join(format!("{stem}{k}.json"))).unwrap_or_default();
    let point = match serde_json::from_str::<Value>(text.trim()) {
        Ok(points) if rc.trim() == "0" => points
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["compression"] == true)
            .cloned(),
        _ => None,
    };
    if point.is_none() {
        let err = fs::read_to_string(dir.join(format!("{stem}{k}.err"))).unwrap_or_default();
        problems.push(format!(
            "{stem}{k}: exit {:?}: {}",
            rc.trim(),
            err.lines().last().unwrap_or("(no stderr)")
        ));
    }
    point
}

/// The phases of a trial, by the marks that begin them (the last ends at `synced`): the seed
/// pass, the normalisation, the pressure (allocated, held, released), the measured passes, the
/// sync phase.
pub(super) const PHASES: [&str; 5] = ["start", "seeded", "normalised", "released", "passes_done"];
const PHASES_END: &str = "synced";

/// One trial's parts of the benchmark's cost: node reads, attributed memory per phase (sampled
/// every 0.5 s: each phase's mean and how long the trial spent in it) and conversions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct CostParts {
    pub node_reads: u64,
    pub phases: [PhaseMemory; PHASES.len()],
    pub conversions: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct PhaseMemory {
    pub mean_bytes: f64,
    pub seconds: f64,
}

impl CostParts {
    /// The benchmark's cost, in node reads, with each phase's memory held for `spans[phase]`
    /// seconds. The benchmark runs every setting over the same virtual time; under TCG a
    /// phase's wall time varies with the emulation and the host's load (the measured passes
    /// took 7.8 s in one trial and 59.6 s in the next, at the same setting, while the host
    /// built), so each phase's memory is charged over one span for all runs (the mean of the
    /// runs compared), not over each run's own: a trial whose quiet phases ran long would
    /// otherwise seem to hold less memory than one whose quiet phases ran short.
    pub fn cost(&self, spans: &[f64; PHASES.len()]) -> f64 {
        let byte_seconds: f64 = self
            .phases
            .iter()
            .zip(spans)
            .map(|(phase, span)| phase.mean_bytes * span)
            .sum();
        self.node_reads as f64
            + byte_seconds / BYTE_SECONDS_PER_READ
            + self.conversions as f64 * CONVERSION_WEIGHT
    }

    /// The mean attributed memory over the whole trial, as sampled.
    pub fn mean_bytes(&self) -> f64 {
        let seconds = self.seconds();
        let byte_seconds: f64 = self.phases.iter().map(|p| p.mean_bytes * p.seconds).sum();
        byte_seconds / seconds.max(f64::MIN_POSITIVE)
    }

    pub fn seconds(&self) -> f64 {
        self.phases.iter().map(|p| p.seconds).sum()
    }
}

/// When each of `trial`'s phases began, and when its passes ended, from marks.txt.
fn phase_bounds(dir: &Path, trial: &str) -> Result<[f64; PHASES.len() + 1]> {
    let marks = fs::read_to_string(dir.join("marks.txt")).unwrap_or_default();
    let at = |mark: &str| -> Result<f64> {
        let wanted = format!("{trial}_{mark}");
        marks
            .lines()
            .find_map(|line| {
                let (time, name) = line.split_once(' ')?;
                (name.trim() == wanted).then(|| time.parse().ok())?
            })
            .with_context(|| format!("marks.txt has no {wanted}"))
    };
    let mut bounds = [0.0; PHASES.len() + 1];
    for (bound, mark) in bounds.iter_mut().zip(PHASES.iter().chain([&PHASES_END])) {
        *bound = at(mark)?;
    }
    Ok(bounds)
}

/// Each phase's mean memory and length: the samples' trapezoids, each in the phase its middle
/// falls in.
pub(super) fn phase_memory(
    samples: &[(f64, f64)],
    bounds: &[f64; PHASES.len() + 1],
) -> [PhaseMemory; PHASES.len()] {
    let mut byte_seconds = [0.0; PHASES.len()];
    let mut seconds = [0.0; PHASES.len()];
    for w in samples.windows(2) {
        let middle = (w[0].0 + w[1].0) / 2.0;
        let Some(phase) = (0..PHASES.len()).find(|&p| (bounds[p]..bounds[p + 1]).contains(&middle))
        else {
            continue;
        };
        let dt = w[1].0 - w[0].0;
        byte_seconds[phase] += dt * (w[0].1 + w[1].1) / 2.0;
        seconds[phase] += dt;
    }
    let mut phases = [PhaseMemory::default(); PHASES.len()];
    for (p, phase) in phases.iter_mut().enumerate() {
        *phase = PhaseMemory {
            mean_bytes: byte_seconds[p] / seconds[p].max(f64::MIN_POSITIVE),
            seconds: seconds[p],
        };
    }
    phases
}

/// A trial's cost parts from its start to the end of its sync phase.
pub(super) fn cost_parts(dir: &Path, trial: &str) -> Result<CostParts> {
    let start = snap(dir, &format!("{trial}_start"))?;
    let end = snap(dir, &format!("{trial}_synced"))?;
    let text = fs::read_to_string(dir.join(format!("{trial}_memory.txt"))).unwrap_or_default();
    let samples: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| {
            let (t, b) = l.split_once(' ')?;
            Some((t.parse().ok()?, b.trim().parse().ok()?))
        })
        .collect();
    anyhow::ensure!(samples.len() >= 2, "{trial}: fewer than two memory samples");
    let bounds = phase_bounds(dir, trial)?;
    Ok(CostParts {
        node_reads: end.reads.saturating_sub(start.reads),
        phases: phase_memory(&samples, &bounds),
        conversions: end.nc.delta(&start.nc, "conversions"),
    })
}

/// The sync phase's conversions and restores (the module's counters) and its agent's summary.
fn sync_figures(dir: &Path, trial: &str) -> Result<(u64, u64, String)> {
    let before = snap(dir, &format!("{trial}_pass2"))?;
    let after = snap(dir, &format!("{trial}_synced"))?;
    let path = dir.join(format!("{trial}_sync.txt"));
    let said = fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    let late = said
        .trim()
        .strip_prefix("rounds ")
        .and_then(|rest| rest.split_once(" late "))
        .map(|(rounds, late)| format!("{late} of {rounds} late"))
        .with_context(|| format!("{trial}: the sync agent said {said:?}"))?;
    Ok((
        after.nc.delta(&before.nc, "conversions"),
        after.nc.delta(&before.nc, "restores"),
        late,
    ))
}

/// The setting a trial ran at, as people say it.
fn setting_of(name: &str) -> String {
    if name.starts_with("off") {
        "off".into()
    } else if name.starts_with("on") {
        format!(
            "{} %, {} ms",
            super::super::settings::THRESHOLD,
            super::super::settings::INTERVAL_MS
        )
    } else if let Some(rest) = name.strip_prefix("static_") {
        let (t, i) = rest.split_once('_').unwrap_or((rest, "?"));
        format!("{t} %, {i} ms")
    } else {
        "daemon --tune".into()
    }
}

/// Static settings (off, the RFC's, EXTRA_STATIC) against `daemon --tune`; controller / best.
fn controller_check(
    dir: &Path,
    names: &[String],
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> Option<f64> {
    let mut runs: Vec<(String, CostParts)> = Vec::new();
    for name in names {
        match cost_parts(dir, name) {
            Ok(parts) => runs.push((setting_of(name), parts)),
            Err(err) => problems.push(format!("controller grid: {err:#}")),
        }
    }
    let mut spans = [0.0; PHASES.len()];
    for (phase, span) in spans.iter_mut().enumerate() {
        *span = runs
            .iter()
            .map(|(_, p)| p.phases[phase].seconds)
            .sum::<f64>()
            / runs.len().max(1) as f64;
    }
    let span: f64 = spans.iter().sum();
    let mut settings: BTreeMap<String, Vec<CostParts>> = BTreeMap::new();
    for (setting, parts) in runs {
        settings.entry(setting).or_default().push(parts);
    }
    let mean = |v: &[CostParts], f: &dyn Fn(&CostParts) -> f64| {
        v.iter().map(f).sum::<f64>() / v.len().max(1) as f64
    };
    let best = settings
        .iter()
        .filter(|(s, _)| *s != "daemon --tune")
        .map(|(s, v)| (s.clone(), mean(v, &|p| p.cost(&spans))))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    lines.push(format!(
        "  controller on the phone trial (the benchmark's cost in node reads; each phase's \
         memory held over the runs' mean time in it: seed {:.1} s, normalisation {:.1} s, \
         pressure {:.1} s, passes {:.1} s, sync {:.1} s, {span:.1} s in all; means per trial):",
        spans[0], spans[1], spans[2], spans[3], spans[4]
    ));
    lines.push(format!(
        "    {:<16} {:>10} {:>12} {:>11} {:>8} {:>10} {:>7}",
        "setting", "node reads", "mean bytes", "conversions", "s", "cost", "/ best"
    ));
    for (setting, parts) in &settings {
        let cost = mean(parts, &|p| p.cost(&spans));
        lines.push(format!(
            "    {setting:<16} {:>10.0} {:>12.0} {:>11.0} {:>8.1} {cost:>10.1} {:>7.3}",
            mean(parts, &|p| p.node_reads as f64),
            mean(parts, &|p| p.mean_bytes()),
            mean(parts, &|p| p.conversions as f64),
            mean(parts, &|p| p.seconds()),
            cost / best.1
        ));
    }
    lines.push(
        "    the sync phase (per trial: conversions, restores, rounds that ran late):".into(),
    );
    for name in names {
        match sync_figures(dir, name) {
            Ok((conversions, restores, late)) => lines.push(format!(
                "      {name:<16} {} ({conversions} conversions, {restores} restores, {late})",
                setting_of(name)
            )),
            Err(err) => problems.push(format!("sync phase: {err:#}")),
        }
    }
    let controller = mean(settings.get("daemon --tune")?, &|p| p.cost(&spans));
    let ratio = controller / best.1;
    lines.push(format!(
        "    controller / best static ({}): {ratio:.3}",
        best.0
    ));
    // How much one trial's cost varies at one setting: what a single trial's ratio carries.
    for (setting, parts) in settings.iter().filter(|(_, parts)| parts.len() > 1) {
        let costs: Vec<f64> = parts.iter().map(|p| p.cost(&spans)).collect();
        let mid = costs.iter().sum::<f64>() / costs.len() as f64;
        let sd = (costs.iter().map(|c| (c - mid).powi(2)).sum::<f64>() / (costs.len() - 1) as f64)
            .sqrt();
        lines.push(format!(
            "    {setting}: one trial's cost varies by {:.1} % (sd of {} trials)",
            100.0 * sd / mid,
            costs.len()
        ));
    }
    if ratio > 1.0 {
        problems.push(format!(
            "controller: {ratio:.3} x the best static setting ({})",
            best.0
        ));
    }
    Some(ratio)
}

pub(super) fn verdict(label: &str, dir: &Path, trials: u32) -> Result<Verdict> {
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    if let Ok(errors) = fs::read_to_string(dir.join("guest_errors.txt")) {
        problems.extend(errors.lines().map(|l| format!("guest: {l}")));
    }
    let names = trial_names(trials);
    let offs: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("off"))
        .cloned()
        .collect();
    let ons: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("on"))
        .cloned()
        .collect();
    // The audits and the policy of every trial.
    let mut clean = 0;
    for name in &names {
        let fsck = fs::read_to_string(dir.join(format!("{name}_fsck.rc"))).unwrap_or_default();
        if fsck.trim() == "0" {
            clean += 1;
        } else {
            problems.push(format!("{name}: fsck.f2fs exited {:?}", fsck.trim()));
        }
        let found =
            fs::read_to_string(dir.join(format!("{name}_knobs_found.txt"))).unwrap_or_default();
        let restored =
            fs::read_to_string(dir.join(format!("{name}_knobs_restored.txt"))).unwrap_or_default();
        if found.trim().is_empty() || found != restored {
            problems.push(format!(
                "{name}: knobs found {:?}, after the policy's restore {:?}",
                found.trim(),
                restored.trim()
            ));
        }
        for tool in ["stream", "record", "report"] {
            let rc = fs::read_to_string(dir.join(format!("{name}_{tool}.rc"))).unwrap_or_default();
            if rc.trim() != "0" {
                problems.push(format!("{name}: {tool} exited {:?}", rc.trim()));
            }
        }
    }
    let sums = fs::read_to_string(dir.join("sums_count.txt")).unwrap_or_default();
    let files = fs::read_to_string(dir.join("files.txt")).unwrap_or_default();
    let files_ok = files.trim() == "ok" && sums.trim().parse::<u64>().is_ok_and(|n| n > 0);
    if !files_ok {
        problems.push(format!(
            "checksums after the last trial: {:?} ({} files)",
            files.trim(),
            sums.trim()
        ));
    }
    lines.push(format!(
        "  audits: fsck clean after {clean} of {} trials; checksums of all {} files after the \
         last: {}",
        names.len(),
        sums.trim(),
        files.trim()
    ));
    // The table, three ways.
    let mut rows: BTreeMap<&str, Vec<(String, Figures)>> = BTreeMap::new();
    let (mut equal, mut compared) = (0, 0);
    for name in offs.iter().chain(&ons) {
        let module = match module_figures(dir, name) {
            Ok(f) => f,
            Err(err) => {
                problems.push(format!("{name}: {err:#}"));
                continue;
            }
        };
        for (who, ours) in [
            ("stream", stream_figures(dir, name)),
            ("report", report_figures(dir, name)),
        ] {
            match ours {
                Ok(ours) => {
                    let (e, c) = compare_rows(who, name, &ours, &module, &mut problems);
                    equal += e;
                    compared += c;
                    rows.entry(who).or_default().push((name.clone(), ours));
                }
                Err(err) => problems.push(format!("{who} {name}: {err:#}")),
            }
        }
        rows.entry("module")
            .or_default()
            .push((name.clone(), module));
    }
    // report --compare of each pair: its totals against the module's rows.
    for k in 1..=trials {
        let text = fs::read_to_string(dir.join(format!("compare{k}.json"))).unwrap_or_default();
        let Ok(comparison) = serde_json::from_str::<Value>(&text) else {
            problems.push(format!("report --compare off{k} on{k}: no JSON"));
            continue;
        };
        for (mode, trial) in [("off", format!("off{k}")), ("on", format!("on{k}"))] {
            let Ok(module) = module_figures(dir, &trial) else {
                continue;
            };
            let totals = &comparison["totals"];
            for (what, key, theirs) in [
                ("attached entries", "retained_nodes", module.attached),
                (
                    "compressed entries",
                    "compressed_entries",
                    module.compressed,
                ),
                ("logical bytes", "attributed_bytes", module.logical),
                ("node reads", "node_reads", module.node_reads),
                ("conversions", "conversions", module.conversions),
            ] {
                let ours = totals[key][mode].as_u64().unwrap_or(0);
                compared += 1;
                if ours == theirs {
                    equal += 1;
                } else {
                    problems.push(format!(
                        "report --compare {trial}: {what} {ours}, the module's {theirs}"
                    ));
                }
            }
        }
    }
    // "off1".starts_with("on") is false: the prefixes tell the modes apart.
    let mode_rows = |who: &str, mode: &str| -> Vec<Figures> {
        rows.get(who)
            .into_iter()
            .flatten()
            .filter(|(n, _)| n.starts_with(mode))
            .map(|(_, f)| *f)
            .collect()
    };
    for who in ["module", "stream", "report"] {
        let off = Figures::mean(&mode_rows(who, "off"));
        let on = Figures::mean(&mode_rows(who, "on"));
        let title = match who {
            "module" => "the phone table from the module's counters (means per trial; logical \
                         bytes without the fixed context):"
                .to_string(),
            other => format!("the same from nodescope {other}:"),
        };
        lines.extend(table(&title, &off, &on));
    }
    for name in offs.iter().chain(&ons) {
        if let Some((_, f)) = rows
            .get("module")
            .and_then(|r| r.iter().find(|(n, _)| n == name))
        {
            lines.push(format!(
                "    {name}: entries {} compressed {} node reads {} conversions {}",
                f.attached, f.compressed, f.node_reads, f.conversions
            ));
        }
    }
    let (app_equal, app_compared) = per_app_exact(
        dir,
        &offs.iter().chain(&ons).cloned().collect::<Vec<_>>(),
        &mut problems,
    );
    let (table_equal, table_compared) = (equal, compared);
    equal += app_equal;
    compared += app_compared;
    lines.push(format!(
        "  exact: {equal} of {compared} values equal (the table: {table_equal} of \
         {table_compared}; per app and trial, reads and restores: {app_equal} of {app_compared})"
    ));
    match per_app_lines(dir, &offs, &ons) {
        Ok(app_lines) => lines.extend(app_lines),
        Err(err) => problems.push(format!("per app: {err:#}")),
    }
    // Node reads by node type in the on trials; every type must be read.
    let types = match node_types(dir, &ons) {
        Ok(types) => types,
        Err(err) => {
            problems.push(format!("node types: {err:#}"));
            BTreeMap::new()
        }
    };
    let type_part = NODE_TYPES
        .iter()
        .map(|t| format!("{t}:{}", types.get(*t).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(",");
    for t in NODE_TYPES {
        if types.get(t).copied().unwrap_or(0) == 0 {
            problems.push(format!(
                "node types: no {t} node read in the on trials (xattrs: user.{XATTR_NAME})"
            ));
        }
    }
    lines.push(format!(
        "  node reads by node type in the on trials: {types:?}"
    ));
    // Restores that failed on a node's type: none.
    let mut type_fails = 0;
    for name in &names {
        if let (Ok(start), Ok(end)) = (
            snap(dir, &format!("{name}_start")),
            snap(dir, &format!("{name}_final")),
        ) {
            type_fails += end.nc.delta(&start.nc, "restore_fail_node_type");
            let fails = end.nc.delta(&start.nc, "restore_fails");
            if fails > 0 {
                problems.push(format!("{name}: {fails} restores failed"));
            }
        }
    }
    if type_fails > 0 {
        problems.push(format!("{type_fails} restores failed on the node type"));
    }
    let (whatif_reads, whatif_restores) = whatif_check(dir, trials, &mut problems, &mut lines);
    whatif_given_lines(dir, trials, &mut lines);
    let ratio = controller_check(dir, &names, &mut problems, &mut lines);
    if compared == 0 || equal != compared {
        problems.push(format!("exact: {equal} of {compared}"));
    }
    let pass = problems.is_empty();
    let final_line = format!(
        "phone-trial {label} trials={trials}+{trials} node_types={type_part} \
         restore_fail_node_type={type_fails} exact={equal}/{compared} \
         whatif_reads={whatif_reads} whatif_restores={whatif_restores} controller/best={} \
         fsck={} files={} {}",
        ratio.map_or("?".into(), |r| format!("{r:.2}")),
        if clean == names.len() {
            "clean"
        } else {
            "DIRTY"
        },
        if files_ok { "ok" } else { "BAD" },
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(Verdict {
        lines,
        final_line,
        pass,
        problems,
    })
}
