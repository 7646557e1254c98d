//! Real-time mode: the same engine and workloads, paced against the wall clock, looping
//! forever. For the live view (`nodescope top` wraps [`LiveSim`] as a source) and for a
//! controller that writes the knob files while it runs.
//!
//! The scenario runs on its own thread, in lockstep with [`LiveSim::poll`]: each poll hands the
//! thread a new limit of virtual time (the wall time elapsed since the first poll, times
//! `speed`), the thread runs everything due up to that limit and hands back the events and a
//! snapshot. Given the same seed and the same sequence of poll times, the events are the same.
//! Event timestamps are CLOCK_MONOTONIC-based, like the kernel's.
use std::{
    path::{Path, PathBuf},
    sync::{
        mpsc::{self, Receiver, Sender},
        Arc,
    },
    thread::JoinHandle,
    time::Instant,
};

use anyhow::{anyhow, bail, Context as _, Result};
use tracer_common::Event;

use crate::{
    engine::{Engine, EngineOptions, Pacer, Pressure, Snapshot},
    events::DEFAULT_DEV,
    fileset::fbe::AndroidImage,
    knobs::{KnobDir, KnobSource},
    nodes::NodeSet,
    rng::Rng,
    scenario::{
        android::{AndroidParams, Trial},
        feedback::{FeedbackTracker, TrailingPressure},
        vm_replay::{self, GuestTasks, VmReplayParams},
        ScenarioName,
    },
};

/// The live simulator's memory pressure is measured over the last second, like PSI's `some`
/// over a one-second window.
const PRESSURE_WINDOW_NS: u64 = 1_000_000_000;

/// The most virtual time one [`LiveSim::step`] runs: its events are one batch in memory, and
/// the thread is busy with it before the poller can stop (a quarter of a second of a busy
/// scenario is a few thousand events).
pub const MAX_STEP_NS: u64 = 250_000_000;

/// The file in the knob directory where the live simulator publishes its counters for
/// `nodescope tune --sysfs-root` (the format of `controller::signals::StatsFileCounters`).
pub const STATS_FILE: &str = "nodescope_stats";

/// The device directory name under the knob root (`<root>/vdb/node_compress_*`), matching
/// the simulated device number 254:16.
pub const DEV_NAME: &str = "vdb";

struct Batch {
    events: Vec<Event>,
    snapshot: Snapshot,
}

/// Hands the engine's output to the poller and waits for the next limit.
struct ChannelPacer {
    limits: Receiver<u64>,
    batches: Sender<Batch>,
}

impl Pacer for ChannelPacer {
    fn wait_for_more(&mut self, engine: &mut Engine) -> Result<u64> {
        let mut events = Vec::new();
        engine.drain_events(&mut events);
        let batch = Batch {
            events,
            snapshot: engine.snapshot(),
        };
        self.batches
            .send(batch)
            .map_err(|_| anyhow!("live simulator stopped"))?;
        self.limits
            .recv()
            .map_err(|_| anyhow!("live simulator stopped"))
    }
}

pub struct LiveSim {
    scenario: ScenarioName,
    /// The phone's image (android-launch only).
    android_image: Option<AndroidImage>,
    /// The node blocks the simulated disk holds (what its node reads read).
    nodes: Arc<NodeSet>,
    knob_dir: PathBuf,
    limits: Option<Sender<u64>>,
    batches: Receiver<Batch>,
    thread: Option<JoinHandle<Result<()>>>,
    started: Option<Instant>,
    speed: f64,
    monotonic_base_ns: u64,
    snapshot: Snapshot,
    limit: u64,
    /// Events from before the first poll (the mount).
    pending: Vec<Event>,
    /// Refaults and shrinker scans from the events, for the pressure figure.
    feedback: FeedbackTracker,
    trailing: TrailingPressure,
    memory_pressure: f64,
    /// The stats file could not be written (said once).
    stats_failed: bool,
}

