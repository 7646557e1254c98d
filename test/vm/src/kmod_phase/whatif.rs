//! The what-if against the module (issue 32, point 5): the budget phase's off recording, with
//! its access trace, replayed by `nodescope whatif` at the on run's threshold, interval and
//! budget (kmod.sh), against what the module then did in the on run over the same span (from
//! the emptied cache to the end of the replay). Node reads are a check: the prediction within
//! [`MAX_ERROR_PERCENT`] of iostat's count. Restores and the entries left at the end are
//! reported with their errors.
use std::{fs, path::Path};

use serde_json::Value;

use super::counters::{iostat_reads, ModuleCounters};

/// The issue's bound on the what-if's node-read error.
pub(super) const MAX_ERROR_PERCENT: f64 = 15.0;

/// (predicted, measured) relative error in percent of the measured; None when measured is 0.
pub(super) fn error(predicted: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (predicted as f64 - measured as f64) / measured as f64 * 100.0)
}

pub(super) fn shown(err: Option<f64>) -> String {
    err.map_or_else(|| "-".into(), |e| format!("{e:+.1} %"))
}

/// The what-if's node reads against the module's, for the final line.
#[derive(Debug, PartialEq)]
pub(super) struct ReadsCheck {
    pub predicted: u64,
    pub measured: u64,
}

/// Node reads, restores and entries at the end of the on run.
fn measured(dir: &Path) -> Option<(u64, u64, u64)> {
    let start = ModuleCounters::read(dir, "budget_on_start").ok()?;
    let end = ModuleCounters::read(dir, "budget_on_after").ok()?;
    let reads = iostat_reads(dir, "budget_on_after")
        .ok()?
        .saturating_sub(iostat_reads(dir, "budget_on_start").ok()?);
    Some((reads, end.delta(&start, "restores"), end.get("entries")))
}

/// The what-if's one compression-on point, or why there is none.
fn predicted_point(dir: &Path) -> Result<Value, String> {
    let rc = fs::read_to_string(dir.join("whatif.rc")).unwrap_or_default();
    let text = fs::read_to_string(dir.join("whatif.json")).unwrap_or_default();
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(points) if rc.trim() == "0" => {
            let on: Vec<Value> = points
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["compression"] == true)
                .cloned()
                .collect();
            match <[Value; 1]>::try_from(on) {
                Ok([point]) => Ok(point),
                Err(on) => Err(format!("{} compression-on points, want 1", on.len())),
            }
        }
        _ => {
            let err = fs::read_to_string(dir.join("whatif.err")).unwrap_or_default();
            Err(format!(
                "exit {:?}: {}",
                rc.trim(),
                err.lines().last().unwrap_or("(no stderr)")
            ))
        }
    }
}

/// kmod.sh runs the what-if without --device (issue 31): it must have found the recording's
/// device from the events' device number and said which it read.
fn device_check(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) {
    let err = fs::read_to_string(dir.join("whatif.err")).unwrap_or_default();
    match err
        .lines()
        .find(|l| l.starts_with("whatif: reading node blocks from /dev/"))
    {
        Some(line) if line.contains("(the recording's device ") => {
            lines.push(format!("  what-if device: {line}"));
        }
        _ => problems.push(
            "whatif: without --device it did not say it found the recording's device by its \
             number"
                .into(),
        ),
    }
}

