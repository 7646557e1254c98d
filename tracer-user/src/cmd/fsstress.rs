//! `nodescope fsstress DIR`: the seeded fsstress-like workload of issue 19 (`crate::fsstress`),
//! to run under `nodescope record` or `stream` and read the checkpoint table afterwards.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::fsstress::{self, Config, Mix};

#[derive(Args)]
pub(crate) struct FsstressArgs {
    /// The directory to work in (created when missing; one `p<N>` directory per worker inside,
    /// made by fsstress: an existing one is refused).
    dir: PathBuf,
    /// Operation mix: fsstress's default, or the seed's metadata mix.
    #[arg(long, value_enum, default_value = "default")]
    mix: Mix,
    /// Workers (fsstress -p).
    #[arg(short = 'p', long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1024))]
    procs: u32,
    /// Operations per worker (fsstress -n).
    #[arg(short = 'n', long, default_value_t = 200)]
    ops: u32,
    /// Random seed: the same seed does the same operations.
    #[arg(short = 's', long, default_value_t = 1)]
    seed: u64,
}

pub(crate) fn run(args: FsstressArgs) -> Result<()> {
    let config = Config {
        dir: args.dir,
        procs: args.procs,
        ops: args.ops,
        seed: args.seed,
        mix: args.mix,
    };
    let started = std::time::Instant::now();
    let tally = fsstress::run(&config)?;
    println!(
        "fsstress mix={} procs={} ops={} seed={} done={} failed={} {:.1}s: {}",
        config.mix.name(),
        config.procs,
        config.ops,
        config.seed,
        tally.total(),
        tally.failures(),
        started.elapsed().as_secs_f64(),
        tally.render()
    );
    Ok(())
}
