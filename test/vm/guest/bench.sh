#!/bin/sh
# nodescope vm-bench, guest side: /init of the bench's initramfs (test/vm/src/bench.rs). The
# same cold replay of the RFC file set four times: with nothing attached, under
# `nodescope stream`, under bpftrace counting node-read submissions by pid, and under both
# at once. With
# kernel.bpf_stats_enabled=1 the kernel times every BPF program; bpftool's JSON before and
# after each replay goes to /results, which leaves as a tar on the disk with serial "results".
. /prelude.sh
. /etc/vm-bench.conf
mark boot
mount_tracing
load_modules
find_disks
# What the kernel times BPF programs with (bpf_stats: sched_clock around each run): a coarse
# clock would make ns per event a sample, not a measurement.
cat /sys/devices/system/clocksource/clocksource0/current_clocksource > $R/clocksource.txt 2>&1
dmesg | grep -i -E 'sched_clock|tsc|clocksource' > $R/clock_dmesg.txt 2>&1
mkfs.f2fs -f -l vmbench /dev/$DEV > $R/mkfs.txt 2>&1 || { fail mkfs.f2fs; finish; }
# As the VM test: no background GC, whose reads have nothing to do with the replays.
mount -t f2fs -o background_gc=off /dev/$DEV /mnt 2>> $R/mount.txt || { fail mount; finish; }
# Which tracepoint nodescope's node-read program takes here: the host checks it is the one
# bpftrace counts ($TRACEPOINT).
nodescope stream --plan > $R/plan.txt 2>&1
mark mounted

# The RFC's file set, as the VM test makes it: 256 dirs x 64 small files.
make_small_files
sync
mark created

echo 1 > /proc/sys/kernel/bpf_stats_enabled || fail "kernel.bpf_stats_enabled"
progs() { bpftool -j prog show > $R/progs_$1.json 2>> $R/bpftool.err; }

# Wait ($4 s at most) until command $2 (pid $1) is ready: $3 is a shell test that says so
# (tested every half second: bpftrace's is a bpftool run).
wait_ready() { wait_for "$1" "$2" "$3" "$4" 5; }
# nodescope attaches through BPF links, which `bpftool perf list` does not show: it says when
# it is ready. bpftrace says "Attaching" before it attaches: its perf event is listed after.
# Under TCG bpftrace takes long to start (it loads LLVM and clang).
stream_ready() { echo "grep -q 'nodescope stream: ready' $R/$1 2>/dev/null"; }
STREAM_READY=$(stream_ready stream.err)
BPFTRACE_READY="bpftool perf list 2>/dev/null | grep -q 'tracepoint  *${TRACEPOINT#*:}\$'"

# One timed cold replay, case $1; bpftool's view of the programs before and after.
replay() {
  progs $1_before
  mark $1_start
  sh /replay-names
  mark $1_done
  progs $1_after
}

