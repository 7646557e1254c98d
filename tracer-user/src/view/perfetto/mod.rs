//! The Perfetto view: a replayed recording as a Perfetto protobuf trace (docs/PERFETTO.md), so
//! node reads per app sit beside everything else an Android engineer traces.
//!
//! Layout: one packet sequence, no interning, written window by window as the replay goes
//! ([`TraceBuilder`]): the clock snapshots first, then each window's new track descriptors
//! (every track is described before its first event) and its events in time order:
//! - `nodescope node cache`: counters per window (node reads demand / readahead, writes,
//!   checkpoints, restores, conversions, reclaims per queue, lost events, eager restores), the
//!   attributed memory gauges and the knob values;
//! - `f2fs [major:minor]` per device: checkpoint instants and per-window counters named the way
//!   Perfetto names its f2fs iostat tracks (`<group>.[major:minor].<key>`);
//! - `nodescope apps` / `<kind> <app>`: per-app counters per window;
//! - one process track per process (its package name for Android apps) with its counters, for
//!   the first [`MAX_PROCESS_TRACKS`]; the rest summed on `other processes`;
//! - `nodescope events`: lost events (one instant per window), knob changes and controller
//!   notes as instants. Checkpoint instants are [`MAX_CHECKPOINT_INSTANTS`] per window at most,
//!   the rest one `N more checkpoints` instant.
//!
//! Per-window counts are written at the window's start and hold until the next sample; a track
//! gets a sample in every window where its count is not zero and one zero after, so summing a
//! track's samples gives the recording's total exactly.
mod fields;
mod recording;
mod tracks;
pub(crate) use self::recording::write_trace;
pub(crate) mod wire;

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    io::{self, Write},
};

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
    /// Events shown as instants: checkpoints and lost-event markers, in time order.
    pub marks: Vec<Event>,
    pub packages: Packages,
}

/// Whether `event` is one of those shown as instants (folded per window past a bound).
pub(crate) fn is_mark(event: &Event) -> bool {
    matches!(
        event.kind(),
        Some(EventKind::Checkpoint) | Some(EventKind::Lost)
    )
}

/// The only packet sequence of the trace.
const SEQUENCE_ID: u64 = 1;

/// Checkpoint instants laid out per window at most: a recording of millions of checkpoints
/// (crafted, or a storm) would otherwise make a trace as large as itself, ten times over. The
/// rest of a window's are one `N more checkpoints` instant; the per-window `checkpoints`
/// counters count them all exactly.
pub(crate) const MAX_CHECKPOINT_INSTANTS: usize = 64;

/// Process tracks at most: each is a descriptor and counter tracks that a trace viewer lists
/// one by one, and that the layout remembers to the end (their uuids, their last samples). A
/// recording of hundreds of thousands of short-lived processes would otherwise grow memory and
/// the trace with each; past this many, processes are summed on one `other processes` track
/// per counter, so that the processes' tracks still sum to the apps' (docs/PERFETTO.md).
pub(crate) const MAX_PROCESS_TRACKS: usize = 1024;

/// The whole trace file of a recording held whole: a Perfetto `Trace` message.
#[cfg(test)]
pub(crate) fn encode(recorded: &Recorded) -> Vec<u8> {
    encode_finished(recorded).0
}

/// [`encode`], with what was left out: the marks handed to the trace as a replay does, each
/// before the window it falls in closes.
#[cfg(test)]
pub(crate) fn encode_finished(recorded: &Recorded) -> (Vec<u8>, Finished) {
    let mut trace = TraceBuilder::new(
        &recorded.header,
        recorded.packages.clone(),
        &recorded.notes,
        Vec::new(),
    )
    .unwrap();
    let mut marks = recorded.marks.iter().peekable();
    for window in &recorded.windows {
        while let Some(mark) = marks.next_if(|mark| mark.ts_ns < window.end_ns) {
            trace.mark(mark);
        }
        trace.window(window).unwrap();
    }
    marks.for_each(|mark| trace.mark(mark));
    trace.finish().unwrap()
}

