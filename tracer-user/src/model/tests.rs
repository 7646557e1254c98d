use tracer_common::{FLAG_READAHEAD, QUEUE_256, QUEUE_512, QUEUE_RAW};

use super::checkpoints::Written;
use super::*;

const SECOND: u64 = 1_000_000_000;

/// A node read by process `tgid` (uid 0), on demand or by readahead.
fn read(ts_ns: u64, tgid: u32, comm: &str, readahead: bool) -> Event {
    let flags = if readahead { FLAG_READAHEAD } else { 0 };
    Event::new(EventKind::NodeRead, ts_ns)
        .task(tgid)
        .flags(flags)
        .comm(comm)
}

fn model() -> Model {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    model
}

#[test]
fn reads_are_attributed_per_process_and_split_demand_readahead() {
    let mut model = model();
    for i in 0..64 {
        model.ingest(&read(i * 1000, 100 + (i % 4) as u32, "cat", false));
    }
    for i in 0..10 {
        model.ingest(&read(500_000 + i, 200, "sh", true));
    }
    model.advance_to(SECOND);
    let windows = model.take_closed();
    assert_eq!(windows.len(), 1);
    let window = &windows[0];
    assert_eq!(window.activity.node_reads_demand, 64);
    assert_eq!(window.activity.node_reads_readahead, 10);
    assert_eq!(window.processes.len(), 5);
    for row in window.processes.iter().filter(|r| r.comm == "cat") {
        assert_eq!(
            (
                row.counters.node_reads_demand,
                row.counters.node_reads_readahead
            ),
            (16, 0)
        );
    }
    let shell = window.processes.iter().find(|r| r.comm == "sh").unwrap();
    assert_eq!(
        (
            shell.counters.node_reads_demand,
            shell.counters.node_reads_readahead
        ),
        (0, 10)
    );
}

#[test]
fn windows_are_cut_by_event_time_and_processes_add_up_to_the_window() {
    let mut model = model();
    // 3 reads in window 0, none in window 1, 2 in window 2.
    for ts in [10, SECOND - 1, 5] {
        model.ingest(&read(ts, 1, "a", false));
    }
    model.ingest(&read(2 * SECOND, 2, "b", false));
    model.ingest(&read(2 * SECOND + 7, 1, "a", true));
    model.advance_to(3 * SECOND);
    let windows = model.take_closed();
    let reads: Vec<u64> = windows.iter().map(|w| w.activity.node_reads()).collect();
    assert_eq!(reads, [3, 0, 2]);
    assert_eq!(windows[2].totals.node_reads(), 5);
    for window in &windows {
        let sum: u64 = window
            .processes
            .iter()
            .map(|p| p.counters.node_reads())
            .sum();
        assert_eq!(sum, window.activity.node_reads(), "window {}", window.index);
    }
    assert_eq!(windows[1].start_ns, SECOND);
    assert_eq!(windows[1].end_ns, 2 * SECOND);
}

#[test]
fn android_uids_group_processes_into_apps_and_kernel_threads_stay_apart() {
    let packages = Packages::parse(
        "com.example.chat 10123 0 /data/user/0/com.example.chat default 3003\n\
         com.example.video 10200 0 /data/user/0/com.example.video default 3003\n",
    );
    let mut model = Model::new(ModelConfig {
        packages,
        ..ModelConfig::default()
    });
    model.start_at(0);
    let chat_main = Event::new(EventKind::NodeRead, 1)
        .task(3000)
        .uid(10123)
        .comm("com.example.chat");
    let chat_service = Event::new(EventKind::NodeRead, 2)
        .task(3001)
        .uid(10123)
        .comm("chat:service");
    let chat_user10 = Event::new(EventKind::NodeRead, 3)
        .task(3002)
        .uid(1_010_123)
        .comm("com.example.chat");
    let restore = Event::new(EventKind::Restore, 4)
        .task(3000)
        .uid(10123)
        .comm("com.example.chat");
    let ckpt = Event::new(EventKind::NodeRead, 5)
        .task(90)
        .uid(0)
        .comm("f2fs_ckpt-254:0");
    let kworker = Event::new(EventKind::NodeRead, 6)
        .task(91)
        .uid(0)
        .comm("kworker/u8:2");
    for e in [
        chat_main,
        chat_service,
        chat_user10,
        restore,
        restore,
        restore,
        ckpt,
        kworker,
    ] {
        model.ingest(&e);
    }
    model.advance_to(SECOND);
    let apps = model.apps();
    let find = |key: AppKey| apps.iter().find(|a| a.app == key).cloned().unwrap();
    let chat = find(AppKey::App("com.example.chat".into()));
    assert_eq!(chat.processes, 2);
    assert_eq!(chat.total.node_reads(), 2);
    assert_eq!(chat.total.restores, 3);
    assert_eq!(chat.total.hit_ratio(), Some(0.6));
    assert_eq!(chat.last_window.restores, 3);
    let other_user = find(AppKey::App("com.example.chat (user 10)".into()));
    assert_eq!(
        (other_user.processes, other_user.total.node_reads()),
        (1, 1)
    );
    let kernel = find(AppKey::Kernel("f2fs_ckpt".into()));
    assert_eq!(kernel.total.node_reads(), 1);
    assert_eq!(find(AppKey::Kernel("kworker".into())).total.node_reads(), 1);
    assert_eq!(apps.len(), 4);
}

