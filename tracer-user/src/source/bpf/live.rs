//! The kernel as a source: F2FS programs attached as the planner chose, events from the ring
//! buffer, lost events reported in-band, and the exact in-kernel counters on the side.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{bail, Context as _, Result};
use aya::{programs::uprobe::UProbeScope, Ebpf};
use tracer_common::{maps, Event, EventKind, TaskCounts, TaskKey};

use crate::{
    source::{
        bpf::{
            self,
            cache_counters::{self, CounterFile},
            coverage::{Coverage, Held, KindState},
            f2fs::{
                access::{self, AccessPlan},
                areas,
                attach::{self, AttachOutcome},
                counters,
                planner::Plan,
                slots::SlotTracker,
            },
            footprints::{self, FootprintPlan},
            manifest::Manifest,
            rfc::{self, AttachReport},
            trampoline::{FunctionHook, TrampolineLink},
            EventReader,
        },
        BatchFuture, Source, SourceInfo, SourceKind,
    },
    system,
};

/// Ring buffer size: 16k node reads in a few seconds must fit between two reads.
pub const RING_BYTES: u32 = 8 * 1024 * 1024;

pub(crate) struct BpfSource {
    ebpf: Ebpf,
    reader: EventReader,
    outcomes: Vec<AttachOutcome>,
    /// DROPS as last reported in-band.
    drops_reported: u64,
    /// What the probe manifest for the RFC's functions attached, when one was given.
    rfc: Option<AttachReport>,
    /// The most NODE_COUNTS entries seen at once, and how many exited tasks' entries were
    /// folded into the totals and deleted (`source::exact`).
    counter_peak: usize,
    counters_retired: u64,
    /// Node lookups and evictions are traced (`--accesses`).
    accesses: bool,
    /// Who holds each CPU's counter slots, and what they counted there.
    slots: SlotTracker,
    /// The lookup functions' BPF trampolines (`--accesses`), attached while held.
    trampolines: Vec<TrampolineLink>,
    /// The kernel refused to run the batch flush program (`--accesses`): said once.
    flush_refused: bool,
    /// The mechanism's own counters files, read at every refresh (`cache_counters`).
    counter_files: Vec<CounterFile>,
    /// The counters' first readings, taken at start, sent before anything else.
    first_readings: Vec<Event>,
    /// What each of the RFC's kinds is seen by, once `watch_rfc_kernel` looked.
    coverage: Option<Coverage>,
    /// The kinds the footprint programs send one by one.
    footprint_kinds: Vec<EventKind>,
    /// Each per-event kind's events against the counters' count (`check_against_counters`).
    checks: BTreeMap<EventKind, Held>,
}

/// Add `more` to `tasks`, summing the counts of a key both hold. Indexed: a phone's reading
/// holds thousands of map entries and up to 256 slots per CPU.
fn add_counts(
    tasks: &mut Vec<(TaskKey, TaskCounts)>,
    more: impl IntoIterator<Item = (TaskKey, TaskCounts)>,
) {
    let mut at: HashMap<TaskKey, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, (key, _))| (*key, i))
        .collect();
    for (key, counts) in more {
        match at.get(&key) {
            Some(&i) => counters::merge(&mut tasks[i].1, &counts),
            None => {
                at.insert(key, tasks.len());
                tasks.push((key, counts));
            }
        }
    }
}