/// What a written trace holds, and the recorded clock pairs it left out (each with why).
pub(crate) struct Finished {
    pub bytes: u64,
    pub windows: u64,
    pub dropped_clocks: Vec<String>,
}

/// A trace written as a replay goes: each window is laid out as it closes, with the notes and
/// instants that fall in it, written to `out` and dropped, so that memory follows the open
/// window and the tracks (bounded: [`MAX_PROCESS_TRACKS`]), not the recording's length.
pub(crate) struct TraceBuilder<W: Write> {
    layout: Layout,
    packages: Packages,
    out: W,
    /// No packet written yet (the first clears the incremental state).
    first: bool,
    /// Every timestamp is in CLOCK_MONOTONIC, converted through the clock snapshots.
    clocked: bool,
    /// The latest timestamp written: time never goes backwards in the sequence.
    written_ns: u64,
    bytes: u64,
    /// Windows laid out so far.
    windows: u64,
}

impl<W: Write> TraceBuilder<W> {
    /// A trace of a recording with `header` and `notes` (all of them, known before the
    /// windows: the clock snapshots come before any timestamp).
    pub(crate) fn new(
        header: &Header,
        packages: Packages,
        notes: &[Note],
        out: W,
    ) -> io::Result<TraceBuilder<W>> {
        let mut layout = Layout::default();
        layout.notes(notes);
        layout.knobs(header.clock_origin_ns, header.knobs);
        let mut trace = TraceBuilder {
            clocked: !layout.clocks.is_empty(),
            layout,
            packages,
            out,
            first: true,
            written_ns: 0,
            bytes: 0,
            windows: 0,
        };
        trace.clock_snapshots()?;
        Ok(trace)
    }

    /// An event of the recording, in time order: an instant if it is a mark, laid out with
    /// the next window closed.
    pub(crate) fn mark(&mut self, event: &Event) {
        self.layout.marks.add(event);
    }

    /// The next closed window, oldest first, written with the notes and marks before its end.
    pub(crate) fn window(&mut self, window: &WindowReport) -> io::Result<()> {
        self.layout.window(window, &self.packages);
        self.layout.notes_before(window.end_ns);
        self.layout.lay_out_marks(window.start_ns);
        self.windows += 1;
        self.flush()
    }

    /// The rest (notes and marks after the last window), flushed: the writer and what it holds.
    pub(crate) fn finish(mut self) -> io::Result<(W, Finished)> {
        self.layout.notes_before(u64::MAX);
        self.layout.lay_out_marks(self.written_ns);
        self.flush()?;
        self.out.flush()?;
        let finished = Finished {
            bytes: self.bytes,
            windows: self.windows,
            dropped_clocks: std::mem::take(&mut self.layout.dropped_clocks),
        };
        Ok((self.out, finished))
    }

    /// The tracks made since the last flush, then the events laid out, in time order (a
    /// stable sort keeps each track's order; an event earlier than one already written, as
    /// only a crafted recording holds, is written at that one's time).
    fn flush(&mut self) -> io::Result<()> {
        for descriptor in self.layout.tracks.take_new() {
            let mut packet = Message::new();
            packet.message(fields::trace_packet::TRACK_DESCRIPTOR, &descriptor);
            self.packet(&mut packet)?;
        }
        let mut events = std::mem::take(&mut self.layout.events);
        events.sort_by_key(|timed| timed.ts_ns);
        for timed in &events {
            let ts_ns = timed.ts_ns.max(self.written_ns);
            self.written_ns = ts_ns;
            let mut packet = Message::new();
            packet.uint(fields::trace_packet::TIMESTAMP, ts_ns);
            if self.clocked {
                packet.uint(
                    fields::trace_packet::TIMESTAMP_CLOCK_ID,
                    fields::clock_snapshot::BUILTIN_CLOCK_MONOTONIC,
                );
            }
            packet.message(fields::trace_packet::TRACK_EVENT, &timed.event);
            self.packet(&mut packet)?;
        }
        // The buffer's room is kept for the next window.
        events.clear();
        self.layout.events = events;
        Ok(())
    }