#[test]
fn idle_processes_age_out_into_the_exited_row_and_totals_are_kept() {
    let mut model = Model::new(ModelConfig {
        idle_windows: 3,
        ..ModelConfig::default()
    });
    model.start_at(0);
    model.ingest(&read(0, 1, "short", false));
    model.ingest(&read(1, 1, "short", false));
    model.ingest(&read(2, 2, "long", false));
    for second in 1..=5 {
        model.ingest(&read(second * SECOND, 2, "long", false));
    }
    model.advance_to(6 * SECOND);
    assert_eq!(
        model.process_count(),
        1,
        "pid 1 aged out after 3 idle windows"
    );
    let (count, exited) = model.exited();
    assert_eq!((count, exited.node_reads()), (1, 2));
    assert_eq!(model.totals().node_reads(), 8);
    let apps = model.apps();
    let short = apps
        .iter()
        .find(|a| a.app == AppKey::Program("short".into()))
        .unwrap();
    assert_eq!(
        (short.processes, short.total.node_reads()),
        (0, 2),
        "app totals keep their exited processes, so metrics never go down"
    );
}

#[test]
fn the_process_table_is_bounded() {
    let mut model = Model::new(ModelConfig {
        max_processes: 100,
        ..ModelConfig::default()
    });
    model.start_at(0);
    for tgid in 0..1000 {
        model.ingest(&read(u64::from(tgid), tgid, "burst", false));
    }
    // Full at 100, the 12 least recent go at once: 1000 = 100 + 12 x 75; live ones are the
    // latest.
    assert_eq!(model.process_count(), 100);
    let (count, exited) = model.exited();
    assert_eq!((count, exited.node_reads()), (900, 900));
    assert!(model.processes.contains_key(&999) && !model.processes.contains_key(&899));
}

#[test]
fn cache_gauges_follow_conversions_restores_and_reclaims() {
    let mut model = model();
    let at = |kind, queue| Event::new(kind, 1).task(1).queue(queue).comm("x");
    for _ in 0..10 {
        model.ingest(&read(1, 1, "x", false));
    }
    for queue in [QUEUE_256, QUEUE_256, QUEUE_512] {
        model.ingest(&at(EventKind::Convert, queue));
    }
    model.ingest(&at(EventKind::Restore, QUEUE_256));
    model.ingest(&at(EventKind::Reclaim, QUEUE_512));
    model.ingest(&at(EventKind::Reclaim, QUEUE_RAW));
    let cache = model.cache();
    assert_eq!(cache.raw_entries, 10 - 3 + 1 - 1);
    assert_eq!(
        cache.slots,
        PerQueue {
            raw: 0,
            b256: 1,
            b512: 0,
            b1024: 0
        }
    );
    assert_eq!(cache.raw_bytes, 7 * 4096);
    assert_eq!(cache.compressed_bytes, 256);
    assert_eq!(cache.attributed_bytes, 8 * ENTRY_BYTES + 7 * 4096 + 256);
}

#[test]
fn events_with_a_kind_or_code_this_build_does_not_know_change_no_table() {
    let mut model = model();
    let mut unknown_kind = Event::new(EventKind::NodeRead, 1).task(1).comm("x");
    unknown_kind.kind = 99;
    let coded = |kind, code| Event::new(kind, 1).task(1).queue(code).comm("x");
    for event in [
        unknown_kind,
        coded(EventKind::Reclaim, 9),
        coded(EventKind::Convert, 7),
        coded(EventKind::Checkpoint, 5),
        coded(EventKind::MetaWrite, 99),
        coded(EventKind::JournalEntry, 2),
    ] {
        model.ingest(&event);
    }
    assert!(model.totals().is_empty(), "{:?}", model.totals());
    assert_eq!(model.cache(), CacheGauges::default());
    assert_eq!(*model.checkpoints().pending(), Written::default());
    assert_eq!(model.checkpoints().total().count, 0);
}

#[test]
fn lost_events_are_counted_but_belong_to_no_process() {
    let mut model = model();
    let lost = Event::new(EventKind::Lost, 5).len(42);
    model.ingest(&lost);
    assert_eq!(model.totals().lost, 42);
    assert_eq!(model.process_count(), 0);
}

