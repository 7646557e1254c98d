//! Issue 52: a write that can block is bounded by the command's deadline. A stderr pipe whose
//! reader stopped reading (full, nobody reading) held `stream` in its first diagnostic line for
//! ever, past `--duration` and deaf to it; its diagnostics now wait a bounded time and are then
//! dropped, and the output proper (stdout) is whole.
mod common;

use std::{
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use common::NODESCOPE;

/// A pipe whose buffer is full: the read end (kept open, never read) and the blocking write
/// end.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = write.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let chunk = [b'x'; 4096];
    // SAFETY: `chunk` is valid for reads of its length; the descriptor is open.
    while unsafe { libc::write(fd, chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    // SAFETY: as above: back to blocking, as a terminal's or a shell's pipe would be.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    (read, write)
}

#[test]
fn a_stderr_nobody_reads_holds_stream_past_neither_its_duration() {
    let (_read, write) = full_pipe();
    let dir = common::scratch("stderr-full");
    let started = Instant::now();
    let mut child = Command::new(NODESCOPE)
        .args(["stream", "--json", "--source", "sim", "--duration", "2"])
        .arg("--sysfs-root")
        .arg(dir.path().join("knobs"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(write))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("stream still running 20 s into --duration 2: held by its stderr");
        }
        thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    assert!(status.success(), "{status}");
    // The windows up to --duration, whole, whatever became of the diagnostics.
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().expect("a window"))
        .unwrap_or_else(|err| panic!("{err}: {lines}"));
    assert_eq!(last["t"].as_f64(), Some(2.0), "{lines}");
}
