#!/usr/bin/env python3
"""Merge a nodescope Perfetto trace with a trace stamped in BOOTTIME and check where
nodescope's samples land on the BOOTTIME timeline (issue 51).

Usage: check_perfetto_clock.py NODESCOPE_TRACE MERGED_OUT EXPECT...
  EXPECT = "<track name>:<monotonic ns>:<boottime ns>": the sample of that counter track
  written at that CLOCK_MONOTONIC time must land at that BOOTTIME.

The other trace is written here with the perfetto package's TraceProtoBuilder: one instant in
BOOTTIME (a packet with no clock id: a trace's default clock is BOOTTIME). The two files are
concatenated, as Perfetto merges traces, and the merged file is parsed with Perfetto's own
protos. Each nodescope packet must name CLOCK_MONOTONIC; it is converted as Perfetto's clock
tracker does for a clock with snapshots: through the latest snapshot at or before it (the
nearest one when it comes before all). No trace processor runs here (it is fetched from the
internet at first use), so this checks what the trace states, by Perfetto's rules.
"""
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

MONOTONIC = pb.BuiltinClock.Value("BUILTIN_CLOCK_MONOTONIC")
BOOTTIME = pb.BuiltinClock.Value("BUILTIN_CLOCK_BOOTTIME")
OTHER_INSTANT_NS = 7_000_000_000


def other_trace():
    builder = TraceProtoBuilder()
    desc = builder.add_packet()
    desc.trusted_packet_sequence_id = 99
    desc.track_descriptor.uuid = 4242
    desc.track_descriptor.name = "system trace (BOOTTIME)"
    event = builder.add_packet()
    event.trusted_packet_sequence_id = 99
    event.timestamp = OTHER_INSTANT_NS
    event.track_event.type = pb.TrackEvent.TYPE_INSTANT
    event.track_event.track_uuid = 4242
    event.track_event.name = "app start"
    return builder.serialize()


def to_boottime(ts, snapshots):
    before = [s for s in snapshots if s[0] <= ts]
    mono, boot = max(before) if before else min(snapshots)
    return ts - mono + boot


def main():
    nodescope_path, merged_path, *expects = sys.argv[1:]
    with open(nodescope_path, "rb") as f:
        ours = f.read()
    merged = other_trace() + ours
    with open(merged_path, "wb") as f:
        f.write(merged)
    trace = pb.Trace()
    trace.ParseFromString(merged)
    failures = []
    snapshots = []
    for packet in trace.packet:
        if packet.HasField("clock_snapshot"):
            clocks = {c.clock_id: c.timestamp for c in packet.clock_snapshot.clocks}
            if set(clocks) != {MONOTONIC, BOOTTIME}:
                failures.append(f"a snapshot of clocks {sorted(clocks)}")
                continue
            if packet.clock_snapshot.primary_trace_clock != BOOTTIME:
                failures.append("a snapshot whose primary trace clock is not BOOTTIME")
            snapshots.append((clocks[MONOTONIC], clocks[BOOTTIME]))
    if not snapshots:
        failures.append("no clock snapshot")
    names = {}
    landed = {}
    other = None
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            names[packet.track_descriptor.uuid] = packet.track_descriptor.name
        if not packet.HasField("track_event"):
            continue
        if packet.trusted_packet_sequence_id == 99:
            if packet.HasField("timestamp_clock_id"):
                failures.append("the other trace's packet changed clock")
            other = packet.timestamp
            continue
        if packet.timestamp_clock_id != MONOTONIC:
            failures.append(f"a nodescope packet in clock {packet.timestamp_clock_id}")
            continue
        name = names.get(packet.track_event.track_uuid, "?")
        landed[(name, packet.timestamp)] = to_boottime(packet.timestamp, snapshots)
    if other != OTHER_INSTANT_NS:
        failures.append(f"the other trace's instant at {other}")
    for expect in expects:
        name, mono, boot = expect.rsplit(":", 2)
        got = landed.get((name, int(mono)))
        if got != int(boot):
            failures.append(f"{name} at MONOTONIC {mono}: BOOTTIME {got}, expected {boot}")
    print(f"{len(trace.packet)} packets, {len(snapshots)} clock snapshots, "
          f"{len(landed)} nodescope events placed on BOOTTIME")
    for failure in failures:
        print(f"FAIL {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
