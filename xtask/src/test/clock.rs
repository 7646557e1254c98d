//! The test run's phases, timed.
/// How long each phase of the run took, printed together near the end so that a CI log's
/// tail says where the time went.
pub(super) struct PhaseClock {
    started: std::time::Instant,
    lap_started: std::time::Instant,
    laps: Vec<(&'static str, std::time::Duration)>,
}

impl PhaseClock {
    pub(super) fn start() -> PhaseClock {
        let now = std::time::Instant::now();
        PhaseClock {
            started: now,
            lap_started: now,
            laps: Vec::new(),
        }
    }

    pub(super) fn lap(&mut self, phase: &'static str) {
        let now = std::time::Instant::now();
        self.laps.push((phase, now - self.lap_started));
        self.lap_started = now;
    }

    pub(super) fn print(&self) {
        let laps: Vec<String> = self
            .laps
            .iter()
            .map(|(phase, took)| format!("{phase} {} s", took.as_secs()))
            .collect();
        println!(
            "time: {} s in all: {}",
            self.started.elapsed().as_secs(),
            laps.join(", ")
        );
    }
}
