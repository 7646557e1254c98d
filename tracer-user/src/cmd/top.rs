//! `nodescope top`: the live view. Source `auto` uses eBPF when this kernel has F2FS and we may
//! load programs, else the simulator in real time, and says so in the header.
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;

use crate::{
    cmd::WindowArg,
    control::{Tuning, TuningOptions},
    pipeline::{Pipeline, SYSFS_ROOT},
    runner::{Hangup, RunOptions, Runner, FRAME_EVERY},
    source::open::{open, SourceArgs, SourceChoice},
    view::tui,
};

#[derive(Args)]
pub(crate) struct TopArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    window: WindowArg,
    /// Android packages.list, for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<PathBuf>,
    #[command(flatten)]
    tuning: LiveTuneArgs,
    /// Show what a running `nodescope daemon` serves on its socket (default: its default
    /// socket) instead of opening a source: nothing is loaded, the daemon's windows are shown.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1,
          conflicts_with_all = ["source", "tune", "image"])]
    connect: Option<Option<PathBuf>>,
}

/// The controller in a live process (`top --tune`, `daemon --tune`).
#[derive(Args, Clone, Debug)]
pub(crate) struct LiveTuneArgs {
    /// Let the controller tune node_compress_threshold and node_compress_interval while you
    /// watch (docs/CONTROLLER.md); the original values come back when top ends.
    #[arg(long)]
    pub tune: bool,
    /// With --tune: decide and show, write nothing.
    #[arg(long, requires = "tune")]
    pub dry_run: bool,
    /// With --tune: also write every decision to this JSON-lines file.
    #[arg(long, value_name = "FILE", requires = "tune")]
    pub audit: Option<PathBuf>,
    /// With --tune: where the device is claimed and its originals kept while it is tuned (as
    /// `nodescope tune --state-dir`; a device another controller tunes is refused).
    #[arg(long, value_name = "DIR", requires = "tune")]
    pub state_dir: Option<PathBuf>,
    /// With --tune: the memory pressure to aim for, percent of time with some task stalled
    /// on memory (as `nodescope tune --psi-goal`).
    #[arg(long, value_name = "PERCENT", requires = "tune",
          default_value_t = controller::law::Config::default().psi_goal)]
    pub psi_goal: f64,
}

impl LiveTuneArgs {
    /// With --tune: claim the source's first device and start the controller on it (the
    /// originals come back when the returned `Tuning` is dropped); lowers our OOM score as
    /// `tune` does, since the controller lives in this process.
    pub(crate) fn start(
        &self,
        pipeline: &Pipeline,
        knob_root: &std::path::Path,
    ) -> Result<Option<Tuning>> {
        if !self.tune {
            return Ok(None);
        }
        let devices = &pipeline.info().devices;
        anyhow::ensure!(!devices.is_empty(), "the source names no device to tune");
        if !self.dry_run {
            crate::control::lower_oom_score(controller::oom::DEFAULT_OOM_SCORE_ADJ);
        }
        let config = controller::law::Config {
            psi_goal: self.psi_goal,
            ..controller::law::Config::default()
        };
        config.validate()?;
        let options = TuningOptions {
            config,
            state_dir: self.state_dir.clone(),
            ..TuningOptions::default()
        };
        let tuning = Tuning::start_with(
            knob_root,
            &devices[..1],
            self.dry_run,
            self.audit.clone(),
            options,
        )?;
        Ok(Some(tuning))
    }
}

pub(crate) fn run(args: TopArgs) -> Result<()> {
    anyhow::ensure!(args.window.seconds > 0.0, "--window must be positive");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(top(args))
}

async fn top(args: TopArgs) -> Result<()> {
    if let Some(socket) = &args.connect {
        let socket = crate::client::socket_or_default(socket.as_deref());
        let connection = crate::client::Connection::open(&socket).await?;
        return tui::run_connected(connection, FRAME_EVERY).await;
    }
    let opened = open(&args.source, SourceChoice::Auto)?;
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
    // Dropping the tuning (with the runner, however the run ends) puts the original knob
    // values back.
    let tuning = args.tuning.start(&pipeline, &knob_root)?;
    // The screen stays up when the source ends; SIGHUP (the terminal gone) ends it, unwinding.
    let mut runner = Runner::new(pipeline, tuning, RunOptions::serving(Hangup::Stop));
    let mut screen = tui::TuiSink::start(runner.pipeline(), opened.banner, runner.input_sender())?;
    runner.run(&mut [&mut screen]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        top: TopArgs,
    }

    fn connect(args: &[&str]) -> Option<Option<PathBuf>> {
        let all = std::iter::once("nodescope").chain(args.iter().copied());
        Cli::try_parse_from(all)
            .expect("valid arguments")
            .top
            .connect
    }

    /// `--connect` alone is the daemon's default socket: clap once refused it ("a value is
    /// required"), since an empty default path is no path.
    #[test]
    fn connect_takes_a_socket_or_none_for_the_default_one() {
        assert_eq!(connect(&[]), None);
        assert_eq!(connect(&["--connect"]), Some(None));
        assert_eq!(
            connect(&["--connect", "/run/x.sock"]),
            Some(Some(PathBuf::from("/run/x.sock")))
        );
        let all = ["nodescope", "--connect", "--image", "x.img"];
        assert!(
            Cli::try_parse_from(all).is_err(),
            "an image a client cannot use"
        );
    }
}
