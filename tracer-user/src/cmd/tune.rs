//! `nodescope tune`: the feedback controller for node_compress_threshold and
//! node_compress_interval (issue #7). The law, knob I/O and safety live in the `controller`
//! crate (docs/CONTROLLER.md); this module parses arguments and runs the decision loop on the
//! wall clock.
use std::{
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use controller::{
    audit::AuditLog,
    knobs::{self, SysfsKnobs, DEFAULT_SYSFS_ROOT},
    law::Config,
    safety::{signal_name, RestoreGuard, StopSignals},
    session::Session,
    signals::ProcSignalSource,
    tuner::TunerOptions,
};

#[derive(Args)]
pub struct TuneArgs {
    /// Directory with one subdirectory per device holding the knob files (the simulator's
    /// knob directory, or the kernel's).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_SYSFS_ROOT)]
    sysfs_root: PathBuf,
    /// Device to tune; repeat for several. Default: every device that has both knobs.
    #[arg(long = "device", value_name = "DEV")]
    devices: Vec<String>,
    /// Decide and log every decision, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Audit log, one JSON object per line, appended to; `-` for stdout. Default: stderr.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Seconds between decisions.
    #[arg(long, value_name = "S", default_value = "5", value_parser = decision_period)]
    interval: Duration,
    /// Seconds between two polls of the gauges (PSI, attributed bytes) inside a decision
    /// period: a poll compresses more at once when memory crosses into tight or gets worse
    /// (docs/CONTROLLER.md, "urgent steps"); 0 turns polling off.
    #[arg(long, value_name = "S", default_value = "0.25", value_parser = seconds)]
    poll: Duration,
    /// Stop after this many seconds (the original values are put back).
    #[arg(long, value_name = "S", value_parser = seconds)]
    duration: Option<Duration>,
    /// Attributed node-cache memory to stay under, in bytes (suffixes K, M, G: powers of 1024).
    #[arg(long, value_name = "BYTES", value_parser = bytes)]
    budget: Option<u64>,
    /// At most one write per knob per this many seconds.
    #[arg(long, value_name = "S", default_value = "5", value_parser = seconds)]
    min_write_gap: Duration,
    /// Where memory pressure (PSI `some`: the larger of avg10 and the stall share from
    /// `total`) is read from.
    #[arg(long, value_name = "FILE", default_value = ProcSignalSource::DEFAULT_PSI_PATH)]
    psi: PathBuf,
    /// The memory pressure to aim for, percent of time with some task stalled on memory.
    #[arg(long, value_name = "PERCENT", default_value_t = Config::default().psi_goal)]
    psi_goal: f64,
}

/// Why the decision loop ended.
enum Ended {
    Signal(i32),
    Duration,
    NoDeviceLeft,
}

/// How often the loop looks for a stop signal while it waits for the next decision.
const STOP_POLL: Duration = Duration::from_millis(50);

pub fn run(args: TuneArgs) -> Result<()> {
    let cfg = Config {
        psi_goal: args.psi_goal,
        ..Config::default()
    };
    cfg.validate()?;
    // Before anything is written, so that a signal at any later point leads to a restore.
    let stop = StopSignals::install()?;
    let stores = open_devices(&args)?;
    let opts = TunerOptions {
        dry_run: args.dry_run,
        min_write_gap: args.min_write_gap,
    };
    let session = Session::start(stores, opts, cfg, open_audit(args.audit.as_deref())?)?;
    announce(&args, &session);
    let guard = RestoreGuard::arm(session);
    let mut source = ProcSignalSource::new(&args.psi, &args.sysfs_root, args.budget);
    let ended = decide_until_stopped(&guard, &mut source, &stop, &args);
    guard.restore_now();
    let failures = guard.lock().failures();
    say_why_it_ended(ended?);
    if !failures.is_empty() {
        bail!("tuning failed: {}", failures.join("; "));
    }
    Ok(())
}

/// The devices to tune, each checked: knobs present, parsable, in range, and writable unless
/// this is a dry run.
fn open_devices(args: &TuneArgs) -> Result<Vec<(String, SysfsKnobs)>> {
    let names = if args.devices.is_empty() {
        knobs::discover_devices(&args.sysfs_root)?
    } else {
        args.devices.clone()
    };
    names
        .into_iter()
        .map(|name| {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                bail!("{name:?} is not a device name");
            }
            let store = SysfsKnobs::open(&args.sysfs_root, &name, !args.dry_run)
                .with_context(|| format!("cannot tune {name}"))?;
            Ok((name, store))
        })
        .collect()
}

