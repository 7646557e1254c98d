//! `nodescope stream`: one line per interval with node reads (demand / readahead), node
//! writes and checkpoints, per process and per device. The schema is in docs/STREAM.md.
//!
//! Reading (the eBPF source and its counters) and building the lines are kept apart: the
//! builders take plain `Counts` maps, so a later source (the shared model) feeds them as well.
use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    time::Duration,
};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::time::Instant;
use tracer_common::{TaskCounts, TaskKey};

use crate::{
    model::{Model, ModelConfig, Packages},
    source::bpf::{
        f2fs::{self, KernelView, NodeReadVariant, Plan},
        manifest::Manifest,
    },
    source::{
        bpf::live::BpfSource,
        open::{SourceArgs, SourceChoice},
        Source as _,
    },
    system::{self, Privileges},
    view::metrics,
};

#[derive(Args)]
pub struct StreamArgs {
    /// One JSON object per line (docs/STREAM.md); without it, a short text line.
    #[arg(long)]
    json: bool,
    /// Seconds per interval.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Use this node-read probe instead of the best one the kernel offers (tests the fallbacks).
    #[arg(long, value_enum)]
    node_reads: Option<NodeReadVariant>,
    /// Print which probes would be used, and why not the others, then exit (loads nothing).
    #[arg(long)]
    plan: bool,
    /// Also serve the model as OpenMetrics at http://ADDR/metrics (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    openmetrics: Option<std::net::SocketAddr>,
    /// Android packages.list, for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<std::path::PathBuf>,
    /// Probe manifest for the RFC's own functions (kprobes; see `nodescope probe`): their
    /// events are counted per interval under "rfc".
    #[arg(long, value_name = "FILE")]
    probes: Option<std::path::PathBuf>,
    /// The source: the kernel (bpf, the default), the simulator, or a recording.
    #[command(flatten)]
    source: SourceArgs,
}

