//! The bounds tests' runner (bounds.rs, bounds_flags.rs, bounds_whatif.rs, bounds_connect.rs):
//! each nodescope run measured, its peak RSS from wait4, against the one limit; and a valid
//! recording to start from.
use std::{
    fs,
    io::{BufRead as _, BufReader, Read as _},
    path::Path,
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use nodescope::record::writer::Writer;
use tracer_common::{Event, EventKind};

use super::{recording_header, NODESCOPE};

/// The most any subcommand may hold, whatever its input (issue 21).
pub const RSS_LIMIT_KB: i64 = 256 * 1024;

pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub max_rss_kb: i64,
    pub wall: Duration,
    /// From SIGTERM to the exit, when one was sent.
    pub after_signal: Option<Duration>,
}

/// How long a run waits for the output it should stop at: far above any healthy run's time on
/// a loaded machine, so that only a run that never gets there fails.
pub const OUTPUT_WAIT: Duration = Duration::from_secs(60);

/// Run nodescope with `args` to its end; `term_after_lines` sends SIGTERM once stdout has that
/// many lines (or after OUTPUT_WAIT without them): a state to wait for, not a time, so that a
/// busy machine makes the test slower, never wrong.
pub fn run(args: &[&str], env_dir: &Path, term_after_lines: Option<usize>) -> Run {
    let started = Instant::now();
    let mut child = Command::new(NODESCOPE)
        .args(args)
        .env("XDG_RUNTIME_DIR", env_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodescope");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let lines = Arc::new(AtomicUsize::new(0));
    let lines_seen = Arc::clone(&lines);
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let mut reader = BufReader::new(&mut stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            text.push_str(&line);
            line.clear();
            lines_seen.fetch_add(1, Ordering::SeqCst);
        }
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut signalled = None;
    if let Some(wanted) = term_after_lines {
        while lines.load(Ordering::SeqCst) < wanted && started.elapsed() < OUTPUT_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        signalled = Some(Instant::now());
        super::send_signal(&child, libc::SIGTERM);
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage (plain integers) for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing through two valid pointers; std's Child is not
    // waited afterwards (it is forgotten below), so the pid is reaped exactly once.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    std::mem::forget(child);
    Run {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        max_rss_kb: usage.ru_maxrss,
        wall: started.elapsed(),
        after_signal: signalled.map(|at| at.elapsed()),
    }
}

impl Run {
    pub fn assert_bounded(&self, what: &str) {
        assert!(
            self.max_rss_kb < RSS_LIMIT_KB,
            "{what}: peak RSS {} KiB\n{}",
            self.max_rss_kb,
            self.stderr
        );
    }
}

/// A valid recording of `events` NodeReads one millisecond apart, with its footer.
pub fn recording(path: &Path, events: u64) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new(), &recording_header(1_000_000_000)).unwrap();
    for i in 0..events {
        let event = Event::new(EventKind::NodeRead, i * 1_000_000)
            .task(7)
            .nid(i as u32);
        writer.event(&event).unwrap();
    }
    let (bytes, _) = writer.finish(events * 1_000_000).unwrap();
    fs::write(path, &bytes).unwrap();
    bytes
}
