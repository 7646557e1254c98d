//! `nodescope report`'s text.
use std::fmt::Write as _;

use tracer_common::{
    activity::Retrievals, text::escape_name, Outcome, RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS,
};

use crate::{
    model::{node_types::NodeTypeReads, recording::Report, LatencyHistogram, PerReason},
    view::checkpoint_table,
};

/// `worker 3 shrinker 0 race 1`, with `unknown N` only when there are some.
fn by_reason(counts: &PerReason, names: &[(u8, &str)]) -> String {
    let mut words: Vec<String> = names
        .iter()
        .map(|&(code, name)| format!("{name} {}", counts.get(code)))
        .collect();
    if counts.get(0) > 0 {
        words.push(format!("unknown {}", counts.get(0)));
    }
    words.join(" ")
}

/// `count N mean X us p50 <= Y us p99 <= Z us` of one histogram.
fn latency_words(h: &LatencyHistogram) -> String {
    let micros =
        |ns: Option<u64>| ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e3));
    format!(
        "{} mean {} us p50 <= {} us p99 <= {} us",
        h.count,
        micros(h.mean_ns()),
        micros(h.quantile_bound_ns(0.5)),
        micros(h.quantile_bound_ns(0.99))
    )
}

/// Timed node lookups (issue 51): one line per outcome, and the time waited in all.
fn retrievals(r: &Retrievals) -> String {
    let mut out = format!(
        "node lookups timed {}, waited {:.3} ms in all:\n",
        r.count(),
        r.wait_ns() as f64 / 1e6
    );
    for outcome in Outcome::ALL {
        let _ = writeln!(
            out,
            "  {:<10} {}",
            outcome.name(),
            latency_words(&r.get(outcome))
        );
    }
    if r.device.count > 0 {
        let _ = writeln!(
            out,
            "  device time of the reads (block layer issue to completion): {}",
            latency_words(&r.device())
        );
    }
    out
}

/// Node reads per node type: demand, readahead and the share of all node reads.
fn node_types(types: &NodeTypeReads) -> String {
    let mut out = format!(
        "node reads by node type (from {}):\n",
        escape_name(&types.image)
    );
    let all = types.counts.total();
    for (of_type, reads) in types.counts.rows() {
        if of_type.is_none() && reads.total() == 0 {
            continue;
        }
        let name = crate::model::node_types::shown_name(of_type);
        let share = match all {
            0 => "-".to_string(),
            _ => format!("{:.1} %", reads.total() as f64 * 100.0 / all as f64),
        };
        let _ = writeln!(
            out,
            "  {name:<16} {:>9} demand {:>9} readahead {share:>8}",
            reads.demand, reads.readahead
        );
    }
    out
}

