//! Workloads for the controller benchmark, run with static knobs ([`run_static`]) or with a
//! controller in the loop ([`run_controlled`]), both in virtual time and on the same code path.
//!
//! A controlled run hands control to the caller once per decision window (through the
//! engine's [`Pacer`]): the caller sees a [`Window`] (the snapshot, the feedback counters a
//! snapshot lacks, the simulator's memory pressure) and returns the knob values for the next
//! window. A controlled run whose callback always returns the same values is the static run,
//! event for event (a test checks it).
//!
//! # The workloads
//!
//! - `vm-replay` at a budget: the RFC's VM run (mount, create the file set, sync), then a fixed
//!   60 s in which the cache thread does what the knobs let it, the budget held for 1 s, and
//!   the replay of every file. `vm_replay::run_static` lets the worker run until it is quiet,
//!   which makes its length depend on the knobs; a benchmark that charges memory over time
//!   needs runs of the same length, hence the fixed wait.
//! - `android-launch`: `android::run_static`'s trial, unchanged.
//! - `mixed`: [`super::mixed`]'s phases (a tight phase where compression pays, churn where it
//!   does not, then idle).
//!
//! # Feedback signals
//!
//! What a [`Snapshot`] lacks (eager restores, refaults, memory pressure) is derived from the
//! events by [`super::feedback`], as a live source would.
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tracer_common::{knobs::Knobs, Event};

use super::{
    android,
    feedback::{Feedback, FeedbackTracker, TrailingPressure},
    mixed, vm_replay, Phases, Totals,
};
use crate::{
    engine::{Engine, EngineOptions, MemorySample, Pacer, Pressure, Snapshot},
    knobs::KnobSource,
    nodes::NodeSet,
    rng::Rng,
};

const SECOND: u64 = 1_000_000_000;

/// A workload of the controller benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "workload", rename_all = "kebab-case")]
pub enum Workload {
    /// The RFC's VM run, the budget held after a fixed settling time.
    VmReplay { budget_bytes: u64 },
    /// The RFC's phone trial.
    AndroidLaunch,
    /// Tight, then churn, then idle ([`mixed`]).
    Mixed,
}

impl Workload {
    /// `vm-replay-3mib`, `android-launch`, `mixed`.
    pub fn name(&self) -> String {
        match self {
            Workload::VmReplay { budget_bytes } => {
                format!("vm-replay-{}", size_name(*budget_bytes))
            }
            Workload::AndroidLaunch => "android-launch".to_string(),
            Workload::Mixed => "mixed".to_string(),
        }
    }

    /// The node-cache budget the user of this workload states (what `nodescope tune --budget`
    /// would be given): the VM run's budget; none on the phone and in `mixed`, where only
    /// memory pressure speaks.
    pub fn budget_bytes(&self) -> Option<u64> {
        match self {
            Workload::VmReplay { budget_bytes } => Some(*budget_bytes),
            Workload::AndroidLaunch | Workload::Mixed => None,
        }
    }

    fn nodes(&self) -> Result<Arc<NodeSet>> {
        match self {
            Workload::VmReplay { .. } => vm_replay::rfc_nodes(),
            Workload::AndroidLaunch => {
                android::nodes(&android::AndroidParams::default()).map(|(_, nodes)| nodes)
            }
            Workload::Mixed => mixed::nodes(),
        }
    }

    /// Drive the workload on `engine`, marking its phases.
    fn drive(&self, engine: Engine, seed: u64) -> Result<(Engine, Phases)> {
        match self {
            Workload::VmReplay { budget_bytes } => drive_vm_replay(engine, *budget_bytes, seed),
            Workload::AndroidLaunch => drive_android(engine, seed),
            Workload::Mixed => mixed::drive(engine, &mixed::MixedParams::default(), seed),
        }
    }
}

/// `3mib`, `512kib`, `1234b`.
fn size_name(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{}mib", bytes >> 20)
    } else if bytes.is_multiple_of(1 << 10) {
        format!("{}kib", bytes >> 10)
    } else {
        format!("{bytes}b")
    }
}

