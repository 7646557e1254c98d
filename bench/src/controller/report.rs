//! The report: each workload's default, best static and controller costs, the acceptance
//! check, and the table `cargo xtask bench controller` prints.
use anyhow::{anyhow, Result};
use serde::{Serialize, Serializer};
use sim::scenario::controlled::Workload;
use tracer_common::knobs::Knobs;

use super::{
    cost::{Cost, PhaseCost, Weights},
    jobs::Outcome,
    run::{ControllerSetup, ControllerTrace},
};

/// Knob values as the report has always shown them: `{"threshold": 25, "interval": 1000}`
/// (the audit log's `interval_ms` is another format, kept apart).
#[derive(Serialize)]
struct Setting {
    threshold: u32,
    interval: u32,
}

impl From<&Knobs> for Setting {
    fn from(knobs: &Knobs) -> Setting {
        Setting {
            threshold: knobs.threshold,
            interval: knobs.interval_ms,
        }
    }
}

pub fn serialize_setting<S: Serializer>(knobs: &Knobs, serializer: S) -> Result<S::Ok, S::Error> {
    Setting::from(knobs).serialize(serializer)
}

pub fn serialize_optional_setting<S: Serializer>(
    knobs: &Option<Knobs>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    knobs.as_ref().map(Setting::from).serialize(serializer)
}

/// One setting's run.
#[derive(Clone, Debug, Serialize)]
pub struct StaticResult {
    #[serde(serialize_with = "serialize_setting")]
    pub setting: Knobs,
    pub cost: Cost,
    pub phases: Vec<PhaseCost>,
}

/// One workload's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    pub name: String,
    pub default_cost: f64,
    pub best_static_cost: f64,
    #[serde(serialize_with = "serialize_setting")]
    pub best_static: Knobs,
    pub controller_cost: f64,
    /// controller_cost / best_static_cost (acceptance: at most 1.05).
    pub controller_vs_best: f64,
    /// controller_cost / default_cost.
    pub controller_vs_default: f64,
    pub default: Cost,
    pub best: Cost,
    pub controller: Cost,
    pub controller_trace: ControllerTrace,
    /// Every static setting tried, cheapest first.
    pub grid: Vec<StaticResult>,
}

/// The whole report: `{"scenarios": [...]}` plus what was held fixed.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenarios: Vec<ScenarioReport>,
    pub weights: Weights,
    pub controller: ControllerSetup,
    pub seed: u64,
    pub wall_s: f64,
}

pub(super) fn scenario_report(
    workload: &Workload,
    index: usize,
    outcomes: &[Outcome],
) -> Result<ScenarioReport> {
    let mut grid: Vec<StaticResult> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Static(i, result) if *i == index => Some(result.clone()),
            _ => None,
        })
        .collect();
    // Ties (thresholds that admit the same payloads run identically) go to the higher
    // threshold, the default's side.
    grid.sort_by(|a, b| {
        let by_cost = a.cost.total.total_cmp(&b.cost.total);
        by_cost.then(b.setting.threshold.cmp(&a.setting.threshold))
    });
    let (controller, trace) = outcomes
        .iter()
        .find_map(|o| match o {
            Outcome::Controller(i, cost, trace) if *i == index => Some((*cost, trace.clone())),
            _ => None,
        })
        .ok_or_else(|| anyhow!("no controller run for {}", workload.name()))?;
    let default = grid
        .iter()
        .find(|r| r.setting == Knobs::DEFAULT)
        .ok_or_else(|| anyhow!("the grid lacks the default setting"))?
        .cost;
    let best = grid.first().ok_or_else(|| anyhow!("empty grid"))?.clone();
    Ok(ScenarioReport {
        name: workload.name(),
        default_cost: default.total,
        best_static_cost: best.cost.total,
        best_static: best.setting,
        controller_cost: controller.total,
        controller_vs_best: controller.total / best.cost.total,
        controller_vs_default: controller.total / default.total,
        default,
        best: best.cost,
        controller,
        controller_trace: trace,
        grid,
    })
}

/// The controller's acceptance: on every workload the controller costs at most 1.05 x the best
/// static setting, and on `mixed` less than the default. Returns each violation.
pub fn violations(report: &Report) -> Vec<String> {
    let mut found = Vec::new();
    for s in &report.scenarios {
        if s.controller_cost > 1.05 * s.best_static_cost {
            found.push(format!(
                "{}: controller {:.1} > 1.05 x best static {:.1} ({}, {} ms)",
                s.name,
                s.controller_cost,
                s.best_static_cost,
                s.best_static.threshold,
                s.best_static.interval_ms
            ));
        }
        if s.name == Workload::Mixed.name() && s.controller_cost >= s.default_cost {
            found.push(format!(
                "{}: controller {:.1} >= default {:.1}",
                s.name, s.controller_cost, s.default_cost
            ));
        }
        if let Some(why) = &s.controller_trace.stopped {
            found.push(format!("{}: the controller stopped: {why}", s.name));
        }
    }
    found
}

/// The report as a table.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "{:<16} {:>10} {:>10} {:>12} {:>10} {:>8} {:>8}\n",
        "scenario", "default", "best", "best static", "controller", "/best", "/default"
    );
    for s in &report.scenarios {
        out += &format!(
            "{:<16} {:>10.1} {:>10.1} {:>12} {:>10.1} {:>8.3} {:>8.3}\n",
            s.name,
            s.default_cost,
            s.best_static_cost,
            format!(
                "{} %,{} ms",
                s.best_static.threshold, s.best_static.interval_ms
            ),
            s.controller_cost,
            s.controller_vs_best,
            s.controller_vs_default
        );
    }
    out
}
