//! `nodescope report --compare`'s text: the cover letter's comparison of two runs.
use std::fmt::Write as _;

use tracer_common::text::escape_name;

use crate::model::comparison::{Comparison, Pair, TimedPair};

/// A timed figure's side: "n/a" where the run has none.
fn side(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".into(), |v| v.to_string())
}

fn timed_change(pair: &TimedPair) -> String {
    match (pair.change_percent, &pair.not_compared) {
        (Some(p), _) => format!("{p:+.2}%"),
        (None, Some(_)) => "n/a".into(),
        (None, None) => "-".into(),
    }
}

fn timed_row(out: &mut String, name: &str, pair: &TimedPair) {
    let _ = writeln!(
        out,
        "{name:<24} {:>14} {:>14} {:>10}",
        side(pair.off),
        side(pair.on),
        timed_change(pair)
    );
}

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
        timed_row(&mut out, "timed lookups", &l.lookups);
        timed_row(&mut out, "wait ns", &l.wait_ns);
        timed_row(&mut out, "median lookup ns", &l.median_lookup_ns);
        timed_row(&mut out, "median node ns", &l.median_node_ns);
        if let Some(why) = &l.lookups.not_compared {
            let _ = writeln!(out, "(n/a: {why}: nothing to compare)");
        }
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
            .filter(|a| a.lookups.off.unwrap_or(0) + a.lookups.on.unwrap_or(0) > 0)
            .collect();
        if !waits.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<32} {:>12} {:>12} {:>10}",
                "APP", "WAIT MS OFF", "WAIT MS ON", "CHANGE"
            );
            let ms = |ns: Option<u64>| {
                ns.map_or_else(|| "n/a".into(), |ns| format!("{:.3}", ns as f64 / 1e6))
            };
            for app in waits {
                let _ = writeln!(
                    out,
                    "{:<32} {:>12} {:>12} {:>10}",
                    escape_name(&app.app),
                    ms(app.wait_ns.off),
                    ms(app.wait_ns.on),
                    timed_change(&app.wait_ns)
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
