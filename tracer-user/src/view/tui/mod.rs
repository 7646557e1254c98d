//! `nodescope top`'s terminal UI: a sink of the run loop (`crate::runner`) that draws a snapshot
//! of the model at each refresh, plus an input handler for the keys. It neither runs the
//! pipeline nor steps the controller: the runner does both.
mod checkpoints;
mod draw;
mod node_types;
mod table;

use std::time::Duration;

use anyhow::{Context as _, Result};
use ratatui::crossterm::event::{
    self, Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};
use tokio::sync::mpsc;
use tracer_common::text::escape_name;

pub use self::table::label;
use self::table::{Column, COLUMNS};
use crate::{
    client::Connection,
    pipeline::Pipeline,
    runner::{signals::SignalWaiter, Flow, Input, Refresh, Sink},
    schema::protocol::{Hello, Message, Snapshot},
    source::SourceInfo,
};

/// What the user has chosen on screen.
#[derive(Clone, Debug)]
pub struct UiState {
    pub sort: Column,
    pub(crate) ascending: bool,
    pub filter: String,
    pub(crate) editing_filter: bool,
    pub paused: bool,
    pub help: bool,
    pub quit: bool,
}

impl Default for UiState {
    fn default() -> Self {
        UiState {
            sort: Column::Reads,
            ascending: false,
            filter: String::new(),
            editing_filter: false,
            paused: false,
            help: false,
            quit: false,
        }
    }
}

impl UiState {
    pub(crate) fn handle_key(&mut self, key: KeyEvent) {
        if key.kind != KeyEventKind::Press {
            return;
        }
        if self.editing_filter {
            self.edit_filter(key.code);
            return;
        }
        if self.help {
            self.help = false; // any key closes the help
            return;
        }
        match key.code {
            // Raw mode turns Ctrl-C into a key: treat it as quit, so everything unwinds (and a
            // controller puts the knobs back).
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('/') => {
                self.editing_filter = true;
                self.filter.clear();
            }
            KeyCode::Char('s') => self.sort = step_column(self.sort, 1),
            KeyCode::Char('S') => self.sort = step_column(self.sort, COLUMNS.len() - 1),
            KeyCode::Char('r') => self.ascending = !self.ascending,
            KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char(digit @ '0'..='9') => {
                let n = digit.to_digit(10).unwrap_or(0) as usize;
                self.sort = COLUMNS[(n + 9) % 10];
            }
            _ => {}
        }
    }

    fn edit_filter(&mut self, code: KeyCode) {
        match code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) => self.filter.push(c),
            _ => {}
        }
    }
}

fn step_column(current: Column, by: usize) -> Column {
    let index = COLUMNS.iter().position(|c| *c == current).unwrap_or(0);
    COLUMNS[(index + by) % COLUMNS.len()]
}

/// Draw one frame into any backend (the terminal, or a TestBackend in tests).
pub fn render<B: ratatui::backend::Backend>(
    terminal: &mut ratatui::Terminal<B>,
    snapshot: &Snapshot,
    ui: &UiState,
) -> Result<()> {
    terminal
        .draw(|frame| draw::draw(frame, snapshot, ui))
        .map_err(|err| anyhow::anyhow!("drawing the screen: {err}"))?;
    Ok(())
}

/// Restores the terminal when dropped, however `run` ends (ratatui's panic hook covers panics).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The live view as a sink: a snapshot of the model at each refresh (unless paused), drawn;
/// keys from [`spawn_key_reader`] arrive as the runner's inputs.
pub(crate) struct TuiSink {
    terminal: ratatui::DefaultTerminal,
    /// Restores the terminal when the sink is dropped, however the run ends.
    _guard: TerminalGuard,
    info: SourceInfo,
    ui: UiState,
    snapshot: Snapshot,
}

impl TuiSink {
    /// Take over the terminal; the header shows `banner` before the source's detail. Keys go
    /// to `inputs` (the runner's).
    pub(crate) fn start(
        pipeline: &Pipeline,
        banner: Option<String>,
        inputs: mpsc::UnboundedSender<Input>,
    ) -> Result<TuiSink> {
        let mut info = pipeline.info().clone();
        if let Some(banner) = banner {
            info.detail = format!("{banner}  {}", info.detail);
        }
        let terminal = ratatui::try_init().context("setting up the terminal")?;
        spawn_key_reader(move |key| inputs.send(Input::Key(key)).is_ok());
        let snapshot = Snapshot::capture(pipeline.model(), &info);
        Ok(TuiSink {
            terminal,
            _guard: TerminalGuard,
            info,
            ui: UiState::default(),
            snapshot,
        })
    }

    fn draw(&mut self) -> Result<Flow> {
        render(&mut self.terminal, &self.snapshot, &self.ui)?;
        Ok(Flow::Continue)
    }
}

impl Sink for TuiSink {
    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        if !self.ui.paused {
            self.snapshot = Snapshot::capture(at.pipeline.model(), &self.info)
                .with_control(at.tuning_mode.clone(), at.pane.lines());
        }
        self.draw()
    }

    fn input(&mut self, input: &mut Input, _pipeline: &Pipeline) -> Result<Flow> {
        let Input::Key(key) = input else {
            return Ok(Flow::Continue);
        };
        self.ui.handle_key(*key);
        if self.ui.quit {
            return Ok(Flow::Stop("quit".into()));
        }
        // The screen follows at the refresh the key brings forward.
        Ok(Flow::Continue)
    }

    fn wants_frames(&self) -> bool {
        true
    }
}

