//! The control law: [`step`]`(state, signals, config) -> (state, decision)`, a pure function.
//!
//! Nothing here reads a clock or a file, so the law can be tested on scripted signal sequences
//! and driven in virtual time by the simulator. docs/CONTROLLER.md explains it at length; in
//! short:
//!
//! * **Memory score** (DAMOS quota goals: feedback toward a goal). Each decision turns memory
//!   into one number where 1.0 is the goal: `max(PSI some / psi_goal,
//!   attributed / (budget x budget_goal))`. The size of a fast step grows with the distance
//!   from the goal, as DAMOS scales its quota by `score / goal`.
//! * **Fast when memory is tight, slow when giving memory back** (senpai: fast backoff, slow
//!   probing). Above the goal the law compresses more at once, every decision (interval divided
//!   by the score, at most 2x; threshold up by up to 10 points). Going the other way
//!   (compressing less, which hands memory back to the raw cache) happens only on evidence
//!   that conversions are wasted, only after `relax_after_periods` quiet decision periods,
//!   one small step at a time, like senpai's slow probe that waits between steps. The one
//!   exception: when at least `eager_relax_fraction` of the conversions were restored within
//!   the eager span, they saved no memory, so the step waits only `eager_relax_after_periods`
//!   and grows the interval by the eager fraction over its goal (at most
//!   `max_eager_relax_factor`), once: until memory is next tight, later steps take the slow
//!   pace and useful conversions do not shorten the interval again.
//! * **Hysteresis** (zswap's accept threshold). The law enters the `Tight` regime when the
//!   score reaches `tight_enter` (1.1) and leaves it only when the score falls to `tight_exit`
//!   (0.8), the way zswap, once full, accepts pages again only below 90 % of its limit. So a
//!   score wobbling around the goal cannot make the knobs flap.
//! * **Dead bands.** Between `tight_exit` and `tight_enter` (outside `Tight`) and inside
//!   `waste_dead_band` around the waste goals, the law holds still.
//!
//! The two knobs have different jobs. The interval sets how often the worker runs (at most 256
//! conversions a pass) and so how long an entry must stay idle before it is compressed: it is
//! the main lever, shortened under memory need and lengthened when conversions are restored
//! soon after (too eager) or reclaimed unused (wasted). The threshold decides what is kept
//! compressed: raised under memory need; lowered, a point at a time, only when conversions are
//! still wasted with the interval already at its longest; 0 switches compression off and the
//! next memory need switches it back on at `threshold_restart`. Because payloads over 1024
//! bytes are never kept, thresholds above 25 % admit nothing more than 25 does, hence the
//! default ceiling of 25.
use serde::{Deserialize, Serialize};
use tracer_common::knobs::Knobs;

use crate::signals::Signals;

mod config;

pub use config::Config;

/// Memory regime, with hysteresis between the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// Memory at or below the goal, or inside the dead band after a calm stretch.
    Calm,
    /// The score reached `tight_enter` and has not yet fallen to `tight_exit`.
    Tight,
}

/// What a decision does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Hold,
    /// Shorter interval and/or higher threshold (fast).
    CompressMore,
    /// Longer interval and/or lower threshold (slow).
    CompressLess,
}

/// Everything the law remembers between decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The knob values the next step starts from (what the device has).
    pub knobs: Knobs,
    pub regime: Regime,
    /// Consecutive comfortable decision periods with wasted conversions and no move (counts
    /// toward `relax_after_periods`). Read under its old name too, `quiet_windows`.
    #[serde(alias = "quiet_windows")]
    pub quiet_periods: u32,
    /// While `Tight`: the memory score the last compress-more step answered. A poll between
    /// decisions ([`urgent`]) acts again only once the score has grown past `tight_enter` times
    /// this.
    #[serde(default)]
    pub answered_score: Option<f64>,
    /// Consecutive comfortable decision periods whose conversions paid, with no move (counts
    /// toward `sooner_after_periods` before converting sooner).
    #[serde(default, alias = "useful_windows")]
    pub useful_periods: u32,
    /// A quick step away from compression (most conversions eager) was taken and memory has
    /// not been tight since: further steps away take the slow pace, and useful conversions do
    /// not shorten the interval again. The rates trail the knobs by their trailing period, so
    /// right after a quick step they still show the old interval's churn (which took the
    /// interval on to its longest in two more quick steps), and then, with the churn gone, the
    /// conversions that remain look useful (which would take it straight back).
    #[serde(default)]
    pub eager_step_taken: bool,
}

