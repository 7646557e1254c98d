//! A recording as a source: its events in order, paced by their own timestamps (`--speed X`
//! runs X times faster; 0 = as fast as possible). Damage ends the replay with a warning after
//! everything before it has been delivered.
use std::{path::Path, time::Duration};

use crate::record::reader::read_all;
use anyhow::{Context as _, Result};
use tracer_common::Event;

use super::{BatchFuture, Source, SourceInfo, SourceKind};
use crate::record::{Footer, Header};

/// Events handed out per batch when not pacing.
const BATCH: usize = 4096;

pub struct ReplaySource {
    header: Header,
    footer: Option<Footer>,
    events: Vec<Event>,
    next: usize,
    speed: f64,
    started: Option<(tokio::time::Instant, u64)>,
    now_ns: u64,
    path: String,
}

impl ReplaySource {
    pub fn open(path: &Path, speed: f64) -> Result<ReplaySource> {
        anyhow::ensure!(
            speed >= 0.0,
            "--speed must be 0 (as fast as possible) or positive"
        );
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let contents =
            read_all(&bytes).map_err(|damage| anyhow::anyhow!("{}: {damage}", path.display()))?;
        if let Some(damage) = &contents.damage {
            log::warn!(
                "{}: {damage}; replaying what comes before it",
                path.display()
            );
        }
        let footer = contents.footer().cloned();
        let events: Vec<Event> = contents.events().copied().collect();
        let header = contents.header;
        Ok(ReplaySource {
            now_ns: header.clock_origin_ns,
            header,
            footer,
            events,
            next: 0,
            speed,
            started: None,
            path: path.display().to_string(),
        })
    }

    /// The end of the recorded time range: the footer's, or the last event's when cut short.
    pub fn end_ns(&self) -> u64 {
        let last = self
            .events
            .last()
            .map_or(self.header.clock_origin_ns, |e| e.ts_ns);
        self.footer.as_ref().map_or(last, |f| f.end_ns.max(last))
    }

    async fn fill(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        if self.next >= self.events.len() {
            self.now_ns = self.end_ns();
            return Ok(false);
        }
        let end = if self.speed == 0.0 {
            (self.next + BATCH).min(self.events.len())
        } else {
            self.wait_for_next().await;
            self.due_until()
        };
        out.extend_from_slice(&self.events[self.next..end]);
        self.now_ns = self.events[end - 1].ts_ns;
        self.next = end;
        Ok(true)
    }

    /// Sleep until the next event is due in replay time (cancel-safe: takes nothing).
    async fn wait_for_next(&mut self) {
        let origin = self.header.clock_origin_ns;
        let (start, _) = *self
            .started
            .get_or_insert((tokio::time::Instant::now(), origin));
        let due_ns = self.events[self.next].ts_ns.saturating_sub(origin) as f64 / self.speed;
        tokio::time::sleep_until(start + Duration::from_nanos(due_ns as u64)).await;
    }

    /// One past the last event due by now.
    fn due_until(&self) -> usize {
        let Some((start, origin)) = self.started else {
            return self.next + 1;
        };
        let elapsed = start.elapsed().as_nanos() as f64 * self.speed;
        let horizon = origin + elapsed as u64;
        let due = self.events[self.next..].partition_point(|e| e.ts_ns <= horizon);
        self.next + due.max(1)
    }
}

impl Source for ReplaySource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKind::Replay,
            kernel: self.header.kernel.clone(),
            devices: self.header.devices.clone(),
            detail: format!(
                "{} (recorded from {}: {})",
                self.path, self.header.source, self.header.detail
            ),
        }
    }

    fn next_batch<'a>(&'a mut self, out: &'a mut Vec<Event>) -> BatchFuture<'a> {
        Box::pin(self.fill(out))
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn packages_list(&self) -> Option<String> {
        self.header.packages_list.clone()
    }
}
