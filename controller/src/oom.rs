//! The controller's own OOM score. On a phone it is busiest when memory is tight, which is when
//! the kernel's OOM killer and lmkd pick victims; killed, it leaves the knobs tuned (the state
//! file then lets the next run put them back, but not before that run). So, as root, it lowers
//! its score the way lmkd and systemd-oomd do for themselves.
use std::fs;

use anyhow::{bail, Context as _, Result};

const PATH: &str = "/proc/self/oom_score_adj";

/// Low enough that the OOM killer takes nearly anything else first; not -1000 (never), so a
/// controller that itself ran away with memory can still be stopped by it.
pub const DEFAULT_OOM_SCORE_ADJ: i32 = -900;

/// Set our oom_score_adj; returns the previous value. Lowering it needs CAP_SYS_RESOURCE.
pub fn set_oom_score_adj(value: i32) -> Result<i32> {
    if !(-1000..=1000).contains(&value) {
        bail!("--oom-score-adj {value}: must be in -1000..=1000");
    }
    let previous: i32 = fs::read_to_string(PATH)
        .with_context(|| format!("reading {PATH}"))?
        .trim()
        .parse()
        .with_context(|| format!("{PATH} is not a number"))?;
    fs::write(PATH, format!("{value}\n")).with_context(|| format!("writing {value} to {PATH}"))?;
    Ok(previous)
}
