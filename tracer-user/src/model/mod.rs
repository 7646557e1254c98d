//! The model: every source's events become windows, per-process and per-app tables and
//! cache-wide gauges. It knows nothing about where events come from; views read it.
//!
//! Windows are cut by the events' own clock (`Event::ts_ns`) from an origin, never by when
//! the events happened to arrive, so a live run and a replay of its recording produce the same
//! windows.
mod app_tally;
pub(crate) mod apps;
pub(crate) mod cache;
pub(crate) mod cache_counters;
pub(crate) mod checkpoints;
pub(crate) mod comparison;
pub(crate) mod eager;
pub(crate) mod exact;
mod fast_hash;
pub(crate) mod lookup_times;
pub(crate) mod node_types;
pub(crate) mod recording;
mod rows;

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use tracer_common::{
    knobs::{self, Knobs},
    CheckpointPhase, Decoded, Event, EventKind,
};

use self::{cache::Population, fast_hash::FastMap, rows::WindowCounts};

pub(crate) use self::{
    apps::AppKey,
    cache::CacheGauges,
    checkpoints::{CheckpointSummary, CheckpointTracker},
    exact::{DeviceNodeCounts, ExactWindow, KernelCounts},
    rows::{AppRow, Observed, OtherApps, Process, ProcessRow, WindowReport},
};
pub use self::{
    apps::{classify, Packages},
    node_types::NodeImage,
    recording::MAX_NID_PAIRS,
};
pub use tracer_common::activity::{Counters, LatencyHistogram, PerQueue, PerReason};

/// Attributed bytes of one cache entry's bookkeeping, as the RFC's accounting counts it (see
/// docs/ARCHITECTURE.md and the simulator's accounting notes).
pub(crate) const ENTRY_BYTES: u64 = 88;

/// At most this many devices are counted apart in one window; events of others count under
/// [`OTHER_DEVICES`].
pub(crate) const MAX_DEVICES: usize = 64;

/// An idle span of up to this many empty windows is reported window by window; of a longer
/// one only the first window is (see [`Model::advance_to`]).
pub(crate) const MAX_IDLE_WINDOWS: u64 = 10_000;

/// The device number the per-device counts of devices past [`MAX_DEVICES`] go under.
pub(crate) const OTHER_DEVICES: u32 = u32::MAX;

/// A full process table retires 1/EVICT_FRACTION of itself, the least recently active.
const EVICT_FRACTION: usize = 8;

#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub window_ns: u64,
    /// Closed windows kept for sparklines.
    pub history: usize,
    /// A process with no events for this many windows is aged out into the exited row.
    pub idle_windows: u64,
    /// At most this many live processes are tracked; when full, the least recently active
    /// eighth goes at once (into the exited row).
    pub max_processes: usize,
    pub packages: Packages,
    /// A restore this soon after its conversion is eager, whatever the interval (restores
    /// within 2 x node_compress_interval are eager too): `tracer_common::knobs::EAGER_FLOOR_NS`.
    pub eager_floor_ns: u64,
    /// At most this many compressed entries' conversion times are remembered (about 60 bytes
    /// each).
    pub max_tracked_conversions: usize,
    /// An idle span of up to this many empty windows is reported window by window; of a
    /// longer one only its first window is, the rest skipped whole ([`MAX_IDLE_WINDOWS`] for
    /// live views, whose lines and sparklines show the quiet; 1 for a recording read back,
    /// where an empty window's only news is that the counts dropped to zero).
    pub max_idle_windows: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            window_ns: 1_000_000_000,
            history: 300,
            idle_windows: 60,
            max_processes: 10_000,
            packages: Packages::default(),
            eager_floor_ns: knobs::EAGER_FLOOR_NS,
            max_tracked_conversions: 1 << 20,
            max_idle_windows: MAX_IDLE_WINDOWS,
        }
    }
}