impl LiveSim {
    /// Start `scenario` in real time with its knobs in `<knob_root>/vdb/` (created with the
    /// defaults when absent). Builds the scenario's image first when needed.
    pub fn new(scenario: ScenarioName, knob_root: &Path, seed: u64) -> Result<LiveSim> {
        LiveSim::new_traced(scenario, knob_root, seed, false)
    }

    /// [`LiveSim::new`], emitting the access trace too when `accesses` (`--accesses`).
    pub fn new_traced(
        scenario: ScenarioName,
        knob_root: &Path,
        seed: u64,
        accesses: bool,
    ) -> Result<LiveSim> {
        let knobs = KnobDir::open(knob_root, DEV_NAME)?;
        let knob_dir = knobs.dir().to_path_buf();
        let (android_image, nodes) = match scenario {
            ScenarioName::VmReplay => (None, vm_replay::rfc_nodes()?),
            ScenarioName::AndroidLaunch => {
                let (image, nodes) = crate::scenario::android::nodes(&AndroidParams::default())?;
                (Some(image), nodes)
            }
        };
        let (limit_tx, limit_rx) = mpsc::channel();
        let (batch_tx, batch_rx) = mpsc::channel();
        let options = EngineOptions {
            dev: DEFAULT_DEV,
            record_events: true,
            // No memory time series: nothing reads it in live mode, and kept for a run that
            // never ends it grew by 32 bytes a virtual second (`cargo xtask soak` found it).
            sample_every_ns: 0,
            accesses,
        };
        let mut engine = Engine::new(nodes.clone(), KnobSource::Dir(knobs), options);
        let snapshot = engine.snapshot();
        engine.set_pacer(
            Box::new(ChannelPacer {
                limits: limit_rx,
                batches: batch_tx,
            }),
            0,
        );
        let thread = std::thread::Builder::new()
            .name(format!("sim-{scenario}"))
            .spawn(move || run_forever(scenario, engine, seed))
            .context("starting the simulator thread")?;
        let mut live = LiveSim {
            scenario,
            android_image,
            nodes,
            knob_dir,
            limits: Some(limit_tx),
            batches: batch_rx,
            thread: Some(thread),
            started: None,
            speed: 1.0,
            monotonic_base_ns: monotonic_ns(),
            snapshot,
            limit: 0,
            pending: Vec::new(),
            feedback: FeedbackTracker::new(tracer_common::knobs::EAGER_FLOOR_NS),
            trailing: TrailingPressure::new(PRESSURE_WINDOW_NS),
            memory_pressure: 0.0,
            stats_failed: false,
        };
        // The thread stops at its first handoff (virtual time 0); from then on every poll
        // gets the batch of the limit it sent.
        let Ok(first) = live.batches.recv() else {
            return Err(live.failure());
        };
        let mut pending = Vec::new();
        live.accept(first, &mut pending);
        live.pending = pending;
        Ok(live)
    }

    fn accept(&mut self, batch: Batch, out: &mut Vec<Event>) {
        let interval_ms = batch.snapshot.knobs.interval_ms;
        for event in &batch.events {
            self.feedback.record(event, interval_ms);
        }
        self.memory_pressure = self.trailing.update(
            batch.snapshot.ts_ns,
            self.feedback.totals(),
            batch.snapshot.shrink_count,
        );
        let base = self.monotonic_base_ns;
        out.extend(batch.events.into_iter().map(|mut e| {
            e.ts_ns += base;
            e
        }));
        self.snapshot = batch.snapshot;
        self.publish_stats();
    }

