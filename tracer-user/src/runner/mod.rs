//! The one run loop of every live command (`top`, `stream`, `record`, `daemon`): a source's
//! events through the pipeline into the model, the controller's steps on the model, and each
//! refresh's result handed to a list of sinks (the TUI, JSON lines, a recorder, a rolling
//! recording, the daemon's socket, OpenMetrics). The commands differ only in their sinks and
//! in a few [`RunOptions`].
//!
//! Signals are handled here, once. A stop drains the source once ([`Pipeline::take_waiting`]),
//! closes the last windows ([`Pipeline::finish`]) and gives them to every sink.
//!
//! The loop sleeps when there is nothing to do: it refreshes as the model's open window ends
//! (at least once a second), and at the frame rate only while a sink shows frames (the TUI, a
//! daemon client) or a controller runs. Events wake it as the source delivers them (the
//! kernel's ring buffer once per batch); what is left in the source is taken at each refresh.
mod deadline;
mod pane;
pub(crate) mod signals;

use std::time::Duration;

use anyhow::Result;
use ratatui::crossterm::event::KeyEvent;
use tokio::sync::mpsc;
use tracer_common::Event;

pub(crate) use self::pane::{DecisionsPane, LineKind, PaneLine};
use self::{
    deadline::Deadline,
    signals::{Received, SignalWaiter},
};
use crate::{
    control::Tuning,
    model::WindowReport,
    pipeline::{Finished, KnobChange, Pipeline},
};

/// The longest the loop sleeps without a refresh: windows close, knobs are read back, a
/// recording is flushed at least this often.
const LONGEST_SLEEP: Duration = Duration::from_secs(1);
/// The shortest: a window that ends right now is closed a moment later, not in a busy loop.
const SHORTEST_SLEEP: Duration = Duration::from_millis(1);

/// What a sink tells the loop after a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// Stop the run, for this reason ("quit", "standard output closed", ...).
    Stop(String),
}

/// Something from outside the loop that a sink answers: a key press for the TUI, a scrape
/// for the OpenMetrics sink.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    /// What a sink wants changed outside the loop (a client connected to the daemon): refresh
    /// now, and ask the sinks again how often to.
    Wake,
    /// Render the exposition now and send it here (taken by the sink that answers).
    Scrape(Option<tokio::sync::oneshot::Sender<String>>),
}

/// What sinks see at a refresh.
pub(crate) struct Refresh<'a> {
    pub pipeline: &'a Pipeline,
    /// Windows closed since the last refresh, oldest first.
    pub closed: &'a [WindowReport],
    pub knob_change: Option<&'a KnobChange>,
    /// The pane's lines new since the last refresh (knob change, decisions, notices).
    pub new_lines: &'a [PaneLine],
    pub pane: &'a DecisionsPane,
    /// The controller's mode for a header ("on vdb"), when one runs.
    pub tuning_mode: Option<String>,
}

/// What sinks see at the end.
pub(crate) struct End<'a> {
    pub pipeline: &'a Pipeline,
    pub finished: &'a Finished,
    /// Why the run stopped.
    pub stop: &'a Stopped,
}

/// A view of the run: each takes what it needs when it needs it.
pub(crate) trait Sink {
    /// The events the pipeline just took, in order (a recorder writes these very events).
    fn events(&mut self, _batch: &[Event], _pipeline: &Pipeline) -> Result<()> {
        Ok(())
    }

    /// A refresh: windows closed, knobs read back, the controller stepped.
    fn refresh(&mut self, _at: &Refresh) -> Result<Flow> {
        Ok(Flow::Continue)
    }

    /// An input from outside (ignored by the sinks it is not for).
    fn input(&mut self, _input: &mut Input, _pipeline: &Pipeline) -> Result<Flow> {
        Ok(Flow::Continue)
    }

    /// Whether it shows frames now (a screen, a connected client): the loop then refreshes at
    /// the frame rate instead of once per window.
    fn wants_frames(&self) -> bool {
        false
    }

    /// Lines for the decisions pane (and every sink) since it was last asked: a sink that had
    /// to give up something (a recording on a full disk) says so here instead of failing.
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// The source ended and the run goes on ([`SourceEnd::Serve`]).
    fn source_ended(&mut self) {}

    /// The run stopped: the last windows, once.
    fn finish(&mut self, _end: &End) -> Result<()> {
        Ok(())
    }
}

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stopped {
    Signal(Received),
    /// The source had no more events.
    SourceEnded,
    /// The pipeline's end time was reached (`--duration` in the source's clock).
    DurationReached,
    /// A sink asked to stop.
    Sink(String),
}

impl Stopped {
    pub(crate) fn describe(&self) -> String {
        match self {
            Stopped::Signal(signal) => signal.name().to_string(),
            Stopped::SourceEnded => "source ended".into(),
            Stopped::DurationReached => "duration reached".into(),
            Stopped::Sink(reason) => reason.clone(),
        }
    }
}

