//! The `--connect` client against a hostile or silent server (issue 33, finding 8): a huge
//! line is refused in bounded memory, `--duration` ends the run, the server's text arrives
//! escaped (common/bounded.rs).
use std::{path::Path, time::Duration};

mod common;

use common::{bounded::run, scratch};

/// A server on a Unix socket in `dir` that says hello as the daemon does, then writes `then`
/// and holds the connection open for `hold` (a silent daemon).
fn fake_daemon(dir: &Path, then: Vec<u8>, hold: Duration) -> std::path::PathBuf {
    use nodescope::{
        schema::protocol::{Hello, Message, PROTOCOL_VERSION},
        source::{SourceInfo, SourceKind},
    };
    let path = dir.join("fake.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let hello = Message::Hello(Hello {
        v: PROTOCOL_VERSION,
        source: SourceInfo {
            kind: SourceKind::Sim,
            kernel: "simulator".into(),
            devices: vec!["sim0".into()],
            detail: "a fake daemon \u{1b}[2J".into(),
        },
        banner: None,
        origin_ns: 0,
        window_ns: 1_000_000_000,
        tuning: false,
    })
    .encode()
    .unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        use std::io::Write as _;
        // The client may stop reading (a refused line): errors here are its business.
        let _ = stream
            .write_all(&hello)
            .and_then(|()| stream.write_all(&then));
        std::thread::sleep(hold);
    });
    path
}

/// Issue 33, finding 8: the `--connect` client trusted its server. A 62 MB line (under the
/// 64 MiB cap then) cost 1.4-2.1 GB; now a line over 4 MiB is refused in bounded memory.
#[test]
fn a_connect_client_refuses_a_huge_line_in_bounded_memory() {
    let dir = scratch("connect-huge");
    let mut line = b"{\"type\":\"window\",\"text\":\"\",\"line\":[".to_vec();
    line.extend(std::iter::repeat_n(b"0,".as_slice(), 31_000_000).flatten());
    line.extend_from_slice(b"0]}\n");
    let socket = fake_daemon(dir.path(), line, Duration::from_secs(30));
    let run = run(
        &["stream", "--json", "--connect", socket.to_str().unwrap()],
        dir.path(),
        None,
    );
    run.assert_bounded("stream --connect, a 62 MB line");
    assert!(!run.success, "{}", run.stderr);
    assert!(
        run.stderr.contains("a line longer than 4 MiB"),
        "{}",
        run.stderr
    );
}