impl State {
    pub fn new(knobs: Knobs) -> Self {
        State {
            knobs,
            regime: Regime::Calm,
            quiet_periods: 0,
            answered_score: None,
            useful_periods: 0,
            eager_step_taken: false,
        }
    }
}

/// One decision, with what it was based on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The knob values the law wants (equal to the state's when holding).
    pub knobs: Knobs,
    pub action: Action,
    /// One sentence: which signal, against which goal, and what moved how.
    pub reason: String,
    pub regime: Regime,
    pub memory_score: Option<f64>,
    pub eager_fraction: Option<f64>,
    pub wasted_fraction: Option<f64>,
}

/// Where a waste fraction stands against its goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Unknown,
    Low,
    InBand,
    High,
}

/// The signals boiled down to what the law acts on.
struct Assessment {
    memory_score: Option<f64>,
    memory_detail: String,
    eager_fraction: Option<f64>,
    wasted_fraction: Option<f64>,
    eager: Level,
    wasted: Level,
}

/// One decision period of the law. Pure: same inputs, same outputs.
pub fn step(state: &State, signals: &Signals, cfg: &Config) -> (State, Decision) {
    let (mut next, decision) = step_once(state, signals, cfg);
    // A quick step for eager churn is remembered until memory need compresses more again.
    let tight_step = decision.regime == Regime::Tight && decision.action == Action::CompressMore;
    next.eager_step_taken = !tight_step && (next.eager_step_taken || state.eager_step_taken);
    (next, decision)
}

fn step_once(state: &State, signals: &Signals, cfg: &Config) -> (State, Decision) {
    let assessment = assess(&signals.sanitized(), cfg);
    let Some(score) = assessment.memory_score else {
        let reason = "no memory signal (no PSI, no simulator pressure, no budget): holding";
        return hold(state, state.regime, 0, reason.to_string(), &assessment);
    };
    let regime = next_regime(state.regime, score, cfg);
    if regime == Regime::Tight && score > 1.0 {
        return compress_more(state, regime, score, &assessment, cfg);
    }
    let comfortable = regime == Regime::Calm && score <= cfg.tight_exit;
    if !comfortable {
        let reason = format!(
            "{} in the dead band ({} regime, exit at {:.2}, enter at {:.2}): holding",
            assessment.memory_detail,
            regime_name(regime),
            cfg.tight_exit,
            cfg.tight_enter
        );
        return hold(state, regime, 0, reason, &assessment);
    }
    let wasteful = assessment.eager == Level::High || assessment.wasted == Level::High;
    let useful = assessment.eager == Level::Low && assessment.wasted == Level::Low;
    if useful && state.eager_step_taken {
        let reason = format!(
            "{}, comfortable; conversions useful ({}), but the interval was lengthened for \
             eager churn: only memory need shortens it again, holding",
            assessment.memory_detail,
            waste_detail(&assessment)
        );
        return hold(state, regime, 0, reason, &assessment);
    }
    if useful && cfg.convert_sooner_when_useful && state.knobs.threshold > 0 {
        return convert_sooner(state, regime, &assessment, cfg);
    }
    if !wasteful {
        let reason = format!(
            "{}, comfortable; conversions not wasted ({}): holding",
            assessment.memory_detail,
            waste_detail(&assessment)
        );
        return hold(state, regime, 0, reason, &assessment);
    }
    // Only a run of comfortable, wasteful decision periods earns a slow step: one noisy one
    // does not. The reasons' text ("quiet window") is the audit log's, kept as it is.
    let quiet = state.quiet_periods.saturating_add(1);
    let (needed, factor, quick) = relax_pace(state, &assessment, cfg);
    if quiet < needed {
        let reason = format!(
            "{}, comfortable; conversions wasted ({}); quiet window {quiet} of {needed} before \
             a slow step: holding",
            assessment.memory_detail,
            waste_detail(&assessment),
        );
        return hold(state, regime, quiet, reason, &assessment);
    }
    let (mut next, decision) = compress_less(state, regime, quiet, factor, &assessment, cfg);
    next.eager_step_taken = quick;
    (next, decision)
}

