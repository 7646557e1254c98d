//! The feedback controller for `node_compress_threshold` and `node_compress_interval`, the
//! knobs of the F2FS compressed node cache RFC. docs/CONTROLLER.md explains the law and the
//! safety rules.
//!
//! Layers, each usable on its own:
//! * [`law`]: the pure control law, `step(state, signals, config) -> (state, decision)`.
//! * [`signals`]: the per-decision [`Signals`], the [`SignalSource`] trait, and
//!   [`signals::TrailingRates`], which turns cumulative counts into rates for every source.
//!   [`ProcSignalSource`] (`nodescope tune`) reads PSI and the optional counters file; the
//!   benchmark (`nodescope-bench controller`) implements the trait on the simulator's windows;
//!   `nodescope top --tune` builds its signals from the model's windows.
//! * [`psi`]: memory pressure from PSI's `total` stall counter as well as its `avg10`, and PSI
//!   triggers to sleep on until memory turns tight.
//! * [`knobs`]: where the knobs live ([`KnobStore`]: sysfs files or memory); the knobs
//!   themselves, their ranges and defaults are `tracer_common::knobs`.
//! * [`tuner`]: one device: external-change detection, write-rate limit, write + read-back,
//!   dry-run, restore.
//! * [`session`]: every device of a run plus the [`audit`] log, stepped by the caller's clock.
//! * [`safety`]: restore on drop, panic and stop signals.
//! * [`claim`]: one controller per device (a lock), and the originals in a state file that
//!   outlives a killed controller; [`oom`]: the controller's own OOM score.
//!
//! The benchmark (the law against static settings in the simulator, `cargo xtask bench
//! controller`) lives in the `nodescope-bench` crate, so this library never depends on the
//! simulator.
//!
//! # In virtual time
//!
//! The caller owns the clock and the signals; the device can live in memory:
//!
//! ```
//! use std::time::Duration;
//! use controller::{
//!     knobs::MemoryKnobs,
//!     law::Config,
//!     signals::Signals,
//!     tuner::{DeviceTuner, TunerOptions},
//! };
//! use tracer_common::knobs::Knobs;
//!
//! let device = MemoryKnobs::new("sim0", Knobs { threshold: 25, interval_ms: 1000 });
//! let opts = TunerOptions { dry_run: false, min_write_gap: Duration::ZERO };
//! let (mut tuner, _start) = DeviceTuner::start("sim0", device.clone(), opts, Duration::ZERO)?;
//! let cfg = Config::default();
//! for period in 1..=3u32 {
//!     let now = Duration::from_secs(5) * period; // virtual time
//!     // The simulator measures these over the decision period that ends at `now`.
//!     let signals = Signals { memory_pressure: Some(20.0), ..Signals::default() };
//!     let record = tuner.tick(&signals, now, &cfg).expect("still tuning");
//!     // The simulator's worker now runs with device.get(); `record` is the audit line.
//!     assert_eq!(record.written, Some(device.get()));
//! }
//! assert_eq!(device.get(), Knobs { threshold: 25, interval_ms: 100 });
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! For several devices and a [`SignalSource`], [`Session`] does the same with `tick(&mut
//! source, now)` (and `poll` between decisions); the benchmark runs it that way, on
//! [`MemoryKnobs`] with an [`AuditLog::in_memory`]. The bare law is [`law::step`].
pub mod audit;
pub mod claim;
pub mod knobs;
pub mod law;
pub mod oom;
pub mod psi;
pub mod safety;
pub mod session;
pub mod signals;
pub mod tuner;

pub use audit::{AuditLog, AuditRecord};
pub use knobs::{KnobStore, MemoryKnobs, SysfsKnobs};
pub use law::{step, Config, Decision, State};
pub use safety::{RestoreGuard, StopSignals};
pub use session::Session;
pub use signals::{ProcSignalSource, SignalSource, Signals};
pub use tuner::{DeviceTuner, TunerOptions};
