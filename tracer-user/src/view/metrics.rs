//! OpenMetrics (Prometheus) exposition of the model: per-app and per-device counters, cache
//! gauges and knob values, served at /metrics by a small HTTP server.
use std::{
    fmt::Write as _,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context as _, Result};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};

use crate::model::{Counters, Model};

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
pub fn render_with(model: &Model, device: &str, recording: Option<bool>) -> String {
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

fn queue_values(q: &crate::model::PerQueue) -> [(&'static str, u64); 4] {
    [
        ("raw", q.raw),
        ("256", q.b256),
        ("512", q.b512),
        ("1024", q.b1024),
    ]
}

/// The latest exposition, shared between the model's loop and the server.
pub type Exposition = Arc<Mutex<String>>;

/// At most this many connections are served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;
/// A client has this long to send its request and take the answer (a scrape takes
/// milliseconds; a client that sends nothing must not hold a connection).
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head read: a scrape's is a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 8192;
/// After an accept error (EMFILE at the open-file limit, ENOBUFS): wait, doubling up to the
/// longest, instead of retrying at once at 100 % CPU.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_LONGEST: Duration = Duration::from_secs(1);

/// Serve `exposition` at http://ADDR/metrics until the task is aborted.
pub async fn serve(
    addr: SocketAddr,
    exposition: Exposition,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    log::info!(
        "serving OpenMetrics at http://{}/metrics",
        listener.local_addr()?
    );
    Ok(tokio::spawn(accept_loop(listener, exposition)))
}

async fn accept_loop(listener: TcpListener, exposition: Exposition) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = ACCEPT_BACKOFF_FIRST;
    let mut said = false;
    loop {
        // A slot first: at the cap, connections wait in the backlog, not in our memory.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF_FIRST;
                stream
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
        let exposition = Arc::clone(&exposition);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, &exposition)).await;
            drop(slot);
        });
    }
}

/// Read one request (up to the end of its head, however it is split into segments) and answer.
async fn answer(mut stream: TcpStream, exposition: &Exposition) {
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    let response = respond(&request, exposition);
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The answer to a request head: the exposition for GET /metrics, its headers alone for HEAD,
/// 404 for anything else.
fn respond(request: &[u8], exposition: &Exposition) -> String {
    let line = String::from_utf8_lossy(request);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let known_path = path == "/metrics" || path.starts_with("/metrics?");
    if !known_path || !matches!(method, "GET" | "HEAD") {
        return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into();
    }
    let body = exposition
        .lock()
        .map(|text| text.clone())
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method == "HEAD" {
        head
    } else {
        head + &body
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{Event, EventKind, FLAG_READAHEAD};

    use super::*;
    use crate::model::{ModelConfig, Packages};

    #[test]
    fn exposition_has_per_app_counters_with_labels_and_ends_with_eof() {
        let packages = Packages::parse("com.example.chat 10123 0 /data x 3003\n");
        let mut model = Model::new(ModelConfig {
            packages,
            ..ModelConfig::default()
        });
        let mut read = Event {
            kind: EventKind::NodeRead as u8,
            tgid: 5,
            uid: 10123,
            ..Event::ZERO
        };
        read.comm[..4].copy_from_slice(b"chat");
        for _ in 0..3 {
            model.ingest(&read);
        }
        model.ingest(&Event {
            flags: FLAG_READAHEAD,
            ..read
        });
        model.observe_knobs(Some(tracer_common::knobs::Knobs {
            threshold: 40,
            interval_ms: 1000,
        }));
        let text = render(&model, "sim0");
        assert!(
            text.contains("# TYPE nodescope_node_reads counter\n"),
            "{text}"
        );
        assert!(text.contains(
            "nodescope_node_reads_total{app=\"com.example.chat\",device=\"sim0\",kind=\"demand\"} 3\n"
        ), "{text}");
        assert!(text.contains(
            "nodescope_node_reads_total{app=\"com.example.chat\",device=\"sim0\",kind=\"readahead\"} 1\n"
        ));
        assert!(text.contains("nodescope_knob_threshold_percent{device=\"sim0\"} 40\n"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(
            text.matches("# TYPE nodescope_node_reads ").count(),
            1,
            "one header per family"
        );
    }

    #[test]
    fn only_get_metrics_is_served() {
        let exposition: Exposition = Arc::new(Mutex::new("x 1\n# EOF\n".into()));
        let ok = respond(b"GET /metrics HTTP/1.1\r\n\r\n", &exposition);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.ends_with("x 1\n# EOF\n"));
        assert!(ok.contains(CONTENT_TYPE));
        assert!(respond(b"GET / HTTP/1.1\r\n\r\n", &exposition).starts_with("HTTP/1.1 404"));
        assert!(respond(b"POST /metrics HTTP/1.1\r\n\r\n", &exposition).starts_with("HTTP/1.1 404"));
        let head = respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", &exposition);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Content-Length: 10\r\n") && head.ends_with("\r\n\r\n"));
    }
}