#[test]
fn devices_past_the_limit_count_under_one_row() {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    for dev in 0..100u32 {
        model.ingest(&Event::new(EventKind::NodeRead, 1).task(1).dev(dev));
    }
    model.ingest(&Event::new(EventKind::Restore, 2).task(1).dev(7));
    model.advance_to(SECOND);
    let window = &model.take_closed()[0];
    assert_eq!(window.devices.len(), super::MAX_DEVICES + 1);
    assert_eq!(window.devices[&7].node_reads, 1);
    let other = &window.devices[&super::OTHER_DEVICES];
    assert_eq!(other.node_reads, 100 - super::MAX_DEVICES as u64);
    assert_eq!(window.events, 101, "every event counts, whichever device");
}

/// An event 2^63 ns in, with 1 ms windows: the model closes the window with data and the
/// first of the idle span (more than MAX_IDLE_WINDOWS), and jumps over the rest to the
/// event's window (before: one report per millisecond, 9.2e15 of them). The totals still
/// count both reads.
#[test]
fn an_idle_span_is_skipped_not_bookkept_window_by_window() {
    let mut model = Model::new(ModelConfig {
        window_ns: 1_000_000,
        ..ModelConfig::default()
    });
    model.start_at(0);
    model.ingest(&read(10, 100, "cat", false));
    let far = 1u64 << 63;
    model.ingest(&read(far, 100, "cat", false));
    let closed = model.take_closed();
    assert_eq!(closed.iter().map(|w| w.index).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(closed[0].activity.node_reads_demand, 1);
    assert!(closed[1].activity.is_empty());
    model.advance_to(far + 1_000_000);
    let last = model.take_closed();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].index, far / 1_000_000);
    assert_eq!(last[0].activity.node_reads_demand, 1);
    assert_eq!(model.totals().node_reads_demand, 2);
}

