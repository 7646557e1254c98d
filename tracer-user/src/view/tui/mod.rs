//! `nodescope top`'s terminal UI: an event loop over source batches, key presses and a refresh
//! tick; the model is updated by the loop, the screen is drawn from a snapshot of it.
mod draw;
mod snapshot;
mod table;

use std::time::Duration;

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
use crate::{model::Model, source::Source};

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

/// Hooks the loop calls once per refresh, for whoever feeds the model settings (knob readers,
/// the controller).
pub trait Refresh {
    fn refresh(&mut self, model: &mut Model) -> Result<()>;
}

impl Refresh for () {
    fn refresh(&mut self, _model: &mut Model) -> Result<()> {
        Ok(())
    }
}

enum Step {
    Batch(Result<bool>),
    Tick,
    Key(Option<KeyEvent>),
}

/// Run the live view until the user quits. When the source ends, the screen stays up.
pub async fn run(
    mut source: Box<dyn Source>,
    mut model: Model,
    banner: Option<String>,
    refresh: &mut dyn Refresh,
    frame_every: Duration,
) -> Result<()> {
    let mut info = source.info();
    if let Some(banner) = banner {
        info.detail = format!("{banner}  {}", info.detail);
    }
    model.start_at(source.now_ns());
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let _guard = TerminalGuard;
    let mut keys = spawn_key_reader();
    let mut tick = tokio::time::interval(frame_every);
    let mut ui = UiState::default();
    let mut snapshot = Snapshot::capture(&model, &info);
    let mut batch = Vec::new();
    let mut source_open = true;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    while !ui.quit {
        let step = tokio::select! {
            more = source.next_batch(&mut batch), if source_open => Step::Batch(more),
            _ = tick.tick() => Step::Tick,
            key = keys.recv() => Step::Key(key),
            // Ending by signal still unwinds: the terminal and any tuned knobs are restored.
            _ = sigterm.recv() => Step::Key(None),
            _ = sighup.recv() => Step::Key(None),
        };
        let redraw = !matches!(step, Step::Batch(_));
        match step {
            Step::Batch(more) => {
                source_open = more?;
                batch.drain(..).for_each(|event| model.ingest(&event));
            }
            Step::Key(Some(key)) => ui.handle_key(key),
            Step::Key(None) => ui.quit = true,
            Step::Tick => {
                if source_open {
                    model.advance_to(source.now_ns());
                }
                model.take_closed();
                model.settings.budget_bytes = source.budget_bytes();
                model.settings.memory_pressure = source.memory_pressure();
                refresh.refresh(&mut model)?;
            }
        }
        if !redraw {
            continue; // batches arrive often; the screen follows the tick and the keys
        }
        if !ui.paused {
            snapshot = Snapshot::capture(&model, &info);
        }
        render(&mut terminal, &snapshot, &ui)?;
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
