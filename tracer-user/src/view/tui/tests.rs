//! Snapshot tests: the real drawing code into ratatui's TestBackend.
use ratatui::{
    backend::TestBackend,
    crossterm::event::{KeyCode, KeyEvent, KeyModifiers},
    Terminal,
};
use tracer_common::{knobs::Knobs, Event, EventKind, JOURNAL_NAT, META_AREA_NAT, QUEUE_512};

use super::*;
use crate::{
    model::{Model, ModelConfig, Packages},
    runner::DecisionsPane,
    source::{SourceInfo, SourceKind},
};

const SECOND: u64 = 1_000_000_000;

fn sample_model() -> Model {
    let packages = Packages::parse(
        "com.example.chat 10123 0 /data/user/0/com.example.chat default 3003\n\
         com.example.video 10200 0 /data/user/0/com.example.video default 3003\n",
    );
    let mut model = Model::new(ModelConfig {
        packages,
        ..ModelConfig::default()
    });
    model.start_at(0);
    for second in 0..5u64 {
        let ts = second * SECOND;
        for i in 0..(10 + second) {
            model.ingest(
                &Event::new(EventKind::NodeRead, ts + i)
                    .task(3000)
                    .uid(10123)
                    .queue(QUEUE_512)
                    .comm("com.example.chat"),
            );
        }
        for i in 0..3 {
            model.ingest(
                &Event::new(EventKind::NodeRead, ts + i)
                    .task(4000)
                    .uid(10200)
                    .queue(QUEUE_512)
                    .comm("com.example.video"),
            );
            model.ingest(
                &Event::new(EventKind::Convert, ts + i)
                    .task(90)
                    .uid(0)
                    .queue(QUEUE_512)
                    .comm("f2fs_writeback-254:0"),
            );
        }
        let mut restore = Event::new(EventKind::Restore, ts + 50)
            .task(4000)
            .uid(10200)
            .queue(QUEUE_512)
            .comm("com.example.video");
        // 12 to 16 us: a mean of 14 us.
        restore.latency_ns = 12_000 + second * 1_000;
        model.ingest(&restore);
        ingest_checkpoint(&mut model, ts + 60);
    }
    model.advance_to(5 * SECOND);
    model.observe_knobs(Some(Knobs {
        threshold: 40,
        interval_ms: 1000,
    }));
    model
}

/// Two node writes, a checkpoint that writes a NAT block and journals a NAT entry.
fn ingest_checkpoint(model: &mut Model, ts: u64) {
    let writeback = |kind, at| Event::new(kind, at).task(90).comm("f2fs_writeback-254:0");
    model.ingest(&writeback(EventKind::NodeWrite, ts));
    model.ingest(&writeback(EventKind::NodeWrite, ts + 1));
    for (phase, at) in [(0, ts + 2), (1, ts + 2_000_002)] {
        model.ingest(&writeback(EventKind::Checkpoint, at).queue(phase));
    }
    model.ingest(&writeback(EventKind::MetaWrite, ts + 2_000_003).queue(META_AREA_NAT));
    model.ingest(&writeback(EventKind::JournalEntry, ts + 2_000_004).queue(JOURNAL_NAT));
    model.ingest(&writeback(EventKind::Checkpoint, ts + 3_000_002).queue(2));
}

fn info() -> SourceInfo {
    SourceInfo {
        kind: SourceKind::Sim,
        kernel: "simulator".into(),
        devices: vec!["sim0".into()],
        detail: "scenario android-launch".into(),
    }
}

fn screen(ui: &UiState) -> String {
    let model = sample_model();
    let mut pane = DecisionsPane::default();
    pane.push("t=4s threshold 40 -> 45: restores rising, no pressure".into());
    let snapshot = Snapshot::capture(&model, &info()).with_control(None, pane.lines());
    draw_text(&snapshot, ui)
}

fn draw_text(snapshot: &Snapshot, ui: &UiState) -> String {
    let mut terminal = Terminal::new(TestBackend::new(140, 40)).unwrap();
    render(&mut terminal, snapshot, ui).unwrap();
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

fn row_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not on screen:\n{text}"))
}

fn press(ui: &mut UiState, code: KeyCode) {
    ui.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
}

