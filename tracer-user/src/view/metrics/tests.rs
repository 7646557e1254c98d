use tracer_common::{Event, EventKind, FLAG_READAHEAD};

use super::*;
use crate::model::{ModelConfig, Packages};

#[test]
fn exposition_has_per_app_counters_with_labels_and_ends_with_eof() {
    let packages = Packages::parse("com.example.chat 10123 0 /data x 3003\n");
    let mut model = Model::new(ModelConfig {
        packages,
        ..ModelConfig::default()
    });
    let mut read = Event {
        kind: EventKind::NodeRead as u8,
        tgid: 5,
        uid: 10123,
        ..Event::ZERO
    };
    read.comm[..4].copy_from_slice(b"chat");
    for _ in 0..3 {
        model.ingest(&read);
    }
    model.ingest(&Event {
        flags: FLAG_READAHEAD,
        ..read
    });
    model.observe_knobs(Some(tracer_common::knobs::Knobs {
        threshold: 40,
        interval_ms: 1000,
    }));
    let text = render(&model, "sim0");
    assert!(
        text.contains("# TYPE nodescope_node_reads counter\n"),
        "{text}"
    );
    assert!(text.contains(
        "nodescope_node_reads_total{app=\"com.example.chat\",device=\"sim0\",kind=\"demand\"} 3\n"
    ), "{text}");
    assert!(text.contains(
        "nodescope_node_reads_total{app=\"com.example.chat\",device=\"sim0\",kind=\"readahead\"} 1\n"
    ));
    assert!(text.contains("nodescope_knob_threshold_percent{device=\"sim0\"} 40\n"));
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(
        text.matches("# TYPE nodescope_node_reads ").count(),
        1,
        "one header per family"
    );
}

#[test]
fn restore_latency_is_a_cumulative_histogram_in_seconds_with_the_exact_sum() {
    let mut model = Model::new(ModelConfig::default());
    // 1 ns folds into the first bound (1.024 us), 1.5 us twice into [1.024, 2.048) us,
    // 3 s beyond the last bound (1.07 s) into +Inf only.
    for ns in [1, 1_500, 1_500, 3_000_000_000] {
        let mut restore = Event::new(EventKind::Restore, 1);
        restore.latency_ns = ns;
        model.ingest(&restore);
    }
    let text = render(&model, "sim0");
    let name = "nodescope_restore_latency_seconds";
    assert!(
        text.contains(&format!("# TYPE {name} histogram\n")),
        "{text}"
    );
    assert!(text.contains(&format!("# UNIT {name} seconds\n")), "{text}");
    for (le, below) in [
        ("0.000001024", 1),
        ("0.000002048", 3),
        ("0.000004096", 3),
        ("1.073741824", 3),
        ("+Inf", 4),
    ] {
        let line = format!("{name}_bucket{{device=\"sim0\",le=\"{le}\"}} {below}\n");
        assert!(text.contains(&line), "{line} in {text}");
    }
    assert_eq!(text.matches(&format!("{name}_bucket{{")).count(), 22);
    assert!(text.contains(&format!("{name}_count{{device=\"sim0\"}} 4\n")));
    assert!(text.contains(&format!("{name}_sum{{device=\"sim0\"}} 3.000003001\n")));
}

#[test]
fn only_get_metrics_is_served() {
    assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n"), Some(false));
    assert_eq!(route(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"), Some(false));
    assert_eq!(route(b"HEAD /metrics HTTP/1.1\r\n\r\n"), Some(true));
    assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), None);
    assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), None);
    let ok = respond("x 1\n# EOF\n", false);
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.ends_with("x 1\n# EOF\n"));
    assert!(ok.contains(CONTENT_TYPE));
    let head = respond("x 1\n# EOF\n", true);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Length: 10\r\n") && head.ends_with("\r\n\r\n"));
}