impl ModelConfig {
    /// How a recording is read back (report, export): windows as it was recorded with.
    pub(crate) fn for_recording(header: &crate::record::Header, packages: Packages) -> Self {
        ModelConfig {
            // The reader has checked it is within the recording limits.
            window_ns: header.window_ns.max(1),
            idle_windows: u64::MAX,
            // Report and export need the windows that hold data (and the zero after them), so
            // that a sparse recording costs what its events cost, not what its time span does.
            max_idle_windows: 1,
            packages,
            ..ModelConfig::default()
        }
    }
}

pub struct Model {
    config: ModelConfig,
    origin_ns: Option<u64>,
    /// Index of the window events are going into now.
    current: u64,
    /// Whether anything (an event, a kernel reading) went into the open window.
    open_touched: bool,
    /// The latest time the model was advanced to (events' clock).
    latest_ns: u64,
    ages: eager::ConversionAges,
    /// Eager restores in the window being filled, and since the start.
    eager_restores: u64,
    eager_restores_total: u64,
    /// The open window's counts.
    activity: Counters,
    /// This window's per-device counts: a short list (a phone has a device or two), searched
    /// on the event path.
    devices: Vec<(u32, DeviceNodeCounts)>,
    exact: exact::ExactTracker,
    /// The closed windows' counts, summed: the open window's are added as it closes (and to
    /// a reading, `totals`), not counted twice per event.
    totals: Counters,
    /// Processes aged out, summed.
    exited: Counters,
    exited_count: u64,
    /// Per app: live processes, totals (retired processes' included), recent windows.
    apps: app_tally::AppTallies,
    /// Boxed: a `Process` is a few KiB, and a full table that churns is rehashed now and
    /// then; moving pointers is cheaper than moving the processes (perf: 6.5 % of a daemon's
    /// samples at 100,000 events/s were that move).
    processes: FastMap<u32, Box<Process>>,
    population: Population,
    history: VecDeque<WindowReport>,
    closed: VecDeque<WindowReport>,
    observed: Observed,
    checkpoints: CheckpointTracker,
    /// Node reads by node type, once an image to tell them by is given.
    node_types: Option<node_types::NodeTypeTally>,
    /// The mechanism's own counters, when the source reads them.
    cache_counters: cache_counters::CounterTally,
}

impl Model {
    pub fn new(mut config: ModelConfig) -> Model {
        // Windows are cut by division: never by zero (the flags and the reader keep it >= 1 ms).
        config.window_ns = config.window_ns.max(1);
        let ages = eager::ConversionAges::new(config.max_tracked_conversions);
        Model {
            config,
            origin_ns: None,
            current: 0,
            open_touched: false,
            latest_ns: 0,
            ages,
            eager_restores: 0,
            eager_restores_total: 0,
            activity: Counters::default(),
            devices: Vec::new(),
            exact: exact::ExactTracker::default(),
            totals: Counters::default(),
            exited: Counters::default(),
            exited_count: 0,
            apps: app_tally::AppTallies::default(),
            processes: FastMap::default(),
            population: Population::default(),
            history: VecDeque::new(),
            closed: VecDeque::new(),
            observed: Observed::default(),
            checkpoints: CheckpointTracker::default(),
            node_types: None,
            cache_counters: cache_counters::CounterTally::default(),
        }
    }

    /// Tell node reads apart by node type from now on, by their blocks in `image`.
    pub(crate) fn classify_node_reads(&mut self, image: node_types::NodeImage) {
        self.node_types = Some(node_types::NodeTypeTally::new(image));
    }

    /// Node reads by node type since the start, when an image was given.
    pub(crate) fn node_types(&self) -> Option<&node_types::NodeTypeReads> {
        self.node_types
            .as_ref()
            .map(node_types::NodeTypeTally::total)
    }

    /// The model a recording is read back into (report, export): the recording's windows from
    /// its origin, every process kept however long it was idle.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Fix the start of window 0. Without it the first event's time is used.
    pub(crate) fn start_at(&mut self, origin_ns: u64) {
        if self.origin_ns.is_none() {
            self.origin_ns = Some(origin_ns);
        }
    }

