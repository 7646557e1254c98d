//! The Perfetto view: a replayed recording as a Perfetto protobuf trace (docs/PERFETTO.md), so
//! node reads per app sit beside everything else an Android engineer traces.
//!
//! Layout: one packet sequence, no interning. Track descriptors first (every track an event
//! uses is described), then track events in time order:
//! - `nodescope node cache`: counters per window (node reads demand / readahead, writes,
//!   checkpoints, restores, conversions, reclaims per queue, lost events, eager restores), the
//!   attributed memory gauges and the knob values;
//! - `f2fs [major:minor]` per device: checkpoint instants and per-window counters named the way
//!   Perfetto names its f2fs iostat tracks (`<group>.[major:minor].<key>`);
//! - `nodescope apps` / `<kind> <app>`: per-app counters per window;
//! - one process track per process (its package name for Android apps) with its counters;
//! - `nodescope events`: lost events, knob changes and controller notes as instants.
//!
//! Per-window counts are written at the window's start and hold until the next sample; a track
//! gets a sample in every window where its count is not zero and one zero after, so summing a
//! track's samples gives the recording's total exactly.
mod fields;
mod recording;
mod tracks;
pub(crate) use self::recording::write_trace;
pub(crate) mod wire;

use std::collections::{BTreeMap, BTreeSet};

use tracer_common::{knobs::Knobs, Decoded, Event, EventKind};

use self::{
    tracks::{TrackSpec, Tracks, Unit},
    wire::Message,
};
use crate::{
    model::{apps, AppKey, CacheGauges, Counters, DeviceNodeCounts, Packages, WindowReport},
    model::{ProcessRow, OTHER_DEVICES},
    record::{ClockPair, Header, Note},
    schema::perfetto as names,
};

/// A recording replayed through the model, whole (the tests' way to a trace; a replay lays
/// each window out as it closes, [`TraceBuilder`], and keeps none).
#[cfg(test)]
pub(crate) struct Recorded {
    pub header: Header,
    /// Every window the model closed, oldest first.
    pub windows: Vec<WindowReport>,
    pub notes: Vec<Note>,
    /// Events shown one by one, as instants: checkpoints and lost-event markers.
    pub marks: Vec<Event>,
    pub packages: Packages,
}

/// Whether `event` is one of those shown one by one, as an instant.
pub(crate) fn is_mark(event: &Event) -> bool {
    matches!(
        event.kind(),
        Some(EventKind::Checkpoint) | Some(EventKind::Lost)
    )
}

/// The only packet sequence of the trace.
const SEQUENCE_ID: u64 = 1;

/// The whole trace file of a recording held whole: a Perfetto `Trace` message.
#[cfg(test)]
pub(crate) fn encode(recorded: &Recorded) -> Vec<u8> {
    encode_finished(recorded).bytes
}

/// [`encode`], with what was left out.
#[cfg(test)]
pub(crate) fn encode_finished(recorded: &Recorded) -> Finished {
    let mut trace = TraceBuilder::new(&recorded.header, recorded.packages.clone());
    for window in &recorded.windows {
        trace.window(window);
    }
    trace.finish(&recorded.notes, &recorded.marks)
}

/// A finished trace file, and the recorded clock pairs it left out (each with why).
pub(crate) struct Finished {
    pub bytes: Vec<u8>,
    pub dropped_clocks: Vec<String>,
}

/// A trace made as a replay goes: each window is laid out as it closes and dropped, so that
/// memory follows what the trace shows (an empty window after an empty one adds nothing), not
/// the number of windows.
pub(crate) struct TraceBuilder {
    layout: Layout,
    packages: Packages,
    /// Windows laid out so far.
    pub windows: u64,
}

impl TraceBuilder {
    pub(crate) fn new(header: &Header, packages: Packages) -> TraceBuilder {
        let mut layout = Layout::default();
        layout.knobs(header.clock_origin_ns, header.knobs);
        TraceBuilder {
            layout,
            packages,
            windows: 0,
        }
    }

    /// The next closed window, oldest first.
    pub(crate) fn window(&mut self, window: &WindowReport) {
        self.layout.window(window, &self.packages);
        self.windows += 1;
    }

