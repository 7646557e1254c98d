//! whatif's limits (issue 33, finding 6): a trace over its step limit and a grid over its cap
//! are refused in words, in bounded memory (common/bounded.rs).
use std::{fs, path::Path};

use nodescope::record::writer::Writer;
use tracer_common::{Event, EventKind};

mod common;

use common::{
    bounded::{recording, run, Run},
    recording_header, scratch,
};

/// whatif (issue 33, finding 6) on a trace one step over its limit: refused in words, in
/// bounded memory (an 11.7 MB crafted recording read whole reached 3.2 GB).
#[test]
fn whatif_refuses_a_trace_over_its_step_limit_in_bounded_memory() {
    let dir = scratch("whatif-steps");
    let path = dir.path().join("accesses.nsr");
    let steps = sim::whatif::MAX_TRACE_STEPS as u64 + 1;
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    for i in 0..steps {
        let event = Event::new(EventKind::NodeAccess, i * 1_000)
            .task(7)
            .nid((i % 4096) as u32);
        writer.event(&event).unwrap();
    }
    let (bytes, _) = writer.finish(steps * 1_000).unwrap();
    fs::write(&path, &bytes).unwrap();
    // The trace is refused before the image is opened: none is needed.
    let image = dir.path().join("no-image");
    let run = run(
        &[
            "whatif",
            path.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "has more than {} steps",
            sim::whatif::MAX_TRACE_STEPS
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("record a shorter span"),
        "{}",
        run.stderr
    );
    run.assert_bounded("whatif over the step limit");
}

/// A grid of 3,000 thresholds x 3,000 intervals (it reached 2.6 GB, then aborted on a 5 GB
/// allocation) is refused at once, naming its size; one at the cap is not refused for it.
#[test]
fn whatif_refuses_a_grid_over_its_cap_naming_the_product() {
    let dir = scratch("whatif-grid");
    let path = dir.path().join("empty.nsr");
    recording(&path, 1);
    let image = dir.path().join("no-image");
    let values = |from: u32, n: u32| {
        (from..from + n)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let run = run_whatif_grid(
        &path,
        &image,
        &values(1, 100),
        &values(100, 3_000),
        dir.path(),
    );
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("the grid has 300001 points (1 budgets x (off + 1 slot sets x 1 weights x 1 compressors x 100 thresholds x 3000 intervals)), more than the 10000"),
        "{}",
        run.stderr
    );
    run.assert_bounded("whatif grid");
    // 100 x 99 + off = 9,901 points: past the grid check, refused for the recording instead.
    let run = run_whatif_grid(&path, &image, &values(1, 100), &values(100, 99), dir.path());
    assert!(run.stderr.contains("no node accesses"), "{}", run.stderr);
}

fn run_whatif_grid(rec: &Path, image: &Path, thresholds: &str, intervals: &str, dir: &Path) -> Run {
    run(
        &[
            "whatif",
            rec.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
            "--threshold",
            thresholds,
            "--interval",
            intervals,
            "--budget",
            "3MiB",
        ],
        dir,
        None,
    )
}