    /// Saturating: a crafted time far in the future must not overflow the grid.
    fn window_end(&self, index: u64) -> u64 {
        let length = (index.saturating_add(1)).saturating_mul(self.config.window_ns);
        self.origin_ns.unwrap_or(0).saturating_add(length)
    }

    /// When the window events are going into now ends, in the events' clock.
    pub(crate) fn open_window_end_ns(&self) -> u64 {
        self.window_end(self.current)
    }

    /// Time since window 0 began, up to the latest event or `advance_to` (0 before either).
    pub(crate) fn elapsed_ns(&self) -> u64 {
        self.latest_ns.saturating_sub(self.origin_ns.unwrap_or(0))
    }

    /// Close every window that ends at or before `now_ns` (in the events' clock). An idle span
    /// of up to `max_idle_windows` empty windows ([`ModelConfig`]) is reported window by
    /// window; of a longer one only the first window is reported (a count's drop to zero has
    /// its time) and the rest is skipped whole, so that the work and memory follow the windows
    /// that hold data, not the time span (the reports' `index` and `start_ns` show the gap).
    pub(crate) fn advance_to(&mut self, now_ns: u64) {
        let Some(origin) = self.origin_ns else {
            return;
        };
        self.latest_ns = self.latest_ns.max(now_ns);
        // The window `now_ns` falls in: every one before it closes.
        let target = now_ns.saturating_sub(origin) / self.config.window_ns;
        if self.current >= target {
            return;
        }
        let touched = self.open_touched;
        // The open window: with data, or itself the first of an idle span.
        self.close_current();
        // Every window from here to the target is empty: nothing was ingested since.
        if target - self.current > self.config.max_idle_windows {
            if touched {
                // Of a long idle span the first window is reported, the rest skipped at once.
                self.close_current();
            }
            self.current = target;
        }
        while self.current < target {
            self.close_current();
        }
    }

    pub fn ingest(&mut self, event: &Event) {
        self.start_at(event.ts_ns);
        self.advance_to(event.ts_ns);
        self.open_touched = true;
        // Decoded once here: every table below reads the same meaning of the event.
        let decoded = event.decode();
        if let Decoded::Counter(reading) = decoded {
            self.cache_counters
                .observe(event.dev, event.ts_ns, &reading);
            return;
        }
        self.activity.record(&decoded);
        self.population.apply(&decoded);
        self.record_device(event, &decoded);
        self.checkpoints.ingest_decoded(event, &decoded);
        if let Some(age) = self.ages.restored_after(event, &decoded) {
            if age < self.eager_ns() {
                self.eager_restores += 1;
                self.eager_restores_total += 1;
            }
        }
        if attributable(event) {
            self.record_process(event, &decoded);
        }
        if let (Some(tally), Decoded::NodeRead { nid, readahead, .. }) =
            (&mut self.node_types, decoded)
        {
            tally.count(event.dev, nid, readahead);
        }
    }

    /// max(2 x the interval in force (the default when unknown), the eager floor).
    fn eager_ns(&self) -> u64 {
        let interval_ms = self
            .observed
            .knobs
            .map_or(knobs::DEFAULT_INTERVAL_MS, |k| k.interval_ms);
        knobs::eager_span_with_floor_ns(interval_ms, self.config.eager_floor_ns)
    }