    /// The trace file: the windows, then the notes and the instants, in time order.
    pub(crate) fn finish(mut self, notes: &[Note], marks: &[Event]) -> Finished {
        for note in notes {
            self.layout.note(note);
        }
        for mark in marks {
            self.layout.mark(mark);
        }
        let dropped_clocks = std::mem::take(&mut self.layout.dropped_clocks);
        Finished {
            bytes: self.layout.into_trace(),
            dropped_clocks,
        }
    }
}

/// A track event and when it happened.
struct Timed {
    ts_ns: u64,
    event: Message,
}

#[derive(Default)]
struct Layout {
    tracks: Tracks,
    events: Vec<Timed>,
    /// Per-window count tracks whose latest sample is not zero, before and in this window.
    nonzero_before: BTreeSet<u64>,
    nonzero_now: BTreeSet<u64>,
    /// The latest value of each gauge track.
    gauges: BTreeMap<u64, i64>,
    /// The recording's clock (CLOCK_MONOTONIC) paired with BOOTTIME (its clock notes): with
    /// any, every packet says its clock and the trace holds the pairs as clock snapshots, so
    /// Perfetto places it on a system trace's BOOTTIME timeline, suspends included.
    clocks: Vec<ClockPair>,
    /// Clock notes that could not be snapshots (`impossible_clock`), in words.
    dropped_clocks: Vec<String>,
}

/// Why a recorded clock pair cannot be a clock snapshot, given the last one kept: BOOTTIME is
/// MONOTONIC plus the time spent suspended, so it is never below it, and neither clock goes
/// backwards. Perfetto converts every timestamp through the snapshots; an impossible one (a
/// damaged or crafted recording) would move samples to wrong places or make the trace
/// processor reject the clocks, so it is left out rather than written as recorded.
fn impossible_clock(pair: &ClockPair, last: Option<&ClockPair>) -> Option<&'static str> {
    if pair.boottime_ns < pair.monotonic_ns {
        return Some("BOOTTIME below MONOTONIC");
    }
    let last = last?;
    if pair.monotonic_ns < last.monotonic_ns || pair.boottime_ns < last.boottime_ns {
        Some("going backwards from the previous snapshot")
    } else {
        None
    }
}

impl Layout {
    fn window(&mut self, window: &WindowReport, packages: &Packages) {
        let ts = window.start_ns;
        self.cache_counts(ts, &window.activity, window.eager_restores);
        self.memory(ts, &window.cache);
        for (&dev, counts) in &window.devices {
            self.device_counts(ts, dev, counts);
        }
        self.apps(ts, &window.processes, packages);
        for row in &window.processes {
            let process = self.tracks.uuid(process_track(row, packages));
            self.reads_and_restores(ts, process, &row.counters);
        }
        self.close_window(ts);
    }

    fn cache_counts(&mut self, ts: u64, activity: &Counters, eager_restores: u64) {
        let root = self.tracks.uuid(TrackSpec::plain(None, names::CACHE_TRACK));
        let reclaims = &activity.reclaims;
        let counts = [
            (names::NODE_READS_DEMAND, activity.node_reads_demand),
            (names::NODE_READS_READAHEAD, activity.node_reads_readahead),
            (names::NODE_WRITES, activity.node_writes),
            (names::CHECKPOINTS, activity.checkpoints),
            (names::RESTORES, activity.restores),
            (names::EAGER_RESTORES, eager_restores),
            (names::RESTORE_FAILURES, activity.restore_fails),
            (names::CONVERSIONS, activity.conversions),
            (names::RECLAIMS[0], reclaims.raw),
            (names::RECLAIMS[1], reclaims.b256),
            (names::RECLAIMS[2], reclaims.b512),
            (names::RECLAIMS[3], reclaims.b1024),
            (names::LOST_EVENTS, activity.lost),
        ];
        self.counts_under(ts, root, counts);
    }

