//! `nodescope daemon`: one headless process for a whole day. A source (the kernel when it can,
//! else the simulator, or a recording) feeds the pipeline and the model; with `--tune` the
//! controller steps on the model's windows (the same `control::Tuning` as `top --tune`: claim,
//! state dir, restore on exit, OOM score); the views are OpenMetrics (`--openmetrics`), a
//! rolling recording (`--record DIR`) and a Unix socket that `top --connect` and
//! `stream --connect` read (`view::socket`, docs/DAEMON.md).
//!
//! SIGTERM and SIGINT stop it: the last windows go to the clients, the recording gets its
//! footer, the knobs their original values. SIGHUP reopens `--log`.
use std::{
    fs::OpenOptions,
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context as _, Result};
use clap::Args;
use tokio::signal::unix::{signal, SignalKind};
use tracer_common::files::{self, Symlinks};

use crate::{
    cmd::{top::LiveTuneArgs, WindowArg},
    control::Tuning,
    model::WindowReport,
    pipeline::{Pipeline, Refreshed, SYSFS_ROOT},
    source::open::{open, SourceArgs, SourceChoice},
    view::{
        jsonline::{window_line, window_text},
        metrics,
        rolling::{RollingLimits, RollingRecorder},
        socket::{default_socket_path, Hello, Message, SocketServer},
        tui::{DecisionsPane, Snapshot},
    },
};

/// How often the daemon refreshes: windows close, the controller steps, clients get a
/// snapshot (the live view's frame rate).
const REFRESH_EVERY: Duration = Duration::from_millis(250);

/// At the stop, how long clients get to take the last windows and the end message.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);

#[derive(Args)]
pub struct DaemonArgs {
    /// The source: auto (the kernel when it has F2FS and we may load programs, else the
    /// simulator), bpf, sim or replay FILE.
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    window: WindowArg,
    /// Android packages.list, for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<PathBuf>,
    #[command(flatten)]
    tuning: LiveTuneArgs,
    /// Serve the model as OpenMetrics at http://ADDR/metrics (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    openmetrics: Option<std::net::SocketAddr>,
    /// Keep a rolling recording in this directory (nodescope-NNNNNN.nsr, oldest removed).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// With --record: the most all files together may take, about (each file gets its
    /// share, a new file starts when it is full).
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20, requires = "record")]
    record_max_bytes: u64,
    /// With --record: how many files the cap is split into (the oldest is removed first).
    #[arg(long, value_name = "N", default_value_t = 8, requires = "record")]
    record_files: u32,
    /// The socket clients connect to (default: daemon.sock in the state directory:
    /// /run/nodescope as root, /data/local/tmp/nodescope on Android, else
    /// $XDG_RUNTIME_DIR/nodescope).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Write the log here instead of stderr (appended; SIGHUP reopens it, for logrotate).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

pub fn run(args: DaemonArgs) -> Result<()> {
    if let Some(log) = &args.log {
        redirect_stderr(log)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(daemon(args))
}

/// Point stderr (the log and every message) at `path`, appending: called at the start and on
/// SIGHUP, so a rotated log is let go of. Nothing about the path may block or redirect the
/// daemon: no symlink is followed (run as root, the daemon must not append to whatever file
/// another user pointed a link at the log's path), and the open never waits (a FIFO there
/// would block the runtime thread that also handles SIGTERM): anything but a regular file is
/// refused, naming what is there.
fn redirect_stderr(path: &Path) -> Result<()> {
    let file = files::open_nonblocking(
        path,
        OpenOptions::new().create(true).append(true),
        Symlinks::Refuse,
    )
    .and_then(|file| files::ensure_regular(&file).map(|()| file))
    .with_context(|| format!("opening the log {}", path.display()))?;
    // SAFETY: dup2 on two valid descriptors (the file's, open for the call; stderr's) has no
    // memory effects; it atomically makes fd 2 a copy of the file's descriptor.
    let status = unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) };
    if status < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("pointing stderr at {}", path.display()));
    }
    Ok(())
}

/// SIGHUP: reopen the log. A log that cannot be reopened (turned into a directory or a FIFO,
/// a full or read-only disk) is no reason to stop serving: the daemon says so in the log it
/// still has and writes on there.
fn reopen_log(path: &Path) {
    match redirect_stderr(path) {
        Ok(()) => log::info!("daemon: log reopened"),
        Err(err) => log::error!("daemon: {err:#}; still writing to the log as it was opened"),
    }
}

