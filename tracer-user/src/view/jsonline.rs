//! The per-window JSON line that `stream --json` prints for model-fed sources and `record
//! --json` prints while recording (docs/STREAM.md). The same window gives the same line, so a
//! replay of a recording prints exactly what the live run printed.
use serde_json::{json, Value};

use crate::model::{Counters, ProcessRow, WindowReport};

fn counters(c: &Counters) -> Value {
    json!({
        "node_reads": c.node_reads(),
        "node_reads_demand": c.node_reads_demand,
        "node_reads_readahead": c.node_reads_readahead,
        "node_writes": c.node_writes,
        "checkpoints": c.checkpoints,
        "restores": c.restores,
        "restore_fails": c.restore_fails,
        "restore_nomem": c.restore_nomem,
        "hit_ratio": c.hit_ratio(),
        "conversions": c.conversions,
        "convert_rejects": c.convert_rejects,
        "convert_aborts": c.convert_aborts,
        "reclaims": c.reclaims,
        "second_chances": c.second_chances,
    })
}

fn process(row: &ProcessRow) -> Value {
    let c = &row.counters;
    json!({
        "pid": row.pid,
        "comm": row.comm,
        "uid": row.uid,
        "app": row.app,
        "node_reads_demand": c.node_reads_demand,
        "node_reads_readahead": c.node_reads_readahead,
        "node_writes": c.node_writes,
        "checkpoints": c.checkpoints,
        "restores": c.restores,
        "conversions": c.conversions,
        "reclaims": c.reclaims.total(),
        "second_chances": c.second_chances.total(),
    })
}

/// One line for one closed window. `origin_ns` is the model's window origin.
pub fn window_line(window: &WindowReport, origin_ns: u64) -> Value {
    let busy = |row: &&ProcessRow| row.counters.node_reads() + row.counters.restores;
    let mut rows: Vec<&ProcessRow> = window.processes.iter().collect();
    rows.sort_by(|a, b| busy(b).cmp(&busy(a)).then(a.pid.cmp(&b.pid)));
    json!({
        "t": round_ms(window.end_ns.saturating_sub(origin_ns) as f64 / 1e9),
        "interval_s": round_ms((window.end_ns - window.start_ns) as f64 / 1e9),
        "totals": counters(&window.interval),
        "processes": rows.into_iter().map(process).collect::<Vec<_>>(),
        "cache": window.cache,
        "cumulative": counters(&window.totals),
        "eager_restores": window.eager_restores,
        "drops": window.interval.lost,
    })
}

fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use tracer_common::{Event, EventKind};

    use super::*;
    use crate::model::{Model, ModelConfig};

    #[test]
    fn processes_add_up_to_the_totals() {
        let mut model = Model::new(ModelConfig::default());
        model.start_at(0);
        for (tgid, kind) in [
            (1, EventKind::NodeRead),
            (2, EventKind::NodeRead),
            (2, EventKind::Restore),
        ] {
            model.ingest(&Event {
                kind: kind as u8,
                tgid,
                ts_ns: 5,
                ..Event::ZERO
            });
        }
        model.advance_to(1_000_000_000);
        let line = window_line(&model.take_closed()[0], 0);
        assert_eq!(line["t"], 1.0);
        assert_eq!(line["totals"]["node_reads"], 2);
        assert_eq!(line["totals"]["restores"], 1);
        assert_eq!(line["totals"]["hit_ratio"].as_f64(), Some(1.0 / 3.0));
        let processes = line["processes"].as_array().unwrap();
        assert_eq!(processes[0]["pid"], 2, "busiest first");
        let reads: u64 = processes
            .iter()
            .map(|p| {
                p["node_reads_demand"].as_u64().unwrap()
                    + p["node_reads_readahead"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(reads, 2);
    }
}
