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
//! A [`Snapshot`] has the cumulative counters (node reads, restores, conversions, reclaims per
//! queue) and the memory. What it lacks is derived here from the events, as a live source
//! would: **eager restores** (a restore of an entry converted less than max(2 x the interval,
//! [`Control::eager_floor_ns`]) before) and **refaults** (a demand read of a node the shrinker
//! had reclaimed).
//!
//! **Memory pressure** stands in for PSI memory `some` over the window (the share of the
//! window in which some task waited for memory, what PSI's `total` gives over an interval),
//! in percent, capped at 100. It adds two shares:
//! - refault stalls: each refault keeps its task waiting `costs::NODE_READ_NS`; Linux counts
//!   the refaults of a thrashing working set as memory stalls too;
//! - reclaim effort: entries the shrinker scanned per second over the cache's effective count.
//!   The simulator has no allocating tasks of its own, so how hard reclaim works stands in for
//!   the stalls of the allocations that drive it: priority 9 once a second (a phone's ambient
//!   kswapd) gives 0.4 %, priority 5 every 100 ms (a 1 GiB allocation) 62.5 %.
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tracer_common::{Event, EventKind, QUEUE_RAW, SECOND_CHANCE_BY_SHRINKER};

use super::{android, mixed, vm_replay, Phases, Totals};
use tracer_common::knobs::{eager_window_with_floor_ns, Knobs};
use crate::{
    costs,
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
                NodeSet::for_manifest(&android::AndroidParams::default().fileset.manifest())
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

/// Cumulative counters a [`Snapshot`] does not carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Feedback {
    /// Restores of entries converted less than 2 x node_compress_interval before.
    pub eager_restores: u64,
    /// Compressed entries reclaimed (never restored since their conversion).
    pub wasted: u64,
    /// Demand reads of nodes the shrinker had reclaimed.
    pub refaults: u64,
    /// Entries the shrinker scanned (reclaimed or given a second chance).
    pub shrinker_scanned: u64,
}

/// Derives [`Feedback`] and the memory pressure from the events, window by window.
#[derive(Debug, Default)]
pub struct FeedbackTracker {
    /// A restore within this long of the conversion is eager, whatever the interval.
    eager_floor_ns: u64,
    /// By nid: when it was converted, while it is compressed ([`NEVER`] otherwise).
    converted_at: Vec<u64>,
    /// By nid: reclaimed and not read back since.
    reclaimed: Vec<bool>,
    totals: Feedback,
    /// The totals when the current window began.
    window_start: Feedback,
}

/// `converted_at` of a nid that is not compressed.
const NEVER: u64 = u64::MAX;

/// The slot of `nid` in a per-nid table, grown on first use.
fn slot<T: Clone>(table: &mut Vec<T>, nid: u32, empty: T) -> &mut T {
    let index = nid as usize;
    if table.len() <= index {
        table.resize(index + 1, empty);
    }
    &mut table[index]
}

impl FeedbackTracker {
    /// Restores count as eager within max(2 x interval, `eager_floor_ns`) of the conversion.
    pub fn new(eager_floor_ns: u64) -> Self {
        FeedbackTracker {
            eager_floor_ns,
            ..FeedbackTracker::default()
        }
    }

    /// Account one event; `interval_ms` is the interval in force (for "eager").
    pub fn record(&mut self, event: &Event, interval_ms: u32) {
        let nid = event.nid;
        match event.kind() {
            Some(EventKind::Convert) => *slot(&mut self.converted_at, nid, NEVER) = event.ts_ns,
            Some(EventKind::Restore) => {
                let at = std::mem::replace(slot(&mut self.converted_at, nid, NEVER), NEVER);
                let eager_ns = eager_window_with_floor_ns(interval_ms, self.eager_floor_ns);
                if at != NEVER && event.ts_ns.saturating_sub(at) < eager_ns {
                    self.totals.eager_restores += 1;
                }
            }
            Some(EventKind::Reclaim) => {
                if event.queue != QUEUE_RAW {
                    self.totals.wasted += 1;
                }
                self.totals.shrinker_scanned += 1;
                *slot(&mut self.converted_at, nid, NEVER) = NEVER;
                *slot(&mut self.reclaimed, nid, false) = true;
            }
            Some(EventKind::SecondChance) if event.reason == SECOND_CHANCE_BY_SHRINKER => {
                self.totals.shrinker_scanned += 1;
            }
            Some(EventKind::RestoreFail) => *slot(&mut self.converted_at, nid, NEVER) = NEVER,
            Some(EventKind::NodeRead) if !event.is_readahead() => self.demand_read(nid),
            _ => {}
        }
    }

    /// A demand read of a node the shrinker reclaimed is a refault (once).
    fn demand_read(&mut self, nid: u32) {
        if std::mem::take(slot(&mut self.reclaimed, nid, false)) {
            self.totals.refaults += 1;
        }
    }

    /// The cumulative feedback so far.
    pub fn totals(&self) -> Feedback {
        self.totals
    }

    /// Close a window of `window_ns` over a cache whose effective count is `shrink_count`:
    /// the cumulative feedback and the window's memory pressure.
    pub fn close_window(&mut self, window_ns: u64, shrink_count: u64) -> (Feedback, f64) {
        let start = std::mem::replace(&mut self.window_start, self.totals);
        (
            self.totals,
            pressure(&start, &self.totals, window_ns, shrink_count),
        )
    }
}