    fn memory(&mut self, ts: u64, cache: &CacheGauges) {
        let root = self.tracks.uuid(TrackSpec::plain(None, names::CACHE_TRACK));
        let bytes = [
            (names::MEMORY_RAW, cache.raw_bytes),
            (names::MEMORY_COMPRESSED, cache.compressed_bytes),
            (names::MEMORY_TOTAL, cache.attributed_bytes),
        ];
        self.gauges_under(ts, root, Unit::Bytes, bytes);
    }

    fn knobs(&mut self, ts: u64, knobs: Option<Knobs>) {
        let Some(knobs) = knobs else {
            return;
        };
        let root = self.tracks.uuid(TrackSpec::plain(None, names::CACHE_TRACK));
        let values = [
            (names::KNOB_THRESHOLD, u64::from(knobs.threshold)),
            (names::KNOB_INTERVAL, u64::from(knobs.interval_ms)),
        ];
        self.gauges_under(ts, root, Unit::Count, values);
    }

    fn device_counts(&mut self, ts: u64, dev: u32, counts: &DeviceNodeCounts) {
        let device = device_name(dev);
        let parent = self.device_track(dev);
        let counts = [
            (names::DEVICE_NODE_READS, counts.node_reads),
            (names::DEVICE_NODE_WRITES, counts.node_writes),
            (names::DEVICE_CHECKPOINTS, counts.checkpoints),
        ]
        .map(|(key, value)| (names::device_counter(&device, key), value));
        self.counts_under(ts, parent, counts);
    }

    fn device_track(&mut self, dev: u32) -> u64 {
        let name = names::device_track(&device_name(dev));
        self.tracks.uuid(TrackSpec::plain(None, name))
    }

    /// The window's processes summed per app.
    fn apps(&mut self, ts: u64, processes: &[ProcessRow], packages: &Packages) {
        let mut by_app: BTreeMap<AppKey, Counters> = BTreeMap::new();
        for row in processes {
            let app = apps::classify(packages, row.uid, &row.comm);
            by_app.entry(app).or_default().add(&row.counters);
        }
        let root = self.tracks.uuid(TrackSpec::plain(None, names::APPS_TRACK));
        for (app, counters) in &by_app {
            let track = self
                .tracks
                .uuid(TrackSpec::plain(Some(root), app_track(app)));
            self.reads_and_restores(ts, track, counters);
        }
    }

    fn reads_and_restores(&mut self, ts: u64, parent: u64, counters: &Counters) {
        let counts = [
            (names::NODE_READS_DEMAND, counters.node_reads_demand),
            (names::NODE_READS_READAHEAD, counters.node_reads_readahead),
            (names::RESTORES, counters.restores),
        ];
        self.counts_under(ts, parent, counts);
        self.timed_lookups(ts, parent, counters);
    }

    /// Timed node lookups (issue 51) in the window, where there are any (a recording without
    /// them gets no such tracks): `node lookups`, `lookups <outcome>` for each outcome seen,
    /// and `lookup wait`, their times summed, in ns (a time counter track).
    fn timed_lookups(&mut self, ts: u64, parent: u64, counters: &Counters) {
        let r = &counters.retrievals;
        let mut counts = vec![(names::NODE_LOOKUPS.to_string(), r.count())];
        for outcome in tracer_common::Outcome::ALL {
            counts.push((names::lookups_of(outcome), r.get(outcome).count));
        }
        for (name, value) in counts {
            if value != 0 {
                let track = self
                    .tracks
                    .uuid(TrackSpec::counter(parent, name, Unit::Count));
                self.count(ts, track, value);
            }
        }
        if r.wait_ns() != 0 {
            let track =
                self.tracks
                    .uuid(TrackSpec::counter(parent, names::LOOKUP_WAIT, Unit::TimeNs));
            self.count(ts, track, r.wait_ns());
        }
    }

    /// Per-window counts, each on its counter track under `parent`.
    fn counts_under(
        &mut self,
        ts: u64,
        parent: u64,
        counts: impl IntoIterator<Item = (impl Into<String>, u64)>,
    ) {
        for (name, value) in counts {
            let track = self
                .tracks
                .uuid(TrackSpec::counter(parent, name, Unit::Count));
            self.count(ts, track, value);
        }
    }

