//! `nodescope-bench daemon [--json] [--rate N] [--seconds S]` (`cargo xtask bench daemon`):
//! the daemon's own CPU and RSS while the simulator's events arrive at a fixed rate (default
//! 100,000 events/s).
//!
//! The simulator's vm-replay events (generated first, untimed, as `bench cpu` does) are
//! written to a recording stamped at exactly the rate; the real `nodescope daemon` process then
//! replays it at speed 1 with everything a phone's daemon runs besides the controller (which
//! needs knob files): the model, OpenMetrics (scraped once a second), the rolling recording
//! and the socket, with one `stream --connect` client. After a 2 s warm-up, CPU is the
//! daemon's utime + stime from /proc/PID/stat over S seconds of wall time, RSS its VmRSS
//! sampled every 100 ms (and VmHWM at the end). Wakeups are the voluntary context switches of
//! all its threads, per second: over the measured span, and then idle (the feed played out, the client
//! gone, no scrape) over 10 s.
use std::{
    fs::File,
    io::BufWriter,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use nodescope::record::{writer::Writer, Header};
use serde::Serialize;

const WARM_UP: Duration = Duration::from_secs(2);
const WINDOW_NS: u64 = 1_000_000_000;

#[derive(Serialize)]
struct Report {
    events_per_s: u64,
    measured_s: f64,
    cpu_user_s: f64,
    cpu_system_s: f64,
    cpu_percent_of_one_core: f64,
    rss_start_kib: u64,
    rss_peak_sampled_kib: u64,
    rss_end_kib: u64,
    vm_hwm_kib: u64,
    /// VmRSS every 30 s of the measured span: whether it levels off.
    rss_every_30s_kib: Vec<u64>,
    /// CPU over each 30 s of the measured span: whether the cost levels off.
    cpu_percent_every_30s: Vec<f64>,
    client_lines: usize,
    /// Voluntary context switches of all the daemon's threads per second (each a wakeup) over the measured span, with the events, the scrapes and the client.
    wakeups_per_s_loaded: f64,
    /// The same once the feed has ended, the client is gone and nobody scrapes: what an idle
    /// daemon costs a phone's battery.
    wakeups_per_s_idle: f64,
    idle_measured_s: f64,
}

/// How long the idle daemon is watched.
const IDLE_SPAN: Duration = Duration::from_secs(10);

/// The arguments of `daemon`.
#[derive(clap::Parser)]
pub struct Args {
    /// Print the figures as JSON too.
    #[arg(long)]
    json: bool,
    /// Events per second (at least 1).
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Seconds measured after the warm-up (at least 1).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

pub fn main(args: Args) -> Result<()> {
    let json = args.json;
    let (rate, seconds) = (args.rate.max(1), args.seconds.max(1));
    let scratch = tempfile::Builder::new()
        .prefix("nodescope-bench-daemon-")
        .tempdir()
        .context("a scratch directory")?;
    // Warm-up, the measured span and slack for the start.
    let span_s = seconds + WARM_UP.as_secs() + 3;
    let recording = scratch.path().join("feed.nsr");
    write_feed(&recording, rate, span_s)?;
    let report = measure(
        &nodescope_binary()?,
        scratch.path(),
        &recording,
        rate,
        seconds,
    )?;
    println!(
        "nodescope daemon at {} events/s (simulator events replayed; --record, --openmetrics, \
         one stream --connect client): CPU {:.2} s user + {:.2} s system over {:.1} s = {:.2} % \
         of one core; RSS {} KiB at the start, {} KiB peak (sampled), {} KiB at the end, \
         VmHWM {} KiB (every 30 s: {:?} KiB); CPU every 30 s: {:.1?} %; the client printed {} \
         window lines; wakeups {:.1}/s under load, {:.2}/s idle (source ended, no client, no \
         scrape, over {:.1} s)",
        report.events_per_s,
        report.cpu_user_s,
        report.cpu_system_s,
        report.measured_s,
        report.cpu_percent_of_one_core,
        report.rss_start_kib,
        report.rss_peak_sampled_kib,
        report.rss_end_kib,
        report.vm_hwm_kib,
        report.rss_every_30s_kib,
        report.cpu_percent_every_30s,
        report.client_lines,
        report.wakeups_per_s_loaded,
        report.wakeups_per_s_idle,
        report.idle_measured_s
    );
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

/// `NODESCOPE_BIN` (set by `cargo xtask bench daemon`), else `nodescope` next to this binary.
fn nodescope_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("NODESCOPE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().context("finding nodescope-bench")?;
    let sibling = me.with_file_name("nodescope");
    if !sibling.exists() {
        bail!(
            "{} missing: run through `cargo xtask bench daemon`, which builds it",
            sibling.display()
        );
    }
    Ok(sibling)
}

/// `span_s` seconds of the simulator's events at `rate`, as a recording.
fn write_feed(path: &Path, rate: u64, span_s: u64) -> Result<()> {
    let mut events = crate::cpu::simulator_events((rate * span_s) as usize)?;
    let origin = WINDOW_NS; // any clock: the replay paces by differences
    let gap = 1_000_000_000 / rate;
    for (i, event) in events.iter_mut().enumerate() {
        event.ts_ns = origin + i as u64 * gap;
    }
    let header = Header {
        host: "bench".into(),
        kernel: "simulator".into(),
        source: "sim".into(),
        detail: format!("vm-replay events at {rate}/s"),
        devices: vec![sim::live::DEV_NAME.into()],
        clock_origin_ns: origin,
        window_ns: WINDOW_NS,
        ..Header::default()
    };
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = Writer::new(BufWriter::new(file), &header)?;
    for event in &events {
        writer.event(event)?;
    }
    writer.finish(origin + span_s * 1_000_000_000)?;
    Ok(())
}

/// Kills the child when dropped, however the bench ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn measure(
    nodescope: &Path,
    scratch: &Path,
    recording: &Path,
    rate: u64,
    seconds: u64,
) -> Result<Report> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let socket = scratch.join("sock/daemon.sock");
    let daemon = Running(
        Command::new(nodescope)
            .args(["daemon", "--source", "replay", "--speed", "1"])
            .arg(recording)
            .arg("--socket")
            .arg(&socket)
            .args(["--openmetrics", &format!("127.0.0.1:{port}")])
            .arg("--record")
            .arg(scratch.join("rec"))
            .arg("--log")
            .arg(scratch.join("daemon.log"))
            .stdin(Stdio::null())
            .spawn()
            .context("starting nodescope daemon")?,
    );
    let pid = daemon.0.id();
    let started = Instant::now();
    while !socket.exists() {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("the daemon did not open its socket in 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = Running(
        Command::new(nodescope)
            .args(["stream", "--json", "--connect"])
            .arg(&socket)
            .stdout(File::create(scratch.join("client.jsonl"))?)
            .stderr(Stdio::null())
            .spawn()
            .context("starting stream --connect")?,
    );
    std::thread::sleep(WARM_UP);
    let switches0 = context_switches(pid)?;
    let (user0, system0) = cpu_ticks(pid)?;
    let rss_start = status_kib(pid, "VmRSS")?;
    let from = Instant::now();
    let mut peak = rss_start;
    let mut next_scrape = Instant::now();
    let mut next_reading = Instant::now() + Duration::from_secs(30);
    let mut readings = Vec::new();
    // CPU per 30 s span, to tell a cost that levels off from one that keeps growing.
    let (mut cpu_spans, mut ticks_before) = (Vec::new(), user0 + system0);
    while from.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(100));
        let rss = status_kib(pid, "VmRSS")?;
        peak = peak.max(rss);
        if Instant::now() >= next_reading {
            readings.push(rss);
            let (user, system) = cpu_ticks(pid)?;
            cpu_spans.push(percent_of_one_core(user + system - ticks_before, 30.0));
            ticks_before = user + system;
            next_reading += Duration::from_secs(30);
        }
        if Instant::now() >= next_scrape {
            scrape(port);
            next_scrape += Duration::from_secs(1);
        }
    }
    let measured_s = from.elapsed().as_secs_f64();
    let (user1, system1) = cpu_ticks(pid)?;
    let switches1 = context_switches(pid)?;
    let rss_end = status_kib(pid, "VmRSS")?;
    let vm_hwm = status_kib(pid, "VmHWM")?;
    // Idle: the client gone, no scrape, and the feed played out (it runs 3 s past the span).
    drop(client);
    std::thread::sleep(Duration::from_secs(5));
    let idle0 = context_switches(pid)?;
    let idle_from = Instant::now();
    std::thread::sleep(IDLE_SPAN);
    let idle1 = context_switches(pid)?;
    let idle_measured_s = idle_from.elapsed().as_secs_f64();
    drop(daemon);
    let client_lines = std::fs::read_to_string(scratch.join("client.jsonl"))?
        .lines()
        .count();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let (user, system) = (
        (user1 - user0) as f64 / ticks,
        (system1 - system0) as f64 / ticks,
    );
    Ok(Report {
        events_per_s: rate,
        measured_s,
        cpu_user_s: user,
        cpu_system_s: system,
        cpu_percent_of_one_core: (user + system) / measured_s * 100.0,
        rss_start_kib: rss_start,
        rss_peak_sampled_kib: peak,
        rss_end_kib: rss_end,
        vm_hwm_kib: vm_hwm,
        rss_every_30s_kib: readings,
        cpu_percent_every_30s: cpu_spans,
        client_lines,
        wakeups_per_s_loaded: switches1.saturating_sub(switches0) as f64 / measured_s,
        wakeups_per_s_idle: idle1.saturating_sub(idle0) as f64 / idle_measured_s,
        idle_measured_s,
    })
}

