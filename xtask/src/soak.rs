//! `cargo xtask soak [ARGS]`: a day of the simulated phone through `top`'s model, `stream`'s
//! lines and `record`'s writer in a few minutes, printing memory, file descriptors and the
//! recording's bytes per event over the run (`nodescope-bench soak`, in release, as the
//! benchmarks run). Prints figures; never passes or fails.
use anyhow::Result;

pub fn run(args: &[String]) -> Result<()> {
    crate::bench::run("soak", args)
}
