//! A recording as a source: its events in order, paced by their own timestamps (`--speed X`
//! runs X times faster; 0 = as fast as possible). Damage ends the replay with a warning after
//! everything before it has been delivered. The file is streamed, one block at a time.
//!
//! Paced replay wakes the way the kernel's ring buffer does: once per [`WAKE_EVERY`] events
//! due, with what is due in between taken at the run loop's refreshes
//! ([`Source::take_waiting`]). A replay then costs the loop the wakeups a live run would (at
//! 100,000 events/s about a hundred a second, not one per timer tick).
//!
//! What a recording holds besides events (its notes, its footer, where it is damaged) is kept
//! in a [`RecordingTail`]: the offline readers (`report`, `export`) run the replay through the
//! pipeline at speed 0 and read it at the end.
use std::{io::Read, path::Path, time::Duration};

use anyhow::Result;
use tracer_common::Event;

use super::{BatchFuture, Source, SourceInfo, SourceKind};
use crate::record::{
    reader::{self, Damage, Item, Reader},
    Footer, Header, Note,
};

/// Notes are kept up to this many bytes of memory (a crafted file could hold millions).
const MAX_NOTES_BYTES: usize = 32 << 20;

/// What one kept note costs against [`MAX_NOTES_BYTES`]: its text and kind, and the note
/// itself (a note with no text still takes its struct's room in the list, so that a million
/// empty notes cannot pass as free).
fn note_cost(note: &Note) -> usize {
    std::mem::size_of::<Note>() + note.text.len() + note.kind.len()
}

/// What a recording said besides its events, as far as it has been read.
#[derive(Debug, Default)]
pub struct RecordingTail {
    /// Its notes in order, as many as fit in [`MAX_NOTES_BYTES`] (each costing
    /// [`note_cost`]).
    pub notes: Vec<Note>,
    /// Notes past those, counted only.
    pub notes_omitted: u64,
    notes_bytes: usize,
    pub footer: Option<Footer>,
    /// Where the file stopped being readable, if it did.
    pub damage: Option<Damage>,
}

impl RecordingTail {
    fn note(&mut self, note: Note) {
        let cost = note_cost(&note);
        if self.notes_bytes + cost <= MAX_NOTES_BYTES {
            self.notes_bytes += cost;
            self.notes.push(note);
        } else {
            // Once one is left out, so is every later one: the kept notes stay a prefix.
            self.notes_bytes = MAX_NOTES_BYTES;
            self.notes_omitted += 1;
        }
    }
}

/// The kernel source's ring buffer wakes its reader once per this many events.
const WAKE_EVERY: usize = tracer_common::maps::RING_WAKEUP_EVENTS as usize;

pub(crate) struct ReplaySource {
    header: Header,
    tail: RecordingTail,
    /// The recording, read one block at a time: memory does not grow with its length.
    reader: Reader<Box<dyn Read + Send>>,
    /// The block being replayed, and the next event of it to hand out.
    events: Vec<Event>,
    next: usize,
    /// The latest event handed out (the end of a recording cut short).
    last_ns: Option<u64>,
    speed: f64,
    started: Option<(tokio::time::Instant, u64)>,
    now_ns: u64,
    path: String,
    /// Damage is said on stderr as it is met (a live replay); an offline reader says it
    /// itself, from the tail.
    say_damage: bool,
}

impl ReplaySource {
    pub(crate) fn open(path: &Path, speed: f64) -> Result<ReplaySource> {
        anyhow::ensure!(
            speed.is_finite() && speed >= 0.0,
            "--speed must be 0 (as fast as possible) or a positive number"
        );
        let reader = reader::open(path)?.boxed();
        Ok(ReplaySource::new(
            reader,
            path.display().to_string(),
            speed,
            true,
        ))
    }

    /// The recording at `path` as fast as it can be read, for a reader that runs it through
    /// the pipeline to its end and then reads the [`RecordingTail`] (damage is not said).
    pub(crate) fn offline(path: &Path) -> Result<ReplaySource> {
        let mut source = ReplaySource::open(path, 0.0)?;
        source.say_damage = false;
        Ok(source)
    }

    fn new(
        reader: Reader<Box<dyn Read + Send>>,
        path: String,
        speed: f64,
        say_damage: bool,
    ) -> ReplaySource {
        let header = reader.header.clone();
        ReplaySource {
            now_ns: header.clock_origin_ns,
            header,
            tail: RecordingTail::default(),
            reader,
            events: Vec::new(),
            next: 0,
            last_ns: None,
            speed,
            started: None,
            path,
            say_damage,
        }
    }

    /// Every event of the recording to `visit`, a block at a time, with no model (`whatif`
    /// replays them into the simulator). Damage is an error here: a trace cut short would be
    /// simulated as if whole.
    pub(crate) fn each_event(&mut self, visit: impl FnMut(&Event) -> Result<()>) -> Result<()> {
        match self.each_event_to_damage(visit)? {
            Some(damage) => Err(anyhow::anyhow!("{}: {damage}", self.path)),
            None => Ok(()),
        }
    }

    /// Every event before any damage to `visit`, as `each_event`; the damage, if any, is
    /// returned for the caller to say (`report --nids` counts what comes before it).
    pub(crate) fn each_event_to_damage(
        &mut self,
        mut visit: impl FnMut(&Event) -> Result<()>,
    ) -> Result<Option<Damage>> {
        let mut batch = Vec::new();
        loop {
            batch.clear();
            let more = super::batch_now(self.next_batch(&mut batch))?;
            batch.iter().try_for_each(&mut visit)?;
            if !more {
                break;
            }
        }
        Ok(self.tail.damage.clone())
    }

    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// The end of the recorded time range: the footer's, or the last event's when cut short.
    pub(crate) fn end_ns(&self) -> u64 {
        let last = self.last_ns.unwrap_or(self.header.clock_origin_ns);
        self.tail
            .footer
            .as_ref()
            .map_or(last, |f| f.end_ns.max(last))
    }

