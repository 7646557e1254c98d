//! `nodescope top`'s terminal UI: an event loop over source batches, key presses and a refresh
//! tick; the model is updated by the loop, the screen is drawn from a snapshot of it.
mod checkpoints;
mod draw;
mod snapshot;
mod table;

use std::{collections::VecDeque, time::Duration};

use anyhow::{Context as _, Result};
use ratatui::crossterm::event::{
    self, Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};
use tokio::{
    signal::unix::{signal, SignalKind},
    sync::mpsc,
};

use self::table::{Column, COLUMNS};
pub use self::{snapshot::Snapshot, table::label};
use crate::{control::Tuning, pipeline::Pipeline};

/// What the user has chosen on screen.
#[derive(Clone, Debug)]
pub struct UiState {
    pub sort: Column,
    pub ascending: bool,
    pub filter: String,
    pub editing_filter: bool,
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
    pub fn handle_key(&mut self, key: KeyEvent) {
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

enum Step {
    Batch(Result<bool>),
    Tick,
    Key(Option<KeyEvent>),
}

/// Lines of the decisions pane kept (knob changes and controller decisions, newest last).
const PANE_LINES: usize = 200;

/// The decisions pane: knob changes the pipeline saw and the controller's decisions.
#[derive(Debug, Default)]
pub struct DecisionsPane {
    lines: VecDeque<String>,
}

impl DecisionsPane {
    pub fn push(&mut self, line: String) {
        self.lines.push_back(line);
        while self.lines.len() > PANE_LINES {
            self.lines.pop_front();
        }
    }

    pub fn lines(&self) -> &VecDeque<String> {
        &self.lines
    }
}

/// Run the live view until the user quits. When the source ends, the screen stays up. With a
/// controller, it steps at every refresh on the model's windows.
pub async fn run(
    mut pipeline: Pipeline,
    banner: Option<String>,
    mut control: Option<&mut Tuning>,
    frame_every: Duration,
) -> Result<()> {
    let mut info = pipeline.info().clone();
    if let Some(banner) = banner {
        info.detail = format!("{banner}  {}", info.detail);
    }
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    let mut keys = spawn_key_reader();
    let mut tick = tokio::time::interval(frame_every);
    let mut ui = UiState::default();
    let mut pane = DecisionsPane::default();
    let mut snapshot = Snapshot::capture(pipeline.model(), &info);
    let mut batch = Vec::new();
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    while !ui.quit {
        let source_open = pipeline.is_source_open();
        let step = tokio::select! {
            more = pipeline.next_batch(&mut batch), if source_open => Step::Batch(more),
            _ = tick.tick() => Step::Tick,
            key = keys.recv() => Step::Key(key),
            // Ending by signal still unwinds: the terminal and any tuned knobs are restored.
            _ = sigterm.recv() => Step::Key(None),
            _ = sighup.recv() => Step::Key(None),
        };
        let redraw = !matches!(step, Step::Batch(_));
        match step {
            Step::Batch(more) => {
                if !more? {
                    pipeline.source_ended();
                }
                pipeline.ingest(&mut batch)?;
                batch.clear();
            }
            Step::Key(Some(key)) => ui.handle_key(key),
            Step::Key(None) => ui.quit = true,
            Step::Tick => refresh(&mut pipeline, control.as_deref_mut(), &mut pane)?,
        }
        if !redraw {
            continue; // batches arrive often; the screen follows the tick and the keys
        }
        if !ui.paused {
            let mode = control.as_deref().map(Tuning::mode);
            snapshot = Snapshot::capture(pipeline.model(), &info).with_control(mode, pane.lines());
        }
        render(&mut terminal, &snapshot, &ui)?;
    }
    Ok(())
}

/// One refresh: the pipeline's observations and closed windows, a knob change noted in the
/// pane, then the controller's step on the model.
fn refresh(
    pipeline: &mut Pipeline,
    control: Option<&mut Tuning>,
    pane: &mut DecisionsPane,
) -> Result<()> {
    let refreshed = pipeline.refresh()?;
    if let Some(change) = &refreshed.knob_change {
        pane.push(pipeline.knob_change_line(change));
    }
    if let Some(control) = control {
        for line in control.step(pipeline.model())? {
            pane.push(line);
        }
    }
    Ok(())
}

/// Key presses from a thread of their own (crossterm's reader blocks).
fn spawn_key_reader() -> mpsc::UnboundedReceiver<KeyEvent> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        match event::poll(Duration::from_millis(100)) {
            Ok(true) => match event::read() {
                Ok(TermEvent::Key(key)) => {
                    if sender.send(key).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            },
            Ok(false) if sender.is_closed() => return,
            Ok(false) => {}
            Err(_) => return,
        }
    });
    receiver
}

#[cfg(test)]
mod tests;

enum Remote {
    Message(Result<Option<crate::view::socket::Message>>),
    Tick,
    Key(Option<KeyEvent>),
}

/// `top --connect`: the same screen, drawn from the snapshots a daemon sends (its model, its
/// controller's mode and decisions). Sorting, filtering, pause and help are this client's own;
/// when the daemon stops, the last screen stays up, saying so, until the user quits.
pub async fn run_connected(
    mut connection: crate::source::connect::Connection,
    frame_every: Duration,
) -> Result<()> {
    use crate::view::socket::Message;
    let hello = connection.hello.clone();
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    let mut keys = spawn_key_reader();
    let mut tick = tokio::time::interval(frame_every);
    let mut ui = UiState::default();
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let prefix = format!("daemon {}", connection.path().display());
    let mut snapshot: Option<Snapshot> = None;
    let mut gone: Option<String> = None;
    while !ui.quit {
        let step = tokio::select! {
            message = connection.next(), if gone.is_none() => Remote::Message(message),
            _ = tick.tick() => Remote::Tick,
            key = keys.recv() => Remote::Key(key),
            _ = sigterm.recv() => Remote::Key(None),
            _ = sighup.recv() => Remote::Key(None),
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
            Remote::Message(Err(err)) => gone = Some(format!("{err:#}")),
            Remote::Key(Some(key)) => ui.handle_key(key),
            Remote::Key(None) => ui.quit = true,
            Remote::Tick => {}
        }
        let Some(shown) = &snapshot else {
            continue; // nothing to draw before the daemon's first snapshot
        };
        let mut shown = shown.clone();
        let state = gone.as_deref().unwrap_or("connected");
        shown.source.detail = format!("{prefix} {state}  {}", hello_banner(&hello, &shown));
        render(&mut terminal, &shown, &ui)?;
    }
    Ok(())
}

/// What a local top would put in its header: the banner `auto` gave, then the source's detail.
fn hello_banner(hello: &crate::view::socket::Hello, snapshot: &Snapshot) -> String {
    match &hello.banner {
        Some(banner) if !snapshot.source.detail.starts_with(banner.as_str()) => {
            format!("{banner}  {}", snapshot.source.detail)
        }
        _ => snapshot.source.detail.clone(),
    }
}
