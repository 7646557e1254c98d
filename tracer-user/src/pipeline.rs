//! The first link of the arrow: one source's events and observations into the model.
//!
//! Every subcommand that shows or keeps node-cache activity (top, stream, record) runs the same
//! pipeline: events go into the model as they arrive; at each refresh the pipeline observes
//! what the source knows besides events (the knob values in their files, the source's budget
//! and memory pressure, the kernel's exact counters) and closes the windows that the source's
//! clock has passed. Views read the model and the windows the refresh returns; nothing else
//! writes into the model.
use std::path::PathBuf;

use anyhow::Result;
use tracer_common::{knobs::Knobs, Event};

use crate::{
    model::{Model, ModelConfig, WindowReport},
    source::{knobs::KnobFiles, BatchFuture, Source, SourceInfo},
};

/// What [`Pipeline::finish`] closed.
pub struct Finished {
    /// Whole windows the clock had passed.
    pub closed: Vec<WindowReport>,
    /// The open window, closed early at the stop (None when it held nothing).
    pub last: Option<WindowReport>,
}

/// Where the kernel keeps the knobs, for sources that do not say.
pub(crate) const SYSFS_ROOT: &str = "/sys/fs/f2fs";

/// A change of the knob values between two refreshes (by a person, a script or a controller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnobChange {
    /// The source's clock when the change was seen.
    pub(crate) at_ns: u64,
    pub before: Option<Knobs>,
    pub after: Option<Knobs>,
}

impl KnobChange {
    /// "before -> after", each side as `tracer_common::knobs::shown` writes a pair.
    pub(crate) fn describe(&self) -> String {
        use tracer_common::knobs::shown;
        format!("{} -> {}", shown(self.before), shown(self.after))
    }
}

/// What one refresh found.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Windows closed since the last refresh, oldest first.
    pub closed: Vec<WindowReport>,
    pub knob_change: Option<KnobChange>,
}

pub struct Pipeline {
    source: Box<dyn Source>,
    model: Model,
    info: SourceInfo,
    knobs: Option<KnobFiles>,
    /// The knob values as last read: `None` before the first read, `Some(None)` when they
    /// could not be read.
    last_knobs: Option<Option<Knobs>>,
    /// Window 0 begins here, in the source's clock.
    origin_ns: u64,
    /// Events at or after this time are not taken (a duration in the source's clock).
    end_ns: Option<u64>,
    source_open: bool,
}

