//! `nodescope stream`: one line per window, from any source through the model, in one schema
//! (docs/STREAM.md): node reads (demand / readahead), node writes, checkpoints and the cache's
//! activity, per process, app and device. The kernel source's exact in-kernel counts are what
//! its lines report (`model::exact`).
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use tracer_common::text::escape_name;

use crate::{
    cmd::WindowArg,
    runner::{signals::SignalWaiter, RunOptions, Runner},
    source::{
        bpf::{
            f2fs::planner::{self, KernelView, NodeReadVariant, Plan},
            live::BpfSource,
        },
        open::{open, rfc_probes, SourceArgs, SourceChoice},
        Source,
    },
    system::{self, Privileges},
    view::{
        jsonline::line_text,
        lines::WindowLines,
        metrics::{self, MetricsSink, Renderer},
        stdout::{closed_is_success, print, print_line},
    },
};

#[derive(Args)]
pub(crate) struct StreamArgs {
    /// One JSON object per line (docs/STREAM.md); without it, a short text line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    window: WindowArg,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "S", allow_negative_numbers = true,
          value_parser = crate::cmd::parse_duration)]
    duration: Option<f64>,
    /// Print which probes would be used, and why not the others, then exit (loads nothing).
    #[arg(long)]
    plan: bool,
    /// Also serve the model as OpenMetrics at http://ADDR/metrics (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    openmetrics: Option<std::net::SocketAddr>,
    /// Android packages.list, for uid -> app names.
    #[arg(long, value_name = "FILE")]
    packages: Option<std::path::PathBuf>,
    /// The source: the kernel (bpf, the default), the simulator, or a recording.
    #[command(flatten)]
    source: SourceArgs,
    /// Print the windows a running `nodescope daemon` serves on its socket (default: its
    /// default socket) instead of opening a source: the same lines, nothing loaded.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1,
          conflicts_with_all = ["source", "plan", "probes", "node_reads", "openmetrics", "image"])]
    connect: Option<Option<std::path::PathBuf>>,
}

