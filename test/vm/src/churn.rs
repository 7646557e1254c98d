//! The churn phase: more short-lived processes than the kernel's counter map holds (8,192
//! entries of device, tgid and uid), each reading node blocks of its own. Without pruning the
//! map fills and every later process's reads land in COUNT_FAILS; with it, every read is
//! attributed and the map's population stays bounded.
use std::{fs, path::Path};

use super::results::{expect, Phase};

/// Processes the guest starts, one file each (the file set has NDIRS x NFILES files).
pub const CHURN: u64 = 10_000;
/// NODE_COUNTS's capacity (tracer-ebpf/src/f2fs.rs).
const MAP_CAPACITY: u64 = 8192;

/// Check the phase; returns the VM line's `churn=<attributed>/<iostat> fails=<n>` part.
pub fn check(dir: &Path, lines: &mut Vec<String>, failures: &mut Vec<String>) -> String {
    let Some(phase) = Phase::load_or_fail(dir, "churn", failures) else {
        return "churn=? fails=?".to_string();
    };
    let readers = phase
        .procs
        .values()
        .filter(|p| p.demand + p.readahead > 0)
        .count() as u64;
    let note = fs::read_to_string(dir.join("stream_churn.err")).unwrap_or_default();
    let peak = counter_peak(&note);
    lines.push(format!(
        "  churn    {} processes with node reads; counter map peak {}",
        readers,
        peak.map_or("?".to_string(), |p| p.to_string())
    ));
    lines.push(format!("  churn    {}", phase.summary()));
    phase.expect_exact("churn", failures);
    expect(
        failures,
        readers > MAP_CAPACITY,
        format!("churn: only {readers} processes read node blocks; the map holds {MAP_CAPACITY}"),
    );
    expect(
        failures,
        peak.is_some_and(|p| p < MAP_CAPACITY / 2),
        format!("churn: counter map peak {peak:?}, want bounded well under {MAP_CAPACITY}"),
    );
    expect(
        failures,
        phase.rc == Some(0),
        format!("churn: nodescope stream exit status {:?}", phase.rc),
    );
    format!(
        "churn={}/{} fails={}",
        phase.reads(),
        phase.iostat_delta,
        phase.counter_drops
    )
}

/// "counter map: peak N of ..." from stream's closing note.
fn counter_peak(stderr: &str) -> Option<u64> {
    let rest = stderr.split("counter map: peak ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_peak_from_the_closing_note() {
        let err = "nodescope stream: ready (x)\nnodescope stream: counter map: peak 712 of 8192 \
                   entries; 10003 entries of exited processes folded into the totals and deleted\n";
        assert_eq!(super::counter_peak(err), Some(712));
        assert_eq!(super::counter_peak("nothing"), None);
    }
}
