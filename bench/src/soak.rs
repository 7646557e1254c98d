//! `nodescope-bench soak [--hours H] [--warmup-hours W]` (`cargo xtask soak`): a day of the
//! simulated phone through what `nodescope top`, `stream --json` and `record` run, at the
//! simulator's full speed, watching this process's memory and file descriptors.
//!
//! The simulator (`sim::live::LiveSim`, the `android-launch` scenario, looped as `nodescope
//! top --source sim` loops it) is driven in virtual time: each step hands it an instant one
//! step of virtual time later instead of waiting for the wall clock. Its events go through one
//! `Pipeline` + `Model` (the code `top` and `stream` run; their default window); every step
//! captures `top`'s screen snapshot and draws one frame in ten into an off-screen terminal, every
//! closed window becomes `stream --json`'s line (written to /dev/null), and every event goes
//! into a recording, as `record` writes it. Prints figures; never passes or fails.
use std::{
    fs::File,
    io::{BufWriter, Write as _},
    path::{Path, PathBuf},
    pin::pin,
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use nodescope::{
    model::{ModelConfig, NodeImage, Packages},
    output::OutputFile,
    pipeline::Pipeline,
    schema::protocol::Snapshot,
    source::{BatchFuture, Source, SourceInfo, SourceKind},
    view::{
        jsonline::window_line,
        recorder::Recorder,
        tui::{self, UiState},
    },
};
use ratatui::{backend::TestBackend, Terminal};
use sim::{live::LiveSim, scenario::ScenarioName};
use tracer_common::Event;

const SECOND_NS: u64 = 1_000_000_000;
const HOUR_NS: u64 = 3600 * SECOND_NS;

#[derive(Parser)]
#[command(name = "nodescope-bench soak")]
struct SoakArgs {
    /// Virtual hours of the phone scenario to run.
    #[arg(long, default_value_t = 24.0)]
    hours: f64,
    /// Virtual hours before the warm-up reading (the model's history and tables fill first).
    #[arg(long, default_value_t = 2.0)]
    warmup_hours: f64,
    /// Readings of memory, descriptors and recording size over the run.
    #[arg(long, default_value_t = 12)]
    readings: u64,
    /// Virtual milliseconds per step (the live source polls every 100 ms of wall time).
    #[arg(long, default_value_t = 1000)]
    step_ms: u64,
    /// Simulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn main(args: &[String]) -> Result<()> {
    let program = "nodescope-bench soak".to_string();
    let args = SoakArgs::parse_from(std::iter::once(program).chain(args.iter().cloned()));
    let warmup_fits = (0.0..args.hours).contains(&args.warmup_hours);
    if !(args.hours.is_finite() && args.hours > 0.0 && warmup_fits) {
        bail!("--hours must be positive and --warmup-hours in [0, hours)");
    }
    if args.step_ms == 0 || args.readings == 0 {
        bail!("--step-ms and --readings must be positive");
    }
    run(&args)
}

/// The phone simulator as a source whose clock is the step count, not the wall clock.
struct VirtualSim {
    sim: LiveSim,
    knob_root: PathBuf,
    /// The instant given as the first poll: virtual time 0.
    start: Instant,
    reached_ns: u64,
    step_ns: u64,
}

impl VirtualSim {
    fn advance(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        self.reached_ns += self.step_ns;
        let at = self.start + Duration::from_nanos(self.reached_ns);
        self.sim.poll(at, out)?;
        Ok(true)
    }
}

impl Source for VirtualSim {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKind::Sim,
            kernel: "simulator".into(),
            devices: vec![sim::live::DEV_NAME.into()],
            detail: format!("scenario {} in virtual time (soak)", self.sim.scenario()),
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(async move { self.advance(out) })
    }

    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }

    fn budget_bytes(&self) -> Option<u64> {
        self.sim.budget_bytes()
    }

    fn memory_pressure(&self) -> Option<f64> {
        Some(self.sim.memory_pressure())
    }

    fn packages_list(&self) -> Option<String> {
        Some(sim::scenario::android::packages_list())
    }

    fn knob_root(&self) -> Option<PathBuf> {
        Some(self.knob_root.clone())
    }

    /// As `top`'s simulator source: the model splits node reads by node type.
    fn node_image(&self) -> Option<NodeImage> {
        Some(NodeImage {
            nodes: self.sim.nodes().clone(),
            name: "soak".into(),
            dev: None,
        })
    }
}

