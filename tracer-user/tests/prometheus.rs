//! Debian's Prometheus scrapes `nodescope stream --openmetrics` on loopback, and a per-app
//! node-read series comes back through Prometheus' HTTP query API.
mod common;

use std::{
    io::ErrorKind,
    net::Ipv4Addr,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{free_port, http_get, scratch, KillOnDrop, NODESCOPE};

#[test]
fn prometheus_scrapes_per_app_node_reads() {
    let Ok(prometheus) = which("prometheus") else {
        panic!("prometheus is not installed: `cargo xtask setup` installs it");
    };
    let scratch_dir = scratch("prometheus");
    let dir = scratch_dir.path();
    let (metrics_port, prometheus_port) = (free_port(), free_port());
    let _nodescope = KillOnDrop(
        Command::new(NODESCOPE)
            .args([
                "stream",
                "--source",
                "sim",
                "--scenario",
                "android-launch",
                "--speed",
                "5",
            ])
            .args(["--sysfs-root", dir.join("knobs").to_str().unwrap()])
            .args(["--openmetrics", &format!("127.0.0.1:{metrics_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: nodescope\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let _prometheus = KillOnDrop(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Our own endpoint first: OpenMetrics text with the per-app family.
    let exposition =
        wait_for(|| http_get(metrics_port, "/metrics").filter(|t| t.contains("com.tencent.mm")));
    assert!(
        exposition.contains("# TYPE nodescope_node_reads counter"),
        "{exposition}"
    );
    assert!(exposition.ends_with("# EOF\n"));
    // Then through Prometheus.
    let query = "/api/v1/query?query=nodescope_node_reads_total%7Bapp%3D%22com.tencent.mm%22%2Ckind%3D%22demand%22%7D";
    let answer =
        wait_for(|| http_get(prometheus_port, query).filter(|body| body.contains("\"value\"")));
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["status"], "success");
    let series = &answer["data"]["result"][0];
    assert_eq!(series["metric"]["app"], "com.tencent.mm");
    assert_eq!(series["metric"]["job"], "nodescope");
    let value: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
    assert!(value > 0.0, "{answer}");
    // The restore latency histogram: Prometheus takes all 22 buckets of the device's series
    // (21 bounds, 2^10 to 2^30 ns, and +Inf), and the simulator's
    // restores are timed, so its count grows.
    let buckets = "/api/v1/query?query=count(nodescope_restore_latency_seconds_bucket)";
    let answer =
        wait_for(|| http_get(prometheus_port, buckets).filter(|body| body.contains("\"value\"")));
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["data"]["result"][0]["value"][1], "22", "{answer}");
    let count = "/api/v1/query?query=nodescope_restore_latency_seconds_count";
    let answer = wait_for(|| {
        http_get(prometheus_port, count).filter(|body| {
            serde_json::from_str::<serde_json::Value>(body).is_ok_and(|a| {
                a["data"]["result"][0]["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
            })
        })
    });
    assert!(answer.contains("\"success\""), "{answer}");
}

fn wait_for(mut probe: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "gave up after 60 s");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| p.exists())
        })
        .ok_or(())
}