/// How many wasteful periods a step away from compression waits for, the factor the interval
/// grows by, and whether that is the quick step. Slow (senpai's probe) unless most conversions
/// were restored within the eager span: those bought no memory, the worker only churned, and a
/// step as large as the excess over the goal (DAMOS's proportional step, the other way) gives
/// back almost none. One quick step until memory is next tight: after it, the slow pace.
fn relax_pace(state: &State, assessment: &Assessment, cfg: &Config) -> (u32, f64, bool) {
    match assessment.eager_fraction {
        Some(eager) if eager >= cfg.eager_relax_fraction && !state.eager_step_taken => (
            cfg.eager_relax_after_periods,
            (eager / cfg.eager_goal).min(cfg.max_eager_relax_factor),
            true,
        ),
        _ => (cfg.relax_after_periods, cfg.relax_interval_factor, false),
    }
}

/// The fast path between decisions: act at once when memory crosses into `Tight`.
///
/// A caller that can read the gauges (PSI, attributed bytes against the budget) more often
/// than it decides calls this at every poll. It acts only when memory got worse than the
/// knobs answer: on the calm -> tight crossing, and while tight when the score has grown
/// past `tight_enter` x the score the last compress-more step answered; then it takes exactly
/// the step [`step`] would take on the same signals. Everything else (holds, the slow
/// direction, which needs rates over a whole decision period) waits for the next decision,
/// so polls only ever compress more, and each needs the score to have grown by `tight_enter`
/// since the last. This is senpai's fast backoff, and what PSI triggers are for: a
/// controller that sees memory need only at its next decision leaves the worker slow for up
/// to a decision period plus one pending pass. `None`: nothing urgent, or nothing left to do (already at the most compression
/// allowed).
pub fn urgent(state: &State, signals: &Signals, cfg: &Config) -> Option<(State, Decision)> {
    let assessment = assess(&signals.sanitized(), cfg);
    let score = assessment.memory_score?;
    let urgent = match (state.regime, state.answered_score) {
        (Regime::Calm, _) => next_regime(state.regime, score, cfg) == Regime::Tight,
        (Regime::Tight, Some(answered)) => score >= answered * cfg.tight_enter,
        // Tight but no step answered yet (a hold in the dead band): the next decision decides.
        (Regime::Tight, None) => false,
    };
    if !urgent {
        return None;
    }
    let (next, mut decision) = compress_more(state, Regime::Tight, score, &assessment, cfg);
    if decision.action == Action::Hold {
        // Already at the most compression allowed: nothing to do, nothing to log.
        return None;
    }
    // The audit log's text, documented (docs/CONTROLLER.md) and matched: "windows" here are
    // decision periods, the words kept as they are.
    decision.reason = format!("urgent (between windows): {}", decision.reason);
    Some((next, decision))
}

fn assess(signals: &Signals, cfg: &Config) -> Assessment {
    let psi = signals.memory_pressure.map(|p| {
        (
            p / cfg.psi_goal,
            format!("pressure {p:.2} % vs goal {:.2} %", cfg.psi_goal),
        )
    });
    let budget = match (signals.attributed_bytes, signals.budget_bytes) {
        (Some(used), Some(budget)) => {
            let goal = budget as f64 * cfg.budget_goal;
            Some((
                used as f64 / goal,
                format!("memory {used} B vs goal {goal:.0} B"),
            ))
        }
        _ => None,
    };
    let worst = match (psi, budget) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    let (memory_score, memory_detail) = match worst {
        Some((score, detail)) => (Some(score), format!("memory score {score:.2} ({detail})")),
        None => (None, String::new()),
    };
    let fraction = |count: f64| {
        (signals.conversions_per_s >= cfg.min_conversions_per_s)
            .then(|| (count / signals.conversions_per_s).min(1.0))
    };
    let eager_fraction = fraction(signals.eager_restores_per_s);
    let wasted_fraction = fraction(signals.wasted_per_s);
    Assessment {
        memory_score,
        memory_detail,
        eager_fraction,
        wasted_fraction,
        eager: level(eager_fraction, cfg.eager_goal, cfg.waste_dead_band),
        wasted: level(wasted_fraction, cfg.wasted_goal, cfg.waste_dead_band),
    }
}

fn level(fraction: Option<f64>, goal: f64, band: f64) -> Level {
    match fraction {
        None => Level::Unknown,
        Some(f) if f > goal * (1.0 + band) => Level::High,
        Some(f) if f < goal * (1.0 - band) => Level::Low,
        Some(_) => Level::InBand,
    }
}

