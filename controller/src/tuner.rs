//! One device under control: the law plus everything that makes writing its output safe.
//!
//! Each decision period [`DeviceTuner::tick`] reads both knobs, stops for good if someone
//! else changed one (the device holds something other than what we last wrote or read),
//! steps the law, and writes what changed: validated first, at most once per knob per
//! `min_write_gap`, then read back and compared. In dry-run it steps a shadow copy and
//! writes nothing.
//! [`DeviceTuner::restore`] puts the original values back, knob by knob, except a knob someone
//! else changed.
use std::time::Duration;

use anyhow::{bail, Result};
use tracer_common::knobs::{Knob, Knobs};

use crate::{
    audit::{AuditRecord, Event, Outcome},
    claim::Claim,
    knobs::{self, KnobStore},
    law::{self, Config},
    signals::Signals,
};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TunerOptions {
    /// Decide and log, write nothing.
    pub dry_run: bool,
    /// At most one write per knob per this long.
    pub min_write_gap: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Tuning,
    /// No longer tuned. `failed` is false after an external change or a restore.
    Stopped {
        reason: String,
        failed: bool,
    },
}

/// Whether a write waits for `min_write_gap` since the knob's last write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteGap {
    Respect,
    /// Urgent steps (see [`DeviceTuner::poll`]).
    Skip,
}

pub struct DeviceTuner<K: KnobStore> {
    device: String,
    store: K,
    opts: TunerOptions,
    original: Knobs,
    /// Per knob, the last value we wrote or read: anything else on the device was written by
    /// someone else.
    last_known: Knobs,
    /// The law's state; in dry-run its knobs are a shadow of what we would have written.
    law: law::State,
    /// When each knob (in `Knob::ALL` order) was last written.
    last_write: [Option<Duration>; 2],
    status: Status,
    restored: bool,
    /// Why putting the originals back failed, when it did: the device keeps a tuned value.
    restore_failure: Option<String>,
    /// This process's claim on the device and the state file with the originals (none in
    /// dry-run, in memory, and for callers that do not claim).
    claim: Option<Claim>,
}

/// What restoring one knob did.
enum KnobRestore {
    PutBack,
    NothingToDo,
    /// Someone else changed it: deliberately left as it is.
    LeftAlone(String),
}

impl<K: KnobStore> DeviceTuner<K> {
    /// Read the original values (refusing unparsable or out-of-range contents) and start.
    pub fn start(
        device: &str,
        store: K,
        opts: TunerOptions,
        now: Duration,
    ) -> Result<(Self, AuditRecord)> {
        let (tuner, mut records) = Self::start_claimed(device, store, opts, now, None)?;
        Ok((tuner, records.pop().expect("a start record")))
    }

