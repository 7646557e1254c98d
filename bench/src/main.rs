//! `nodescope-bench NAME [ARGS]`, which `cargo xtask bench NAME [ARGS]` runs in release:
//! benchmarks print figures; they never pass or fail on speed.
//!
//! * `sim`: the simulator's access rate and LZ4 against C liblz4 (arguments ignored);
//! * `controller [--json] [OPTIONS]`: the control law against static settings in the
//!   simulator (options: the top of `controller/mod.rs`);
//! * `model [--events N]`: nodescope's model ingest rate and TUI frame time;
//! * `record [--events N]`: what nodescope's recorder costs on top of the model;
//! * `soak [--hours H]`: a day of the simulated phone through top's, stream's and record's
//!   code at full speed: memory, descriptors and recording size over time.
use anyhow::{bail, Context as _, Result};
use clap::Parser;

mod controller;
mod model;
mod record;
mod sim;
mod soak;
mod synthetic;

const NAMES: &str = "sim, controller, model, record, soak";

/// The arguments of `model` and `record`.
#[derive(Parser)]
struct EventsArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
}

impl EventsArgs {
    fn parse_after(name: &str, args: &[String]) -> EventsArgs {
        let program = format!("nodescope-bench {name}");
        EventsArgs::parse_from(std::iter::once(program).chain(args.iter().cloned()))
    }
}

fn main() -> Result<()> {
    let mut words = std::env::args().skip(1);
    let name = words
        .next()
        .with_context(|| format!("which benchmark? {NAMES}"))?;
    let args: Vec<String> = words.collect();
    match name.as_str() {
        // It has never taken arguments; `--json` from `cargo xtask bench sim --json` is ignored.
        "sim" => sim::main(),
        "controller" => controller::main(&args),
        "model" => model::main(EventsArgs::parse_after(&name, &args).events),
        "record" => record::main(EventsArgs::parse_after(&name, &args).events),
        "soak" => soak::main(&args),
        other => bail!("unknown benchmark {other:?}; known: {NAMES}"),
    }
}
