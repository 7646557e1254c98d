//! What the controller is compared with: the static settings tried, and the workloads.
use sim::scenario::controlled::Workload;
use tracer_common::knobs::{Knobs, DEFAULT_INTERVAL_MS};

/// The static settings tried: compression off once (the interval does not matter then), and
/// each threshold with each interval; the default setting always.
pub fn grid(thresholds: &[u32], intervals: &[u32]) -> Vec<Knobs> {
    let mut settings = vec![Knobs {
        threshold: 0,
        interval_ms: DEFAULT_INTERVAL_MS,
    }];
    for &threshold in thresholds.iter().filter(|&&t| t > 0) {
        for &interval_ms in intervals {
            settings.push(Knobs {
                threshold,
                interval_ms,
            });
        }
    }
    if !settings.contains(&Knobs::DEFAULT) {
        settings.push(Knobs::DEFAULT);
    }
    settings
}

/// The full benchmark grid: 1 + 4 x 8 settings.
pub fn full_grid() -> Vec<Knobs> {
    grid(
        &[6, 12, 18, 25],
        &[100, 200, 500, 1000, 2000, 5000, 10_000, 30_000],
    )
}

/// The benchmark's workloads: the VM run at three budgets, the phone trial, `mixed`.
pub fn workloads() -> Vec<Workload> {
    let mut all: Vec<Workload> = [2u64, 3, 6]
        .iter()
        .map(|mib| Workload::VmReplay {
            budget_bytes: mib << 20,
        })
        .collect();
    all.push(Workload::AndroidLaunch);
    all.push(Workload::Mixed);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_off_once_and_always_the_default() {
        let settings = grid(&[0, 12], &[100, 30_000]);
        let pairs: Vec<(u32, u32)> = settings
            .iter()
            .map(|s| (s.threshold, s.interval_ms))
            .collect();
        assert_eq!(pairs, [(0, 1000), (12, 100), (12, 30_000), (25, 1000)]);
        assert_eq!(full_grid().len(), 1 + 4 * 8);
    }
}
