//! The daemon's wire protocol: the messages a `nodescope daemon` sends its clients, one JSON
//! object per line (docs/DAEMON.md). The types are built from the model (a window's
//! [`StreamLine`], a [`Snapshot`] of the model's state), not from any view's private structs,
//! so a view can change without changing the protocol; the server is `view::socket`, the
//! client `crate::client`.
use std::{path::PathBuf, sync::Arc};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

pub use super::snapshot::{NodeTypesShown, Snapshot};
use super::stream::StreamLine;
use crate::source::SourceInfo;

/// The wire format's version, in the hello; a client refuses any other. Version 2: a window
/// message carries its stream line only (schema v3), no pre-rendered text. Version 3: the
/// snapshot's knob pair is one value, `knobs` {`threshold`, `interval_ms`} or null. Version 4
/// (issue 53): one unit for the window's length in every message, `window_ns` (the snapshot's
/// was `window_secs`, seconds as a float).
pub const PROTOCOL_VERSION: u32 = 4;

/// The socket's name in the daemon's state directory.
pub(crate) const SOCKET_NAME: &str = "daemon.sock";

/// `<state dir>/daemon.sock`: /run/nodescope as root, /data/nodescope on Android,
/// else $XDG_RUNTIME_DIR/nodescope (`controller::claim::default_state_dir`).
pub(crate) fn default_socket_path() -> PathBuf {
    controller::claim::default_state_dir().join(SOCKET_NAME)
}

/// The first line a client reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    pub v: u32,
    pub source: SourceInfo,
    /// Why `auto` chose the source it chose (e.g. "SIMULATOR (kernel ... has no F2FS)").
    pub banner: Option<String>,
    /// Window 0 begins here (the source's clock); the stream lines' `t` counts from it.
    pub origin_ns: u64,
    pub window_ns: u64,
    /// Whether a controller runs in the daemon.
    pub tuning: bool,
}

/// One line on the socket.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Message {
    Hello(Hello),
    /// A closed window: its stream line (docs/STREAM.md), exactly as `stream --json` prints
    /// it (keys sorted); a client prints the text form from it (`view::jsonline::line_text`).
    Window {
        #[serde(serialize_with = "super::sorted_keys")]
        line: Box<StreamLine>,
    },
    /// The model's state at a refresh, with the controller's mode and decisions.
    Snapshot {
        snapshot: Box<Snapshot>,
    },
    /// A knob change seen, a controller decision or a notice, as the decisions pane shows it.
    Decision {
        line: String,
    },
    /// The daemon is stopping.
    End {
        reason: String,
    },
}

impl Message {
    /// One JSON line, newline included.
    pub fn encode(&self) -> Result<Arc<[u8]>> {
        let mut bytes = serde_json::to_vec(self).context("encoding a socket message")?;
        bytes.push(b'\n');
        Ok(bytes.into())
    }
}
