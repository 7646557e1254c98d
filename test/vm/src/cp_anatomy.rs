//! The checkpoint anatomy phase (issue 19): `nodescope fsstress` runs each of seed 002's mixes
//! in the guest under `nodescope record`; here `nodescope report` reads each recording and its
//! checkpoint table must agree with the kernel's own counters over the same span, exactly:
//! completed checkpoints with debugfs's CP count, node writes with iostat's node writes (fs
//! node + fs gc node + fs cp node), and the metadata blocks sorted into the checkpoint pack,
//! SIT, NAT and SSA areas (none left over) with iostat's meta writes (fs meta + fs cp meta).
use std::{fs, path::Path};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::results::cp_count;

/// The mixes, as `nodescope fsstress --mix` names them; guest.sh runs the same list.
pub const MIXES: [&str; 2] = ["default", "metadata"];
/// fsstress's -p and -n of seed 002's runs, and the seed.
pub const PROCS: u32 = 20;
pub const OPS: u32 = 200;
pub const SEED: u64 = 2;

/// What one mix's recording and the kernel's counters say.
#[derive(Debug, Default, PartialEq)]
struct Measured {
    cps: u64,
    nodes: u64,
    cp_pack: u64,
    sit: u64,
    nat: u64,
    ssa: u64,
    other_meta: u64,
    journal: u64,
    drops: u64,
    cp_delta: u64,
    node_delta: u64,
    meta_delta: u64,
}

impl Measured {
    fn sorted_meta(&self) -> u64 {
        self.cp_pack + self.sit + self.nat + self.ssa
    }

    fn nodes_per_cp(&self) -> String {
        if self.cps == 0 {
            return "-".into();
        }
        format!("{:.3}", self.nodes as f64 / self.cps as f64)
    }
}

/// Check every mix; returns the `cp-anatomy` lines (PASS or FAIL each), also in `lines`.
pub fn check(
    label: &str,
    dir: &Path,
    nodescope: &Path,
    lines: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    let journal_probed = fs::read_to_string(dir.join("plan.txt")).is_ok_and(|plan| {
        plan.lines()
            .any(|l| l.starts_with("journal ") && l.contains("kprobe"))
    });
    for mix in MIXES {
        let before = failures.len();
        let line = match measure(dir, nodescope, mix) {
            Ok(m) => {
                judge(mix, &m, journal_probed, failures);
                lines.push(format!(
                    "  cp-anat  {mix}: meta cp_pack={} sit={} nat={} ssa={} other={} \
                     (iostat {}); drops={}",
                    m.cp_pack, m.sit, m.nat, m.ssa, m.other_meta, m.meta_delta, m.drops
                ));
                format!(
                    "cp-anatomy {label} {mix} nodes={} cps={} nodes_per_cp={} nat_blocks={} journal={}",
                    m.nodes,
                    m.cps,
                    m.nodes_per_cp(),
                    m.nat,
                    m.journal
                )
            }
            Err(err) => {
                failures.push(format!("cp-anatomy {mix}: {err:#}"));
                format!(
                    "cp-anatomy {label} {mix} nodes=? cps=? nodes_per_cp=? nat_blocks=? journal=?"
                )
            }
        };
        let verdict = if failures.len() == before {
            "PASS"
        } else {
            "FAIL"
        };
        lines.push(format!("{line} {verdict}"));
    }
}

fn judge(mix: &str, m: &Measured, journal_probed: bool, failures: &mut Vec<String>) {
    let mut expect = |ok: bool, what: String| {
        if !ok {
            failures.push(format!("cp-anatomy {mix}: {what}"));
        }
    };
    expect(m.cps > 0, "no checkpoint completed".into());
    expect(
        m.cps == m.cp_delta,
        format!(
            "checkpoints {} != debugfs CP count delta {}",
            m.cps, m.cp_delta
        ),
    );
    expect(
        m.nodes == m.node_delta && m.nodes > 0,
        format!(
            "node writes {} != iostat node write delta {}",
            m.nodes, m.node_delta
        ),
    );
    expect(
        m.sorted_meta() == m.meta_delta && m.other_meta == 0,
        format!(
            "meta blocks by area {} (+{} unsorted) != iostat meta write delta {}",
            m.sorted_meta(),
            m.other_meta,
            m.meta_delta
        ),
    );
    expect(m.drops == 0, format!("{} events lost", m.drops));
    if journal_probed {
        expect(
            m.journal > 0,
            "the journal kprobe was attached but no NAT entry went to the journal".into(),
        );
    }
}

