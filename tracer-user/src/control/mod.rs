//! The model joined to the controller: `nodescope top --tune`.
//!
//! The model's closed windows are a [`SignalSource`] ([`WindowSignals`], rates from
//! [`ModelSignals`]), so the live view runs the very [`Session`] that `nodescope tune` runs:
//! validated writes through [`SysfsKnobs`], read-back, rate limit, external changes respected,
//! the audit log, and the original values put back when [`Tuning`] is dropped (or on a panic,
//! through the restore guard). [`Tuning::step`] is called at each refresh with the model; it
//! decides once per newly closed window and polls the gauges in between.
//!
//! Eager restores come from the model (restores within max(2 x interval, the eager floor) of
//! their conversion, `model::eager`). Memory pressure is the source's own when it has one (the
//! simulator's, over the last second), else PSI `some` (`controller::psi`: the larger of
//! `avg10` and the stall share from the `total` counter, over the window just closed, or over
//! the last second for polls), and the budget is
//! the one the model's settings carry (the source's, e.g. the simulator's while it holds one).
//! Between windows, refreshes poll the gauges for urgent steps.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use controller::{
    audit::{AuditLog, AuditRecord},
    claim::{self, default_state_dir, StateDir},
    knobs::SysfsKnobs,
    law::Config,
    psi::{self, PsiFile},
    safety::RestoreGuard,
    session::Session,
    signals::{
        Counts, ProcSignalSource, SignalSource, Signals, TrailingRates, DEFAULT_RATE_PERIOD,
    },
    tuner::{Status, TunerOptions},
};

use crate::model::{Model, WindowReport};

/// Turns the model's closed windows into [`Signals`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModelSignals {
    /// Rates are measured over the closed windows of this trailing period (at least one
    /// window), so a workload whose period does not divide the window cannot make every other
    /// window look clean: the controller's own [`DEFAULT_RATE_PERIOD`] unless a test says.
    pub rate_period: Duration,
}

impl Default for ModelSignals {
    fn default() -> Self {
        ModelSignals {
            rate_period: DEFAULT_RATE_PERIOD,
        }
    }
}

impl ModelSignals {
    /// The signals at the end of window `upto`: rates over it and the windows before it (at most
    /// `rate_windows` in all), its cache gauges, and the given pressure and budget. `None` when
    /// `history` does not hold window `upto`.
    pub(crate) fn signals(
        &self,
        history: &VecDeque<WindowReport>,
        upto: u64,
        memory_pressure: Option<f64>,
        budget_bytes: Option<u64>,
    ) -> Option<Signals> {
        let end = history.iter().position(|w| w.index == upto)?;
        let window = history.get(end)?;
        let window_ns = window.end_ns.saturating_sub(window.start_ns).max(1);
        let period_ns = u64::try_from(self.rate_period.as_nanos()).unwrap_or(u64::MAX);
        let windows = usize::try_from(period_ns.div_ceil(window_ns)).unwrap_or(usize::MAX);
        let first = (end + 1).saturating_sub(windows.max(1));
        let (oldest, newest) = (history.get(first)?, history.get(end)?);
        let mut signals = Signals {
            memory_pressure,
            attributed_bytes: Some(newest.cache.attributed_bytes),
            budget_bytes,
            ..Signals::default()
        };
        // Two readings of the cumulative counts, at the start of the oldest window and the end
        // of the newest: the controller's one rate computation does the rest.
        let mut rates = TrailingRates::new(Duration::MAX);
        rates.record(oldest.start_ns, counts_before(oldest), &mut signals);
        rates.record(newest.end_ns, counts_after(newest), &mut signals);
        Some(signals)
    }
}

/// The law's counts up to the end of `window`. A compressed entry reclaimed was never
/// restored since its conversion: wasted.
fn counts_after(window: &WindowReport) -> Counts {
    Counts {
        node_reads: window.totals.node_reads(),
        restores: window.totals.restores,
        conversions: window.totals.conversions,
        eager_restores: window.eager_restores_total,
        wasted: window.totals.reclaims.compressed(),
    }
}

/// The law's counts up to the start of `window`.
fn counts_before(window: &WindowReport) -> Counts {
    let after = counts_after(window);
    let activity = &window.activity;
    Counts {
        node_reads: after.node_reads.saturating_sub(activity.node_reads()),
        restores: after.restores.saturating_sub(activity.restores),
        conversions: after.conversions.saturating_sub(activity.conversions),
        eager_restores: after.eager_restores.saturating_sub(window.eager_restores),
        wasted: after.wasted.saturating_sub(activity.reclaims.compressed()),
    }
}

