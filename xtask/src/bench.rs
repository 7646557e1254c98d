//! `cargo xtask bench NAME [ARGS]`: benchmarks print figures; they never pass or fail on speed.
//! Each benchmark is a release binary of the crate it measures, so it measures optimised code.
use anyhow::{bail, Result};

use crate::util;

/// Benchmark name -> (package, binary).
const BENCHES: [(&str, &str, &str); 2] = [
    ("sim", "sim", "sim-bench"),
    ("controller", "controller", "controller-bench"),
];

pub fn run(name: &str, args: &[String]) -> Result<()> {
    let Some((_, package, binary)) = BENCHES.iter().find(|(n, _, _)| *n == name) else {
        let known: Vec<&str> = BENCHES.iter().map(|(n, _, _)| *n).collect();
        bail!("unknown benchmark {name:?}; known: {}", known.join(", "));
    };
    util::run(
        util::cargo()
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                package,
                "--bin",
                binary,
                "--",
            ])
            .args(args),
    )
}
