//! All tuned devices of one run, their signal source and the audit log.
//!
//! The caller owns time: [`Session::tick`] takes `now` (since the start), so `nodescope tune`
//! drives it from a real clock and the simulator from its virtual one.
use std::time::Duration;

use anyhow::Result;

use crate::{
    audit::{AuditLog, AuditRecord, Event, Outcome},
    claim::Claim,
    knobs::KnobStore,
    law::Config,
    safety::Restore,
    signals::SignalSource,
    tuner::{DeviceTuner, Status, TunerOptions},
};

pub struct Session<K: KnobStore> {
    tuners: Vec<DeviceTuner<K>>,
    audit: AuditLog,
    cfg: Config,
    last_now: Duration,
}

impl<K: KnobStore> Session<K> {
    /// Read every device's original values first, so that a refused start (unparsable or
    /// out-of-range contents) writes nothing anywhere; then log one `start` line per device.
    pub fn start(
        devices: Vec<(String, K)>,
        opts: TunerOptions,
        cfg: Config,
        audit: AuditLog,
    ) -> Result<Self> {
        let devices = devices
            .into_iter()
            .map(|(device, store)| (device, store, None))
            .collect();
        Self::start_claimed(devices, opts, cfg, audit)
    }

    /// [`Session::start`] with each device's [`Claim`] (see [`DeviceTuner::start_claimed`]):
    /// `recover` lines come before the `start` lines.
    pub fn start_claimed(
        devices: Vec<(String, K, Option<Claim>)>,
        opts: TunerOptions,
        cfg: Config,
        mut audit: AuditLog,
    ) -> Result<Self> {
        cfg.validate()?;
        let mut tuners = Vec::new();
        let mut records = Vec::new();
        for (device, store, claim) in devices {
            match DeviceTuner::start_claimed(&device, store, opts, Duration::ZERO, claim) {
                Ok((tuner, started)) => {
                    tuners.push(tuner);
                    records.extend(started);
                }
                Err(err) => {
                    // Nothing was tuned: the devices already started keep no state file.
                    tuners.iter_mut().for_each(DeviceTuner::abandon);
                    return Err(err.context(format!("cannot start tuning {device}")));
                }
            }
        }
        for record in &records {
            if let Err(err) = audit.write(record) {
                // Nothing was tuned yet (a recover put originals back): no state file stays.
                tuners.iter_mut().for_each(DeviceTuner::abandon);
                return Err(err);
            }
        }
        Ok(Session {
            tuners,
            audit,
            cfg,
            last_now: Duration::ZERO,
        })
    }

    /// One decision for every device still tuned; the records written. Fails only
    /// when the audit log cannot be written: then no further change may be made unrecorded.
    pub fn tick(
        &mut self,
        source: &mut dyn SignalSource,
        now: Duration,
    ) -> Result<Vec<AuditRecord>> {
        self.last_now = now;
        let mut written = Vec::new();
        for tuner in self.tuners.iter_mut().filter(|t| t.is_tuning()) {
            let record = match source.sample(tuner.device(), now) {
                Ok(signals) => tuner.tick(&signals, now, &self.cfg),
                Err(err) => Some(no_signals(tuner, now, &err)),
            };
            if let Some(record) = record {
                self.audit.write(&record)?;
                written.push(record);
            }
        }
        Ok(written)
    }

    /// A poll between decisions: the gauges of every device still tuned, and an urgent step
    /// where memory got worse than the knobs answer ([`DeviceTuner::poll`]). A source that
    /// cannot give its gauges now is skipped quietly: the next decision reports it.
    pub fn poll(
        &mut self,
        source: &mut dyn SignalSource,
        now: Duration,
    ) -> Result<Vec<AuditRecord>> {
        self.last_now = self.last_now.max(now);
        let mut written = Vec::new();
        for tuner in self.tuners.iter_mut().filter(|t| t.is_tuning()) {
            let Ok(gauges) = source.gauges(tuner.device(), now) else {
                continue;
            };
            if let Some(record) = tuner.poll(&gauges, now, &self.cfg) {
                self.audit.write(&record)?;
                written.push(record);
            }
        }
        Ok(written)
    }

    /// How many devices are still tuned.
    pub fn tuning(&self) -> usize {
        self.tuners.iter().filter(|t| t.is_tuning()).count()
    }

    /// Why each device that failed (not an external change) stopped.
    pub fn failures(&self) -> Vec<String> {
        self.tuners
            .iter()
            .filter_map(|tuner| match tuner.status() {
                Status::Stopped {
                    reason,
                    failed: true,
                } => Some(reason.clone()),
                _ => None,
            })
            .collect()
    }

    /// Why putting the originals back failed, for each device where it did.
    pub fn restore_failures(&self) -> Vec<String> {
        self.tuners
            .iter()
            .filter_map(|tuner| tuner.restore_failure().map(str::to_string))
            .collect()
    }

    pub fn tuners(&self) -> &[DeviceTuner<K>] {
        &self.tuners
    }

    pub fn audit_name(&self) -> &str {
        self.audit.name()
    }

    /// Put every device's original values back (once) and log it. Every device is tried even
    /// when the audit log fails; the first audit error is returned.
    pub fn restore_all(&mut self) -> Result<()> {
        let mut first_error = None;
        for tuner in &mut self.tuners {
            if let Some(record) = tuner.restore(self.last_now) {
                if let Err(err) = self.audit.write(&record) {
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn no_signals<K: KnobStore>(
    tuner: &DeviceTuner<K>,
    now: Duration,
    err: &anyhow::Error,
) -> AuditRecord {
    let reason = format!("cannot read signals: {err:#}; holding");
    log::warn!("{}: {reason}", tuner.device());
    let mut record = AuditRecord::new(
        now.as_secs_f64(),
        tuner.device(),
        Event::Decision,
        Outcome::NoSignals,
    );
    record.dry_run = tuner.dry_run();
    record.reason = reason;
    record
}

impl<K: KnobStore + 'static> Restore for Session<K> {
    fn restore(&mut self) {
        if let Err(err) = self.restore_all() {
            // The knobs are back; only their audit lines are missing. Say so where it is seen.
            log::error!("restoring: {err:#}");
        }
    }
}