/// How long the VM run waits between the sync and the budget (see the module notes).
pub const VM_SETTLE_NS: u64 = 60 * SECOND;

fn drive_vm_replay(mut engine: Engine, budget_bytes: u64, seed: u64) -> Result<(Engine, Phases)> {
    let params = vm_replay::VmReplayParams::default();
    let manifest = params.fileset.manifest();
    let nodes = engine.nodes().clone();
    let mut phases = Phases::new(&engine);
    let mut rng = Rng::new(seed);
    let tasks = vm_replay::GuestTasks::default();
    vm_replay::mount(&mut engine, &tasks)?;
    vm_replay::populate(&mut engine, &manifest, &tasks, &mut rng)?;
    phases.mark(&engine, "populate");
    engine.advance_by(VM_SETTLE_NS)?;
    phases.mark(&engine, "settle");
    engine.set_pressure(Pressure::Budget {
        bytes: budget_bytes,
    });
    engine.advance_by(params.pressure_ns)?;
    engine.set_pressure(Pressure::None);
    phases.mark(&engine, "pressure");
    vm_replay::replay(&mut engine, &params.fileset, &nodes, 2000, &mut rng)?;
    phases.mark(&engine, "replay");
    Ok((engine, phases))
}

fn drive_android(engine: Engine, seed: u64) -> Result<(Engine, Phases)> {
    let params = android::AndroidParams::default();
    let mut trial = android::Trial::from_engine(&params, engine, seed)?;
    let mut phases = Phases::new(&trial.engine);
    trial.boot()?;
    trial.launch_pass()?;
    phases.mark(&trial.engine, "seed");
    trial.idle(params.normalise_s * SECOND)?;
    phases.mark(&trial.engine, "normalise");
    trial.pressure()?;
    phases.mark(&trial.engine, "pressure");
    trial.launch_pass()?;
    phases.mark(&trial.engine, "pass1");
    trial.launch_pass()?;
    phases.mark(&trial.engine, "pass2");
    Ok((trial.engine, phases))
}

/// What a benchmark needs of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadRun {
    pub workload: Workload,
    pub seed: u64,
    pub phases: Vec<super::Phase>,
    pub whole: Totals,
    pub final_snapshot: Snapshot,
    /// Attributed memory, one sample a virtual second.
    #[serde(skip)]
    pub memory: Vec<MemorySample>,
    /// Attributed memory integrated over the run (samples x their period), byte-seconds.
    pub memory_byte_seconds: f64,
    /// The knob values in force from each decision window's end, and from each poll that
    /// changed them (controlled runs; empty otherwise).
    #[serde(skip)]
    pub knob_trace: Vec<(u64, Knobs)>,
}

impl WorkloadRun {
    fn new(
        workload: Workload,
        seed: u64,
        first: &Snapshot,
        engine: &Engine,
        phases: Phases,
    ) -> Self {
        let final_snapshot = engine.snapshot();
        let memory = engine.samples().to_vec();
        let period_s = SAMPLE_EVERY_NS as f64 / 1e9;
        let memory_byte_seconds = memory
            .iter()
            .map(|s| s.attributed_bytes as f64 * period_s)
            .sum();
        WorkloadRun {
            workload,
            seed,
            whole: Totals::between(first, &final_snapshot),
            phases: phases.phases,
            final_snapshot,
            memory,
            memory_byte_seconds,
            knob_trace: Vec::new(),
        }
    }

