//! What the kernel source sees of each of the RFC's event kinds (issue 49), one of three states:
//! - per event: a tracepoint or function of the patch (the manifest), a footprint, or F2FS's
//!   own node-read tracepoints; attributed to processes;
//! - totals only: the mechanism's own counters (`cache_counters`), exact, never split across
//!   apps;
//! - unavailable, with the reason.
//!
//! Never a silent zero: `probe`, the start line of `stream`/`record`/`daemon` and `top`'s header
//! say which kind is in which state.
use std::fmt::Write as _;

use tracer_common::EventKind;

use super::{cache_counters::CounterFile, f2fs::planner::Plan, manifest::PROBE_KINDS};

/// How node reads would be seen, from the F2FS probe plan that decides what attaches: per
/// event through the chosen variant's attachments, or, without one, why not (a note for
/// `Coverage::new`'s `missing`). Node reads are not the manifest's: they come from F2FS's own
/// tracepoints or the kprobe fallback, so the plan is the only authority on them.
pub(crate) fn node_reads_seen(plan: &Plan) -> Result<(EventKind, String), String> {
    let part = &plan.node_reads;
    match &part.chosen {
        Some(choice) => Ok((EventKind::NodeRead, format!("F2FS {}", choice.targets()))),
        None if part.rejected.is_empty() => {
            Err("node reads: the F2FS probe plan has no variant for them".into())
        }
        None => Err(format!(
            "node reads: no F2FS probe plan variant ({})",
            part.rejected.join("; ")
        )),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum KindState {
    /// Each event seen, by `via`; `counted` when the counters count the kind too (their total
    /// is shown, the events attribute it).
    PerEvent {
        via: String,
        counted: bool,
    },
    /// Events seen one by one, but not all of them (`why`): the counters' totals are shown,
    /// the events attribute the part they saw.
    PartlyPerEvent {
        why: String,
    },
    /// The counters' totals, from `file`.
    TotalsOnly {
        file: String,
    },
    Unavailable {
        why: String,
    },
}

/// A per-event kind held to the counters: its events' count when the counters were first read,
/// and (events, counted) since then as at the previous look.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Held {
    pub events_baseline: u64,
    previous: Option<(u64, u64)>,
}

impl From<u64> for Held {
    fn from(events_baseline: u64) -> Held {
        Held {
            events_baseline,
            previous: None,
        }
    }
}

/// Every kind's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Coverage {
    pub kinds: Vec<(EventKind, KindState)>,
}

impl serde::Serialize for Coverage {
    /// `{"<kind>": {"state": "per_event", ...}, ...}`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(self.kinds.len()))?;
        for (kind, state) in &self.kinds {
            map.serialize_entry(kind.name(), state)?;
        }
        map.end()
    }
}

impl Coverage {
    /// From what attached: `per_event` (kind, how), the counters files, and why a part is
    /// missing (`missing`: footprints' and counters' notes).
    pub(crate) fn new(
        per_event: &[(EventKind, String)],
        counters: &[CounterFile],
        missing: &[String],
    ) -> Coverage {
        let kinds = PROBE_KINDS
            .iter()
            .map(|&kind| {
                let counted_by = counters
                    .iter()
                    .find(|file| file.kinds().contains(&kind))
                    .map(|file| file.path.display().to_string());
                let state = match (per_event.iter().find(|(k, _)| *k == kind), counted_by) {
                    (Some((_, via)), counted) => KindState::PerEvent {
                        via: via.clone(),
                        counted: counted.is_some(),
                    },
                    (None, Some(file)) => KindState::TotalsOnly { file },
                    (None, None) => KindState::Unavailable {
                        why: if missing.is_empty() {
                            "no probe, footprint or counter of the patch tells of it".into()
                        } else {
                            format!(
                                "no probe or footprint of the patch tells of it; {}",
                                missing.join("; ")
                            )
                        },
                    },
                };
                (kind, state)
            })
            .collect();
        Coverage { kinds }
    }

    /// Hold a per-event kind to the counters: `seen` events and `counted` by the counters since
    /// the baseline. Where both stood still since the previous look they must agree: more
    /// events than counted means its probe fires for calls that are not events (a function
    /// called whether or not it acts): the kind becomes totals only (its events are to be
    /// dropped); fewer means its probe misses some (a failure before the decompression): per
    /// event in part. Returns why, when the state changed.
    pub(crate) fn hold(
        &mut self,
        kind: EventKind,
        held: &mut Held,
        seen: u64,
        counted: u64,
    ) -> Option<String> {
        let now = (seen, counted);
        let quiet = held.previous == Some(now);
        held.previous = Some(now);
        if !quiet || seen == counted {
            return None;
        }
        let (_, state) = self.kinds.iter_mut().find(|(k, _)| *k == kind)?;
        let KindState::PerEvent { via, .. } = state.clone() else {
            return None;
        };
        let why = if seen > counted {
            format!(
                "{via} fired {seen} times where the counters counted {counted}: not one event \
                 per call"
            )
        } else {
            format!("{via} saw {seen} of the {counted} the counters counted")
        };
        *state = if seen > counted {
            KindState::TotalsOnly {
                file: format!("the counters ({why})"),
            }
        } else {
            KindState::PartlyPerEvent { why: why.clone() }
        };
        Some(why)
    }