/// The model's windows as the controller's signal source, at one moment: the signals of
/// closed window `window` (a decision) or the gauges now (a poll). The model tracks one cache,
/// so every device is given the same signals.
pub(crate) struct WindowSignals<'a> {
    pub model: &'a Model,
    pub window: u64,
    pub rates: &'a ModelSignals,
    /// Memory pressure: the source's own, else PSI, read by the caller for this moment.
    pub memory_pressure: Option<f64>,
}

impl SignalSource for WindowSignals<'_> {
    fn sample(&mut self, _device: &str, _now: Duration) -> Result<Signals> {
        let budget = self.model.observed().budget_bytes;
        self.rates
            .signals(
                self.model.history(),
                self.window,
                self.memory_pressure,
                budget,
            )
            .with_context(|| format!("window {} is no longer in the model", self.window))
    }

    fn gauges(&mut self, _device: &str, _now: Duration) -> Result<Signals> {
        Ok(Signals {
            memory_pressure: self.memory_pressure,
            attributed_bytes: Some(self.model.cache().attributed_bytes),
            budget_bytes: self.model.observed().budget_bytes,
            ..Signals::default()
        })
    }
}

/// What [`Tuning::start_with`] can change.
#[derive(Clone, Debug)]
pub(crate) struct TuningOptions {
    pub config: Config,
    /// At most one write per knob per this long (model time).
    pub min_write_gap: Duration,
    /// PSI file (`None`: no pressure signal, only the budget).
    pub psi: Option<PathBuf>,
    pub signals: ModelSignals,
    /// Where the devices are claimed and their originals kept (`None`: the default,
    /// `controller::claim::default_state_dir`). A dry run claims nothing.
    pub state_dir: Option<PathBuf>,
}

impl Default for TuningOptions {
    fn default() -> Self {
        TuningOptions {
            config: Config::default(),
            min_write_gap: Duration::from_secs(1),
            psi: Some(PathBuf::from(ProcSignalSource::DEFAULT_PSI_PATH)),
            signals: ModelSignals::default(),
            state_dir: None,
        }
    }
}

/// The controller on the model's windows, for the devices of one source.
pub(crate) struct Tuning {
    guard: RestoreGuard<Session<SysfsKnobs>>,
    options: TuningOptions,
    /// PSI, unless `options.psi` is None.
    psi: Option<PsiFile>,
    /// The PSI readings' clock.
    started: Instant,
    /// The last closed window a decision was made on.
    last_window: Option<u64>,
}

/// Whose stdout an audit log `-` would write to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuditDefault {
    /// `nodescope tune`: no file means stderr, `-` means stdout.
    Stderr,
    /// The live view: stdout and stderr are the screen, so no file means no log (the
    /// decisions pane shows every decision) and `-` is refused.
    Screen,
}

/// The audit log a `--audit` argument names.
pub(crate) fn open_audit(path: Option<&Path>, default: AuditDefault) -> Result<AuditLog> {
    match (path, default) {
        (None, AuditDefault::Stderr) => Ok(AuditLog::to_stderr()),
        (None, AuditDefault::Screen) => Ok(AuditLog::discard()),
        (Some(path), AuditDefault::Stderr) if path == Path::new("-") => Ok(AuditLog::to_stdout()),
        (Some(path), AuditDefault::Screen) if path == Path::new("-") => {
            bail!("--audit -: stdout is the screen in the live view; give a file")
        }
        (Some(path), _) => AuditLog::to_file(path),
    }
}

impl Tuning {
    /// Tune `devices` under `knob_root` (`Source::knob_root()` for the simulator, else
    /// `/sys/fs/f2fs`) with the default law. Refuses to start, naming the file, when a knob is
    /// missing, unparsable, out of range or (unless `dry_run`) not writable.
    #[cfg(test)]
    pub(crate) fn start(
        knob_root: &Path,
        devices: &[String],
        dry_run: bool,
        audit: Option<PathBuf>,
    ) -> Result<Tuning> {
        Self::start_with(knob_root, devices, dry_run, audit, TuningOptions::default())
    }

    pub(crate) fn start_with(
        knob_root: &Path,
        devices: &[String],
        dry_run: bool,
        audit: Option<PathBuf>,
        options: TuningOptions,
    ) -> Result<Tuning> {
        let audit = open_audit(audit.as_deref(), AuditDefault::Screen)?;
        let state = (!dry_run)
            .then(|| {
                let dir = options.state_dir.clone().unwrap_or_else(default_state_dir);
                StateDir::open(&dir)
            })
            .transpose()?;
        let stores = devices
            .iter()
            .map(|device| {
                let (store, claim) =
                    claim::open_claimed(knob_root, device, state.as_ref(), !dry_run)
                        .with_context(|| format!("cannot tune {device}"))?;
                Ok((device.clone(), store, claim))
            })
            .collect::<Result<Vec<_>>>()?;
        let opts = TunerOptions {
            dry_run,
            min_write_gap: options.min_write_gap,
        };
        let session = Session::start_claimed(stores, opts, options.config.clone(), audit)?;
        Ok(Tuning {
            guard: RestoreGuard::arm(session),
            psi: options.psi.as_deref().map(PsiFile::new),
            started: Instant::now(),
            options,
            last_window: None,
        })
    }