async fn daemon(args: DaemonArgs) -> Result<()> {
    // The rolling recording keeps events: with it, every node read must be one.
    let source_args = SourceArgs {
        node_read_events: args.source.node_read_events || args.record.is_some(),
        ..args.source.clone()
    };
    let opened = open(&source_args, SourceChoice::Auto)?;
    if let Some(banner) = &opened.banner {
        log::info!("{banner}");
    }
    let source = opened.source;
    let knob_root = source
        .knob_root()
        .unwrap_or_else(|| PathBuf::from(SYSFS_ROOT));
    let pipeline = crate::cmd::live_pipeline(source, &args.window, args.packages.as_deref())?;
    // Dropping `tuning` (however the daemon ends) puts the original knob values back.
    let tuning = args.tuning.start(&pipeline, &knob_root)?;
    let mut info = pipeline.info().clone();
    if let Some(banner) = &opened.banner {
        info.detail = format!("{banner}  {}", info.detail);
    }
    let socket_path = args.socket.clone().unwrap_or_else(default_socket_path);
    let socket = SocketServer::bind(
        &socket_path,
        &Hello {
            v: crate::view::socket::PROTOCOL_VERSION,
            source: info.clone(),
            banner: opened.banner.clone(),
            origin_ns: pipeline.origin_ns(),
            window_ns: pipeline.model().config().window_ns,
            tuning: tuning.is_some(),
        },
    )?;
    // The exposition exists, and is rendered at each refresh, only when something serves it.
    let (exposition, _server) = match args.openmetrics {
        Some(addr) => {
            let text: metrics::Exposition = Arc::new(Mutex::new(String::new()));
            let server = metrics::serve(addr, Arc::clone(&text)).await?;
            (Some(text), Some(server))
        }
        None => (None, None),
    };
    let recording = args
        .record
        .as_deref()
        .map(|dir| {
            let limits = RollingLimits {
                max_bytes: args.record_max_bytes,
                files: args.record_files,
            };
            RollingRecorder::start(dir, limits, &pipeline)
        })
        .transpose()?;
    let mut daemon = Daemon {
        device: info.devices.first().cloned().unwrap_or_default(),
        info,
        pipeline,
        tuning,
        socket,
        exposition,
        recording_asked: recording.is_some(),
        recording,
        pane: DecisionsPane::default(),
    };
    log::info!(
        "daemon: ready, serving {} ({})",
        socket_path.display(),
        daemon.info.detail
    );
    let reason = daemon.run(args.log.as_deref()).await?;
    daemon.stop(&reason).await
}

struct Daemon {
    info: crate::source::SourceInfo,
    device: String,
    pipeline: Pipeline,
    tuning: Option<Tuning>,
    socket: SocketServer,
    exposition: Option<metrics::Exposition>,
    recording: Option<RollingRecorder>,
    /// `--record` was given (the recording may have stopped since).
    recording_asked: bool,
    pane: DecisionsPane,
}

impl Daemon {
    /// Events into the model and the recording as they come; a refresh every
    /// [`REFRESH_EVERY`]; until a stop signal. Returns what stopped it.
    async fn run(&mut self, log: Option<&Path>) -> Result<String> {
        let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM")?;
        let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT")?;
        let mut sighup = signal(SignalKind::hangup()).context("installing SIGHUP")?;
        let mut tick = tokio::time::interval(REFRESH_EVERY);
        let mut batch = Vec::new();
        loop {
            let source_open = self.pipeline.is_source_open();
            tokio::select! {
                more = self.pipeline.next_batch(&mut batch), if source_open => {
                    if !more? {
                        self.pipeline.source_ended();
                        log::info!("daemon: the source ended; serving its last state");
                    }
                    self.pipeline.ingest(&mut batch)?;
                    self.record(|recording, _| recording.events(&batch));
                    batch.clear();
                }
                _ = tick.tick() => self.refresh()?,
                _ = sighup.recv() => {
                    if let Some(log) = log {
                        reopen_log(log);
                    }
                }
                _ = sigterm.recv() => return Ok("SIGTERM".into()),
                _ = sigint.recv() => return Ok("SIGINT".into()),
            }
        }
    }