/// A short idle span is still reported window by window (sparklines show the quiet).
#[test]
fn a_short_idle_span_is_reported_window_by_window() {
    let mut model = model();
    model.ingest(&read(10, 100, "cat", false));
    model.advance_to(5 * SECOND);
    let closed = model.take_closed();
    assert_eq!(
        closed.iter().map(|w| w.index).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
}

/// The per-app table is kept as events arrive: bounded by folding apps whose processes all
/// retired into "(other)" once there are more than `max_processes` apps, with no count lost.
#[test]
fn the_app_table_is_bounded_and_loses_no_count() {
    let mut model = Model::new(ModelConfig {
        max_processes: 10,
        ..ModelConfig::default()
    });
    model.start_at(0);
    // 200 programs, one short-lived process each, two reads apiece.
    for tgid in 0..200u32 {
        let comm = format!("prog{tgid}");
        model.ingest(&read(u64::from(tgid) * 2, tgid, &comm, false));
        model.ingest(&read(u64::from(tgid) * 2 + 1, tgid, &comm, true));
    }
    let apps = model.apps();
    assert!(apps.len() <= 10 + 2 + 1, "{} app rows", apps.len());
    let reads: u64 = apps.iter().map(|app| app.total.node_reads()).sum();
    assert_eq!(reads, 400, "every read is in some app's total");
    let live: u32 = apps.iter().map(|app| app.processes).sum();
    assert_eq!(live as usize, model.process_count());
    let other = apps
        .iter()
        .find(|app| app.app == AppKey::Program("(other)".into()))
        .expect("an (other) row");
    assert_eq!(other.processes, 0);
    assert!(other.total.node_reads() > 0);
    // The last window's activity per app, once it closed.
    model.advance_to(SECOND);
    let latest = model.apps();
    let newest = latest
        .iter()
        .find(|app| app.app == AppKey::Program("prog199".into()))
        .unwrap();
    assert_eq!(
        (
            newest.last_window.node_reads_demand,
            newest.last_window.node_reads_readahead
        ),
        (1, 1)
    );
}

/// A kernel's checkpoint is three events (block_ops start and finish, the finish): the
/// totals, the window and the device row count it once, as the kernel's CP count does.
#[test]
fn a_checkpoint_counts_once_at_its_finish() {
    use tracer_common::{
        CP_PHASE_FINISH_BLOCK_OPS, CP_PHASE_FINISH_CHECKPOINT, CP_PHASE_START_BLOCK_OPS,
    };
    let mut model = model();
    for (i, phase) in [
        CP_PHASE_START_BLOCK_OPS,
        CP_PHASE_FINISH_BLOCK_OPS,
        CP_PHASE_FINISH_CHECKPOINT,
    ]
    .into_iter()
    .enumerate()
    {
        model.ingest(
            &Event::new(EventKind::Checkpoint, i as u64 * 1000)
                .task(7)
                .queue(phase),
        );
    }
    model.advance_to(SECOND);
    let window = &model.take_closed()[0];
    assert_eq!(model.totals().checkpoints, 1);
    assert_eq!(window.activity.checkpoints, 1);
    let devices: u64 = window.devices.values().map(|d| d.checkpoints).sum();
    assert_eq!(devices, 1);
}

/// Issue 52, item 1: a recording read back (report, export) costs its windows with data, not
/// its time span. Reads 10 s apart in 1 ms windows close two windows each (the read's, and the
/// empty one after it, where the counts drop to zero), not 10,000; a window that holds only
/// the mechanism's counter readings is still one of them, with its counts.
#[test]
fn a_sparse_recording_closes_the_windows_with_data_and_one_after_each() {
    use tracer_common::Measure;
    let header = crate::record::Header {
        window_ns: 1_000_000,
        ..crate::record::Header::default()
    };
    let mut model = Model::new(ModelConfig::for_recording(&header, Packages::default()));
    model.start_at(header.clock_origin_ns);
    let convert = Measure::Events(EventKind::Convert);
    model.ingest(&read(0, 100, "cat", false));
    model.ingest(&Event::counter(5 * SECOND, 1, convert, None, 100));
    model.ingest(&Event::counter(5 * SECOND + 100_000, 1, convert, None, 130));
    model.ingest(&read(10 * SECOND, 100, "cat", false));
    model.advance_to(10 * SECOND + 1_000_000);
    let closed = model.take_closed();
    assert_eq!(
        closed.iter().map(|w| w.index).collect::<Vec<_>>(),
        [0, 1, 5_000, 5_001, 10_000]
    );
    assert_eq!(closed[0].activity.node_reads_demand, 1);
    assert!(closed[1].activity.is_empty());
    assert_eq!(closed[2].activity.conversions, 30);
    assert_eq!(closed[4].activity.node_reads_demand, 1);
    assert_eq!(model.totals().node_reads_demand, 2);
    assert_eq!(model.totals().conversions, 30);

    for i in 2..1_000u64 {
        model.ingest(&read(i * 10 * SECOND, 100, "cat", false));
    }
    // The window after the second read was closed above; each later read closes the one
    // before it and the empty one after that.
    assert_eq!(model.take_closed().len(), 1 + 2 * 997);
    assert_eq!(model.totals().node_reads_demand, 1_000);
}

/// Issue 52: the daemon names the busiest apps and sums the rest, so what it sends and serves
/// does not grow with the number of apps; nothing is lost from the sums.
#[test]
fn top_apps_names_the_busiest_and_sums_the_rest() {
    let mut model = Model::new(ModelConfig::default());
    model.start_at(0);
    // 300 programs; prog{i} reads i + 1 times.
    let mut ts = 0;
    for i in 0..300u32 {
        for _ in 0..=i {
            model.ingest(&read(ts, 1_000 + i, &format!("prog{i}"), false));
            ts += 1;
        }
    }
    model.advance_to(SECOND);
    let (rows, other) = model.top_apps(200, |total, _| (total.node_reads(), 0));
    assert_eq!(rows.len(), 200);
    assert_eq!(
        rows[0].app,
        AppKey::Program("prog299".into()),
        "busiest first"
    );
    assert_eq!(rows[199].app, AppKey::Program("prog100".into()));
    let other = other.expect("the rest summed");
    assert_eq!(other.apps, 100);
    assert_eq!(other.processes, 100);
    assert_eq!(other.total.node_reads(), (1..=100).sum::<u64>());
    assert_eq!(other.last_window.node_reads(), (1..=100).sum::<u64>());
    let named: u64 = rows.iter().map(|row| row.total.node_reads()).sum();
    assert_eq!(
        named + other.total.node_reads(),
        model.totals().node_reads()
    );
    // Fewer apps than the bound: all named, nothing summed.
    let (rows, other) = model.top_apps(1_000, |total, _| (total.node_reads(), 0));
    assert_eq!((rows.len(), other), (300, None));
}

/// Issue 52: the history (300 windows) keeps no per-process rows: at 10,000 active processes
/// they were 7 MB a window, 2 GB in all; the closed windows still carry them.
#[test]
fn the_history_keeps_no_process_rows() {
    let mut model = model();
    for second in 0..3u64 {
        for tgid in 0..100u32 {
            model.ingest(&read(
                second * SECOND + u64::from(tgid),
                tgid,
                "reader",
                false,
            ));
        }
    }
    model.advance_to(3 * SECOND);
    assert_eq!(model.history().len(), 3);
    assert!(model.history().iter().all(|w| w.processes.is_empty()));
    assert!(model
        .history()
        .iter()
        .all(|w| w.activity.node_reads() == 100));
    let closed = model.take_closed();
    assert_eq!(closed.len(), 3);
    assert!(closed.iter().all(|w| w.processes.len() == 100));
}
