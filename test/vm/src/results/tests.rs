use super::*;

#[test]
fn reads_the_read_section_fs_node_row() {
    let iostat = "time:\t\t1\n\t\t\tio_bytes\tcount\tavg_bytes\n[WRITE]\nfs node:    8192  2  4096\n[READ]\napp buffered data: 1 1 1\nfs node:    69189632  16892  4096\n";
    assert_eq!(fs_node_reads(iostat), Some(16892));
    assert_eq!(fs_node_reads("[READ]\nfs node: 8192\n"), Some(2));
    assert_eq!(fs_node_reads("[WRITE]\nfs node: 1 1 1\n"), None);
}

#[test]
fn reads_hits_from_a_hist_trigger() {
    let hist = "# event histogram\n\n{ common_type: 1745 } hitcount: 3126\n\nTotals:\n    Hits: 3126\n    Entries: 1\n    Dropped: 0\n";
    assert_eq!(hist_hits(hist), Some(3126));
    assert_eq!(hist_hits(""), None);
}

#[test]
fn prefers_cp_count_over_cp_calls() {
    assert_eq!(cp_count("CP calls: 7 (BG: 1)\nCP count: 5\n"), Some(5));
    assert_eq!(cp_count("\nCP calls: 3 (BG: 0)\n"), Some(3));
    assert_eq!(cp_count("nothing"), None);
}

/// A stream line's counts are read as integers: one past 2^53 (no f64 holds it) stays exact,
/// and a missing field counts 0.
#[test]
fn a_stream_lines_counts_stay_exact_past_2_to_the_53() {
    let line = serde_json::from_str::<Value>(
        r#"{"t":1.5,"events":9007199254740993,"processes":[{"pid":7,"comm":"kworker/u4:1\u0021",
            "node_reads_demand":18446744073709551615,"x":null,"ok":true}],"devices":[]}"#,
    )
    .unwrap();
    let mut phase = Phase::default();
    phase.add_line(&line);
    assert_eq!(phase.events, 9_007_199_254_740_993);
    assert_eq!(phase.drops, 0);
    let process = &phase.procs[&7];
    assert_eq!(
        (process.comm.as_str(), process.demand),
        ("kworker/u4:1!", u64::MAX)
    );
}
