//! The client side of the daemon's socket (`top --connect`, `stream --connect`): what the
//! daemon's model and controller said, line by line. Nothing is loaded and nothing is modelled
//! here: the daemon's windows and snapshots are shown as they come, so a client shows exactly
//! what the daemon computed. The wire format is `crate::schema::protocol` and docs/DAEMON.md.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader},
    net::UnixStream,
};

use crate::schema::protocol::{default_socket_path, Hello, Message, PROTOCOL_VERSION};

/// The longest line read. The largest real message is a snapshot, about a kilobyte per app it
/// names (measured: 19.5 KB for the android-launch scenario's 16 apps); the daemon names at
/// most 200 and sums the rest, and a window line names at most 200 processes (issue 52), so a
/// real line stays far below this. A line is parsed whole, and JSON values cost several
/// times their text, so this bound is what bounds the client's memory against a hostile or
/// broken server (at 64 MiB one 62 MB line took 1.4-2.1 GB).
pub(crate) const MAX_LINE_BYTES: u64 = 4 << 20;

/// `--connect` without a path (`None`) means the daemon's default socket.
pub(crate) fn socket_or_default(path: Option<&Path>) -> PathBuf {
    path.map_or_else(default_socket_path, Path::to_path_buf)
}

pub struct Connection {
    reader: BufReader<UnixStream>,
    path: PathBuf,
    pub hello: Hello,
    /// The line being read (kept across cancelled reads).
    line: Vec<u8>,
}

impl Connection {
    /// Connect and read the daemon's hello; refuse another protocol version in words.
    pub async fn open(path: &Path) -> Result<Connection> {
        let stream = UnixStream::connect(path).await.with_context(|| {
            format!(
                "connecting to the daemon at {} (is `nodescope daemon` running, and are we its \
                 user?)",
                path.display()
            )
        })?;
        let mut connection = Connection {
            reader: BufReader::new(stream),
            path: path.to_path_buf(),
            hello: placeholder_hello(),
            line: Vec::new(),
        };
        match connection.next().await? {
            Some(Message::Hello(hello)) if hello.v == PROTOCOL_VERSION => connection.hello = hello,
            Some(Message::Hello(hello)) => bail!(
                "{} speaks protocol version {}; this nodescope speaks {PROTOCOL_VERSION}",
                path.display(),
                hello.v
            ),
            Some(_) => bail!("{}: the first line is not a hello", path.display()),
            None => bail!(
                "{}: the daemon closed the connection at once (too many clients?)",
                path.display()
            ),
        }
        Ok(connection)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next message; `None` when the daemon closed the connection. Cancel-safe (views race
    /// it against key presses and ticks): a partly read line stays buffered for the next call.
    pub async fn next(&mut self) -> Result<Option<Message>> {
        let limit = MAX_LINE_BYTES.saturating_sub(self.line.len() as u64);
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.line)
            .await
            .with_context(|| format!("reading from {}", self.path.display()))?;
        if read == 0 && self.line.is_empty() {
            return Ok(None);
        }
        if self.line.last() != Some(&b'\n') {
            bail!(
                "{}: a line longer than {} MiB, or cut short",
                self.path.display(),
                MAX_LINE_BYTES >> 20
            );
        }
        let line = std::mem::take(&mut self.line);
        let message = serde_json::from_slice(&line)
            .with_context(|| format!("{}: not a daemon message", self.path.display()))?;
        Ok(Some(message))
    }
}

/// Stands in until the real hello is read (never returned to a caller).
fn placeholder_hello() -> Hello {
    Hello {
        v: 0,
        source: crate::source::SourceInfo {
            kind: crate::source::SourceKind::Sim,
            kernel: String::new(),
            devices: Vec::new(),
            detail: String::new(),
        },
        banner: None,
        origin_ns: 0,
        window_ns: 0,
        tuning: false,
    }
}