pub fn run(args: StreamArgs) -> Result<()> {
    let positive = |seconds: f64| seconds.is_finite() && seconds > 0.0;
    if !positive(args.interval) || args.duration.is_some_and(|d| !positive(d)) {
        bail!("--interval and --duration must be positive numbers of seconds");
    }
    if !matches!(args.source.source, None | Some(SourceChoice::Bpf)) {
        return crate::cmd::stream_model::run(&args_for_model(&args));
    }
    if args.plan {
        print!("{}", f2fs::plan_this_kernel(args.node_reads).render());
        return Ok(());
    }
    let plan = match preflight(args.node_reads) {
        Ok(plan) => plan,
        Err(err) => {
            // What is missing is the whole message: no backtrace (main's Debug print would add
            // one whenever RUST_BACKTRACE is set), and a status scripts can tell apart.
            eprintln!("nodescope stream: {err:#}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(stream(&args, &plan))
}

fn args_for_model(args: &StreamArgs) -> crate::cmd::stream_model::ModelStreamArgs {
    crate::cmd::stream_model::ModelStreamArgs {
        json: args.json,
        interval: args.interval,
        duration: args.duration,
        openmetrics: args.openmetrics,
        packages: args.packages.clone(),
        source: args.source.clone(),
    }
}

/// Everything that can be checked before loading anything, each failure naming what is missing.
fn preflight(prefer: Option<NodeReadVariant>) -> Result<Plan> {
    if !system::has_f2fs() {
        bail!(
            "this kernel ({}) has no F2FS: `f2fs` is not in /proc/filesystems and /sys/fs/f2fs \
             does not exist. Load the f2fs module on a kernel that has it, or use the simulator \
             (`nodescope sim`)",
            system::kernel_release()
        );
    }
    if !Privileges::current()?.may_trace() {
        bail!("loading tracing programs needs root, or CAP_BPF and CAP_PERFMON");
    }
    let (tracefs, _) = system::ensure_tracefs().context("tracefs is needed for tracepoints")?;
    let plan = f2fs::plan(&KernelView::gather(Some(&tracefs)), prefer);
    if plan.node_reads.chosen.is_none() {
        bail!(
            "no way to observe F2FS node reads on this kernel: {}",
            plan.node_reads.rejected.join("; ")
        );
    }
    Ok(plan)
}

async fn stream(args: &StreamArgs, plan: &Plan) -> Result<()> {
    let manifest = args.probes.as_deref().map(Manifest::load).transpose()?;
    let mut source = BpfSource::start(plan, manifest.as_ref())?;
    report_attachments(&source, plan);
    let packages = Packages::from_file_or(args.packages.as_deref(), None)?;
    let mut model = Model::new(ModelConfig {
        packages,
        ..ModelConfig::default()
    });
    model.start_at(source.now_ns());
    let exposition: metrics::Exposition = Default::default();
    let _server = match args.openmetrics {
        Some(addr) => Some(metrics::serve(addr, std::sync::Arc::clone(&exposition)).await?),
        None => None,
    };
    let interval = Duration::from_secs_f64(args.interval);
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut ticker = tokio::time::interval_at(start + interval, interval);
    // A late tick shifts the next ones rather than firing a burst of near-empty intervals.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let mut state = IntervalState::new(start);
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                state.emit(&source, args.json)?;
                model.advance_to(source.now_ns());
                model.take_closed();
                if let Ok(mut text) = exposition.lock() {
                    *text = metrics::render(&model, "");
                }
            }
            read = source.next_batch(&mut batch) => {
                read?;
                state.events += batch.iter().filter(|e| e.kind != tracer_common::EventKind::Lost as u8).count() as u64;
                batch.drain(..).for_each(|event| model.ingest(&event));
            }
            _ = sleep_until(deadline) => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
    }
    // The last, partial interval, so that nothing counted is left out.
    if state.last_emit.elapsed() >= Duration::from_millis(1) {
        state.emit(&source, args.json)?;
    }
    Ok(())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What was attached and what was not, on stderr; "ready" tells scripts the counting has begun.
fn report_attachments(source: &BpfSource, plan: &Plan) {
    for outcome in source.outcomes() {
        match &outcome.error {
            None => eprintln!("nodescope stream: {}: {}", outcome.what, outcome.target),
            Some(err) => eprintln!(
                "nodescope stream: {}: NOT attached {}: {err}",
                outcome.what, outcome.target
            ),
        }
    }
    for missing in plan.missing() {
        eprintln!("nodescope stream: not observed: {missing}");
    }
    if let Some(report) = source.rfc_report() {
        for attached in &report.attached {
            eprintln!("nodescope stream: rfc: {attached}");
        }
        for failed in &report.failed {
            eprintln!("nodescope stream: rfc: NOT attached {failed}");
        }
    }
    eprintln!("nodescope stream: ready");
}

/// The previous interval's totals, to turn cumulative kernel counters into deltas.
struct IntervalState {
    start: Instant,
    last_emit: Instant,
    prev: Counts,
    prev_drops: u64,
    prev_fails: u64,
    prev_rfc: BTreeMap<&'static str, u64>,
    events: u64,
    device_names: HashMap<u32, Option<String>>,
}

impl IntervalState {
    fn new(start: Instant) -> IntervalState {
        IntervalState {
            start,
            last_emit: start,
            prev: Counts::new(),
            prev_drops: 0,
            prev_fails: 0,
            prev_rfc: BTreeMap::new(),
            events: 0,
            device_names: HashMap::new(),
        }
    }

    /// Per-kind counts of the RFC probes since the last interval (None without a manifest).
    fn rfc_deltas(&mut self, source: &BpfSource) -> Result<Option<BTreeMap<&'static str, u64>>> {
        let Some(report) = source.rfc_report() else {
            return Ok(None);
        };
        let attached: Vec<&str> = report
            .attached
            .iter()
            .filter_map(|a| a.split(' ').next())
            .collect();
        let mut deltas = BTreeMap::new();
        for (kind, count) in source.rfc_counts()? {
            if attached.contains(&kind.name()) {
                let before = self.prev_rfc.insert(kind.name(), count).unwrap_or(0);
                deltas.insert(kind.name(), count - before);
            }
        }
        Ok(Some(deltas))
    }

    fn emit(&mut self, source: &BpfSource, as_json: bool) -> Result<()> {
        let now = Instant::now();
        let cur: Counts = source.counts()?.into_iter().collect();
        let (drops, fails) = (source.drops()?, source.count_failures()?);
        for key in cur.keys() {
            self.device_names
                .entry(key.dev)
                .or_insert_with(|| device_name(key.dev));
        }
        let rfc = self.rfc_deltas(source)?;
        let names = &self.device_names;
        let report = IntervalReport {
            t_s: (now - self.start).as_secs_f64(),
            interval_s: (now - self.last_emit).as_secs_f64(),
            processes: process_rows(&self.prev, &cur),
            devices: device_rows(&self.prev, &cur, |dev| names.get(&dev).cloned().flatten()),
            events: std::mem::take(&mut self.events),
            drops: drops.saturating_sub(self.prev_drops),
            counter_drops: fails.saturating_sub(self.prev_fails),
            rfc,
        };
        if as_json {
            println!("{}", to_json(&report));
        } else {
            println!("{}", to_text(&report));
        }
        (self.prev, self.prev_drops, self.prev_fails) = (cur, drops, fails);
        self.last_emit = now;
        Ok(())
    }
}

/// Cumulative counters per (device, tgid, uid), from whichever source.
pub type Counts = HashMap<TaskKey, TaskCounts>;

/// One process over one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    pub uid: u32,
    pub node_reads_demand: u64,
    pub node_reads_readahead: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
}

