//! The one cost every run is scored by, in node reads (docs/CONTROLLER.md explains the
//! weights).
use serde::Serialize;
use sim::{costs, scenario::controlled::WorkloadRun};

/// The weights of the cost, in node reads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Weights {
    /// One node read from disk (the unit).
    pub node_read: f64,
    /// One byte of attributed memory held for one second.
    pub memory_byte_second: f64,
    /// One conversion (compressing one block).
    pub conversion: f64,
}

/// How long holding 4 KiB costs as much as one node read (a five-minute rule, phone-sized).
pub const MEMORY_BREAK_EVEN_S: f64 = 60.0;

impl Default for Weights {
    fn default() -> Self {
        Weights {
            node_read: 1.0,
            memory_byte_second: 1.0 / (4096.0 * MEMORY_BREAK_EVEN_S),
            // The simulator's own time costs: compressing a block against reading one.
            conversion: costs::COMPRESS_NS as f64 / costs::NODE_READ_NS as f64,
        }
    }
}

impl Weights {
    /// How long a compressed copy must stay compressed to pay for its conversion: the memory
    /// it saves (a raw block against a 256-byte slot) times this equals one conversion.
    pub fn break_even_lifetime_s(&self) -> f64 {
        let saved_bytes = 4096.0 - 256.0;
        self.conversion / (self.memory_byte_second * saved_bytes)
    }
}

/// One run's cost and its parts, all in node reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    pub total: f64,
    pub node_reads: f64,
    pub memory: f64,
    pub conversions: f64,
}

impl Cost {
    pub fn of(run: &WorkloadRun, weights: &Weights) -> Cost {
        let node_reads = run.whole.node_reads as f64 * weights.node_read;
        let memory = run.memory_byte_seconds * weights.memory_byte_second;
        let conversions = run.whole.events().conversions as f64 * weights.conversion;
        Cost {
            total: node_reads + memory + conversions,
            node_reads,
            memory,
            conversions,
        }
    }
}

/// A run's cost phase by phase (memory: the samples taken inside the phase).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseCost {
    pub phase: String,
    pub cost: Cost,
}

impl PhaseCost {
    pub fn of(run: &WorkloadRun, weights: &Weights) -> Vec<PhaseCost> {
        let mut start_ns = 0;
        let mut phases = Vec::new();
        for phase in &run.phases {
            let end_ns = phase.end.ts_ns;
            let byte_seconds: f64 = run
                .memory
                .iter()
                .filter(|s| s.ts_ns > start_ns && s.ts_ns <= end_ns)
                .map(|s| s.attributed_bytes as f64)
                .sum();
            let node_reads = phase.totals.node_reads as f64 * weights.node_read;
            let memory = byte_seconds * weights.memory_byte_second;
            let conversions = phase.totals.events().conversions as f64 * weights.conversion;
            phases.push(PhaseCost {
                phase: phase.name.clone(),
                cost: Cost {
                    total: node_reads + memory + conversions,
                    node_reads,
                    memory,
                    conversions,
                },
            });
            start_ns = end_ns;
        }
        phases
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::knobs::EAGER_FLOOR_NS;

    use super::*;

    #[test]
    fn weights_come_from_the_simulator_costs_and_the_break_even() {
        let weights = Weights::default();
        assert_eq!(weights.node_read, 1.0);
        assert_eq!(weights.conversion, 4_000.0 / 90_000.0);
        // 4 KiB held for 60 s costs one node read.
        assert!((weights.memory_byte_second * 4096.0 * 60.0 - 1.0).abs() < 1e-12);
        // (4/90) / ((4096 - 256) / (4096 x 60)) = 2.844... s.
        assert!((weights.break_even_lifetime_s() - 2.844_444).abs() < 1e-5);
        // The eager floor of the live model and simulator is the same price of memory, to
        // the millisecond.
        let break_even_ms = (weights.break_even_lifetime_s() * 1e3).floor() as u64;
        assert_eq!(break_even_ms * 1_000_000, EAGER_FLOOR_NS);
    }
}
