//! OpenMetrics (Prometheus) exposition of the model: per-app and per-device counters, cache
//! gauges and knob values, served at /metrics by a small HTTP server. The exposition is
//! rendered per scrape, by the run loop's [`MetricsSink`] from the model as it is then: nothing
//! is rendered while nobody scrapes.
use std::{
    fmt::Write as _,
    net::{IpAddr, SocketAddr},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{Context as _, Result};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
};
use tracer_common::{RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS};

use crate::{
    model::{Counters, LatencyHistogram, Model},
    pipeline::Pipeline,
    runner::{Flow, Input, Sink},
};

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Label values escape backslash, quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# TYPE {name} {kind}\n# HELP {name} {help}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(self.out, "{name}{{{}}} {value}", labels.join(","));
    }
}

/// Per-app counter families: (family, help, value, extra label).
type AppCounter = (
    &'static str,
    &'static str,
    fn(&Counters) -> u64,
    (&'static str, &'static str),
);

const APP_COUNTERS: [AppCounter; 5] = [
    (
        "nodescope_node_reads",
        "Node block reads (FS_NODE_READ_IO) attributed to the app",
        |c| c.node_reads_demand,
        ("kind", "demand"),
    ),
    (
        "nodescope_node_reads",
        "Node block reads (FS_NODE_READ_IO) attributed to the app",
        |c| c.node_reads_readahead,
        ("kind", "readahead"),
    ),
    (
        "nodescope_restores",
        "Compressed node entries restored (node reads avoided)",
        |c| c.restores,
        ("", ""),
    ),
    (
        "nodescope_conversions",
        "Raw node entries converted to compressed ones",
        |c| c.conversions,
        ("", ""),
    ),
    (
        "nodescope_node_writes",
        "Node block writes",
        |c| c.node_writes,
        ("", ""),
    ),
];

pub fn render(model: &Model, device: &str) -> String {
    render_with(model, device, None)
}

/// [`render`], and for the daemon with `--record`, whether its rolling recording is still
/// written (`Some(false)` once an error stopped it).
pub(crate) fn render_with(model: &Model, device: &str, recording: Option<bool>) -> String {
    let mut out = String::new();
    let mut family = Family { out: &mut out };
    let mut apps = model.apps();
    apps.sort_by(|a, b| a.app.cmp(&b.app));
    let mut last_family = "";
    for (name, help, value, extra) in APP_COUNTERS {
        if name != last_family {
            family.header(name, "counter", help);
            last_family = name;
        }
        for app in &apps {
            let app_label = crate::view::tui::label(&app.app);
            let mut labels = vec![("app", app_label.as_str()), ("device", device)];
            if !extra.0.is_empty() {
                labels.push(extra);
            }
            family.sample(&format!("{name}_total"), &labels, value(&app.total));
        }
    }
    render_device(&mut family, model, device);
    if let Some(active) = recording {
        family.header(
            "nodescope_recording_active",
            "gauge",
            "1 while the daemon's rolling recording is written, 0 once an error stopped it",
        );
        family.sample(
            "nodescope_recording_active",
            &[("device", device)],
            u64::from(active),
        );
    }
    out.push_str("# EOF\n");
    out
}