    /// Close the windows the clock passed, let the controller step, and publish: window lines
    /// and decisions to the socket, the exposition, a snapshot.
    fn refresh(&mut self) -> Result<()> {
        let refreshed = self.pipeline.refresh()?;
        self.note_knob_change(&refreshed)?;
        if let Some(tuning) = &mut self.tuning {
            for line in tuning.step(self.pipeline.model())? {
                log::info!("controller: {line}");
                self.socket
                    .publish(&Message::Decision { line: line.clone() })?;
                self.pane.push(line);
            }
        }
        self.publish_windows(&refreshed.closed)?;
        if let Some(Ok(mut text)) = self.exposition.as_ref().map(|text| text.lock()) {
            let recording = self.recording_asked.then_some(self.recording.is_some());
            *text = metrics::render_with(self.pipeline.model(), &self.device, recording);
        }
        // Nobody connected: nothing to copy or encode (a new client waits one refresh at most).
        if self.socket.client_count() > 0 {
            let mode = self.tuning.as_ref().map(Tuning::mode);
            let snapshot = Snapshot::capture(self.pipeline.model(), &self.info)
                .with_control(mode, self.pane.lines());
            self.socket.publish(&Message::Snapshot {
                snapshot: Box::new(snapshot),
            })?;
        }
        self.record(|recording, pipeline| recording.tick(pipeline));
        Ok(())
    }

    /// One step of the rolling recording. An error there (a full disk, a directory removed,
    /// every next name taken) stops the recording, not the daemon: said in the log, to the
    /// clients (a line in the decisions pane) and in the metrics (`recording_active` 0).
    fn record(&mut self, step: impl FnOnce(&mut RollingRecorder, &Pipeline) -> Result<()>) {
        let Some(recording) = &mut self.recording else {
            return;
        };
        let Err(err) = step(recording, &self.pipeline) else {
            return;
        };
        let line = format!("recording stopped: {err:#}; serving on without it");
        log::error!("daemon: {line}");
        if let Some(recording) = self.recording.take() {
            let path = recording.current_path();
            if let Err(err) = recording.finish(self.pipeline.now_ns()) {
                log::warn!("daemon: {} has no footer: {err:#}", path.display());
            }
        }
        if let Err(err) = self
            .socket
            .publish(&Message::Decision { line: line.clone() })
        {
            log::warn!("daemon: telling the clients: {err:#}");
        }
        self.pane.push(line);
    }

    fn note_knob_change(&mut self, refreshed: &Refreshed) -> Result<()> {
        let Some(change) = &refreshed.knob_change else {
            return Ok(());
        };
        self.record(|recording, _| recording.knob_change(change));
        let line = self.pipeline.knob_change_line(change);
        self.socket
            .publish(&Message::Decision { line: line.clone() })?;
        self.pane.push(line);
        Ok(())
    }

    fn publish_windows(&self, closed: &[WindowReport]) -> Result<()> {
        if self.socket.client_count() == 0 {
            return Ok(());
        }
        let origin = self.pipeline.origin_ns();
        for window in closed {
            self.socket.publish(&Message::Window {
                line: window_line(window, origin),
                text: window_text(window, origin),
            })?;
        }
        Ok(())
    }

    /// The end: the last windows (as `stream` prints them at its end) and the end message to
    /// the clients, the recording's footer, then the knobs put back (dropping the tuning).
    async fn stop(mut self, reason: &str) -> Result<()> {
        log::info!("daemon: stopping ({reason})");
        let finished = self.pipeline.finish()?;
        self.publish_windows(&finished.closed)?;
        if let Some(last) = finished.last.filter(|last| last.exact.is_some()) {
            self.publish_windows(std::slice::from_ref(&last))?;
        }
        self.socket.publish(&Message::End {
            reason: reason.to_string(),
        })?;
        if let Some(recording) = self.recording.take() {
            let path = recording.current_path();
            match recording.finish(self.pipeline.now_ns()) {
                Ok((path, bytes, events)) => log::info!(
                    "daemon: recording {} finished ({events} events, {bytes} bytes)",
                    path.display()
                ),
                // The knobs still go back, and the clients got their end.
                Err(err) => log::error!("daemon: {} has no footer: {err:#}", path.display()),
            }
        }
        if let Some(tuning) = self.tuning.take() {
            drop(tuning);
            log::info!("daemon: knobs restored");
        }
        if let Some(note) = self.pipeline.closing_note() {
            log::info!("daemon: {note}");
        }
        self.socket.close(CLOSE_WITHIN).await;
        Ok(())
    }
}
