//! Issue 52, item 2: the daemon at 10,000 apps (any local user can make them: a process with
//! no package is an app of its own), with a client that stalls and 8 scrapers from 8 loopback
//! addresses, stays under 256 MB (its VmHWM) and delivers every window on time; a reading
//! client gets bounded snapshots and every window line.
mod common;

use std::{
    collections::BTreeSet,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{Ipv4Addr, TcpStream},
    os::{fd::FromRawFd as _, unix::net::UnixStream},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread::sleep,
    time::{Duration, Instant},
};

use common::{free_port, recording_header, scratch, write_recording, KillOnDrop, NODESCOPE};
use tracer_common::{Event, EventKind};

const SECOND: u64 = 1_000_000_000;
const APPS: u32 = 10_000;
/// Seconds the recording lasts (the daemon replays it in real time).
const SECONDS: u64 = 30;
/// Windows the reading client waits for.
const WINDOWS: u64 = 15;
const DEV: u32 = (254 << 20) | 16;
const LIMIT_BYTES: u64 = 256 << 20;

/// Every app reads one node a window (app i at i microseconds into it); the first 50 a few
/// more, so the busiest are told apart.
fn events() -> Vec<Event> {
    let mut events = Vec::new();
    for second in 0..SECONDS {
        for i in 0..APPS {
            let reads = if i < 50 { 1 + (50 - i) / 10 } else { 1 };
            for r in 0..reads {
                events.push(
                    Event::new(
                        EventKind::NodeRead,
                        second * SECOND + u64::from(i) * 50_000 + u64::from(r),
                    )
                    .task(100_000 + i)
                    .uid(20_000 + i)
                    .comm(&format!("app{i:05}"))
                    .dev(DEV)
                    .nid(i),
                );
            }
        }
    }
    events
}

fn vm_hwm_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// GET /metrics from `source` (a loopback address of its own) to 127.0.0.1:port.
fn scrape_from(source: Ipv4Addr, port: u16) -> Option<String> {
    // SAFETY: plain socket calls on a descriptor we own; the addresses outlive the calls.
    let stream = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket");
        let stream = TcpStream::from_raw_fd(fd);
        let addr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let from = addr(source, 0);
        if libc::bind(fd, (&raw const from).cast(), len) != 0 {
            return None;
        }
        let to = addr(Ipv4Addr::LOCALHOST, port);
        if libc::connect(fd, (&raw const to).cast(), len) != 0 {
            return None;
        }
        stream
    };
    let mut stream = stream;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

