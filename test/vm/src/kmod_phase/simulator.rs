//! The simulator beside the kernel (issue 32, point 5): `nodescope sim --scenario vm-replay`
//! (run on the host, sim_vm_replay.json) and the module's run of the same procedure on the same
//! file set (kmod.sh, part 2b: populated under the budget, the budget released, one replay of
//! the 16,384 small files in creation order). Reported with the errors of the simulator's
//! figures against the module's, not a check: the two budgets differ (the simulator's 3 MiB,
//! the module's 3,200,000 bytes) and so does how the budget is reached (the simulator squeezes
//! a full cache, the module holds the budget while the cache fills).
use std::{fs, path::Path};

use serde_json::Value;

use super::counters::{iostat_reads, ModuleCounters};
use super::whatif::{error, shown};

/// The replay's files: one retrieval each.
const REPLAY_FILES: u64 = 16_384;

/// One side's figures at the equal-memory point and over the replay.
#[derive(Debug, PartialEq)]
struct Side {
    nodes: u64,
    bytes: u64,
    node_reads: u64,
    restores: u64,
}

impl Side {
    fn of_simulator(json: &Value, mode: &str) -> Side {
        let side = &json["equal_memory"][mode];
        Side {
            nodes: side["nodes"].as_u64().unwrap_or(0),
            bytes: side["bytes"].as_u64().unwrap_or(0),
            node_reads: side["node_reads"].as_u64().unwrap_or(0),
            restores: side["restores"].as_u64().unwrap_or(0),
        }
    }

    fn of_module(dir: &Path, mode: &str) -> anyhow::Result<Side> {
        let before = ModuleCounters::read(dir, &format!("released_{mode}_before"))?;
        let after = ModuleCounters::read(dir, &format!("released_{mode}_after"))?;
        let reads = iostat_reads(dir, &format!("released_{mode}_after"))?
            .saturating_sub(iostat_reads(dir, &format!("released_{mode}_before"))?);
        Ok(Side {
            nodes: before.get("entries"),
            bytes: before.get("attributed_bytes"),
            node_reads: reads,
            restores: after.delta(&before, "restores"),
        })
    }
}

/// The lines of the side-by-side table; a missing side is a problem (the run did not happen).
pub(super) fn simulator_lines(dir: &Path, problems: &mut Vec<String>, lines: &mut Vec<String>) {
    let text = fs::read_to_string(dir.join("sim_vm_replay.json")).unwrap_or_default();
    let sim = match serde_json::from_str::<Value>(text.trim()) {
        Ok(sim) => sim,
        Err(e) => {
            problems.push(format!("simulator: sim_vm_replay.json: {e:#}"));
            return;
        }
    };
    lines.push(
        "  the simulator's procedure (budget released, one creation-order replay): simulator / \
         module (error of the simulator)"
            .into(),
    );
    for mode in ["off", "on"] {
        let module = match Side::of_module(dir, mode) {
            Ok(module) => module,
            Err(e) => {
                problems.push(format!("simulator: the module's {mode} run: {e:#}"));
                return;
            }
        };
        let simulated = Side::of_simulator(&sim, mode);
        let pair = |s: u64, m: u64| format!("{s} / {m} ({})", shown(error(s, m)));
        let hits = |side: &Side| REPLAY_FILES.saturating_sub(side.node_reads + side.restores);
        lines.push(format!(
            "    {mode:<3} retained {}, attributed {}, node reads {}, restores {}, raw hits {}",
            pair(simulated.nodes, module.nodes),
            pair(simulated.bytes, module.bytes),
            pair(simulated.node_reads, module.node_reads),
            pair(simulated.restores, module.restores),
            pair(hits(&simulated), hits(&module)),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_are_set_beside_each_other_with_the_simulators_error() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        let iostat = |reads: u64| format!("[READ]\nfs node:  {} {reads}\n", reads * 4096);
        let mut problems = Vec::new();
        let mut lines = Vec::new();
        simulator_lines(dir.path(), &mut problems, &mut lines);
        assert!(
            problems[0].starts_with("simulator: sim_vm_replay.json"),
            "{problems:?}"
        );
        write(
            "sim_vm_replay.json",
            r#"{"equal_memory":{"off":{"bytes":3000,"nodes":750,"node_reads":15600,"restores":0},
                "on":{"bytes":3100,"nodes":9000,"node_reads":7400,"restores":8900}}}"#,
        );
        for (mode, entries, reads, restores) in
            [("off", 760, 15_000, 0), ("on", 9_000, 8_000, 8_000)]
        {
            write(
                &format!("nc_released_{mode}_before.txt"),
                &format!("entries {entries}\nattributed_bytes 3000\nrestores 5\n"),
            );
            write(
                &format!("nc_released_{mode}_after.txt"),
                &format!("entries 1\nattributed_bytes 1\nrestores {}\n", restores + 5),
            );
            write(&format!("iostat_released_{mode}_before.txt"), &iostat(100));
            write(
                &format!("iostat_released_{mode}_after.txt"),
                &iostat(100 + reads),
            );
        }
        problems.clear();
        lines.clear();
        simulator_lines(dir.path(), &mut problems, &mut lines);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            lines[1],
            "    off retained 750 / 760 (-1.3 %), attributed 3000 / 3000 (+0.0 %), node reads \
             15600 / 15000 (+4.0 %), restores 0 / 0 (-), raw hits 784 / 1384 (-43.4 %)"
        );
        assert_eq!(
            lines[2],
            "    on  retained 9000 / 9000 (+0.0 %), attributed 3100 / 3000 (+3.3 %), node reads \
             7400 / 8000 (-7.5 %), restores 8900 / 8000 (+11.2 %), raw hits 84 / 384 (-78.1 %)"
        );
    }
}
