//! `nodescope sim`'s tables: a scenario's off/on comparison and a static run's totals.
use std::fmt::Write as _;

use sim::scenario::{
    android::{AndroidReport, AndroidSide},
    vm_replay::{VmReplayReport, BUDGET_BYTES},
    RunTotals,
};

/// 12345678 -> "12,345,678".
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(fraction: f64) -> String {
    format!("{:.3} %", fraction * 100.0)
}

pub(crate) fn vm_replay_table(r: &VmReplayReport, seed: u64) -> String {
    let mut s = String::new();
    let (n, m) = (&r.equal_nodes, &r.equal_memory);
    let _ = writeln!(
        s,
        "vm-replay: the RFC's VM replay, modelled (seed {seed}); RFC figures in brackets\n"
    );
    let _ = writeln!(s, "Equal node count");
    let _ = writeln!(
        s,
        "  {:<16} {:>17} {:>8} {:>11}",
        "mode", "attributed bytes", "nodes", "bytes/node"
    );
    for (mode, side, rfc) in [
        ("compression off", n.off, "69,792,344"),
        ("compression on", n.on, "6,008,152"),
    ] {
        let per_node = side.bytes as f64 / side.nodes.max(1) as f64;
        let _ = writeln!(
            s,
            "  {mode:<16} {:>17} {:>8} {per_node:>11.1}   [{rfc}]",
            thousands(side.bytes),
            thousands(side.nodes)
        );
    }
    let _ = writeln!(
        s,
        "  memory reduction: {}   [91.391 %]\n",
        percent(n.memory_reduction)
    );
    let _ = writeln!(s, "Equal memory (budget {} bytes)", thousands(BUDGET_BYTES));
    let _ = writeln!(
        s,
        "  {:<16} {:>17} {:>8} {:>26} {:>9} {:>11}",
        "mode", "attributed bytes", "nodes", "node reads (count / bytes)", "restores", "retrievals"
    );
    for (mode, side) in [("compression off", m.off), ("compression on", m.on)] {
        let reads = format!(
            "{} / {}",
            thousands(side.node_reads),
            thousands(side.node_reads * 4096)
        );
        let _ = writeln!(
            s,
            "  {mode:<16} {:>17} {:>8} {reads:>26} {:>9} {:>11}",
            thousands(side.bytes),
            thousands(side.nodes),
            thousands(side.restores),
            thousands(side.retrievals)
        );
    }
    let _ = writeln!(s, "  [RFC: off 3,199,800 bytes, 760 nodes, 15,668 reads; on 3,207,992 bytes, 9,208 nodes, 7,209 reads, 9,175 restores]");
    let _ = writeln!(
        s,
        "  retained-node ratio: {:.3}x   [12.116x]",
        m.retained_ratio
    );
    let _ = writeln!(
        s,
        "  node reads: -{}   [-53.989 %]",
        percent(m.read_reduction)
    );
    let replay_files = r.off.phase("replay").map_or(0, |p| p.totals.cache.lookups);
    for (mode, side) in [("off", m.off), ("on", m.on)] {
        let _ = writeln!(
            s,
            "  {mode}: restores {} + node reads {} = {} retrievals; raw hits {} (of {} files)",
            thousands(side.restores),
            thousands(side.node_reads),
            thousands(side.restores + side.node_reads),
            thousands(replay_files - side.retrievals),
            thousands(replay_files)
        );
    }
    let _ = writeln!(
        s,
        "\nCompressed slots at the equal-node point: 256 B {}, 512 B {}, 1024 B {}",
        thousands(r.slots.b256.into()),
        thousands(r.slots.b512.into()),
        thousands(r.slots.b1024.into())
    );
    s
}

pub(crate) fn android_table(r: &AndroidReport, seed: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "android-launch: 18 apps, seed pass, 1 GiB pressure 30 s, two measured passes (seed \
         {seed}, {} image)\n",
        r.image
    );
    let _ = writeln!(
        s,
        "Final snapshot            {:>14} {:>14} {:>9}",
        "off", "on", "change"
    );
    let row = |s: &mut String, name: &str, get: fn(&AndroidSide) -> u64| {
        let (off, on) = (get(&r.off), get(&r.on));
        let change = if off == 0 {
            String::from("-")
        } else {
            format!("{:+.2} %", (on as f64 / off as f64 - 1.0) * 100.0)
        };
        let _ = writeln!(
            s,
            "  {name:<23} {:>14} {:>14} {change:>9}",
            thousands(off),
            thousands(on)
        );
    };
    row(&mut s, "attached node entries", |x| x.attached_entries);
    row(&mut s, "compressed entries", |x| x.compressed_entries);
    row(&mut s, "attached raw bytes", |x| x.raw_bytes);
    row(&mut s, "compressed slot bytes", |x| x.slot_bytes);
    row(&mut s, "node-cache logical bytes", |x| x.logical_bytes);
    row(&mut s, "FS_NODE_READ_IO", |x| x.node_reads);
    row(&mut s, "conversions", |x| x.conversions);
    row(&mut s, "restores", |x| x.restores);
    let slots = r.on.slots;
    let total = f64::from((slots.b256 + slots.b512 + slots.b1024).max(1));
    let _ = writeln!(
        s,
        "\nCompressed entries by slot (on): 256 B {} ({:.2} %), 512 B {} ({:.2} %), 1024 B {} ({:.2} %)",
        slots.b256,
        f64::from(slots.b256) * 100.0 / total,
        slots.b512,
        f64::from(slots.b512) * 100.0 / total,
        slots.b1024,
        f64::from(slots.b1024) * 100.0 / total
    );
    let _ = writeln!(s, "[RFC means: entries +74.59 %, raw bytes -38.46 %, logical bytes -21.45 %, node reads -7.09 %]");
    s
}

pub(crate) fn totals_table(t: &RunTotals) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: threshold {} %, interval {} ms, seed {}",
        t.scenario, t.knobs.threshold, t.knobs.interval_ms, t.seed
    );
    let _ = writeln!(
        s,
        "  {:<10} {:>9} {:>10} {:>10} {:>9} {:>11} {:>9} {:>14}",
        "phase",
        "seconds",
        "lookups",
        "node reads",
        "restores",
        "conversions",
        "reclaims",
        "end bytes"
    );
    for phase in &t.phases {
        let p = &phase.totals;
        let _ = writeln!(
            s,
            "  {:<10} {:>9.1} {:>10} {:>10} {:>9} {:>11} {:>9} {:>14}",
            phase.name,
            p.duration_ns as f64 / 1e9,
            thousands(p.cache.lookups),
            thousands(p.node_reads),
            thousands(p.events().restores),
            thousands(p.events().conversions),
            thousands(p.events().reclaims.total()),
            thousands(phase.end.memory.attributed_bytes)
        );
    }
    let _ = writeln!(
        s,
        "  attributed memory: mean {} bytes, peak {} bytes",
        thousands(t.mean_attributed_bytes),
        thousands(t.peak_attributed_bytes)
    );
    s
}
