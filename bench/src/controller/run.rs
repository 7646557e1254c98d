//! One workload with the controller in the loop: a [`Session`] over [`MemoryKnobs`], stepped
//! once per decision window of virtual time and polled between, as `nodescope tune` steps
//! the real device.
use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::{anyhow, Result};
use controller::{
    audit::{AuditLog, AuditRecord, AuditRecords},
    knobs::MemoryKnobs,
    law::Config,
    session::Session,
    signals::DEFAULT_RATE_PERIOD,
    tuner::TunerOptions,
};
use serde::Serialize;
use sim::scenario::controlled::{self, Window, WindowKind, Workload, WorkloadRun};
use tracer_common::knobs::Knobs;

use super::{
    cost::{PhaseCost, Weights},
    report::serialize_optional_setting,
    signals::SimSignals,
};

/// The simulated device's name in the audit records.
const DEVICE: &str = "sim";

/// How the controller runs in the benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct ControllerSetup {
    pub config: Config,
    /// Decision period, virtual.
    pub window_s: f64,
    /// Poll period between decisions (the gauges only, for `law::urgent`); 0: no polls.
    pub poll_s: f64,
    /// `--min-write-gap`.
    pub min_write_gap_s: f64,
    /// Rates (and so the waste fractions) are measured over this trailing period.
    pub rate_period_s: f64,
    /// Restores this soon after their conversion count as eager, whatever the interval.
    pub eager_floor_s: f64,
    /// Keep every audit record of the controller's runs (`--trace`).
    #[serde(skip)]
    pub keep_records: bool,
}

impl Default for ControllerSetup {
    fn default() -> Self {
        ControllerSetup {
            config: Config::default(),
            window_s: 1.0,
            poll_s: 0.1,
            min_write_gap_s: 1.0,
            rate_period_s: DEFAULT_RATE_PERIOD.as_secs_f64(),
            // Unrounded, unlike `tracer_common::knobs::EAGER_FLOOR_NS` (its value to the
            // millisecond): the published figures were measured with it.
            eager_floor_s: Weights::default().break_even_lifetime_s(),
            keep_records: false,
        }
    }
}

/// What the controller did in one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ControllerTrace {
    pub decisions: u32,
    /// Decisions that changed a knob.
    pub moves: u32,
    #[serde(serialize_with = "serialize_optional_setting")]
    pub final_knobs: Option<Knobs>,
    /// Why tuning stopped, if it did (a failure: the bench reports it).
    pub stopped: Option<String>,
    /// The controller's cost phase by phase.
    pub phases: Vec<PhaseCost>,
    /// Every audit record, with `--trace`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<AuditRecord>,
}

impl ControllerTrace {
    /// Count the records of one step; `moved`: the step changed a knob.
    fn account(&mut self, records: Vec<AuditRecord>, moved: bool, tuning: bool, keep: bool) {
        for record in records {
            self.decisions += 1;
            self.moves += u32::from(moved);
            if !tuning && self.stopped.is_none() {
                self.stopped = Some(record.reason.clone());
            }
            if keep {
                self.records.push(record);
            }
        }
    }
}

/// The controller's side of a controlled run: its session, the device it writes, its signals.
struct Loop {
    session: Session<MemoryKnobs>,
    device: MemoryKnobs,
    records: AuditRecords,
    source: SimSignals,
    keep_records: bool,
    trace: Arc<Mutex<ControllerTrace>>,
}

impl Loop {
    fn start(workload: &Workload, setup: &ControllerSetup) -> Result<Loop> {
        let device = MemoryKnobs::new(DEVICE, Knobs::DEFAULT);
        let opts = TunerOptions {
            dry_run: false,
            min_write_gap: Duration::from_secs_f64(setup.min_write_gap_s),
        };
        let (audit, records) = AuditLog::in_memory();
        let devices = vec![(DEVICE.to_string(), device.clone())];
        let session = Session::start(devices, opts, setup.config.clone(), audit)?;
        // The `start` record is not a decision.
        records.take();
        let rate_period = Duration::from_nanos((setup.rate_period_s * 1e9).round() as u64);
        Ok(Loop {
            session,
            device,
            records,
            source: SimSignals::new(workload.budget_bytes(), rate_period),
            keep_records: setup.keep_records,
            trace: Arc::default(),
        })
    }

    /// One decision or poll on `window`; the knobs the simulator runs with next.
    fn step(&mut self, window: &Window) -> Knobs {
        let now = Duration::from_nanos(window.now_ns);
        let before = self.device.get();
        self.source.observe(window);
        let stepped = match window.kind {
            WindowKind::Decision => self.session.tick(&mut self.source, now),
            WindowKind::Poll => self.session.poll(&mut self.source, now),
        };
        let after = self.device.get();
        let mut trace = self.trace.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(err) = stepped {
            trace.stopped.get_or_insert(format!("{err:#}"));
        }
        let tuning = self.session.tuning() > 0;
        trace.account(
            self.records.take(),
            after != before,
            tuning,
            self.keep_records,
        );
        after
    }
}

/// Run `workload` with the controller in the loop, from the default setting.
pub fn run_controller(
    workload: Workload,
    seed: u64,
    setup: &ControllerSetup,
) -> Result<(WorkloadRun, ControllerTrace)> {
    let mut controller = Loop::start(&workload, setup)?;
    let trace = controller.trace.clone();
    let control = controlled::Control {
        window_ns: (setup.window_s * 1e9).round() as u64,
        poll_ns: (setup.poll_s * 1e9).round() as u64,
        eager_floor_ns: (setup.eager_floor_s * 1e9).round() as u64,
    };
    let decide = move |window: &Window| controller.step(window);
    let run =
        controlled::run_controlled(workload, seed, Knobs::DEFAULT, control, Box::new(decide))?;
    let mut trace = Arc::try_unwrap(trace)
        .map_err(|_| anyhow!("controller trace still shared"))?
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    trace.final_knobs = Some(run.final_snapshot.knobs);
    Ok((run, trace))
}