fn open_audit(path: Option<&Path>) -> Result<AuditLog> {
    match path {
        None => Ok(AuditLog::to_stderr()),
        Some(path) if path == Path::new("-") => Ok(AuditLog::to_stdout()),
        Some(path) => AuditLog::to_file(path),
    }
}

fn announce(args: &TuneArgs, session: &Session<SysfsKnobs>) {
    let devices: Vec<&str> = session.tuners().iter().map(|t| t.device()).collect();
    log::info!(
        "{} {} under {} every {:.1} s{}; audit log: {}",
        if args.dry_run { "dry run on" } else { "tuning" },
        devices.join(", "),
        args.sysfs_root.display(),
        args.interval.as_secs_f64(),
        args.budget
            .map(|b| format!(", budget {b} bytes"))
            .unwrap_or_default(),
        session.audit_name()
    );
}

/// Decide once per period and poll the gauges in between, on the wall clock, until a stop
/// signal, the duration, or no device left. Windows the process missed (suspend, overload)
/// are skipped, not replayed in a burst.
fn decide_until_stopped(
    guard: &RestoreGuard<Session<SysfsKnobs>>,
    source: &mut ProcSignalSource,
    stop: &StopSignals,
    args: &TuneArgs,
) -> Result<Ended> {
    let started = Instant::now();
    let period = args.interval.as_secs_f64();
    let poll = (!args.poll.is_zero() && args.poll < args.interval).then_some(args.poll);
    let mut window: u32 = 0;
    let mut polled: u64 = 0;
    loop {
        if let Some(signal) = stop.received() {
            return Ok(Ended::Signal(signal));
        }
        if guard.lock().tuning() == 0 {
            return Ok(Ended::NoDeviceLeft);
        }
        let elapsed = started.elapsed();
        if args.duration.is_some_and(|limit| elapsed >= limit) {
            return Ok(Ended::Duration);
        }
        let due_window = (elapsed.as_secs_f64() / period).floor() as u32;
        if due_window > window {
            window = due_window;
            guard.lock().tick(source, args.interval * window)?;
            continue;
        }
        if let Some(poll) = poll {
            let due_poll = (elapsed.as_secs_f64() / poll.as_secs_f64()).floor() as u64;
            if due_poll > polled {
                polled = due_poll;
                guard.lock().poll(source, elapsed)?;
                continue;
            }
        }
        let next_due = args.interval * (window + 1);
        thread::sleep(next_due.saturating_sub(elapsed).min(STOP_POLL));
    }
}

fn say_why_it_ended(ended: Ended) {
    match ended {
        Ended::Signal(signal) => log::info!(
            "received {}: stopped; original values put back (see the audit log)",
            signal_name(signal)
        ),
        Ended::Duration => log::info!("--duration reached: stopped; original values put back"),
        Ended::NoDeviceLeft => log::warn!("no device left to tune: stopped"),
    }
}

fn decision_period(text: &str) -> Result<Duration, String> {
    let period = seconds(text)?;
    if period < Duration::from_millis(50) {
        return Err("the decision period must be at least 0.05 s".to_string());
    }
    Ok(period)
}

fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(value).map_err(|_| format!("{text:?} is not a number of seconds"))
}

fn bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let (digits, unit) = match trimmed.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => trimmed.split_at(at),
        None => (trimmed, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use K, M or G)")),
    };
    let count: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes"))?;
    count
        .checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{text:?} is not a usable budget"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_accept_binary_suffixes() {
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("64M"), Ok(64 << 20));
        assert_eq!(bytes("3MiB"), Ok(3 << 20));
        assert_eq!(bytes("1g"), Ok(1 << 30));
        assert!(bytes("0").is_err());
        assert!(bytes("12X").is_err());
        assert!(bytes("M").is_err());
    }

    #[test]
    fn periods_are_positive_seconds() {
        assert_eq!(seconds("0.25"), Ok(Duration::from_millis(250)));
        assert!(seconds("-1").is_err());
        assert!(seconds("soon").is_err());
        assert!(decision_period("0.01").is_err());
        assert_eq!(decision_period("5"), Ok(Duration::from_secs(5)));
    }
}