/// The source's futures never wait (the simulator runs until the step is done): poll once.
fn ready<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => unreachable!("the virtual-time simulator never waits"),
    }
}

/// What the process holds at one moment of the run.
#[derive(Clone, Copy)]
struct Reading {
    virtual_ns: u64,
    wall: Duration,
    rss_bytes: u64,
    fds: usize,
    events: u64,
    recording_bytes: u64,
}

impl Reading {
    fn take(virtual_ns: u64, started: Instant, events: u64, recording: &Path) -> Result<Reading> {
        Ok(Reading {
            virtual_ns,
            wall: started.elapsed(),
            rss_bytes: rss_bytes()?,
            fds: open_fds()?,
            events,
            recording_bytes: std::fs::metadata(recording)
                .with_context(|| format!("reading the size of {}", recording.display()))?
                .len(),
        })
    }

    fn print(&self) {
        println!(
            "{:6.2} h  wall {:6.1} s  RSS {:7.1} MiB  fds {:3}  events {:11}  recording {:8.1} MiB  {:.3} bytes/event",
            self.virtual_ns as f64 / HOUR_NS as f64,
            self.wall.as_secs_f64(),
            mib(self.rss_bytes),
            self.fds,
            self.events,
            mib(self.recording_bytes),
            self.recording_bytes as f64 / self.events.max(1) as f64
        );
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

/// Resident set size: VmRSS in /proc/self/status (kB).
fn rss_bytes() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|field| field.parse().ok())
        .context("/proc/self/status has no VmRSS line")?;
    Ok(kib * 1024)
}

/// CPU time of this process, all threads (utime + stime of /proc/self/stat, in USER_HZ ticks,
/// which Linux fixes at 100 for /proc): on a loaded machine the wall time says little alone.
fn cpu_time() -> Result<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    // The command name may hold spaces: the fields after it follow the last ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks =
        |index: usize| -> u64 { fields.get(index).and_then(|f| f.parse().ok()).unwrap_or(0) };
    // utime and stime are fields 14 and 15 of stat: 11 and 12 counting from the state (0).
    Ok(Duration::from_millis((ticks(11) + ticks(12)) * 10))
}

/// Open file descriptors (entries of /proc/self/fd, less the one that lists them).
fn open_fds() -> Result<usize> {
    let entries = std::fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")?;
    Ok(entries.count().saturating_sub(1))
}

/// What `stream --json` would print, counted and thrown away as it would be by a reader.
struct StreamView {
    out: BufWriter<File>,
    origin_ns: u64,
    lines: u64,
}

/// What `top` draws: a snapshot every step, one frame in `DRAW_EVERY` into a 160x50 buffer.
struct TopView {
    terminal: Terminal<TestBackend>,
    ui: UiState,
    steps: u64,
    frames: u64,
}

const DRAW_EVERY: u64 = 10;

impl TopView {
    fn step(&mut self, pipeline: &Pipeline) -> Result<()> {
        let snapshot = Snapshot::capture(pipeline.model(), pipeline.info());
        if self.steps.is_multiple_of(DRAW_EVERY) {
            tui::render(&mut self.terminal, &snapshot, &self.ui)?;
            self.frames += 1;
        }
        self.steps += 1;
        Ok(())
    }
}