#[test]
fn node_reads_by_type_are_a_family_once_the_model_has_an_image() {
    let mut model = Model::new(ModelConfig::default());
    let read = Event::new(EventKind::NodeRead, 1).task(5).nid(7);
    model.ingest(&read);
    assert!(!render(&model, "sim0").contains("nodescope_node_reads_by_type"));
    // A node set without nid 7: its reads count as not in the image.
    let nodes = std::sync::Arc::new(sim::nodes::NodeSet::from_blocks(Vec::new(), false, 0));
    model.classify_node_reads(crate::model::NodeImage {
        nodes,
        name: "empty".into(),
        dev: None,
    });
    model.ingest(&read);
    model.ingest(&read.flags(FLAG_READAHEAD));
    let text = render(&model, "sim0");
    assert_eq!(
        text.matches("# TYPE nodescope_node_reads_by_type counter\n")
            .count(),
        1,
        "{text}"
    );
    for (of_type, kind, value) in [
        ("not_in_image", "demand", 1),
        ("not_in_image", "readahead", 1),
        ("inode", "demand", 0),
        ("double_indirect", "readahead", 0),
    ] {
        let sample = format!(
            "nodescope_node_reads_by_type_total{{device=\"sim0\",type=\"{of_type}\",kind=\"{kind}\"}} {value}\n"
        );
        assert!(text.contains(&sample), "{sample} in:\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
}

/// Issue 52, item 11: a peer's requests beyond its MAX_PER_PEER answers wait for a turn; when
/// none comes within TURN_WAIT, or MAX_WAITING_PER_PEER already wait, the answer is a 503 with
/// Retry-After (after the request was read), never a reset.
#[test]
fn requests_beyond_a_peers_answers_wait_for_a_turn_or_are_told_to_retry() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let peer = PeerTurns::new();
        let mut taken = Vec::new();
        for _ in 0..MAX_PER_PEER {
            taken.push(peer.turn().await.expect("a free turn"));
        }
        // A turn freed within the wait goes to the waiting request.
        let waiter = {
            let peer = Arc::clone(&peer);
            tokio::spawn(async move { peer.turn().await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(peer.waiting.load(Ordering::Relaxed), 1);
        taken.pop();
        assert!(
            waiter.await.unwrap(),
            "the waiting request got the freed turn"
        );
        // Its answer done, the turn is free again: all taken once more.
        taken.push(peer.turn().await.expect("the turn given back"));
        // Past the bound on waiting requests: told at once.
        peer.waiting.store(MAX_WAITING_PER_PEER, Ordering::Relaxed);
        let started = std::time::Instant::now();
        assert!(peer.turn().await.is_none());
        assert!(started.elapsed() < Duration::from_millis(100));
        peer.waiting.store(0, Ordering::Relaxed);
        // No turn within TURN_WAIT: told to retry.
        let started = std::time::Instant::now();
        assert!(peer.turn().await.is_none());
        assert!(started.elapsed() >= TURN_WAIT);
        assert_eq!(peer.waiting.load(Ordering::Relaxed), 0);
    });
    assert!(BUSY.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
    assert!(BUSY.contains("\r\nRetry-After: 1\r\n") && BUSY.ends_with("\r\n\r\n"));
}

/// Issue 51: timed lookups are a histogram family per outcome for the device, and per app
/// the lookups per outcome and the time waited, in seconds to the nanosecond.
#[test]
fn timed_lookups_are_histograms_per_outcome_and_waits_per_app() {
    let packages = Packages::parse("com.example.chat 10123 0 /data x 3003\n");
    let mut model = Model::new(ModelConfig {
        packages,
        ..ModelConfig::default()
    });
    for (outcome, ns) in [
        (tracer_common::RETRIEVAL_HIT, 300),
        (tracer_common::RETRIEVAL_DISK_READ, 90_000),
        (tracer_common::RETRIEVAL_DISK_READ, 90_000),
        (tracer_common::RETRIEVAL_WAITED, 2_000_000_000),
    ] {
        let mut lookup = Event::new(EventKind::NodeAccess, 1).uid(10123).task(5);
        lookup.reason = outcome;
        lookup.latency_ns = ns;
        model.ingest(&lookup);
    }
    let text = render(&model, "sim0");
    let name = "nodescope_lookup_latency_seconds";
    assert_eq!(
        text.matches(&format!("# TYPE {name} histogram\n")).count(),
        1
    );
    let disk = "device=\"sim0\",outcome=\"disk_read\"";
    for line in [
        format!("{name}_bucket{{{disk},le=\"0.000131072\"}} 2\n"),
        format!("{name}_bucket{{{disk},le=\"0.000065536\"}} 0\n"),
        format!("{name}_count{{{disk}}} 2\n"),
        format!("{name}_sum{{{disk}}} 0.000180000\n"),
        format!("{name}_bucket{{device=\"sim0\",outcome=\"waited\",le=\"1.073741824\"}} 0\n"),
        format!("{name}_bucket{{device=\"sim0\",outcome=\"waited\",le=\"+Inf\"}} 1\n"),
        format!("{name}_count{{device=\"sim0\",outcome=\"restore\"}} 0\n"),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
    // Five outcomes, 22 buckets each.
    assert_eq!(text.matches(&format!("{name}_bucket{{")).count(), 5 * 22);
    let app = "app=\"com.example.chat\",device=\"sim0\"";
    for line in [
        format!("nodescope_lookups_total{{{app},outcome=\"hit\"}} 1\n"),
        format!("nodescope_lookups_total{{{app},outcome=\"disk_read\"}} 2\n"),
        format!("nodescope_lookups_total{{{app},outcome=\"error\"}} 0\n"),
        format!("nodescope_lookup_wait_seconds_total{{{app}}} 2.000180300\n"),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
    assert!(text.contains("# UNIT nodescope_lookup_wait_seconds seconds\n"));
    assert!(text.ends_with("# EOF\n"));
}

/// Issue 53: the exposition writes its families from the schema's one table, and no other:
/// every `# TYPE` is a family of `schema::metrics::FAMILIES` with its type, in the table's
/// order, with its help and unit.
#[test]
fn every_family_written_is_the_schemas_in_its_order() {
    let mut model = Model::new(ModelConfig::default());
    let mut lookup = Event::new(EventKind::NodeAccess, 1).task(5);
    lookup.reason = tracer_common::RETRIEVAL_HIT;
    lookup.latency_ns = 300;
    model.ingest(&lookup);
    model.ingest(&Event::new(EventKind::NodeRead, 2).task(5));
    model.observe_knobs(Some(tracer_common::knobs::Knobs {
        threshold: 40,
        interval_ms: 1000,
    }));
    let text = render_with(&model, "sim0", Some(true));
    let mut written = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut words = line["# TYPE ".len()..].split(' ');
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        let family = families::FAMILIES
            .iter()
            .position(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} is not in the schema's table"));
        let f = &families::FAMILIES[family];
        assert_eq!(kind, f.kind.name(), "{name}");
        assert!(
            text.contains(&format!("# HELP {name} {}\n", f.help)),
            "{name}"
        );
        if let Some(unit) = f.unit {
            assert!(text.contains(&format!("# UNIT {name} {unit}\n")), "{name}");
        }
        written.push(family);
    }
    assert!(written.windows(2).all(|w| w[0] < w[1]), "{written:?}");
    // All but the node-type family (the model has no image here).
    assert_eq!(written.len(), families::FAMILIES.len() - 1, "{text}");
}