    /// The clock pairs kept, before any timestamp in CLOCK_MONOTONIC, so that every one can
    /// be converted.
    fn clock_snapshots(&mut self) -> io::Result<()> {
        use fields::clock_snapshot as cs;
        for pair in std::mem::take(&mut self.layout.clocks) {
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
            self.packet(&mut packet)?;
        }
        Ok(())
    }

    fn packet(&mut self, packet: &mut Message) -> io::Result<()> {
        use fields::trace_packet as tp;
        packet.uint(tp::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE_ID);
        if std::mem::take(&mut self.first) {
            packet.uint(tp::SEQUENCE_FLAGS, tp::SEQ_INCREMENTAL_STATE_CLEARED);
        }
        let mut wrapper = Message::new();
        wrapper.message(fields::trace::PACKET, packet);
        self.bytes += wrapper.as_bytes().len() as u64;
        self.out.write_all(wrapper.as_bytes())
    }
}

/// A track event and when it happened.
struct Timed {
    ts_ns: u64,
    event: Message,
}

/// A note as the trace shows it, at its time.
enum NoteShown {
    /// A knob change: the knob counters move, and the note is an instant.
    Knobs(Option<Knobs>, String),
    Instant(String),
}

/// The marks of the open window: at most [`MAX_CHECKPOINT_INSTANTS`] checkpoints, the rest
/// counted, and the lost-event markers summed.
#[derive(Default)]
struct Marks {
    checkpoints: Vec<(u64, u32)>,
    /// Checkpoints past those: the first's time and device (None once they differ), how many.
    more_checkpoints: Option<(u64, Option<u32>, u64)>,
    /// Lost-event markers: the first's time, how many markers, the events they count.
    lost: Option<(u64, u64, u64)>,
}

