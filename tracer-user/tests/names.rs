//! Names from outside (a comm any user sets for their own process) in the text outputs: a
//! newline in one printed a forged line (`x\nFAKE 999 r`), and a right-to-left override
//! (U+202E) reached the terminal raw. Each text view prints names escaped, on one line.
mod common;

use common::{nodescope, recording_header, scratch, write_recording};
use tracer_common::{Event, EventKind};

/// A comm that forges a stream line, and one that reverses the text after it.
const FORGER: &str = "x\nFAKE 999 r";
const REVERSER: &str = "evil\u{202e}txt";

/// A recording of both processes reading nodes in the first window, written by the project's
/// own writer.
fn recording(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("names.nsr");
    let mut events = Vec::new();
    for (tgid, comm) in [(7, FORGER), (8, REVERSER)] {
        for i in 0..3 {
            events.push(
                Event::new(
                    EventKind::NodeRead,
                    100_000_000 + i * 1000 + u64::from(tgid),
                )
                .task(tgid)
                .comm(comm),
            );
        }
    }
    events.sort_by_key(|event| event.ts_ns);
    events.push(
        Event::new(EventKind::NodeRead, 1_500_000_000)
            .task(9)
            .comm("late"),
    );
    write_recording(&path, &recording_header(1_000_000_000), &events);
    path
}

/// No line of `text` is forged, and both names are shown escaped.
fn assert_escaped(text: &str, what: &str) {
    assert!(
        !text.lines().any(|line| line.starts_with("FAKE")),
        "{what}: a forged line:\n{text}"
    );
    assert!(text.contains("x\\nFAKE 999 r"), "{what}:\n{text}");
    assert!(!text.contains('\u{202e}'), "{what}: raw U+202E:\n{text}");
    assert!(text.contains("evil\\u{202e}txt"), "{what}:\n{text}");
}

#[test]
fn stream_text_prints_names_escaped_on_one_line() {
    let dir = scratch("names-stream");
    let file = recording(dir.path());
    let output = nodescope(&[
        "stream",
        "--source",
        "replay",
        "--speed",
        "0",
        file.to_str().unwrap(),
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert_escaped(&text, "stream");
    assert!(
        text.lines()
            .all(|line| line.trim_start().starts_with(char::is_numeric)),
        "every line is a window's:\n{text}"
    );
}

#[test]
fn report_text_prints_names_escaped_on_one_line() {
    let dir = scratch("names-report");
    let file = recording(dir.path());
    let output = nodescope(&["report", file.to_str().unwrap()]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert_escaped(&text, "report");
}