fn render_device(family: &mut Family, model: &Model, device: &str) {
    let totals = model.totals();
    let dev = [("device", device)];
    family.header("nodescope_checkpoints", "counter", "Completed checkpoints");
    family.sample("nodescope_checkpoints_total", &dev, totals.checkpoints);
    family.header(
        "nodescope_reclaims",
        "counter",
        "Node cache entries reclaimed, per queue",
    );
    for (queue, value) in queue_values(&totals.reclaims) {
        family.sample(
            "nodescope_reclaims_total",
            &[("device", device), ("queue", queue)],
            value,
        );
    }
    for (name, help, counts, names) in [
        (
            "nodescope_restore_failures",
            "Restores whose validation failed (the copy dropped, disk read), per step",
            &totals.restore_fail_reasons,
            &RESTORE_FAIL_REASONS[..],
        ),
        (
            "nodescope_second_chances",
            "REFERENCED entries given a second chance, per path",
            &totals.second_chance_reasons,
            &SECOND_CHANCE_REASONS[..],
        ),
    ] {
        family.header(name, "counter", help);
        let unknown = [(0, "unknown")];
        for &(code, reason) in names.iter().chain(&unknown) {
            family.sample(
                &format!("{name}_total"),
                &[("device", device), ("reason", reason)],
                counts.get(code),
            );
        }
    }
    restore_latency(family.out, &totals.restore_latency, device);
    node_types(family, model, device);
    family.header(
        "nodescope_events_lost",
        "counter",
        "Events lost before nodescope saw them",
    );
    family.sample("nodescope_events_lost_total", &dev, totals.lost);
    let cache = model.cache();
    family.header(
        "nodescope_cache_entries",
        "gauge",
        "Node cache entries per queue, derived from events",
    );
    let entries = crate::model::PerQueue {
        raw: cache.raw_entries,
        ..cache.slots
    };
    for (queue, value) in queue_values(&entries) {
        family.sample(
            "nodescope_cache_entries",
            &[("device", device), ("queue", queue)],
            value,
        );
    }
    family.header(
        "nodescope_cache_attributed_bytes",
        "gauge",
        "Attributed node cache memory",
    );
    family.sample(
        "nodescope_cache_attributed_bytes",
        &dev,
        cache.attributed_bytes,
    );
    for (name, value) in [
        (
            "nodescope_knob_threshold_percent",
            model.observed().knobs.map(|k| k.threshold),
        ),
        (
            "nodescope_knob_interval_ms",
            model.observed().knobs.map(|k| k.interval_ms),
        ),
    ] {
        if let Some(value) = value {
            family.header(name, "gauge", "Current knob value");
            family.sample(name, &dev, u64::from(value));
        }
    }
}

/// Node reads per node type of the block read, when the model tells them apart (the
/// simulator; `--image`): `type` as the stream names it, `kind` demand or readahead.
fn node_types(family: &mut Family, model: &Model, device: &str) {
    let Some(types) = model.node_types() else {
        return;
    };
    family.header(
        "nodescope_node_reads_by_type",
        "counter",
        "Node block reads per node type of the block (its footer in the image)",
    );
    for (of_type, reads) in types.counts.rows() {
        let of_type = crate::model::node_types::key(of_type);
        for (kind, value) in [("demand", reads.demand), ("readahead", reads.readahead)] {
            family.sample(
                "nodescope_node_reads_by_type_total",
                &[("device", device), ("type", of_type), ("kind", kind)],
                value,
            );
        }
    }
}

/// The smallest and largest bucket bounds exposed, as powers of two of nanoseconds (1.024 us
/// and 1.07 s): a restore decompresses one 4 KiB block, and the model's buckets below and
/// above fold into the first bound and `+Inf`, which a cumulative histogram allows.
const LATENCY_FIRST_BOUND_LOG2: usize = 10;
const LATENCY_LAST_BOUND_LOG2: usize = 30;