    /// What the header shows after "controller".
    pub(crate) fn mode(&self) -> String {
        let session = self.guard.lock();
        let modes: Vec<String> = session
            .tuners()
            .iter()
            .map(|tuner| {
                let device = tuner.device();
                match tuner.status() {
                    Status::Tuning if tuner.dry_run() => format!("dry-run {device}"),
                    Status::Tuning => format!("on {device}"),
                    Status::Stopped { .. } if !self.guard.is_armed() => {
                        format!("restored {device}")
                    }
                    Status::Stopped { failed: true, .. } => format!("failed {device}"),
                    Status::Stopped { .. } => format!("stopped {device}"),
                }
            })
            .collect();
        modes.join(", ")
    }

    /// Decide once per window closed since the last step, oldest first (on the first step,
    /// only on the newest: older windows were before the controller started); without a newly
    /// closed window, poll the gauges. Returns the decisions pane's lines.
    pub(crate) fn step(&mut self, model: &Model) -> Result<Vec<String>> {
        let newest = model.history().back().map(|w| w.index);
        let after = self.last_window.or(newest.and_then(|n| n.checked_sub(1)));
        let fresh: Vec<u64> = model
            .history()
            .iter()
            .map(|w| w.index)
            .filter(|&i| after.is_none_or(|last| i > last))
            .collect();
        if fresh.is_empty() {
            return self.poll(model);
        }
        let mut lines = Vec::new();
        for index in fresh {
            self.last_window = Some(index);
            lines.extend(self.decide(model, index)?);
        }
        Ok(lines)
    }

    /// The source's own pressure (the simulator's) when it has one, else PSI `some` over the
    /// last `span` of wall time (`PsiMeter`: the larger of avg10 and the stall share); a
    /// missing or unreadable file is said once.
    fn read_pressure(&mut self, model: &Model, span: Duration) -> Option<f64> {
        if let Some(own) = model.observed().memory_pressure {
            return Some(own);
        }
        let now = self.started.elapsed();
        self.psi.as_mut()?.read_or_warn(now, span)
    }

    /// One decision on closed window `index`.
    fn decide(&mut self, model: &Model, index: u64) -> Result<Vec<String>> {
        let window_ns = model.config().window_ns;
        let pressure = self.read_pressure(model, Duration::from_nanos(window_ns));
        let mut signals = WindowSignals {
            model,
            window: index,
            rates: &self.options.signals,
            memory_pressure: pressure,
        };
        // Model time since window 0 began: the tuner's clock (write-rate limit, audit).
        let now = Duration::from_nanos((index + 1) * window_ns);
        let records = self.guard.lock().tick(&mut signals, now)?;
        Ok(lines(&format!("window {}", index + 1), &records))
    }

    /// A poll inside the open window: the gauges now (pressure over the last second, the
    /// model's attributed bytes, the budget); lines only when it acted.
    fn poll(&mut self, model: &Model) -> Result<Vec<String>> {
        let pressure = self.read_pressure(model, psi::RECENT);
        let open_window = model.elapsed_ns() / model.config().window_ns + 1;
        let mut signals = WindowSignals {
            model,
            window: open_window,
            rates: &self.options.signals,
            memory_pressure: pressure,
        };
        let now = Duration::from_nanos(model.elapsed_ns());
        let records = self.guard.lock().poll(&mut signals, now)?;
        Ok(lines(&format!("window {open_window} (poll)"), &records))
    }
}

fn lines(when: &str, records: &[AuditRecord]) -> Vec<String> {
    records
        .iter()
        .map(|record| decision_line(when, record))
        .collect()
}

/// `window 12: applied: memory score 4.00 (...), tight: compress more, interval 1000 -> 250 ms`.
fn decision_line(when: &str, record: &AuditRecord) -> String {
    let outcome = serde_json::to_value(record.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{when}: {outcome}: {}", record.reason)
}

// Dropping a `Tuning` drops its guard, which puts the original values back (once).

/// As root, lower our OOM score and say so; otherwise (lowering needs CAP_SYS_RESOURCE) say
/// why not. Never fatal: the state file covers a controller that gets killed anyway.
pub(crate) fn lower_oom_score(value: i32) {
    if !crate::system::is_root() {
        log::info!("not root: oom_score_adj left as it is");
        return;
    }
    match controller::oom::set_oom_score_adj(value) {
        Ok(previous) => log::info!("oom_score_adj set to {value} (was {previous})"),
        Err(err) => log::warn!("cannot set oom_score_adj: {err:#}"),
    }
}

#[cfg(test)]
mod tests;