/// `nodescope stream --source sim --openmetrics 127.0.0.1:PORT`, started through `prefix`
/// (e.g. prlimit), once /metrics answers.
fn serve_metrics(dir: &std::path::Path, prefix: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut args: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    args.push(NODESCOPE.into());
    args.extend(
        ["stream", "--source", "sim", "--openmetrics"]
            .iter()
            .map(|s| s.to_string()),
    );
    args.push(format!("127.0.0.1:{port}"));
    args.extend([
        "--sysfs-root".into(),
        dir.join("knobs").display().to_string(),
    ]);
    let child = Command::new(&args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = KillOnDrop(child);
    wait_for(|| http_get(port, "/metrics"));
    (child, port)
}

/// Send `parts` with a pause between them; the whole response.
fn request_in_parts(port: u16, parts: &[&str]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    for part in parts {
        stream.write_all(part.as_bytes()).unwrap();
        stream.flush().unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn a_request_split_across_segments_and_head_are_answered() {
    let scratch_dir = scratch("metrics-split");
    let (_nodescope, port) = serve_metrics(scratch_dir.path(), &[]);
    let split = request_in_parts(port, &["GET /met", "rics HTTP/1.1\r\nHost: x\r\n", "\r\n"]);
    assert!(split.starts_with("HTTP/1.1 200 OK\r\n"), "{split}");
    assert!(split.ends_with("# EOF\n"), "{split}");
    let head = request_in_parts(port, &["HEAD /metrics HTTP/1.1\r\n\r\n"]);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let (headers, body) = head.split_once("\r\n\r\n").unwrap();
    assert!(headers.contains("Content-Length: "), "{head}");
    assert_eq!(body, "", "HEAD has no body");
}

/// Open file descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// CPU time (user + system) of a process so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from the state (field 3) here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A connection to 127.0.0.1:`port` from `source` (any address of 127.0.0.0/8 is this host's,
/// so one local user can be many peers).
fn connect_from(
    runtime: &tokio::runtime::Runtime,
    source: Ipv4Addr,
    port: u16,
) -> std::net::TcpStream {
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((source, 0).into()).unwrap();
        let stream = socket
            .connect((Ipv4Addr::LOCALHOST, port).into())
            .await
            .unwrap_or_else(|e| panic!("connecting from {source}: {e}"));
        stream.into_std().unwrap()
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap()
}

/// GET /metrics on a new connection from 127.0.0.1, given up on after 30 s: the whole
/// response (or the error) and how long it took.
fn timed_scrape(port: u16) -> (String, Duration) {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    if let Err(err) = stream.read_to_string(&mut response) {
        response = format!("{response}[read failed: {err}]");
    }
    (response, started.elapsed())
}

/// Wait until `stream` reads the end of the connection (the server closed it); how long that
/// took. Panics when it is still open after `limit`.
fn time_to_close(stream: &std::net::TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut stream = stream;
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 64];
    let got = std::io::Read::read(&mut stream, &mut buf);
    // The server closes an idle connection it never read from: FIN (Ok(0)), or a reset.
    assert!(
        matches!(got, Ok(0))
            || got
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
        "not closed within {limit:?}: {got:?}"
    );
    started.elapsed()
}

/// 200 clients from one address (loopback: every test client is the same peer) that connect
/// and send nothing: the server holds at most MAX_PER_PEER of them at once (the oldest idle one
/// is dropped for each new one), so its descriptors stay bounded; the ones it keeps are cut
/// after the idle deadline, well before the client timeout; then a scrape is answered again.
#[test]
fn idle_clients_are_capped_and_cut_off() {
    use nodescope::view::metrics::{CLIENT_TIMEOUT, MAX_PER_PEER};
    let scratch_dir = scratch("metrics-idle");
    let (nodescope, port) = serve_metrics(scratch_dir.path(), &[]);
    let pid = nodescope.0.id();
    let before = open_fds(pid);
    let mut most = before;
    let idle: Vec<_> = (0..200)
        .map(|_| {
            let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            most = most.max(open_fds(pid));
            stream
        })
        .collect();
    // A few over the cap: the connection just accepted and the one it displaces, the
    // simulator's own files.
    assert!(
        most <= before + MAX_PER_PEER + 4,
        "{before} descriptors before, up to {most} while 200 idle clients connected"
    );
    // The oldest was displaced by newer ones, the newest is cut by the idle deadline.
    time_to_close(&idle[0], CLIENT_TIMEOUT * 4);
    let newest = time_to_close(&idle[199], CLIENT_TIMEOUT * 4);
    eprintln!("the newest idle client was cut after {newest:?}");
    assert!(
        newest < CLIENT_TIMEOUT,
        "the newest idle client was cut after {newest:?}, not by the idle deadline"
    );
    drop(idle);
    let started = Instant::now();
    wait_for(|| http_get(port, "/metrics"));
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// With 200 idle connections open from the scraper's own address, a scrape is answered at
/// once: it displaces the oldest idle one instead of waiting behind them.
#[test]
fn a_scrape_is_answered_while_200_idle_clients_are_connected() {
    let scratch_dir = scratch("metrics-idle-scrape");
    let (_nodescope, port) = serve_metrics(scratch_dir.path(), &[]);
    let idle: Vec<_> = (0..200)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let (response, took) = timed_scrape(port);
    eprintln!("scrape with 200 idle clients connected: {took:?}");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("# EOF\n"), "{response}");
    assert!(
        took < Duration::from_secs(3),
        "scrape answered after {took:?}"
    );
    drop(idle);
}

/// 200 idle connections from 25 addresses of 127.0.0.0/8, 8 each (within the per-peer cap),
/// fill every slot and the backlog: a scrape still displaces the oldest idle connection.
#[test]
fn a_scrape_is_answered_while_idle_clients_from_many_addresses_fill_every_slot() {
    use nodescope::view::metrics::MAX_PER_PEER;
    let scratch_dir = scratch("metrics-idle-peers");
    let (nodescope, port) = serve_metrics(scratch_dir.path(), &[]);
    let pid = nodescope.0.id();
    let before = open_fds(pid);
    let runtime = runtime();
    let idle: Vec<_> = (2..27u8)
        .flat_map(|host| std::iter::repeat_n(Ipv4Addr::new(127, 0, 0, host), MAX_PER_PEER))
        .map(|source| connect_from(&runtime, source, port))
        .collect();
    let (response, took) = timed_scrape(port);
    eprintln!("scrape with 200 idle clients from 25 addresses connected: {took:?}");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        took < Duration::from_secs(3),
        "scrape answered after {took:?}"
    );
    let during = open_fds(pid);
    assert!(
        during <= before + nodescope::view::metrics::MAX_CONNECTIONS + 4,
        "{before} descriptors before, {during} with 200 idle clients"
    );
    drop(idle);
}

/// A client that sends its request one byte every 200 ms (3.2 s in all, within the client
/// timeout) is answered: the idle deadline counts silence, not the time to the end of the head.
#[test]
fn a_slow_but_steady_request_is_answered() {
    let scratch_dir = scratch("metrics-slow");
    let (_nodescope, port) = serve_metrics(scratch_dir.path(), &[]);
    let request = "GET /metrics\r\n\r\n";
    let bytes: Vec<&str> = (0..request.len()).map(|i| &request[i..=i]).collect();
    let started = Instant::now();
    let response = request_in_parts(port, &bytes);
    eprintln!(
        "a request sent a byte every 200 ms answered after {:?}",
        started.elapsed()
    );
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("# EOF\n"), "{response}");
}