    /// Read on until a block with events is at hand; false at the end of the recording (or at
    /// damage, said once: everything before it has been replayed).
    fn refill(&mut self) -> bool {
        while self.next >= self.events.len() {
            // The used block's memory takes the next block.
            self.reader.recycle(std::mem::take(&mut self.events));
            self.next = 0;
            match self.reader.next_item() {
                None => return false,
                Some(Ok(Item::Events(events))) => {
                    self.events = events;
                    self.next = 0;
                }
                Some(Ok(Item::Footer(footer))) => self.tail.footer = Some(footer),
                Some(Ok(Item::Note(note))) => self.tail.note(note),
                Some(Err(damage)) => {
                    if self.say_damage {
                        log::warn!("{}: {damage}; replayed what comes before it", self.path);
                    }
                    self.tail.damage = Some(damage);
                    return false;
                }
            }
        }
        true
    }

    async fn fill(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        if !self.refill() {
            self.now_ns = self.end_ns();
            return Ok(false);
        }
        let end = if self.speed == 0.0 {
            self.events.len()
        } else {
            self.wait_for_batch().await;
            self.next + self.due_now().max(1)
        };
        self.hand_out(out, end);
        Ok(true)
    }

    /// Events `next..end` of the block to `out`: a whole block to an empty `out` by a swap
    /// (the usual case, a block being as many events as wake the loop), else copied.
    fn hand_out(&mut self, out: &mut Vec<Event>, end: usize) {
        if self.next == 0 && end == self.events.len() && out.is_empty() {
            // `events` is left empty, so the next refill reads a block into out's old memory.
            std::mem::swap(out, &mut self.events);
        } else {
            out.extend_from_slice(&self.events[self.next..end]);
            self.next = end;
        }
        self.now_ns = out.last().map_or(self.now_ns, |event| event.ts_ns);
        self.last_ns = Some(
            self.last_ns
                .map_or(self.now_ns, |last| last.max(self.now_ns)),
        );
    }

    /// Sleep until a batch is due in replay time: [`WAKE_EVERY`] events, or the rest of the
    /// block (cancel-safe: takes nothing).
    async fn wait_for_batch(&mut self) {
        let origin = self.header.clock_origin_ns;
        let (start, _) = *self
            .started
            .get_or_insert((tokio::time::Instant::now(), origin));
        let last = (self.next + WAKE_EVERY - 1).min(self.events.len() - 1);
        let due_ns = self.events[last].ts_ns.saturating_sub(origin) as f64 / self.speed;
        tokio::time::sleep_until(start + Duration::from_nanos(due_ns as u64)).await;
    }

    /// How many of the block's events from `next` on are due by now (0 before the start).
    fn due_now(&self) -> usize {
        let Some((start, origin)) = self.started else {
            return 0;
        };
        let elapsed = start.elapsed().as_nanos() as f64 * self.speed;
        let horizon = origin + elapsed as u64;
        self.events[self.next..].partition_point(|e| e.ts_ns <= horizon)
    }
}

impl Source for ReplaySource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKind::Replay,
            kernel: self.header.kernel.clone(),
            devices: self.header.devices.clone(),
            detail: format!(
                "{} (recorded from {}: {})",
                self.path, self.header.source, self.header.detail
            ),
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(self.fill(out))
    }

    /// What is due by now and not yet handed out (paced replay only: at speed 0 every
    /// `next_batch` hands out all it has).
    fn take_waiting(&mut self, out: &mut Vec<Event>) -> Result<()> {
        if self.speed == 0.0 {
            return Ok(());
        }
        while self.refill() {
            let due = self.due_now();
            if due == 0 {
                break;
            }
            let end = self.next + due;
            self.hand_out(out, end);
            if end < self.events.len() {
                break;
            }
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn packages_list(&self) -> Option<String> {
        self.header.packages_list.clone()
    }

    fn recording_tail(&self) -> Option<&RecordingTail> {
        Some(&self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::writer::Writer;

    /// A crafted recording of a million empty notes: the notes kept cost at most the bound
    /// (each its struct's size at least), the rest are counted, and none is lost uncounted.
    #[test]
    fn empty_notes_count_against_the_notes_bound() {
        const NOTES: u64 = 1 << 20;
        let header = Header {
            window_ns: 1_000_000_000,
            ..Header::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.nsr");
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut writer = Writer::new(file, &header).unwrap();
        let empty = Note {
            ts_ns: 0,
            kind: String::new(),
            text: String::new(),
        };
        for _ in 0..NOTES {
            writer.note(&empty).unwrap();
        }
        writer.finish(0).unwrap();
        let mut source = ReplaySource::offline(&path).unwrap();
        source.each_event(|_| Ok(())).unwrap();
        let tail = &source.tail;
        let kept = tail.notes.len();
        assert!(
            kept * std::mem::size_of::<Note>() <= MAX_NOTES_BYTES,
            "{kept} empty notes kept"
        );
        assert!(tail.notes_omitted > 0);
        assert_eq!(kept as u64 + tail.notes_omitted, NOTES);
    }
}
