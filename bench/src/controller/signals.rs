//! The controller's [`SignalSource`] in the simulator: each [`Window`] of a controlled run,
//! as `nodescope tune` would see the device.
use std::time::Duration;

use anyhow::{Context as _, Result};
use controller::signals::{Counts, SignalSource, Signals, TrailingRates};
use sim::scenario::controlled::Window;

/// What one [`Window`] tells the controller.
#[derive(Clone, Copy, Debug)]
struct Reading {
    now_ns: u64,
    counts: Counts,
    memory_pressure: f64,
    attributed_bytes: u64,
}

impl Reading {
    fn of(window: &Window) -> Reading {
        let snapshot = window.snapshot;
        Reading {
            now_ns: window.now_ns,
            counts: Counts {
                node_reads: snapshot.node_reads,
                restores: snapshot.stats.events.restores,
                conversions: snapshot.stats.events.conversions,
                eager_restores: window.feedback.eager_restores,
                // Reclaims from the compressed queues: conversions never restored.
                wasted: snapshot.stats.events.reclaims.compressed(),
            },
            memory_pressure: window.memory_pressure,
            attributed_bytes: snapshot.memory.attributed_bytes,
        }
    }
}

/// Signals from successive [`Window`]s of a controlled run: the gauges and the pressure of
/// the window just closed, rates over a trailing period ([`TrailingRates`]).
pub struct SimSignals {
    budget_bytes: Option<u64>,
    rates: TrailingRates,
    /// The window [`SimSignals::observe`] was given last.
    current: Option<Reading>,
}

impl SimSignals {
    /// The rates of the first window are since the start of the run (time 0, no events).
    pub fn new(budget_bytes: Option<u64>, rate_period: Duration) -> Self {
        let mut rates = TrailingRates::new(rate_period);
        rates.record(0, Counts::default(), &mut Signals::default());
        SimSignals {
            budget_bytes,
            rates,
            current: None,
        }
    }

    /// The window the next [`SignalSource::sample`] or [`SignalSource::gauges`] reports.
    pub fn observe(&mut self, window: &Window) {
        self.current = Some(Reading::of(window));
    }

    fn current(&self) -> Result<Reading> {
        self.current
            .context("the simulator has not closed a window yet")
    }

    fn gauges_of(&self, reading: &Reading) -> Signals {
        Signals {
            memory_pressure: Some(reading.memory_pressure),
            attributed_bytes: Some(reading.attributed_bytes),
            budget_bytes: self.budget_bytes,
            ..Signals::default()
        }
    }
}

impl SignalSource for SimSignals {
    /// The signals of the window observed last (one device: `_device` is the simulator's).
    fn sample(&mut self, _device: &str, _now: Duration) -> Result<Signals> {
        let reading = self.current()?;
        let mut signals = self.gauges_of(&reading);
        self.rates
            .record(reading.now_ns, reading.counts, &mut signals);
        Ok(signals)
    }

    /// The gauges of the window observed last: pressure over the trailing window, memory
    /// against the budget; no rates (those are measured over whole windows).
    fn gauges(&mut self, _device: &str, _now: Duration) -> Result<Signals> {
        Ok(self.gauges_of(&self.current()?))
    }
}

#[cfg(test)]
mod tests {
    use sim::{
        engine::{Pressure, SlotCounts, Snapshot},
        scenario::{controlled::WindowKind, feedback::Feedback},
    };
    use tracer_common::{activity::PerQueue, knobs::Knobs};

    use super::*;

    fn snapshot(ts_ns: u64, node_reads: u64, restores: u64, conversions: u64) -> Snapshot {
        let mut stats = sim::cache::CacheStats::default();
        stats.events.restores = restores;
        stats.events.conversions = conversions;
        stats.events.reclaims = PerQueue {
            raw: 7,
            b256: 1,
            b512: 2,
            b1024: 3,
        };
        Snapshot {
            ts_ns,
            pressure: Pressure::None,
            memory: sim::accounting::Memory::new(10, 20, 20 * 256),
            queue_entries: [10, 20, 0, 0],
            slots: SlotCounts::default(),
            knobs: Knobs::DEFAULT,
            shrink_count: 12,
            stats,
            node_reads,
            readahead_reads: 0,
            last_pass: Default::default(),
        }
    }

    /// The signals of the decision window that ends with `snapshot`.
    fn sample(
        source: &mut SimSignals,
        snapshot: &Snapshot,
        eager_restores: u64,
        pressure: f64,
    ) -> Signals {
        source.observe(&Window {
            now_ns: snapshot.ts_ns,
            window_ns: 1_000_000_000,
            snapshot,
            feedback: Feedback {
                eager_restores,
                ..Feedback::default()
            },
            memory_pressure: pressure,
            kind: WindowKind::Decision,
        });
        let now = Duration::from_nanos(snapshot.ts_ns);
        source.sample("sim", now).unwrap()
    }

    #[test]
    fn sim_signals_are_rates_over_the_trailing_period_and_current_gauges() {
        let second = 1_000_000_000;
        let mut source = SimSignals::new(Some(4 << 20), Duration::from_secs(2));
        assert!(source.gauges("sim", Duration::ZERO).is_err());
        // Window 1 (0..1 s): rates since the start.
        let first = snapshot(second, 100, 40, 80);
        let signals = sample(&mut source, &first, 8, 3.5);
        assert_eq!(signals.trailing_s, 1.0);
        assert_eq!(signals.node_reads_per_s, 100.0);
        assert_eq!(signals.restores_per_s, 40.0);
        assert_eq!(signals.conversions_per_s, 80.0);
        assert_eq!(signals.eager_restores_per_s, 8.0);
        // Reclaims from the three compressed queues: 1 + 2 + 3.
        assert_eq!(signals.wasted_per_s, 6.0);
        assert_eq!(signals.memory_pressure, Some(3.5));
        // 30 entries of 88 B, 10 raw blocks, 20 slots of 256 B, the fixed 19,960 B.
        let attributed = 30 * 88 + 10 * 4096 + 20 * 256 + 19_960;
        assert_eq!(signals.attributed_bytes, Some(attributed));
        assert_eq!(signals.budget_bytes, Some(4 << 20));
        // Window 2 (1..2 s): still since the start (2 s back).
        let second_window = snapshot(2 * second, 300, 40, 120);
        let signals = sample(&mut source, &second_window, 8, 0.0);
        assert_eq!(signals.trailing_s, 2.0);
        assert_eq!(signals.node_reads_per_s, 150.0);
        assert_eq!(signals.conversions_per_s, 60.0);
        assert_eq!(signals.eager_restores_per_s, 4.0);
        assert_eq!(signals.memory_pressure, Some(0.0));
        // Window 3 (2..3 s): over 1..3 s, the reading at 1 s is the oldest kept.
        let third = snapshot(3 * second, 400, 100, 120);
        let signals = sample(&mut source, &third, 20, 0.0);
        assert_eq!(signals.trailing_s, 2.0);
        assert_eq!(signals.node_reads_per_s, 150.0);
        assert_eq!(signals.restores_per_s, 30.0);
        assert_eq!(signals.conversions_per_s, 20.0);
        assert_eq!(signals.eager_restores_per_s, 6.0);
        assert_eq!(signals.wasted_per_s, 0.0);
        // A poll: the gauges alone, the rates untouched.
        let gauges = source.gauges("sim", Duration::ZERO).unwrap();
        assert_eq!(gauges.trailing_s, 0.0);
        assert_eq!(gauges.attributed_bytes, Some(attributed));
    }
}