/// At the open-file limit accept fails with EMFILE: the server backs off (little CPU) and
/// serves again once descriptors are free.
#[test]
fn at_the_open_file_limit_accept_backs_off() {
    let scratch_dir = scratch("metrics-emfile");
    let (nodescope, port) = serve_metrics(scratch_dir.path(), &["prlimit", "--nofile=40"]);
    let pid = nodescope.0.id();
    // From 25 addresses, 8 each: from one address the per-peer cap would hold the server
    // far below the limit. The idle deadline frees the accepted ones each second, and the
    // backlog refills them: about 30 an accepting round, so 200 keep it at the limit.
    let runtime = runtime();
    let clients: Vec<_> = (2..27u8)
        .flat_map(|host| {
            std::iter::repeat_n(
                Ipv4Addr::new(127, 0, 0, host),
                nodescope::view::metrics::MAX_PER_PEER,
            )
        })
        .map(|source| connect_from(&runtime, source, port))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let ticks = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let spent = cpu_ticks(pid) - ticks;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    eprintln!("at the open-file limit: {spent} ticks of CPU in 2 s ({per_second} a second)");
    // Before the back-off: about 40 % of a core. The simulator at speed 1 uses a little.
    assert!(
        spent < per_second / 5,
        "{spent} ticks of CPU in 2 s at the open-file limit ({per_second} a second)"
    );
    drop(clients);
    wait_for(|| http_get(port, "/metrics"));
}

/// How one scrape of a burst ended.
#[derive(Debug, PartialEq, Eq)]
enum Scraped {
    Ok,
    /// 503 with `Retry-After`: come back later, the connection closed cleanly.
    Busy,
    /// Anything else: a reset, an empty or cut answer, another status.
    Failed(String),
}

/// GET /metrics from 127.0.0.1 once `start` lets every scraper of the round go, the request
/// sent `delay` after the connection is made (a scraper not scheduled in between).
fn burst_scrape(port: u16, start: &std::sync::Barrier, delay: Duration) -> Scraped {
    use std::io::{Read, Write};
    start.wait();
    let mut stream = match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(stream) => stream,
        Err(err) => return Scraped::Failed(format!("connect: {err}")),
    };
    std::thread::sleep(delay);
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    if let Err(err) =
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    {
        return Scraped::Failed(format!("write: {err}"));
    }
    let mut response = String::new();
    if let Err(err) = stream.read_to_string(&mut response) {
        return Scraped::Failed(format!("read: {err} after {} bytes", response.len()));
    }
    let head = response.split("\r\n\r\n").next().unwrap_or("");
    if response.starts_with("HTTP/1.1 200 OK\r\n") && response.ends_with("# EOF\n") {
        Scraped::Ok
    } else if head.starts_with("HTTP/1.1 503 ") && head.contains("\r\nRetry-After: 1") {
        Scraped::Busy
    } else {
        Scraped::Failed(format!("answer: {response:?}"))
    }
}

