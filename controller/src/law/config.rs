//! The law's constants ([`Config`]) and the checks that keep them sane.
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use tracer_common::knobs::{INTERVAL_RANGE_MS, THRESHOLD_RANGE};

/// Every constant of the law. `Config::default()` is what `nodescope tune` uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// PSI `some` (percent of time stalled) that scores 1.0: the pressure we accept.
    pub psi_goal: f64,
    /// Fraction of the budget that scores 1.0 (aim a little below the budget).
    pub budget_goal: f64,
    /// Score at which the law enters `Tight` (the dead band above the goal).
    pub tight_enter: f64,
    /// Score at or below which the law leaves `Tight` (zswap's accept threshold).
    pub tight_exit: f64,
    /// Accepted fraction of conversions restored soon after.
    pub eager_goal: f64,
    /// Accepted fraction of conversions reclaimed without a restore.
    pub wasted_goal: f64,
    /// Relative dead band around the two waste goals: high above goal x (1 + band).
    pub waste_dead_band: f64,
    /// Below this many conversions per second the waste fractions are noise and ignored.
    pub min_conversions_per_s: f64,
    /// Largest factor the interval shrinks by in one decision when memory is tight (it is
    /// divided by the score, DAMOS's proportional step, at most by this).
    pub max_backoff_factor: f64,
    /// While tight, keep the interval when too many conversions are restored right away (only
    /// the threshold rises). Off by default: under reclaim those restores are mostly copies that
    /// survived where raw blocks were thrashed, and the benchmark measured the rule holding the
    /// interval where shortening it paid (docs/CONTROLLER.md).
    pub eager_keeps_interval_when_tight: bool,
    /// Threshold points added per unit of score above 1.0 when memory is tight...
    pub threshold_gain: f64,
    /// ...at most this many per decision.
    pub max_threshold_step_up: u32,
    /// Threshold set when memory is tight and compression was off (0).
    pub threshold_restart: u32,
    /// Factor the interval grows by in one slow step.
    pub relax_interval_factor: f64,
    /// Threshold points removed in one slow step.
    pub relax_threshold_step: u32,
    /// Comfortable decision periods with waste, in a row, needed before each slow step
    /// (senpai's grace ticks). Read under its old name too, `relax_after_windows`.
    #[serde(alias = "relax_after_windows")]
    pub relax_after_periods: u32,
    /// Comfortable with conversions that pay (both waste fractions low): shorten the interval
    /// a slow step at a time (issue 50's phone trial). Serialized with a default, so older
    /// configuration files keep their meaning but gain the rule.
    #[serde(default = "default_true")]
    pub convert_sooner_when_useful: bool,
    /// Comfortable periods with useful conversions, in a row, before each step sooner...
    #[serde(default = "default_sooner_after", alias = "sooner_after_windows")]
    pub sooner_after_periods: u32,
    /// ...and the factor the interval shrinks by in that step.
    #[serde(default = "default_sooner_factor")]
    pub sooner_interval_factor: f64,
    /// At or above this eager fraction the slow direction is quick: most conversions came back
    /// raw within the eager span, so they bought no memory and compressing less gives back
    /// almost none (the phone trial's sync phase, issue 50). Serialized with a default, like
    /// the fields after it.
    #[serde(default = "default_eager_relax_fraction")]
    pub eager_relax_fraction: f64,
    /// ...then the step waits this many such periods in a row, not `relax_after_periods`...
    #[serde(default = "default_eager_relax_after")]
    pub eager_relax_after_periods: u32,
    /// ...and the interval grows by eager fraction / `eager_goal`, at most this factor.
    #[serde(default = "default_max_eager_relax_factor")]
    pub max_eager_relax_factor: f64,
    /// Bounds the law keeps to, inside the kernel's 0..=100 and 100..=30000.
    pub threshold_min: u32,
    pub threshold_max: u32,
    pub interval_min_ms: u32,
    pub interval_max_ms: u32,
}

fn default_true() -> bool {
    true
}

fn default_sooner_after() -> u32 {
    Config::default().sooner_after_periods
}

fn default_sooner_factor() -> f64 {
    Config::default().sooner_interval_factor
}

fn default_eager_relax_fraction() -> f64 {
    Config::default().eager_relax_fraction
}

fn default_eager_relax_after() -> u32 {
    Config::default().eager_relax_after_periods
}

