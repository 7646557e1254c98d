//! `nodescope daemon`: one headless process for a whole day. A source (the kernel when it can,
//! else the simulator, or a recording) feeds the pipeline and the model; with `--tune` the
//! controller steps on the model's windows (the same `control::Tuning` as `top --tune`: claim,
//! state dir, restore on exit, OOM score); the views are OpenMetrics (`--openmetrics`), a
//! rolling recording (`--record DIR`) and a Unix socket that `top --connect` and
//! `stream --connect` read (`view::socket`, `crate::schema::protocol`, docs/DAEMON.md).
//!
//! SIGTERM and SIGINT stop it: the last windows go to the clients, the recording gets its
//! footer, the knobs their original values. SIGHUP reopens `--log`.
use std::{
    fs::OpenOptions,
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result};
use clap::Args;
use tracer_common::files::{self, Symlinks};

use crate::{
    cmd::{top::LiveTuneArgs, WindowArg},
    pipeline::SYSFS_ROOT,
    runner::{End, Flow, Hangup, LineKind, Refresh, RunOptions, Runner, Sink},
    schema::protocol::{default_socket_path, Hello, PROTOCOL_VERSION},
    source::open::{open, SourceArgs, SourceChoice},
    view::{
        metrics::{self, MetricsSink, Renderer},
        rolling::{RollingLimits, RollingRecorder, RollingSink},
        socket::{SocketServer, SocketSink},
    },
};

/// At the stop, how long clients get to take the last windows and the end message.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);

#[derive(Args)]
pub(crate) struct DaemonArgs {
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
    /// /run/nodescope as root, /data/nodescope on Android, else
    /// $XDG_RUNTIME_DIR/nodescope).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Write the log here instead of stderr (appended; SIGHUP reopens it, for logrotate).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

pub(crate) fn run(args: DaemonArgs) -> Result<()> {
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
    let pipeline = crate::cmd::live_pipeline(
        source,
        &args.window,
        args.packages.as_deref(),
        args.source.image.as_deref(),
    )?;
    // Dropping the tuning (however the daemon ends) puts the original knob values back.
    let tuning = args.tuning.start(&pipeline, &knob_root)?;
    let mut info = pipeline.info().clone();
    if let Some(banner) = &opened.banner {
        info.detail = format!("{banner}  {}", info.detail);
    }
    let socket_path = args.socket.clone().unwrap_or_else(default_socket_path);
    let server = SocketServer::bind(
        &socket_path,
        &Hello {
            v: PROTOCOL_VERSION,
            source: info.clone(),
            banner: opened.banner.clone(),
            origin_ns: pipeline.origin_ns(),
            window_ns: pipeline.model().config().window_ns,
            tuning: tuning.is_some(),
        },
    )?;
    let mut recording = args
        .record
        .as_deref()
        .map(|dir| {
            let limits = RollingLimits {
                max_bytes: args.record_max_bytes,
                files: args.record_files,
            };
            RollingRecorder::start(dir, limits, &pipeline).map(RollingSink::new)
        })
        .transpose()?;
    let device = info.devices.first().cloned().unwrap_or_default();
    let mut metrics = MetricsSink::new(device, recording.as_ref().map(RollingSink::active));
    log::info!(
        "daemon: ready, serving {} ({})",
        socket_path.display(),
        info.detail
    );
    let mut socket = SocketSink::new(server, info);
    let log_path = args.log.clone();
    let hangup = Hangup::Call(Box::new(move || {
        if let Some(log) = &log_path {
            reopen_log(log);
        }
    }));
    let mut runner = Runner::new(pipeline, tuning, RunOptions::serving(hangup));
    socket.wake_on_join(runner.input_sender());
    // The server asks the loop for each scrape's exposition: nothing is rendered unscraped.
    let _server = match args.openmetrics {
        Some(addr) => Some(metrics::serve(addr, Renderer::new(runner.input_sender())).await?),
        None => None,
    };
    let mut log = DaemonLog;
    // The log first: "stopping" comes before what each sink does at the end.
    match &mut recording {
        Some(recording) => {
            runner
                .run(&mut [&mut log, recording, &mut socket, &mut metrics])
                .await?
        }
        None => {
            runner
                .run(&mut [&mut log, &mut socket, &mut metrics])
                .await?
        }
    };
    if let Some(tuning) = runner.take_tuning() {
        drop(tuning);
        log::info!("daemon: knobs restored");
    }
    if let Some(note) = runner.pipeline().closing_note() {
        log::info!("daemon: {note}");
    }
    socket.close(CLOSE_WITHIN).await;
    Ok(())
}

/// The daemon's log: the controller's decisions, the source's end and the stop.
struct DaemonLog;

impl Sink for DaemonLog {
    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        for line in at.new_lines.iter().filter(|l| l.kind == LineKind::Decision) {
            log::info!("controller: {}", line.text);
        }
        Ok(Flow::Continue)
    }

    fn source_ended(&mut self) {
        log::info!("daemon: the source ended; serving its last state");
    }

    fn finish(&mut self, end: &End) -> Result<()> {
        log::info!("daemon: stopping ({})", end.stop.describe());
        Ok(())
    }
}