/// The report as text. Everything the recording names (its host, kernel and source, the
/// apps, the notes) is escaped as a name ([`escape_name`]): a file can say anything, and a
/// newline in a comm must not print as a line of the report.
pub(crate) fn render(report: &Report) -> String {
    let mut out = String::new();
    let h = &report.header;
    let t = &report.totals;
    let _ = writeln!(
        out,
        "recording: {} on {} ({}), {:.1} s",
        escape_name(&h.source),
        escape_name(&h.host),
        escape_name(&h.kernel),
        report.time_range.seconds
    );
    let _ = writeln!(
        out,
        "node reads {} (demand {}, readahead {})  restores {}  hit ratio {}  conversions {}  lost {}",
        t.node_reads(),
        t.node_reads_demand,
        t.node_reads_readahead,
        t.restores,
        report.hit_ratio.map_or_else(|| "-".into(), |r| format!("{:.1}%", r * 100.0)),
        t.conversions,
        report.drops
    );
    let r = &t.reclaims;
    let _ = writeln!(
        out,
        "reclaims raw {} 256 {} 512 {} 1024 {}",
        r.raw, r.b256, r.b512, r.b1024
    );
    let l = &t.restore_latency;
    let micros =
        |ns: Option<u64>| ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e3));
    let _ = writeln!(
        out,
        "restore latency: {} timed, mean {} us, p50 <= {} us, p99 <= {} us",
        l.count,
        micros(l.mean_ns()),
        micros(l.quantile_bound_ns(0.5)),
        micros(l.quantile_bound_ns(0.99))
    );
    if t.retrievals.count() > 0 {
        out.push_str(&retrievals(&t.retrievals));
    }
    let _ = writeln!(
        out,
        "restore failures {} ({})  restore nomem {}",
        t.restore_fails,
        by_reason(&t.restore_fail_reasons, &RESTORE_FAIL_REASONS),
        t.restore_nomem
    );
    let _ = writeln!(
        out,
        "second chances {} ({})",
        t.second_chances.total(),
        by_reason(&t.second_chance_reasons, &SECOND_CHANCE_REASONS)
    );
    let m = &report.slot_mix;
    let _ = writeln!(
        out,
        "slot mix of conversions: 256 {} 512 {} 1024 {}",
        m.b256, m.b512, m.b1024
    );
    for (dev, d) in &report.devices {
        let per = d
            .node_writes_per_checkpoint
            .map_or_else(|| "-".into(), |v| format!("{v:.1}"));
        let _ = write!(
            out,
            "device {dev}: checkpoints {} node writes {} per checkpoint {per}",
            d.checkpoints, d.node_writes
        );
        if d.node_accesses + d.node_evictions > 0 {
            let _ = write!(
                out,
                " node accesses {} node evictions {}",
                d.node_accesses, d.node_evictions
            );
        }
        if d.inode_evictions > 0 {
            let _ = write!(out, " inode evictions {}", d.inode_evictions);
        }
        out.push('\n');
    }
    if let Some(types) = &report.node_types {
        out.push_str(&node_types(types));
    }
    out.push_str(&checkpoint_table::render(&report.checkpoints));
    let _ = writeln!(
        out,
        "\n{:<32} {:>8} {:>8} {:>9} {:>6} {:>8}",
        "APP", "READS", "RA", "RESTORES", "HIT%", "CONV"
    );
    for app in &report.apps {
        let a = &app.total;
        let hit = a
            .hit_ratio()
            .map_or_else(|| "-".into(), |r| format!("{:.1}", r * 100.0));
        let name = crate::view::tui::label(&app.app);
        let _ = writeln!(
            out,
            "{name:<32} {:>8} {:>8} {:>9} {hit:>6} {:>8}",
            a.node_reads_demand, a.node_reads_readahead, a.restores, a.conversions
        );
    }
    if t.retrievals.count() > 0 {
        let _ = writeln!(
            out,
            "\n{:<32} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "APP", "LOOKUPS", "WAIT_MS", "DISK", "RESTORE", "P50_US", "P99_US"
        );
        let mut apps: Vec<_> = report.apps.iter().collect();
        apps.sort_by(|a, b| {
            b.total
                .retrievals
                .wait_ns()
                .cmp(&a.total.retrievals.wait_ns())
                .then(a.app.cmp(&b.app))
        });
        let micros =
            |ns: Option<u64>| ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e3));
        for app in apps {
            let r = &app.total.retrievals;
            if r.count() == 0 {
                continue;
            }
            let all = r.all();
            let _ = writeln!(
                out,
                "{:<32} {:>8} {:>10.3} {:>9} {:>9} {:>9} {:>9}",
                crate::view::tui::label(&app.app),
                r.count(),
                r.wait_ns() as f64 / 1e6,
                r.get(Outcome::DiskRead).count,
                r.get(Outcome::Restore).count,
                micros(all.quantile_bound_ns(0.5)),
                micros(all.quantile_bound_ns(0.99)),
            );
        }
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nknob changes and controller decisions:");
        for note in &report.notes {
            let _ = writeln!(
                out,
                "  {:>10.3}s {}: {}",
                note.ts_ns.saturating_sub(h.clock_origin_ns) as f64 / 1e9,
                escape_name(&note.kind),
                escape_name(&note.text)
            );
        }
        if report.notes_omitted > 0 {
            let _ = writeln!(out, "  ... and {} more", report.notes_omitted);
        }
    }
    out
}
