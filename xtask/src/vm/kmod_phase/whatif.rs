//! The what-if against the module (issue 32, point 5; reported, not yet a check): the budget
//! phase's off recording, with its access trace, replayed by `nodescope whatif` at the on run's
//! threshold and budget (kmod.sh), beside what the module then did in the on run over the same
//! span (from the emptied cache to the end of the replay).
use std::{fs, path::Path};

use super::verdict::{iostat_reads, Counters};
use crate::vm::json::Json;

/// (predicted, measured) relative error in percent of the measured; None when measured is 0.
fn error(predicted: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (predicted as f64 - measured as f64) / measured as f64 * 100.0)
}

fn shown(err: Option<f64>) -> String {
    err.map_or_else(|| "-".into(), |e| format!("{e:+.1} %"))
}

/// Lines for the verdict; a what-if that did not run is a problem.
pub(super) fn whatif_lines(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) {
    let rc = fs::read_to_string(dir.join("whatif.rc")).unwrap_or_default();
    let text = fs::read_to_string(dir.join("whatif.json")).unwrap_or_default();
    let points = match Json::parse(text.trim()) {
        Ok(points) if rc.trim() == "0" => points,
        _ => {
            let err = fs::read_to_string(dir.join("whatif.err")).unwrap_or_default();
            problems.push(format!(
                "whatif: exit {:?}: {}",
                rc.trim(),
                err.lines().last().unwrap_or("(no stderr)")
            ));
            return;
        }
    };
    let measure = || -> Option<(u64, u64, u64)> {
        let start = Counters::read(dir, "budget_on_start").ok()?;
        let end = Counters::read(dir, "budget_on_after").ok()?;
        let reads = iostat_reads(dir, "budget_on_after")
            .ok()?
            .saturating_sub(iostat_reads(dir, "budget_on_start").ok()?);
        Some((reads, end.delta(&start, "restores"), end.get("entries")))
    };
    let Some((reads, restores, retained)) = measure() else {
        problems.push("whatif: no counters of the on run to compare with".into());
        return;
    };
    lines.push(format!(
        "  what-if (reported, not yet a check): the off run's trace at the on run's settings \
         against the module's on run (node reads {reads}, restores {restores}, retained \
         {retained})"
    ));
    for point in points.items() {
        if point.get("compression") != &Json::Bool(true) {
            continue;
        }
        let knobs = point.get("settings").get("knobs");
        let outcome = point.get("outcome");
        let (p_reads, p_restores, p_retained) = (
            outcome.get("total_node_reads").u64(),
            outcome.get("total_restores").u64(),
            outcome.get("retained_nodes").u64(),
        );
        lines.push(format!(
            "    threshold {} % interval {} ms: node reads {p_reads} ({}), restores {p_restores} \
             ({}), retained {p_retained} ({}), pressure episodes {}",
            knobs.get("threshold").u64(),
            knobs.get("interval_ms").u64(),
            shown(error(p_reads, reads)),
            shown(error(p_restores, restores)),
            shown(error(p_retained, retained)),
            outcome.get("pressure_episodes").u64()
        ));
    }
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
            "whatif.json",
            r#"[{"compression":false,"settings":{"knobs":null},"outcome":{}},
                {"compression":true,"settings":{"knobs":{"threshold":25,"interval_ms":100}},
                 "outcome":{"total_node_reads":440,"total_restores":90,"retained_nodes":50,
                            "pressure_episodes":3}}]"#,
        );
        let (mut problems, mut lines) = (Vec::new(), Vec::new());
        whatif_lines(dir.path(), &mut problems, &mut lines);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(
            lines[0].contains("node reads 400, restores 100, retained 50"),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "    threshold 25 % interval 100 ms: node reads 440 (+10.0 %), restores 90 (-10.0 %), \
             retained 50 (+0.0 %), pressure episodes 3"
        );
        write("whatif.rc", "124\n");
        write("whatif.err", "nodescope: something\n");
        whatif_lines(dir.path(), &mut problems, &mut lines);
        assert_eq!(problems, ["whatif: exit \"124\": nodescope: something"]);
    }
}