fn measure(dir: &Path, nodescope: &Path, mix: &str) -> Result<Measured> {
    let rc = fs::read_to_string(dir.join(format!("cpanat_{mix}.rc")))
        .with_context(|| format!("no exit status of the {mix} recording"))?;
    anyhow::ensure!(
        rc.trim() == "0",
        "nodescope record ended with {}",
        rc.trim()
    );
    let recording = dir.join(format!("cpanat_{mix}.nsr"));
    let report = run_report(nodescope, &recording, true)?;
    fs::write(dir.join(format!("cpanat_{mix}-report.json")), &report)?;
    let text = run_report(nodescope, &recording, false)?;
    fs::write(dir.join(format!("cpanat_{mix}-report.txt")), &text)?;
    let json = serde_json::from_str::<Value>(report.trim())
        .context("nodescope report --json: not JSON")?;
    let summary = &json["checkpoints"]["summary"];
    let mut m = Measured {
        cps: summary["count"].as_u64().unwrap_or(0),
        nodes: summary["node_blocks"].as_u64().unwrap_or(0),
        cp_pack: summary["cp_blocks"].as_u64().unwrap_or(0),
        sit: summary["sit_blocks"].as_u64().unwrap_or(0),
        nat: summary["nat_blocks"].as_u64().unwrap_or(0),
        ssa: summary["ssa_blocks"].as_u64().unwrap_or(0),
        other_meta: summary["other_meta_blocks"].as_u64().unwrap_or(0),
        journal: summary["nat_journal"].as_u64().unwrap_or(0),
        drops: json["drops"].as_u64().unwrap_or(0),
        ..Measured::default()
    };
    table_matches(&text, &m)?;
    let counters = |when: &str| -> Result<(u64, u64, u64)> {
        let label = format!("cpanat_{mix}_{when}");
        let iostat = fs::read_to_string(dir.join(format!("iostat_{label}.txt")))
            .with_context(|| format!("no iostat_info copy for {label}"))?;
        let status = fs::read_to_string(dir.join(format!("status_{label}.txt")))
            .with_context(|| format!("no debugfs status copy for {label}"))?;
        let cps = cp_count(&status).with_context(|| format!("no CP count in {label}"))?;
        let nodes = write_blocks(&iostat, &NODE_WRITE_ROWS)
            .with_context(|| format!("no node write rows in iostat_{label}"))?;
        let meta = write_blocks(&iostat, &["fs meta:", "fs cp meta:"])
            .with_context(|| format!("no meta write rows in iostat_{label}"))?;
        Ok((cps, nodes, meta))
    };
    let (before, after) = (counters("before")?, counters("after")?);
    m.cp_delta = after.0.saturating_sub(before.0);
    m.node_delta = after.1.saturating_sub(before.1);
    m.meta_delta = after.2.saturating_sub(before.2);
    Ok(m)
}

