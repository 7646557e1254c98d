//! What the law sees at each decision ([`Signals`]) and where it comes from ([`SignalSource`]).
//!
//! [`ProcSignalSource`] (what `nodescope tune` uses) reads memory pressure from
//! `/proc/pressure/memory` and, when a device directory has one, cumulative counters and gauges
//! from its `nodescope_stats` file (the live simulator writes one in its knob directory). The
//! live view builds its signals from the model's windows and the benchmark (`nodescope-bench
//! controller`) from the simulator's. Every source turns cumulative [`Counts`] into rates the
//! same way, over a trailing period: [`TrailingRates`].
use std::{
    collections::{HashMap, VecDeque},
    io::ErrorKind,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result};
use tracer_common::text::quote_capped;

use crate::psi::{self, PsiFile};
use serde::{Deserialize, Serialize};

/// One decision of one device: rates per second over the trailing period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// Length of the trailing period the rates were measured over.
    pub trailing_s: f64,
    /// Node blocks read from disk (FS_NODE_READ_IO): the cost compression is there to avoid.
    pub node_reads_per_s: f64,
    /// Compressed entries restored to raw: compressed copies being used.
    pub restores_per_s: f64,
    /// Raw entries converted to compressed: the CPU the worker spends.
    pub conversions_per_s: f64,
    /// Conversions restored soon after they were made (too eager: compressed while still hot):
    /// within `tracer_common::knobs::eager_span_ns` in the model and the benchmark.
    pub eager_restores_per_s: f64,
    /// Compressed entries reclaimed without ever being restored (the conversion was wasted).
    pub wasted_per_s: f64,
    /// Memory pressure, percent: PSI `some` on a real system (the larger of `avg10` and the
    /// stall share over the trailing period, [`crate::psi::PsiMeter`]), the simulator's own
    /// pressure in the simulator. `None` when unknown.
    pub memory_pressure: Option<f64>,
    /// Node-cache memory attributed to this device (entries + raw buffers + slab slots).
    pub attributed_bytes: Option<u64>,
    /// The memory the node cache should stay under, if the user set one.
    pub budget_bytes: Option<u64>,
}

impl Signals {
    /// The same signals with every rate finite and non-negative and the pressure in 0..=100,
    /// so that a broken source cannot steer the law with NaN or negative numbers.
    pub fn sanitized(&self) -> Signals {
        let rate = |value: f64| {
            if value.is_finite() && value > 0.0 {
                value
            } else {
                0.0
            }
        };
        Signals {
            trailing_s: rate(self.trailing_s),
            node_reads_per_s: rate(self.node_reads_per_s),
            restores_per_s: rate(self.restores_per_s),
            conversions_per_s: rate(self.conversions_per_s),
            eager_restores_per_s: rate(self.eager_restores_per_s),
            wasted_per_s: rate(self.wasted_per_s),
            memory_pressure: self
                .memory_pressure
                .filter(|p| p.is_finite())
                .map(|p| p.clamp(0.0, 100.0)),
            attributed_bytes: self.attributed_bytes,
            budget_bytes: self.budget_bytes.filter(|&b| b > 0),
        }
    }
}

/// Produces the signals of one device for the trailing period that ends at `now`.
///
/// `now` is the time since the tuner started: real time in `nodescope tune`, virtual time in
/// the simulator. It is called once per device per decision period, in time order.
pub trait SignalSource {
    fn sample(&mut self, device: &str, now: Duration) -> Result<Signals>;

    /// The gauges alone (memory pressure, attributed bytes, budget), for a poll between two
    /// decisions ([`crate::law::urgent`]); no rates, and no effect on the next decision's rates.
    /// The default has none, so a source without cheap gauges is never polled into action.
    fn gauges(&mut self, _device: &str, _now: Duration) -> Result<Signals> {
        Ok(Signals::default())
    }
}

/// Rates are measured over this trailing period by default, so that a workload whose period
/// does not divide the decision period cannot make every other decision look clean.
pub const DEFAULT_RATE_PERIOD: Duration = Duration::from_secs(5);

/// Cumulative event counts of one device, the numerators of the rates in [`Signals`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub node_reads: u64,
    pub restores: u64,
    pub conversions: u64,
    pub eager_restores: u64,
    pub wasted: u64,
}

/// Readings of [`Counts`] in time order and the rates over a trailing period.
#[derive(Clone, Debug)]
pub struct TrailingRates {
    period_ns: u64,
    /// (time, counts) of the recent readings, oldest first.
    history: VecDeque<(u64, Counts)>,
}

impl TrailingRates {
    /// No readings yet: the first [`TrailingRates::record`] gives no rates. A period of zero
    /// measures from the previous reading only.
    pub fn new(period: Duration) -> Self {
        TrailingRates {
            period_ns: u64::try_from(period.as_nanos()).unwrap_or(u64::MAX),
            history: VecDeque::new(),
        }
    }