/// Key presses from a thread of their own (crossterm's reader blocks), each handed to `send`
/// until it returns false (its receiver is gone).
fn spawn_key_reader(send: impl Fn(KeyEvent) -> bool + Send + 'static) {
    std::thread::spawn(move || loop {
        match event::poll(Duration::from_millis(100)) {
            Ok(true) => match event::read() {
                Ok(TermEvent::Key(key)) => {
                    if !send(key) {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            },
            Ok(false) => {}
            Err(_) => return,
        }
    });
}

#[cfg(test)]
mod tests;

enum Remote {
    Message(Result<Option<Message>>),
    Tick,
    Key(KeyEvent),
    Stop,
}

/// `top --connect`: the same screen, drawn from the snapshots a daemon sends (its model, its
/// controller's mode and decisions). Sorting, filtering, pause and help are this client's own;
/// when the daemon stops, the last screen stays up, saying so, until the user quits. With no
/// screen to keep (the connection failed, closed or ended before the first snapshot) the run
/// ends at once with the error; an error after it (a line over the limit, a message that is
/// not one) is on the screen, and quitting then fails with it.
pub async fn run_connected(mut connection: Connection, frame_every: Duration) -> Result<()> {
    let hello = connection.hello.clone();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    let (key_sender, mut keys) = mpsc::unbounded_channel();
    spawn_key_reader(move |key| key_sender.send(key).is_ok());
    let mut tick = tokio::time::interval(frame_every);
    let mut ui = UiState::default();
    let mut signals = SignalWaiter::install()?;
    let prefix = format!("daemon {}", connection.path().display());
    let mut snapshot: Option<Snapshot> = None;
    let mut gone: Option<String> = None;
    // What went wrong with the connection (not a daemon's orderly end): the exit says it.
    let mut failed: Option<anyhow::Error> = None;
    while !ui.quit {
        // The client's own input handling: the daemon's messages, the keys, the frame tick.
        let step = tokio::select! {
            message = connection.next(), if gone.is_none() => Remote::Message(message),
            _ = tick.tick() => Remote::Tick,
            Some(key) = keys.recv() => Remote::Key(key),
            // Ending by signal still unwinds: the terminal is restored.
            _ = signals.next() => Remote::Stop,
        };
        match step {
            Remote::Message(Ok(Some(Message::Snapshot { snapshot: latest }))) => {
                if !ui.paused || snapshot.is_none() {
                    snapshot = Some(*latest);
                }
            }
            Remote::Message(Ok(Some(Message::End { reason }))) => {
                gone = Some(format!("daemon stopped ({reason})"));
            }
            Remote::Message(Ok(Some(_))) => continue, // windows and decisions: in snapshots
            Remote::Message(Ok(None)) => gone = Some("daemon closed the connection".into()),
            Remote::Message(Err(err)) => {
                gone = Some(format!("{err:#}"));
                failed = Some(err);
            }
            Remote::Key(key) => ui.handle_key(key),
            Remote::Stop => ui.quit = true,
            Remote::Tick => {}
        }
        let Some(shown) = &snapshot else {
            if let Some(gone) = gone {
                // Nothing was ever drawn: a blank screen would stay blank. The guard restores
                // the terminal before the error is printed.
                let err = failed.unwrap_or_else(|| anyhow::anyhow!("{}", escape_name(&gone)));
                return Err(
                    err.context(format!("{prefix}: no snapshot received (nothing to show)"))
                );
            }
            // No snapshot yet (a busy daemon's first can take a while): say so, instead of
            // a blank screen that looks hung. Redrawn at each tick, which also follows a
            // resize.
            draw_waiting(&mut terminal, &prefix)?;
            continue;
        };
        let mut shown = shown.clone();
        let state = gone.as_deref().unwrap_or("connected");
        shown.source.detail = format!("{prefix} {state}  {}", hello_banner(&hello, &shown));
        render(&mut terminal, &shown, &ui)?;
    }
    match failed {
        Some(err) => Err(err.context(format!("{prefix}: the connection failed"))),
        None => Ok(()),
    }
}

/// The one line `top --connect` shows until the daemon's first snapshot arrives.
fn draw_waiting<B: ratatui::backend::Backend>(
    terminal: &mut ratatui::Terminal<B>,
    prefix: &str,
) -> Result<()> {
    let line = format!(
        "{}: connected; waiting for the daemon's first snapshot (q quits)",
        escape_name(prefix)
    );
    terminal
        .draw(|frame| frame.render_widget(ratatui::widgets::Paragraph::new(line), frame.area()))
        .map_err(|err| anyhow::anyhow!("drawing the screen: {err}"))?;
    Ok(())
}

/// What a local top would put in its header: the banner `auto` gave, then the source's detail.
fn hello_banner(hello: &Hello, snapshot: &Snapshot) -> String {
    match &hello.banner {
        Some(banner) if !snapshot.source.detail.starts_with(banner.as_str()) => {
            format!("{banner}  {}", snapshot.source.detail)
        }
        _ => snapshot.source.detail.clone(),
    }
}