fn run_report(nodescope: &Path, recording: &Path, json: bool) -> Result<String> {
    let mut command = std::process::Command::new(nodescope);
    command.arg("report");
    if json {
        command.arg("--json");
    }
    let output = command
        .arg(recording)
        .output()
        .context("running nodescope report")?;
    anyhow::ensure!(
        output.status.success(),
        "nodescope report {}: {}",
        recording.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The text report shows the seed's table with the very figures of its JSON.
fn table_matches(text: &str, m: &Measured) -> Result<()> {
    let mut rows = text.lines().skip_while(|l| l.trim() != "checkpoints:");
    let header = rows
        .nth(1)
        .context("the text report has no checkpoint table")?;
    anyhow::ensure!(
        header.split_whitespace().collect::<Vec<_>>()
            == [
                "node",
                "num",
                "cp",
                "count",
                "nodes/cp",
                "nat",
                "blocks",
                "nat/cp",
                "journal",
                "journal/cp"
            ],
        "the checkpoint table's header is {header:?}"
    );
    let figures: Vec<String> = rows
        .next()
        .context("the checkpoint table has no figures")?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let want = [
        m.nodes.to_string(),
        m.cps.to_string(),
        m.nodes_per_cp(),
        m.nat.to_string(),
    ];
    anyhow::ensure!(
        figures.len() == 7
            && figures[..3] == want[..3]
            && figures[3] == want[3]
            && figures[5] == m.journal.to_string(),
        "the checkpoint table shows {figures:?}, the JSON says {want:?} journal {}",
        m.journal
    );
    Ok(())
}

/// The sum of iostat_info's [WRITE] rows `names`, in blocks: their count column when the
/// kernel prints one (io_bytes count avg_bytes), else bytes / 4096 (6.1).
/// iostat's [WRITE] rows of node blocks: every node write, checkpoint's and GC's included.
pub const NODE_WRITE_ROWS: [&str; 3] = ["fs node:", "fs gc node:", "fs cp node:"];

pub fn write_blocks(iostat: &str, names: &[&str]) -> Option<u64> {
    let section = iostat.split("[WRITE]").nth(1)?.split("[READ]").next()?;
    let mut total = 0;
    for name in names {
        let row = section.lines().find_map(|l| l.trim().strip_prefix(name))?;
        let numbers: Vec<u64> = row
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        total += match numbers.as_slice() {
            [_, count, ..] => *count,
            [bytes] => bytes / 4096,
            _ => return None,
        };
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IOSTAT_6_1: &str = "time:\t\t1796074618\n[WRITE]\nfs data:\t\t25976832\n\
        fs node:\t\t1196032\nfs meta:\t\t49152\nfs gc data:\t\t0\nfs gc node:\t\t0\n\
        fs cp data:\t\t12288\nfs cp node:\t\t135413760\nfs cp meta:\t\t778240\n[READ]\n\
        fs node:\t\t136331264\nfs meta:\t\t421888\n";
    const IOSTAT_6_12: &str = "time:\t\t1\n\t\t\tio_bytes count avg_bytes\n[WRITE]\n\
        fs node:                1191936          291              4096\n\
        fs meta:                49152            12               4096\n\
        fs gc node:             0                0                0\n\
        fs cp node:             135421952        33062            4096\n\
        fs cp meta:             778240           190              4096\n\
        [READ]\nfs node:                136331264        33284            4096\n";

    #[test]
    fn iostat_write_rows_in_blocks_on_both_kernels() {
        let nodes = ["fs node:", "fs gc node:", "fs cp node:"];
        let meta = ["fs meta:", "fs cp meta:"];
        assert_eq!(write_blocks(IOSTAT_6_1, &nodes), Some(292 + 33060));
        assert_eq!(write_blocks(IOSTAT_6_1, &meta), Some(12 + 190));
        assert_eq!(write_blocks(IOSTAT_6_12, &nodes), Some(291 + 33062));
        assert_eq!(write_blocks(IOSTAT_6_12, &meta), Some(202));
        assert_eq!(write_blocks("[READ]\nfs node: 1\n", &nodes), None);
    }

    #[test]
    fn the_verdict_wants_every_equality() {
        let good = Measured {
            cps: 3,
            nodes: 40,
            cp_pack: 9,
            sit: 2,
            nat: 3,
            ssa: 1,
            journal: 5,
            cp_delta: 3,
            node_delta: 40,
            meta_delta: 15,
            ..Measured::default()
        };
        let mut failures = Vec::new();
        judge("default", &good, true, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        for broken in [
            Measured {
                cp_delta: 4,
                ..good
            },
            Measured {
                node_delta: 41,
                ..good
            },
            Measured {
                other_meta: 1,
                meta_delta: 16,
                ..good
            },
            Measured { journal: 0, ..good },
            Measured { drops: 1, ..good },
        ] {
            let mut failures = Vec::new();
            judge("default", &broken, true, &mut failures);
            assert_eq!(failures.len(), 1, "{broken:?}: {failures:?}");
        }
    }
}
