//! Every event exact through `record` + `report` (issue 32, point 3): the budget phase's two
//! recordings (kmod.sh, part 2: compression off, then on), each from the emptied cache to the
//! worker's stop after the replay, reported with `nodescope report --json`; the report's totals
//! must equal the module's counter increases over the same span (`nc_budget_<mode>_start.txt`,
//! `nc_budget_<mode>_end.txt`) for every count of every probed kind, as the stream's do.
use std::{fs, path::Path};

use serde_json::Value;

use super::{
    counters::ModuleCounters,
    exact::{count_checks, probed_kinds, Exact, Span},
};

pub(super) fn record_checks(
    dir: &Path,
    exact: &mut Exact,
    problems: &mut Vec<String>,
    lines: &mut Vec<String>,
) {
    let manifest = fs::read_to_string(dir.join("discovered.toml")).unwrap_or_default();
    let kinds = probed_kinds(&manifest);
    for mode in ["off", "on"] {
        let label = format!("record budget_{mode}.nsr + report");
        let report =
            fs::read_to_string(dir.join(format!("report_{mode}.json"))).unwrap_or_default();
        let Ok(report) = serde_json::from_str::<Value>(&report) else {
            problems.push(format!("exact ({label}): no report (report_{mode}.json)"));
            continue;
        };
        let phase = |edge: &str| ModuleCounters::read(dir, &format!("budget_{mode}_{edge}"));
        let (start, end) = match (phase("start"), phase("end")) {
            (Ok(start), Ok(end)) => (start, end),
            (Err(err), _) | (_, Err(err)) => {
                problems.push(format!("exact ({label}): {err:#}"));
                continue;
            }
        };
        let drops = report["drops"].as_u64().unwrap_or(0);
        exact.drops += drops;
        if drops > 0 || report["complete"] != true {
            problems.push(format!(
                "exact ({label}): {drops} events lost, complete {:?}",
                report["complete"]
            ));
        }
        let span = Span {
            label: &label,
            start: &start,
            end: &end,
        };
        count_checks(
            &span,
            &kinds,
            true,
            &report["totals"],
            exact,
            problems,
            lines,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_totals_are_held_to_the_modules_span() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("discovered.toml", "[[probe]]\nkind = \"convert\"\n");
        for mode in ["off", "on"] {
            write(&format!("nc_budget_{mode}_start.txt"), "conversions 100\n");
            write(&format!("nc_budget_{mode}_end.txt"), "conversions 130\n");
        }
        let report = |conversions: u64| {
            format!(r#"{{"drops":0,"complete":true,"totals":{{"conversions":{conversions}}}}}"#)
        };
        write("report_off.json", &report(30));
        write("report_on.json", &report(29));
        let (mut exact, mut problems, mut lines) = (Exact::default(), Vec::new(), Vec::new());
        record_checks(dir.path(), &mut exact, &mut problems, &mut lines);
        assert_eq!((exact.checks, exact.equal, exact.drops), (2, 1, 0));
        assert_eq!(
            problems,
            [
                "exact (record budget_on.nsr + report): convert conversions: nodescope 29, the \
              module 30"
            ]
        );
    }
}
