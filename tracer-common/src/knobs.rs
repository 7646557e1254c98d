//! The RFC's two knobs (`/sys/fs/f2fs/<dev>/node_compress_threshold` and
//! `node_compress_interval`): their file names, valid ranges and defaults, the pair of values
//! ([`Knobs`]), and the rule that calls a restore "eager" ([`eager_span_ns`]).
//!
//! The controller, the simulator and nodescope all read these from here, so a range or a
//! default is written once.
use core::{fmt, ops::RangeInclusive};

pub const THRESHOLD_FILE: &str = "node_compress_threshold";
pub const INTERVAL_FILE: &str = "node_compress_interval";
/// Percent of the 4 KiB block a compressed payload may take; 0 disables compression.
pub const THRESHOLD_RANGE: RangeInclusive<u32> = 0..=100;
/// Milliseconds between background worker passes.
pub const INTERVAL_RANGE_MS: RangeInclusive<u32> = 100..=30_000;
/// The RFC's default interval.
pub const DEFAULT_INTERVAL_MS: u32 = 1000;
/// The cover letter gives no default threshold. 25 % of 4096 is 1024 bytes, the largest slot:
/// the default admits everything a slot can hold, and lower values trade retained nodes for
/// smaller slots.
pub const DEFAULT_THRESHOLD: u32 = 25;

/// A restore this soon after its conversion counts as eager whatever the interval. It is the
/// break-even lifetime of the controller benchmark's cost weights, to the millisecond: a
/// compressed copy restored sooner cost more in conversion than the memory it saved
/// (docs/CONTROLLER.md, "Cost, in node reads"; a test in the benchmark keeps them equal).
pub const EAGER_FLOOR_NS: u64 = 2_844_000_000;

/// A restore within this long of its conversion is eager: max(2 x the interval,
/// [`EAGER_FLOOR_NS`]).
pub fn eager_span_ns(interval_ms: u32) -> u64 {
    eager_span_with_floor_ns(interval_ms, EAGER_FLOOR_NS)
}

/// [`eager_span_ns`] with another floor (the benchmark's `--eager-floor`, tests).
pub fn eager_span_with_floor_ns(interval_ms: u32, floor_ns: u64) -> u64 {
    (2 * u64::from(interval_ms) * 1_000_000).max(floor_ns)
}

/// One of the two knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "user",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum Knob {
    Threshold,
    Interval,
}

impl Knob {
    pub const ALL: [Knob; 2] = [Knob::Threshold, Knob::Interval];

    pub fn file_name(self) -> &'static str {
        match self {
            Knob::Threshold => THRESHOLD_FILE,
            Knob::Interval => INTERVAL_FILE,
        }
    }

    pub fn range(self) -> RangeInclusive<u32> {
        match self {
            Knob::Threshold => THRESHOLD_RANGE,
            Knob::Interval => INTERVAL_RANGE_MS,
        }
    }

    /// The kernel answers EINVAL outside [`Knob::range`].
    pub fn check(self, value: u32) -> Result<u32, OutOfRange> {
        if self.range().contains(&value) {
            Ok(value)
        } else {
            Err(OutOfRange { knob: self, value })
        }
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.file_name())
    }
}

/// A value the kernel would refuse for `knob`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange {
    pub knob: Knob,
    pub value: u32,
}

impl fmt::Display for OutOfRange {
    /// `node_compress_interval = 50 is outside 100..=30000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = self.knob.range();
        write!(
            f,
            "{} = {} is outside {}..={}",
            self.knob.file_name(),
            self.value,
            range.start(),
            range.end()
        )
    }
}

impl core::error::Error for OutOfRange {}

/// Both knob values of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(serde::Serialize, serde::Deserialize))]
pub struct Knobs {
    pub threshold: u32,
    pub interval_ms: u32,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs::DEFAULT
    }
}

impl Knobs {
    pub const DEFAULT: Knobs = Knobs {
        threshold: DEFAULT_THRESHOLD,
        interval_ms: DEFAULT_INTERVAL_MS,
    };

    pub fn get(&self, knob: Knob) -> u32 {
        match knob {
            Knob::Threshold => self.threshold,
            Knob::Interval => self.interval_ms,
        }
    }

    pub fn set(&mut self, knob: Knob, value: u32) {
        match knob {
            Knob::Threshold => self.threshold = value,
            Knob::Interval => self.interval_ms = value,
        }
    }

    /// The first knob (in [`Knob::ALL`] order) whose value the kernel would refuse.
    pub fn check(&self) -> Result<(), OutOfRange> {
        Knob::ALL
            .iter()
            .try_for_each(|&knob| knob.check(self.get(knob)).map(drop))
    }

    /// Compression admission is on.
    pub fn enabled(&self) -> bool {
        self.threshold > 0
    }

    /// Largest compressed payload the threshold admits, in bytes.
    pub fn threshold_bytes(&self) -> u32 {
        4096 * self.threshold / 100
    }
}

/// `threshold 25% interval 1000 ms`: the one way a pair is written, in knob-change notes
/// (which replay and the Perfetto export read back), the TUI's header, logs.
impl fmt::Display for Knobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "threshold {}% interval {} ms",
            self.threshold, self.interval_ms
        )
    }
}

/// A pair that may be unknown (a kernel without the RFC's knobs, a file unreadable), written
/// as [`Knobs`] is, with dashes for the unknown: `threshold -% interval - ms`.
pub fn shown(knobs: Option<Knobs>) -> Shown {
    Shown(knobs)
}

/// See [`shown`].
pub struct Shown(Option<Knobs>);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(knobs) => knobs.fmt(f),
            None => f.write_str("threshold -% interval - ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_holds_the_kernel_ranges_and_names_the_knob() {
        assert_eq!(Knob::Threshold.check(0), Ok(0));
        assert_eq!(Knob::Threshold.check(100), Ok(100));
        assert!(Knob::Threshold.check(101).is_err());
        assert!(Knob::Interval.check(99).is_err());
        assert_eq!(Knob::Interval.check(30_000), Ok(30_000));
        let knobs = Knobs {
            threshold: 25,
            interval_ms: 50,
        };
        let err = knobs.check().unwrap_err();
        assert_eq!(err.knob, Knob::Interval);
        assert_eq!(Knobs::DEFAULT.check(), Ok(()));
    }

    #[test]
    fn a_pair_is_written_one_way_known_or_not() {
        extern crate alloc;
        use alloc::format;
        let knobs = Knobs {
            threshold: 40,
            interval_ms: 500,
        };
        assert_eq!(format!("{knobs}"), "threshold 40% interval 500 ms");
        assert_eq!(
            format!("{}", shown(Some(knobs))),
            "threshold 40% interval 500 ms"
        );
        assert_eq!(format!("{}", shown(None)), "threshold -% interval - ms");
    }

    #[test]
    fn eager_window_is_twice_the_interval_or_the_floor() {
        assert_eq!(eager_span_ns(100), EAGER_FLOOR_NS);
        assert_eq!(eager_span_ns(5_000), 10_000_000_000);
        assert_eq!(eager_span_with_floor_ns(1_000, 0), 2_000_000_000);
    }
}
