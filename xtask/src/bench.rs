//! `cargo xtask bench NAME [ARGS]`: benchmarks print figures; they never pass or fail on speed.
//! Each benchmark is a release binary of the crate it measures, so it measures optimised code.
use anyhow::{bail, Result};

use crate::util;

/// One benchmark: its name, and the package, binary and features that build it.
struct Bench {
    name: &'static str,
    package: &'static str,
    binary: &'static str,
    /// The controller's benchmark runs the simulator, which the controller library itself does
    /// not depend on: the binary needs the `bench` feature.
    features: &'static str,
}

const BENCHES: [Bench; 2] = [
    Bench {
        name: "sim",
        package: "sim",
        binary: "sim-bench",
        features: "",
    },
    Bench {
        name: "controller",
        package: "controller",
        binary: "controller-bench",
        features: "bench",
    },
];

/// Benchmarks of nodescope itself (the model, the TUI, the recorder) run as its hidden
/// `bench` subcommand, since they measure code that lives in the binary.
const NODESCOPE_BENCHES: [&str; 2] = ["model", "record"];

pub fn run(name: &str, args: &[String]) -> Result<()> {
    if NODESCOPE_BENCHES.contains(&name) {
        let mut bench_args = vec![name.to_string()];
        bench_args.extend_from_slice(args);
        return util::run_nodescope("bench", &bench_args);
    }
    let Some(bench) = BENCHES.iter().find(|b| b.name == name) else {
        let known: Vec<&str> = BENCHES
            .iter()
            .map(|b| b.name)
            .chain(NODESCOPE_BENCHES)
            .collect();
        bail!("unknown benchmark {name:?}; known: {}", known.join(", "));
    };

    let mut command = util::cargo();
    command.args([
        "run",
        "--quiet",
        "--release",
        "--package",
        bench.package,
        "--bin",
        bench.binary,
    ]);
    if !bench.features.is_empty() {
        command.args(["--features", bench.features]);
    }
    util::run(command.arg("--").args(args))
}