    /// Gauges in `unit`, each on its counter track under `parent`.
    fn gauges_under(
        &mut self,
        ts: u64,
        parent: u64,
        unit: Unit,
        values: impl IntoIterator<Item = (impl Into<String>, u64)>,
    ) {
        for (name, value) in values {
            let track = self.tracks.uuid(TrackSpec::counter(parent, name, unit));
            self.gauge(ts, track, value);
        }
    }

    /// A knob change moves the knob counters; every note is an instant.
    fn note(&mut self, note: &Note) {
        if let Some(pair) = ClockPair::from_note(note) {
            match impossible_clock(&pair, self.clocks.last()) {
                None => self.clocks.push(pair),
                Some(why) => {
                    let said = format!(
                        "clock snapshot dropped ({why}): monotonic_ns={} boottime_ns={}",
                        pair.monotonic_ns, pair.boottime_ns
                    );
                    // In the trace too, where the dropped pair was recorded.
                    let track = self
                        .tracks
                        .uuid(TrackSpec::plain(None, names::EVENTS_TRACK));
                    self.instant(note.ts_ns, track, &said, None);
                    self.dropped_clocks.push(said);
                }
            }
            return;
        }
        if note.kind == "knobs" {
            self.knobs(note.ts_ns, knobs_after(&note.text));
        }
        let track = self
            .tracks
            .uuid(TrackSpec::plain(None, names::EVENTS_TRACK));
        let name = format!("{}: {}", note.kind, note.text);
        self.instant(note.ts_ns, track, &name, None);
    }

    fn mark(&mut self, event: &Event) {
        match event.decode() {
            Decoded::Checkpoint { .. } => {
                let track = self.device_track(event.dev);
                self.instant(event.ts_ns, track, names::CHECKPOINT_INSTANT, None);
            }
            Decoded::Lost { count } => {
                let track = self
                    .tracks
                    .uuid(TrackSpec::plain(None, names::EVENTS_TRACK));
                let name = names::lost_instant(count);
                self.instant(event.ts_ns, track, &name, Some(u64::from(count)));
            }
            _ => {}
        }
    }

    /// A per-window count: written when not zero; the drop to zero is written by
    /// `close_window`.
    fn count(&mut self, ts: u64, track: u64, value: u64) {
        if value != 0 {
            self.nonzero_now.insert(track);
            self.counter(ts, track, value);
        }
    }

    /// Tracks that counted in the window before and not in this one go to zero.
    fn close_window(&mut self, ts: u64) {
        let before = std::mem::take(&mut self.nonzero_before);
        let idle: Vec<u64> = before.difference(&self.nonzero_now).copied().collect();
        for track in idle {
            self.counter(ts, track, 0);
        }
        self.nonzero_before = std::mem::take(&mut self.nonzero_now);
    }

    /// A gauge: written when its value changes.
    fn gauge(&mut self, ts: u64, track: u64, value: u64) {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        if self.gauges.insert(track, value) != Some(value) {
            self.counter(ts, track, value as u64);
        }
    }

    fn counter(&mut self, ts_ns: u64, track: u64, value: u64) {
        use fields::track_event as te;
        let mut event = Message::new();
        event
            .uint(te::TYPE, te::TYPE_COUNTER)
            .uint(te::TRACK_UUID, track)
            .int(te::COUNTER_VALUE, i64::try_from(value).unwrap_or(i64::MAX));
        self.events.push(Timed { ts_ns, event });
    }

    /// An instant event, with a `count` debug annotation when given.
    fn instant(&mut self, ts_ns: u64, track: u64, name: &str, count: Option<u64>) {
        use fields::track_event as te;
        let mut event = Message::new();
        event
            .uint(te::TYPE, te::TYPE_INSTANT)
            .uint(te::TRACK_UUID, track)
            .string(te::NAME, name);
        if let Some(count) = count {
            let mut annotation = Message::new();
            annotation
                .string(fields::debug_annotation::NAME, "count")
                .uint(fields::debug_annotation::UINT_VALUE, count);
            event.message(te::DEBUG_ANNOTATIONS, &annotation);
        }
        self.events.push(Timed { ts_ns, event });
    }