/// zswap-style hysteresis: enter at `tight_enter`, leave only at `tight_exit`.
fn next_regime(regime: Regime, score: f64, cfg: &Config) -> Regime {
    match regime {
        Regime::Calm if score >= cfg.tight_enter => Regime::Tight,
        Regime::Tight if score <= cfg.tight_exit => Regime::Calm,
        unchanged => unchanged,
    }
}

/// The fast direction: the step grows with the score (DAMOS), bounded per decision.
fn compress_more(
    state: &State,
    regime: Regime,
    score: f64,
    assessment: &Assessment,
    cfg: &Config,
) -> (State, Decision) {
    let old = state.knobs;
    let mut new = old;
    new.threshold = if old.threshold == 0 {
        cfg.threshold_restart
    } else {
        let step = ((score - 1.0) * cfg.threshold_gain).ceil() as u32;
        raise(
            old.threshold,
            step.clamp(1, cfg.max_threshold_step_up),
            cfg.threshold_max,
        )
    };
    // Optionally: conversions restored right away would only churn faster, keep the interval.
    let eager = cfg.eager_keeps_interval_when_tight && assessment.eager == Level::High;
    if !eager {
        let factor = score.min(cfg.max_backoff_factor);
        new.interval_ms = shrink(old.interval_ms, factor, cfg.interval_min_ms);
    }
    let mut reason = format!("{}, tight: compress more", assessment.memory_detail);
    if eager {
        reason += &format!(" (interval kept: {})", waste_detail(assessment));
    }
    if new == old {
        reason += ": already at the most compression allowed, holding";
        let (mut next, decision) = hold(state, regime, 0, reason, assessment);
        next.answered_score = Some(score);
        return (next, decision);
    }
    reason += &moves(old, new);
    let decision = decide(new, Action::CompressMore, reason, regime, assessment);
    let mut next = next_state(new, regime, 0);
    next.answered_score = Some(score);
    (next, decision)
}

/// Comfortable, and the conversions pay (few restored soon, few reclaimed unrestored): memory
/// held raw still costs, so after `relax_after_periods` such periods in a row the interval
/// shortens by the slow step's factor, down to its minimum; the threshold stays. The phone
/// trial on the reference module (issue 50) found the law holding the RFC's 1000 ms while
/// 100 ms cost less at every trial: nothing but pressure ever made it convert sooner.
fn convert_sooner(
    state: &State,
    regime: Regime,
    assessment: &Assessment,
    cfg: &Config,
) -> (State, Decision) {
    let useful = state.useful_periods.saturating_add(1);
    let mut reason = format!(
        "{}, comfortable; conversions useful ({})",
        assessment.memory_detail,
        waste_detail(assessment)
    );
    let counting = |reason: String| {
        let (mut next, decision) = hold(state, regime, 0, reason, assessment);
        next.useful_periods = useful;
        (next, decision)
    };
    if useful < cfg.sooner_after_periods {
        reason += &format!(
            "; useful period {useful} of {} before converting sooner: holding",
            cfg.sooner_after_periods
        );
        return counting(reason);
    }
    let old = state.knobs;
    let mut new = old;
    new.interval_ms = shrink(
        old.interval_ms,
        cfg.sooner_interval_factor,
        cfg.interval_min_ms,
    );
    if new == old {
        reason += ": interval already at its shortest, holding";
        return hold(state, regime, 0, reason, assessment);
    }
    reason += ": convert sooner";
    reason += &moves(old, new);
    let decision = decide(new, Action::CompressMore, reason, regime, assessment);
    (next_state(new, regime, 0), decision)
}

/// The slow direction: one bounded step (the interval times `factor`), then wait again.
fn compress_less(
    state: &State,
    regime: Regime,
    quiet: u32,
    factor: f64,
    assessment: &Assessment,
    cfg: &Config,
) -> (State, Decision) {
    let old = state.knobs;
    let mut new = old;
    new.interval_ms = grow(old.interval_ms, factor, cfg.interval_max_ms);
    // Lowering the threshold saves no work while the worker still runs often; it is the next
    // lever only once the interval is as long as allowed and conversions are still wasted.
    if assessment.wasted == Level::High && old.interval_ms >= cfg.interval_max_ms {
        new.threshold = lower(old.threshold, cfg.relax_threshold_step, cfg.threshold_min);
    }
    // The audit log's text, kept as it is: "quiet windows" are quiet decision periods.
    let mut reason = format!(
        "{}, comfortable; conversions wasted ({}) for {quiet} quiet windows: compress less",
        assessment.memory_detail,
        waste_detail(assessment)
    );
    if new == old {
        reason += if assessment.wasted == Level::High {
            ": already at the least compression allowed, holding"
        } else {
            ": interval already at its longest, holding"
        };
        return hold(state, regime, quiet, reason, assessment);
    }
    reason += &moves(old, new);
    let decision = decide(new, Action::CompressLess, reason, regime, assessment);
    (next_state(new, regime, 0), decision)
}