/// One device over one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceRow {
    /// "major:minor"; "0:0" for counts from probes that cannot see the device.
    pub dev: String,
    pub name: Option<String>,
    pub node_reads: u64,
    pub node_writes: u64,
    pub checkpoints: u64,
    /// node_writes / checkpoints, when there was a checkpoint.
    pub node_writes_per_checkpoint: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalReport {
    /// Seconds since the stream started, at the end of this interval.
    pub t_s: f64,
    pub interval_s: f64,
    pub processes: Vec<ProcessRow>,
    pub devices: Vec<DeviceRow>,
    /// Events received through the ring buffer.
    pub events: u64,
    /// Events the ring buffer had no room for (the counts still include them).
    pub drops: u64,
    /// Counter increments lost because the counter map was full.
    pub counter_drops: u64,
    /// Events per kind from the RFC probes (with `--probes`).
    pub rfc: Option<BTreeMap<&'static str, u64>>,
}

fn delta(prev: &Counts, key: &TaskKey, cur: &TaskCounts) -> TaskCounts {
    let zero = TaskCounts::default();
    let before = prev.get(key).unwrap_or(&zero);
    TaskCounts {
        node_reads_demand: cur
            .node_reads_demand
            .saturating_sub(before.node_reads_demand),
        node_reads_readahead: cur
            .node_reads_readahead
            .saturating_sub(before.node_reads_readahead),
        node_writes: cur.node_writes.saturating_sub(before.node_writes),
        checkpoints: cur.checkpoints.saturating_sub(before.checkpoints),
        comm: cur.comm,
        comm_ns: cur.comm_ns,
    }
}

fn is_zero(c: &TaskCounts) -> bool {
    c.node_reads_demand == 0
        && c.node_reads_readahead == 0
        && c.node_writes == 0
        && c.checkpoints == 0
}

fn comm_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