#[test]
fn ten_thousand_apps_a_stalled_client_and_8_scrapers_hold_256_mb_and_windows_on_time() {
    let dir = scratch("apps");
    let recording = dir.path().join("apps.nsr");
    write_recording(&recording, &recording_header(SECOND), &events());
    let socket = dir.path().join("sock/daemon.sock");
    let port = free_port();
    let daemon = Command::new(NODESCOPE)
        .args(["daemon", "--source", "replay", "--speed", "1"])
        .arg(&recording)
        .arg("--socket")
        .arg(&socket)
        .args(["--openmetrics", &format!("127.0.0.1:{port}")])
        .arg("--log")
        .arg(dir.path().join("daemon.log"))
        .stdin(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let pid = daemon.id();
    let mut daemon = KillOnDrop(daemon);
    let started = Instant::now();
    while !socket.exists() {
        if let Some(status) = daemon.0.try_wait().unwrap() {
            panic!(
                "the daemon ended: {status}: {}",
                std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no socket: {}",
            std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
        );
        sleep(Duration::from_millis(50));
    }

    // The stalled client: it reads up to its first snapshot (which must be bounded), then
    // never again, like `top --connect` stopped with Ctrl-Z.
    let stalled = UnixStream::connect(&socket).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stalled);
    // The first window's snapshots come while apps still appear: wait for all of them.
    // Every finding is collected, so one run on a broken daemon shows all of them.
    let mut failures: Vec<String> = Vec::new();
    let mut snapshots = 0;
    loop {
        let mut line = String::new();
        // Over 4 MiB is a failure anyway: read no further (the client stalls from here).
        let read = (&mut reader)
            .take(8 << 20)
            .read_line(&mut line)
            .expect("a line from the daemon");
        assert!(read > 0, "the daemon closed the connection");
        if !line.ends_with('\n') {
            failures.push("a line of over 8 MiB".into());
            break;
        }
        if !line.contains(r#""type":"snapshot""#) {
            continue;
        }
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        let parsed = &parsed["snapshot"];
        let named = parsed["apps"].as_array().unwrap().len();
        let other = parsed["apps_other"]["apps"].as_u64().unwrap_or(0);
        snapshots += 1;
        if named as u64 + other < u64::from(APPS) && snapshots < 40 {
            continue;
        }
        if line.len() >= 1 << 20 {
            failures.push(format!("a snapshot of {} bytes", line.len()));
        }
        if named as u64 + other != u64::from(APPS) {
            failures.push(format!("{named} apps named, {other} summed"));
        }
        if named > 200 {
            failures.push(format!("{named} apps named"));
        }
        let busiest = parsed["apps"][0]["app"].to_string();
        if !busiest.contains("app00000") {
            failures.push(format!("the first app is {busiest}"));
        }
        break;
    }

    // 8 scrapers, each from its own loopback address, scraping as fast as answered.
    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let largest = Arc::new(AtomicU64::new(0));
    let scrapers: Vec<_> = (0..8u8)
        .map(|k| {
            let (stop, scrapes, largest) = (stop.clone(), scrapes.clone(), largest.clone());
            std::thread::spawn(move || {
                let mut labels = BTreeSet::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(body) = scrape_from(Ipv4Addr::new(127, 0, 0, 2 + k), port) {
                        scrapes.fetch_add(1, Ordering::Relaxed);
                        largest.fetch_max(body.len() as u64, Ordering::Relaxed);
                        labels = body
                            .lines()
                            .filter_map(|l| l.split("app=\"").nth(1))
                            .filter_map(|a| a.split('"').next())
                            .map(str::to_string)
                            .collect();
                    }
                }
                labels
            })
        })
        .collect();

    // The reading client: every window line, each stamped as it arrives.
    let mut stream = Command::new(NODESCOPE)
        .args(["stream", "--json", "--connect"])
        .arg(&socket)
        .args(["--duration", &WINDOWS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = stream.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .map(|line| (Instant::now(), line))
            .collect::<Vec<_>>()
    });
    let mut hwm = 0;
    let until = Instant::now() + Duration::from_secs(WINDOWS + 10);
    while Instant::now() < until {
        hwm = vm_hwm_bytes(pid).unwrap_or(hwm);
        if hwm > 2 * LIMIT_BYTES {
            break; // far over: stop before it takes the machine
        }
        if stream.try_wait().unwrap().is_some() {
            break;
        }
        sleep(Duration::from_millis(100));
    }
    hwm = vm_hwm_bytes(pid).unwrap_or(hwm);
    stop.store(true, Ordering::Relaxed);
    let _ = stream.kill();
    let status = stream.wait().unwrap();
    let mut stderr = String::new();
    let _ = stream.stderr.take().unwrap().read_to_string(&mut stderr);
    let lines = lines.join().unwrap();
    drop(daemon);
    let labels: Vec<BTreeSet<String>> = scrapers.into_iter().map(|s| s.join().unwrap()).collect();
    drop(reader);

    eprintln!(
        "VmHWM {} MB, {} scrapes (largest {} KB), {} window lines",
        hwm >> 20,
        scrapes.load(Ordering::Relaxed),
        largest.load(Ordering::Relaxed) >> 10,
        lines.len()
    );
    if hwm > LIMIT_BYTES {
        failures.push(format!("the daemon's VmHWM is {} MB", hwm >> 20));
    }
    if !status.success() || lines.len() as u64 != WINDOWS {
        failures.push(format!(
            "stream --connect: {status}, {} window lines: {stderr}",
            lines.len()
        ));
    }
    if let Some((first_at, first)) = lines.first() {
        let t = |line: &str| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["t"]
                .as_f64()
                .unwrap()
        };
        let latest = lines
            .iter()
            .map(|(at, line)| at.duration_since(*first_at).as_secs_f64() - (t(line) - t(first)))
            .fold(0.0f64, f64::max);
        eprintln!("latest window: {latest:.2} s after its time");
        if latest > 2.0 {
            failures.push(format!("a window {latest:.2} s late"));
        }
    }
    let largest = largest.load(Ordering::Relaxed);
    if scrapes.load(Ordering::Relaxed) < 8 || largest >= 2 << 20 {
        failures.push(format!(
            "{} scrapes answered, the largest {} KB",
            scrapes.load(Ordering::Relaxed),
            largest >> 10
        ));
    }
    for labels in labels.iter().filter(|l| !l.is_empty()) {
        if labels.len() > 201 || !labels.contains("(other)") {
            failures.push(format!(
                "{} app labels, (other) among them: {}",
                labels.len(),
                labels.contains("(other)")
            ));
            break;
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