fn hold(
    state: &State,
    regime: Regime,
    quiet: u32,
    reason: String,
    assessment: &Assessment,
) -> (State, Decision) {
    let decision = decide(state.knobs, Action::Hold, reason, regime, assessment);
    let mut next = next_state(state.knobs, regime, quiet);
    if regime == Regime::Tight {
        next.answered_score = state.answered_score;
    }
    (next, decision)
}

fn decide(
    knobs: Knobs,
    action: Action,
    reason: String,
    regime: Regime,
    assessment: &Assessment,
) -> Decision {
    Decision {
        knobs,
        action,
        reason,
        regime,
        memory_score: assessment.memory_score,
        eager_fraction: assessment.eager_fraction,
        wasted_fraction: assessment.wasted_fraction,
    }
}

/// The state after a step; `answered_score` is set by the compress-more path.
fn next_state(knobs: Knobs, regime: Regime, quiet_periods: u32) -> State {
    State {
        knobs,
        regime,
        quiet_periods,
        answered_score: None,
        useful_periods: 0,
        eager_step_taken: false,
    }
}

/// Up by `step`, never past `max`; a value already above `max` (set by someone before us) is
/// left alone rather than pulled down by a "raise".
fn raise(value: u32, step: u32, max: u32) -> u32 {
    if value >= max {
        value
    } else {
        value.saturating_add(step).min(max)
    }
}

/// Down by `step`, never below `min`; a value already below `min` is left alone.
fn lower(value: u32, step: u32, min: u32) -> u32 {
    if value <= min {
        value
    } else {
        value.saturating_sub(step).max(min)
    }
}

/// Divide by `factor` (> 1), never below `min`, always by at least 1 ms.
fn shrink(value: u32, factor: f64, min: u32) -> u32 {
    if value <= min {
        return value;
    }
    let target = (f64::from(value) / factor).round() as u32;
    target.min(value - 1).max(min)
}

/// Multiply by `factor` (> 1), never above `max`, always by at least 1 ms.
fn grow(value: u32, factor: f64, max: u32) -> u32 {
    if value >= max {
        return value;
    }
    let target = (f64::from(value) * factor).round().min(f64::from(u32::MAX)) as u32;
    target.max(value + 1).min(max)
}

fn moves(old: Knobs, new: Knobs) -> String {
    let mut text = String::new();
    if new.threshold != old.threshold {
        text += &format!(", threshold {} -> {}", old.threshold, new.threshold);
    }
    if new.interval_ms != old.interval_ms {
        text += &format!(", interval {} -> {} ms", old.interval_ms, new.interval_ms);
    }
    text
}

fn waste_detail(assessment: &Assessment) -> String {
    let percent = |fraction: Option<f64>| match fraction {
        Some(f) => format!("{:.0} %", f * 100.0),
        None => "n/a".to_string(),
    };
    format!(
        "eager {}, wasted {}",
        percent(assessment.eager_fraction),
        percent(assessment.wasted_fraction)
    )
}

fn regime_name(regime: Regime) -> &'static str {
    match regime {
        Regime::Calm => "calm",
        Regime::Tight => "tight",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrink_and_grow_always_move_and_respect_their_bound() {
        assert_eq!(shrink(1000, 2.0, 100), 500);
        assert_eq!(shrink(150, 2.0, 100), 100);
        assert_eq!(shrink(101, 1.001, 100), 100);
        assert_eq!(shrink(100, 2.0, 100), 100);
        assert_eq!(shrink(50, 2.0, 100), 50, "below the bound: left alone");
        assert_eq!(grow(1000, 1.25, 30_000), 1250);
        assert_eq!(grow(29_000, 1.25, 30_000), 30_000);
        assert_eq!(grow(101, 1.001, 30_000), 102);
        assert_eq!(grow(30_000, 1.25, 30_000), 30_000);
    }
}
