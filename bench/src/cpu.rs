//! `nodescope-bench cpu [--json] [--rate N] [--seconds S]` (`cargo xtask bench cpu`):
//! nodescope's own CPU while `top`'s pipeline (pipeline.rs + the model) ingests the
//! simulator's events at a fixed rate (default 100,000 events/s).
//!
//! The simulator's events (vm-replay, its real node blocks) are generated first, untimed, so
//! that the simulator's own work is not counted; a source then hands them to the pipeline in
//! 100 ms batches (the simulator source's own poll period), restamped on CLOCK_MONOTONIC at
//! the rate, and the loop does what `top` does per batch: ingest, then refresh (knobs, gauges,
//! windows). The TUI's drawing is not included (`bench model` prints the frame time). CPU is
//! getrusage(RUSAGE_SELF) user + system over a fixed wall period.
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use nodescope::{
    model::ModelConfig,
    pipeline::Pipeline,
    source::{BatchFuture, Source, SourceInfo, SourceKind},
};
use serde::Serialize;
use sim::{live::LiveSim, scenario::ScenarioName};
use tracer_common::Event;

/// The simulator source's poll period (tracer-user/src/source/sim.rs).
const BATCH_EVERY: Duration = Duration::from_millis(100);

#[derive(Serialize)]
struct Report {
    target_events_per_s: u64,
    ingested_events_per_s: f64,
    wall_s: f64,
    cpu_user_s: f64,
    cpu_system_s: f64,
    cpu_percent_of_one_core: f64,
    ns_per_event: f64,
}

/// The arguments of `cpu`.
#[derive(clap::Parser)]
pub struct Args {
    /// Print the figures as JSON too.
    #[arg(long)]
    json: bool,
    /// Events per second.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Wall seconds measured.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

pub fn main(args: Args) -> Result<()> {
    let Args {
        json,
        rate,
        seconds,
    } = args;
    let events = simulator_events((rate * seconds + rate) as usize)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    let report = runtime.block_on(run(events, rate, Duration::from_secs(seconds)))?;
    println!(
        "top's pipeline at {} events/s from the simulator: {:.0} events/s ingested over {:.1} s, \
         CPU {:.2} s user + {:.2} s system = {:.2} % of one core ({:.0} ns per event)",
        report.target_events_per_s,
        report.ingested_events_per_s,
        report.wall_s,
        report.cpu_user_s,
        report.cpu_system_s,
        report.cpu_percent_of_one_core,
        report.ns_per_event
    );
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

/// At least `count` events of the vm-replay scenario (repeated when it ends sooner).
pub fn simulator_events(count: usize) -> Result<Vec<Event>> {
    let knobs = tempfile::tempdir().context("a knob directory for the simulator")?;
    let mut sim = LiveSim::new(ScenarioName::VmReplay, knobs.path(), 1)?.with_speed(1.0);
    let base = Instant::now();
    let mut events = Vec::with_capacity(count);
    let mut second = 0;
    while events.len() < count {
        second += 1;
        let before = events.len();
        sim.poll(base + Duration::from_secs(second), &mut events)?;
        if events.len() == before && second > 3600 {
            break; // the scenario has ended
        }
    }
    if events.is_empty() {
        bail!("the simulator produced no events");
    }
    let produced = events.len();
    while events.len() < count {
        events.extend_from_within(..produced.min(count - events.len()));
    }
    Ok(events)
}

/// The events handed out in 100 ms batches at `rate`, restamped on CLOCK_MONOTONIC.
struct Paced {
    events: Vec<Event>,
    next: usize,
    rate: u64,
    started_ns: u64,
}

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid, owned timespec; CLOCK_MONOTONIC exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

impl Paced {
    async fn fill(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        tokio::time::sleep(BATCH_EVERY).await;
        let elapsed = monotonic_ns() - self.started_ns;
        let due = ((elapsed as u128 * u128::from(self.rate) / 1_000_000_000) as usize)
            .min(self.events.len());
        let gap = 1_000_000_000 / self.rate.max(1);
        for (i, event) in self.events[self.next..due].iter().enumerate() {
            let mut event = *event;
            event.ts_ns = self.started_ns + (self.next + i) as u64 * gap;
            out.push(event);
        }
        self.next = due;
        Ok(self.next < self.events.len())
    }
}

impl Source for Paced {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKind::Sim,
            kernel: "simulator".into(),
            devices: vec![sim::live::DEV_NAME.into()],
            detail: "vm-replay events, paced".into(),
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(self.fill(out))
    }

    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: rusage is plain old data; getrusage fills the owned struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

async fn run(events: Vec<Event>, rate: u64, period: Duration) -> Result<Report> {
    let source = Paced {
        events,
        next: 0,
        rate,
        started_ns: monotonic_ns(),
    };
    let mut pipeline = Pipeline::new(Box::new(source), ModelConfig::default())?;
    let mut batch = Vec::new();
    let (user0, system0) = cpu_seconds();
    let started = Instant::now();
    let mut ingested = 0u64;
    while started.elapsed() < period {
        let open = pipeline.next_batch(&mut batch).await?;
        ingested += batch.len() as u64;
        pipeline.ingest(&mut batch)?;
        pipeline.refresh()?;
        batch.clear();
        if !open {
            break;
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let (user1, system1) = cpu_seconds();
    let (user, system) = (user1 - user0, system1 - system0);
    Ok(Report {
        target_events_per_s: rate,
        ingested_events_per_s: ingested as f64 / wall_s,
        wall_s,
        cpu_user_s: user,
        cpu_system_s: system,
        cpu_percent_of_one_core: (user + system) / wall_s * 100.0,
        ns_per_event: (user + system) * 1e9 / ingested.max(1) as f64,
    })
}
