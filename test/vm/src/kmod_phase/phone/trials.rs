//! The trials the guest runs, by name, and the xattr the trials' files carry.

/// The static settings beside off and the RFC's (the on trials) in the controller's grid.
pub(super) const EXTRA_STATIC: [(u32, u32); 1] = [(25, 100)];

pub(super) const XATTR_NAME: &str = "nodescope";

/// The trials' names in the order the guest runs them.
pub(super) fn trial_names(trials: u32) -> Vec<String> {
    let mut names = Vec::new();
    for k in 1..=trials {
        names.push(format!("off{k}"));
        names.push(format!("on{k}"));
    }
    names.extend(EXTRA_STATIC.iter().map(|(t, i)| format!("static_{t}_{i}")));
    names.push("controller".into());
    names
}