/// Nanoseconds as seconds, exactly (nine decimals), so that a reader gets the sum back to the
/// nanosecond.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The restore latency histogram (`LatencyHistogram`: bucket i holds [2^i, 2^(i+1)) ns), as
/// an OpenMetrics histogram in seconds: cumulative buckets up to each bound, `+Inf`, the count
/// and the exact sum. Only timed restores count, as in the model.
fn restore_latency(out: &mut String, h: &LatencyHistogram, device: &str) {
    let name = "nodescope_restore_latency_seconds";
    let device = escape(device);
    let _ = writeln!(
        out,
        "# TYPE {name} histogram\n# HELP {name} Time from finding a compressed copy to the \
         block in place, per timed restore\n# UNIT {name} seconds"
    );
    let mut below = 0;
    for (log2, n) in h.log2_ns.iter().enumerate() {
        below += n;
        let bound = log2 + 1;
        if (LATENCY_FIRST_BOUND_LOG2..=LATENCY_LAST_BOUND_LOG2).contains(&bound) {
            let le = seconds(1 << bound);
            let _ = writeln!(
                out,
                "{name}_bucket{{device=\"{device}\",le=\"{le}\"}} {below}"
            );
        }
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{device=\"{device}\",le=\"+Inf\"}} {}\n\
         {name}_count{{device=\"{device}\"}} {}\n{name}_sum{{device=\"{device}\"}} {}",
        h.count,
        h.count,
        seconds(h.total_ns)
    );
}

fn queue_values(q: &crate::model::PerQueue) -> [(&'static str, u64); 4] {
    [
        ("raw", q.raw),
        ("256", q.b256),
        ("512", q.b512),
        ("1024", q.b1024),
    ]
}

/// How the server gets an exposition: it asks the run loop, whose [`MetricsSink`] renders the
/// model and answers.
#[derive(Clone)]
pub struct Renderer(mpsc::UnboundedSender<Input>);

impl Renderer {
    /// Scrapes go to the run loop's inputs (`Runner::input_sender`).
    pub fn new(inputs: mpsc::UnboundedSender<Input>) -> Renderer {
        Renderer(inputs)
    }

    /// The exposition as the model is now; None once the run loop has stopped.
    async fn render(&self) -> Option<String> {
        let (reply, rendered) = oneshot::channel();
        self.0.send(Input::Scrape(Some(reply))).ok()?;
        rendered.await.ok()
    }
}

/// The run loop's side: answers each scrape with the model's exposition.
pub(crate) struct MetricsSink {
    device: String,
    /// Whether the daemon's rolling recording runs (None: no recording was asked for).
    recording: Option<Arc<AtomicBool>>,
}

impl MetricsSink {
    pub(crate) fn new(device: String, recording: Option<Arc<AtomicBool>>) -> MetricsSink {
        MetricsSink { device, recording }
    }
}

impl Sink for MetricsSink {
    fn input(&mut self, input: &mut Input, pipeline: &Pipeline) -> Result<Flow> {
        if let Input::Scrape(reply) = input {
            if let Some(reply) = reply.take() {
                let recording = self.recording.as_ref().map(|on| on.load(Ordering::Relaxed));
                // A scraper that gave up meanwhile is no error.
                let _ = reply.send(render_with(pipeline.model(), &self.device, recording));
            }
        }
        Ok(Flow::Continue)
    }
}

/// At most this many connections are open at once (see [`accept_loop`] for who makes room).
pub const MAX_CONNECTIONS: usize = 64;
/// At most this many of them from one peer address (IPv4-mapped IPv6 counts as the IPv4
/// address; every loopback client from 127.0.0.1 is one peer).
pub const MAX_PER_PEER: usize = 8;
/// A client has this long for the whole exchange: to send its request and take the answer (a
/// scrape takes milliseconds).
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Until its request head is complete, a client that sends nothing for this long is dropped,
/// freeing its slot. A scraper sends its head in one segment right after the handshake, so
/// 1 s still covers a lost segment's retransmissions (Linux's minimum RTO is 200 ms) on a slow
/// link, while idle connections give up their slots five times sooner than the client
/// timeout. Each arriving byte starts the deadline again: a slow but live client keeps the
/// client timeout.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest request head read: a scrape's is a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 8192;
/// After an accept error (EMFILE at the open-file limit, ENOBUFS): wait, doubling up to the
/// longest, instead of retrying at once at 100 % CPU.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_LONGEST: Duration = Duration::from_secs(1);

/// Serve the model at http://ADDR/metrics, rendered by `renderer`'s run loop per scrape, until
/// the task is aborted.
pub async fn serve(addr: SocketAddr, renderer: Renderer) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    log::info!(
        "serving OpenMetrics at http://{}/metrics",
        listener.local_addr()?
    );
    Ok(tokio::spawn(accept_loop(listener, renderer)))
}

/// One open connection, as the accept loop sees it.
struct Connection {
    peer: IpAddr,
    /// Set once its request head is complete: from then on it is never displaced.
    answering: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

/// Accept connections and answer each in its own task, holding at most [`MAX_CONNECTIONS`],
/// [`MAX_PER_PEER`] from one address. The newest connection wins: when a peer already has
/// its share, or every slot is taken, the oldest connection that is still waiting for its
/// request head (of that peer, or of anyone) is dropped to make room. A scraper sends its
/// request right after connecting, so it is read at its task's first run and is then never
/// displaced; idle or trickling clients are what gets dropped. Refusing the newest instead
/// would let one peer's idle connections lock out a scrape from the same address, and
/// loopback is one address for every local client. If every connection of the peer is being
/// answered the new one is closed at once; if every slot is being answered, accepting waits
/// (the new connections stay in the listen backlog) until an answer ends, within the client
/// timeout.
///
/// So while idle clients hold connections, a scrape is answered within about its answer time;
/// it can only lose its connection if [`MAX_PER_PEER`] newer connections from its address (or
/// [`MAX_CONNECTIONS`] from anywhere) are accepted before its task first runs. The per-peer
/// share keeps one remote host from displacing everyone else's connections one by one; a
/// local user can connect from any address of 127.0.0.0/8, so against local users the
/// newest-wins rule and [`IDLE_TIMEOUT`] are what keep a scrape served.
async fn accept_loop(listener: TcpListener, renderer: Renderer) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // Oldest first.
    let mut open: Vec<Connection> = Vec::with_capacity(MAX_CONNECTIONS);
    let mut backoff = ACCEPT_BACKOFF_FIRST;
    let mut said = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok((stream, peer)) => {
                backoff = ACCEPT_BACKOFF_FIRST;
                (stream, peer.ip().to_canonical())
            }
            Err(err) => {
                if !said {
                    log::warn!("OpenMetrics endpoint: accepting a connection: {err}; retrying");
                    said = true;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_LONGEST);
                continue;
            }
        };
        open.retain(|c| !c.task.is_finished());
        let Some(slot) = make_room(&mut open, &slots, peer).await else {
            drop(stream);
            continue;
        };
        let answering = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (renderer, answering) = (renderer.clone(), Arc::clone(&answering));
            async move {
                let _ = tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, &renderer, &answering))
                    .await;
                drop(slot);
            }
        });
        open.push(Connection {
            peer,
            answering,
            task,
        });
    }
}

