//! `nodescope top`: the live view. Source `auto` uses eBPF when this kernel has F2FS and we may
//! load programs, else the simulator in real time, and says so in the header.
use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, Result};
use clap::Args;

use crate::{
    control::Tuning,
    model::{Model, ModelConfig, Packages},
    source::knobs::{KnobFiles, KnobValues},
    source::open::{open, SourceArgs, SourceChoice},
    view::tui::{self, Refresh},
};

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Window length in seconds (rates and sparklines are per window).
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Android packages.list, for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<PathBuf>,
    /// Let the controller tune node_compress_threshold and node_compress_interval while you
    /// watch (docs/CONTROLLER.md); the original values come back when top ends.
    #[arg(long)]
    tune: bool,
    /// With --tune: decide and show, write nothing.
    #[arg(long, requires = "tune")]
    dry_run: bool,
    /// With --tune: also write every decision to this JSON-lines file.
    #[arg(long, value_name = "FILE", requires = "tune")]
    audit: Option<PathBuf>,
}

pub fn run(args: TopArgs) -> Result<()> {
    anyhow::ensure!(args.interval > 0.0, "--interval must be positive");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(top(args))
}

async fn top(args: TopArgs) -> Result<()> {
    let opened = open(&args.source, SourceChoice::Auto)?;
    let source = opened.source;
    let info = source.info();
    let packages = Packages::from_file_or(args.packages.as_deref(), source.packages_list())?;
    let mut model = Model::new(ModelConfig {
        window_ns: (args.interval * 1e9) as u64,
        packages,
        ..ModelConfig::default()
    });
    model.settings.budget_bytes = source.budget_bytes();
    let root = source
        .knob_root()
        .unwrap_or_else(|| PathBuf::from("/sys/fs/f2fs"));
    let mut settings = KnobReader {
        knobs: info.devices.first().map(|dev| KnobFiles::new(&root, dev)),
        last: None,
    };
    let banner = opened.banner;
    let frame_every = Duration::from_millis(250);
    if !args.tune {
        return tui::run(source, model, banner, &mut settings, frame_every).await;
    }
    let device = info
        .devices
        .first()
        .context("the source names no device to tune")?;
    let tuning = Tuning::start(&root, device, args.dry_run, args.audit.clone())?;
    let mut both = (settings, tuning);
    tui::run(source, model, banner, &mut both, frame_every).await
}

/// Knob display first, then the controller, at every refresh.
impl Refresh for (KnobReader, Tuning) {
    fn refresh(&mut self, model: &mut Model) -> Result<()> {
        self.0.refresh(model)?;
        self.1.refresh(model)
    }
}

/// Shows the knob values in the header, read from their files at every refresh, and notes
/// each change (by a person, a script or the controller) in the decisions pane.
struct KnobReader {
    knobs: Option<KnobFiles>,
    last: Option<KnobValues>,
}

impl Refresh for KnobReader {
    fn refresh(&mut self, model: &mut Model) -> Result<()> {
        let Some(knobs) = &self.knobs else {
            return Ok(());
        };
        let values = knobs.read();
        if let Some(last) = self.last.filter(|last| *last != values) {
            let seconds = model.history().back().map_or(0, |w| w.index + 1);
            let line = format!(
                "window {seconds}: knobs {} -> {}",
                last.describe(),
                values.describe()
            );
            model.push_decision(line);
        }
        self.last = Some(values);
        model.settings.threshold = values.threshold;
        model.settings.interval_ms = values.interval_ms;
        Ok(())
    }
}