fn run(args: &SoakArgs) -> Result<()> {
    let dir = tempfile::TempDir::new().context("creating a directory for the soak")?;
    let knob_root = dir.path().join("knobs");
    std::fs::create_dir(&knob_root).context("creating the knob directory")?;
    let recording = dir.path().join("soak.nsr");
    let end_ns = (args.hours * HOUR_NS as f64) as u64;
    let warmup_ns = (args.warmup_hours * HOUR_NS as f64) as u64;
    let every_ns = (end_ns - warmup_ns) / args.readings;

    let started = Instant::now();
    let sim = LiveSim::new(ScenarioName::AndroidLaunch, &knob_root, args.seed)
        .context("starting the phone simulator")?;
    let source = VirtualSim {
        sim,
        knob_root,
        start: Instant::now(),
        reached_ns: 0,
        step_ns: args.step_ms * 1_000_000,
    };
    let packages = Packages::parse(&sim::scenario::android::packages_list());
    let mut pipeline = Pipeline::new(
        Box::new(source),
        ModelConfig {
            packages,
            ..ModelConfig::default()
        },
    )?;
    let mut recorder = Recorder::create(&recording, &pipeline, OutputFile::new(false))?;
    let null = File::options()
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    let mut stream = StreamView {
        out: BufWriter::new(null),
        origin_ns: pipeline.origin_ns(),
        lines: 0,
    };
    let mut top = TopView {
        terminal: Terminal::new(TestBackend::new(160, 50))?,
        ui: UiState::default(),
        steps: 0,
        frames: 0,
    };
    println!(
        "soak: {} virtual hours of {} (seed {}), {} ms steps; readings from {:.2} h every {:.2} h",
        args.hours,
        ScenarioName::AndroidLaunch,
        args.seed,
        args.step_ms,
        args.warmup_hours,
        every_ns as f64 / HOUR_NS as f64
    );
    let mut readings = Vec::new();
    let mut next_reading = warmup_ns;
    let mut events = 0u64;
    let mut batch = Vec::new();
    let origin = pipeline.origin_ns();
    loop {
        let virtual_ns = pipeline.now_ns().saturating_sub(origin);
        if virtual_ns >= next_reading {
            recorder.flush_if_due()?;
            let reading = Reading::take(virtual_ns, started, events, &recording)?;
            reading.print();
            readings.push(reading);
            next_reading += every_ns;
        }
        if virtual_ns >= end_ns {
            break;
        }
        ready(pipeline.next_batch(&mut batch))?;
        pipeline.ingest(&mut batch)?;
        recorder.events(&batch)?;
        events += batch.len() as u64;
        batch.clear();
        let refreshed = pipeline.refresh()?;
        if let Some(change) = &refreshed.knob_change {
            recorder.knob_change(change)?;
        }
        for window in &refreshed.closed {
            let line = window_line(window, stream.origin_ns).to_json();
            stream.out.write_all(line.as_bytes())?;
            stream.out.write_all(b"\n")?;
            stream.lines += 1;
        }
        top.step(&pipeline)?;
    }
    let (recording_bytes, footer) = recorder.finish(pipeline.now_ns())?;
    summarise(&readings, started.elapsed(), recording_bytes, footer.events);
    println!(
        "CPU time: {:.1} s (both threads: the simulator's and the views')",
        cpu_time()?.as_secs_f64()
    );
    println!(
        "views: {} stream lines, {} top snapshots, {} frames drawn; model: {} processes, {} apps",
        stream.lines,
        top.steps,
        top.frames,
        pipeline.model().process_count(),
        pipeline.model().apps().len()
    );
    Ok(())
}

fn summarise(readings: &[Reading], wall: Duration, recording_bytes: u64, recorded: u64) {
    let (Some(warm), Some(end)) = (readings.first(), readings.last()) else {
        return;
    };
    let growth = (end.rss_bytes as f64 - warm.rss_bytes as f64) / warm.rss_bytes as f64 * 100.0;
    let fds_min = readings.iter().map(|r| r.fds).min().unwrap_or(0);
    let fds_max = readings.iter().map(|r| r.fds).max().unwrap_or(0);
    println!(
        "RSS: {:.1} MiB at warm-up ({:.2} h), {:.1} MiB at the end ({:.2} h): growth {growth:+.2} % after warm-up",
        mib(warm.rss_bytes),
        warm.virtual_ns as f64 / HOUR_NS as f64,
        mib(end.rss_bytes),
        end.virtual_ns as f64 / HOUR_NS as f64,
    );
    println!(
        "file descriptors: {fds_min}..{fds_max} over {} readings ({})",
        readings.len(),
        if fds_min == fds_max {
            "constant"
        } else {
            "NOT constant"
        }
    );
    // Bytes per event of what was written between readings: a format that grows faster than
    // the events would show here as a rising figure.
    let increments: Vec<String> = readings
        .windows(2)
        .map(|pair| {
            let bytes = pair[1].recording_bytes - pair[0].recording_bytes;
            let events = pair[1].events - pair[0].events;
            format!("{:.3}", bytes as f64 / events.max(1) as f64)
        })
        .collect();
    println!(
        "recording: {recorded} events, {:.1} MiB, {:.3} bytes/event overall; per interval: {}",
        mib(recording_bytes),
        recording_bytes as f64 / recorded.max(1) as f64,
        increments.join(" ")
    );
    println!(
        "wall time: {:.1} s for {:.1} virtual hours ({:.0}x real time)",
        wall.as_secs_f64(),
        end.virtual_ns as f64 / HOUR_NS as f64,
        end.virtual_ns as f64 / 1e9 / wall.as_secs_f64()
    );
}