/// Issue 52, item 11: a Prometheus server with several jobs scrapes from one address. 30
/// scrapes at once from 127.0.0.1 lost 174 of 300 to resets: past MAX_PER_PEER connections of
/// one address being answered the next was closed at once, and the newest-wins rule dropped
/// scrapers whose request the server had not read yet (the accept loop runs ahead of the tasks
/// that read, above all on the single-threaded runtime `stream` and `daemon` use). Now every
/// scrape is answered, a 200 or, when its turn does not come soon, a 503 with Retry-After;
/// none is reset, most are 200s, and the windows the same runtime closes stay on time.
#[test]
fn thirty_concurrent_scrapes_from_one_address_are_all_answered() {
    use std::io::BufRead as _;
    const SCRAPERS: usize = 30;
    const ROUNDS: usize = 10;
    let scratch_dir = scratch("metrics-burst");
    let port = free_port();
    let mut child = Command::new(NODESCOPE)
        .args(["stream", "--json", "--source", "sim", "--scenario"])
        .args([
            "android-launch",
            "--openmetrics",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--sysfs-root")
        .arg(scratch_dir.path().join("knobs"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _nodescope = KillOnDrop(child);
    // When each window's line came.
    let windows = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    std::thread::spawn({
        let windows = std::sync::Arc::clone(&windows);
        move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if line.is_ok_and(|l| l.contains("\"window_s\"")) {
                    windows.lock().unwrap().push(Instant::now());
                }
            }
        }
    });
    wait_for(|| http_get(port, "/metrics"));
    let started = Instant::now();
    let mut outcomes = Vec::new();
    // A round every 300 ms: the bursts span several windows. Every other round the scrapers
    // send their requests 20 ms after connecting: accepted before their requests arrive.
    for round in 0..ROUNDS {
        let delay = Duration::from_millis(if round % 2 == 1 { 20 } else { 0 });
        let start = std::sync::Arc::new(std::sync::Barrier::new(SCRAPERS));
        let scrapers: Vec<_> = (0..SCRAPERS)
            .map(|_| {
                let start = std::sync::Arc::clone(&start);
                std::thread::spawn(move || burst_scrape(port, &start, delay))
            })
            .collect();
        outcomes.extend(scrapers.into_iter().map(|s| s.join().unwrap()));
        let next = started + Duration::from_millis(300) * (round as u32 + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let ended = Instant::now();
    // Two window lines past the bursts: the one they might have held up, and the next.
    let deadline = Instant::now() + Duration::from_secs(10);
    while windows
        .lock()
        .unwrap()
        .iter()
        .filter(|t| **t > ended)
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "no window lines after the bursts"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ok = outcomes.iter().filter(|o| **o == Scraped::Ok).count();
    let busy = outcomes.iter().filter(|o| **o == Scraped::Busy).count();
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, Scraped::Failed(_)))
        .collect();
    eprintln!(
        "{} scrapes in {:?}: {ok} answered 200, {busy} 503 with Retry-After, {} failed",
        outcomes.len(),
        ended - started,
        failed.len()
    );
    assert_eq!(outcomes.len(), SCRAPERS * ROUNDS);
    assert!(
        failed.is_empty(),
        "{} of {} scrapes failed, e.g. {:?}",
        failed.len(),
        outcomes.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(
        ok * 10 >= outcomes.len() * 9,
        "only {ok} of {} scrapes answered 200 ({busy} 503s)",
        outcomes.len()
    );
    // The window lines went on once a second meanwhile (1 s windows; a loaded machine's
    // slack): from the last line before the bursts to the second after them.
    let windows = windows.lock().unwrap().clone();
    let first = windows.iter().rposition(|t| *t < started).unwrap_or(0);
    let last = windows.iter().position(|t| *t > ended).unwrap() + 1;
    let gaps: Vec<Duration> = windows[first..=last]
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    eprintln!("window lines from before the bursts to after them: gaps {gaps:?}");
    let longest = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        !gaps.is_empty() && longest < Duration::from_millis(1800),
        "a window line came {longest:?} after the one before it during the bursts: {gaps:?}"
    );
}