/// Voluntary context switches of every thread of `pid` so far: each is a sleep that ended in a
/// wakeup (involuntary ones are preemptions, not wakeups).
fn context_switches(pid: u32) -> Result<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("listing /proc/{pid}/task (did the daemon exit?)"))?;
    let mut total = 0;
    for task in tasks {
        let status = std::fs::read_to_string(task?.path().join("status"))?;
        for line in status.lines() {
            if let Some(value) = line.strip_prefix("voluntary_ctxt_switches:") {
                total += value.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Ok(total)
}

/// Clock ticks of CPU over `seconds` of wall time, as a percentage of one core.
fn percent_of_one_core(ticks: u64, seconds: f64) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / per_second / seconds * 100.0
}

/// utime and stime (clock ticks) from /proc/PID/stat.
fn cpu_ticks(pid: u32) -> Result<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (did the daemon exit?)"))?;
    // Fields after the command name (which may hold spaces, inside parentheses).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `after` starts at field 3.
    let field = |n: usize| -> Result<u64> {
        fields
            .get(n - 3)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat field {n}"))
    };
    Ok((field(14)?, field(15)?))
}

/// A `Name:   N kB` line of /proc/PID/status, in KiB.
fn status_kib(pid: u32, name: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {name} in /proc/{pid}/status"))
}

/// One OpenMetrics scrape, as Prometheus would (errors ignored: a figure, not a test).
fn scrape(port: u16) {
    use std::io::{Read as _, Write as _};
    if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut body = Vec::new();
        let _ = stream.read_to_end(&mut body);
    }
}
