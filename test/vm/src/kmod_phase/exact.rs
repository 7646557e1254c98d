//! Every event exact (issue 32): `nodescope stream`, with the probes it discovered at start,
//! ran over the phase's three measurements (kmod.sh, `exact.json`); its cumulative counts
//! must equal the module's own counters over the same span (`nc_exact_start.txt`,
//! `nc_exact_end.txt`), for every count of every kind the discovered manifest probes.
use std::{fs, path::Path};

use serde_json::Value;

use super::counters::{ModuleCounters, FAIL_REASONS};

/// One comparison: the stream's count (a path under `cumulative`) and the module's counter.
struct Check {
    stream: Vec<&'static str>,
    module: String,
}

impl Check {
    fn new(stream: &[&'static str], module: impl Into<String>) -> Check {
        Check {
            stream: stream.to_vec(),
            module: module.into(),
        }
    }
}

/// (stream's queue name, module's queue name).
const QUEUES: [(&str, &str); 4] = [
    ("raw", "raw"),
    ("b256", "256"),
    ("b512", "512"),
    ("b1024", "1024"),
];

/// The counts a probed kind must get exactly. node_read is not here: the stream counts node
/// reads from F2FS's tracepoints and iostat, which the VM test proves on its own.
fn checks_of(kind: &str, latency: bool) -> Vec<Check> {
    match kind {
        "insert" => vec![Check::new(&["inserts"], "inserts")],
        "forget" => vec![Check::new(&["forgets"], "forgets")],
        "convert" => vec![Check::new(&["conversions"], "conversions")],
        "convert_reject" => vec![Check::new(&["convert_rejects"], "convert_rejects")],
        "convert_abort" => vec![Check::new(&["convert_aborts"], "convert_aborts")],
        // Every restore timed (the module's `latency_ns` field), and the times' sum exact.
        "restore" if latency => vec![
            Check::new(&["restores"], "restores"),
            Check::new(&["restore_latency", "count"], "restores"),
            Check::new(&["restore_latency", "total_ns"], "restore_ns"),
        ],
        "restore" => vec![Check::new(&["restores"], "restores")],
        "restore_nomem" => vec![Check::new(&["restore_nomem"], "restore_nomem")],
        "restore_fail" => FAIL_REASONS
            .iter()
            .map(|r| Check::new(&["restore_fail_reasons", r], format!("restore_fail_{r}")))
            .collect(),
        "reclaim" => QUEUES
            .iter()
            .map(|(ours, theirs)| Check::new(&["reclaims", ours], format!("reclaim_{theirs}")))
            .collect(),
        "second_chance" => ["worker", "shrinker", "race"]
            .iter()
            .map(|by| {
                Check::new(
                    &["second_chance_reasons", by],
                    format!("second_chance_{by}"),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The kinds a manifest probes (`kind = "..."` lines).
pub(super) fn probed_kinds(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("kind = \"")?.strip_suffix('"'))
        .map(str::to_string)
        .collect()
}

#[derive(Default)]
pub(crate) struct Exact {
    /// Counts compared, and how many were equal.
    pub checks: usize,
    pub equal: usize,
    pub drops: u64,
}

/// Compare, pushing a line per count and a problem per difference.
pub(super) fn exact_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> Exact {
    let mut exact = Exact::default();
    let manifest = fs::read_to_string(dir.join("discovered.toml")).unwrap_or_default();
    let stream = fs::read_to_string(dir.join("exact.json")).unwrap_or_default();
    let (start, end) = match (
        ModuleCounters::read(dir, "exact_start"),
        ModuleCounters::read(dir, "exact_end"),
    ) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(err), _) | (_, Err(err)) => {
            problems.push(format!("exact: {err:#}"));
            return exact;
        }
    };
    let windows: Vec<Value> = stream
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let Some(last) = windows.last() else {
        problems.push("exact: the stream printed no window (exact.json, exact.err)".into());
        return exact;
    };
    exact.drops = windows
        .iter()
        .map(|w| w["drops"].as_u64().unwrap_or(0))
        .sum();
    if exact.drops > 0 {
        problems.push(format!("exact: the stream lost {} events", exact.drops));
    }
    let rc = fs::read_to_string(dir.join("exact.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        problems.push(format!("exact: the stream exited {:?}", rc.trim()));
    }
    let cumulative = &last["cumulative"];
    let kinds = probed_kinds(&manifest);
    let span = Span {
        label: "stream",
        start: &start,
        end: &end,
    };
    count_checks(&span, &kinds, true, cumulative, &mut exact, problems, lines);
    restorer_checks(&windows, cumulative, problems, lines);
    if kinds.iter().any(|k| k == "insert") {
        gauge_checks(&last["cache"], &start, &end, problems, lines);
    }
    metrics_checks(dir, cumulative, problems, lines);
    if exact.checks == 0 {
        problems.push(format!(
            "exact: no count to compare (probed kinds: {kinds:?}; discovered.toml)"
        ));
    }
    exact
}

/// The stream's cache gauges at its end against the module's entries per queue. Every entry
/// the stream saw begin (inserts) and end is counted, so the only difference allowed is an
/// entry already cached when the stream attached (`entries` at the span's start) that is
/// still there: the stream may count up to that many fewer, never more.
pub(crate) fn gauge_checks(
    cache: &Value,
    start: &ModuleCounters,
    end: &ModuleCounters,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let unseen = start.get("entries");
    let mut shown = Vec::new();
    for (ours, theirs) in QUEUES {
        let counted = if ours == "raw" {
            cache["raw_entries"].as_u64().unwrap_or(0)
        } else {
            cache["slots"][ours].as_u64().unwrap_or(0)
        };
        let cached = end.get(&format!("entries_{theirs}"));
        if counted > cached || cached - counted > unseen {
            problems.push(format!(
                "gauges: {ours} entries at the stream's end {counted}, the module's {cached} \
                 ({unseen} cached before the stream attached)"
            ));
        }
        shown.push(format!("{ours} {counted}/{cached}"));
    }
    lines.push(format!(
        "  gauges at the stream's end (nodescope/module; {unseen} entries cached before it \
         attached): {}",
        shown.join(", ")
    ));
}

/// A span of the module's counters and who counted it.
pub(crate) struct Span<'a> {
    /// `stream`, or the recording a report was made of.
    pub label: &'a str,
    pub start: &'a ModuleCounters,
    pub end: &'a ModuleCounters,
}

/// Every count of every probed kind: `counts` (a stream's `cumulative` or a report's `totals`,
/// the same JSON) against the module's counter increase over `span`; a line per count, a
/// problem per difference, and one for events with a reason nodescope does not know. With
/// `latency`, the restores' latency count and sum too (the module's tracepoint's own figure).
pub(crate) fn count_checks(
    span: &Span,
    kinds: &[String],
    latency: bool,
    counts: &Value,
    exact: &mut Exact,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let label = span.label;
    for kind in kinds {
        for check in checks_of(kind, latency) {
            let ours = check
                .stream
                .iter()
                .fold(counts, |value, key| &value[key])
                .as_u64()
                .unwrap_or(0);
            let theirs = span.end.delta(span.start, &check.module);
            exact.checks += 1;
            let verdict = if ours == theirs {
                exact.equal += 1;
                "ok"
            } else {
                problems.push(format!(
                    "exact ({label}): {kind} {}: nodescope {ours}, the module {theirs}",
                    check.module
                ));
                "DIFFERS"
            };
            lines.push(format!(
                "  exact {kind:<13} {:<28} nodescope {ours:>8}  module {theirs:>8}  {verdict}  ({label}: {})",
                check.module,
                check.stream.join(".")
            ));
        }
    }
    let unknown = counts["second_chance_reasons"]["unknown"]
        .as_u64()
        .unwrap_or(0)
        + counts["restore_fail_reasons"]["unknown"]
            .as_u64()
            .unwrap_or(0);
    if unknown > 0 {
        problems.push(format!(
            "exact ({label}): {unknown} events with a reason nodescope does not know"
        ));
    }
}

/// Restores per restoring process (each window's `processes`, summed by app): together they
/// must be every restore of the span, and none may be a kernel thread's. A restore happens in
/// the lookup of the task that wants the node (the readers here: cat, ls, md5sum), so a kernel
/// thread's would mean the event was attributed to the wrong context.
fn restorer_checks(
    windows: &[Value],
    cumulative: &Value,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let mut by_app = std::collections::BTreeMap::<String, u64>::new();
    for process in windows
        .iter()
        .flat_map(|w| w["processes"].as_array().into_iter().flatten())
    {
        let restores = process["restores"].as_u64().unwrap_or(0);
        if restores > 0 {
            *by_app
                .entry(process["app"].as_str().unwrap_or("").to_string())
                .or_default() += restores;
        }
    }
    let attributed: u64 = by_app.values().sum();
    let total = cumulative["restores"].as_u64().unwrap_or(0);
    if attributed != total {
        problems.push(format!(
            "exact: restores attributed to processes {attributed}, restores {total}"
        ));
    }
    let kernel: u64 = by_app
        .iter()
        .filter(|(app, _)| app.starts_with('['))
        .map(|(_, n)| n)
        .sum();
    if kernel > 0 {
        problems.push(format!(
            "exact: {kernel} restores attributed to kernel threads"
        ));
    }
    let shown: Vec<String> = by_app.iter().map(|(app, n)| format!("{app} {n}")).collect();
    lines.push(format!(
        "  restores by restoring app: {} (of {total})",
        shown.join(", ")
    ));
}

/// The OpenMetrics scrape at the span's end against the stream's cumulative counts: restores
/// summed over apps, reclaims per queue, restore failures and second chances per reason.
fn metrics_checks(
    dir: &Path,
    cumulative: &Value,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let text = fs::read_to_string(dir.join("metrics.txt")).unwrap_or_default();
    if !text.ends_with("# EOF\n") {
        problems.push("metrics: no complete scrape (metrics.txt)".into());
        return;
    }
    // The sum of a family's samples whose labels contain every `want`.
    let sum = |name: &str, want: &[&str]| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter(|l| want.iter().all(|w| l.contains(w)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let mut pairs = vec![(
        "restores".to_string(),
        sum("nodescope_restores_total", &[]),
        cumulative["restores"].as_u64().unwrap_or(0),
    )];
    for (ours, theirs) in QUEUES {
        let label = format!("queue=\"{}\"", theirs);
        pairs.push((
            format!("reclaims {theirs}"),
            sum("nodescope_reclaims_total", &[&label]),
            cumulative["reclaims"][ours].as_u64().unwrap_or(0),
        ));
    }
    for reason in FAIL_REASONS {
        let label = format!("reason=\"{reason}\"");
        pairs.push((
            format!("restore failures {reason}"),
            sum("nodescope_restore_failures_total", &[&label]),
            cumulative["restore_fail_reasons"][reason]
                .as_u64()
                .unwrap_or(0),
        ));
    }
    for by in ["worker", "shrinker", "race"] {
        let label = format!("reason=\"{by}\"");
        pairs.push((
            format!("second chances {by}"),
            sum("nodescope_second_chances_total", &[&label]),
            cumulative["second_chance_reasons"][by]
                .as_u64()
                .unwrap_or(0),
        ));
    }
    // The restore latency histogram: its count, and its sum (seconds with nine decimals) back
    // in nanoseconds.
    let latency = "nodescope_restore_latency_seconds";
    pairs.push((
        "restore latency count".into(),
        sum(&format!("{latency}_count"), &[]),
        cumulative["restore_latency"]["count"].as_u64().unwrap_or(0),
    ));
    let sum_ns = text
        .lines()
        .filter(|l| l.starts_with(&format!("{latency}_sum{{")))
        .filter_map(|l| l.rsplit(' ').next()?.replace('.', "").parse::<u64>().ok())
        .sum();
    pairs.push((
        "restore latency sum (ns)".into(),
        sum_ns,
        cumulative["restore_latency"]["total_ns"]
            .as_u64()
            .unwrap_or(0),
    ));
    let differ: Vec<String> = pairs
        .iter()
        .filter(|(_, scraped, streamed)| scraped != streamed)
        .map(|(what, scraped, streamed)| format!("{what}: /metrics {scraped}, stream {streamed}"))
        .collect();
    lines.push(format!(
        "  OpenMetrics against the stream: {} of {} counters equal",
        pairs.len() - differ.len(),
        pairs.len()
    ));
    problems.extend(differ.into_iter().map(|d| format!("metrics: {d}")));
}

/// `report --compare` of the budget phase's two recordings (off, on), each from the emptied
/// cache to the worker's stop after the replay: its node reads and restores must be iostat's
/// and the module's over the same span, its retained nodes the module's entries at the end.
/// Returns
/// (equal, compared).
pub(super) fn compare_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> (usize, usize) {
    let text = fs::read_to_string(dir.join("compare.txt")).unwrap_or_default();
    lines.push("  report --compare budget_off.nsr budget_on.nsr:".into());
    lines.extend(text.lines().map(|l| format!("    {l}")));
    for mode in ["off", "on"] {
        let rc = fs::read_to_string(dir.join(format!("record_{mode}.rc"))).unwrap_or_default();
        if rc.trim() != "0" {
            problems.push(format!("compare: record {mode} exited {:?}", rc.trim()));
        }
    }
    let json = fs::read_to_string(dir.join("compare.json")).unwrap_or_default();
    let Ok(comparison) = serde_json::from_str::<Value>(&json) else {
        problems.push("compare: no JSON comparison (compare.json, compare.txt)".into());
        return (0, 0);
    };
    latency_beside_the_cover_letter(&comparison, lines);
    if comparison["cache_partial"] != false {
        problems.push("compare: a recording saw entries leave that it never saw arrive".into());
    }
    let (mut equal, mut compared) = (0, 0);
    for mode in ["off", "on"] {
        let counters =
            |phase: &str| ModuleCounters::read(dir, &format!("budget_{mode}_{phase}")).ok();
        let (start, end) = (counters("start"), counters("end"));
        let module = |key: &str| Some(end.as_ref()?.delta(start.as_ref()?, key));
        let reads =
            |phase: &str| super::counters::iostat_reads(dir, &format!("budget_{mode}_{phase}"));
        let iostat = match (reads("start"), reads("end")) {
            (Ok(before), Ok(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        let totals = &comparison["totals"];
        for (what, key, theirs) in [
            ("node reads", "node_reads", iostat),
            ("restores", "restores", module("restores")),
            (
                "retained nodes",
                "retained_nodes",
                end.as_ref().map(|e| e.get("entries")),
            ),
            // nodescope attributes entries, raw buffers and slots: the module's figure less its
            // fixed context, which no event tells of.
            (
                "attributed bytes",
                "attributed_bytes",
                end.as_ref().map(|e| {
                    e.get("attributed_bytes")
                        .saturating_sub(e.get("fixed_bytes"))
                }),
            ),
        ] {
            let ours = totals[key][mode].as_u64().unwrap_or(0);
            compared += 1;
            if Some(ours) == theirs {
                equal += 1;
            } else {
                problems.push(format!(
                    "compare {mode}: {what} {ours}, the kernel's {theirs:?}"
                ));
            }
        }
    }
    (equal, compared)
}

/// Issue 51: the comparison's latency rows (both recordings time their lookups) beside the
/// cover letter's paired median replay change, saying what differs.
fn latency_beside_the_cover_letter(comparison: &Value, lines: &mut Vec<String>) {
    let latency = &comparison["latency"];
    let percent = |key: &str| {
        latency[key]
            .as_f64()
            .map_or_else(|| "-".to_string(), |p| format!("{p:+.2} %"))
    };
    let pair = |key: &str| {
        let p = &latency[key];
        format!(
            "{} -> {}",
            p["off"].as_u64().unwrap_or(0),
            p["on"].as_u64().unwrap_or(0)
        )
    };
    lines.push(format!(
        "  retrieval time, off -> on: median lookup {} ns, median node {} ns, wait {} ns; \
         paired median change per node {} over {} nodes, per app {} over {} apps",
        pair("median_lookup_ns"),
        pair("median_node_ns"),
        pair("wait_ns"),
        percent("paired_node_change_percent"),
        latency["node_pairs"].as_u64().unwrap_or(0),
        percent("paired_app_change_percent"),
        latency["app_pairs"].as_u64().unwrap_or(0),
    ));
    lines.push(
        "  beside the cover letter's paired median replay change -24.98 % at 3 MiB: its pairs \
         are replays timed end to end on NVMe (KVM, the RFC's module); ours are nodes' \
         (files') lookup times, under TCG, on our reconstruction, over each whole recording \
         (the populating replay too)"
            .into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probed_kinds_decide_the_checks() {
        let manifest = "target = \"kernel\"\n\n[[probe]]\nkind = \"restore\"\n\
                        symbol = \"f\"\n\n[[probe]]\nkind = \"second_chance\"\n";
        let kinds = probed_kinds(manifest);
        assert_eq!(kinds, ["restore", "second_chance"]);
        let modules: Vec<String> = kinds
            .iter()
            .flat_map(|k| checks_of(k, true))
            .map(|c| c.module)
            .collect();
        assert_eq!(
            modules,
            [
                "restores",
                "restores",
                "restore_ns",
                "second_chance_worker",
                "second_chance_shrinker",
                "second_chance_race"
            ]
        );
        assert_eq!(checks_of("reclaim", true).len(), 4);
        assert_eq!(checks_of("restore_fail", true).len(), 7);
        assert!(checks_of("node_read", true).is_empty());
    }

    #[test]
    fn equal_counts_pass_and_a_difference_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("discovered.toml", "[[probe]]\nkind = \"second_chance\"\n");
        write(
            "nc_exact_start.txt",
            "second_chance_worker 10\nsecond_chance_race 1\n",
        );
        write(
            "nc_exact_end.txt",
            "second_chance_worker 15\nsecond_chance_shrinker 2\nsecond_chance_race 1\n",
        );
        write("exact.rc", "0\n");
        write(
            "metrics.txt",
            "nodescope_second_chances_total{device=\"vda\",reason=\"worker\"} 5\n\
             nodescope_second_chances_total{device=\"vda\",reason=\"shrinker\"} 2\n\
             nodescope_restore_latency_seconds_count{device=\"vda\"} 3\n\
             nodescope_restore_latency_seconds_sum{device=\"vda\"} 0.000045001\n# EOF\n",
        );
        let line = |worker: u64| {
            format!(
                "{{\"drops\":0,\"cumulative\":{{\"second_chance_reasons\":\
                 {{\"worker\":{worker},\"shrinker\":2,\"race\":0,\"unknown\":0}},\
                 \"restore_latency\":{{\"count\":3,\"total_ns\":45001}}}}}}\n"
            )
        };
        write("exact.json", &line(5));
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        let exact = exact_checks(dir.path(), &mut problems, &mut lines);
        assert_eq!((exact.checks, exact.equal, exact.drops), (3, 3, 0));
        assert!(problems.is_empty(), "{problems:?}");
        write("exact.json", &line(4));
        let exact = exact_checks(dir.path(), &mut problems, &mut lines);
        assert_eq!((exact.checks, exact.equal), (3, 2));
        assert_eq!(
            problems,
            [
                "exact (stream): second_chance second_chance_worker: nodescope 4, the module 5",
                "metrics: second chances worker: /metrics 5, stream 4"
            ]
        );
        assert!(lines
            .contains(&"  OpenMetrics against the stream: 17 of 17 counters equal".to_string()));
    }

    #[test]
    fn restores_must_all_be_attributed_and_none_to_a_kernel_thread() {
        let windows: Vec<Value> = [
            r#"{"processes":[{"app":"cat","restores":3},{"app":"ls","restores":0}]}"#,
            r#"{"processes":[{"app":"cat","restores":2},{"app":"md5sum","restores":1}]}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
        let cumulative =
            |n: u64| serde_json::from_str::<Value>(&format!(r#"{{"restores":{n}}}"#)).unwrap();
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        restorer_checks(&windows, &cumulative(6), &mut problems, &mut lines);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            lines,
            ["  restores by restoring app: cat 5, md5sum 1 (of 6)"]
        );
        restorer_checks(&windows, &cumulative(7), &mut problems, &mut lines);
        assert_eq!(
            problems,
            ["exact: restores attributed to processes 6, restores 7"]
        );
        let kworker = serde_json::from_str::<Value>(
            r#"{"processes":[{"app":"[kernel thread]","restores":1}]}"#,
        );
        problems.clear();
        restorer_checks(
            &[kworker.unwrap()],
            &cumulative(1),
            &mut problems,
            &mut lines,
        );
        assert_eq!(problems, ["exact: 1 restores attributed to kernel threads"]);
    }
}