replays() {
cold
replay none

cold
nodescope stream --json --window 1 > $R/stream.jsonl 2> $R/stream.err &
SP=$!
wait_ready $SP "nodescope stream" "$STREAM_READY" 60 && {
  replay ours
  kill -INT $SP
}
wait $SP
echo $? > $R/stream.rc

cold
bpftrace -e "tracepoint:$TRACEPOINT { @[pid] = count(); }" > $R/bpftrace.out 2> $R/bpftrace.err &
BP=$!
wait_ready $BP bpftrace "$BPFTRACE_READY" 300 && {
  replay bpftrace
  kill -INT $BP
}
wait $BP
echo $? > $R/bpftrace.rc
# Both at once on the same replay: the two programs run on the same events under the same
# host load, so their ratio does not move with what else the (shared, emulating) host does
# between two replays.
cold
nodescope stream --json --window 1 > $R/stream_both.jsonl 2> $R/stream_both.err &
SP=$!
bpftrace -e "tracepoint:$TRACEPOINT { @[pid] = count(); }" > $R/bpftrace_both.out 2> $R/bpftrace_both.err &
BP=$!
wait_ready $SP "nodescope stream (both)" "$(stream_ready stream_both.err)" 60 &&
  wait_ready $BP "bpftrace (both)" "$BPFTRACE_READY" 300 && replay both
kill -INT $SP $BP
wait $SP
wait $BP
# Both again, bpftrace attached first: a tracepoint runs its programs in the order they were
# attached, and under TCG the first one pays for what the second then finds warm (the emulated
# TLB's refills of the record, the task, the stack); each order gives one of them that edge.
cold
bpftrace -e "tracepoint:$TRACEPOINT { @[pid] = count(); }" > $R/bpftrace_rev.out 2> $R/bpftrace_rev.err &
BP=$!
wait_ready $BP "bpftrace (bpftrace first)" "$BPFTRACE_READY" 300 && {
  nodescope stream --json --window 1 > $R/stream_rev.jsonl 2> $R/stream_rev.err &
  SP=$!
  wait_ready $SP "nodescope stream (bpftrace first)" "$(stream_ready stream_rev.err)" 60 &&
    replay rev
  kill -INT $SP
  wait $SP
}
kill -INT $BP
wait $BP

# The floor: a program that does nothing, on the same tracepoint (bpftrace with an empty
# action). What it costs per event is what every program pays here (the tracepoint's call
# into BPF, bpf_stats' own clock reads) before doing anything. Not fatal: no figure if not.
cold
bpftrace -e "tracepoint:$TRACEPOINT { }" > $R/floor.out 2> $R/floor.err &
BP=$!
n=0
until eval "$BPFTRACE_READY"; do
  kill -0 $BP 2>/dev/null || break
  n=$((n+1)); [ $n -gt 600 ] && break
  sleep 0.5
done
eval "$BPFTRACE_READY" && replay floor
kill -INT $BP
wait $BP
}
# `cargo xtask vm-bench --lookups-only`: the lookup costs alone.
[ "$LOOKUPS_ONLY" = 1 ] || replays
# Node lookups (issue 30; test/vm/src/bench_lookups.rs): one file asked $LOOKUP_CALLS times
# for an xattr it lacks, each call one f2fs_get_node_page of a cached inode page, timed
# ($LOOKUP_RUNS runs) with nothing attached, under nodescope's lookup program as a kprobe and
# as fentry, and under bpftrace's kprobe. A calibration run at the end, with a kprobe_events
# hist trigger counting the lookups the loop makes.
echo lookup > /mnt/lookup-target
sync
# The timed runs with bpf_stats off, as a user's kernel runs (the stats' two clock reads around
# every program run would be a cost of this bench, added to each hook alike); then one more run
# with them on, for the programs' own run time.
lookup_runs() {
  echo 0 > /proc/sys/kernel/bpf_stats_enabled || fail "kernel.bpf_stats_enabled=0"
  i=0
  while [ $i -lt $LOOKUP_RUNS ]; do
    lookuploop /mnt/lookup-target $LOOKUP_CALLS >> $R/lookup_$1.txt || fail "lookuploop ($1)"
    i=$((i+1))
  done
  echo 1 > /proc/sys/kernel/bpf_stats_enabled || fail "kernel.bpf_stats_enabled=1"
  progs lookup_$1_before
  lookuploop /mnt/lookup-target $LOOKUP_CALLS > $R/lookup_$1_stats.txt || fail "lookuploop ($1, stats)"
  progs lookup_$1_after
}
# One bpftrace case, $1, of round $round: its runs with nothing attached, then its runs under
# `bpftrace -e "$4"` once the check $3 says it is attached ($2 names it in a timeout).
bpftrace_case() {
  mark lookups_$1_$round
  lookup_runs none_$1_$round
  bpftrace -e "$4" > $R/lookup_$1_$round.out 2> $R/lookup_$1_$round.err &
  BP=$!
  wait_ready $BP "$2" "$3" 300 && lookup_runs $1_$round
  kill -INT $BP
  wait $BP
}
# Each hook's runs follow runs with nothing attached of their own: under TCG the guest's speed
# drifts over a boot by more than a hook costs, so each hook is measured against its neighbour;
# and the whole sequence is repeated $LOOKUP_ROUNDS times (the host takes the median).
round=1
while [ $round -le $LOOKUP_ROUNDS ]; do
  # `timed`: the lookups timed (issue 51), fentry and fexit, `--lookup-latency`.
  for hook in kprobe auto timed; do
    mark lookups_${hook}_$round
    lookup_runs none_${hook}_$round
    case $hook in
      timed) flags="--lookup-latency --function-hook auto" ;;
      *) flags="--accesses --function-hook $hook" ;;
    esac
    nodescope stream --json --window 1 $flags \
      > $R/lookup_stream_${hook}_$round.jsonl 2> $R/lookup_stream_${hook}_$round.err &
    SP=$!
    wait_ready $SP "nodescope stream --function-hook $hook" \
      "$(stream_ready lookup_stream_${hook}_$round.err)" 60 && lookup_runs ${hook}_$round
    kill -INT $SP
    wait $SP
  done
  bpftrace_case bpftrace "bpftrace (kprobe)" \
    "bpftool perf list 2>/dev/null | grep -q 'kprobe.*$LOOKUP_FUNCTION'" \
    "kprobe:$LOOKUP_FUNCTION { @[tid] = count(); }"
  # bpftrace timing each lookup as a user would write it: the start per thread at the entry,
  # a histogram of the time at the return (a kprobe and a kretprobe), against `timed`.
  bpftrace_case bpftrace_timed "bpftrace (kprobe + kretprobe)" \
    "[ \$(bpftool perf list 2>/dev/null | grep -c 'probe.*$LOOKUP_FUNCTION') -ge 2 ]" \
    "kprobe:$LOOKUP_FUNCTION { @start[tid] = nsecs; }
    kretprobe:$LOOKUP_FUNCTION /@start[tid]/ { @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }"
  # The floor of any timed trampoline hook (issue 51): an fentry and an fexit program that do
  # nothing (bpftrace's kfunc and kretfunc, the module's function named as bpftrace 0.17 wants
  # it), what `timed` pays before its programs do anything.
  bpftrace_case pair_floor "bpftrace (kfunc + kretfunc)" \
    "[ \$(bpftool link list 2>/dev/null | grep -c 'tracing') -ge 2 ]" \
    "kfunc:f2fs:$LOOKUP_FUNCTION { } kretfunc:f2fs:$LOOKUP_FUNCTION { }"
  round=$((round+1))
done
# The calibration last, and its kprobe left in place (see mount_tracing in prelude.sh for what
# removing a hist trigger did under TCG).
echo "p:nsbench_lookup $LOOKUP_FUNCTION" >> $T/kprobe_events &&
  echo 'hist:keys=common_type' > $T/events/kprobes/nsbench_lookup/trigger &&
  lookuploop /mnt/lookup-target $LOOKUP_CALLS > $R/lookup_calibrate.txt &&
  cat $T/events/kprobes/nsbench_lookup/hist > $R/lookup_calibrate.hist ||
  fail "lookup calibration"
umount /mnt || fail umount
finish