    /// Node reads, node writes and checkpoints per device. On the event path: the raw kind
    /// byte is compared, most events (the cache's own) return at once.
    fn record_device(&mut self, event: &Event, decoded: &Decoded) {
        let count: fn(&mut DeviceNodeCounts) = match decoded {
            Decoded::NodeRead { .. } => |counts| counts.node_reads += 1,
            Decoded::NodeWrite { .. } => |counts| counts.node_writes += 1,
            // A checkpoint counts once, at its finish (its other phases are events too).
            Decoded::Checkpoint {
                phase: CheckpointPhase::FinishCheckpoint,
                ..
            } => |counts| counts.checkpoints += 1,
            _ => return,
        };
        let at = match self.devices.iter().position(|(dev, _)| *dev == event.dev) {
            Some(at) => at,
            None if self.devices.len() < MAX_DEVICES => {
                self.devices.push((event.dev, DeviceNodeCounts::default()));
                self.devices.len() - 1
            }
            // A crafted recording could name a device per event: the rest go under one row.
            None => self.other_devices_row(),
        };
        count(&mut self.devices[at].1);
    }

    fn other_devices_row(&mut self) -> usize {
        match self
            .devices
            .iter()
            .position(|(dev, _)| *dev == OTHER_DEVICES)
        {
            Some(at) => at,
            None => {
                self.devices
                    .push((OTHER_DEVICES, DeviceNodeCounts::default()));
                self.devices.len() - 1
            }
        }
    }

    /// The knob values in force (read from their files by the pipeline): the eager time
    /// depends on the interval.
    pub(crate) fn observe_knobs(&mut self, knobs: Option<Knobs>) {
        self.observed.knobs = knobs;
    }

    /// The source's gauges: the budget it holds the cache to, its own memory pressure.
    pub(crate) fn observe_gauges(
        &mut self,
        budget_bytes: Option<u64>,
        memory_pressure: Option<f64>,
    ) {
        self.observed.budget_bytes = budget_bytes;
        self.observed.memory_pressure = memory_pressure;
    }

    /// A reading of the kernel's exact counters: what changed since the previous one belongs
    /// to the window open now.
    pub(crate) fn observe_kernel(&mut self, reading: &KernelCounts) {
        self.open_touched = true;
        self.exact.observe(reading);
    }

    pub fn observed(&self) -> &Observed {
        &self.observed
    }

    /// Close the open window early, at `now_ns`, when it holds anything: the last, partial
    /// window of a run whose counts must not be left out. Returns it (also in `take_closed`).
    pub fn finish(&mut self, now_ns: u64) -> Option<WindowReport> {
        self.origin_ns?;
        self.advance_to(now_ns);
        let empty = self.activity.is_empty() && self.exact.open_is_empty();
        if empty || now_ns <= self.window_end(self.current) - self.config.window_ns {
            return None;
        }
        let mut report = self.close_report(self.current);
        report.end_ns = now_ns;
        // The next window starts on the grid again; this one is not reported twice.
        self.current += 1;
        self.open_touched = false;
        self.closed.push_back(report.clone());
        Some(report)
    }

    fn record_process(&mut self, event: &Event, decoded: &Decoded) {
        let current = self.current;
        let process = match self.processes.get_mut(&event.tgid) {
            Some(process) => process,
            None => self.insert_process(event),
        };
        process.window.record(decoded, current);
        process.total.record(decoded);
        let slot = process.app_slot;
        self.apps.record(slot, decoded, current);
    }

    fn insert_process(&mut self, event: &Event) -> &mut Process {
        if self.processes.len() >= self.config.max_processes {
            self.evict_least_recent();
        }
        let comm = String::from_utf8_lossy(event.comm_bytes()).into_owned();
        let app = apps::classify(&self.config.packages, event.uid, &comm);
        let app_slot = self.apps.join(&app, self.current);
        self.processes
            .entry(event.tgid)
            .or_insert(Box::new(Process {
                tgid: event.tgid,
                comm,
                uid: event.uid,
                app,
                total: Counters::default(),
                window: WindowCounts::new(self.current),
                app_slot,
            }))
    }