    /// Record the reading `counts` at `time_ns` and set the trailing period and the rates of `signals`
    /// from the oldest reading at most the period back (the previous one at least); leave
    /// them as they are when there is none or no time has passed. A counter that went
    /// backwards was reset (simulator restart, remount): its rate is 0, not a huge number.
    pub fn record(&mut self, time_ns: u64, counts: Counts, signals: &mut Signals) {
        let oldest = time_ns.saturating_sub(self.period_ns);
        while self.history.len() > 1 && self.history[1].0 <= oldest {
            self.history.pop_front();
        }
        if let Some(&(then, before)) = self.history.front() {
            let seconds = time_ns.saturating_sub(then) as f64 / 1e9;
            if seconds > 0.0 {
                let rate = |old: u64, new: u64| new.saturating_sub(old) as f64 / seconds;
                signals.trailing_s = seconds;
                signals.node_reads_per_s = rate(before.node_reads, counts.node_reads);
                signals.restores_per_s = rate(before.restores, counts.restores);
                signals.conversions_per_s = rate(before.conversions, counts.conversions);
                signals.eager_restores_per_s = rate(before.eager_restores, counts.eager_restores);
                signals.wasted_per_s = rate(before.wasted, counts.wasted);
            }
        }
        self.history.push_back((time_ns, counts));
    }
}

/// The name of the optional counters file in a device directory.
pub const STATS_FILE: &str = "nodescope_stats";

/// Cumulative counters as found in a `nodescope_stats` file: one `key value` per line.
///
/// ```text
/// node_reads 16642
/// restores 9175
/// conversions 70441
/// eager_restores 120
/// wasted 800
/// attributed_bytes 6008152      (a gauge, not cumulative)
/// memory_pressure 12.5          (optional, a gauge: replaces PSI, for the simulator)
/// ```
/// Unknown keys are ignored, so the file can grow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StatsFileCounters {
    pub counts: Counts,
    pub attributed_bytes: Option<u64>,
    pub memory_pressure: Option<f64>,
}

impl StatsFileCounters {
    /// `None` when the text holds no known key: an empty read of a file being rewritten is
    /// not a reset of every counter to zero.
    pub fn parse(origin: &str, text: &str) -> Result<Option<StatsFileCounters>> {
        let mut counters = StatsFileCounters::default();
        let mut known_keys = 0;
        for (index, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            let (Some(key), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let bad = || {
                let value = quote_capped(value.as_bytes());
                format!("{origin}:{}: {key} has value {value}", index + 1)
            };
            known_keys += 1;
            match key {
                "node_reads" => counters.counts.node_reads = value.parse().with_context(bad)?,
                "restores" => counters.counts.restores = value.parse().with_context(bad)?,
                "conversions" => counters.counts.conversions = value.parse().with_context(bad)?,
                "eager_restores" => {
                    counters.counts.eager_restores = value.parse().with_context(bad)?
                }
                "wasted" => counters.counts.wasted = value.parse().with_context(bad)?,
                "attributed_bytes" => {
                    counters.attributed_bytes = Some(value.parse().with_context(bad)?)
                }
                "memory_pressure" => {
                    counters.memory_pressure = Some(value.parse().with_context(bad)?)
                }
                _ => known_keys -= 1,
            }
        }
        Ok((known_keys > 0).then_some(counters))
    }
}

/// Signals from the running system: PSI plus the optional per-device counters file.
pub struct ProcSignalSource {
    sysfs_root: PathBuf,
    budget_bytes: Option<u64>,
    /// Each device's counter readings: rates from one sample to the next.
    rates: HashMap<String, TrailingRates>,
    psi: PsiFile,
    /// The span being sampled: (its start, its end), both as `now` gave them.
    span: (Duration, Duration),
}

impl ProcSignalSource {
    pub const DEFAULT_PSI_PATH: &'static str = "/proc/pressure/memory";

    pub fn new(psi_path: &Path, sysfs_root: &Path, budget_bytes: Option<u64>) -> Self {
        ProcSignalSource {
            sysfs_root: sysfs_root.to_path_buf(),
            budget_bytes,
            rates: HashMap::new(),
            psi: PsiFile::new(psi_path),
            span: (Duration::ZERO, Duration::ZERO),
        }
    }

    fn read_counters(&self, device: &str) -> Result<Option<StatsFileCounters>> {
        let path = self.sysfs_root.join(device).join(STATS_FILE);
        // Never through a symlink, and never more than a stats file can hold.
        match tracer_common::files::read_no_follow(&path) {
            Ok(bytes) => StatsFileCounters::parse(
                &path.display().to_string(),
                &String::from_utf8_lossy(&bytes),
            ),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
        }
    }
}

impl ProcSignalSource {
    /// A PSI trigger on the PSI file fired at `now` for `share` percent: the gauges read at
    /// `now` report at least that much pressure ([`crate::psi::PsiMeter::at_least`]).
    pub fn psi_trigger_fired(&mut self, share: f64, now: Duration) {
        self.psi.at_least(share, now);
    }

    /// Whether `device` has a counters file (its own gauges, which no PSI trigger watches).
    pub fn has_counters_file(&self, device: &str) -> bool {
        self.sysfs_root.join(device).join(STATS_FILE).exists()
    }

