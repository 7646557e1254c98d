//! The trials the guest runs, by name, and the xattr the trials' files carry.

/// The static settings beside off and the RFC's (the on trials) in the controller's grid.
pub(super) const EXTRA_STATIC: [(u32, u32); 1] = [(25, 100)];

pub(super) const XATTR_NAME: &str = "nodescope";

/// The trials' names in the order the guest runs them. The extra static settings come first:
/// the first trial of a boot is unlike the others (in every run until 2026-12-06, the first
/// trial, then off1, evicted no inode under the pressure where every later one evicted 193),
/// and only the off and on trials are compared pair by pair (the what-if).
pub(super) fn trial_names(trials: u32) -> Vec<String> {
    let mut names: Vec<String> = EXTRA_STATIC
        .iter()
        .map(|(t, i)| format!("static_{t}_{i}"))
        .collect();
    for k in 1..=trials {
        names.push(format!("off{k}"));
        names.push(format!("on{k}"));
    }
    names.push("controller".into());
    names
}
