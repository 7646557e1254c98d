//! `nodescope report --compare`'s text: the cover letter's comparison of two runs.
use std::fmt::Write as _;

use tracer_common::text::escape_name;

use crate::model::comparison::{Comparison, Pair};

fn change(pair: &Pair) -> String {
    pair.change_percent
        .map_or_else(|| "-".into(), |p| format!("{p:+.2}%"))
}

fn row(out: &mut String, name: &str, pair: &Pair) {
    let _ = writeln!(
        out,
        "{name:<24} {:>14} {:>14} {:>10}",
        pair.off,
        pair.on,
        change(pair)
    );
}

pub(crate) fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compression off ({:.1} s) against on ({:.1} s)\n",
        c.off_seconds, c.on_seconds
    );
    let _ = writeln!(
        out,
        "{:<24} {:>14} {:>14} {:>10}",
        "", "OFF", "ON", "CHANGE"
    );
    let t = &c.totals;
    row(&mut out, "retained nodes", &t.retained_nodes);
    row(&mut out, "compressed entries", &t.compressed_entries);
    row(&mut out, "attributed bytes", &t.attributed_bytes);
    row(&mut out, "node reads", &t.node_reads);
    row(&mut out, "node read bytes", &t.node_read_bytes);
    row(&mut out, "restores", &t.restores);
    row(&mut out, "conversions", &t.conversions);
    row(&mut out, "reclaims", &t.reclaims);
    if c.cache_partial {
        let _ = writeln!(
            out,
            "(a recording began with entries in the cache it never saw arrive: retained nodes \
             and attributed bytes count only what its events saw; record from an empty cache)"
        );
    }
    if !t.cache_is_derived() {
        let _ = writeln!(
            out,
            "(the 'on' recording has restores but no conversions: its probes do not see the \
             cache fill, so retained nodes and attributed bytes are not the kernel's)"
        );
    }
    if !c.apps.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<32} {:>10} {:>10} {:>10} {:>12}",
            "APP", "READS OFF", "READS ON", "CHANGE", "RESTORES ON"
        );
        for app in &c.apps {
            let _ = writeln!(
                out,
                "{:<32} {:>10} {:>10} {:>10} {:>12}",
                escape_name(&app.app),
                app.node_reads.off,
                app.node_reads.on,
                change(&app.node_reads),
                app.restores.on
            );
        }
    }
    if let Some(l) = &c.latency {
        let _ = writeln!(
            out,
            "\nnode retrieval time (timed lookups){}",
            if l.left_out > 0 {
                format!(" ({} lookups past the bounds left out)", l.left_out)
            } else {
                String::new()
            }
        );
        row(&mut out, "timed lookups", &l.lookups);
        row(&mut out, "wait ns", &l.wait_ns);
        row(&mut out, "median lookup ns", &l.median_lookup_ns);
        row(&mut out, "median node ns", &l.median_node_ns);
        let paired = |change: Option<f64>, pairs: u64, what: &str| {
            change.map_or_else(
                || format!("- (no {what} timed in both)"),
                |p| format!("{p:+.2}% over {pairs} {what}"),
            )
        };
        let _ = writeln!(
            out,
            "paired median change     per node {}; per app (wait) {}",
            paired(l.paired_node_change_percent, l.node_pairs, "nodes"),
            paired(l.paired_app_change_percent, l.app_pairs, "apps")
        );
        let waits: Vec<_> = c
            .apps
            .iter()
            .filter(|a| a.lookups.off + a.lookups.on > 0)
            .collect();
        if !waits.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<32} {:>12} {:>12} {:>10}",
                "APP", "WAIT MS OFF", "WAIT MS ON", "CHANGE"
            );
            for app in waits {
                let _ = writeln!(
                    out,
                    "{:<32} {:>12.3} {:>12.3} {:>10}",
                    escape_name(&app.app),
                    app.wait_ns.off as f64 / 1e6,
                    app.wait_ns.on as f64 / 1e6,
                    change(&app.wait_ns)
                );
            }
        }
    }
    if c.drops.off + c.drops.on > 0 {
        let _ = writeln!(
            out,
            "\nevents lost: {} off, {} on: the figures undercount",
            c.drops.off, c.drops.on
        );
    }
    if !c.complete {
        let _ = writeln!(
            out,
            "\na recording is incomplete: the figures cover what was read"
        );
    }
    out
}
