//! The daemon's Unix socket: the model's windows, its snapshot and the controller's decisions,
//! as newline-delimited JSON (the messages of `crate::schema::protocol`, docs/DAEMON.md), to any number
//! of clients (`top --connect`, `stream --connect`, or `socat - UNIX-CONNECT:...`).
//!
//! The daemon never waits for a client: every message is encoded once and offered to each
//! client's queue, bounded in bytes (and in messages); a client whose queue is full (it reads
//! slower than the daemon writes) is dropped, its connection closed. A client that went away is noticed at the next
//! message and forgotten. The socket lives in a private (0700) directory and is itself 0600:
//! it shows every process's activity.
use std::{
    fs,
    io::ErrorKind,
    os::unix::fs::{FileTypeExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use anyhow::{bail, Context as _, Result};
use tokio::{
    io::AsyncWriteExt as _,
    net::{UnixListener, UnixStream},
    sync::mpsc::{self, error::TrySendError, UnboundedSender},
    task::JoinHandle,
};

use crate::{
    runner::{End, Flow, Input, Refresh, Sink},
    schema::{
        protocol::{Hello, Message, Snapshot},
        stream::StreamLine,
    },
    source::SourceInfo,
    view::jsonline::window_line_top,
};

/// Messages queued for one client before it counts as slow and is dropped: at four snapshots
/// a second, about a minute of backlog.
pub(crate) const CLIENT_QUEUE: usize = 256;
/// Bytes queued for one client (the message being written included) before it counts as slow
/// and is dropped, whatever the count: 256 snapshots of 10,000 apps were 2.9 GB (issue 52).
/// Every client is offered the same messages, shared, so this bounds all queues together too:
/// about 70 s of the android-launch scenario's snapshots, 16 s of bounded ones at 200 apps.
pub(crate) const CLIENT_QUEUE_BYTES: usize = 16 << 20;
/// Clients served at once; more are closed at once.
pub(crate) const MAX_CLIENTS: usize = 32;
/// One connected client: its queue, and the task that writes the queue to the socket (aborted
/// when the client is dropped, which closes the connection even mid-write).
struct Client {
    queue: mpsc::Sender<Arc<[u8]>>,
    /// Bytes in `queue` and in the writer's hands, not yet written.
    queued: Arc<AtomicUsize>,
    /// None once [`SocketServer::close`] took it to wait for it.
    writer: Option<JoinHandle<()>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(writer) = &self.writer {
            writer.abort();
        }
    }
}

/// What the accept task and the daemon's loop share.
struct Clients {
    connected: Vec<Client>,
    hello: Arc<[u8]>,
    /// The latest snapshot: a new client draws at once instead of waiting for the next.
    latest_snapshot: Option<Arc<[u8]>>,
    dropped_slow: u64,
    /// Told when a client connects: an idle loop sleeps without a deadline, and must start
    /// sending frames.
    on_join: Option<UnboundedSender<Input>>,
}

impl Clients {
    /// Offer `bytes` to every client; drop the slow and the gone.
    fn offer(&mut self, bytes: &Arc<[u8]>) {
        let mut slow = 0;
        self.connected.retain(|client| {
            let queued = client.queued.load(Ordering::Acquire);
            // One message larger than the bound still goes to a client that has taken all.
            if queued > 0 && queued + bytes.len() > CLIENT_QUEUE_BYTES {
                slow += 1;
                return false;
            }
            match client.queue.try_send(Arc::clone(bytes)) {
                Ok(()) => {
                    client.queued.fetch_add(bytes.len(), Ordering::AcqRel);
                    true
                }
                Err(TrySendError::Full(_)) => {
                    slow += 1;
                    false
                }
                Err(TrySendError::Closed(_)) => false,
            }
        });
        if self.connected.is_empty() {
            // Without clients the daemon stops taking snapshots: this one would go stale.
            self.latest_snapshot = None;
        }
        if slow > 0 {
            self.dropped_slow += slow;
            log::warn!("dropped {slow} client(s) that read slower than the daemon writes");
        }
    }
}

pub(crate) struct SocketServer {
    path: PathBuf,
    clients: Arc<Mutex<Clients>>,
    accept: JoinHandle<()>,
}

impl SocketServer {
    /// Bind `path` (its directory made private, a stale socket replaced, a live one refused)
    /// and accept clients in the background, each greeted with `hello`. Needs a tokio runtime.
    pub(crate) fn bind(path: &Path, hello: &Hello) -> Result<SocketServer> {
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        crate::system::private_dir(dir, "the daemon's socket directory")?;
        remove_stale(path)?;
        let listener =
            UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} owner-only", path.display()))?;
        let clients = Arc::new(Mutex::new(Clients {
            connected: Vec::new(),
            hello: Message::Hello(hello.clone()).encode()?,
            latest_snapshot: None,
            dropped_slow: 0,
            on_join: None,
        }));
        let accept = tokio::spawn(accept_clients(listener, Arc::clone(&clients)));
        Ok(SocketServer {
            path: path.to_path_buf(),
            clients,
            accept,
        })
    }

    /// Send [`Input::Wake`] here whenever a client connects.
    pub(crate) fn wake_on_join(&self, waker: UnboundedSender<Input>) {
        self.lock().on_join = Some(waker);
    }

    /// Send `message` to every client, waiting for none.
    pub(crate) fn publish(&self, message: &Message) -> Result<()> {
        let bytes = message.encode()?;
        let mut clients = self.lock();
        if let Message::Snapshot { .. } = message {
            clients.latest_snapshot = Some(Arc::clone(&bytes));
        }
        clients.offer(&bytes);
        Ok(())
    }

    /// The end: stop accepting, let every client's writer send what is queued (the last
    /// windows, the end message) for at most `within`, then close the connections.
    pub(crate) async fn close(self, within: std::time::Duration) {
        self.accept.abort();
        let writers: Vec<JoinHandle<()>> = {
            let mut clients = self.lock();
            let connected = std::mem::take(&mut clients.connected);
            // Dropping each client's queue sender lets its writer end after the last message.
            connected
                .into_iter()
                .filter_map(|mut client| client.writer.take())
                .collect()
        };
        let all = join_all(writers);
        if tokio::time::timeout(within, all).await.is_err() {
            log::warn!("some clients did not take the last messages in {within:?}");
        }
    }

    /// Clients connected now.
    pub(crate) fn client_count(&self) -> usize {
        self.lock().connected.len()
    }

    /// Clients dropped for reading too slowly, since the start.
    #[cfg(test)]
    pub(crate) fn dropped_slow(&self) -> u64 {
        self.lock().dropped_slow
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Clients> {
        // A panic while holding the lock leaves plain data behind: keep serving.
        self.clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The run loop's side of the socket: every pane line as a decision; for connected clients,
/// each closed window and a snapshot per refresh (nothing is copied or encoded while nobody is
/// connected); at the end the last windows and the end message.
pub(crate) struct SocketSink {
    server: SocketServer,
    /// What the snapshots say about the source (the banner included).
    info: SourceInfo,
}

impl SocketSink {
    pub(crate) fn new(server: SocketServer, info: SourceInfo) -> SocketSink {
        SocketSink { server, info }
    }

    /// Let the clients take what is queued (at most `within`), then close.
    pub(crate) async fn close(self, within: std::time::Duration) {
        self.server.close(within).await;
    }

    /// See [`SocketServer::wake_on_join`].
    pub(crate) fn wake_on_join(&self, waker: UnboundedSender<Input>) {
        self.server.wake_on_join(waker);
    }

    fn publish_windows(&self, windows: &[crate::model::WindowReport], origin: u64) -> Result<()> {
        if self.server.client_count() == 0 {
            return Ok(());
        }
        for window in windows {
            self.server.publish(&Message::Window {
                line: Box::new(bounded_window_line(window, origin)),
            })?;
        }
        Ok(())
    }
}

impl Sink for SocketSink {
    fn refresh(&mut self, at: &Refresh) -> Result<Flow> {
        if self.server.client_count() == 0 {
            // Nobody to tell: nothing is encoded (a client that connects later gets the
            // decisions pane in its first snapshot).
            return Ok(Flow::Continue);
        }
        for line in at.new_lines {
            self.server.publish(&Message::Decision {
                line: line.text.clone(),
            })?;
        }
        self.publish_windows(at.closed, at.pipeline.origin_ns())?;
        let snapshot = Snapshot::capture_bounded(at.pipeline.model(), &self.info)
            .with_control(at.tuning_mode.clone(), at.pane.lines());
        self.server.publish(&Message::Snapshot {
            snapshot: Box::new(snapshot),
        })?;
        Ok(Flow::Continue)
    }

    /// Clients see frames: while one is connected, the loop refreshes at the frame rate.
    fn wants_frames(&self) -> bool {
        self.server.client_count() > 0
    }

    /// The last windows (as `stream` prints them at its end: the kernel source's partial one
    /// too), then the end message.
    fn finish(&mut self, end: &End) -> Result<()> {
        let origin = end.pipeline.origin_ns();
        self.publish_windows(&end.finished.closed, origin)?;
        if let Some(last) = end
            .finished
            .last
            .as_ref()
            .filter(|last| last.exact.is_some())
        {
            self.publish_windows(std::slice::from_ref(last), origin)?;
        }
        self.server.publish(&Message::End {
            reason: end.stop.describe(),
        })
    }
}

/// Processes a window message names: its line's busiest (docs/DAEMON.md). A window of
/// 10,000 active processes was a line over the clients' 4 MiB (issue 52).
pub(crate) const WINDOW_PROCESSES: usize = 200;

/// The stream line of `window` (docs/STREAM.md) with `processes` cut to the busiest
/// [`WINDOW_PROCESSES`] (the line has them busiest first) and, when any were cut, their number
/// in `processes_more`; `totals` still counts them all.
fn bounded_window_line(window: &crate::model::WindowReport, origin: u64) -> StreamLine {
    window_line_top(window, origin, WINDOW_PROCESSES)
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.accept.abort();
        self.lock().connected.clear();
        let _ = fs::remove_file(&self.path);
    }
}

/// Wait for every writer; those still running when this future is dropped (the timeout)
/// are aborted, which closes their connections.
async fn join_all(writers: Vec<JoinHandle<()>>) {
    struct AbortOnDrop(JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut writers: Vec<AbortOnDrop> = writers.into_iter().map(AbortOnDrop).collect();
    for writer in &mut writers {
        // A writer that panicked or was aborted is done too.
        let _ = (&mut writer.0).await;
    }
}

/// A socket file left by a daemon that was killed is removed; one a daemon answers on is
/// refused; anything else at that path is left alone and refused.
fn remove_stale(path: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("inspecting {}", path.display())),
    };
    if !meta.file_type().is_socket() {
        bail!(
            "{} exists and is not a socket: refusing to replace it",
            path.display()
        );
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        bail!(
            "a daemon already serves {}: one daemon per socket (stop it, or give --socket)",
            path.display()
        );
    }
    fs::remove_file(path).with_context(|| format!("removing the stale socket {}", path.display()))
}

async fn accept_clients(listener: UnixListener, clients: Arc<Mutex<Clients>>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                // EMFILE and the like: wait instead of spinning.
                log::warn!("accepting a client: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut clients = clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.connected.len() >= MAX_CLIENTS {
            log::warn!("refusing a client: {MAX_CLIENTS} are connected");
            continue; // dropping the stream closes it
        }
        let (queue, pending) = mpsc::channel(CLIENT_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        // The queue is empty: these cannot fail.
        for first in std::iter::once(&clients.hello).chain(&clients.latest_snapshot) {
            if queue.try_send(Arc::clone(first)).is_ok() {
                queued.fetch_add(first.len(), Ordering::AcqRel);
            }
        }
        let writer = tokio::spawn(write_queue(stream, pending, Arc::clone(&queued)));
        clients.connected.push(Client {
            queue,
            queued,
            writer: Some(writer),
        });
        if let Some(waker) = &clients.on_join {
            let _ = waker.send(Input::Wake);
        }
    }
}

/// Write a client's queue to its socket until the queue closes or the client goes away.
async fn write_queue(
    mut stream: UnixStream,
    mut pending: mpsc::Receiver<Arc<[u8]>>,
    queued: Arc<AtomicUsize>,
) {
    while let Some(bytes) = pending.recv().await {
        if stream.write_all(&bytes).await.is_err() {
            return; // the client went away: the closed queue tells the daemon
        }
        queued.fetch_sub(bytes.len(), Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;
    use crate::{client::Connection, schema::protocol::PROTOCOL_VERSION, source::SourceKind};

    fn hello() -> Hello {
        Hello {
            v: PROTOCOL_VERSION,
            source: SourceInfo {
                kind: SourceKind::Sim,
                kernel: "test".into(),
                devices: vec!["vdb".into()],
                detail: String::new(),
            },
            banner: None,
            origin_ns: 0,
            window_ns: 1_000_000_000,
            tuning: false,
        }
    }

    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{what} never happened");
    }

    /// Issue 53: a daemon's `window` message carries the window's typed stream line, the one
    /// `stream` prints: a client reads back the value `stream` would print, and the message's
    /// `line` is, byte for byte, `stream --json`'s line.
    #[test]
    fn a_window_message_carries_the_line_stream_prints() {
        use tokio::io::AsyncBufReadExt as _;
        use tracer_common::{Event, EventKind};

        use crate::{
            model::{Model, ModelConfig},
            view::jsonline::window_line,
        };
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        for (tgid, kind) in [
            (1, EventKind::NodeRead),
            (2, EventKind::NodeRead),
            (2, EventKind::Restore),
            (3, EventKind::Convert),
        ] {
            model.ingest(&Event::new(kind, 5).task(tgid));
        }
        model.advance_to(1_000_000_000);
        let windows = model.take_closed();
        let printed = window_line(&windows[0], 0);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sock/daemon.sock");
            let server = SocketServer::bind(&path, &hello()).unwrap();
            let mut client = Connection::open(&path).await.unwrap();
            let mut raw = tokio::io::BufReader::new(UnixStream::connect(&path).await.unwrap());
            until("two clients", || server.client_count() == 2).await;
            let sink = SocketSink::new(server, hello().source);
            sink.publish_windows(&windows, 0).unwrap();
            match client.next().await.unwrap() {
                Some(Message::Window { line }) => assert_eq!(*line, printed),
                other => panic!("not a window: {other:?}"),
            }
            let mut hello_line = String::new();
            raw.read_line(&mut hello_line).await.unwrap();
            let mut window_message = String::new();
            raw.read_line(&mut window_message).await.unwrap();
            let message: serde_json::Value = serde_json::from_str(&window_message).unwrap();
            assert_eq!(message["type"], "window");
            assert_eq!(message["line"].to_string(), printed.to_json());
            assert!(
                window_message.contains(&printed.to_json()),
                "the line's bytes, as stream prints them: {window_message}"
            );
        });
    }

    /// A client that reads nothing fills its socket buffer, then its queue, and is dropped;
    /// the reading client gets every message, in order.
    #[test]
    fn a_slow_client_is_dropped_and_the_others_get_everything() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sock/daemon.sock");
            let server = SocketServer::bind(&path, &hello()).unwrap();
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
            let mut slow = UnixStream::connect(&path).await.unwrap();
            let mut reader = Connection::open(&path).await.unwrap();
            assert_eq!(reader.hello.window_ns, 1_000_000_000);
            until("two clients", || server.client_count() == 2).await;
            let big = "x".repeat(64 << 10);
            let total = CLIENT_QUEUE + 200;
            for i in 0..total {
                // `publish` is not async: it cannot wait for a client.
                server
                    .publish(&Message::Decision {
                        line: format!("{i} {big}"),
                    })
                    .unwrap();
                match reader.next().await.unwrap() {
                    Some(Message::Decision { line }) => {
                        assert!(line.starts_with(&format!("{i} ")), "message {i} in order")
                    }
                    other => panic!("message {i}: {other:?}"),
                }
            }
            assert_eq!(server.dropped_slow(), 1);
            assert_eq!(server.client_count(), 1);
            // The slow client's connection was closed: what was in flight, then the end.
            let mut rest = Vec::new();
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                slow.read_to_end(&mut rest),
            )
            .await;
            assert!(read.is_ok(), "the slow client's connection ends");
            assert!(rest.len() < total * big.len(), "it did not get everything");
        });
    }

    /// Issue 52: a client that stalls is dropped once its queue holds CLIENT_QUEUE_BYTES,
    /// long before CLIENT_QUEUE large messages (256 snapshots of 10,000 apps were 2.9 GB).
    #[test]
    fn a_stalled_client_is_dropped_by_the_bytes_it_holds_not_the_messages() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sock/daemon.sock");
            let server = SocketServer::bind(&path, &hello()).unwrap();
            let _stalled = UnixStream::connect(&path).await.unwrap();
            until("a client", || server.client_count() == 1).await;
            let big = "x".repeat(1 << 20);
            // Well under CLIENT_QUEUE messages, well over CLIENT_QUEUE_BYTES.
            let messages = 2 * CLIENT_QUEUE_BYTES / big.len();
            assert!(messages < CLIENT_QUEUE / 2);
            for i in 0..messages {
                server
                    .publish(&Message::Decision {
                        line: format!("{i} {big}"),
                    })
                    .unwrap();
                // Let the writer fill the socket buffer.
                tokio::task::yield_now().await;
            }
            assert_eq!(server.dropped_slow(), 1, "the stalled client is dropped");
            assert_eq!(server.client_count(), 0);
        });
    }

    #[test]
    fn a_live_socket_is_refused_a_stale_one_replaced() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sock/daemon.sock");
            let first = SocketServer::bind(&path, &hello()).unwrap();
            let err = SocketServer::bind(&path, &hello()).err().unwrap();
            assert!(
                format!("{err:#}").contains("a daemon already serves"),
                "{err:#}"
            );
            drop(first);
            // A socket file nobody answers on, as a killed daemon leaves it.
            let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
            drop(stale);
            assert!(path.exists());
            let _second = SocketServer::bind(&path, &hello()).unwrap();
            Connection::open(&path).await.unwrap();
        });
    }
}