/// Lines for the verdict; a what-if that did not run, or whose node reads are off by more than
/// the bound, is a problem.
pub(super) fn whatif_checks(
    dir: &Path,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) -> Option<ReadsCheck> {
    device_check(dir, problems, lines);
    let point = match predicted_point(dir) {
        Ok(point) => point,
        Err(why) => {
            problems.push(format!("whatif: {why}"));
            return None;
        }
    };
    let Some((reads, restores, retained)) = measured(dir) else {
        problems.push("whatif: no counters of the on run to compare with".into());
        return None;
    };
    let knobs = &point["settings"]["knobs"];
    let outcome = &point["outcome"];
    let (p_reads, p_restores, p_retained) = (
        outcome["total_node_reads"].as_u64().unwrap_or(0),
        outcome["total_restores"].as_u64().unwrap_or(0),
        outcome["end_nodes"].as_u64().unwrap_or(0),
    );
    lines.push(format!(
        "  what-if: the off run's trace at threshold {} % interval {} ms against the module's on \
         run (predicted / measured, error): node reads {p_reads} / {reads} ({}), restores \
         {p_restores} / {restores} ({}), entries at the end {p_retained} / {retained} ({}); \
         pressure episodes {}",
        knobs["threshold"].as_u64().unwrap_or(0),
        knobs["interval_ms"].as_u64().unwrap_or(0),
        shown(error(p_reads, reads)),
        shown(error(p_restores, restores)),
        shown(error(p_retained, retained)),
        outcome["pressure_episodes"].as_u64().unwrap_or(0)
    ));
    match error(p_reads, reads) {
        Some(e) if e.abs() <= MAX_ERROR_PERCENT => {}
        e => problems.push(format!(
            "whatif: node reads {p_reads} predicted, {reads} measured ({}), bound \
             {MAX_ERROR_PERCENT} %",
            shown(e)
        )),
    }
    Some(ReadsCheck {
        predicted: p_reads,
        measured: reads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictions_are_set_beside_the_on_run_with_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        let iostat = |reads: u64| format!("[READ]\nfs node:  {} {reads}\n", reads * 4096);
        write("nc_budget_on_start.txt", "restores 10\nentries 0\n");
        write("nc_budget_on_after.txt", "restores 110\nentries 50\n");
        write("iostat_budget_on_start.txt", &iostat(1000));
        write("iostat_budget_on_after.txt", &iostat(1400));
        write("whatif.rc", "0\n");
        write(
            "whatif.err",
            "whatif: reading node blocks from /dev/vda (the recording's device 254:0, found \
             through /sys/dev/block/254:0)\n",
        );
        let point = |reads: u64| {
            format!(
                r#"[{{"compression":false,"settings":{{"knobs":null}},"outcome":{{}}}},
                {{"compression":true,"settings":{{"knobs":{{"threshold":25,"interval_ms":100}}}},
                 "outcome":{{"total_node_reads":{reads},"total_restores":90,"end_nodes":50,
                            "retained_nodes":7,"pressure_episodes":3}}}}]"#
            )
        };
        write("whatif.json", &point(440));
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        let check = whatif_checks(dir.path(), &mut problems, &mut lines);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            check,
            Some(ReadsCheck {
                predicted: 440,
                measured: 400
            })
        );
        assert_eq!(
            lines[0],
            "  what-if device: whatif: reading node blocks from /dev/vda (the recording's \
             device 254:0, found through /sys/dev/block/254:0)"
        );
        assert_eq!(
            lines[1],
            "  what-if: the off run's trace at threshold 25 % interval 100 ms against the \
             module's on run (predicted / measured, error): node reads 440 / 400 (+10.0 %), \
             restores 90 / 100 (-10.0 %), entries at the end 50 / 50 (+0.0 %); pressure \
             episodes 3"
        );
        // 461 of 400 is 15.25 % too many: the check fails, the figures still go to the line.
        write("whatif.json", &point(461));
        let check = whatif_checks(dir.path(), &mut problems, &mut lines);
        assert_eq!(check.map(|c| c.predicted), Some(461));
        assert_eq!(
            problems,
            ["whatif: node reads 461 predicted, 400 measured (+15.2 %), bound 15 %"]
        );
        problems.clear();
        write("whatif.rc", "124\n");
        write("whatif.err", "nodescope: something\n");
        assert_eq!(whatif_checks(dir.path(), &mut problems, &mut lines), None);
        assert_eq!(
            problems,
            [
                "whatif: without --device it did not say it found the recording's device by \
                 its number",
                "whatif: exit \"124\": nodescope: something"
            ]
        );
    }
}
