use super::*;

#[test]
fn schema_lists_nested_fields_and_tells_lines_apart() {
    let kernel = serde_json::from_str::<Value>(
        r#"{"t":1,"totals":{"node_reads":3},"processes":[{"pid":1}],"devices":[],"rfc":null}"#,
    )
    .unwrap();
    let sim = serde_json::from_str::<Value>(
        r#"{"t":1,"totals":{"node_reads":3},"processes":[{"pid":2}],"devices":[],"rfc":null}"#,
    )
    .unwrap();
    assert_eq!(
        schema(&kernel),
        [
            "processes",
            "processes[].pid",
            "rfc",
            "t",
            "totals",
            "totals.node_reads",
            "devices"
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    assert_eq!(schema(&kernel), schema(&sim));
    let older =
        serde_json::from_str::<Value>(r#"{"t":1,"totals":{"node_reads":3},"events":4}"#).unwrap();
    assert_ne!(schema(&kernel), schema(&older));
}
