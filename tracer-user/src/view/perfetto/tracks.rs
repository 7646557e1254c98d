//! The trace's tracks: each gets a uuid the first time it is asked for, and one
//! TrackDescriptor (written before any event, so every event's track is described).
use std::collections::HashMap;

use super::{fields, wire::Message};

/// What kind of timeline a track is.
#[derive(Clone, Debug)]
pub(super) enum TrackKind {
    /// Holds instant events, or groups child tracks.
    Plain,
    /// A process (a ProcessDescriptor with its pid and name).
    Process { pid: u32, name: String },
    /// A counter: one value at a time, in this unit.
    Counter(Unit),
}

/// CounterDescriptor.Unit values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    /// CounterDescriptor.UNIT_TIME_NS.
    TimeNs = 1,
    Count = 2,
    Bytes = 3,
}

/// A track as the caller names it: its place in the hierarchy and its kind.
#[derive(Clone, Debug)]
pub(super) struct TrackSpec {
    pub parent: Option<u64>,
    pub name: String,
    pub kind: TrackKind,
}

impl TrackSpec {
    pub(super) fn plain(parent: Option<u64>, name: impl Into<String>) -> TrackSpec {
        TrackSpec {
            parent,
            name: name.into(),
            kind: TrackKind::Plain,
        }
    }

    pub(super) fn counter(parent: u64, name: impl Into<String>, unit: Unit) -> TrackSpec {
        TrackSpec {
            parent: Some(parent),
            name: name.into(),
            kind: TrackKind::Counter(unit),
        }
    }

    pub(super) fn process(pid: u32, name: impl Into<String>) -> TrackSpec {
        let name = name.into();
        TrackSpec {
            parent: None,
            name: name.clone(),
            kind: TrackKind::Process { pid, name },
        }
    }

    /// Two requests for the same track give the same uuid: the same parent, name and pid.
    fn identity(&self) -> (Option<u64>, String, Option<u32>) {
        let pid = match self.kind {
            TrackKind::Process { pid, .. } => Some(pid),
            _ => None,
        };
        (self.parent, self.name.clone(), pid)
    }
}

/// Every track of the trace: the uuid of each, and those not yet described.
#[derive(Default)]
pub(super) struct Tracks {
    uuids: HashMap<(Option<u64>, String, Option<u32>), u64>,
    /// Tracks made since the last [`Self::take_new`], in the order they were first asked for.
    new: Vec<(u64, TrackSpec)>,
}

impl Tracks {
    /// The uuid of the track `spec` names, made on first use.
    pub(super) fn uuid(&mut self, spec: TrackSpec) -> u64 {
        let next = self.uuids.len() as u64 + 1;
        let uuid = *self.uuids.entry(spec.identity()).or_insert(next);
        if uuid == next {
            self.new.push((uuid, spec));
        }
        uuid
    }

    /// The uuid of the track `spec` names, if it was made.
    pub(super) fn known(&self, spec: &TrackSpec) -> Option<u64> {
        self.uuids.get(&spec.identity()).copied()
    }

    /// One TrackDescriptor per track made since the last call, parents before their
    /// children: each is written once, before the first event on it.
    pub(super) fn take_new(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.new)
            .iter()
            .map(|(uuid, spec)| descriptor(*uuid, spec))
            .collect()
    }
}

fn descriptor(uuid: u64, spec: &TrackSpec) -> Message {
    use fields::track_descriptor as td;
    let mut message = Message::new();
    message.uint(td::UUID, uuid);
    if let Some(parent) = spec.parent {
        message.uint(td::PARENT_UUID, parent);
    }
    match &spec.kind {
        TrackKind::Plain => {
            message.string(td::NAME, &spec.name);
        }
        TrackKind::Process { pid, name } => {
            let mut process = Message::new();
            process
                .int(fields::process_descriptor::PID, i64::from(*pid))
                .string(fields::process_descriptor::PROCESS_NAME, name);
            message.message(td::PROCESS, &process);
        }
        TrackKind::Counter(unit) => {
            let mut counter = Message::new();
            counter.uint(fields::counter_descriptor::UNIT, *unit as u64);
            message
                .string(td::NAME, &spec.name)
                .message(td::COUNTER, &counter);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_track_keeps_its_uuid_and_is_described_once() {
        let mut tracks = Tracks::default();
        let root = tracks.uuid(TrackSpec::plain(None, "apps"));
        let reads = tracks.uuid(TrackSpec::counter(root, "node reads", Unit::Count));
        assert_eq!(
            tracks.uuid(TrackSpec::counter(root, "node reads", Unit::Count)),
            reads
        );
        let other = tracks.uuid(TrackSpec::plain(Some(reads), "node reads"));
        assert_ne!(other, reads, "same name under another parent");
        let a = tracks.uuid(TrackSpec::process(10, "app"));
        let b = tracks.uuid(TrackSpec::process(11, "app"));
        assert_ne!(a, b, "two processes of one app");
        assert_eq!(tracks.take_new().len(), 5);
        assert_eq!(tracks.uuid(TrackSpec::process(10, "app")), a);
        assert!(tracks.take_new().is_empty(), "described once");
    }
}