impl BpfSource {
    /// Load the object and attach what `plan` chose, and the RFC probes `manifest` names. Fails
    /// when node reads could not be attached at all (nothing useful would come); other parts may
    /// be missing, and say so. `hook`: how the manifest's kernel functions are hooked.
    /// `node_read_events`: every node read is also an event in the
    /// ring buffer (`record` needs them); without, node reads are only counted in the kernel,
    /// which is what the model's node-read figures come from anyway, at a fraction of the
    /// per-read cost (docs/PERFORMANCE.md).
    pub(crate) fn start(
        plan: &mut Plan,
        manifest: Option<&Manifest>,
        node_read_events: bool,
        hook: FunctionHook,
    ) -> Result<BpfSource> {
        let mut ebpf = bpf::load(RING_BYTES)?;
        // Before attaching: a metadata write must find its device's layout.
        for problem in areas::write_meta_areas(&mut ebpf)? {
            log::warn!("{problem}");
        }
        let outcomes = attach::attach(&mut ebpf, plan, node_read_events)?;
        let (rfc, trampolines) = match manifest {
            Some(manifest) => {
                let (report, links) =
                    rfc::attach_with(&mut ebpf, manifest, UProbeScope::AllProcesses, hook)?;
                (Some(report), links)
            }
            None => (None, Vec::new()),
        };
        let reads_attached = outcomes
            .iter()
            .any(|o| o.what == "node_reads" && o.attached);
        if !reads_attached {
            let why: Vec<String> = outcomes
                .iter()
                .filter(|o| !o.attached)
                .map(|o| format!("{}: {}", o.target, o.error.as_deref().unwrap_or("?")))
                .collect();
            bail!("no node-read probe attached: {}", why.join("; "));
        }
        let reader = EventReader::new(&mut ebpf)?;
        Ok(BpfSource {
            ebpf,
            reader,
            outcomes,
            drops_reported: 0,
            rfc,
            counter_peak: 0,
            counters_retired: 0,
            accesses: false,
            slots: SlotTracker::default(),
            trampolines,
            flush_refused: false,
            counter_files: Vec::new(),
            first_readings: Vec::new(),
            coverage: None,
            footprint_kinds: Vec::new(),
            checks: BTreeMap::new(),
        })
    }

    /// Also trace every node lookup and node-page eviction (`--accesses`). Fails when node
    /// lookups cannot be traced, since that is what was asked; a missing eviction probe is
    /// logged and listed in the outcomes.
    pub(crate) fn attach_accesses(&mut self, plan: &AccessPlan) -> Result<()> {
        let access::Attached {
            outcomes,
            trampolines,
        } = access::attach(
            &mut self.ebpf,
            plan,
            &[(maps::EVENTS, self.reader.ring_fd())],
        )?;
        self.trampolines.extend(trampolines);
        let lookups = outcomes
            .iter()
            .any(|o| o.what == "node_access" && o.attached);
        let mut why: Vec<String> = plan.missing.clone();
        for failed in outcomes.iter().filter(|o| !o.attached) {
            let error = failed.error.as_deref().unwrap_or("?");
            why.push(format!("{}: {error}", failed.target));
        }
        if !lookups {
            bail!(
                "--accesses: node lookups cannot be traced here: {}",
                why.join("; ")
            );
        }
        for line in &why {
            log::warn!("--accesses: {line}");
        }
        self.outcomes.extend(outcomes);
        self.accesses = true;
        Ok(())
    }

    /// On a kernel whose F2FS devices carry the RFC's knobs (issue 49): the footprints for the
    /// restore kinds no probe of the manifest gives, and the mechanism's own counters files,
    /// read at every refresh from now on. Returns what each kind is seen by.
    pub(crate) fn watch_rfc_kernel(&mut self) -> Coverage {
        // Node reads as the plan's variant attached them (`start` fails without one): the
        // targets that did attach, not a fixed claim.
        let node_reads: Vec<&str> = self
            .outcomes
            .iter()
            .filter(|o| o.what == "node_reads" && o.attached)
            .map(|o| o.target.as_str())
            .collect();
        let mut per_event = vec![(
            EventKind::NodeRead,
            format!("F2FS {}", node_reads.join(" + ")),
        )];
        if let Some(report) = &self.rfc {
            per_event.extend(
                report
                    .kinds
                    .iter()
                    .filter(|(kind, _)| *kind != EventKind::NodeRead)
                    .cloned(),
            );
        }
        let mut missing = Vec::new();
        let wanted: Vec<EventKind> = footprints::KINDS
            .iter()
            .filter(|kind| !per_event.iter().any(|(k, _)| k == *kind))
            .copied()
            .collect();
        if !wanted.is_empty() {
            let plan = FootprintPlan::this_kernel();
            match footprints::attach(&mut self.ebpf, &plan, &wanted) {
                Ok(kinds) => {
                    per_event.extend(kinds.iter().map(|&k| (k, plan.describe())));
                    self.footprint_kinds = kinds;
                }
                Err(err) => missing.push(format!("{err:#}")),
            }
        }
        let (files, notes) = cache_counters::find_for_rfc_devices();
        missing.extend(notes);
        let coverage = Coverage::new(&per_event, &files, &missing);
        self.watch_counters(files);
        let baseline: BTreeMap<EventKind, u64> =
            self.rfc_counts().unwrap_or_default().into_iter().collect();
        for (kind, state) in &coverage.kinds {
            if matches!(state, KindState::PerEvent { counted: true, .. }) {
                let check = Held::from(baseline.get(kind).copied().unwrap_or(0));
                self.checks.insert(*kind, check);
            }
        }
        self.coverage = Some(coverage.clone());
        coverage
    }