/// Per-process deltas (devices summed), busiest first; idle processes left out.
pub fn process_rows(prev: &Counts, cur: &Counts) -> Vec<ProcessRow> {
    let mut rows: BTreeMap<(u32, u32), ProcessRow> = BTreeMap::new();
    for (key, counts) in cur {
        let d = delta(prev, key, counts);
        if is_zero(&d) {
            continue;
        }
        let row = rows
            .entry((key.tgid, key.uid))
            .or_insert_with(|| ProcessRow {
                pid: key.tgid,
                comm: comm_string(&d.comm),
                uid: key.uid,
                ..ProcessRow::default()
            });
        row.node_reads_demand += d.node_reads_demand;
        row.node_reads_readahead += d.node_reads_readahead;
        row.node_writes += d.node_writes;
        row.checkpoints += d.checkpoints;
    }
    let mut rows: Vec<ProcessRow> = rows.into_values().collect();
    let busy = |r: &ProcessRow| r.node_reads_demand + r.node_reads_readahead + r.node_writes;
    rows.sort_by(|a, b| busy(b).cmp(&busy(a)).then(a.pid.cmp(&b.pid)));
    rows
}

/// Per-device deltas; devices without activity left out.
pub fn device_rows(
    prev: &Counts,
    cur: &Counts,
    name_of: impl Fn(u32) -> Option<String>,
) -> Vec<DeviceRow> {
    let mut rows: BTreeMap<u32, DeviceRow> = BTreeMap::new();
    for (key, counts) in cur {
        let d = delta(prev, key, counts);
        if is_zero(&d) {
            continue;
        }
        let row = rows.entry(key.dev).or_insert_with(|| DeviceRow {
            dev: format!("{}:{}", key.dev >> 20, key.dev & ((1 << 20) - 1)),
            name: name_of(key.dev),
            ..DeviceRow::default()
        });
        row.node_reads += d.node_reads_demand + d.node_reads_readahead;
        row.node_writes += d.node_writes;
        row.checkpoints += d.checkpoints;
    }
    let mut rows: Vec<DeviceRow> = rows.into_values().collect();
    for row in &mut rows {
        row.node_writes_per_checkpoint =
            (row.checkpoints > 0).then(|| row.node_writes as f64 / row.checkpoints as f64);
    }
    rows
}