/// What [`Pipeline::drain`] hands out, in order.
pub(crate) enum Drained<'a> {
    /// A window closed by the event handed out next.
    Window(&'a WindowReport),
    Event(&'a Event),
}

impl Pipeline {
    /// The decisions pane's line for a knob change this refresh found: the window it falls in
    /// and the change.
    pub(crate) fn knob_change_line(&self, change: &KnobChange) -> String {
        let window = self.model().history().back().map_or(0, |w| w.index + 1);
        format!("window {window}: knobs {}", change.describe())
    }

    /// Start the model's windows at the source's current time. The knob files are those of
    /// the source's first device, under the source's knob directory (else the kernel's). A
    /// source with exact counters is read at once, so every window reports them.
    pub fn new(source: Box<dyn Source>, config: ModelConfig) -> Result<Pipeline> {
        let info = source.info();
        let root = source
            .knob_root()
            .unwrap_or_else(|| PathBuf::from(SYSFS_ROOT));
        let knobs = info.devices.first().map(|dev| KnobFiles::new(&root, dev));
        let mut model = Model::new(config);
        if let Some(image) = source.node_image() {
            model.classify_node_reads(image);
        }
        let origin_ns = source.now_ns();
        model.start_at(origin_ns);
        let mut pipeline = Pipeline {
            source,
            model,
            info,
            knobs,
            last_knobs: None,
            origin_ns,
            end_ns: None,
            source_open: true,
        };
        pipeline.observe();
        pipeline.read_kernel_counts()?;
        Ok(pipeline)
    }

    /// A pipeline for a source read to its end at once (a recording at speed 0, for `report`
    /// and `export`): no knob files are read (they are this machine's, not the recording's).
    pub(crate) fn offline(source: Box<dyn Source>, config: ModelConfig) -> Result<Pipeline> {
        let mut pipeline = Pipeline::new(source, config)?;
        pipeline.knobs = None;
        pipeline.last_knobs = None;
        pipeline.model.observe_knobs(None);
        Ok(pipeline)
    }

    /// Run a source that never waits (a recording at speed 0) to its end, without a runtime,
    /// one event at a time: the windows an event closes first (none is held: a long recording
    /// costs what one window costs), then the event, so that every event is seen after the
    /// windows that end before it (a reader that lays each window out with the events in it,
    /// as `export --perfetto` does; the report tallies the events and drops the windows).
    pub(crate) fn drain(&mut self, mut on: impl FnMut(Drained<'_>)) -> Result<()> {
        let mut batch = Vec::new();
        loop {
            batch.clear();
            let more = crate::source::batch_now(self.next_batch(&mut batch))?;
            for event in &batch {
                self.model.ingest(event);
                for window in self.model.take_closed() {
                    on(Drained::Window(&window));
                }
                on(Drained::Event(event));
            }
            if !more {
                return Ok(());
            }
        }
    }

    /// Close every window up to `end_ns`, and the one open then on its grid end (so that its
    /// counts are laid out like all others'): the windows closed.
    pub(crate) fn close_through(&mut self, end_ns: u64) -> Vec<WindowReport> {
        self.model.advance_to(end_ns);
        let open_end = self.model.open_window_end_ns();
        self.model.advance_to(open_end);
        self.model.take_closed()
    }

    /// The source's exact counters into the window open now.
    fn read_kernel_counts(&mut self) -> Result<()> {
        if let Some(reading) = self.source.kernel_counts()? {
            self.model.observe_kernel(&reading);
        }
        Ok(())
    }

    /// Tell node reads apart by node type by `image` (`--image`), instead of the source's own.
    pub fn with_node_image(mut self, image: crate::model::NodeImage) -> Pipeline {
        self.model.classify_node_reads(image);
        self
    }

    /// Take no event at or after `end_ns` (the source's clock).
    pub fn until(mut self, end_ns: Option<u64>) -> Pipeline {
        self.end_ns = end_ns;
        self
    }

    /// Wait for the source's next events (cancel-safe, as [`Source::next_batch`]).
    pub fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        self.source.next_batch(out)
    }

    /// What the source already holds without waiting (the kernel's ring buffer between its
    /// wake-ups, which come once per batch) into the model and into `batch`, for a recorder
    /// to write them too. Returns whether the end time was reached, as [`Pipeline::ingest`].
    pub(crate) fn take_waiting(&mut self, batch: &mut Vec<Event>) -> Result<bool> {
        self.source.take_waiting(batch)?;
        if batch.is_empty() {
            return Ok(false);
        }
        self.ingest(batch)
    }

    /// Put a batch into the model, cut at the end time. Returns whether the end was reached;
    /// `batch` then holds only the events taken (for a recorder to write the same ones).
    pub fn ingest(&mut self, batch: &mut Vec<Event>) -> Result<bool> {
        let end = self.end_ns.unwrap_or(u64::MAX);
        let taken = batch.iter().position(|e| e.ts_ns >= end);
        if let Some(at) = taken {
            batch.truncate(at);
        }
        // Events past the open window close it: what the exact counters gained so far is
        // that window's (the same reading as at a refresh, at most once per window).
        if batch
            .last()
            .is_some_and(|e| e.ts_ns >= self.model.open_window_end_ns())
        {
            self.read_kernel_counts()?;
        }
        for event in batch.iter() {
            self.model.ingest(event);
        }
        Ok(taken.is_some())
    }

    /// The source said it has ended (a recording replayed to its footer): its clock no longer
    /// moves, so the windows are closed here through the time it ended at, the last one early
    /// and partial when it holds anything (as a live run's stop closes it). Without this a
    /// replay lost its last partial window: a 0.5 s recording showed no window at all, and a
    /// 2.5 s one stopped at 2.0 s. The windows are queued for the next refresh (a `top` or a
    /// daemon that serves on) or for [`Pipeline::finish`] (a run that stops at the end).
    pub(crate) fn source_ended(&mut self) -> Result<()> {
        self.source_open = false;
        self.read_kernel_counts()?;
        let end = self.now_ns().min(self.end_ns.unwrap_or(u64::MAX));
        // Queued as closed by the model: taken with the others, not apart.
        let _partial = self.model.finish(end);
        Ok(())
    }

    pub(crate) fn is_source_open(&self) -> bool {
        self.source_open
    }

    /// Observe the knobs and gauges (and, when a window is due to close, the exact
    /// counters), then close the windows the source's clock has passed (up to the end time).
    pub fn refresh(&mut self) -> Result<Refreshed> {
        let knob_change = self.observe();
        // An ended source's clock stays where it ended: its last windows close, no more.
        let now = self.now_ns().min(self.end_ns.unwrap_or(u64::MAX));
        // The exact counters only matter per window: read them (a whole per-CPU map) once, as
        // the open window closes; what they gained belongs to it.
        if now >= self.model.open_window_end_ns() {
            self.read_kernel_counts()?;
        }
        self.model.advance_to(now);
        Ok(Refreshed {
            closed: self.model.take_closed(),
            knob_change,
        })
    }

    /// The end of a run: one last reading of the exact counters, then the windows the
    /// source's clock passed since the last refresh (a stop can arrive between a window's end
    /// and the refresh that would have closed it) and the open window, closed early when it
    /// holds anything (so that nothing counted is left out).
    pub fn finish(&mut self) -> Result<Finished> {
        self.read_kernel_counts()?;
        let now = self.now_ns().min(self.end_ns.unwrap_or(u64::MAX));
        let last = self.model.finish(now);
        let mut closed = self.model.take_closed();
        if last.is_some() {
            // model.finish also queued it as closed: it is returned apart, as partial.
            closed.pop();
        }
        Ok(Finished { closed, last })
    }

    /// The source's word on its own bookkeeping, for the end of a run.
    pub(crate) fn closing_note(&self) -> Option<String> {
        self.source.closing_note()
    }

    /// Knob values and the source's gauges into the model; the knob change, if any.
    fn observe(&mut self) -> Option<KnobChange> {
        self.model
            .observe_gauges(self.source.budget_bytes(), self.source.memory_pressure());
        let values = self.knobs.as_ref()?.read();
        self.model.observe_knobs(values);
        let before = self.last_knobs.replace(values)?;
        (before != values).then(|| KnobChange {
            at_ns: self.now_ns(),
            before,
            after: values,
        })
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    pub fn source(&self) -> &dyn Source {
        &*self.source
    }

    /// The knob values as last read (None: the source has no knob files).
    pub fn knobs(&self) -> Option<Knobs> {
        self.last_knobs.flatten()
    }

    /// The end time, when there is one (the source's clock).
    pub fn end_ns(&self) -> Option<u64> {
        self.end_ns
    }

    /// Whether the source's clock has reached the end time.
    pub(crate) fn is_past_end(&self) -> bool {
        self.end_ns.is_some_and(|end| self.now_ns() >= end)
    }

    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }

    pub fn now_ns(&self) -> u64 {
        self.source.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    };

    use tracer_common::{Event, EventKind};

    use super::*;
    use crate::source::SourceKind;

    const SECOND: u64 = 1_000_000_000;

    /// A source whose clock the test sets; it has no events of its own.
    struct Clocked(Arc<AtomicU64>);

    impl Source for Clocked {
        fn info(&self) -> SourceInfo {
            SourceInfo {
                kind: SourceKind::Sim,
                kernel: "test".into(),
                devices: Vec::new(),
                detail: String::new(),
            }
        }

        fn next_batch<'a>(&'a mut self, _out: &'a mut Vec<Event>) -> BatchFuture<'a> {
            Box::pin(async { Ok(true) })
        }

        fn now_ns(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn a_stop_after_a_window_ended_but_before_its_refresh_loses_nothing() {
        let clock = Arc::new(AtomicU64::new(0));
        let config = ModelConfig {
            window_ns: SECOND,
            ..ModelConfig::default()
        };
        let mut pipeline = Pipeline::new(Box::new(Clocked(clock.clone())), config).unwrap();
        let mut batch = vec![Event::new(EventKind::NodeRead, SECOND / 2).task(7)];
        pipeline.ingest(&mut batch).unwrap();
        assert!(pipeline.refresh().unwrap().closed.is_empty());
        // Window 0 ends at 1 s; the stop comes at 1.2 s, before a refresh closed it.
        clock.store(SECOND + SECOND / 5, Ordering::SeqCst);
        let finished = pipeline.finish().unwrap();
        assert_eq!(
            finished.closed.len(),
            1,
            "window 0 is returned, not dropped"
        );
        assert_eq!(finished.closed[0].totals.node_reads_demand, 1);
        assert!(finished.last.is_none(), "window 1 held nothing");
    }
}