    /// `<knob dir>/nodescope_stats`: cumulative counters and the gauges, replaced atomically.
    /// A failure is said once and does not stop the simulation.
    fn publish_stats(&mut self) {
        let snapshot = &self.snapshot;
        let feedback = self.feedback.totals();
        let text = format!(
            "node_reads {}\nrestores {}\nconversions {}\neager_restores {}\nwasted {}\n\
             attributed_bytes {}\nmemory_pressure {:.3}\n",
            snapshot.node_reads,
            snapshot.stats.events.restores,
            snapshot.stats.events.conversions,
            feedback.eager_restores,
            feedback.wasted,
            snapshot.memory.attributed_bytes,
            self.memory_pressure
        );
        let written = tracer_common::files::replace(&self.knob_dir, STATS_FILE, text.as_bytes());
        if let Err(err) = written {
            if !self.stats_failed {
                log::warn!("cannot publish {}: {err}", self.stats_path().display());
                self.stats_failed = true;
            }
        }
    }

    /// The counters and gauges as last published in [`STATS_FILE`].
    pub fn stats_path(&self) -> PathBuf {
        self.knob_dir.join(STATS_FILE)
    }

    /// Memory pressure over the last second of virtual time, percent: the stand-in for PSI
    /// `some` that the controller benchmark uses (refault stalls plus reclaim effort; see
    /// `scenario::controlled`).
    pub fn memory_pressure(&self) -> f64 {
        self.memory_pressure
    }

    /// Run `speed` virtual seconds per wall second (1.0 = real time, 0 = as fast as possible;
    /// NaN counts as 0).
    pub fn with_speed(mut self, speed: f64) -> LiveSim {
        self.speed = if speed.is_nan() { 0.0 } else { speed.max(0.0) };
        self
    }

    pub fn scenario(&self) -> ScenarioName {
        self.scenario
    }

    /// The image the phone scenario reads (None for vm-replay).
    pub fn android_image(&self) -> Option<AndroidImage> {
        self.android_image
    }

    /// The directory holding `node_compress_threshold` and `node_compress_interval`.
    /// The node blocks of the simulated disk, by nid.
    pub fn nodes(&self) -> &Arc<NodeSet> {
        &self.nodes
    }

    pub fn knob_dir(&self) -> &Path {
        &self.knob_dir
    }

    /// The simulation's current time in the clock of its events' `ts_ns` (CLOCK_MONOTONIC at
    /// the start plus the virtual time reached by the last poll).
    pub fn now_ns(&self) -> u64 {
        self.monotonic_base_ns + self.snapshot.ts_ns.max(self.limit)
    }

    /// Gauges as of the last poll: pressure, memory, queues, slots, knobs, counters.
    /// The memory budget the cache is held to, when the scenario sets one.
    pub fn budget_bytes(&self) -> Option<u64> {
        match self.snapshot().pressure {
            Pressure::Budget { bytes } => Some(bytes),
            _ => None,
        }
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Advance the simulation to `now` (wall clock; the first poll starts the clock) and append
    /// the events that happened, in time order: as many steps as it takes (speed 0: one).
    pub fn poll(&mut self, now: Instant, out: &mut Vec<Event>) -> Result<()> {
        while self.step(now, out)? && self.speed > 0.0 {}
        Ok(())
    }

    /// Advance the simulation towards `now` by at most [`MAX_STEP_NS`] of virtual time and
    /// append the events that happened. Returns whether it is still behind (call again without
    /// waiting): a high speed, or 0 (as fast as possible), is reached in bounded batches, and
    /// the caller may stop, or watch for signals, between them.
    pub fn step(&mut self, now: Instant, out: &mut Vec<Event>) -> Result<bool> {
        let started = *self.started.get_or_insert(now);
        out.append(&mut self.pending);
        let target = self.target_ns(now.saturating_duration_since(started));
        if target <= self.limit && self.limit > 0 {
            return Ok(false);
        }
        self.limit = target.min(self.limit.saturating_add(MAX_STEP_NS)).max(1);
        let sender = self.limits.as_ref().context("live simulator stopped")?;
        if sender.send(self.limit).is_err() {
            return Err(self.failure());
        }
        let Ok(batch) = self.batches.recv() else {
            return Err(self.failure());
        };
        self.accept(batch, out);
        Ok(target > self.limit)
    }

    /// The virtual time due after `elapsed` of wall time (speed 0: no limit).
    fn target_ns(&self, elapsed: std::time::Duration) -> u64 {
        if self.speed == 0.0 {
            return u64::MAX;
        }
        // A float to integer cast saturates: 1e300 times anything is u64::MAX.
        (elapsed.as_nanos() as f64 * self.speed) as u64
    }

    /// Why the simulator thread ended.
    fn failure(&mut self) -> anyhow::Error {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => e.context("live simulator failed"),
            Some(Err(_)) => anyhow!("live simulator thread panicked"),
            _ => anyhow!("live simulator stopped"),
        }
    }
}