    /// The counters file (if any) and the gauges: its pressure, else PSI over `span`; its
    /// attributed bytes; the budget.
    fn read_gauges(
        &mut self,
        device: &str,
        now: Duration,
        span: Duration,
    ) -> Result<(Option<StatsFileCounters>, Signals)> {
        let counters = self.read_counters(device)?;
        let pressure = match counters.and_then(|c| c.memory_pressure) {
            Some(simulated) => Some(simulated),
            None => self.psi.read(now, span)?,
        };
        let gauges = Signals {
            memory_pressure: pressure,
            attributed_bytes: counters.and_then(|c| c.attributed_bytes),
            budget_bytes: self.budget_bytes,
            ..Signals::default()
        };
        Ok((counters, gauges))
    }
}

impl SignalSource for ProcSignalSource {
    fn sample(&mut self, device: &str, now: Duration) -> Result<Signals> {
        // Every device of one decision is sampled with the same `now`: one span for all.
        if now != self.span.1 {
            self.span = (self.span.1, now);
        }
        let span = self.span.1.saturating_sub(self.span.0);
        let (counters, mut signals) = self.read_gauges(device, now, span)?;
        if let Some(current) = counters {
            let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
            self.rates
                .entry(device.to_string())
                .or_insert_with(|| TrailingRates::new(Duration::ZERO))
                .record(now_ns, current.counts, &mut signals);
        }
        Ok(signals)
    }

    fn gauges(&mut self, device: &str, now: Duration) -> Result<Signals> {
        Ok(self.read_gauges(device, now, psi::RECENT)?.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_known_keys_and_name_the_line_of_a_bad_value() {
        let text = "node_reads 10\nrestores 4\nconversions 8\neager_restores 1\nwasted 2\n\
                    attributed_bytes 4096\nmemory_pressure 7.5\nfuture_key 3\n";
        let counters = StatsFileCounters::parse("stats", text).unwrap().unwrap();
        assert_eq!(StatsFileCounters::parse("stats", "").unwrap(), None);
        assert_eq!(
            StatsFileCounters::parse("stats", "other 1\n").unwrap(),
            None
        );
        assert_eq!(counters.counts.node_reads, 10);
        assert_eq!(counters.counts.wasted, 2);
        assert_eq!(counters.attributed_bytes, Some(4096));
        assert_eq!(counters.memory_pressure, Some(7.5));
        let err = StatsFileCounters::parse("stats", "node_reads 1\nrestores x\n").unwrap_err();
        assert_eq!(err.to_string(), "stats:2: restores has value \"x\"");
    }

    #[test]
    fn rates_come_from_counter_deltas_and_a_reset_counts_as_zero() {
        let before = Counts {
            node_reads: 100,
            restores: 50,
            conversions: 10,
            ..Counts::default()
        };
        let after = Counts {
            node_reads: 300,
            restores: 20,
            conversions: 30,
            ..Counts::default()
        };
        let mut rates = TrailingRates::new(Duration::ZERO);
        let mut signals = Signals::default();
        rates.record(1_000_000_000, before, &mut signals);
        assert_eq!(signals, Signals::default());
        rates.record(3_000_000_000, after, &mut signals);
        assert_eq!(signals.trailing_s, 2.0);
        assert_eq!(signals.node_reads_per_s, 100.0);
        assert_eq!(signals.restores_per_s, 0.0);
        assert_eq!(signals.conversions_per_s, 10.0);
    }

    #[test]
    fn rates_are_over_the_trailing_period_from_the_oldest_reading_in_it() {
        const SECOND: u64 = 1_000_000_000;
        let mut rates = TrailingRates::new(Duration::from_secs(2));
        let reads = |node_reads| Counts {
            node_reads,
            ..Counts::default()
        };
        let mut signals = Signals::default();
        rates.record(0, reads(0), &mut signals);
        rates.record(SECOND, reads(100), &mut signals);
        assert_eq!((signals.trailing_s, signals.node_reads_per_s), (1.0, 100.0));
        rates.record(2 * SECOND, reads(300), &mut signals);
        assert_eq!((signals.trailing_s, signals.node_reads_per_s), (2.0, 150.0));
        // The reading at 1 s is the oldest within 2 s of 3 s.
        rates.record(3 * SECOND, reads(400), &mut signals);
        assert_eq!((signals.trailing_s, signals.node_reads_per_s), (2.0, 150.0));
    }

    #[test]
    fn sanitized_signals_have_no_nan_or_negative_rates() {
        let signals = Signals {
            node_reads_per_s: f64::NAN,
            conversions_per_s: -3.0,
            memory_pressure: Some(250.0),
            budget_bytes: Some(0),
            ..Signals::default()
        }
        .sanitized();
        assert_eq!(signals.node_reads_per_s, 0.0);
        assert_eq!(signals.conversions_per_s, 0.0);
        assert_eq!(signals.memory_pressure, Some(100.0));
        assert_eq!(signals.budget_bytes, None);
    }
}
