//! The simulator as a source: `sim::live::LiveSim` paced against the wall clock, its knobs in
//! a directory that `nodescope tune --sysfs-root` (or a person) can write while it runs.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result};
use sim::{live::LiveSim, scenario::ScenarioName};
use tracer_common::Event;

use super::{BatchFuture, Source, SourceInfo, SourceKind};

/// How often the simulator is advanced: the live view refreshes faster than its windows.
const POLL_EVERY: Duration = Duration::from_millis(100);

pub(crate) struct SimSource {
    sim: LiveSim,
    scenario: ScenarioName,
    knob_root: PathBuf,
    /// The last step left the simulation behind the wall clock times the speed: step again at
    /// once (after letting the runtime see signals and timers).
    behind: bool,
    /// When the next step is due. Kept here, not in the future: the run loop drops and
    /// re-creates `next_batch` at every other wakeup (a scrape, a key), and a sleep started
    /// afresh each time would never end under frequent wakeups.
    next_step: Option<tokio::time::Instant>,
}

impl SimSource {
    /// Start `scenario` with its knobs under `knob_root` (default: a per-user directory).
    pub(crate) fn start(
        scenario: &str,
        seed: u64,
        knob_root: Option<PathBuf>,
        speed: f64,
        accesses: bool,
    ) -> Result<SimSource> {
        let scenario: ScenarioName = scenario.parse()?;
        let knob_root = match knob_root {
            Some(root) => root,
            None => default_knob_root()?,
        };
        let sim = LiveSim::new_traced(scenario, &knob_root, seed, accesses)
            .with_context(|| format!("starting the {scenario} simulator"))?
            .with_speed(speed);
        Ok(SimSource {
            sim,
            scenario,
            knob_root,
            behind: false,
            next_step: None,
        })
    }

    async fn fill(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        if self.behind {
            // Yields until the runtime has polled its drivers: SIGTERM and --duration are
            // seen between steps however fast the speed.
            tokio::task::yield_now().await;
        } else {
            let due = *self
                .next_step
                .get_or_insert_with(|| tokio::time::Instant::now() + POLL_EVERY);
            tokio::time::sleep_until(due).await;
        }
        self.next_step = None;
        self.behind = self.sim.step(std::time::Instant::now(), out)?;
        Ok(true)
    }
}

/// `$XDG_RUNTIME_DIR/nodescope-sim`, else `/tmp/nodescope-sim-<uid>`: made private to us.
fn default_knob_root() -> Result<PathBuf> {
    let root = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("nodescope-sim"),
        // A phone has no /tmp: its scratch place is /data/local/tmp.
        None => crate::system::android::scratch_dir(Path::new("/"))
            .join(format!("nodescope-sim-{}", crate::system::euid())),
    };
    crate::system::private_dir(&root, "the simulator's knob directory")?;
    Ok(root)
}

impl Source for SimSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKind::Sim,
            kernel: "simulator".into(),
            devices: vec![sim::live::DEV_NAME.into()],
            detail: format!(
                "scenario {}{} (knobs in {})",
                self.scenario,
                self.sim
                    .android_image()
                    .map(|image| format!(" on the {} image", image.name()))
                    .unwrap_or_default(),
                self.knob_root.display()
            ),
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(self.fill(out))
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
        (self.scenario == ScenarioName::AndroidLaunch).then(sim::scenario::android::packages_list)
    }

    fn node_image(&self) -> Option<crate::model::NodeImage> {
        let name = match self.sim.android_image() {
            Some(image) => format!("simulator, {} image", image.name()),
            None => format!("simulator, {}", self.scenario),
        };
        Some(crate::model::NodeImage {
            nodes: self.sim.nodes().clone(),
            name,
            // One simulated disk: every node read is its.
            dev: None,
        })
    }

    fn knob_root(&self) -> Option<PathBuf> {
        Some(self.knob_root.clone())
    }
}
