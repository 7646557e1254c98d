//! The events the model and recorder benchmarks feed: a deterministic mix like a busy
//! phone's.
use tracer_common::{Event, EventKind, FLAG_READAHEAD, QUEUE_256, QUEUE_512};

/// Reads from 2,000 processes, restores, conversions by the cache thread, reclaims and second
/// chances, 5 us apart (1 s windows every 200,000 events).
pub fn events(count: u64) -> impl Iterator<Item = Event> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..count).map(move |i| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let tgid = 1000 + (state % 2000) as u32;
        let (kind, queue) = match state % 100 {
            0..=49 => (EventKind::NodeRead, 0),
            50..=64 => (EventKind::Restore, QUEUE_512),
            65..=84 => (EventKind::Convert, QUEUE_256),
            85..=92 => (EventKind::Reclaim, QUEUE_512),
            _ => (EventKind::SecondChance, 0),
        };
        let flags = if state.is_multiple_of(7) {
            FLAG_READAHEAD
        } else {
            0
        };
        Event::new(kind, i * 5_000)
            .task(tgid)
            .uid(10_000 + tgid % 300)
            .nid((state >> 20) as u32)
            .queue(queue)
            .flags(flags)
            .comm("app.ex")
    })
}

/// Events per second.
pub fn rate(count: u64, elapsed: std::time::Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}