/// The kernel's name for a block device number as F2FS tracepoints encode it.
fn device_name(dev: u32) -> Option<String> {
    let path = format!("/sys/dev/block/{}:{}", dev >> 20, dev & ((1 << 20) - 1));
    let target = std::fs::read_link(Path::new(&path)).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// One JSON line (docs/STREAM.md).
pub fn to_json(report: &IntervalReport) -> Value {
    let sum = |f: fn(&ProcessRow) -> u64| report.processes.iter().map(f).sum::<u64>();
    let demand = sum(|p| p.node_reads_demand);
    let readahead = sum(|p| p.node_reads_readahead);
    json!({
        "t": round_ms(report.t_s),
        "interval_s": round_ms(report.interval_s),
        "totals": {
            "node_reads": demand + readahead,
            "node_reads_demand": demand,
            "node_reads_readahead": readahead,
            "node_writes": sum(|p| p.node_writes),
            "checkpoints": report.devices.iter().map(|d| d.checkpoints).sum::<u64>(),
        },
        "processes": report.processes,
        "devices": report.devices,
        "events": report.events,
        "drops": report.drops,
        "counter_drops": report.counter_drops,
        "rfc": report.rfc,
    })
}

fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn to_text(report: &IntervalReport) -> String {
    let totals = to_json(report)["totals"].clone();
    let top: Vec<String> = report
        .processes
        .iter()
        .take(3)
        .map(|p| {
            let reads = p.node_reads_demand + p.node_reads_readahead;
            format!("{}[{}] r={reads} w={}", p.comm, p.pid, p.node_writes)
        })
        .collect();
    format!(
        "{:8.3}s reads={} (ra {}) writes={} checkpoints={} drops={}  {}",
        report.t_s,
        totals["node_reads"],
        totals["node_reads_readahead"],
        totals["node_writes"],
        totals["checkpoints"],
        report.drops,
        top.join("  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(dev: u32, tgid: u32) -> TaskKey {
        TaskKey {
            dev,
            tgid,
            uid: 0,
            _pad: 0,
        }
    }

    fn counts(demand: u64, ra: u64, writes: u64, cps: u64, comm: &str) -> TaskCounts {
        let mut c = TaskCounts {
            node_reads_demand: demand,
            node_reads_readahead: ra,
            node_writes: writes,
            checkpoints: cps,
            ..TaskCounts::default()
        };
        c.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        c
    }

    const VDA: u32 = 254 << 20;

    #[test]
    fn rows_are_interval_deltas_with_idle_processes_left_out() {
        let prev: Counts = [
            (key(VDA, 10), counts(5, 0, 0, 0, "cat")),
            (key(VDA, 11), counts(1, 0, 0, 0, "idle")),
        ]
        .into();
        let cur: Counts = [
            (key(VDA, 10), counts(8, 2, 0, 0, "cat")),
            (key(VDA, 11), counts(1, 0, 0, 0, "idle")),
            (key(VDA, 12), counts(0, 0, 30, 1, "f2fs_ckpt-254:0")),
        ]
        .into();
        let rows = process_rows(&prev, &cur);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].comm, "f2fs_ckpt-254:0");
        assert_eq!((rows[0].node_writes, rows[0].checkpoints), (30, 1));
        assert_eq!(rows[1].pid, 10);
        assert_eq!(
            (rows[1].node_reads_demand, rows[1].node_reads_readahead),
            (3, 2)
        );
    }

    #[test]
    fn devices_sum_processes_and_divide_writes_by_checkpoints() {
        let cur: Counts = [
            (key(VDA, 10), counts(3, 1, 10, 0, "sync")),
            (key(VDA, 12), counts(0, 0, 20, 2, "f2fs_ckpt-254:0")),
            (key(0, 13), counts(7, 0, 0, 0, "cat")),
        ]
        .into();
        let rows = device_rows(&Counts::new(), &cur, |dev| {
            (dev == VDA).then(|| "vda".into())
        });
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].dev, "0:0");
        assert_eq!(rows[0].node_writes_per_checkpoint, None);
        assert_eq!(rows[1].dev, "254:0");
        assert_eq!(rows[1].name.as_deref(), Some("vda"));
        assert_eq!(
            (rows[1].node_reads, rows[1].node_writes, rows[1].checkpoints),
            (4, 30, 2)
        );
        assert_eq!(rows[1].node_writes_per_checkpoint, Some(15.0));
    }

    #[test]
    fn json_line_has_totals_processes_devices_and_drops() {
        let cur: Counts = [
            (key(VDA, 10), counts(3, 1, 0, 0, "cat")),
            (key(VDA, 11), counts(0, 5, 2, 1, "sh")),
        ]
        .into();
        let report = IntervalReport {
            t_s: 2.00049,
            interval_s: 1.0,
            processes: process_rows(&Counts::new(), &cur),
            devices: device_rows(&Counts::new(), &cur, |_| None),
            events: 9,
            drops: 1,
            counter_drops: 0,
            rfc: Some(BTreeMap::from([("restore", 7)])),
        };
        let line = to_json(&report);
        assert_eq!(line["rfc"]["restore"], 7);
        assert_eq!(line["t"], 2.0);
        assert_eq!(line["totals"]["node_reads"], 9);
        assert_eq!(line["totals"]["node_reads_demand"], 3);
        assert_eq!(line["totals"]["node_reads_readahead"], 6);
        assert_eq!(line["totals"]["node_writes"], 2);
        assert_eq!(line["totals"]["checkpoints"], 1);
        assert_eq!(line["drops"], 1);
        assert_eq!(line["events"], 9);
        let sh = &line["processes"][0];
        assert_eq!(
            (sh["pid"].as_u64(), sh["comm"].as_str()),
            (Some(11), Some("sh"))
        );
        assert_eq!(sh["node_reads_readahead"], 5);
        assert_eq!(line["devices"][0]["dev"], "254:0");
        assert_eq!(line["devices"][0]["node_writes_per_checkpoint"], 2.0);
        // One line: no newline inside.
        assert!(!line.to_string().contains('\n'));
    }
}