impl Marks {
    fn add(&mut self, event: &Event) {
        match event.decode() {
            Decoded::Checkpoint { .. } => {
                if self.checkpoints.len() < MAX_CHECKPOINT_INSTANTS {
                    self.checkpoints.push((event.ts_ns, event.dev));
                } else {
                    let more =
                        self.more_checkpoints
                            .get_or_insert((event.ts_ns, Some(event.dev), 0));
                    if more.1 != Some(event.dev) {
                        more.1 = None;
                    }
                    more.2 += 1;
                }
            }
            Decoded::Lost { count } => {
                let lost = self.lost.get_or_insert((event.ts_ns, 0, 0));
                lost.1 += 1;
                lost.2 += u64::from(count);
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct Layout {
    tracks: Tracks,
    /// The events of the window being laid out.
    events: Vec<Timed>,
    /// Per-window count tracks whose latest sample is not zero, before and in this window.
    nonzero_before: BTreeSet<u64>,
    nonzero_now: BTreeSet<u64>,
    /// The latest value of each gauge track.
    gauges: BTreeMap<u64, i64>,
    /// Process tracks made ([`MAX_PROCESS_TRACKS`] at most).
    processes: usize,
    /// The recording's clock (CLOCK_MONOTONIC) paired with BOOTTIME (its clock notes): with
    /// any, every packet says its clock and the trace holds the pairs as clock snapshots, so
    /// Perfetto places it on a system trace's BOOTTIME timeline, suspends included.
    clocks: Vec<ClockPair>,
    /// Clock notes that could not be snapshots (`impossible_clock`), in words.
    dropped_clocks: Vec<String>,
    /// The notes not laid out yet, in time order (the replay's notes, bounded by it).
    notes: VecDeque<(u64, NoteShown)>,
    marks: Marks,
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
        let mut others: Option<Counters> = None;
        for row in &window.processes {
            match self.process_track(row, packages) {
                Some(process) => self.reads_and_restores(ts, process, &row.counters),
                None => others
                    .get_or_insert_with(Counters::default)
                    .add(&row.counters),
            }
        }
        if let Some(others) = others {
            let track = self
                .tracks
                .uuid(TrackSpec::plain(None, names::OTHER_PROCESSES_TRACK));
            self.reads_and_restores(ts, track, &others);
        }
        self.close_window(ts);
    }

    /// A process's track, unless [`MAX_PROCESS_TRACKS`] were made before it.
    fn process_track(&mut self, row: &ProcessRow, packages: &Packages) -> Option<u64> {
        let spec = process_track(row, packages);
        if let Some(uuid) = self.tracks.known(&spec) {
            return Some(uuid);
        }
        if self.processes >= MAX_PROCESS_TRACKS {
            return None;
        }
        self.processes += 1;
        Some(self.tracks.uuid(spec))
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

    /// The recording's notes: clock pairs kept as snapshots (in the order recorded), the
    /// rest (and the pairs dropped) as instants to lay out at their time.
    fn notes(&mut self, notes: &[Note]) {
        let mut shown = Vec::new();
        for note in notes {
            if let Some(pair) = ClockPair::from_note(note) {
                match impossible_clock(&pair, self.clocks.last()) {
                    None => self.clocks.push(pair),
                    Some(why) => {
                        let said = format!(
                            "clock snapshot dropped ({why}): monotonic_ns={} boottime_ns={}",
                            pair.monotonic_ns, pair.boottime_ns
                        );
                        // In the trace too, where the dropped pair was recorded.
                        shown.push((note.ts_ns, NoteShown::Instant(said.clone())));
                        self.dropped_clocks.push(said);
                    }
                }
                continue;
            }
            let name = format!("{}: {}", note.kind, note.text);
            shown.push((
                note.ts_ns,
                if note.kind == "knobs" {
                    NoteShown::Knobs(knobs_after(&note.text), name)
                } else {
                    NoteShown::Instant(name)
                },
            ));
        }
        shown.sort_by_key(|(ts, _)| *ts);
        self.notes = shown.into();
    }

    /// The notes before `end_ns` not laid out yet: a knob change moves the knob counters;
    /// every note is an instant.
    fn notes_before(&mut self, end_ns: u64) {
        while let Some((ts, note)) = self.notes.pop_front() {
            if ts >= end_ns {
                self.notes.push_front((ts, note));
                break;
            }
            let name = match note {
                NoteShown::Knobs(knobs, name) => {
                    self.knobs(ts, knobs);
                    name
                }
                NoteShown::Instant(name) => name,
            };
            let track = self
                .tracks
                .uuid(TrackSpec::plain(None, names::EVENTS_TRACK));
            self.instant(ts, track, &name, &[]);
        }
    }

    /// The open window's marks as instants (none before `start_ns`, the window's start).
    fn lay_out_marks(&mut self, start_ns: u64) {
        let marks = std::mem::take(&mut self.marks);
        for (ts, dev) in marks.checkpoints {
            let track = self.device_track(dev);
            self.instant(ts.max(start_ns), track, names::CHECKPOINT_INSTANT, &[]);
        }
        if let Some((ts, dev, more)) = marks.more_checkpoints {
            let track = match dev {
                Some(dev) => self.device_track(dev),
                None => self
                    .tracks
                    .uuid(TrackSpec::plain(None, names::EVENTS_TRACK)),
            };
            let name = names::more_checkpoints(more);
            self.instant(ts.max(start_ns), track, &name, &[("count", more)]);
        }
        if let Some((ts, markers, count)) = marks.lost {
            let track = self
                .tracks
                .uuid(TrackSpec::plain(None, names::EVENTS_TRACK));
            let name = names::lost_instant(count, markers);
            let mut annotations = vec![("count", count)];
            if markers > 1 {
                annotations.push(("markers", markers));
            }
            self.instant(ts.max(start_ns), track, &name, &annotations);
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

    /// An instant event, with debug annotations (`count`, ...).
    fn instant(&mut self, ts_ns: u64, track: u64, name: &str, annotations: &[(&str, u64)]) {
        use fields::track_event as te;
        let mut event = Message::new();
        event
            .uint(te::TYPE, te::TYPE_INSTANT)
            .uint(te::TRACK_UUID, track)
            .string(te::NAME, name);
        for (key, value) in annotations {
            let mut annotation = Message::new();
            annotation
                .string(fields::debug_annotation::NAME, key)
                .uint(fields::debug_annotation::UINT_VALUE, *value);
            event.message(te::DEBUG_ANNOTATIONS, &annotation);
        }
        self.events.push(Timed { ts_ns, event });
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