/// A slot for a new connection from `peer`, displacing the oldest waiting connection when the
/// peer or the server is at its cap; None when the new connection is to be closed (its peer's
/// connections are all being answered).
async fn make_room(
    open: &mut Vec<Connection>,
    slots: &Arc<Semaphore>,
    peer: IpAddr,
) -> Option<OwnedSemaphorePermit> {
    if open.iter().filter(|c| c.peer == peer).count() >= MAX_PER_PEER
        && !displace_oldest_waiting(open, |c| c.peer == peer).await
    {
        return None;
    }
    if slots.available_permits() == 0 {
        // The oldest waiting connection goes; with none waiting, every slot is being
        // answered and the wait below ends with the first answer (within the client timeout).
        displace_oldest_waiting(open, |_| true).await;
    }
    Arc::clone(slots).acquire_owned().await.ok()
}

/// Drop the oldest connection matching `which` that is still waiting for its request head,
/// and wait until its task is gone (its descriptor closed, its slot free). False when there is
/// none.
async fn displace_oldest_waiting(
    open: &mut Vec<Connection>,
    which: impl Fn(&Connection) -> bool,
) -> bool {
    let Some(oldest) = open
        .iter()
        .position(|c| which(c) && !c.answering.load(Ordering::Relaxed))
    else {
        return false;
    };
    let oldest = open.remove(oldest);
    oldest.task.abort();
    let _ = oldest.task.await;
    true
}

/// Read one request (up to the end of its head, however it is split into segments) and answer;
/// drop the connection without an answer when the client falls silent for [`IDLE_TIMEOUT`]
/// before its head is complete.
async fn answer(mut stream: TcpStream, renderer: &Renderer, answering: &AtomicBool) {
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read(&mut chunk)).await {
            Err(_) => return,
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => request.extend_from_slice(&chunk[..n]),
        }
    }
    answering.store(true, Ordering::Relaxed);
    let response = match route(&request) {
        Some(head_only) => match renderer.render().await {
            Some(body) => respond(&body, head_only),
            None => UNAVAILABLE.into(),
        },
        None => NOT_FOUND.into(),
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// The run loop has stopped (the daemon is on its way out).
const UNAVAILABLE: &str =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Whether a request head asks for the exposition: Some(head only) for GET or HEAD of
/// /metrics, None (404) for anything else.
fn route(request: &[u8]) -> Option<bool> {
    let line = String::from_utf8_lossy(request);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let known_path = path == "/metrics" || path.starts_with("/metrics?");
    (known_path && matches!(method, "GET" | "HEAD")).then_some(method == "HEAD")
}

/// The answer carrying `body` (its headers alone for HEAD).
fn respond(body: &str, head_only: bool) -> String {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if head_only {
        head
    } else {
        head + body
    }
}

#[cfg(test)]
mod tests;