/// Issue 33, finding 8: `--duration` counted windows only (against a silent daemon
/// `--duration 2` ran 10 s and 21 s), and the daemon's text reached the terminal raw. Now the
/// run ends by --duration + 1 s of wall time, and control characters arrive escaped.
#[test]
fn a_connect_client_ends_by_its_duration_and_escapes_the_daemons_text() {
    let dir = scratch("connect-silent");
    // The client prints the text form from the daemon's line: a hostile comm in it.
    use nodescope::schema::stream::{ProcessLine, StreamLine};
    let window = nodescope::schema::protocol::Message::Window {
        line: Box::new(StreamLine {
            t: 1.0,
            processes: vec![ProcessLine {
                comm: "\u{1b}]0;pwned\u{7}".into(),
                pid: 3,
                ..ProcessLine::default()
            }],
            ..StreamLine::default()
        }),
    };
    let socket = fake_daemon(
        dir.path(),
        window.encode().unwrap().to_vec(),
        Duration::from_secs(30),
    );
    let run = run(
        &[
            "stream",
            "--duration",
            "2",
            "--connect",
            socket.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(run.success, "{}", run.stderr);
    assert!(run.wall < Duration::from_secs(2 + 1 + 3), "{:?}", run.wall);
    assert!(
        run.stdout.contains("\\x1b]0;pwned\\x07[3] r=0"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains('\u{1b}') && !run.stderr.contains('\u{1b}'));
    assert!(
        run.stderr.contains("a fake daemon \\x1b[2J"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("--duration passed with 1 of 2 windows"),
        "{}",
        run.stderr
    );
}

/// Issue 52, item 8: `top --connect` showed a blank screen for ever on any error before the
/// daemon's first snapshot, and `q` then exited 0. Now the run ends at once, the terminal
/// restored, with the error on stderr and a failing status: for a line over the limit, a
/// message that is not one, and a connection the daemon closes.
#[test]
fn top_connect_says_an_error_before_the_first_snapshot_and_fails() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        test_skip::skip("tmux is not installed (`cargo xtask setup` installs it)");
        return;
    }
    let mut huge = vec![b'x'; 5 << 20];
    huge.push(b'\n');
    let cases: [(&str, Vec<u8>, Duration, &str); 3] = [
        (
            "huge",
            huge,
            Duration::from_secs(60),
            "a line longer than 4 MiB",
        ),
        (
            "malformed",
            b"{\"type\":\"snapshot\",\"snapshot\":{}}\n".to_vec(),
            Duration::from_secs(60),
            "not a daemon message",
        ),
        (
            "closed",
            Vec::new(),
            Duration::ZERO,
            "daemon closed the connection",
        ),
    ];
    for (name, then, hold, says) in cases {
        let dir = scratch(&format!("top-connect-{name}"));
        let socket = fake_daemon(dir.path(), then, hold);
        let stderr = dir.path().join("stderr");
        let command = format!(
            "{} top --connect {} 2>{}; echo TOP-EXITED-$?; sleep 60",
            common::NODESCOPE,
            socket.display(),
            stderr.display()
        );
        let tmux = common::tmux::Tmux::start(&format!("connect-{name}"), &command);
        let screen = tmux.wait_for("TOP-EXITED-");
        assert!(!screen.contains("TOP-EXITED-0"), "{name}: {screen}");
        let said = std::fs::read_to_string(&stderr).unwrap();
        assert!(said.contains(says), "{name}: {said}");
        assert!(said.contains("no snapshot received"), "{name}: {said}");
    }
}

/// `top --connect` showed a blank screen while the daemon's first snapshot was slow to come:
/// it looked hung. Now it says what it waits for, from the start (a daemon that says hello
/// and then nothing for a minute).
#[test]
fn top_connect_says_it_waits_for_the_first_snapshot() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        test_skip::skip("tmux is not installed (`cargo xtask setup` installs it)");
        return;
    }
    let dir = scratch("top-connect-waiting");
    let socket = fake_daemon(dir.path(), Vec::new(), Duration::from_secs(60));
    let command = format!(
        "{} top --connect {}; echo TOP-EXITED-$?; sleep 60",
        common::NODESCOPE,
        socket.display()
    );
    let tmux = common::tmux::Tmux::start("connect-waiting", &command);
    let screen = tmux.wait_for("waiting for the daemon's first snapshot");
    assert!(screen.contains("fake.sock: connected"), "{screen}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("TOP-EXITED-");
    assert!(screen.contains("TOP-EXITED-0"), "{screen}");
}

/// A comm with a newline forged a line of `stream --connect`'s text, and a right-to-left
/// override reached the terminal raw: the client prints the daemon's names escaped.
#[test]
fn a_connect_client_prints_names_escaped_on_one_line() {
    let dir = scratch("connect-names");
    use nodescope::schema::stream::{ProcessLine, StreamLine};
    let process = |comm: &str, pid| ProcessLine {
        comm: comm.into(),
        pid,
        ..ProcessLine::default()
    };
    let window = nodescope::schema::protocol::Message::Window {
        line: Box::new(StreamLine {
            t: 1.0,
            processes: vec![process("x\nFAKE 999 r", 3), process("evil\u{202e}txt", 4)],
            ..StreamLine::default()
        }),
    };
    let socket = fake_daemon(
        dir.path(),
        window.encode().unwrap().to_vec(),
        Duration::from_secs(30),
    );
    let run = run(
        &[
            "stream",
            "--duration",
            "1",
            "--connect",
            socket.to_str().unwrap(),
        ],
        dir.path(),
        None,
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(run.stdout.contains("x\\nFAKE 999 r[3]"), "{}", run.stdout);
    assert!(run.stdout.contains("evil\\u{202e}txt[4]"), "{}", run.stdout);
}
