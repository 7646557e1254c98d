//! The JSON of the counter set (`tracer_common::activity::Counters`, the one the model, the
//! simulator and the views share).
use serde_json::{json, Value};
use tracer_common::{
    activity::{Counters, LatencyHistogram, PerReason, Retrievals},
    Outcome, RESTORE_FAIL_REASONS, SECOND_CHANCE_REASONS,
};

/// The JSON of `c`, as `stream --json` prints a window's `totals` and `cumulative` and
/// `report --json` its `totals` (docs/STREAM.md): reasons by name, the latency histogram with
/// its quantiles.
pub(crate) fn json(c: &Counters) -> Value {
    json!({
        "node_reads": c.node_reads(),
        "node_reads_demand": c.node_reads_demand,
        "node_reads_readahead": c.node_reads_readahead,
        "node_writes": c.node_writes,
        "checkpoints": c.checkpoints,
        "restores": c.restores,
        "restore_latency": latency(&c.restore_latency),
        "restore_fails": c.restore_fails,
        "restore_fail_reasons": reasons(&c.restore_fail_reasons, &RESTORE_FAIL_REASONS),
        "restore_nomem": c.restore_nomem,
        "hit_ratio": c.hit_ratio(),
        "conversions": c.conversions,
        "convert_rejects": c.convert_rejects,
        "convert_aborts": c.convert_aborts,
        "reclaims": c.reclaims,
        "second_chances": c.second_chances,
        "second_chance_reasons": reasons(&c.second_chance_reasons, &SECOND_CHANCE_REASONS),
        "inserts": c.inserts,
        "forgets": c.forgets,
        "retrievals": retrievals(&c.retrievals),
    })
}

/// Timed node lookups (issue 51): `{"count": N, "wait_ns": N, "node_reads": N (the demand
/// node reads the lookups submitted themselves), "latency": <histogram of all>, "device":
/// <histogram of the reads' device time, block layer issue to completion, where measured>,
/// "hit": <histogram>, "restore": .., "disk_read": .., "waited": .., "error": ..}`, each
/// histogram as `restore_latency`'s. Every lookup is in one outcome: the outcomes' counts sum
/// to `count`, their `total_ns` to `wait_ns`.
pub(crate) fn retrievals(r: &Retrievals) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("count".into(), r.count().into());
    map.insert("wait_ns".into(), r.wait_ns().into());
    map.insert("node_reads".into(), r.node_reads.into());
    map.insert("latency".into(), latency(&r.all()));
    map.insert("device".into(), latency(&r.device()));
    for outcome in Outcome::ALL {
        map.insert(outcome.name().into(), latency(&r.get(outcome)));
    }
    Value::Object(map)
}

/// `{"count": N, "total_ns": N, "mean_ns": N|null, "p50_ns": N|null, "p99_ns": N|null,
/// "log2_ns": {"<bucket's lower bound>": count, ...}}`: the quantiles are their bucket's upper
/// bound; only non-empty buckets are listed.
pub(crate) fn latency(h: &LatencyHistogram) -> Value {
    let mut buckets = serde_json::Map::new();
    for (i, &n) in h.log2_ns.iter().enumerate() {
        if n > 0 {
            buckets.insert((1u64 << i).to_string(), n.into());
        }
    }
    json!({
        "count": h.count,
        "total_ns": h.total_ns,
        "mean_ns": h.mean_ns(),
        "p50_ns": h.quantile_bound_ns(0.5),
        "p99_ns": h.quantile_bound_ns(0.99),
        "log2_ns": buckets,
    })
}

/// `{"<reason>": count, ..., "unknown": count}`.
fn reasons(counts: &PerReason, names: &[(u8, &str)]) -> Value {
    let mut map = serde_json::Map::new();
    for &(code, name) in names {
        map.insert(name.to_string(), counts.get(code).into());
    }
    map.insert("unknown".to_string(), counts.get(0).into());
    Value::Object(map)
}
