//! `nodescope tune`: the feedback controller for node_compress_threshold and
//! node_compress_interval. The law, knob I/O and safety live in the `controller`
//! crate (docs/CONTROLLER.md); this module parses arguments and runs the decision loop on the
//! wall clock.
use std::{
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use controller::{
    audit::AuditLog,
    claim::{self, default_state_dir, Claim, StateDir},
    knobs::{self, SysfsKnobs, DEFAULT_SYSFS_ROOT},
    law::Config,
    oom::DEFAULT_OOM_SCORE_ADJ,
    psi::{self, PsiTrigger},
    safety::{signal_name, RestoreGuard, StopSignals},
    session::Session,
    signals::{ProcSignalSource, STATS_FILE},
    tuner::TunerOptions,
};

#[derive(Args)]
pub(crate) struct TuneArgs {
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
    decision_period: Duration,
    /// The decision period's old name, refused in words: "interval" is only the knob.
    #[arg(long = "interval", hide = true, value_name = "S", value_parser = retired_interval)]
    retired_interval: Option<Duration>,
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
    /// Poll PSI like the other gauges instead of waiting on a PSI trigger (which, when it can
    /// be armed and nothing else needs polling, replaces the polls while memory is calm).
    #[arg(long)]
    no_psi_trigger: bool,
    /// Where memory pressure (PSI `some`: the larger of avg10 and the stall share from
    /// `total`) is read from.
    #[arg(long, value_name = "FILE", default_value = ProcSignalSource::DEFAULT_PSI_PATH)]
    psi: PathBuf,
    /// The memory pressure to aim for, percent of time with some task stalled on memory.
    #[arg(long, value_name = "PERCENT", default_value_t = Config::default().psi_goal)]
    psi_goal: f64,
    /// Where each tuned device's original values and lock live while it is tuned (default
    /// /run/nodescope as root, else $XDG_RUNTIME_DIR/nodescope).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Put back the originals a controller that did not end cleanly (SIGKILL, OOM, power
    /// loss) left in the state directory, for every device or those given with --device;
    /// tune nothing. For init systems: run it when the controller's service stops.
    #[arg(long, conflicts_with = "dry_run")]
    restore: bool,
    /// Our own oom_score_adj, set at start when root (lmkd and systemd-oomd lower theirs the
    /// same way): the OOM killer should take nearly anything else first.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_OOM_SCORE_ADJ, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1000..=1000))]
    oom_score_adj: i32,
}

/// Why the decision loop ended.
enum Ended {
    Signal(i32),
    Duration,
    NoDeviceLeft,
}

/// How the loop learns of memory need between two decisions.
enum Wakeups {
    /// No polls (`--poll 0`, or not shorter than the decision period).
    DecisionsOnly,
    /// Read the gauges every period.
    Polls(Duration),
    /// Sleep until the kernel's PSI trigger fires; then poll every `poll` for two of the
    /// trigger's windows (it fires at most once per window while the stall goes on).
    Trigger { trigger: PsiTrigger, poll: Duration },
}

impl Wakeups {
    /// The poll period in force at `elapsed`, if polls are on then.
    fn polls_at(&self, elapsed: Duration, polls_until: Duration) -> Option<Duration> {
        match self {
            Wakeups::DecisionsOnly => None,
            Wakeups::Polls(poll) => Some(*poll),
            Wakeups::Trigger { poll, .. } => (elapsed < polls_until).then_some(*poll),
        }
    }

    fn trigger(&self) -> Option<&PsiTrigger> {
        match self {
            Wakeups::Trigger { trigger, .. } => Some(trigger),
            _ => None,
        }
    }
}

/// Polls when something other than PSI needs them (a budget, a device's counters file) or no
/// trigger can be armed; else a PSI trigger at the pressure that makes memory tight, so that a
/// calm system wakes the controller only for its decisions (what a phone wants).
fn choose_wakeups(
    args: &TuneArgs,
    cfg: &Config,
    source: &ProcSignalSource,
    devices: &[String],
) -> Wakeups {
    if args.poll.is_zero() || args.poll >= args.decision_period {
        return Wakeups::DecisionsOnly;
    }
    let polls = |why: &str| {
        log::info!(
            "polling the gauges every {:.2} s: {why}",
            args.poll.as_secs_f64()
        );
        Wakeups::Polls(args.poll)
    };
    if args.no_psi_trigger {
        return polls("--no-psi-trigger");
    }
    if args.budget.is_some() {
        return polls("the budget is a gauge no PSI trigger watches");
    }
    if let Some(device) = devices.iter().find(|d| source.has_counters_file(d)) {
        return polls(&format!("{device} has its own gauges ({STATS_FILE})"));
    }
    match PsiTrigger::arm(&args.psi, cfg.psi_goal * cfg.tight_enter) {
        Ok(trigger) => {
            log::info!(
                "waiting on a PSI trigger (\"{}\" on {}): no polls while memory is calm",
                trigger.spec(),
                args.psi.display()
            );
            Wakeups::Trigger {
                trigger,
                poll: args.poll,
            }
        }
        Err(err) => polls(&format!("{err:#}")),
    }
}

/// What ended a wait.
enum Woken {
    Timeout,
    Stop,
    Trigger,
    TriggerGone,
}

/// Block until a stop signal, the trigger (if any), or `timeout`.
fn wait_for(stop: &StopSignals, trigger: Option<&PsiTrigger>, timeout: Duration) -> Result<Woken> {
    let mut fds = vec![libc::pollfd {
        fd: stop.wake_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if let Some(trigger) = trigger {
        fds.push(libc::pollfd {
            fd: trigger.fd().as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        });
    }
    // Rounded up: a wait rounded down to 0 ms would spin until the due time.
    let timeout_ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is an array of `fds.len()` initialised pollfd structs that outlives the
    // call; poll only writes their `revents`.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if ready < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            // A signal: the loop looks at the stop flag next.
            return Ok(Woken::Timeout);
        }
        return Err(err).context("waiting in poll()");
    }
    if fds[0].revents != 0 {
        return Ok(Woken::Stop);
    }
    Ok(match fds.get(1).map(|fd| fd.revents) {
        Some(revents) if revents & (libc::POLLERR | libc::POLLNVAL) != 0 => Woken::TriggerGone,
        Some(revents) if revents & libc::POLLPRI != 0 => Woken::Trigger,
        _ => Woken::Timeout,
    })
}

pub(crate) fn run(args: TuneArgs) -> Result<()> {
    let cfg = Config {
        psi_goal: args.psi_goal,
        ..Config::default()
    };
    cfg.validate()?;
    if args.restore {
        return restore_left_behind(&args);
    }
    // A wrong --psi (a FIFO, a device) is refused before any device is claimed; a missing
    // one is a kernel without PSI, said once while tuning.
    psi::check_psi_path(&args.psi)?;
    // Before any device is claimed: a wrong --audit (a FIFO, a symlink) is refused first.
    let mut audit = open_audit(args.audit.as_deref())?;
    if let Some(duration) = args.duration {
        // No audit line waits past --duration for a reader that stopped reading.
        audit.set_deadline(Instant::now() + duration);
    }
    // Before anything is written, so that a signal at any later point leads to a restore.
    let stop = StopSignals::install()?;
    crate::control::lower_oom_score(args.oom_score_adj);
    let stores = open_devices(&args)?;
    let opts = TunerOptions {
        dry_run: args.dry_run,
        min_write_gap: args.min_write_gap,
    };
    let session = Session::start_claimed(stores, opts, cfg.clone(), audit)?;
    announce(&args, &session);
    let guard = RestoreGuard::arm(session);
    let mut source = ProcSignalSource::new(&args.psi, &args.sysfs_root, args.budget);
    let devices: Vec<String> = guard
        .lock()
        .tuners()
        .iter()
        .map(|t| t.device().to_string())
        .collect();
    let mut wakeups = choose_wakeups(&args, &cfg, &source, &devices);
    let ended = decide_until_stopped(&guard, &mut source, &stop, &args, &mut wakeups);
    guard.restore_now();
    let failures = guard.lock().failures();
    let restore_failures = guard.lock().restore_failures();
    say_why_it_ended(ended?, restore_failures.is_empty());
    if !restore_failures.is_empty() {
        bail!(
            "the original values could not all be put back: {}",
            restore_failures.join("; ")
        );
    }
    if !failures.is_empty() {
        bail!("tuning failed: {}", failures.join("; "));
    }
    Ok(())
}

/// The devices to tune, each checked: knobs present, parsable, in range, and writable unless
/// this is a dry run; and, unless this is a dry run (which writes nothing), claimed: a device
/// another controller tunes is refused, naming its pid.
fn open_devices(args: &TuneArgs) -> Result<Vec<(String, SysfsKnobs, Option<Claim>)>> {
    let names = if args.devices.is_empty() {
        knobs::discover_devices(&args.sysfs_root)?
    } else {
        args.devices.clone()
    };
    let state = (!args.dry_run)
        .then(|| StateDir::open(&state_dir(args)))
        .transpose()?;
    names
        .into_iter()
        .map(|name| {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                bail!("{name:?} is not a device name");
            }
            let (store, claim) =
                claim::open_claimed(&args.sysfs_root, &name, state.as_ref(), !args.dry_run)
                    .with_context(|| format!("cannot tune {name}"))?;
            Ok((name, store, claim))
        })
        .collect()
}

