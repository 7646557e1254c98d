#!/usr/bin/env python3
"""Check a `nodescope export --perfetto` trace with Perfetto's own proto classes.

Usage: check_perfetto.py TRACE REPORT_JSON

Parses TRACE with the PyPI `perfetto` package's perfetto_trace_pb2 (protobuf classes only, no
trace processor) and checks that:
- it is one packet sequence, the first packet clearing incremental state;
- every track an event uses has a TrackDescriptor, and every parent uuid too;
- timestamps never go backwards within the sequence;
- the process tracks and `other processes` sum to the apps' node reads;
- per app, node reads (demand + readahead), restores, timed lookups (`node lookups`) and their
  wait (`lookup wait`, ns, a UNIT_TIME_NS track) summed over the counter tracks equal
  `nodescope report --json`'s per-app totals exactly, and the cache-wide tracks its totals.
Exits 1 with every failure listed, 0 with a one-line summary.
"""
import json
import sys
from collections import defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

APPS_TRACK = "nodescope apps"
CACHE_TRACK = "nodescope node cache"
READ_TRACKS = ("node reads demand", "node reads readahead")


def load(trace_path):
    trace = pb.Trace()
    with open(trace_path, "rb") as f:
        trace.ParseFromString(f.read())
    return trace


def check_sequence(trace, failures):
    sequences = {p.trusted_packet_sequence_id for p in trace.packet}
    if len(sequences) != 1:
        failures.append(f"expected one packet sequence, found {sorted(sequences)}")
    first = trace.packet[0]
    if first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED == 0:
        failures.append("the first packet does not clear incremental state")
    last_ts = 0
    for index, packet in enumerate(trace.packet):
        if packet.HasField("timestamp"):
            if packet.timestamp < last_ts:
                failures.append(
                    f"packet {index}: timestamp {packet.timestamp} < {last_ts}")
            last_ts = packet.timestamp


def descriptors(trace, failures):
    tracks = {}
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.uuid in tracks:
                failures.append(f"track {d.uuid} described twice")
            tracks[d.uuid] = d
    for d in tracks.values():
        if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
            failures.append(f"track {d.uuid} ({d.name}): parent {d.parent_uuid} undescribed")
    return tracks


def counter_sums(trace, tracks, failures):
    """Sum of counter values per track uuid; instants only on non-counter tracks."""
    sums = defaultdict(int)
    for packet in trace.packet:
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        d = tracks.get(event.track_uuid)
        if d is None:
            failures.append(f"event on undescribed track {event.track_uuid}")
            continue
        if event.type == pb.TrackEvent.TYPE_COUNTER:
            if not d.HasField("counter"):
                failures.append(f"counter value on non-counter track {d.name}")
            sums[event.track_uuid] += event.counter_value
        elif d.HasField("counter"):
            failures.append(f"non-counter event on counter track {d.name}")
    return sums


def children(tracks, parent):
    return [d for d in tracks.values() if d.HasField("parent_uuid") and d.parent_uuid == parent]


def track_named(tracks, name):
    found = [d for d in tracks.values() if d.name == name and not d.HasField("parent_uuid")]
    return found[0] if len(found) == 1 else None


def per_app(tracks, sums, failures):
    """{"kind name": {"reads": n, "restores": n, "lookups": n, "wait_ns": n}} from the apps
    tracks."""
    apps = {}
    root = track_named(tracks, APPS_TRACK)
    if root is None:
        return apps
    for app in children(tracks, root.uuid):
        totals = {"reads": 0, "restores": 0, "lookups": 0, "wait_ns": 0}
        for counter in children(tracks, app.uuid):
            if counter.name in READ_TRACKS:
                totals["reads"] += sums[counter.uuid]
            elif counter.name == "restores":
                totals["restores"] += sums[counter.uuid]
            elif counter.name == "node lookups":
                totals["lookups"] += sums[counter.uuid]
            elif counter.name == "lookup wait":
                if counter.counter.unit != pb.CounterDescriptor.UNIT_TIME_NS:
                    failures.append(f"{app.name}/lookup wait: unit {counter.counter.unit}")
                totals["wait_ns"] += sums[counter.uuid]
        apps[app.name] = totals
    return apps


def check_apps(report, apps, failures):
    expected = {}
    for row in report["apps"]:
        total = row["total"]
        outcomes = total.get("retrievals", {}).get("by_outcome", [])
        expected[f'{row["app"]["kind"]} {row["app"]["name"]}'] = {
            "reads": total["node_reads_demand"] + total["node_reads_readahead"],
            "restores": total["restores"],
            "lookups": sum(h["count"] for h in outcomes),
            "wait_ns": sum(h["total_ns"] for h in outcomes),
        }
    zero = {"reads": 0, "restores": 0, "lookups": 0, "wait_ns": 0}
    for name in sorted(set(expected) | set(apps)):
        want, got = expected.get(name, zero), apps.get(name, zero)
        if want != got:
            failures.append(f"{name}: report {want}, trace {got}")
    return len(expected)


def check_totals(report, tracks, sums, failures):
    root = track_named(tracks, CACHE_TRACK)
    if root is None:
        failures.append(f"no {CACHE_TRACK} track")
        return
    by_name = {d.name: sums[d.uuid] for d in children(tracks, root.uuid)}
    totals = report["totals"]
    for track, key in [("node reads demand", "node_reads_demand"),
                       ("node reads readahead", "node_reads_readahead"),
                       ("restores", "restores"), ("conversions", "conversions")]:
        if by_name.get(track, 0) != totals[key]:
            failures.append(f"{CACHE_TRACK}/{track}: trace {by_name.get(track, 0)}, "
                            f"report {totals[key]}")


OTHER_PROCESSES = "other processes"


def check_processes(tracks, sums, apps, failures):
    """The process tracks and `other processes` (those past the trace's bound) sum to the
    apps: every process's reads are on one of them. Returns their node reads."""
    owners = [d for d in tracks.values() if d.HasField("process")]
    other = track_named(tracks, OTHER_PROCESSES)
    if other is not None:
        owners.append(other)
    reads = sum(sums[c.uuid] for d in owners for c in children(tracks, d.uuid)
                if c.name in READ_TRACKS)
    want = sum(a["reads"] for a in apps.values())
    if reads != want:
        failures.append(f"process tracks: {reads} node reads, apps {want}")
    return reads


def main():
    trace_path, report_path = sys.argv[1], sys.argv[2]
    with open(report_path) as f:
        report = json.load(f)
    trace = load(trace_path)
    failures = []
    if not trace.packet:
        print("no packets")
        return 1
    check_sequence(trace, failures)
    tracks = descriptors(trace, failures)
    sums = counter_sums(trace, tracks, failures)
    apps = per_app(tracks, sums, failures)
    app_count = check_apps(report, apps, failures)
    check_totals(report, tracks, sums, failures)
    processes = sum(1 for d in tracks.values() if d.HasField("process"))
    process_reads = check_processes(tracks, sums, apps, failures)
    if failures:
        print("\n".join(failures))
        return 1
    lookups = sum(a["lookups"] for a in apps.values())
    print(f"ok: {len(trace.packet)} packets, {len(tracks)} tracks, {processes} processes, "
          f"{process_reads} reads on process tracks, {lookups} timed lookups, "
          f"{app_count} apps match the report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
