//! Helpers shared by the integration tests that drive the real binary.
#![allow(dead_code)] // each test binary uses a different subset

use std::process::{Child, Command, Output};

use tempfile::TempDir;

pub mod bounded;
pub mod tmux;
pub mod tune;

pub const NODESCOPE: &str = env!("CARGO_BIN_EXE_nodescope");

/// Kills the child on drop: a failing test must not leave a server or simulator running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Send `signal` to our own child process (SIGTERM, SIGINT: the way a user stops nodescope).
pub fn send_signal(child: &Child, signal: i32) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    // SAFETY: kill has no memory-safety preconditions; the pid is our own live child.
    let result = unsafe { libc::kill(pid, signal) };
    assert_eq!(result, 0, "kill({pid}, {signal})");
}

/// The one place the tests ask whether they run as root: the library's own check.
pub fn is_root() -> bool {
    nodescope::system::is_root()
}

/// A fresh directory for one test (knob files, recordings), removed when dropped, also when
/// the test fails.
pub fn scratch(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("nodescope-test-{name}-"))
        .tempdir()
        .expect("create a scratch directory")
}

/// Run nodescope with `args`; panic with its stderr when it fails.
pub fn nodescope(args: &[&str]) -> Output {
    let output = Command::new(NODESCOPE)
        .args(args)
        .output()
        .expect("start nodescope");
    assert!(
        output.status.success(),
        "nodescope {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `stream --json` replaying the recording at `path` as fast as it goes (`--speed 0`).
pub fn replay_json_args(path: &std::path::Path) -> [&str; 7] {
    let path = path.to_str().expect("a UTF-8 path");
    [
        "stream", "--json", "--source", "replay", "--speed", "0", path,
    ]
}

pub fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A free loopback TCP port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET http://127.0.0.1:port/path, the body as text (no client library: the test stays small).
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// Run `command` to its end, its output collected, failing the test (and killing it) when it
/// runs past `deadline`: a regression that blocks (a FIFO opened where a file was expected)
/// fails instead of hanging the test run.
pub fn output_within(command: &mut Command, deadline: std::time::Duration) -> Output {
    use std::process::Stdio;
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodescope");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(deadline) {
        Ok(output) => output.expect("collect nodescope's output"),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the child is not reaped yet
            // (its waiting thread is still blocked), so the pid is still our child's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{command:?} still running after {deadline:?}: killed");
        }
    }
}

/// Make a FIFO at `path` (where a test puts one in place of a file nodescope expects).
pub fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt as _;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
    let made = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}", path.display());
}

/// The header of the small recordings tests write by hand (windows of `window_ns`).
pub fn recording_header(window_ns: u64) -> nodescope::record::Header {
    nodescope::record::Header {
        host: "host".into(),
        kernel: "test".into(),
        source: "sim".into(),
        window_ns,
        ..Default::default()
    }
}

/// `events` recorded at `path` with the project's writer under `header`, the footer at the
/// last event's time.
pub fn write_recording(
    path: &std::path::Path,
    header: &nodescope::record::Header,
    events: &[tracer_common::Event],
) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut writer = nodescope::record::writer::Writer::new(file, header).unwrap();
    for event in events {
        writer.event(event).unwrap();
    }
    writer.finish(events.last().map_or(0, |e| e.ts_ns)).unwrap();
}