fn default_max_eager_relax_factor() -> f64 {
    Config::default().max_eager_relax_factor
}

impl Default for Config {
    fn default() -> Self {
        Config {
            psi_goal: 5.0,
            budget_goal: 0.95,
            tight_enter: 1.1,
            tight_exit: 0.8,
            eager_goal: 0.10,
            wasted_goal: 0.25,
            waste_dead_band: 0.2,
            min_conversions_per_s: 1.0,
            max_backoff_factor: 10.0,
            eager_keeps_interval_when_tight: false,
            threshold_gain: 10.0,
            max_threshold_step_up: 10,
            threshold_restart: 12,
            relax_interval_factor: 1.25,
            relax_threshold_step: 1,
            relax_after_periods: 6,
            convert_sooner_when_useful: true,
            sooner_after_periods: 1,
            sooner_interval_factor: 10.0,
            eager_relax_fraction: 0.75,
            eager_relax_after_periods: 2,
            max_eager_relax_factor: 10.0,
            threshold_min: 0,
            threshold_max: 25,
            interval_min_ms: *INTERVAL_RANGE_MS.start(),
            interval_max_ms: *INTERVAL_RANGE_MS.end(),
        }
    }
}

impl Config {
    /// Refuse constants that would break the law's promises (bounds, dead band, hysteresis).
    pub fn validate(&self) -> Result<()> {
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                bail!("law config: {name} must be a positive number, not {value}")
            }
        };
        positive("psi_goal", self.psi_goal)?;
        positive("budget_goal", self.budget_goal)?;
        positive("eager_goal", self.eager_goal)?;
        positive("wasted_goal", self.wasted_goal)?;
        positive("threshold_gain", self.threshold_gain)?;
        if !(self.tight_exit < 1.0 && self.tight_enter > 1.0) {
            bail!(
                "law config: need tight_exit < 1.0 < tight_enter for a dead band around the goal"
            );
        }
        if !(0.0..1.0).contains(&self.waste_dead_band) {
            bail!("law config: waste_dead_band must be in 0..1");
        }
        if !(self.max_backoff_factor > 1.0 && self.relax_interval_factor > 1.0) {
            bail!("law config: max_backoff_factor and relax_interval_factor must exceed 1");
        }
        if !(self.sooner_interval_factor > 1.0 && self.sooner_after_periods >= 1) {
            bail!("law config: need sooner_interval_factor > 1 and sooner_after_periods >= 1");
        }
        if !(self.eager_relax_fraction > self.eager_goal && self.eager_relax_fraction <= 1.0) {
            bail!("law config: need eager_goal < eager_relax_fraction <= 1");
        }
        if !(self.max_eager_relax_factor > 1.0 && self.eager_relax_after_periods >= 1) {
            bail!("law config: need max_eager_relax_factor > 1 and eager_relax_after_periods >= 1");
        }
        self.validate_bounds()
    }

    fn validate_bounds(&self) -> Result<()> {
        let thresholds = self.threshold_min..=self.threshold_max;
        if self.threshold_min > self.threshold_max
            || self.threshold_max > *THRESHOLD_RANGE.end()
            || !thresholds.contains(&self.threshold_restart)
            || self.threshold_restart == 0
        {
            bail!(
                "law config: need threshold_min <= threshold_restart (> 0) <= threshold_max <= 100"
            );
        }
        if self.interval_min_ms > self.interval_max_ms
            || !INTERVAL_RANGE_MS.contains(&self.interval_min_ms)
            || !INTERVAL_RANGE_MS.contains(&self.interval_max_ms)
        {
            bail!("law config: need 100 <= interval_min_ms <= interval_max_ms <= 30000");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid_and_broken_ones_are_refused() {
        Config::default().validate().unwrap();
        let no_band = Config {
            tight_enter: 1.0,
            ..Config::default()
        };
        assert!(no_band.validate().is_err());
        let interval_too_short = Config {
            interval_min_ms: 50,
            ..Config::default()
        };
        assert!(interval_too_short.validate().is_err());
        let threshold_too_high = Config {
            threshold_max: 101,
            ..Config::default()
        };
        assert!(threshold_too_high.validate().is_err());
        let quick_below_the_goal = Config {
            eager_relax_fraction: 0.05,
            ..Config::default()
        };
        assert!(quick_below_the_goal.validate().is_err());
    }
}