pub(crate) fn run(args: StreamArgs) -> Result<()> {
    let positive = |seconds: f64| seconds.is_finite() && seconds > 0.0;
    if !positive(args.window.seconds) || args.duration.is_some_and(|d| !positive(d)) {
        bail!("--window and --duration must be positive numbers of seconds");
    }
    if let Some(socket) = &args.connect {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")?;
        let socket = crate::client::socket_or_default(socket.as_deref());
        return closed_is_success(runtime.block_on(stream_connected(&args, &socket)));
    }
    let kernel = matches!(args.source.source, None | Some(SourceChoice::Bpf));
    if kernel && args.plan {
        let mut text = planner::plan_this_kernel(args.source.node_reads).render();
        if args.source.traces_accesses() {
            text += &crate::source::bpf::f2fs::access::plan_this_kernel(
                args.source.function_hook,
                args.source.lookup_latency,
            )
            .render();
        }
        return closed_is_success(print(&text));
    }
    let plan = if kernel {
        match preflight(args.source.node_reads) {
            Ok(plan) => Some(plan),
            Err(err) => {
                // What is missing is the whole message: no backtrace (main's Debug print would
                // add one whenever RUST_BACKTRACE is set), and a status scripts can tell apart.
                say!("nodescope stream: {err:#}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    // A reader that went away ends the run like --duration: the source is dropped (and with
    // it anything it holds) on the way out.
    closed_is_success(runtime.block_on(stream(&args, plan)))
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
    let plan = planner::plan(&KernelView::gather(Some(&tracefs)), prefer);
    if plan.node_reads.chosen.is_none() {
        bail!(
            "no way to observe F2FS node reads on this kernel: {}",
            plan.node_reads.rejected.join("; ")
        );
    }
    Ok(plan)
}

/// The kernel source as `plan` and `--probes` say, or the source `--source` names.
fn open_source(args: &StreamArgs, plan: Option<Plan>) -> Result<Box<dyn Source>> {
    let Some(mut plan) = plan else {
        let opened = open(&args.source, SourceChoice::Bpf)?;
        if let Some(banner) = &opened.banner {
            say!("nodescope stream: {banner}");
        }
        return Ok(opened.source);
    };
    // The RFC's trampolines, the access traces and the footprints all read this kernel's BTF:
    // parsed once for them, let go when the source has started (as `source::open` does).
    let btf = crate::source::bpf::discover::btf::hold_this_kernel();
    let (manifest, banner) = rfc_probes(&args.source)?;
    let node_read_events = args.source.node_read_events_with(manifest.as_ref());
    let mut source = BpfSource::start(
        &mut plan,
        manifest.as_ref(),
        node_read_events,
        args.source.function_hook,
    )?;
    if args.source.traces_accesses() {
        source.attach_accesses(&crate::source::bpf::f2fs::access::plan_this_kernel(
            args.source.function_hook,
            args.source.lookup_latency,
        ))?;
    }
    // The probes' line as it always was, then what each RFC kind is seen by, kind by kind.
    if let Some(banner) = &banner {
        say!("nodescope stream: {banner}");
    }
    if crate::source::bpf::discover::startup::rfc_kernel() {
        let coverage = source.watch_rfc_kernel();
        say!("nodescope stream: {}", coverage.short());
        crate::output::stderr_text(&coverage.table());
    }
    report_attachments(&source, &plan);
    drop(btf);
    crate::system::release_freed_memory();
    Ok(Box::new(source))
}

async fn stream(args: &StreamArgs, plan: Option<Plan>) -> Result<()> {
    let source = open_source(args, plan)?;
    let pipeline = crate::cmd::live_pipeline(
        source,
        &args.window,
        args.packages.as_deref(),
        args.source.image.as_deref(),
    )?;
    // --duration ends the run in the source's clock (as `record`'s), whatever the window: a
    // window it cuts short is printed as the partial last one.
    let end_ns = args
        .duration
        .map(|d| pipeline.origin_ns().saturating_add((d * 1e9) as u64));
    let pipeline = pipeline.until(end_ns);
    let device = pipeline.info().devices.first().cloned().unwrap_or_default();
    say!("nodescope stream: ready ({})", pipeline.info().detail);
    let mut runner = Runner::new(pipeline, None, RunOptions::stopping());
    let _server = match args.openmetrics {
        Some(addr) => Some(metrics::serve(addr, Renderer::new(runner.input_sender())).await?),
        None => None,
    };
    let wanted = args
        .duration
        .map(|d| (d / args.window.seconds).ceil() as u64);
    // The kernel's counters keep counting between the last window and the stop: their last,
    // partial window is printed too, so that nothing counted is left out.
    let mut lines = WindowLines::new(args.json, wanted, true);
    let mut metrics = MetricsSink::new(device, None);
    runner.run(&mut [&mut lines, &mut metrics]).await?;
    if let Some(note) = runner.pipeline().closing_note() {
        say!("nodescope stream: {note}");
    }
    Ok(())
}

/// `stream --connect`: the daemon's window lines, printed as they come, until --duration's
/// number of windows, a signal, or the daemon's end.
async fn stream_connected(args: &StreamArgs, socket: &std::path::Path) -> Result<()> {
    use crate::{client::Connection, schema::protocol::Message};
    let mut connection = Connection::open(socket).await?;
    let hello = &connection.hello;
    if hello.window_ns == 0 {
        say!(
            "nodescope stream: the daemon's hello gives no window length (window_ns 0): its \
             windows are of unknown length, and --duration bounds the wait in time only"
        );
    } else {
        let daemon_window_s = hello.window_ns as f64 / 1e9;
        if (daemon_window_s - args.window.seconds).abs() > 1e-9 {
            say!(
                "nodescope stream: the daemon's windows are {daemon_window_s} s (--window is \
                 the daemon's)"
            );
        }
    }
    let windows_wanted = args.duration.and_then(|d| windows_in(d, hello.window_ns));
    // --duration is also a bound in wall time: a daemon whose source ended, or a silent one,
    // sends no windows, and the count alone would wait for ever. One second past it leaves
    // room for the last window's refresh.
    let deadline = args
        .duration
        .map(|d| tokio::time::Instant::now() + Duration::from_secs_f64(d + 1.0));
    say!(
        "nodescope stream: ready (connected to {}: {})",
        socket.display(),
        escape_name(&hello.source.detail)
    );
    let mut signals = SignalWaiter::install()?;
    let mut printed = 0u64;
    while windows_wanted.is_none_or(|wanted| printed < wanted) {
        let next = sleep_until_or_never(deadline, connection.next());
        let message = match signals.until_signal(next).await {
            None => break,
            Some(None) => {
                match windows_wanted {
                    Some(wanted) => say!(
                        "nodescope stream: --duration passed with {printed} of {wanted} \
                         windows from the daemon"
                    ),
                    None => say!(
                        "nodescope stream: --duration passed with {printed} windows from the \
                         daemon (their length unknown)"
                    ),
                }
                break;
            }
            Some(Some(message)) => message?,
        };
        match message {
            Some(Message::Window { line }) => {
                if args.json {
                    // serde_json writes control characters as \u escapes.
                    print_line(line.to_json())?;
                } else {
                    // The daemon's text, not ours: line_text escapes it.
                    print_line(line_text(&line))?;
                }
                printed += 1;
            }
            Some(Message::End { reason }) => {
                say!(
                    "nodescope stream: the daemon stopped ({})",
                    escape_name(&reason)
                );
                break;
            }
            Some(_) => {}
            None => {
                say!("nodescope stream: the daemon closed the connection");
                break;
            }
        }
    }
    Ok(())
}

/// How many of the daemon's windows `duration_s` seconds hold (the last one begun counts);
/// None when the hello's `window_ns` is 0, a length no daemon runs with: unknown, not
/// "every window there will ever be".
fn windows_in(duration_s: f64, window_ns: u64) -> Option<u64> {
    if window_ns == 0 {
        return None;
    }
    Some((duration_s * 1e9 / window_ns as f64).ceil() as u64)
}

/// `next`, unless `deadline` passes first (None then); without a deadline, `next`.
async fn sleep_until_or_never<T>(
    deadline: Option<tokio::time::Instant>,
    next: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, next).await.ok(),
        None => Some(next.await),
    }
}

/// What was attached and what was not, on stderr.
fn report_attachments(source: &BpfSource, plan: &Plan) {
    for outcome in source.outcomes() {
        match &outcome.error {
            None => say!("nodescope stream: {}: {}", outcome.what, outcome.target),
            Some(err) => say!(
                "nodescope stream: {}: NOT attached {}: {err}",
                outcome.what,
                outcome.target
            ),
        }
    }
    for (what, refusal) in plan.refusals() {
        say!("nodescope stream: {what}: not used: {refusal}");
    }
    for missing in plan.missing() {
        say!("nodescope stream: not observed: {missing}");
    }
    if let Some(report) = source.rfc_report() {
        for attached in &report.attached {
            say!("nodescope stream: rfc: {attached}");
        }
        for failed in &report.failed {
            say!("nodescope stream: rfc: NOT attached {failed}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::windows_in;

    #[test]
    fn a_hello_without_a_window_length_asks_for_no_count_of_windows() {
        assert_eq!(windows_in(3.0, 0), None);
        assert_eq!(windows_in(3.0, 1_000_000_000), Some(3));
        assert_eq!(windows_in(2.5, 1_000_000_000), Some(3));
        assert_eq!(windows_in(1.0, 250_000_000), Some(4));
    }
}