impl Drop for LiveSim {
    fn drop(&mut self) {
        // Closing the channel makes the thread's next wait fail, and it returns.
        self.limits.take();
        while self.batches.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            drop(self.batches.try_recv());
            let _ = thread.join();
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; CLOCK_MONOTONIC
    // exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The scenario, looped until the poller goes away (then `advance_to` fails and we return).
fn run_forever(scenario: ScenarioName, engine: Engine, seed: u64) -> Result<()> {
    let outcome = match scenario {
        ScenarioName::VmReplay => loop_vm_replay(engine, seed),
        ScenarioName::AndroidLaunch => loop_android(engine, seed),
    };
    match outcome {
        Err(e) if e.to_string().contains("live simulator stopped") => Ok(()),
        other => other,
    }
}

/// Mount and create the file set once; then forever: let the worker run, hold the 3 MiB
/// budget for a while, release, replay every file, pause.
fn loop_vm_replay(mut engine: Engine, seed: u64) -> Result<()> {
    const SECOND: u64 = 1_000_000_000;
    let params = VmReplayParams::default();
    let manifest = params.fileset.manifest();
    let nodes: Arc<NodeSet> = engine.nodes().clone();
    let tasks = GuestTasks::default();
    let mut rng = Rng::new(seed);
    vm_replay::mount(&mut engine, &tasks)?;
    vm_replay::populate(&mut engine, &manifest, &tasks, &mut rng)?;
    for round in 0u32.. {
        engine.advance_by(20 * SECOND)?;
        engine.set_pressure(Pressure::Budget {
            bytes: params.budget_bytes,
        });
        engine.advance_by(5 * SECOND)?;
        engine.set_pressure(Pressure::None);
        let first_pid = 2000 + (round % 100) * params.fileset.dirs;
        vm_replay::replay(&mut engine, &params.fileset, &nodes, first_pid, &mut rng)?;
        engine.advance_by(5 * SECOND)?;
    }
    bail!("unreachable")
}

/// Boot and a seed pass; then forever: pressure, release, a launch pass.
fn loop_android(engine: Engine, seed: u64) -> Result<()> {
    let params = AndroidParams::default();
    let mut trial = Trial::from_engine(&params, engine, seed)?;
    trial.boot()?;
    trial.launch_pass()?;
    loop {
        trial.idle(params.normalise_s * 1_000_000_000)?;
        trial.pressure()?;
        trial.launch_pass()?;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tempfile::TempDir;
    use tracer_common::EventKind;

    use super::*;

    /// A knob directory of its own, removed when dropped.
    fn knob_root() -> TempDir {
        TempDir::new().unwrap()
    }

    fn run(sim: &mut LiveSim, start: Instant, seconds: &[u64]) -> Vec<Event> {
        let mut out = Vec::new();
        for s in seconds {
            sim.poll(start + Duration::from_secs(*s), &mut out).unwrap();
        }
        out
    }

    #[test]
    fn live_vm_replay_follows_the_knob_files_and_is_deterministic() {
        let dir = knob_root();
        let root = dir.path();
        let mut sim = LiveSim::new(ScenarioName::VmReplay, root, 5).unwrap();
        let start = Instant::now();
        let events = run(&mut sim, start, &[0, 1, 2, 3, 20]);
        assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        let converts = events
            .iter()
            .filter(|e| e.kind == EventKind::Convert as u8)
            .count();
        let second_chances = events
            .iter()
            .filter(|e| e.kind == EventKind::SecondChance as u8)
            .count();
        // Every created node is REFERENCED: the first passes only give second chances.
        assert!(
            second_chances >= 16_676 && converts > 0,
            "{second_chances} {converts}"
        );
        assert!(events.iter().all(|e| e.dev == DEFAULT_DEV));
        assert_eq!(
            sim.snapshot().knobs.threshold,
            tracer_common::knobs::DEFAULT_THRESHOLD
        );

        // The controller writes the knobs; a bad value is rejected, a good one taken.
        std::fs::write(
            sim.knob_dir().join(tracer_common::knobs::INTERVAL_FILE),
            "50\n",
        )
        .unwrap();
        std::fs::write(
            sim.knob_dir().join(tracer_common::knobs::THRESHOLD_FILE),
            "0\n",
        )
        .unwrap();
        let later = run(&mut sim, start, &[21, 23]);
        assert_eq!(sim.snapshot().knobs.threshold, 0);
        assert_eq!(sim.snapshot().knobs.interval_ms, 1000);
        let last_second = 22 * 1_000_000_000;
        assert!(later
            .iter()
            .filter(|e| e.ts_ns - sim.monotonic_base_ns > last_second)
            .all(|e| e.kind != EventKind::Convert as u8));

        // Same seed, same polls: same events (timestamps relative to each start).
        let twin_dir = knob_root();
        let mut twin = LiveSim::new(ScenarioName::VmReplay, twin_dir.path(), 5).unwrap();
        let twin_events = run(&mut twin, start, &[0, 1, 2, 3, 20]);
        let strip = |events: &[Event], base: u64| -> Vec<Event> {
            events
                .iter()
                .map(|e| Event {
                    ts_ns: e.ts_ns - base,
                    ..*e
                })
                .collect()
        };
        assert_eq!(
            strip(&events, sim.monotonic_base_ns),
            strip(&twin_events, twin.monotonic_base_ns)
        );
        drop(sim);
        drop(twin);
    }
}

#[cfg(test)]
mod pressure_tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_live_phone_reports_the_pressure_of_its_allocation_and_little_otherwise() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut sim = LiveSim::new(ScenarioName::AndroidLaunch, dir.path(), 3).unwrap();
        // The allocation's hard reclaim (priority 5 every 100 ms, 2 s); afterwards it is held
        // under the phone's ambient reclaim (priority 9 once a second).
        let ramp = AndroidParams::default().pressure_ramp;
        let start = Instant::now();
        let mut out = Vec::new();
        // Virtual time only: polls at made-up instants, every 100 ms for 160 s. Readings whose
        // last second was all under the ramp, or all without it, and their pressure.
        let mut held_before = [false; 10];
        let mut during = Vec::new();
        let mut outside = Vec::new();
        for tenth in 0..1600u64 {
            sim.poll(start + Duration::from_millis(tenth * 100), &mut out)
                .unwrap();
            out.clear();
            let held = sim.snapshot().pressure == ramp;
            let slot = (tenth % 10) as usize;
            let steady = held_before.iter().all(|&h| h == held);
            held_before[slot] = held;
            if steady {
                if held { &mut during } else { &mut outside }.push(sim.memory_pressure());
            }
        }
        let most = |readings: &[f64]| readings.iter().copied().fold(0.0, f64::max);
        assert!(!during.is_empty() && !outside.is_empty());
        assert!(
            most(&during) > 20.0,
            "allocating 1 GiB: {:.2} %",
            most(&during)
        );
        assert!(most(&outside) < 5.0, "otherwise: {:.2} %", most(&outside));
    }
}