#[test]
fn every_panel_is_drawn_with_the_model_data() {
    let text = screen(&UiState::default());
    for needle in [
        "source sim",
        "device sim0",
        "threshold 40%",
        "interval 1000 ms",
        "node reads 17/w",
        "restores 1/w avg 14.0us",
        "conversions 3/w",
        "reclaims 0/w",
        "memory (compressed share)",
        "slots",
        "apps (3 shown",
        "com.example.chat",
        "[f2fs_writeback]",
        "threshold 40 -> 45",
        "q quit",
        "checkpoints (newest first",
        "cps 5  nodes 10  nodes/cp 2.00  nat blocks 5  journal 5",
        "#5 nodes 2 nat 1 journal 1 sit 0 ssa 0 cp 0 | 2.0+1.0 ms",
        "#4 nodes 2 nat 1",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // No image to tell node types by: no panel for them.
    assert!(!text.contains("node reads by type"), "{text}");
    // chat: 10+11+12+13+14 = 60 demand reads
    let chat = text
        .lines()
        .find(|l| l.contains("com.example.chat"))
        .unwrap();
    assert!(chat.contains(" 60 "), "{chat}");
}

#[test]
fn sorting_by_a_column_and_reversing_reorders_the_table() {
    let mut ui = UiState::default();
    let by_reads = screen(&ui);
    assert!(row_of(&by_reads, "com.example.chat") < row_of(&by_reads, "com.example.video"));
    press(&mut ui, KeyCode::Char('5')); // RESTORES
    let by_restores = screen(&ui);
    assert!(by_restores.contains("RESTORES▼"));
    assert!(row_of(&by_restores, "com.example.video") < row_of(&by_restores, "com.example.chat"));
    press(&mut ui, KeyCode::Char('r'));
    let reversed = screen(&ui);
    assert!(reversed.contains("RESTORES▲"));
    assert!(row_of(&reversed, "com.example.chat") < row_of(&reversed, "com.example.video"));
}

#[test]
fn filter_pause_and_help() {
    let mut ui = UiState::default();
    press(&mut ui, KeyCode::Char('/'));
    for c in "video".chars() {
        press(&mut ui, KeyCode::Char(c));
    }
    press(&mut ui, KeyCode::Enter);
    let filtered = screen(&ui);
    assert!(filtered.contains("filter: video"));
    assert!(filtered.contains("com.example.video"));
    assert!(!filtered.contains("com.example.chat"));
    press(&mut ui, KeyCode::Char('p'));
    assert!(screen(&ui).contains("PAUSED"));
    press(&mut ui, KeyCode::Char('?'));
    assert!(screen(&ui).contains("filter apps by name"));
    press(&mut ui, KeyCode::Char('x'));
    assert!(!ui.help);
    press(&mut ui, KeyCode::Char('q'));
    assert!(ui.quit);
}

/// A node block with only its footer: `nid`, owner `ino`, offset `ofs` (0 an inode, 1 a
/// direct node, 3 an indirect node).
fn footer_only_block(nid: u32, ino: u32, ofs: u32) -> Box<sim::f2fs::Block> {
    let mut block = Box::new([0u8; sim::f2fs::BLOCK_SIZE]);
    let footer = sim::f2fs::BLOCK_SIZE - 24;
    block[footer..footer + 4].copy_from_slice(&nid.to_le_bytes());
    block[footer + 4..footer + 8].copy_from_slice(&ino.to_le_bytes());
    block[footer + 8..footer + 12].copy_from_slice(&(ofs << 3).to_le_bytes());
    block
}

#[test]
fn the_node_type_panel_splits_the_reads_since_the_start_and_in_the_last_window() {
    let blocks = vec![
        (10, footer_only_block(10, 10, 0)),
        (11, footer_only_block(11, 10, 1)),
        (12, footer_only_block(12, 10, 3)),
    ];
    let nodes = std::sync::Arc::new(sim::nodes::NodeSet::from_blocks(blocks, false, 0));
    let mut model = Model::new(ModelConfig::default());
    model.classify_node_reads(crate::model::NodeImage {
        nodes,
        name: "test.img".into(),
        dev: None,
    });
    model.start_at(0);
    let read = |model: &mut Model, ts: u64, nid: u32| {
        model.ingest(&Event::new(EventKind::NodeRead, ts).task(5).nid(nid));
    };
    // Window 0: 6 inode reads, 2 direct; window 1: 1 inode, 1 indirect, 2 not in the image.
    for i in 0..6 {
        read(&mut model, i, 10);
    }
    read(&mut model, 7, 11);
    read(&mut model, 8, 11);
    for (i, nid) in [10, 12, 99, 98].into_iter().enumerate() {
        read(&mut model, SECOND + i as u64, nid);
    }
    model.advance_to(2 * SECOND);
    let snapshot = Snapshot::capture(&model, &info());
    let shown = snapshot
        .node_types
        .as_ref()
        .expect("the model has an image");
    assert_eq!(shown.total.counts.total(), 12);
    assert_eq!(shown.window.total(), 4);
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    render(&mut terminal, &snapshot, &UiState::default()).unwrap();
    let buffer = terminal.backend().buffer();
    let text: String = (0..buffer.area.height)
        .map(|y| {
            let line: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect();
            line + "\n"
        })
        .collect();
    for (needle, row) in [
        ("node reads by type (test.img)", None),
        ("inode", Some("7  58.3%       1")),
        ("direct", Some("2  16.7%       0")),
        ("indirect", Some("1   8.3%       1")),
        ("double indirect", Some("0   0.0%       0")),
        ("not in the image", Some("2  16.7%       2")),
    ] {
        let line = &text.lines().nth(row_of(&text, needle)).unwrap();
        if let Some(row) = row {
            let panel = &line[line.find(needle).unwrap()..];
            assert!(panel.contains(row), "{needle}: {panel:?} in:\n{text}");
        }
    }
}

/// Issue 52: a daemon's snapshot names its busiest apps and sums the rest; the table shows
/// the sum as a row of its own and says how many apps it holds.
#[test]
fn the_apps_a_daemon_summed_are_one_row() {
    let snapshot = Snapshot::capture_bounded(&sample_model(), &info());
    assert!(snapshot.apps_other.is_none(), "three apps: none summed");
    let mut snapshot = snapshot;
    snapshot.apps_other = Some(crate::model::OtherApps {
        apps: 9_800,
        processes: 9_812,
        total: crate::model::Counters {
            node_reads_demand: 424_242,
            ..Default::default()
        },
        last_window: crate::model::Counters::default(),
    });
    let text = draw_text(&snapshot, &UiState::default());
    assert!(text.contains("apps (3 shown, 9800 more summed"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("(9800 more apps)"))
        .unwrap();
    assert!(row.contains("9812") && row.contains("424242"), "{row}");
}

/// Issue 51: timed lookups give the apps table its WAIT_MS column and the latency panel one
/// line per outcome (count, mean, p50 and p99 bounds) under the time waited in all. Without
/// timed lookups there is no panel and the column says `-`.
#[test]
fn timed_lookups_show_a_latency_panel_and_each_apps_wait() {
    let untimed = screen(&UiState::default());
    assert!(!untimed.contains("lookup latency"), "{untimed}");
    let chat = untimed
        .lines()
        .find(|l| l.contains("com.example.chat"))
        .unwrap();
    assert!(
        chat.trim_end()
            .trim_end_matches('│')
            .trim_end()
            .ends_with('-'),
        "{chat}"
    );
    let mut model = sample_model();
    for (outcome, ns, uid, tgid, comm) in [
        (
            tracer_common::RETRIEVAL_DISK_READ,
            90_000,
            10123,
            3000,
            "com.example.chat",
        ),
        (
            tracer_common::RETRIEVAL_DISK_READ,
            90_000,
            10123,
            3000,
            "com.example.chat",
        ),
        (
            tracer_common::RETRIEVAL_HIT,
            300,
            10123,
            3000,
            "com.example.chat",
        ),
        (
            tracer_common::RETRIEVAL_WAITED,
            1_500_000,
            10200,
            4000,
            "com.example.video",
        ),
    ] {
        let mut lookup = Event::new(EventKind::NodeAccess, 5 * SECOND + 1)
            .task(tgid)
            .uid(uid)
            .comm(comm);
        lookup.reason = outcome;
        lookup.latency_ns = ns;
        model.ingest(&lookup);
    }
    let snapshot = Snapshot::capture(&model, &info());
    let text = draw_text(&snapshot, &UiState::default());
    assert!(text.contains("WAIT_MS"), "{text}");
    assert!(
        text.contains("lookup latency: 4 timed, waited 1.7 ms"),
        "{text}"
    );
    for needle in [
        "outcome      count      mean     p50<=     p99<=",
        "hit              1     0.3us     0.5us     0.5us",
        "disk_read        2    90.0us     131us     131us",
        "waited           1    1500us    2097us    2097us",
        "error            0         -         -         -",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // chat waited 2 x 90 us + 0.3 us = 0.1803 ms, video 1.5 ms.
    let row = |app: &str| text.lines().find(|l| l.contains(app)).unwrap().to_string();
    assert!(
        row("com.example.chat").contains(" 0.2 "),
        "{}",
        row("com.example.chat")
    );
    assert!(
        row("com.example.video").contains(" 1.5 "),
        "{}",
        row("com.example.video")
    );
}

/// A comm with a newline or a right-to-left override is shown escaped in the apps table, as
/// in every text view (`tracer_common::text::escape_name`).
#[test]
fn the_apps_table_shows_names_escaped() {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    for (tgid, comm) in [(7, "x\nFAKE 999 r"), (8, "evil\u{202e}txt")] {
        model.ingest(&Event::new(EventKind::NodeRead, 5).task(tgid).comm(comm));
    }
    model.advance_to(SECOND);
    let snapshot = Snapshot::capture(&model, &info());
    let text = draw_text(&snapshot, &UiState::default());
    assert!(text.contains("x\\nFAKE 999 r"), "{text}");
    assert!(text.contains("evil\\u{202e}txt"), "{text}");
    assert!(!text.contains('\u{202e}'), "{text}");
}