    /// The kinds whose events the RFC programs count in the kernel (the manifest's and the
    /// footprints').
    pub(crate) fn per_event_kinds(&self) -> Vec<EventKind> {
        let mut kinds: Vec<EventKind> = self
            .rfc
            .iter()
            .flat_map(|report| report.kinds.iter().map(|(k, _)| *k))
            .chain(self.footprint_kinds.iter().copied())
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Hold each per-event kind to the counters. Where both stood still since the previous
    /// refresh, they must agree: more events than counted means its probe fires for calls that
    /// are not events (a function called whether or not it acts): its events are dropped from
    /// now on and the counters' totals stand alone; fewer means its probe misses some (a
    /// failure before the decompression): the kind is per event only in part.
    fn check_against_counters(&mut self) {
        if self.checks.is_empty() {
            return;
        }
        let Ok(events) = self.rfc_counts() else {
            return;
        };
        let events: BTreeMap<EventKind, u64> = events.into_iter().collect();
        let Some(coverage) = self.coverage.as_mut() else {
            return;
        };
        for (kind, check) in &mut self.checks {
            let seen = events
                .get(kind)
                .copied()
                .unwrap_or(0)
                .saturating_sub(check.events_baseline);
            let counted: u64 = self
                .counter_files
                .iter()
                .map(|file| file.counted(*kind))
                .sum();
            if let Some(why) = coverage.hold(*kind, check, seen, counted) {
                log::warn!("{}: {why}; its totals come from the counters", kind.name());
            }
        }
        self.checks.retain(|kind, _| {
            coverage
                .kinds
                .iter()
                .any(|(k, s)| k == kind && matches!(s, KindState::PerEvent { .. }))
        });
    }

    /// Events of kinds whose probe was found to fire for what is not an event: dropped.
    fn drop_demoted(&self, events: &mut Vec<Event>, from: usize) {
        let Some(coverage) = &self.coverage else {
            return;
        };
        let probed = self.per_event_kinds();
        let demoted: Vec<u8> = coverage
            .kinds
            .iter()
            .filter(|(kind, state)| {
                matches!(state, KindState::TotalsOnly { .. }) && probed.contains(kind)
            })
            .map(|(kind, _)| *kind as u8)
            .collect();
        if demoted.is_empty() {
            return;
        }
        let read = events.split_off(from);
        events.extend(read.into_iter().filter(|e| !demoted.contains(&e.kind)));
    }

    /// Read these counters files at every refresh, from now on: their readings go out as
    /// `Counter` events (the first reading at once, the model's baseline).
    fn watch_counters(&mut self, files: Vec<CounterFile>) {
        self.counter_files = files;
        let mut first = Vec::new();
        self.sample_counters(&mut first);
        self.first_readings = first;
    }

    /// A `Counter` event for each counter that changed since the last reading. A file that
    /// cannot be read is said, and read again next time.
    fn sample_counters(&mut self, out: &mut Vec<Event>) {
        let now = self.now_ns();
        for file in &mut self.counter_files {
            match file.sample(now) {
                Ok(events) => out.extend(events),
                Err(err) => log::warn!("{}: {err}", file.path.display()),
            }
        }
    }

    /// Exact node lookups, node evictions (and device reads) counted in the kernel since
    /// `attach_accesses`.
    pub(crate) fn access_counts(&self) -> Result<access::AccessCounts> {
        access::counts(&self.ebpf)
    }

    /// What the RFC probe manifest attached (None without a manifest).
    pub(crate) fn rfc_report(&self) -> Option<&AttachReport> {
        self.rfc.as_ref()
    }

    /// Events the RFC probes emitted per kind since they were attached (counted in the kernel,
    /// exact even when the ring buffer overflows).
    pub(crate) fn rfc_counts(&self) -> Result<Vec<(EventKind, u64)>> {
        rfc::kernel_counts(&self.ebpf)
    }

    pub(crate) fn outcomes(&self) -> &[AttachOutcome] {
        &self.outcomes
    }

    /// Exact counters per (device, tgid, uid) since the programs were attached: NODE_COUNTS
    /// and the counter slots, summed per key. NODE_COUNTS is read first: a task's counts move
    /// between the two only by growing in one of them.
    pub(crate) fn counts(&mut self) -> Result<Vec<(TaskKey, TaskCounts)>> {
        let mut tasks = counters::read_counts(&self.ebpf)?;
        self.note_counter_population(tasks.len());
        let first = counters::read_slots(&self.ebpf)?;
        let ebpf = &self.ebpf;
        self.slots.observe(&first, || counters::read_slots(ebpf))?;
        add_counts(&mut tasks, self.slots.live());
        Ok(tasks)
    }

    /// The final counts, per key, that the slots of the thread groups in `exited` hold (read
    /// now, after the exits: nothing can add to them any more), and hand those slots back.
    pub(crate) fn retire_slots(
        &mut self,
        exited: &BTreeSet<u32>,
    ) -> Result<Vec<(TaskKey, TaskCounts)>> {
        let tables = counters::read_slots(&self.ebpf)?;
        let (finals, changed) = self.slots.retire(&tables, exited);
        for index in changed {
            counters::write_grants(&mut self.ebpf, index, self.slots.grants(index))?;
        }
        Ok(finals)
    }

    /// Take one entry out of NODE_COUNTS with its final value.
    pub(crate) fn take_counts(&self, key: &TaskKey) -> Result<Option<TaskCounts>> {
        counters::take(&self.ebpf, key)
    }

    pub(crate) fn note_counter_population(&mut self, entries: usize) {
        self.counter_peak = self.counter_peak.max(entries);
    }

    pub(crate) fn note_retired(&mut self, entries: usize) {
        self.counters_retired += entries as u64;
    }

    /// Ring-buffer events lost so far.
    pub(crate) fn drops(&self) -> Result<u64> {
        bpf::dropped(&self.ebpf)
    }

    /// Counter increments lost because the counter map was full.
    pub(crate) fn count_failures(&self) -> Result<u64> {
        counters::count_failures(&self.ebpf)
    }

    async fn fill(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        // Cancel-safe: nothing leaves the source before the last await. The run loop drops
        // this future when a refresh is due and keeps `out` for its next call, so the first
        // readings taken off before the wait reached the model only with the next ring
        // batch, after newer readings: a counter that seemed to go back (a remount, to the
        // tally) and a baseline counted twice (issue 63: 3,965 inserts too many when busy).
        let mut read = Vec::new();
        self.reader
            .read_batch(|event| read.push(event))
            .await
            .context("reading the ring buffer")?;
        out.append(&mut self.first_readings);
        let start = out.len();
        out.append(&mut read);
        self.drop_demoted(out, start);
        self.put_in_time_order(&mut out[start..]);
        let _unpreempted = super::unpreempted::Unpreempted::enter();
        self.note_drops(out)?;
        Ok(true)
    }

    /// Lookups come in per-CPU batches (`AccessBatch`), behind the single events of their
    /// time: what one read took is put back in time order (stable: the order of equal times
    /// stays the ring's). A batch the read did not find is one refresh late at most.
    fn put_in_time_order(&self, events: &mut [Event]) {
        if self.accesses {
            events.sort_by_key(|event| event.ts_ns);
        }
    }

    /// Ask each CPU with lookups waiting in its batch to send them (at every refresh and at
    /// the stop, before the ring is read). A kernel that refuses is said once; its batches then
    /// go out when full or due only, and at the stop the last ones stay in the kernel (the
    /// closing note's exact counts still hold every lookup).
    fn flush_access_batches(&mut self) {
        if !self.accesses || self.flush_refused {
            return;
        }
        if let Err(err) = access::flush_batches(&self.ebpf) {
            log::warn!(
                "--accesses: lookups waiting in a CPU's batch cannot be sent on demand \
                 ({err:#}); they come when a batch is full or {} ms old",
                tracer_common::ACCESS_BATCH_MAX_AGE_NS / 1_000_000
            );
            self.flush_refused = true;
        }
    }

    /// Events the kernel could not put in the ring since the last look, as one `Lost` event.
    fn note_drops(&mut self, out: &mut Vec<Event>) -> Result<()> {
        let drops = self.drops()?;
        if drops > self.drops_reported {
            let mut lost = Event::ZERO;
            lost.kind = EventKind::Lost as u8;
            lost.len = u32::try_from(drops - self.drops_reported).unwrap_or(u32::MAX);
            lost.ts_ns = out.last().map_or(0, |e| e.ts_ns);
            out.push(lost);
            self.drops_reported = drops;
        }
        Ok(())
    }
}

impl Source for BpfSource {
    fn info(&self) -> SourceInfo {
        let attached: Vec<&str> = self
            .outcomes
            .iter()
            .filter(|o| o.attached)
            .map(|o| o.target.as_str())
            .collect();
        // What each RFC kind is seen by is in the banner (`source::open::with_coverage`).
        let detail = format!("attached: {}", attached.join(", "));
        SourceInfo {
            kind: SourceKind::Bpf,
            kernel: system::kernel_release(),
            devices: system::f2fs_devices(std::path::Path::new("/sys/fs/f2fs"))
                .into_iter()
                .map(|d| d.name)
                .collect(),
            detail,
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(self.fill(out))
    }

    fn take_waiting(&mut self, out: &mut Vec<Event>) -> Result<()> {
        // Its map reads (drops, the RFC counts, the access batches) as read_kernel_counts'.
        let _unpreempted = super::unpreempted::Unpreempted::enter();
        self.flush_access_batches();
        // The counters before the ring: an event the counters already count is then in the
        // ring, or follows within a refresh.
        let mut readings = Vec::new();
        self.sample_counters(&mut readings);
        self.check_against_counters();
        out.append(&mut self.first_readings);
        let start = out.len();
        self.reader.take_waiting(|event| out.push(event));
        self.drop_demoted(out, start);
        out.extend(readings);
        self.put_in_time_order(&mut out[start..]);
        self.note_drops(out)
    }

    fn kernel_counts(&mut self) -> Result<Option<crate::model::KernelCounts>> {
        self.read_kernel_counts().map(Some)
    }

    /// On a phone, /data/system/packages.list (kept in recordings, so a PC names the apps).
    fn packages_list(&self) -> Option<String> {
        system::android::packages_list(std::path::Path::new("/"))
    }

    fn closing_note(&self) -> Option<String> {
        let mut note = format!(
            "counter map: peak {} of {} entries; {} entries of exited processes folded into \
             the totals and deleted",
            self.counter_peak,
            counters::NODE_COUNTS_CAPACITY,
            self.counters_retired
        );
        let missed = attach::missed_counting_runs(&self.ebpf);
        if missed.is_empty() {
            note += "; no counting program's run skipped by the kernel";
        } else {
            let each: Vec<String> = missed.iter().map(|(p, n)| format!("{p} {n}")).collect();
            note += &format!(
                "; runs the kernel skipped (each a count lost): {}",
                each.join(", ")
            );
        }
        if let Some(coverage) = &self.coverage {
            note += &format!("; at the end: {}", coverage.summary());
        }
        if self.accesses {
            match self.access_counts() {
                Ok(counts) => {
                    note += &format!(
                        "; accesses counted in the kernel: {} node lookups, {} node \
                         evictions, {} inode evictions, {} calls of F2FS's shrinker; {} \
                         lookups read their device, the others took their CPU's; {} page-lock \
                         waits (kprobe), {} waits noted \
                         in timed lookups (the kprobe's, and threads blocking in one)",
                        counts.lookups,
                        counts.evictions,
                        counts.inode_evictions,
                        counts.shrinker_scans,
                        counts.device_reads,
                        counts.lock_waits,
                        counts.waits_noted
                    )
                }
                Err(err) => note += &format!("; access counts unreadable: {err:#}"),
            }
        }
        Some(note)
    }

    /// CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
    fn now_ns(&self) -> u64 {
        system::clock_ns(libc::CLOCK_MONOTONIC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(demand: u64) -> TaskCounts {
        TaskCounts {
            node_reads_demand: demand,
            ..TaskCounts::default()
        }
    }

    #[test]
    fn slot_counts_add_to_the_same_key_and_new_keys_are_appended() {
        let key = |tgid| TaskKey {
            dev: 1,
            tgid,
            uid: 0,
            _pad: 0,
        };
        let mut tasks = vec![(key(1), counts(5)), (key(2), counts(1))];
        add_counts(
            &mut tasks,
            [
                (key(2), counts(3)),
                (key(3), counts(4)),
                (key(3), counts(1)),
            ],
        );
        let demand: Vec<(u32, u64)> = tasks
            .iter()
            .map(|(k, c)| (k.tgid, c.node_reads_demand))
            .collect();
        assert_eq!(demand, vec![(1, 5), (2, 4), (3, 5)]);
    }
}
