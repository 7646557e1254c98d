//! `cargo xtask bench NAME [ARGS]`: benchmarks print figures; they never pass or fail on speed.
//! Every benchmark is a subcommand of one release binary, `nodescope-bench` (the bench/
//! crate), so each measures optimised code.
use anyhow::{bail, Result};

use crate::util;

/// The subcommands of `nodescope-bench`.
const BENCHES: [&str; 9] = [
    "sim",
    "controller",
    "model",
    "record",
    "soak",
    "ringbuf",
    "cpu",
    "daemon",
    "whatif",
];

pub fn run(name: &str, args: &[String]) -> Result<()> {
    if !BENCHES.contains(&name) {
        bail!("unknown benchmark {name:?}; known: {}", BENCHES.join(", "));
    }
    let mut command = util::cargo();
    if name == "daemon" {
        // It measures the nodescope binary itself, built in release like the bench.
        command.env("NODESCOPE_BIN", util::build_nodescope()?);
    }
    command.args([
        "run",
        "--quiet",
        "--locked",
        "--release",
        "--package",
        "nodescope-bench",
        "--bin",
        "nodescope-bench",
        "--",
        name,
    ]);
    util::run(command.args(args))
}