    fn names(&self, test: impl Fn(&KindState) -> bool) -> Vec<&'static str> {
        self.kinds
            .iter()
            .filter(|(_, state)| test(state))
            .map(|(kind, _)| kind.name())
            .collect()
    }

    pub(crate) fn per_event(&self) -> Vec<&'static str> {
        self.names(|s| matches!(s, KindState::PerEvent { .. }))
    }

    /// Kinds whose totals are the counters' alone, or whose events are not all seen.
    pub(crate) fn totals_only(&self) -> Vec<&'static str> {
        self.names(|s| {
            matches!(
                s,
                KindState::TotalsOnly { .. } | KindState::PartlyPerEvent { .. }
            )
        })
    }

    pub(crate) fn unavailable(&self) -> Vec<&'static str> {
        self.names(|s| matches!(s, KindState::Unavailable { .. }))
    }

    /// One line: `RFC kinds: per event 3/11 (...); totals only 8 (...); unavailable 0`.
    pub(crate) fn summary(&self) -> String {
        let list = |names: Vec<&str>| {
            if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join(" "))
            }
        };
        let (per, totals, none) = (self.per_event(), self.totals_only(), self.unavailable());
        format!(
            "RFC kinds: per event {}/{}{}; totals only {}{}; unavailable {}{}",
            per.len(),
            self.kinds.len(),
            list(per.clone()),
            totals.len(),
            list(totals.clone()),
            none.len(),
            list(none.clone()),
        )
    }

    /// The counts alone, short enough for `top`'s header: `RFC kinds: per event 3/11, totals
    /// only 8, unavailable 0`.
    pub(crate) fn short(&self) -> String {
        format!(
            "RFC kinds: per event {}/{}, totals only {}, unavailable {}",
            self.per_event().len(),
            self.kinds.len(),
            self.totals_only().len(),
            self.unavailable().len()
        )
    }

    /// One line per kind, for `nodescope probe` and the start of `stream`.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        for (kind, state) in &self.kinds {
            let (label, detail) = match state {
                KindState::PerEvent { via, counted } => (
                    "per event",
                    if *counted {
                        format!("{via}; its total from the counters")
                    } else {
                        via.clone()
                    },
                ),
                KindState::PartlyPerEvent { why } => (
                    "totals only",
                    format!("from the counters; per event in part: {why}"),
                ),
                KindState::TotalsOnly { file } => ("totals only", format!("counters in {file}")),
                KindState::Unavailable { why } => ("unavailable", why.clone()),
            };
            let _ = writeln!(out, "  {:<14} {label:<12} {detail}", kind.name());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_in_one_state_and_none_is_silent() {
        let per_event = [
            (EventKind::NodeRead, "F2FS tracepoints".to_string()),
            (EventKind::Restore, "footprint".to_string()),
        ];
        let coverage = Coverage::new(&per_event, &[], &["no counters file".into()]);
        assert_eq!(coverage.per_event(), ["node_read", "restore"]);
        assert!(coverage.totals_only().is_empty());
        assert_eq!(coverage.unavailable().len(), 9);
        assert_eq!(
            coverage.short(),
            "RFC kinds: per event 2/11, totals only 0, unavailable 9"
        );
        let summary = coverage.summary();
        assert!(summary.starts_with("RFC kinds: per event 2/11 (node_read restore); totals only 0; unavailable 9 (insert convert"), "{summary}");
        assert!(coverage.table().contains("no counters file"));
    }

    #[test]
    fn a_kind_is_held_to_the_counters_only_where_both_stand_still() {
        let per_event = [
            (EventKind::Insert, "f2fs_x_attach (fentry)".to_string()),
            (EventKind::RestoreFail, "footprint".to_string()),
            (EventKind::Restore, "footprint".to_string()),
        ];
        let mut coverage = Coverage::new(&per_event, &[], &[]);
        let mut held = Held::from(0);
        // Moving, or in flight: no verdict.
        assert_eq!(coverage.hold(EventKind::Insert, &mut held, 10, 8), None);
        assert_eq!(coverage.hold(EventKind::Insert, &mut held, 12, 12), None);
        assert_eq!(coverage.hold(EventKind::Insert, &mut held, 12, 12), None);
        // Standing still and more events than counted: totals only.
        assert_eq!(coverage.hold(EventKind::Insert, &mut held, 20, 15), None);
        let why = coverage.hold(EventKind::Insert, &mut held, 20, 15).unwrap();
        assert!(
            why.contains("fired 20 times where the counters counted 15"),
            "{why}"
        );
        let mut held = Held::from(0);
        coverage.hold(EventKind::RestoreFail, &mut held, 3, 5);
        let why = coverage
            .hold(EventKind::RestoreFail, &mut held, 3, 5)
            .unwrap();
        assert!(why.contains("saw 3 of the 5"), "{why}");
        assert_eq!(coverage.per_event(), ["restore"]);
        assert_eq!(coverage.totals_only(), ["insert", "restore_fail"]);
    }
}
