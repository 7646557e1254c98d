//! The whole benchmark: every workload under every static setting and with the controller,
//! run as independent jobs on a few threads.
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    },
    time::Instant,
};

use anyhow::Result;
use sim::scenario::controlled::{self, Workload};
use tracer_common::knobs::Knobs;

use super::{
    cost::{Cost, PhaseCost, Weights},
    report::{scenario_report, Report, StaticResult},
    run::{run_controller, ControllerSetup, ControllerTrace},
};

/// One unit of work: a static run, or the controller's run.
#[derive(Clone, Copy, Debug)]
enum Job {
    Static(usize, Knobs),
    Controller(usize),
}

pub(super) enum Outcome {
    Static(usize, StaticResult),
    Controller(usize, Cost, ControllerTrace),
}

/// Run every job on `threads` threads, in the order given (a job's result does not depend on
/// which thread ran it: each run is deterministic).
fn run_jobs(
    jobs: &[Job],
    workloads: &[Workload],
    seed: u64,
    setup: &ControllerSetup,
    weights: &Weights,
    threads: usize,
) -> Result<Vec<Outcome>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Result<Outcome>>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(index) else { return };
                let outcome = run_job(*job, workloads, seed, setup, weights);
                let failed = outcome.is_err();
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(outcome);
                if failed {
                    next.store(jobs.len(), Ordering::SeqCst);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .collect()
}

fn run_job(
    job: Job,
    workloads: &[Workload],
    seed: u64,
    setup: &ControllerSetup,
    weights: &Weights,
) -> Result<Outcome> {
    match job {
        Job::Static(index, setting) => {
            let run = controlled::run_static(workloads[index], setting, seed)?;
            let result = StaticResult {
                setting,
                cost: Cost::of(&run, weights),
                phases: PhaseCost::of(&run, weights),
            };
            Ok(Outcome::Static(index, result))
        }
        Job::Controller(index) => {
            let (run, mut trace) = run_controller(workloads[index], seed, setup)?;
            trace.phases = PhaseCost::of(&run, weights);
            Ok(Outcome::Controller(index, Cost::of(&run, weights), trace))
        }
    }
}

/// Run the benchmark: every workload under every setting of `settings` and the controller.
pub fn run(
    workloads: &[Workload],
    settings: &[Knobs],
    setup: &ControllerSetup,
    seed: u64,
    threads: usize,
) -> Result<Report> {
    let started = Instant::now();
    let weights = Weights::default();
    let mut jobs = Vec::new();
    for index in 0..workloads.len() {
        // The controller's run is the longest (it records events): start it first.
        jobs.push(Job::Controller(index));
        jobs.extend(settings.iter().map(|s| Job::Static(index, *s)));
    }
    let outcomes = run_jobs(&jobs, workloads, seed, setup, &weights, threads)?;
    let mut scenarios = Vec::new();
    for (index, workload) in workloads.iter().enumerate() {
        scenarios.push(scenario_report(workload, index, &outcomes)?);
    }
    Ok(Report {
        scenarios,
        weights,
        controller: setup.clone(),
        seed,
        wall_s: started.elapsed().as_secs_f64(),
    })
}