    /// Descriptors, then events by time (a stable sort keeps each track's order).
    fn into_trace(mut self) -> Vec<u8> {
        use fields::clock_snapshot as cs;
        self.events.sort_by_key(|timed| timed.ts_ns);
        let mut trace = Vec::new();
        let mut first = true;
        let clocked = !self.clocks.is_empty();
        let mut push = |packet: &mut Message| {
            use fields::trace_packet as tp;
            packet.uint(tp::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE_ID);
            if std::mem::take(&mut first) {
                packet.uint(tp::SEQUENCE_FLAGS, tp::SEQ_INCREMENTAL_STATE_CLEARED);
            }
            let mut wrapper = Message::new();
            wrapper.message(fields::trace::PACKET, packet);
            trace.extend_from_slice(wrapper.as_bytes());
        };
        for descriptor in self.tracks.descriptors() {
            let mut packet = Message::new();
            packet.message(fields::trace_packet::TRACK_DESCRIPTOR, &descriptor);
            push(&mut packet);
        }
        // Before any timestamp in CLOCK_MONOTONIC, so that every one can be converted.
        for pair in &self.clocks {
            let mut snapshot = Message::new();
            for (id, ns) in [
                (cs::BUILTIN_CLOCK_MONOTONIC, pair.monotonic_ns),
                (cs::BUILTIN_CLOCK_BOOTTIME, pair.boottime_ns),
            ] {
                let mut clock = Message::new();
                clock.uint(cs::CLOCK_ID, id).uint(cs::CLOCK_TIMESTAMP, ns);
                snapshot.message(cs::CLOCKS, &clock);
            }
            snapshot.uint(cs::PRIMARY_TRACE_CLOCK, cs::BUILTIN_CLOCK_BOOTTIME);
            let mut packet = Message::new();
            packet.message(fields::trace_packet::CLOCK_SNAPSHOT, &snapshot);
            push(&mut packet);
        }
        for timed in &self.events {
            let mut packet = Message::new();
            packet.uint(fields::trace_packet::TIMESTAMP, timed.ts_ns);
            if clocked {
                packet.uint(
                    fields::trace_packet::TIMESTAMP_CLOCK_ID,
                    cs::BUILTIN_CLOCK_MONOTONIC,
                );
            }
            packet.message(fields::trace_packet::TRACK_EVENT, &timed.event);
            push(&mut packet);
        }
        trace
    }
}

fn device_name(dev: u32) -> String {
    if dev == OTHER_DEVICES {
        "other".to_string()
    } else {
        crate::system::major_minor(dev)
    }
}

/// `app com.whatsapp`, `kernel kworker`, `program fio`: the kind as report's JSON spells it.
fn app_track(app: &AppKey) -> String {
    let kind = match app {
        AppKey::App(_) => "app",
        AppKey::Kernel(_) => "kernel",
        AppKey::Program(_) => "program",
    };
    names::app_track(kind, app.name())
}

/// A process track: named after its app's package for Android apps, else its comm.
fn process_track(row: &ProcessRow, packages: &Packages) -> TrackSpec {
    let name = match apps::classify(packages, row.uid, &row.comm) {
        AppKey::App(package) => package,
        _ => row.comm.clone(),
    };
    TrackSpec::process(row.pid, name)
}

/// The values after a knob change, from its note's text (`tracer_common::knobs::shown`, twice:
/// `before -> after`). None when they were not readable.
fn knobs_after(text: &str) -> Option<Knobs> {
    let after = text.rsplit(" -> ").next()?;
    let mut words = after.split_whitespace();
    let threshold = match (words.next(), words.next()) {
        (Some("threshold"), Some(value)) => value.strip_suffix('%')?.parse().ok()?,
        _ => return None,
    };
    let interval_ms = match (words.next(), words.next(), words.next()) {
        (Some("interval"), Some(value), Some("ms")) => value.parse().ok()?,
        _ => return None,
    };
    Some(Knobs {
        threshold,
        interval_ms,
    })
}

#[cfg(test)]
mod tests;
