//! `nodescope top` driven in a real terminal (tmux): panels, moving data, sorting, filtering,
//! pause, help and quit, with the terminal restored afterwards.
mod common;

use std::{
    thread::sleep,
    time::{Duration, Instant},
};

use common::{scratch, tmux::Tmux, NODESCOPE};

/// "reads 123" from the footer.
fn footer_count(screen: &str, name: &str) -> u64 {
    let footer = screen
        .lines()
        .find(|l| l.contains("q quit"))
        .expect("footer");
    let after = footer.split(&format!(" {name} ")).nth(1).expect(name);
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// The per-app table's rows: name and the numbers after it.
fn table_rows(screen: &str) -> Vec<(String, Vec<String>)> {
    let lines: Vec<&str> = screen.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.contains("APP") && l.contains("RESTORES"))
        .expect("table header");
    lines[header + 1..]
        .iter()
        .take_while(|l| !l.starts_with('└'))
        .map(|l| l.trim_matches(|c| c == '│' || c == ' '))
        .filter(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            (cells[0].clone(), cells[1..].to_vec())
        })
        .collect()
}

#[test]
fn top_on_the_simulator_in_a_real_terminal() {
    let scratch_dir = scratch("top");
    let dir = scratch_dir.path();
    let knobs = dir.join("knobs");
    // Source auto: this test may run on a kernel without F2FS; then the simulator runs, and says so.
    let command = format!(
        "{NODESCOPE} top --speed 4 --scenario android-launch --sysfs-root {} 2>{}; echo TOP-EXITED; sleep 30",
        knobs.display(),
        dir.join("stderr").display()
    );
    let tmux = Tmux::start("top", &command);
    let first = tmux.wait_for("com.tencent.mm");
    for panel in [
        "node reads",
        "restores",
        "conversions",
        "reclaims",
        "memory",
        "slots",
        "apps (",
        "controller decisions",
        "threshold 25%",
    ] {
        assert!(first.contains(panel), "{panel:?} missing:\n{first}");
    }
    if !std::path::Path::new("/sys/fs/f2fs").exists() {
        assert!(
            first.contains("SIMULATOR"),
            "auto must say it fell back to the simulator:\n{first}"
        );
    }

    // Moving data: counts grow between two looks a few seconds apart, reclaims included.
    sleep(Duration::from_secs(3));
    let later = tmux.wait_for("reclaims");
    assert!(footer_count(&later, "reads") > footer_count(&first, "reads"));
    assert!(footer_count(&later, "conversions") > footer_count(&first, "conversions"));
    let later = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = tmux.screen();
            if !screen.contains("reclaims 0/w") && screen.contains("reclaims ")
                || Instant::now() > deadline
            {
                break screen;
            }
            sleep(Duration::from_millis(500));
        }
    };
    assert!(
        !later.contains("reclaims 0/w"),
        "reclaims never moved:\n{later}"
    );
    assert!(
        !later.contains("raw 0.0 MiB (0 entries)"),
        "memory gauge moves:\n{later}"
    );

    // Sort by restores (column 5), then reversed.
    tmux.keys(&["5"]);
    let sorted = tmux.screen();
    assert!(sorted.contains("RESTORES▼"), "{sorted}");
    let restores: Vec<u64> = table_rows(&sorted)
        .iter()
        .filter_map(|(_, cells)| cells.get(3)?.parse().ok())
        .collect();
    assert!(
        restores.len() > 3 && restores.windows(2).all(|w| w[0] >= w[1]),
        "{restores:?}\n{sorted}"
    );
    tmux.keys(&["r"]);
    assert!(tmux.screen().contains("RESTORES▲"));

    // Filter.
    tmux.keys(&["/"]);
    tmux.keys(&["-l", "tencent"]);
    tmux.keys(&["Enter"]);
    let filtered = tmux.screen();
    let rows = table_rows(&filtered);
    assert!(filtered.contains("filter: tencent"), "{filtered}");
    assert!(
        !rows.is_empty() && rows.iter().all(|(name, _)| name.contains("tencent")),
        "{rows:?}"
    );
    tmux.keys(&["/"]);
    tmux.keys(&["Escape"]);

    // Pause: the screen stops changing; resume: it moves again.
    tmux.keys(&["p"]);
    let paused = tmux.screen();
    assert!(paused.contains("PAUSED"));
    sleep(Duration::from_secs(2));
    assert_eq!(
        footer_count(&tmux.screen(), "reads"),
        footer_count(&paused, "reads")
    );
    tmux.keys(&["p"]);
    sleep(Duration::from_secs(2));
    assert!(footer_count(&tmux.screen(), "reads") > footer_count(&paused, "reads"));

    // Help, then any key closes it.
    tmux.keys(&["?"]);
    assert!(tmux.screen().contains("filter apps by name"));
    tmux.keys(&["x"]);
    assert!(!tmux.screen().contains("filter apps by name"));

    // Quit: the program ends and the shell's screen is back.
    tmux.keys(&["q"]);
    let after = tmux.wait_for("TOP-EXITED");
    assert!(
        !after.contains("q quit"),
        "the alternate screen must be gone:\n{after}"
    );
}
