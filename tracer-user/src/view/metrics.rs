//! OpenMetrics (Prometheus) exposition of the model: per-app and per-device counters, cache
//! gauges and knob values, served at /metrics by a small HTTP server. The exposition is
//! rendered per scrape, by the run loop's [`MetricsSink`] from the model as it is then: nothing
//! is rendered while nobody scrapes.
use std::{
    collections::HashMap,
    fmt::Write as _,
    net::{IpAddr, SocketAddr},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Weak,
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
};
use tracer_common::{Outcome, RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS};

use crate::{
    model::{Counters, LatencyHistogram, Model},
    pipeline::Pipeline,
    runner::{Flow, Input, Sink},
    schema::metrics::{self as families, Family as MetricFamily},
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
    /// The family's `# TYPE`, `# HELP` and (when it has one) `# UNIT` lines.
    fn header(&mut self, family: &MetricFamily) {
        header(self.out, family);
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(self.out, "{name}{{{}}} {value}", labels.join(","));
    }
}

fn header(out: &mut String, family: &MetricFamily) {
    let MetricFamily {
        name, kind, help, ..
    } = family;
    let _ = writeln!(out, "# TYPE {name} {}\n# HELP {name} {help}", kind.name());
    if let Some(unit) = family.unit {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
}

/// Per-app counter families: (family, value, extra label).
type AppCounter = (
    &'static MetricFamily,
    fn(&Counters) -> u64,
    (&'static str, &'static str),
);

const APP_COUNTERS: [AppCounter; 5] = [
    (
        &families::NODE_READS,
        |c| c.node_reads_demand,
        ("kind", "demand"),
    ),
    (
        &families::NODE_READS,
        |c| c.node_reads_readahead,
        ("kind", "readahead"),
    ),
    (&families::RESTORES, |c| c.restores, ("", "")),
    (&families::CONVERSIONS, |c| c.conversions, ("", "")),
    (&families::NODE_WRITES, |c| c.node_writes, ("", "")),
];

/// Apps named in the per-app families: the busiest by node reads since the start (then
/// restores and conversions); the rest are summed as `app="(other)"`, so a scrape's size and
/// cost do not grow with the number of apps, which any local user can raise (issue 52).
const METRIC_APPS: usize = 200;

pub fn render(model: &Model, device: &str) -> String {
    render_with(model, device, None)
}

/// [`render`], and for the daemon with `--record`, whether its rolling recording is still
/// written (`Some(false)` once an error stopped it).
pub(crate) fn render_with(model: &Model, device: &str, recording: Option<bool>) -> String {
    let mut out = String::new();
    let mut family = Family { out: &mut out };
    let (mut apps, other) = model.top_apps(METRIC_APPS, |total, _| {
        (total.node_reads(), total.restores + total.conversions)
    });
    apps.sort_by(|a, b| a.app.cmp(&b.app));
    let other_key = crate::model::AppKey::Program("(other)".into());
    let mut labelled: Vec<(String, &Counters)> = apps
        .iter()
        .map(|app| (crate::view::tui::label(&app.app), &app.total))
        .collect();
    if let Some(other) = &other {
        labelled.push((crate::view::tui::label(&other_key), &other.total));
    }
    let mut last_family = "";
    for (of, value, extra) in APP_COUNTERS {
        let name = of.name;
        if name != last_family {
            family.header(of);
            last_family = name;
        }
        for (app_label, total) in &labelled {
            let mut labels = vec![("app", app_label.as_str()), ("device", device)];
            if !extra.0.is_empty() {
                labels.push(extra);
            }
            family.sample(&format!("{name}_total"), &labels, value(total));
        }
    }
    family.header(&families::APPS_OTHER);
    family.sample(
        families::APPS_OTHER.name,
        &[("device", device)],
        other.as_ref().map_or(0, |o| o.apps),
    );
    render_device(&mut family, model, device);
    lookups(family.out, &model.totals(), &labelled, device);
    if let Some(active) = recording {
        family.header(&families::RECORDING_ACTIVE);
        family.sample(
            families::RECORDING_ACTIVE.name,
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
    family.header(&families::CHECKPOINTS);
    family.sample(&total(&families::CHECKPOINTS), &dev, totals.checkpoints);
    family.header(&families::RECLAIMS);
    for (queue, value) in queue_values(&totals.reclaims) {
        family.sample(
            &total(&families::RECLAIMS),
            &[("device", device), ("queue", queue)],
            value,
        );
    }
    for (of, counts, names) in [
        (
            &families::RESTORE_FAILURES,
            &totals.restore_fail_reasons,
            &RESTORE_FAIL_REASONS[..],
        ),
        (
            &families::SECOND_CHANCES,
            &totals.second_chance_reasons,
            &SECOND_CHANCE_REASONS[..],
        ),
    ] {
        family.header(of);
        let unknown = [(0, "unknown")];
        for &(code, reason) in names.iter().chain(&unknown) {
            family.sample(
                &total(of),
                &[("device", device), ("reason", reason)],
                counts.get(code),
            );
        }
    }
    restore_latency(family.out, &totals.restore_latency, device);
    node_types(family, model, device);
    family.header(&families::EVENTS_LOST);
    family.sample(&total(&families::EVENTS_LOST), &dev, totals.lost);
    let cache = model.cache();
    family.header(&families::CACHE_ENTRIES);
    let entries = crate::model::PerQueue {
        raw: cache.raw_entries,
        ..cache.slots
    };
    for (queue, value) in queue_values(&entries) {
        family.sample(
            families::CACHE_ENTRIES.name,
            &[("device", device), ("queue", queue)],
            value,
        );
    }
    family.header(&families::CACHE_ATTRIBUTED_BYTES);
    family.sample(
        families::CACHE_ATTRIBUTED_BYTES.name,
        &dev,
        cache.attributed_bytes,
    );
    for (of, value) in [
        (
            &families::KNOB_THRESHOLD,
            model.observed().knobs.map(|k| k.threshold),
        ),
        (
            &families::KNOB_INTERVAL,
            model.observed().knobs.map(|k| k.interval_ms),
        ),
    ] {
        if let Some(value) = value {
            family.header(of);
            family.sample(of.name, &dev, u64::from(value));
        }
    }
}

/// Node reads per node type of the block read, when the model tells them apart (the
/// simulator; `--image`): `type` as the stream names it, `kind` demand or readahead.
fn node_types(family: &mut Family, model: &Model, device: &str) {
    let Some(types) = model.node_types() else {
        return;
    };
    family.header(&families::NODE_READS_BY_TYPE);
    for (of_type, reads) in types.counts.rows() {
        let of_type = crate::model::node_types::key(of_type);
        for (kind, value) in [("demand", reads.demand), ("readahead", reads.readahead)] {
            family.sample(
                &total(&families::NODE_READS_BY_TYPE),
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
    header(out, &families::RESTORE_LATENCY);
    histogram(
        out,
        families::RESTORE_LATENCY.name,
        h,
        &format!("device=\"{}\"", escape(device)),
    );
}

/// One series of a histogram family in seconds: `labels` (already escaped, comma-separated)
/// on every sample.
fn histogram(out: &mut String, name: &str, h: &LatencyHistogram, labels: &str) {
    let mut below = 0;
    for (log2, n) in h.log2_ns.iter().enumerate() {
        below += n;
        let bound = log2 + 1;
        if (LATENCY_FIRST_BOUND_LOG2..=LATENCY_LAST_BOUND_LOG2).contains(&bound) {
            let le = seconds(1 << bound);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {below}");
        }
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{{labels},le=\"+Inf\"}} {}\n\
         {name}_count{{{labels}}} {}\n{name}_sum{{{labels}}} {}",
        h.count,
        h.count,
        seconds(h.total_ns)
    );
}

/// Timed node lookups (issue 51): the device's latency histogram per outcome, and per app the
/// lookups per outcome and the time waited on them (the busiest apps, then `(other)`, as the
/// other per-app families).
fn lookups(out: &mut String, totals: &Counters, apps: &[(String, &Counters)], device: &str) {
    let name = families::LOOKUP_LATENCY.name;
    header(out, &families::LOOKUP_LATENCY);
    let device = escape(device);
    for outcome in Outcome::ALL {
        let labels = format!("device=\"{device}\",outcome=\"{}\"", outcome.name());
        histogram(out, name, &totals.retrievals.get(outcome), &labels);
    }
    // Per app only for the apps with timed lookups: a scrape of many apps without them (no
    // --lookup-latency) costs what it did.
    let apps: Vec<&(String, &Counters)> = apps
        .iter()
        .filter(|(_, c)| !c.retrievals.is_empty())
        .collect();
    if apps.is_empty() {
        return;
    }
    let name = families::LOOKUPS.name;
    header(out, &families::LOOKUPS);
    for (app, c) in &apps {
        for outcome in Outcome::ALL {
            let _ = writeln!(
                out,
                "{name}_total{{app=\"{}\",device=\"{device}\",outcome=\"{}\"}} {}",
                escape(app),
                outcome.name(),
                c.retrievals.get(outcome).count
            );
        }
    }
    let name = families::LOOKUP_WAIT.name;
    header(out, &families::LOOKUP_WAIT);
    for (app, c) in &apps {
        let _ = writeln!(
            out,
            "{name}_total{{app=\"{}\",device=\"{device}\"}} {}",
            escape(app),
            seconds(c.retrievals.wait_ns())
        );
    }
}

/// A counter's sample name: `<family>_total`.
fn total(family: &MetricFamily) -> String {
    format!("{}_total", family.name)
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
/// Per peer address (IPv4-mapped IPv6 counts as the IPv4 address; every loopback client from
/// 127.0.0.1 is one peer): at most this many connections still waiting for their request are
/// held, and at most this many requests are answered at once.
pub const MAX_PER_PEER: usize = 8;
/// Per peer, at most this many requests wait for a turn to be answered beyond the
/// [`MAX_PER_PEER`] being answered; any further one is answered 503 at once.
pub const MAX_WAITING_PER_PEER: usize = 32;
/// How long a request waits for its turn before it is answered `503` with `Retry-After: 1`
/// (a scrape's answer takes milliseconds: a turn comes long before this unless a peer's
/// answers are stuck on clients that do not read).
pub const TURN_WAIT: Duration = Duration::from_secs(2);
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
/// A new connection may be displaced as idle only once it has sent nothing for this long: a
/// scraper's request follows its handshake within microseconds, unless the scraper was not
/// scheduled in between (a burst of scrapers on a busy machine).
pub(crate) const SETTLE: Duration = Duration::from_millis(50);
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
    accepted: Instant,
    /// The connection's task owns the stream: it closes when the task ends. The accept loop
    /// only peeks at it, to tell a request not read yet from an idle client.
    stream: Weak<TcpStream>,
    /// Set once its request head is complete: from then on it is never displaced.
    requested: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

/// What a connection is to the accept loop when it needs room.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Its request is complete (being answered or waiting for a turn), or has arrived and is
    /// not read yet: never displaced.
    Request,
    /// Nothing to read and younger than [`SETTLE`]: not displaced yet, its request may follow.
    Settling(Instant),
    /// Silent past [`SETTLE`] without a complete request (idle or trickling): may be displaced.
    Idle,
}

impl Connection {
    fn standing(&self) -> Standing {
        if self.requested.load(Ordering::Relaxed) {
            return Standing::Request;
        }
        let Some(stream) = self.stream.upgrade() else {
            // Its task has ended: nothing to protect.
            return Standing::Idle;
        };
        if has_unread_bytes(&stream) {
            Standing::Request
        } else if self.accepted.elapsed() < SETTLE {
            Standing::Settling(self.accepted + SETTLE)
        } else {
            Standing::Idle
        }
    }
}

/// Whether bytes from the client wait in the socket, not read yet.
fn has_unread_bytes(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd as _;
    let mut byte = 0u8;
    // SAFETY: the descriptor is open while `stream` is borrowed, and the buffer is one
    // writable byte that outlives the call; MSG_PEEK leaves the byte for the reader and
    // MSG_DONTWAIT never blocks.
    let got = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            std::ptr::addr_of_mut!(byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    got > 0
}

/// One peer address's answers: at most [`MAX_PER_PEER`] at once, the rest waiting for a turn.
struct PeerTurns {
    turns: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl PeerTurns {
    fn new() -> Arc<PeerTurns> {
        Arc::new(PeerTurns {
            turns: Arc::new(Semaphore::new(MAX_PER_PEER)),
            waiting: AtomicUsize::new(0),
        })
    }

    /// A turn to answer, waiting up to [`TURN_WAIT`] when the peer's answers are all taken;
    /// None (answer 503) when the wait ran out or too many already wait.
    async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(turn) = Arc::clone(&self.turns).try_acquire_owned() {
            return Some(turn);
        }
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= MAX_WAITING_PER_PEER {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let turn = tokio::time::timeout(TURN_WAIT, Arc::clone(&self.turns).acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        turn.ok()?.ok()
    }
}

/// Accept connections and answer each in its own task, holding at most [`MAX_CONNECTIONS`].
///
/// A connection's request is read first, in its task; only then does it ask for one of its
/// peer's [`MAX_PER_PEER`] turns to be answered. Requests beyond those wait for a turn (at
/// most [`MAX_WAITING_PER_PEER`] of them, for [`TURN_WAIT`]), and when none comes are answered
/// `503` with `Retry-After: 1`: after their request was read, so the close is no reset. A
/// Prometheus server with several jobs scrapes from one address, and a burst of its scrapes
/// is answered, not cut.
///
/// Idle or trickling clients are what gets dropped to make room: when a peer already holds
/// [`MAX_PER_PEER`] connections without a complete request, or every slot is taken, the oldest
/// connection without a complete request that has nothing unread and has been silent for
/// [`SETTLE`] is dropped for the new one (newest wins: refusing the newest would let one peer's
/// idle connections lock out a scrape from the same address, and loopback is one address for
/// every local client). A request that has arrived but is not read yet (the accept loop runs
/// ahead of the tasks that read, above all on a single-threaded runtime) is never dropped;
/// a connection younger than [`SETTLE`] is waited for, as its request may still come. When
/// the peer's connections all carry requests, the new one is taken beyond the peer's share;
/// when every slot carries one, accepting waits (the new connections stay in the listen
/// backlog) until an answer ends, within the client timeout.
///
/// The per-peer share keeps one remote host from displacing everyone else's idle connections
/// one by one; a local user can connect from any address of 127.0.0.0/8, so against local
/// users the newest-wins rule and [`IDLE_TIMEOUT`] are what keep a scrape served.
async fn accept_loop(listener: TcpListener, renderer: Renderer) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // Oldest first.
    let mut open: Vec<Connection> = Vec::with_capacity(MAX_CONNECTIONS);
    let mut peers: HashMap<IpAddr, Arc<PeerTurns>> = HashMap::new();
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
        let accepted = Instant::now();
        let Some(slot) = make_room(&mut open, &slots, peer).await else {
            drop(stream);
            continue;
        };
        // A peer's turns live as long as any of its connections.
        peers.retain(|address, _| open.iter().any(|c| c.peer == *address));
        let turns = Arc::clone(peers.entry(peer).or_insert_with(PeerTurns::new));
        let requested = Arc::new(AtomicBool::new(false));
        let stream = Arc::new(stream);
        let weak = Arc::downgrade(&stream);
        let task = tokio::spawn({
            let (renderer, requested) = (renderer.clone(), Arc::clone(&requested));
            async move {
                let _ = tokio::time::timeout(
                    CLIENT_TIMEOUT,
                    answer(&stream, &renderer, &requested, &turns),
                )
                .await;
                drop(stream);
                drop(slot);
            }
        });
        open.push(Connection {
            peer,
            accepted,
            stream: weak,
            requested,
            task,
        });
    }
}

/// A slot for a new connection from `peer`, displacing the oldest idle connection when the
/// peer or the server is at its cap (see [`accept_loop`]). None only when the semaphore is
/// closed, which it never is.
async fn make_room(
    open: &mut Vec<Connection>,
    slots: &Arc<Semaphore>,
    peer: IpAddr,
) -> Option<OwnedSemaphorePermit> {
    loop {
        open.retain(|c| !c.task.is_finished());
        let of_peer = |c: &Connection| c.peer == peer;
        let unanswered = open
            .iter()
            .filter(|c| of_peer(c) && !c.requested.load(Ordering::Relaxed))
            .count();
        if unanswered >= MAX_PER_PEER {
            match displace_oldest_idle(open, of_peer).await {
                Room::Made | Room::AllRequests => {}
                Room::NotYet(until) => {
                    tokio::time::sleep_until(until.into()).await;
                    continue;
                }
            }
        }
        if slots.available_permits() == 0 {
            match displace_oldest_idle(open, |_| true).await {
                // With none idle, every slot carries a request: the wait below ends with the
                // first answer (within the client timeout).
                Room::Made | Room::AllRequests => {}
                Room::NotYet(until) => {
                    tokio::time::sleep_until(until.into()).await;
                    continue;
                }
            }
        }
        return Arc::clone(slots).acquire_owned().await.ok();
    }
}

enum Room {
    /// The oldest idle connection was dropped.
    Made,
    /// None is idle yet: the oldest settling one settles at this instant.
    NotYet(Instant),
    /// Every connection considered carries a request.
    AllRequests,
}

/// Drop the oldest connection matching `which` that is idle (see [`Standing`]), and wait until
/// its task is gone (its descriptor closed, its slot free).
async fn displace_oldest_idle(
    open: &mut Vec<Connection>,
    which: impl Fn(&Connection) -> bool,
) -> Room {
    let mut settles = None;
    let mut oldest_idle = None;
    for (i, connection) in open.iter().enumerate().filter(|(_, c)| which(c)) {
        match connection.standing() {
            Standing::Request => {}
            Standing::Settling(at) => settles = Some(settles.map_or(at, |s: Instant| s.min(at))),
            Standing::Idle => {
                oldest_idle = Some(i);
                break;
            }
        }
    }
    if let Some(oldest) = oldest_idle {
        let oldest = open.remove(oldest);
        oldest.task.abort();
        let _ = oldest.task.await;
        return Room::Made;
    }
    settles.map_or(Room::AllRequests, Room::NotYet)
}

/// Read one request (up to the end of its head, however it is split into segments), wait for
/// a turn among the peer's answers and answer; drop the connection without an answer when the
/// client falls silent for [`IDLE_TIMEOUT`] before its head is complete.
async fn answer(
    stream: &TcpStream,
    renderer: &Renderer,
    requested: &AtomicBool,
    turns: &PeerTurns,
) {
    let Some(request) = read_head(stream).await else {
        return;
    };
    requested.store(true, Ordering::Relaxed);
    let response = match route(&request) {
        Some(head_only) => match turns.turn().await {
            Some(_turn) => match renderer.render().await {
                Some(body) => respond(&body, head_only),
                None => UNAVAILABLE.into(),
            },
            None => BUSY.into(),
        },
        None => NOT_FOUND.into(),
    };
    let _ = write_all(stream, response.as_bytes()).await;
    shutdown_write(stream);
}

/// The request head, or None when the client fell silent for [`IDLE_TIMEOUT`] before it was
/// complete. A head cut short by the client's close or an error is returned as read.
async fn read_head(stream: &TcpStream) -> Option<Vec<u8>> {
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        match tokio::time::timeout(IDLE_TIMEOUT, stream.readable()).await {
            Err(_) => return None,
            Ok(Err(_)) => break,
            Ok(Ok(())) => {}
        }
        match stream.try_read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    Some(request)
}

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Our side's end of the exchange (FIN), as the answer is complete.
fn shutdown_write(stream: &TcpStream) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: the descriptor is open while `stream` is borrowed; shutdown only changes the
    // socket's state, touching no memory of ours.
    unsafe { libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR) };
}

const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// The run loop has stopped (the daemon is on its way out).
const UNAVAILABLE: &str =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// The peer's answers were all taken for [`TURN_WAIT`] (or too many of its requests waited).
const BUSY: &str = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

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