    pub fn phase(&self, name: &str) -> Option<&super::Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

const SAMPLE_EVERY_NS: u64 = SECOND;

fn engine_for(workload: &Workload, knobs: Knobs, record_events: bool) -> Result<Engine> {
    let options = EngineOptions {
        record_events,
        sample_every_ns: SAMPLE_EVERY_NS,
        ..EngineOptions::default()
    };
    Ok(Engine::new(
        workload.nodes()?,
        KnobSource::Static(knobs),
        options,
    ))
}

/// Run `workload` once with fixed knob values.
pub fn run_static(workload: Workload, knobs: Knobs, seed: u64) -> Result<WorkloadRun> {
    let engine = engine_for(&workload, knobs, false)?;
    let first = engine.snapshot();
    let (engine, phases) = workload.drive(engine, seed)?;
    Ok(WorkloadRun::new(workload, seed, &first, &engine, phases))
}

/// What the controller sees at the end of a decision window.
#[derive(Clone, Debug)]
pub struct Window<'a> {
    /// Virtual time at the end of the window.
    pub now_ns: u64,
    pub window_ns: u64,
    /// Gauges and cumulative counters.
    pub snapshot: &'a Snapshot,
    /// Cumulative counters derived from the events.
    pub feedback: Feedback,
    /// PSI-like memory `some` over the trailing `window_ns` (see the module notes), percent;
    /// at a poll too (what a PSI trigger over one window measures).
    pub memory_pressure: f64,
    /// The end of a decision window, or a poll between two ([`Control::poll_ns`]).
    pub kind: WindowKind,
}

/// Whether a [`Window`] closes a decision window or is a poll inside one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    Decision,
    Poll,
}

/// The callback of a controlled run: knob values for the next window.
pub type Decide = Box<dyn FnMut(&Window) -> Knobs + Send>;

struct WindowPacer {
    window_ns: u64,
    /// Time between two hand-overs: the poll period, or the window when there are no polls.
    step_ns: u64,
    next_limit: u64,
    tracker: FeedbackTracker,
    /// Every hand-over measures pressure over the trailing window.
    trailing: TrailingPressure,

    events: Vec<Event>,
    decide: Decide,
    trace: Arc<Mutex<Vec<(u64, Knobs)>>>,
}

impl Pacer for WindowPacer {
    fn wait_for_more(&mut self, engine: &mut Engine) -> Result<u64> {
        let interval_ms = engine.knobs.values().interval_ms;
        engine.drain_events(&mut self.events);
        for event in self.events.drain(..) {
            self.tracker.record(&event, interval_ms);
        }
        let snapshot = engine.snapshot();
        let now = self.next_limit;
        let feedback = self.tracker.totals();
        let memory_pressure = self.trailing.update(now, feedback, snapshot.shrink_count);
        let kind = if now.is_multiple_of(self.window_ns) {
            WindowKind::Decision
        } else {
            WindowKind::Poll
        };
        let window = Window {
            now_ns: now,
            window_ns: self.window_ns,
            snapshot: &snapshot,
            feedback,
            memory_pressure,
            kind,
        };
        let knobs = (self.decide)(&window);
        let changed = engine.knobs.values() != knobs;
        engine.knobs = KnobSource::Static(knobs);
        if kind == WindowKind::Decision || changed {
            if let Ok(mut trace) = self.trace.lock() {
                trace.push((now, knobs));
            }
        }
        self.next_limit += self.step_ns;
        Ok(self.next_limit)
    }
}

/// How a controlled run hands over control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    /// The decision period, virtual.
    pub window_ns: u64,
    /// The poll period between decisions (0: no polls); must divide `window_ns`.
    pub poll_ns: u64,
    /// See [`FeedbackTracker::new`].
    pub eager_floor_ns: u64,
}