fn state_dir(args: &TuneArgs) -> PathBuf {
    args.state_dir.clone().unwrap_or_else(default_state_dir)
}

/// `tune --restore`: the originals left behind go back; nothing is tuned.
fn restore_left_behind(args: &TuneArgs) -> Result<()> {
    let state = StateDir::open(&state_dir(args))?;
    let mut audit = open_audit(args.audit.as_deref())?;
    let done = claim::restore_left_behind(&state, &args.devices, &mut audit)?;
    if done == 0 {
        log::info!(
            "nothing to restore: no state file in {}",
            state.path().display()
        );
    } else {
        log::info!("{done} device(s) restored from {}", state.path().display());
    }
    Ok(())
}

fn open_audit(path: Option<&Path>) -> Result<AuditLog> {
    crate::control::open_audit(path, crate::control::AuditDefault::Stderr)
}

fn announce(args: &TuneArgs, session: &Session<SysfsKnobs>) {
    let devices: Vec<&str> = session.tuners().iter().map(|t| t.device()).collect();
    log::info!(
        "{} {} under {} every {:.1} s{}; audit log: {}",
        if args.dry_run { "dry run on" } else { "tuning" },
        devices.join(", "),
        args.sysfs_root.display(),
        args.decision_period.as_secs_f64(),
        args.budget
            .map(|b| format!(", budget {b} bytes"))
            .unwrap_or_default(),
        session.audit_name()
    );
}

