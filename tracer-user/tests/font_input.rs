//! Issue 52, item 6: `NODESCOPE_FONT` is an input like any other: a regular file, size-capped.
//! `/dev/zero` there was read until allocation failed. Its own test binary: the font is loaded
//! once per process, and the variable is the process's.
use std::{sync::mpsc, thread, time::Duration};

use nodescope::{
    output::OutputFile,
    view::whatif_plot::{draw, PlotPoint},
};

mod common;

#[test]
fn a_font_that_is_a_device_is_refused_at_once() {
    let dir = common::scratch("font-input");
    let plot = dir.path().join("whatif.png");
    std::env::set_var("NODESCOPE_FONT", "/dev/zero");
    let points = vec![PlotPoint {
        memory_bytes: 1 << 20,
        node_reads: 10,
        compression: true,
        chosen: true,
        label: "on 1 MiB".into(),
    }];
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender
            .send(draw(&points, &plot, OutputFile::new(false)).map_err(|err| format!("{err:#}")));
    });
    let result = receiver
        .recv_timeout(Duration::from_secs(15))
        .expect("the font is still being read after 15 s");
    let err = result.unwrap_err();
    assert!(
        err.contains("reading /dev/zero: not a regular file (a character device)"),
        "{err}"
    );
}