    /// Retire the least recently active eighth of the table at once. One at a time, every new
    /// process of a full table scanned all of them: with thousands of short-lived processes
    /// that scan was most of the daemon's CPU; in bulk it is paid once per eighth.
    fn evict_least_recent(&mut self) {
        let mut by_age: Vec<(u64, u32)> = self
            .processes
            .values()
            .map(|p| (p.window.index(), p.tgid))
            .collect();
        let batch = (self.config.max_processes / EVICT_FRACTION).clamp(1, by_age.len().max(1));
        if by_age.len() > batch {
            by_age.select_nth_unstable(batch - 1);
        }
        for &(_, tgid) in by_age.iter().take(batch) {
            self.retire(tgid);
        }
    }

    fn retire(&mut self, tgid: u32) {
        if let Some(process) = self.processes.remove(&tgid) {
            self.exited.add(&process.total);
            self.exited_count += 1;
            self.apps.leave(process.app_slot, self.config.max_processes);
        }
    }

    /// The report of window `index` (the open one), its per-window state reset.
    fn close_report(&mut self, index: u64) -> WindowReport {
        let activity = std::mem::take(&mut self.activity);
        self.totals.add(&activity);
        // Before the kernel's counts replace any: these are the events received.
        let events = activity.events();
        let mut report = WindowReport {
            index,
            start_ns: self.window_end(index) - self.config.window_ns,
            end_ns: self.window_end(index),
            activity,
            totals: self.totals,
            processes: self.active_rows(index),
            devices: std::mem::take(&mut self.devices).into_iter().collect(),
            events,
            cache: self.population.gauges(),
            eager_restores: std::mem::take(&mut self.eager_restores),
            eager_restores_total: self.eager_restores_total,
            exact: self.exact.close(),
            checkpoint: self.checkpoints.close_window(),
            checkpoint_total: *self.checkpoints.total(),
            node_types: self.node_types.as_mut().map(|t| t.close_window()),
            counters: None,
        };
        self.apply_exact(&mut report);
        self.apply_counters(&mut report);
        report
    }

    /// With the mechanism's own counters, the kinds they count are theirs in the window's
    /// totals and since the start, and so are the entries per queue; the rows of processes
    /// keep the events' counts.
    fn apply_counters(&mut self, report: &mut WindowReport) {
        if self.cache_counters.is_empty() {
            return;
        }
        self.cache_counters.overlay(&mut report.activity, false);
        self.cache_counters.overlay(&mut report.totals, true);
        if let Some(gauges) = self.cache_counters.gauges() {
            report.cache = gauges;
        }
        report.counters = Some(self.cache_counters.totals(true));
        self.cache_counters.close_window();
    }

    /// With the kernel's exact counts, node reads, node writes and checkpoints are the
    /// kernel's: in the window's totals, its processes (those only the counters saw
    /// included) and its devices. The events still give everything else.
    fn apply_exact(&self, report: &mut WindowReport) {
        let Some(exact) = &report.exact else {
            return;
        };
        exact::set_counts(&mut report.activity, &exact.totals);
        exact::set_counts(&mut report.totals, &exact.cumulative);
        for row in &mut report.processes {
            exact::set_counts(&mut row.counters, &exact::ExactTotals::default());
        }
        for (&tgid, process) in &exact.processes {
            let at = match report.processes.iter().position(|row| row.pid == tgid) {
                Some(at) => at,
                None => {
                    let app = apps::classify(&self.config.packages, process.uid, &process.comm);
                    report.processes.push(ProcessRow {
                        pid: tgid,
                        comm: process.comm.clone(),
                        uid: process.uid,
                        app: app.name().to_string(),
                        counters: Counters::default(),
                    });
                    report.processes.len() - 1
                }
            };
            exact::set_counts(&mut report.processes[at].counters, &process.totals());
        }
        report.processes.retain(|row| !row.counters.is_empty());
        report.processes.sort_by_key(|row| row.pid);
        report.devices = exact.devices.clone();
    }