/// Decide once per period and poll the gauges in between (or wait on the PSI trigger), on
/// the wall clock, until a stop signal, the duration, or no device left. Periods the process
/// missed (suspend, overload) are skipped, not replayed in a burst. Between due times the
/// process sleeps in poll(): a stop signal or the trigger wakes it, nothing else.
fn decide_until_stopped(
    guard: &RestoreGuard<Session<SysfsKnobs>>,
    source: &mut ProcSignalSource,
    stop: &StopSignals,
    args: &TuneArgs,
    wakeups: &mut Wakeups,
) -> Result<Ended> {
    let started = Instant::now();
    let period = args.decision_period.as_secs_f64();
    // Decision periods elapsed (the last one decided on).
    let mut decided: u32 = 0;
    let mut polled: u64 = 0;
    // With a trigger: polls run until then (after it fired).
    let mut polls_until = Duration::ZERO;
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
        let due_decision = (elapsed.as_secs_f64() / period).floor() as u32;
        if due_decision > decided {
            decided = due_decision;
            guard.lock().tick(source, args.decision_period * decided)?;
            continue;
        }
        let poll = wakeups.polls_at(elapsed, polls_until);
        let mut next_due = args.decision_period * (decided + 1);
        if let Some(poll) = poll {
            let due_poll = (elapsed.as_secs_f64() / poll.as_secs_f64()).floor() as u64;
            if due_poll > polled {
                polled = due_poll;
                guard.lock().poll(source, elapsed)?;
                continue;
            }
            next_due = next_due.min(poll.mul_f64((polled + 1) as f64));
        }
        if let Some(limit) = args.duration {
            next_due = next_due.min(limit);
        }
        match wait_for(stop, wakeups.trigger(), next_due.saturating_sub(elapsed))? {
            Woken::Trigger => {
                let Wakeups::Trigger { trigger, poll } = &*wakeups else {
                    continue;
                };
                let now = started.elapsed();
                source.psi_trigger_fired(trigger.share(), now);
                guard.lock().poll(source, now)?;
                polls_until = now + trigger.window * 2;
                polled = (now.as_secs_f64() / poll.as_secs_f64()).floor() as u64;
            }
            Woken::TriggerGone => {
                log::warn!("the PSI trigger stopped working: polling the gauges instead");
                *wakeups = Wakeups::Polls(args.poll);
            }
            Woken::Stop | Woken::Timeout => {}
        }
    }
}

/// Why the loop ended and whether the originals went back: a failed restore is never
/// reported as one that worked.
fn say_why_it_ended(ended: Ended, restored: bool) {
    let why = match ended {
        Ended::Signal(signal) => format!("received {}: stopped", signal_name(signal)),
        Ended::Duration => "--duration reached: stopped".to_string(),
        Ended::NoDeviceLeft => {
            log::warn!("no device left to tune: stopped");
            return;
        }
    };
    if restored {
        log::info!("{why}; original values put back (see the audit log)");
    } else {
        log::error!("{why}; putting the original values back FAILED (see the audit log)");
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

/// `--interval` where the decision period was meant: an error that names the new flag.
fn retired_interval(_text: &str) -> Result<Duration, String> {
    Err(
        "--interval is now --decision-period (\"interval\" names only the knob \
         node_compress_interval)"
            .into(),
    )
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
