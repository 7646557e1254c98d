//! Every shape nodescope writes for another program to read, in one place (issue 53): the
//! stream line ([`stream`], docs/STREAM.md), the daemon's messages ([`protocol`],
//! docs/DAEMON.md), the report's JSON ([`report`]), the OpenMetrics families ([`metrics`]) and
//! the Perfetto trace's track names ([`perfetto`]). Each shape is a typed value with one serde
//! form (or, for the exposition and the trace, one table of names) built from the model by one
//! function; the views only render it: `stream`, `record --json`, the daemon's socket and its
//! clients, `report --json`, /metrics and the trace all go through here.
pub mod metrics;
pub mod perfetto;
pub mod protocol;
pub mod report;
mod snapshot;
pub mod stream;

use serde::{Serialize, Serializer};

/// `value`'s JSON with every object's keys in sorted order, at every depth: the order the JSON
/// lines have always had (they were built as `serde_json::Value`s, whose maps sort their keys),
/// kept so that a line is byte for byte what it was. A `serialize_with` for fields that hold a
/// line; [`to_sorted_json`] for a whole one.
pub(crate) fn sorted_keys<T: Serialize, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// `value` as one line of JSON with its keys sorted (see [`sorted_keys`]).
pub fn to_sorted_json<T: Serialize>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(&serde_json::to_value(value)?)
}