/// Run `workload` starting from `initial`, calling `decide` at the end of every
/// `control.window_ns` of virtual time, and every `control.poll_ns` in between; its answer is
/// in force from then on.
pub fn run_controlled(
    workload: Workload,
    seed: u64,
    initial: Knobs,
    control: Control,
    decide: Decide,
) -> Result<WorkloadRun> {
    let window_ns = control.window_ns;
    anyhow::ensure!(window_ns > 0, "a decision window must last some time");
    let step_ns = match control.poll_ns {
        0 => window_ns,
        poll_ns => {
            anyhow::ensure!(
                window_ns.is_multiple_of(poll_ns),
                "the poll period ({poll_ns} ns) must divide the decision window ({window_ns} ns)"
            );
            poll_ns
        }
    };
    let mut engine = engine_for(&workload, initial, true)?;
    let first = engine.snapshot();
    let trace = Arc::new(Mutex::new(Vec::new()));
    let pacer = WindowPacer {
        window_ns,
        step_ns,
        next_limit: step_ns,
        tracker: FeedbackTracker::new(control.eager_floor_ns),
        trailing: TrailingPressure::new(window_ns),
        events: Vec::new(),
        decide,
        trace: trace.clone(),
    };
    engine.set_pacer(Box::new(pacer), step_ns);

    let (engine, phases) = workload.drive(engine, seed)?;
    let mut run = WorkloadRun::new(workload, seed, &first, &engine, phases);
    run.knob_trace = std::mem::take(&mut *trace.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_controller_that_never_changes_anything_is_the_static_run() {
        let workload = Workload::VmReplay {
            budget_bytes: 3 << 20,
        };
        let knobs = Knobs {
            threshold: 25,
            interval_ms: 500,
        };
        let fixed = run_static(workload, knobs, 4).unwrap();
        let control = Control {
            window_ns: SECOND,
            poll_ns: 0,
            eager_floor_ns: 0,
        };
        let mut windows = 0;
        let decide = Box::new(move |window: &Window| {
            windows += 1;
            assert_eq!(window.now_ns, windows * SECOND);
            window.snapshot.knobs
        });
        let controlled = run_controlled(workload, 4, knobs, control, decide).unwrap();
        assert_eq!(controlled.whole, fixed.whole);
        assert_eq!(controlled.final_snapshot, fixed.final_snapshot);
        assert_eq!(controlled.memory, fixed.memory);
        let windows = controlled.knob_trace.len() as u64;
        assert_eq!(windows, controlled.final_snapshot.ts_ns / SECOND);
        assert!(controlled.knob_trace.iter().all(|(_, k)| *k == knobs));
    }

    #[test]
    fn polls_between_windows_change_nothing_but_the_hand_overs() {
        // The same run with polls every 250 ms: the same simulation, decisions at the same
        // times seeing the same pressure (over the trailing window), three polls in between.
        let workload = Workload::Mixed;
        let knobs = Knobs {
            threshold: 25,
            interval_ms: 500,
        };
        let pressures = |poll_ns: u64| {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let shared = seen.clone();
            let control = Control {
                window_ns: SECOND,
                poll_ns,
                eager_floor_ns: 0,
            };
            let decide = Box::new(move |window: &Window| {
                let mut seen = shared.lock().unwrap();
                seen.push((window.now_ns, window.kind, window.memory_pressure));
                window.snapshot.knobs
            });
            let run = run_controlled(workload, 9, knobs, control, decide).unwrap();
            let seen = std::mem::take(&mut *seen.lock().unwrap());
            (run, seen)
        };
        let (plain, plain_seen) = pressures(0);
        let (polled, polled_seen) = pressures(SECOND / 4);
        assert_eq!(polled.whole, plain.whole);
        assert_eq!(polled.memory, plain.memory);
        assert_eq!(polled.knob_trace, plain.knob_trace);
        assert_eq!(polled_seen.len(), 4 * plain_seen.len());
        let decisions: Vec<_> = polled_seen
            .iter()
            .filter(|(_, kind, _)| *kind == WindowKind::Decision)
            .copied()
            .collect();
        assert_eq!(decisions, plain_seen);
        assert!(polled_seen
            .iter()
            .all(|(t, kind, _)| (*kind == WindowKind::Decision) == t.is_multiple_of(SECOND)));
        // Pressure is measured: the tight phase's reclaim shows in some window.
        assert!(decisions.iter().any(|(_, _, pressure)| *pressure > 1.0));
    }

    #[test]
    fn workload_names() {
        let names: Vec<String> = [
            Workload::VmReplay {
                budget_bytes: 3 << 20,
            },
            Workload::VmReplay {
                budget_bytes: 1536 << 10,
            },
            Workload::AndroidLaunch,
            Workload::Mixed,
        ]
        .iter()
        .map(Workload::name)
        .collect();
        assert_eq!(
            names,
            [
                "vm-replay-3mib",
                "vm-replay-1536kib",
                "android-launch",
                "mixed"
            ]
        );
    }
}
