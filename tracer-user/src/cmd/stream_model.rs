//! `nodescope stream` for the simulator and recordings: the model's windows as JSON lines
//! (jsonline.rs), closed by the source's own clock, optionally served as OpenMetrics.
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context as _, Result};
use tokio::signal::unix::{signal, SignalKind};

use crate::{
    model::{Model, ModelConfig, Packages, WindowReport},
    source::knobs::KnobFiles,
    source::{
        open::{open, SourceArgs, SourceChoice},
        Source,
    },
    view::{jsonline::window_line, metrics},
};

pub struct ModelStreamArgs {
    pub json: bool,
    pub interval: f64,
    pub duration: Option<f64>,
    pub openmetrics: Option<SocketAddr>,
    pub packages: Option<PathBuf>,
    pub source: SourceArgs,
}

pub fn run(args: &ModelStreamArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(stream(args))
}

async fn stream(args: &ModelStreamArgs) -> Result<()> {
    let opened = open(&args.source, SourceChoice::Bpf)?;
    if let Some(banner) = &opened.banner {
        eprintln!("nodescope stream: {banner}");
    }
    let mut source = opened.source;
    let packages = Packages::from_file_or(args.packages.as_deref(), source.packages_list())?;
    let window_ns = (args.interval * 1e9) as u64;
    let mut model = Model::new(ModelConfig {
        window_ns,
        packages,
        ..ModelConfig::default()
    });
    let origin = source.now_ns();
    model.start_at(origin);
    let exposition: metrics::Exposition = Arc::new(Mutex::new(String::new()));
    let _server = match args.openmetrics {
        Some(addr) => Some(metrics::serve(addr, Arc::clone(&exposition)).await?),
        None => None,
    };
    let mut out = Output {
        json: args.json,
        origin,
        windows_wanted: args.duration.map(|d| (d / args.interval).ceil() as u64),
        printed: 0,
        exposition,
        knobs: source
            .knob_root()
            .zip(source.info().devices.first().cloned())
            .map(|(root, dev)| KnobFiles::new(&root, &dev)),
        device: source.info().devices.first().cloned().unwrap_or_default(),
    };
    eprintln!("nodescope stream: ready ({})", source.info().detail);
    run_loop(&mut *source, &mut model, &mut out).await
}

struct Output {
    json: bool,
    origin: u64,
    windows_wanted: Option<u64>,
    printed: u64,
    exposition: metrics::Exposition,
    knobs: Option<KnobFiles>,
    device: String,
}

impl Output {
    fn done(&self) -> bool {
        self.windows_wanted
            .is_some_and(|wanted| self.printed >= wanted)
    }

    /// Print closed windows (up to the number wanted) and refresh the exposition.
    fn publish(&mut self, model: &mut Model) {
        for window in model.take_closed() {
            if self.done() {
                break;
            }
            self.print(&window);
            self.printed += 1;
        }
        if let Some(knobs) = &self.knobs {
            let values = knobs.read();
            model.settings.threshold = values.threshold;
            model.settings.interval_ms = values.interval_ms;
        }
        if let Ok(mut text) = self.exposition.lock() {
            *text = metrics::render(model, &self.device);
        }
    }

    fn print(&self, window: &WindowReport) {
        let line = window_line(window, self.origin);
        if self.json {
            println!("{line}");
        } else {
            let t = &line["totals"];
            println!(
                "{:8.3}s reads={} (ra {}) restores={} conversions={} reclaims={} lost={}",
                line["t"].as_f64().unwrap_or(0.0),
                t["node_reads"],
                t["node_reads_readahead"],
                t["restores"],
                t["conversions"],
                window.interval.reclaims.total(),
                window.interval.lost
            );
        }
    }
}

async fn run_loop(source: &mut dyn Source, model: &mut Model, out: &mut Output) -> Result<()> {
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut batch = Vec::new();
    let mut open = true;
    while open && !out.done() {
        tokio::select! {
            more = source.next_batch(&mut batch) => {
                open = more?;
                batch.drain(..).for_each(|event| model.ingest(&event));
            }
            _ = tick.tick() => {}
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
        model.advance_to(source.now_ns());
        out.publish(model);
    }
    Ok(())
}