    /// [`DeviceTuner::start`] holding `claim`: originals left behind by a controller that did
    /// not end cleanly are put back first (a `recover` record) and so become this run's; then
    /// the originals are recorded in the state file before anything else is written. The last
    /// record is the `start` one.
    pub fn start_claimed(
        device: &str,
        mut store: K,
        opts: TunerOptions,
        now: Duration,
        mut claim: Option<Claim>,
    ) -> Result<(Self, Vec<AuditRecord>)> {
        let mut records = Vec::new();
        if let Some(claim) = &claim {
            records.extend(recover(device, &mut store, claim, opts, now)?);
        }
        let original = store.read_all()?;
        if let Some(claim) = &mut claim {
            claim.record(original)?;
        }
        let tuner = DeviceTuner {
            device: device.to_string(),
            store,
            opts,
            original,
            last_known: original,
            law: law::State::new(original),
            last_write: [None, None],
            status: Status::Tuning,
            restored: false,
            restore_failure: None,
            claim,
        };
        let mut record = tuner.record(now, Event::Start, Outcome::Unchanged);
        record.old = Some(original);
        record.written = (!opts.dry_run).then_some(original);
        record.reason = if opts.dry_run {
            format!("dry run on {device}: deciding and logging, writing nothing ({original})")
        } else {
            format!("tuning {device}; the original values ({original}) go back on exit")
        };
        records.push(record);
        Ok((tuner, records))
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    pub fn dry_run(&self) -> bool {
        self.opts.dry_run
    }

    pub fn is_tuning(&self) -> bool {
        self.status == Status::Tuning
    }

    /// Why the originals could not be put back (the device may keep a tuned value).
    pub fn restore_failure(&self) -> Option<&str> {
        self.restore_failure.as_deref()
    }

    pub fn original(&self) -> Knobs {
        self.original
    }

    pub fn law_state(&self) -> &law::State {
        &self.law
    }

    /// One decision. `None` once the device is no longer tuned.
    pub fn tick(&mut self, signals: &Signals, now: Duration, cfg: &Config) -> Option<AuditRecord> {
        if !self.is_tuning() {
            return None;
        }
        let step = law::step(&self.law, signals, cfg);
        self.carry_out(step, signals, now, WriteGap::Respect)
    }

    /// A poll between decisions ([`law::urgent`]): `None` when nothing is urgent (the device is
    /// not even read) or the device is no longer tuned; otherwise the same checks, writes and
    /// audit record as [`DeviceTuner::tick`], except the write-rate limit: an urgent step only
    /// compresses more, and only after the memory score grew by `tight_enter` since the last
    /// step, so it cannot flap, and deferring it would leave the worker slow for the very
    /// seconds the poll is there to save.
    pub fn poll(&mut self, signals: &Signals, now: Duration, cfg: &Config) -> Option<AuditRecord> {
        if !self.is_tuning() {
            return None;
        }
        let step = law::urgent(&self.law, signals, cfg)?;
        self.carry_out(step, signals, now, WriteGap::Skip)
    }

    /// Check the device, then write what the law decided (or, in dry-run, only note it).
    fn carry_out(
        &mut self,
        (next, decision): (law::State, law::Decision),
        signals: &Signals,
        now: Duration,
        gap: WriteGap,
    ) -> Option<AuditRecord> {
        let on_device = match self.store.read_all() {
            Ok(knobs) => knobs,
            Err(_) if !self.store.present() => return Some(self.gone(now)),
            Err(err) => return Some(self.fail(now, format!("{err:#}"))),
        };
        if let Some(record) = self.check_external_change(on_device, now) {
            return Some(record);
        }

        let mut record = self.record(now, Event::Decision, Outcome::Hold);
        record.signals = Some(signals.clone());
        record.old = Some(self.law.knobs);
        record.new = Some(decision.knobs);
        record.reason = decision.reason.clone();
        record.regime = Some(decision.regime);
        record.memory_score = decision.memory_score;
        if decision.knobs == self.law.knobs || self.opts.dry_run {
            record.outcome = if decision.knobs == self.law.knobs {
                Outcome::Hold
            } else {
                Outcome::DryRun
            };
            record.written = (!self.opts.dry_run).then_some(on_device);
            self.law = next;
            return Some(record);
        }
        match self.apply(decision.knobs, now, gap) {
            Ok(deferred) => {
                self.finish_applied(&mut record, next, &deferred);
                Some(record)
            }
            Err(err) => Some(self.fail(now, format!("{err:#}"))),
        }
    }

    /// Put the original values back, knob by knob; leave alone a knob someone else changed.
    /// Runs once; later calls return `None`.
    pub fn restore(&mut self, now: Duration) -> Option<AuditRecord> {
        if self.restored {
            return None;
        }
        self.restored = true;
        let mut record = self.record(now, Event::Restore, Outcome::Unchanged);
        record.new = Some(self.original);
        if self.opts.dry_run {
            record.reason = format!("dry run: nothing was written to {}", self.device);
            self.stop("restored".to_string(), false);
            return Some(record);
        }
        let mut put_back = Vec::new();
        let mut notes = Vec::new();
        let mut failures = Vec::new();
        for knob in Knob::ALL {
            match self.restore_knob(knob) {
                Ok(KnobRestore::PutBack) => {
                    put_back.push(format!("{knob} {}", self.original.get(knob)))
                }
                Ok(KnobRestore::NothingToDo) => {}
                Ok(KnobRestore::LeftAlone(note)) => notes.push(note),
                Err(err) => failures.push(format!(
                    "FAILED to put back {knob} {}: {err:#}",
                    self.original.get(knob)
                )),
            }
        }
        record.outcome = match (failures.is_empty(), put_back.is_empty()) {
            (false, _) => Outcome::Failed,
            (true, true) => Outcome::Unchanged,
            (true, false) => Outcome::Restored,
        };
        record.written = self.store.read_all().ok();
        notes.extend(failures.iter().cloned());
        self.release_claim(failures.is_empty(), &mut notes);
        record.reason = restore_reason(&self.device, &put_back, &notes);
        if !failures.is_empty() {
            log::error!("{}", record.reason);
            self.restore_failure = Some(record.reason.clone());
        } else if notes.is_empty() {
            log::info!("{}", record.reason);
        } else {
            log::warn!("{}", record.reason);
        }
        self.stop("restored".to_string(), false);
        Some(record)
    }

    /// Put one knob's original value back unless someone else changed it since; an error is a
    /// failed read or write (the device may keep our value).
    fn restore_knob(&mut self, knob: Knob) -> Result<KnobRestore> {
        let original = self.original.get(knob);
        let ours = self.last_known.get(knob);
        let on_device = self.store.read(knob)?;
        if on_device != ours {
            return Ok(KnobRestore::LeftAlone(format!(
                "{} is {on_device} but we last set {ours}: changed by someone else, left alone",
                self.store.origin(knob)
            )));
        }
        if on_device == original {
            return Ok(KnobRestore::NothingToDo);
        }
        self.write_and_verify(knob, original)?;
        Ok(KnobRestore::PutBack)
    }

    fn check_external_change(&mut self, on_device: Knobs, now: Duration) -> Option<AuditRecord> {
        let changed: Vec<String> = Knob::ALL
            .iter()
            .filter(|&&knob| on_device.get(knob) != self.last_known.get(knob))
            .map(|&knob| {
                format!(
                    "{} is {} but we last wrote or read {}",
                    self.store.origin(knob),
                    on_device.get(knob),
                    self.last_known.get(knob)
                )
            })
            .collect();
        if changed.is_empty() {
            return None;
        }
        let reason = format!(
            "{}: someone else changed it; stopped tuning {} (a knob changed by someone else is \
             not restored)",
            changed.join("; "),
            self.device
        );
        log::warn!("{reason}");
        let mut record = self.record(now, Event::ExternalChange, Outcome::Stopped);
        record.old = Some(self.last_known);
        record.written = Some(on_device);
        record.reason = reason.clone();
        self.stop(reason, false);
        Some(record)
    }

    /// Write each knob that should change and may (rate limit). Returns the knobs deferred by
    /// the rate limit.
    fn apply(
        &mut self,
        target: Knobs,
        now: Duration,
        gap: WriteGap,
    ) -> Result<Vec<(Knob, Duration)>> {
        let mut deferred = Vec::new();
        for (index, knob) in Knob::ALL.into_iter().enumerate() {
            if target.get(knob) == self.last_known.get(knob) {
                continue;
            }
            if let Some(since) = self.last_write[index].map(|at| now.saturating_sub(at)) {
                if gap == WriteGap::Respect && since < self.opts.min_write_gap {
                    deferred.push((knob, since));
                    continue;
                }
            }
            self.write_and_verify(knob, target.get(knob))?;
            self.last_write[index] = Some(now);
        }
        Ok(deferred)
    }

    /// Validate, write, read back, compare. `last_known` follows what the device holds, so a
    /// mismatch is not later mistaken for someone else's write.
    fn write_and_verify(&mut self, knob: Knob, value: u32) -> Result<()> {
        knobs::validate(knob, value)?;
        self.store.write(knob, value)?;
        let back = self.store.read(knob)?;
        self.last_known.set(knob, back);
        if back != value {
            bail!(
                "{}: wrote {value} but read back {back}",
                self.store.origin(knob)
            );
        }
        Ok(())
    }

    fn finish_applied(
        &mut self,
        record: &mut AuditRecord,
        mut next: law::State,
        deferred: &[(Knob, Duration)],
    ) {
        // The law steps from what the device really holds, deferred knobs included.
        next.knobs = self.last_known;
        self.law = next;
        record.written = Some(self.last_known);
        record.outcome = if deferred.is_empty() {
            Outcome::Applied
        } else {
            Outcome::RateLimited
        };
        for (knob, since) in deferred {
            record.reason += &format!(
                " ({knob} write deferred: last write {:.1} s ago, limit {:.1} s)",
                since.as_secs_f64(),
                self.opts.min_write_gap.as_secs_f64()
            );
        }
        log::info!("{}: {}", self.device, record.reason);
    }

    /// Once the originals are back the state file goes; when they are not, it stays for
    /// `tune --restore` and the note says where.
    fn release_claim(&mut self, restored: bool, notes: &mut Vec<String>) {
        let Some(claim) = &mut self.claim else {
            return;
        };
        if !restored {
            notes.push(format!(
                "the originals stay in {} for `nodescope tune --restore`",
                claim.state_path().display()
            ));
            return;
        }
        if let Err(err) = claim.release() {
            notes.push(format!("{err:#}"));
        }
    }

    /// Give the device up before anything was written to it (another device refused to
    /// start): its state file goes, since there is nothing to put back.
    pub fn abandon(&mut self) {
        self.restored = true;
        if let Some(claim) = &mut self.claim {
            if let Err(err) = claim.release() {
                log::warn!("{err:#}");
            }
        }
        self.stop("not started".to_string(), false);
    }

    /// The knob directory is gone (the file system was unmounted): its knobs went with it, so
    /// there is nothing to put back and the claim ends here.
    fn gone(&mut self, now: Duration) -> AuditRecord {
        let reason = format!(
            "{} is gone (unmounted?): stopped tuning {}; nothing to put back",
            self.store.origin(Knob::Threshold),
            self.device
        );
        log::warn!("{reason}");
        let mut record = self.record(now, Event::DeviceGone, Outcome::Stopped);
        record.old = Some(self.last_known);
        record.reason = reason.clone();
        self.restored = true;
        if let Some(claim) = &mut self.claim {
            if let Err(err) = claim.release() {
                record.reason += &format!("; {err:#}");
            }
        }
        self.stop(reason, false);
        record
    }

    fn fail(&mut self, now: Duration, message: String) -> AuditRecord {
        let reason = format!("{message}; stopped tuning {}", self.device);
        log::error!("{reason}");
        let mut record = self.record(now, Event::Failure, Outcome::Stopped);
        record.old = Some(self.last_known);
        record.reason = reason.clone();
        self.stop(reason, true);
        record
    }

    fn stop(&mut self, reason: String, failed: bool) {
        if self.is_tuning() {
            self.status = Status::Stopped { reason, failed };
        }
    }

    fn record(&self, now: Duration, event: Event, outcome: Outcome) -> AuditRecord {
        let mut record = AuditRecord::new(now.as_secs_f64(), &self.device, event, outcome);
        record.dry_run = self.opts.dry_run;
        record
    }
}

/// Put back the originals a controller that did not end cleanly left in the claim's state
/// file, whatever the device holds now: a knob that cannot be read or parsed (a plain file a
/// killed writer left empty) gets its original written all the same. A device that already
/// holds them needs nothing written but still gets the record: the operator learns that the
/// last run did not end cleanly.
pub(crate) fn recover<K: KnobStore>(
    device: &str,
    store: &mut K,
    claim: &Claim,
    opts: TunerOptions,
    now: Duration,
) -> Result<Option<AuditRecord>> {
    let Some(saved) = claim.left_behind() else {
        return Ok(None);
    };
    let mut unreadable = Vec::new();
    let mut found = saved.originals;
    let mut changed = false;
    for knob in Knob::ALL {
        let value = saved.originals.get(knob);
        match store.read(knob) {
            Ok(current) if current == value => continue,
            Ok(current) => found.set(knob, current),
            Err(err) => unreadable.push(format!("{err:#}")),
        }
        changed = true;
        knobs::validate(knob, value)?;
        store.write(knob, value)?;
        let back = store.read(knob)?;
        if back != value {
            bail!("{}: wrote {value} but read back {back}", store.origin(knob));
        }
    }
    let mut record = AuditRecord::new(now.as_secs_f64(), device, Event::Recover, Outcome::Restored);
    record.dry_run = opts.dry_run;
    // What the device held, when every knob could be read.
    record.old = unreadable.is_empty().then_some(found);
    record.new = Some(saved.originals);
    record.written = Some(store.read_all()?);
    if !changed {
        record.outcome = Outcome::Unchanged;
    }
    let held = if unreadable.is_empty() {
        found.to_string()
    } else {
        format!("a knob it could not read ({})", unreadable.join("; "))
    };
    record.reason = format!(
        "recovered after an unclean stop: pid {} left {device} at {held}; its originals \
         ({}) are back and are this run's originals",
        saved.pid, saved.originals
    );
    log::warn!("{}", record.reason);
    Ok(Some(record))
}

fn restore_reason(device: &str, put_back: &[String], notes: &[String]) -> String {
    let mut reason = if put_back.is_empty() {
        format!("{device}: nothing to put back")
    } else {
        format!("{device}: put back {}", put_back.join(", "))
    };
    for note in notes {
        reason += "; ";
        reason += note;
    }
    reason
}