/// The memory pressure over a trailing window, from readings of the cumulative feedback taken
/// at any pace (the controlled runs' hand-overs, the live simulator's polls).
#[derive(Debug)]
pub struct TrailingPressure {
    window_ns: u64,
    /// (time, cumulative feedback) of the readings in the last window, oldest first.
    recent: std::collections::VecDeque<(u64, Feedback)>,
}

impl TrailingPressure {
    pub fn new(window_ns: u64) -> Self {
        TrailingPressure {
            window_ns,
            recent: [(0, Feedback::default())].into(),
        }
    }

    /// Take a reading at `now_ns`; the pressure since the reading a window back (or since the
    /// first one), over a cache whose effective count is `shrink_count`.
    pub fn update(&mut self, now_ns: u64, totals: Feedback, shrink_count: u64) -> f64 {
        let since = now_ns.saturating_sub(self.window_ns);
        while self.recent.len() > 1 && self.recent[1].0 <= since {
            self.recent.pop_front();
        }
        let (then, start) = self.recent.front().copied().unwrap_or_default();
        self.recent.push_back((now_ns, totals));
        pressure(&start, &totals, now_ns.saturating_sub(then), shrink_count)
    }
}

/// Refault stall share plus reclaim effort share, percent (see the module notes).
fn pressure(start: &Feedback, end: &Feedback, window_ns: u64, shrink_count: u64) -> f64 {
    if window_ns == 0 {
        return 0.0;
    }
    let refaults = end.refaults - start.refaults;
    let stall = (refaults * costs::NODE_READ_NS) as f64 / window_ns as f64;
    let scanned = (end.shrinker_scanned - start.shrinker_scanned) as f64;
    let effort = scanned / shrink_count.max(1) as f64 / (window_ns as f64 / 1e9);
    ((stall + effort) * 100.0).min(100.0)
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
    use tracer_common::{QUEUE_256, SECOND_CHANCE_BY_WORKER};

    use super::*;

    const MS: u64 = 1_000_000;

    fn event(kind: EventKind, nid: u32, ts_ms: u64) -> Event {
        Event {
            kind: kind as u8,
            nid,
            ts_ns: ts_ms * MS,
            ..Event::ZERO
        }
    }

    fn on_queue(mut event: Event, queue: u8) -> Event {
        event.queue = queue;
        event
    }

    #[test]
    fn eager_restores_follow_the_interval_or_the_floor() {
        // Interval 1000 ms: eager means restored within 2 s of the conversion.
        let mut tracker = FeedbackTracker::new(0);
        for e in [
            event(EventKind::Convert, 1, 0),
            event(EventKind::Convert, 2, 0),
            event(EventKind::Restore, 1, 1_999),
            event(EventKind::Restore, 2, 2_000),
            // Restored twice: only the first restore follows a conversion.
            event(EventKind::Restore, 1, 2_100),
        ] {
            tracker.record(&e, 1000);
        }
        assert_eq!(tracker.close_window(3_000 * MS, 1).0.eager_restores, 1);

        // Interval 100 ms, floor 3 s: a restore 2.5 s after the conversion is eager.
        let mut tracker = FeedbackTracker::new(3_000 * MS);
        tracker.record(&event(EventKind::Convert, 7, 0), 100);
        tracker.record(&event(EventKind::Restore, 7, 2_500), 100);
        assert_eq!(tracker.close_window(3_000 * MS, 1).0.eager_restores, 1);
    }

    #[test]
    fn wasted_refaults_and_pressure_per_window() {
        let mut tracker = FeedbackTracker::default();
        let mut second_chance = event(EventKind::SecondChance, 9, 5);
        second_chance.reason = SECOND_CHANCE_BY_SHRINKER;
        let mut by_worker = second_chance;
        by_worker.reason = SECOND_CHANCE_BY_WORKER;
        let mut readahead = event(EventKind::NodeRead, 4, 30);
        readahead.flags = tracer_common::FLAG_READAHEAD;
        for e in [
            event(EventKind::Convert, 3, 0),
            on_queue(event(EventKind::Reclaim, 3, 10), QUEUE_256),
            on_queue(event(EventKind::Reclaim, 4, 11), QUEUE_RAW),
            on_queue(event(EventKind::Reclaim, 5, 12), QUEUE_RAW),
            second_chance,
            by_worker,
            event(EventKind::NodeRead, 3, 20),
            event(EventKind::NodeRead, 3, 21),
            readahead,
            event(EventKind::NodeRead, 6, 40),
        ] {
            tracker.record(&e, 1000);
        }
        // Window of 100 ms over an effective count of 40 entries: 4 scanned (3 reclaims, one
        // shrinker second chance) is 10 % of the cache in 0.1 s, 100 % a second: capped.
        let (feedback, pressure) = tracker.close_window(100 * MS, 40);
        assert_eq!(
            feedback,
            Feedback {
                eager_restores: 0,
                wasted: 1,
                refaults: 1,
                shrinker_scanned: 4,
            }
        );
        assert_eq!(pressure, 100.0);

        // Next window, 1 s, count 1000: one refault (90 us, 0.009 %) and 5 scanned (0.5 %).
        tracker.record(&event(EventKind::NodeRead, 5, 1_000), 1000);
        for nid in 10..15 {
            tracker.record(
                &on_queue(event(EventKind::Reclaim, nid, 1_050), QUEUE_RAW),
                1000,
            );
        }
        let (feedback, pressure) = tracker.close_window(1_000 * MS, 1000);
        assert_eq!(feedback.refaults, 2);
        assert_eq!(feedback.shrinker_scanned, 9);
        assert!((pressure - 0.509).abs() < 1e-9, "{pressure}");
    }

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
