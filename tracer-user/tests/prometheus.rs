//! Debian's Prometheus scrapes `nodescope stream --openmetrics` on loopback, and a per-app
//! node-read series comes back through Prometheus' HTTP query API.
mod common;

use std::{
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
