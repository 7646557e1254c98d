//! Memory pressure from a PSI file (`/proc/pressure/memory`), current rather than averaged.
//!
//! The kernel's `avg10` is a 10 s exponential average, recomputed every 2 s: a poll that reads
//! it sees a pressure onset 2 s late at the earliest, and then at about a fifth of its size.
//! `total` (microseconds in which some task stalled on memory, since boot) is brought up to date
//! at every read, so the stall share between two readings is exact. [`PsiMeter`] reports the
//! larger of the two: a burst counts at the first reading after it, and is forgotten at
//! `avg10`'s pace, not at once (memory need is the direction to react to fast and let go of
//! slowly, docs/CONTROLLER.md).
use std::{collections::VecDeque, time::Duration};

/// The span a poll measures the stall share over: the window Android's lmkd arms its PSI
/// triggers with (`some 70000 1000000`). Shorter spans make one 100 ms stall a large share.
pub const RECENT: Duration = Duration::from_secs(1);

/// Readings older than this are dropped, keeping one, so a long decision period still finds
/// the reading at its start (the share is then over the readings kept).
const KEEP: Duration = Duration::from_secs(60);

/// At most this many readings (a poll every 50 ms keeps 60 s).
const MAX_READINGS: usize = 1200;

/// The `some avg10` figure of a PSI file, percent.
pub fn parse_some_avg10(text: &str) -> Option<f64> {
    some_field(text, "avg10=")?.parse().ok()
}

/// The `some total` figure of a PSI file: microseconds some task stalled, since boot.
pub fn parse_some_total_us(text: &str) -> Option<u64> {
    some_field(text, "total=")?.parse().ok()
}

fn some_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|line| line.starts_with("some "))?
        .split_whitespace()
        .find_map(|field| field.strip_prefix(key))
}

/// Memory pressure, percent, from successive readings of one PSI file.
#[derive(Debug, Default)]
pub struct PsiMeter {
    /// (when, `some total`), oldest first.
    readings: VecDeque<(Duration, u64)>,
}

impl PsiMeter {
    /// The pressure at `now` (time since any fixed start, increasing), percent: the larger of
    /// `avg10` and the stall share over the last `span` (from the reading at or before
    /// `now - span`, or the oldest one kept). Only `avg10` at the first reading; `None` when
    /// the text has neither figure.
    pub fn read(&mut self, text: &str, now: Duration, span: Duration) -> Option<f64> {
        let share = parse_some_total_us(text).and_then(|total| {
            let share = self.share_since(now.saturating_sub(span), now, total);
            self.remember(now, total);
            share
        });
        match (parse_some_avg10(text), share) {
            (Some(avg10), Some(share)) => Some(avg10.max(share)),
            (avg10, share) => avg10.or(share),
        }
    }

    fn share_since(&self, from: Duration, now: Duration, total: u64) -> Option<f64> {
        let (then, before) = self
            .readings
            .iter()
            .rev()
            .find(|(at, _)| *at <= from)
            .or(self.readings.front())?;
        if now <= *then {
            return None;
        }
        let elapsed_us = (now - *then).as_secs_f64() * 1e6;
        let stalled_us = total.saturating_sub(*before) as f64;
        Some((stalled_us / elapsed_us * 100.0).clamp(0.0, 100.0))
    }

    fn remember(&mut self, now: Duration, total: u64) {
        let went_back = self
            .readings
            .back()
            .is_some_and(|&(at, last)| total < last || now < at);
        if went_back {
            // Another file, or a clock that jumped: earlier readings say nothing about this one.
            self.readings.clear();
        }
        self.readings.push_back((now, total));
        while self.readings.len() > MAX_READINGS
            || (self.readings.len() > 1 && self.readings[1].0 + KEEP <= now)
        {
            self.readings.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn psi(avg10: f64, total_us: u64) -> String {
        format!(
            "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total={total_us}\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        )
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn the_some_line_gives_avg10_and_total() {
        let text = "some avg10=12.34 avg60=1.00 avg300=0.10 total=123\n\
                    full avg10=5.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_some_avg10(text), Some(12.34));
        assert_eq!(parse_some_total_us(text), Some(123));
        assert_eq!(parse_some_total_us("some avg10=1.00\n"), None);
        assert_eq!(parse_some_avg10("full avg10=1.00 total=5\n"), None);
    }

    #[test]
    fn an_onset_counts_at_the_next_reading_while_avg10_still_says_zero() {
        let mut meter = PsiMeter::default();
        assert_eq!(meter.read(&psi(0.0, 1_000), ms(0), RECENT), Some(0.0));
        // 125 ms of stall in the next 250 ms: 50 %, with avg10 not updated yet.
        assert_eq!(meter.read(&psi(0.0, 126_000), ms(250), RECENT), Some(50.0));
    }

    #[test]
    fn the_share_is_over_the_span_asked_for() {
        let mut meter = PsiMeter::default();
        // Readings a second apart: 100 ms of stall in the first second, none in the second,
        // 400 ms in the third.
        for (second, total) in [0, 100_000, 100_000].into_iter().enumerate() {
            meter.read(&psi(0.0, total), ms(1000 * second as u64), RECENT);
        }
        assert_eq!(meter.read(&psi(0.0, 500_000), ms(3000), RECENT), Some(40.0));
        let three_s = meter.read(&psi(0.0, 500_000), ms(3000), ms(3000));
        assert!(
            (three_s.unwrap() - 500.0 / 30.0).abs() < 1e-9,
            "{three_s:?}"
        );
    }

    #[test]
    fn avg10_keeps_a_burst_after_the_share_has_gone() {
        let mut meter = PsiMeter::default();
        meter.read(&psi(0.0, 0), ms(0), RECENT);
        assert_eq!(meter.read(&psi(0.0, 800_000), ms(1000), RECENT), Some(80.0));
        // The burst is over (no stall in the last second) but avg10 has caught up with it.
        assert_eq!(
            meter.read(&psi(15.0, 800_000), ms(2000), RECENT),
            Some(15.0)
        );
    }

    #[test]
    fn a_counter_that_went_back_starts_over() {
        let mut meter = PsiMeter::default();
        meter.read(&psi(0.0, 900_000), ms(0), RECENT);
        // Not a negative share, nor a huge one: only avg10 until the next reading.
        assert_eq!(meter.read(&psi(2.0, 100), ms(500), RECENT), Some(2.0));
        assert_eq!(meter.read(&psi(2.0, 250_100), ms(1000), RECENT), Some(50.0));
    }

    #[test]
    fn old_readings_are_dropped_but_one_before_the_span_is_kept() {
        let mut meter = PsiMeter::default();
        for step in 0..2000u64 {
            meter.read(&psi(0.0, step * 10_000), ms(step * 100), RECENT);
        }
        assert!(meter.readings.len() <= MAX_READINGS);
        assert!(meter.readings.len() >= 600, "60 s of 100 ms readings");
        // 10 ms of stall every 100 ms, over any span: 10 %.
        let share = meter.read(&psi(0.0, 2000 * 10_000), ms(200_000), ms(30_000));
        assert!((share.unwrap() - 10.0).abs() < 1e-9, "{share:?}");
    }
}