    fn close_current(&mut self) {
        let index = self.current;
        let mut report = self.close_report(index);
        self.age_out(index);
        // The history keeps a window's counts, not its per-process rows (the closed windows
        // carry those to the views): 300 windows of 10,000 active processes were 2 GB, and
        // nothing that reads the history reads them (issue 52).
        let processes = std::mem::take(&mut report.processes);
        self.history.push_back(report.clone());
        report.processes = processes;
        while self.history.len() > self.config.history {
            self.history.pop_front();
        }
        self.closed.push_back(report);
        self.current += 1;
        self.open_touched = false;
    }

    fn active_rows(&self, index: u64) -> Vec<ProcessRow> {
        let mut rows: Vec<ProcessRow> = self
            .processes
            .values()
            .filter(|p| p.window.index() == index && !p.window.latest().is_empty())
            .map(|p| ProcessRow {
                pid: p.tgid,
                comm: p.comm.clone(),
                uid: p.uid,
                app: p.app.name().to_string(),
                counters: *p.window.latest(),
            })
            .collect();
        rows.sort_by_key(|row| row.pid);
        rows
    }

    fn age_out(&mut self, closing: u64) {
        let idle = self.config.idle_windows;
        let stale: Vec<u32> = self
            .processes
            .values()
            .filter(|p| closing.saturating_sub(p.window.index()) >= idle)
            .map(|p| p.tgid)
            .collect();
        for tgid in stale {
            self.retire(tgid);
        }
    }

    /// Windows closed since the last call, oldest first.
    pub(crate) fn take_closed(&mut self) -> Vec<WindowReport> {
        self.closed.drain(..).collect()
    }

    /// Recent closed windows, oldest first (for sparklines and the controller's rates),
    /// without their per-process rows (`processes` is empty: [`Model::take_closed`] has them).
    pub fn history(&self) -> &VecDeque<WindowReport> {
        &self.history
    }

    /// Checkpoint anatomy: the completed checkpoints, what is written since the last one.
    pub fn checkpoints(&self) -> &CheckpointTracker {
        &self.checkpoints
    }

    /// Everything since the start: the events' counts, the mechanism's counters' in place of
    /// them for the kinds the counters count.
    pub fn totals(&self) -> Counters {
        let mut totals = self.totals;
        totals.add(&self.activity);
        if !self.cache_counters.is_empty() {
            self.cache_counters.overlay(&mut totals, true);
        }
        totals
    }

    /// The cache's gauges now: the counters' when they keep entries, else the events'.
    pub fn cache(&self) -> CacheGauges {
        self.cache_counters
            .gauges()
            .unwrap_or_else(|| self.population.gauges())
    }

    pub fn process_count(&self) -> usize {
        self.processes.len()
    }

    /// Aged-out processes: how many, and their summed counters.
    pub fn exited(&self) -> (u64, &Counters) {
        (self.exited_count, &self.exited)
    }

    /// Per-app totals (live processes and those aged out), live process counts, and the
    /// activity of the last closed window.
    pub fn apps(&self) -> Vec<AppRow> {
        self.apps.rows(self.history.back().map(|w| w.index))
    }

    /// The `keep` apps ranking highest by `rank` (of an app's totals and its last closed
    /// window's counters; highest first, ties by name) and the rest summed: what the daemon
    /// sends and serves, bounded whatever the number of apps (docs/DAEMON.md).
    pub fn top_apps(
        &self,
        keep: usize,
        rank: fn(&Counters, &Counters) -> (u64, u64),
    ) -> (Vec<AppRow>, Option<OtherApps>) {
        self.apps
            .top(self.history.back().map(|w| w.index), keep, rank)
    }
}

/// Events that belong to a process. Lost-event markers and self-tests do not, nor metadata
/// writes and journal entries (the checkpoint's, counted in `checkpoints`).
fn attributable(event: &Event) -> bool {
    !matches!(
        event.kind(),
        Some(EventKind::Lost)
            | Some(EventKind::Hello)
            | Some(EventKind::MetaWrite)
            | Some(EventKind::JournalEntry)
            | Some(EventKind::Counter)
            | None
    )
}

#[cfg(test)]
mod tests;