/// When the source ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceEnd {
    /// The run stops (`stream`, `record`).
    Stop,
    /// The run goes on showing the last state until a signal or a sink stops it (`top`,
    /// `daemon`).
    Serve,
}

/// What SIGHUP does.
pub(crate) enum Hangup {
    /// Stop, as SIGTERM does.
    Stop,
    /// Call this and go on (the daemon reopens its log).
    Call(Box<dyn FnMut()>),
}

pub(crate) struct RunOptions {
    /// How often to refresh while a sink shows frames or a controller runs.
    pub frame_every: Duration,
    pub source_end: SourceEnd,
    pub hangup: Hangup,
}

/// The frame rate of the live view and of a daemon's clients.
pub(crate) const FRAME_EVERY: Duration = Duration::from_millis(250);

impl RunOptions {
    /// The commands that print or record: stop at the source's end and at SIGHUP.
    pub(crate) fn stopping() -> RunOptions {
        RunOptions {
            frame_every: FRAME_EVERY,
            source_end: SourceEnd::Stop,
            hangup: Hangup::Stop,
        }
    }

    /// The commands that show the last state until told to stop (`top`, `daemon`).
    pub(crate) fn serving(hangup: Hangup) -> RunOptions {
        RunOptions {
            frame_every: FRAME_EVERY,
            source_end: SourceEnd::Serve,
            hangup,
        }
    }
}

pub(crate) struct Runner {
    pipeline: Pipeline,
    tuning: Option<Tuning>,
    pane: DecisionsPane,
    options: RunOptions,
    inputs: mpsc::UnboundedReceiver<Input>,
    input_sender: mpsc::UnboundedSender<Input>,
}

impl Runner {
    /// A run of `pipeline`; with `tuning`, its controller steps at every refresh (and puts
    /// the knobs back when the runner, or the tuning taken from it, is dropped).
    pub(crate) fn new(pipeline: Pipeline, tuning: Option<Tuning>, options: RunOptions) -> Runner {
        let (input_sender, inputs) = mpsc::unbounded_channel();
        Runner {
            pipeline,
            tuning,
            pane: DecisionsPane::default(),
            options,
            inputs,
            input_sender,
        }
    }

    /// Where key presses and scrapes go.
    pub(crate) fn input_sender(&self) -> mpsc::UnboundedSender<Input> {
        self.input_sender.clone()
    }

    pub(crate) fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The controller, to drop (restoring the knobs) at a moment of the caller's choosing.
    pub(crate) fn take_tuning(&mut self) -> Option<Tuning> {
        self.tuning.take()
    }

    /// Run until a signal, the source's end (as the options say), the end time or a sink
    /// stops it; then drain the source, close the last windows and finish every sink.
    pub(crate) async fn run(&mut self, sinks: &mut [&mut dyn Sink]) -> Result<Stopped> {
        let stop = self.run_until_stop(sinks).await?;
        let mut batch = Vec::new();
        self.pipeline.take_waiting(&mut batch)?;
        for sink in sinks.iter_mut() {
            sink.events(&batch, &self.pipeline)?;
        }
        let finished = self.pipeline.finish()?;
        let end = End {
            pipeline: &self.pipeline,
            finished: &finished,
            stop: &stop,
        };
        for sink in sinks.iter_mut() {
            sink.finish(&end)?;
        }
        Ok(stop)
    }

    async fn run_until_stop(&mut self, sinks: &mut [&mut dyn Sink]) -> Result<Stopped> {
        let mut signals = SignalWaiter::install()?;
        let mut batch = Vec::new();
        let mut deadline = Deadline::new()?;
        deadline.set(self.sleep_after_refresh(sinks))?;
        loop {
            let source_open = self.pipeline.is_source_open();
            let step = tokio::select! {
                more = self.pipeline.next_batch(&mut batch), if source_open => Step::Batch(more?),
                expired = deadline.expired() => expired.map(|()| Step::Refresh)?,
                Some(input) = self.inputs.recv() => Step::Input(input),
                signal = signals.next() => Step::Signal(signal),
            };
            let flow = match step {
                Step::Batch(open) => {
                    let flow = self.take_batch(&mut batch, open, sinks)?;
                    if !self.pipeline.is_source_open() {
                        // How often to refresh may have changed (an ended source sleeps).
                        deadline.set(Some(SHORTEST_SLEEP))?;
                    }
                    flow
                }
                Step::Refresh => {
                    let flow = self.refresh(sinks)?;
                    deadline.set(self.sleep_after_refresh(sinks))?;
                    flow
                }
                Step::Input(mut input) => {
                    let flow = self.input(&mut input, sinks)?;
                    // A key changes what the screen shows, a new client wants its first
                    // frame: refresh now, not at the next deadline.
                    if matches!(input, Input::Key(_) | Input::Wake) {
                        deadline.set(Some(Duration::ZERO))?;
                    }
                    flow
                }
                Step::Signal(Received::Hangup) => match &mut self.options.hangup {
                    Hangup::Call(call) => {
                        call();
                        None
                    }
                    Hangup::Stop => Some(Stopped::Signal(Received::Hangup)),
                },
                Step::Signal(signal) => Some(Stopped::Signal(signal)),
            };
            if let Some(stop) = flow {
                return Ok(stop);
            }
        }
    }

