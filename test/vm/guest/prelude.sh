# nodescope's guest prelude: every /init (guest.sh, kmod.sh, bench.sh, variants.sh) sources it
# first as /prelude.sh (test/vm/src/initramfs.rs puts it in every initramfs). Mounts, the
# marks and failures the host reads back, the end that hands /results to the host, module
# loading, debugfs and tracefs, the two disks, waiting for a process to be ready, the RFC's
# file set, and the stream phases' snapshots, start and stop (a script may define its own snap
# and cold after sourcing this; kmod.sh does).
export PATH=/bin
R=/results
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mark() { read up idle < /proc/uptime; echo "@@ $up $*"; echo "$up $*" >> $R/marks.txt; }
fail() { echo "@@FAIL $*"; echo "$*" >> $R/guest_errors.txt; }
finish() {
  mark finish
  tar -cf /dev/$RES -C $R . && sync
  poweroff -f
}
# Every module of /lib/modules/load-order but the one named $1 (if any), in order.
load_modules() {
  for m in $(cat /lib/modules/load-order); do
    [ "$m" = "$1" ] && continue
    insmod /lib/modules/$m 2>>$R/insmod.txt || echo "insmod $m failed" >> $R/insmod.txt
  done
}
# debugfs (none where ANDROID=1: Android mounts none, and the CP count comes from sysfs) and
# tracefs, at T.
mount_tracing() {
  [ "$ANDROID" = 1 ] || { mkdir -p /sys/kernel/debug; mount -t debugfs debugfs /sys/kernel/debug; }
  hold_static_keys
}
# Static keys held on for the whole boot: under TCG, patching a static branch while the other
# vCPU runs it has left a stale int3 (Debian's 6.12 panicked in ttwu_do_activate in two boots
# on 2026-12-04, a third hung there; `Oops: int3` in __schedule as a kmod phase's recording
# stopped, 2026-12-06). One trace event on (module loads: rare) starts tracing's recording of
# task names, on a quiet system, and it never stops: the sched_switch and sched_wakeup tracepoints' keys stay on, which the phases'
# hist triggers and nodescope's timed lookups (a raw tracepoint on sched_switch) would
# otherwise turn on and off. The shrinker tracepoint's own event (reclaim's calls: rare) keeps
# its key on while `record --accesses` attaches to it and detaches. tracefs at T.
hold_static_keys() {
  T=/sys/kernel/tracing
  [ -e $T/trace ] || { mkdir -p $T; mount -t tracefs tracefs $T; }
  for event in module/module_load vmscan/mm_shrink_slab_start; do
    echo 1 > $T/events/$event/enable 2>/dev/null ||
      echo "@@ note: events/$event cannot be enabled"
  done
}
# lookup_functions PLAN: the node lookup functions a `stream --plan --accesses` PLAN file says
# nodescope hooks (its `node_access` line: one on 6.x, three from 6.15, which looks inodes and
# xattr nodes up apart), one per line.
lookup_functions() { sed -n 's/^node_access  *//p' $1 | tr '+' '\n' | awk 'NF { print $2 }'; }
# probe_calls NAME KEYS FETCH FUNCTION...: a kprobe_events event NAME<i> on each function, FETCH
# its fetch arguments (or empty), each counted by a hist trigger keyed on KEYS. tracefs at T.
probe_calls() {
  pc_name=$1; pc_keys=$2; pc_fetch=$3; shift 3
  pc_i=0
  for pc_fn in "$@"; do
    echo "p:$pc_name$pc_i $pc_fn $pc_fetch" >> $T/kprobe_events &&
      echo "hist:keys=$pc_keys" > $T/events/kprobes/$pc_name$pc_i/trigger || return 1
    pc_i=$((pc_i+1))
  done
  [ $pc_i -gt 0 ]
}
# probe_hists NAME: every NAME<i> event's hist, one after another (the host sums them).
probe_hists() { for ph in $T/events/kprobes/$1[0-9]*/hist; do cat $ph; done; }
# probe_clear NAME KEYS: every NAME<i> hist emptied.
probe_clear() {
  for pt in $T/events/kprobes/$1[0-9]*/trigger; do echo "hist:keys=$2:clear" >> $pt; done
}
# probe_remove NAME KEYS: every NAME<i> event and its hist trigger removed.
probe_remove() {
  for pd in $T/events/kprobes/$1[0-9]*; do
    echo "!hist:keys=$2" > $pd/trigger
    echo "-:${pd##*/}" >> $T/kprobe_events
  done
}
# RES: the disk with serial "results" (without it the host can learn nothing: power off);
# DEV: the one with serial "f2fs", S its sysfs directory.
find_disks() {
  DEV=; RES=
  for b in /sys/block/*; do
    case "$(cat $b/serial 2>/dev/null)" in results) RES=${b##*/};; f2fs) DEV=${b##*/};; esac
  done
  [ -n "$RES" ] || { echo "@@FAIL no results disk"; poweroff -f; }
  [ -n "$DEV" ] || { fail "no test disk"; finish; }
  S=/sys/fs/f2fs/$DEV
  uname -r > $R/uname.txt
}
# wait_for PID WHAT TEST [SECONDS [TENTHS]]: wait until the shell test TEST holds, checking
# every TENTHS tenths of a second (1), SECONDS (60) at most, while process PID (WHAT) runs.
# Fails (and returns 1) when it exits first or the time runs out.
wait_for() {
  wn=0
  until eval "$3"; do
    kill -0 $1 2>/dev/null || { fail "$2 exited early"; return 1; }
    wn=$((wn + ${5:-1})); [ $wn -gt $((${4:-60} * 10)) ] && { fail "$2 not ready after ${4:-60} s"; return 1; }
    sleep $((${5:-1} / 10)).$((${5:-1} % 10))
  done
}
# The RFC's small files under /mnt/t: $NDIRS dirs x $NFILES files.
make_small_files() {
  mkdir /mnt/t
  i=0
  while [ $i -lt $NDIRS ]; do
    mkdir /mnt/t/d-$i
    j=0
    while [ $j -lt $NFILES ]; do echo "nodescope $i/$j" > /mnt/t/d-$i/f-$j; j=$((j+1)); done
    i=$((i+1))
  done
}
# The RFC's whole file set: the small files, 32 zero-filled shaped files, a sentinel.
make_file_set() {
  make_small_files
  mkdir /mnt/shaped
  for n in 1 32 80 128 192 256 384 512; do
    for k in 0 1 2 3; do dd if=/dev/zero of=/mnt/shaped/b-$n-$k bs=4096 count=$n 2>/dev/null; done
  done
  echo "nodescope vm-test sentinel" > /mnt/sentinel
}
# The stream phases (guest.sh, variants.sh): snap NAME copies iostat and the CP count ($DEV,
# $S = /sys/fs/f2fs/$DEV; debugfs status, or sysfs's count where ANDROID=1) for check.rs.
snap() {
  cp /proc/fs/f2fs/$DEV/iostat_info $R/iostat_$1.txt
  if [ "$ANDROID" = 1 ]; then cat $S/cp_foreground_calls > $R/cp_$1.txt
  else cp /sys/kernel/debug/f2fs/status $R/status_$1.txt; fi
}

# Start a stream for phase $1 (more arguments go to nodescope) and wait until it counts.
stream_start() {
  PH=$1; shift
  nodescope stream --json --window 1 "$@" > $R/stream_$PH.jsonl 2> $R/stream_$PH.err &
  SP=$!
  wait_for $SP "stream $PH" "grep -q 'nodescope stream: ready' $R/stream_$PH.err 2>/dev/null" ||
    return 1
  snap ${PH}_before
  mark ${PH}_start
}

stream_stop() {
  snap ${PH}_after
  kill -INT $SP
  wait $SP
  echo $? > $R/stream_$PH.rc
  mark ${PH}_done
}

cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
