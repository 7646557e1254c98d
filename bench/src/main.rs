//! `nodescope-bench NAME [ARGS]`, which `cargo xtask bench NAME [ARGS]` runs in release:
//! benchmarks print figures; they never pass or fail on speed.
//!
//! * `sim [--json]`: the simulator's access rate and LZ4 against C liblz4;
//! * `controller [--json] [OPTIONS]`: the control law against static settings in the
//!   simulator (options: the top of `controller/mod.rs`);
//! * `model [--events N]`: nodescope's model ingest rate and TUI frame time;
//! * `record [--events N]`: what nodescope's recorder costs on top of the model;
//! * `ringbuf [--json]` (root): the ring buffer's zero-drop ceiling on this kernel;
//! * `cpu [--json] [--rate N] [--seconds S]`: `top`'s pipeline's CPU at a given event rate.
//! * `daemon [--json] [--rate N] [--seconds S]`: the `nodescope daemon` process's CPU and RSS
//!   at a given event rate, with its views and a client.
//! * `whatif [--json]`: `nodescope whatif`'s replay rate on one core against the baseline
//!   (LZ4 at every conversion and restore), and its exactness on vm-replay.
//! * `soak [--hours H]`: a day of the simulated phone through top's, stream's and record's
//!   code at full speed: memory, descriptors and recording size over time.
use anyhow::{bail, Context as _, Result};
use clap::{
    error::{ContextKind, ContextValue, ErrorKind},
    Parser,
};

mod controller;
mod cpu;
mod daemon;
mod model;
mod record;
mod ringbuf;
mod sim;
mod soak;
mod synthetic;
mod whatif;

const NAMES: &str = "sim, controller, model, record, soak, ringbuf, cpu, daemon, whatif";

/// The arguments of `model` and `record`.
#[derive(Parser)]
struct EventsArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
}

/// A benchmark's arguments `args`, parsed by clap as the command line `nodescope-bench NAME
/// ARGS`: an unknown argument is the error `nodescope-bench NAME: unknown argument "ARG"`;
/// `--help` and a bad or missing value are clap's (it exits).
fn parse_after<T: Parser>(name: &str, args: &[String]) -> Result<T> {
    let program = format!("nodescope-bench {name}");
    T::try_parse_from(std::iter::once(program).chain(args.iter().cloned())).or_else(|err| {
        match (err.kind(), err.get(ContextKind::InvalidArg)) {
            (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) => {
                bail!("nodescope-bench {name}: unknown argument {arg:?}")
            }
            _ => err.exit(),
        }
    })
}

fn main() -> Result<()> {
    let mut words = std::env::args().skip(1);
    let name = words
        .next()
        .with_context(|| format!("which benchmark? {NAMES}"))?;
    let args: Vec<String> = words.collect();
    match name.as_str() {
        "sim" => sim::main(&args),
        "ringbuf" => ringbuf::main(&args),
        "cpu" => cpu::main(parse_after(&name, &args)?),
        "daemon" => daemon::main(parse_after(&name, &args)?),
        "controller" => controller::main(&args),
        "model" => model::main(parse_after::<EventsArgs>(&name, &args)?.events),
        "record" => record::main(parse_after::<EventsArgs>(&name, &args)?.events),
        "soak" => soak::main(&args),
        "whatif" => whatif::main(&args),
        other => bail!("unknown benchmark {other:?}; known: {NAMES}"),
    }
}