    /// A batch the source delivered: into the model and to the sinks.
    fn take_batch(
        &mut self,
        batch: &mut Vec<Event>,
        open: bool,
        sinks: &mut [&mut dyn Sink],
    ) -> Result<Option<Stopped>> {
        let ended = self.pipeline.ingest(batch)?;
        for sink in sinks.iter_mut() {
            sink.events(batch, &self.pipeline)?;
        }
        batch.clear();
        if ended {
            return Ok(Some(Stopped::DurationReached));
        }
        if !open {
            self.pipeline.source_ended()?;
            match self.options.source_end {
                SourceEnd::Stop => return Ok(Some(Stopped::SourceEnded)),
                SourceEnd::Serve => sinks.iter_mut().for_each(|sink| sink.source_ended()),
            }
        }
        Ok(None)
    }

    /// One refresh: what waits in the source, then the pipeline's refresh (windows, knobs),
    /// the knob change and the controller's decisions into the pane, then every sink.
    fn refresh(&mut self, sinks: &mut [&mut dyn Sink]) -> Result<Option<Stopped>> {
        let mut batch = Vec::new();
        let ended = self.pipeline.take_waiting(&mut batch)?;
        for sink in sinks.iter_mut() {
            sink.events(&batch, &self.pipeline)?;
        }
        if ended {
            return Ok(Some(Stopped::DurationReached));
        }
        let refreshed = self.pipeline.refresh()?;
        let mut new_lines = Vec::new();
        if let Some(change) = &refreshed.knob_change {
            new_lines.push(PaneLine {
                kind: LineKind::KnobChange,
                text: self.pipeline.knob_change_line(change),
            });
        }
        if let Some(tuning) = &mut self.tuning {
            for text in tuning.step(self.pipeline.model())? {
                new_lines.push(PaneLine {
                    kind: LineKind::Decision,
                    text,
                });
            }
        }
        for sink in sinks.iter_mut() {
            for text in sink.take_notices() {
                new_lines.push(PaneLine {
                    kind: LineKind::Notice,
                    text,
                });
            }
        }
        for line in &new_lines {
            self.pane.push(line.text.clone());
        }
        let at = Refresh {
            pipeline: &self.pipeline,
            closed: &refreshed.closed,
            knob_change: refreshed.knob_change.as_ref(),
            new_lines: &new_lines,
            pane: &self.pane,
            tuning_mode: self.tuning.as_ref().map(Tuning::mode),
        };
        let mut stop = None;
        for sink in sinks.iter_mut() {
            if let Flow::Stop(reason) = sink.refresh(&at)? {
                stop.get_or_insert(Stopped::Sink(reason));
            }
        }
        if stop.is_none() && self.pipeline.is_past_end() {
            stop = Some(Stopped::DurationReached);
        }
        Ok(stop)
    }

    fn input(&mut self, input: &mut Input, sinks: &mut [&mut dyn Sink]) -> Result<Option<Stopped>> {
        let mut stop = None;
        for sink in sinks.iter_mut() {
            if let Flow::Stop(reason) = sink.input(input, &self.pipeline)? {
                stop.get_or_insert(Stopped::Sink(reason));
            }
        }
        Ok(stop)
    }

    /// How long to sleep after a refresh: the frame period while frames are shown or a
    /// controller polls its gauges; else until the open window ends (or the end time comes),
    /// within [`SHORTEST_SLEEP`] and [`LONGEST_SLEEP`]. With the source ended and nobody
    /// watching there is nothing to refresh: no deadline (an input, a signal or a
    /// connecting client wakes the loop).
    fn sleep_after_refresh(&self, sinks: &[&mut dyn Sink]) -> Option<Duration> {
        if self.tuning.is_some() || sinks.iter().any(|sink| sink.wants_frames()) {
            return Some(self.options.frame_every);
        }
        if !self.pipeline.is_source_open() {
            return None;
        }
        let now = self.pipeline.now_ns();
        let mut due = self.pipeline.model().open_window_end_ns();
        if let Some(end) = self.pipeline.end_ns() {
            due = due.min(end);
        }
        Some(Duration::from_nanos(due.saturating_sub(now)).clamp(SHORTEST_SLEEP, LONGEST_SLEEP))
    }
}

enum Step {
    Batch(bool),
    Refresh,
    Input(Input),
    Signal(Received),
}
